"""The render-time guard: every value a template prints passes one check for its output language.

Defense in depth behind the schema: the Jinja environment's ``finalize`` hands every ``{{ ... }}``
value to ``guard`` with the language of the template printing it (shell, systemd, HCL, YAML). A value
the quoting of that language produced (``Quoted``) may hold no raw control character; a block of
lines migbake assembled itself (``Block``) only line breaks, and nothing that ends the comment it may be
printed in (a file's header is one: ``-->`` in a Markdown file's HTML comment, a line-continuing backslash
in systemd; ``#`` comments end only at a line break); any other value no control character and none of
the characters that language reads as syntax outside quotes. A value that fails stops rendering with a
RenderError: nothing is written. MIME headers (``mime_header_value``) get the same. ``html_comment`` makes
a header fit an HTML comment.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from migbake.document.patterns import CONTROL, CONTROL_BUT_LF
from migbake.problems import RenderError

__all__ = ["CONTROL", "Block", "Quoted", "guard", "html_comment", "language", "line", "mime_header_value"]

# outside the quoting of its language, a value may not hold these: shell quotes and expansions that
# are not the template's own, systemd's specifiers and escapes, HCL's string and template syntax,
# YAML's quotes and escapes (its indicators are only syntax at the start, which the templates own)
_BARE_SYNTAX = {
    "shell": re.compile(r"['\"`\\]|\$\(|\$\{"),
    "systemd": re.compile(r"[%\\\"']"),
    "hcl": re.compile(r"[\"\\]|\$\{|%\{"),
    "yaml": re.compile(r"[\"'\\]|: | #|^[-?:,\[\]{}#&*!|>%@`]"),
    "markdown": re.compile(r"[`<>\[\]|]"),  # a role README: no code span, HTML, link or table cell to break
}


# what a block of lines (a header, an embedded file) may not hold in each language, beyond a control character:
# what ends an HTML comment or starts another one early (WHATWG HTML, "Comments": the text holds no "--!>",
# "-->" or "<!--"; CommonMark's HTML block 2 ends at the first line holding "-->"), and a backslash ending a
# line, which systemd joins with the next one (systemd.syntax(7)) so that a comment swallows a setting
_BLOCK_SYNTAX = {
    "markdown": re.compile(r"--|<!-"),
    "systemd": re.compile(r"\\$", re.M),
}


class Quoted(str):
    """Text that the quoting function of its language produced (``sh``, ``hcl``, ``yaml``, systemd's)."""

    __slots__ = ()


class Block(str):
    """Several lines that migbake assembled from guarded pieces (a header, a rendered file, a config)."""

    __slots__ = ()


def language(template: str | None) -> str:
    """The output language of a template, from its name (its path mirrors the output's, plus .j2)."""
    name = template or ""
    if name.endswith(".sh.j2"):
        return "shell"
    if name.endswith((".service.j2", ".conf.j2")):
        return "systemd"
    if name.endswith(".hcl.j2"):
        return "hcl"
    if name.endswith(("user-data.j2", ".yaml.j2", ".yml.j2", ".ansible-lint.j2")):
        return "yaml"
    if name.endswith(".ks.j2"):  # a kickstart %post: bash
        return "shell"
    if name.endswith(".md.j2"):
        return "markdown"
    raise RenderError(f"template {name}: no output language known for it (render.guard.language)")


def guard(value: Any, lang: str, template: str | None = None) -> Any:
    """``value`` unchanged when it may be printed by a template of language ``lang``; else RenderError."""
    if isinstance(value, (bool, int)) or value is None:
        return value
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, Block):
        syntax = _BLOCK_SYNTAX.get(lang)
        bad = CONTROL_BUT_LF.search(text)
        bad = bad or (syntax.search(text) if syntax else None)
    elif isinstance(value, (Quoted, Markup)):  # Markup: Jinja's tojson, JSON that YAML reads as it is
        bad = CONTROL.search(text)
    else:
        bad = CONTROL.search(text) or _BARE_SYNTAX[lang].search(text)
    if bad is not None:
        raise RenderError(f"template {template}: the value {text[:80]!r} cannot be printed in {lang} "
                          f"({bad.group()!r} at {bad.start()}): it was not quoted for {lang}; nothing was "
                          "written (a bug: the schema or a rule should have refused it)")
    return value


def html_comment(value: object) -> Block:
    """A block of lines for the inside of an HTML comment (``<!--`` ... ``-->``): each ``--`` becomes ``- -``, so
    no text (a profile's description in a header) can end the comment or start another."""
    return Block(re.sub(r"-(?=-)", "- ", str(value)).replace("<!-", "<! -"))


def line(text: str, what: str) -> str:
    """``text`` for one line of a comment or a header: RenderError when it holds a control character."""
    bad = CONTROL.search(text)
    if bad is not None:
        raise RenderError(f"{what} {text[:80]!r} holds the control character {bad.group()!r}: it would end "
                          "the line it is printed on; nothing was written")
    return text


def mime_header_value(text: str, what: str) -> str:
    """``text`` for a MIME header parameter: no control character, no quote or backslash to escape it."""
    line(text, what)
    if '"' in text or "\\" in text:
        raise RenderError(f"{what} {text!r}: a MIME header value cannot hold a quote or backslash")
    return text
