"""Quoting for each output language: one function per language (shell, systemd, HCL, YAML, comments, Ansible's
variables).

Every value a template prints has been quoted here for its language, or restricted by the schema; the
guard (``guard``) checks the result once more when it is printed.
"""

from __future__ import annotations

import json
import re
import textwrap
from functools import lru_cache
from typing import Any

import yaml

from migbake.document import emitter
from migbake.document.emitter import block_scalar, flow_key, flow_scalar
from migbake.document.patterns import whole
from migbake.document.yamlforms import indented
from migbake.problems import RenderError
from migbake.render.guard import Block, Quoted
from migbake.render.guard import line as guard_line

_SYSTEMD_SAFE = whole(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_word(word: str, *, executable: bool = False) -> str:
    """One word of an Exec= line: specifiers (%) and variables ($) escaped, quoted if needed.

    Control characters become C escapes (a raw newline would end the line). The executable may
    not start with one of systemd's prefix characters (@ - : + !): systemd reads them after
    unquoting, so no quoting can keep them literal, and such a word is refused.
    """
    if "\x00" in word:
        raise RenderError(f"{word!r}: a NUL byte cannot be part of a systemd command line")
    if executable and word.startswith(("@", "-", ":", "+", "!")):
        raise RenderError(f"{word!r}: an executable may not start with one of systemd's prefixes @ - : + !")
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_SAFE.match(escaped):
        return Quoted(escaped)
    inner = escaped.replace("\\", "\\\\").replace('"', '\\"')
    inner = re.sub(r"[\x01-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", inner)
    return Quoted(f'"{inner}"')


def systemd_command(argv: list[str]) -> str:
    """A whole Exec= command line."""
    return Quoted(" ".join(systemd_word(a, executable=(i == 0)) for i, a in enumerate(argv)))


def hcl_string(value: str) -> str:
    """An HCL2 quoted string literal with template sequences escaped."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t").replace("${", "$${").replace("%{", "%%{")
    return Quoted(f'"{out}"')


def yaml_scalar(value: object) -> str:
    """A YAML flow scalar, from the one YAML emitter (``document.emitter.flow_scalar``: JSON, strings quoted)."""
    return Quoted(flow_scalar(value))


def yaml_text(text: str, indent: int) -> str:
    """A text as a YAML value after ``key:``, from the one YAML emitter (``document.emitter.block_scalar``): a
    literal block indented by ``indent`` where every character may stand in one, else a quoted scalar."""
    return Block(block_scalar(text, indent))


def yaml_flow_list(argv: list[str]) -> str:
    """A YAML flow sequence of strings, for cloud-init's bootcmd/runcmd argv form."""
    return Quoted("[" + ", ".join(yaml_scalar(a) for a in argv) + "]")


def sh_quote(value: object) -> str:
    """POSIX shell quoting, always in single quotes (so ``a-b`` never reads as arithmetic)."""
    text = str(value)
    if "\x00" in text:
        raise RenderError(f"{text!r}: a NUL byte cannot be part of a shell word")
    return Quoted("'" + text.replace("'", "'\\''") + "'")


def comment_text(value: object) -> str:
    """Text for the rest of a comment line, in any language: refused when it holds a control character."""
    return Quoted(guard_line("" if value is None else str(value), "the comment text"))


def indent(text: str, spaces: int) -> Block:
    """A rendered file's text as a block indented by ``spaces`` (empty lines stay empty; final line feeds dropped)."""
    return Block(indented(text.rstrip("\n"), spaces))


def and_list(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (empty for no names)."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + (" and " + names[-1] if names else "")


def yaml_document(data: object) -> Block:
    """A whole YAML document from plain data (dicts in their order, lists, str, int, bool), by the one YAML
    emitter (``document.emitter``), multi-line strings as literal blocks (``|``) where YAML allows one.

    A string any reader would type (PyYAML's YAML 1.1, YAML 1.2, go-yaml v2/v3: ``on``, ``y``, ``0644``,
    ``1e3``, ``0o17``) is quoted; nothing is pasted into YAML text.
    """
    return Block(emitter.dump(data, literal=True))


def json_document(data: object) -> Block:
    """A whole JSON document (an Ignition config): ``json.dumps(data, indent=2, ensure_ascii=False)``'s text
    and a final line break."""
    return Block(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TOML_SPECIAL = re.compile('["\\\\\x00-\x1f\x7f]')


def toml_string(value: str) -> str:
    """A TOML basic string (``"..."``), for a value or a quoted key: quotes, backslashes and controls escaped.

    TOML v1.0.0 (toml.io/en/v1.0.0#string): a basic string may hold any Unicode character except ``"``,
    ``\\`` and the control characters U+0000-U+001F and U+007F, which are escaped.
    """
    def escape(m: re.Match[str]) -> str:
        return _TOML_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04X}")

    return Quoted('"' + _TOML_SPECIAL.sub(escape, value) + '"')


# --- YAML for ansible-lint's production profile: block lists, and long lines wrapped -------------------
# ansible-lint's yamllint line-length (ansible/ansible-lint:src/ansiblelint/data/.yamllint@v26.10.1: max 160;
# allow-non-breakable-words, yamllint's default, lets a line of one word after "- " or "# " be longer)
MAX_LINE = 160
_WRAP_AT = 150  # what wrap_long aims for, leaving room for a word that ends a line


def yaml_block(value: object, indent: int) -> Block:
    """``value`` (lists, mappings with string keys, strings, numbers, booleans) as block-style YAML at ``indent``
    spaces: one list item a line, a mapping value that would make its key's line too long on the next line,
    and a list inside a list after a bare ``-``. Strings are JSON strings (YAML 1.2 double-quoted, non-ASCII
    escaped); a key is plain only where every reader takes it as that string (``flow_key``); the values here
    match the schema's patterns, so each line holds no space but after ``-`` or ``key:``, and one too long
    for MAX_LINE is a single word."""
    return Block("\n".join(_block_lines(value, indent)))


def _block_lines(value: object, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        out = []
        for name, item in value.items():
            key = flow_key(str(name))
            if isinstance(item, (list, dict)) and item:
                out += [f"{pad}{key}:", *_block_lines(item, indent + 2)]
            elif len(pad) + len(key) + 2 + len(_flow(item)) > MAX_LINE:
                out += [f"{pad}{key}:", f"{pad}  {_flow(item)}"]
            else:
                out.append(f"{pad}{key}: {_flow(item)}")
        return out
    if isinstance(value, list) and value:
        out = []
        for item in value:
            if isinstance(item, list) and item:
                out += [f"{pad}-", *_block_lines(item, indent + 2)]
            elif isinstance(item, dict) and item:
                inner = _block_lines(item, indent + 2)
                out += [f"{pad}- {inner[0][indent + 2:]}", *inner[1:]]
            else:
                out.append(f"{pad}- {_flow(item)}")
        return out
    return [pad + _flow(value)]


def _flow(value: object) -> str:
    """A scalar (or an empty list or mapping) as JSON, which YAML reads as it is, non-ASCII escaped."""
    return flow_scalar(value, ascii_only=True)


@lru_cache(maxsize=64)  # a file's header, the same in every template of a render
def wrap_long(text: str) -> Block:
    """Each line longer than MAX_LINE wrapped at spaces, keeping its indentation and its ``#`` (a comment) on
    every piece; a word is never broken. For comments and folded (``>-``) text only, where a line break
    between two words means what the space meant. Shorter lines are kept as they are."""
    text = str(text)
    rows = text.split("\n")
    if max(map(len, rows)) <= MAX_LINE:  # most texts: nothing to wrap
        return Block(text)
    out = []
    for row in rows:
        head = re.match(r" *(?:#+ ?)?", row)
        prefix = head.group() if head else ""
        if len(row) <= MAX_LINE or not row[len(prefix):].strip():
            out.append(row)
            continue
        width = max(_WRAP_AT - len(prefix), 40)
        out += [prefix + piece for piece in textwrap.wrap(row[len(prefix):], width, break_long_words=False,
                                                          break_on_hyphens=False)]
    return Block("\n".join(out))


class _VarsDumper(yaml.SafeDumper):
    """Ansible variables: lists indented below their key (yamllint's indentation rule), and a value too long for
    its line on the next line, where it is one word (yamllint's line-length takes that: allow-non-breakable-words)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def process_scalar(self) -> None:
        assert isinstance(self.event, yaml.ScalarEvent)
        if not self.simple_key_context and self.column + len(self.event.value) + 3 > self.best_width:
            self.write_line_break()
            self.write_indent()
        super().process_scalar()


# Ansible templates a string that holds one of Jinja's start strings; tagged !unsafe, it never does. Only those
# are tagged: Ansible reads a tagged scalar by its plain form's type, so !unsafe '0644' would be the int 420.
_JINJA_STARTS = ("{{", "{%", "{#")
_VarsDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar("!unsafe", text)
                            if any(s in text for s in _JINJA_STARTS) else dumper.represent_str(text))


def vars_yaml(data: dict[str, Any]) -> str:
    """``data`` (Ansible variables) as YAML, each line within ansible-lint's limit; a string Ansible would
    template is ``!unsafe``."""
    return yaml.dump(data, Dumper=_VarsDumper, sort_keys=False, allow_unicode=True, width=_WRAP_AT)
