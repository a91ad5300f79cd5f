"""Quoting for each output language: one function per language (shell, systemd, HCL, YAML, comments, Ansible's
variables).

Every value a template prints has been quoted here for its language, or restricted by the schema; the
guard (``guard``) checks the result once more when it is printed.
"""

from __future__ import annotations

import base64
import re
import textwrap
from typing import Any

import yaml

from migbake.document import emitter
from migbake.document.emitter import block_scalar, flow_key, flow_scalar
from migbake.document.patterns import CONTROL, whole
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
    """A rendered file's text as a block indented by ``spaces`` (empty lines stay empty)."""
    pad = " " * spaces
    return Block("\n".join([(pad + line) if line else "" for line in text.rstrip("\n").split("\n")]))


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


def wrap_long(text: str) -> Block:
    """Each line longer than MAX_LINE wrapped at spaces, keeping its indentation and its ``#`` (a comment) on
    every piece; a word is never broken. For comments and folded (``>-``) text only, where a line break
    between two words means what the space meant. Shorter lines are kept as they are."""
    out = []
    for row in str(text).split("\n"):
        head = re.match(r" *(?:#+ ?)?", row)
        prefix = head.group() if head else ""
        if len(row) <= MAX_LINE or not row[len(prefix):].strip():
            out.append(row)
            continue
        width = max(_WRAP_AT - len(prefix), 40)
        out += [prefix + piece for piece in textwrap.wrap(row[len(prefix):], width, break_long_words=False,
                                                          break_on_hyphens=False)]
    return Block("\n".join(out))


# --- Ansible's variables (the role's group data): every string !unsafe ------------------------------------

JINJA_DELIMITERS = ("{{", "{%", "{#")  # Jinja's default start strings (Ansible's too)
WIDTH = 150  # ansible-lint's yamllint allows lines of 160 characters; a literal block is indented by 6
_LITERAL_WIDTH = WIDTH - 10


def payload(text: str) -> dict[str, str]:
    """A file's text as group data: ``content``, or ``content_base64`` when it holds Jinja's delimiters.

    Ansible never templates an ``!unsafe`` string, but ansible-lint's jinja rule still parses one
    (ansible/ansible-lint#4647, open in 26.10): base64 keeps such a file (a shell script's ``${#x}``, a
    go-template, a description with ``{{``) out of its sight, and from Ansible's templating twice over.
    """
    if any(d in text for d in JINJA_DELIMITERS):
        return {"content_base64": base64.b64encode(text.encode("utf-8")).decode("ascii")}
    return {"content": text}


class _Unsafe(str):
    """A string of a group's data: written with Ansible's ``!unsafe`` tag."""

    __slots__ = ()


# what a double-quoted scalar may hold as it is (printable, and not one of YAML's escapes or line breaks)
_AS_IS_CLASS = r"[\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]"
_AS_IS = whole(rf"^{_AS_IS_CLASS}$")
# a text PyYAML's analysis allows as a literal block (emitter.analyze_scalar: every character printable or
# a newline, no space right before a line break, none at the end)
_BLOCK_AS_IS = re.compile(r"(?:[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffe]"
                          r"|(?<![ ])\n)*(?<![ ])")
# the text in pieces: a run of characters written as they are, or one character that needs an escape
_PIECES = re.compile(rf"({_AS_IS_CLASS}+)|(.)", re.DOTALL)
_ESCAPES = {"\x00": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
            "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P"}


def _escaped(ch: str) -> str:
    """One character as a YAML double-quoted scalar writes it."""
    if _AS_IS.match(ch):
        return ch
    if ch in _ESCAPES:
        return "\\" + _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


class _VarsDumper(emitter.SafeDumper):
    """The one emitter's pure-Python safe dumper (``document.emitter``), sequences indented under their key
    (yamllint's and ansible-lint's style), and double-quoted scalars folded so that no line is longer than
    the width (PyYAML folds only at a space or after an escape, and only once past the width)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def analyze_scalar(self, scalar: str) -> yaml.emitter.ScalarAnalysis:
        """PyYAML's analysis, which walks the text a character at a time, skipped for a long value whose
        style is already decided: double-quoted (the style PyYAML then takes whatever the analysis says),
        or a literal block whose text PyYAML's own rules allow as one (printable, no space before a line
        break, no trailing space; else its analysis decides, as before). Keys and short values take the
        walk."""
        event = self.event
        if (len(scalar) > 128 and isinstance(event, yaml.ScalarEvent) and event.value is scalar
                and not self.flow_level and not self.simple_key_context
                and (event.style == '"' or (event.style == "|" and _BLOCK_AS_IS.fullmatch(scalar)))):
            return yaml.emitter.ScalarAnalysis(
                scalar=scalar, empty=False, multiline=True, allow_flow_plain=False, allow_block_plain=False,
                allow_single_quoted=False, allow_double_quoted=True, allow_block=True)
        return super().analyze_scalar(scalar)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """``text`` in double quotes, broken by escaped line breaks (which add nothing to the value) where a
        line would pass the width; a space that starts a line is escaped (``\\ ``), as a line's leading
        white space is not part of the value."""
        self.write_indicator('"', True)
        write, first = self.stream.write, True
        for run, ch in _PIECES.findall(text):
            if ch:  # one escaped character
                piece = _escaped(ch)
                if split and not first and self.column + len(piece) + 1 > self.best_width:
                    self._fold()
                write(piece)
                self.column += len(piece)
                first = False
                continue
            # a run of characters as they are: as many as fit before the fold, one at a time after it
            # (the same bytes as writing each character alone: it folds once column + 2 > best_width)
            at = 0
            while at < len(run):
                fit = len(run) - at if not split else max(self.best_width - 1 - self.column, 1 if first else 0)
                if fit:
                    chunk = run[at:at + fit]
                    write(chunk)
                    self.column += len(chunk)
                    at += len(chunk)
                    first = False
                    continue
                self._fold()
                piece = "\\ " if run[at] == " " else run[at]
                write(piece)
                self.column += len(piece)
                at += 1
        self.write_indicator('"', False)

    def _fold(self) -> None:
        """End the line with an escaped line break (it adds nothing to the value) and indent the next."""
        self.stream.write("\\")
        self.write_indent()
        self.whitespace = self.indention = False


def _represent_unsafe(dumper: yaml.SafeDumper, data: _Unsafe) -> yaml.ScalarNode:
    """A file as a literal block when every line fits and holds no control character, else double-quoted
    (escapes, long lines folded); a one-line string double-quoted."""
    text = str(data)
    lines = text.split("\n")
    literal = len(lines) > 1 and not CONTROL.search(text.replace("\n", "")) and max(map(len, lines)) <= _LITERAL_WIDTH
    return dumper.represent_scalar("!unsafe", text, style="|" if literal else '"')


_VarsDumper.add_representer(_Unsafe, _represent_unsafe)


def _tagged(value: Any) -> Any:
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items()}
    return value


def vars_yaml(data: dict[str, Any]) -> str:
    """Ansible variables as YAML: every string ``!unsafe``, keys in order, lines of at most ``WIDTH``."""
    return str(yaml.dump(_tagged(data), Dumper=_VarsDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=WIDTH))
