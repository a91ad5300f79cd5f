"""Ansible's variables (a role's group data) as YAML: every string ``!unsafe``, keys in order, no line longer
than ``WIDTH``.

``vars_yaml`` writes the bytes of PyYAML's pure-Python emitter with ``_VarsDumper`` (sequences indented under
their key, double-quoted scalars folded at the width), but directly (``_Writer``): PyYAML's event machinery
was half of a profile's render (docs/speed.md). What the writer does not take (a key that is not a plain
word, a float, a text PyYAML's own analysis must judge) goes through ``_VarsDumper`` as before;
tests/test_vars_fold.py compares the two on generated data and on every example image's.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

import yaml

from migbake.document import emitter
from migbake.document.emitter import flow_key
from migbake.document.patterns import CONTROL_BUT_LF, whole
from migbake.document.yamlforms import block_as_is, keeps_line_breaks, literal_block
from migbake.render.guard import Block, Checked, line

JINJA_DELIMITERS = ("{{", "{%", "{#")  # Jinja's default start strings (Ansible's too)
_JINJA_START = re.compile("|".join(map(re.escape, JINJA_DELIMITERS)))  # one walk (three ``in`` are slower)
WIDTH = 150  # ansible-lint's yamllint allows lines of 160 characters; a literal block is indented by 6
_LITERAL_WIDTH = WIDTH - 10
_INDENT = 2  # PyYAML's best_indent


def payload(text: str) -> dict[str, str]:
    """A file's text as group data: ``content``, or ``content_base64`` when it holds Jinja's delimiters.

    Ansible never templates an ``!unsafe`` string, but ansible-lint's jinja rule still parses one
    (ansible/ansible-lint#4647, open in 26.10): base64 keeps such a file (a shell script's ``${#x}``, a
    go-template, a description with ``{{``) out of its sight, and from Ansible's templating twice over.
    """
    if _JINJA_START.search(text):
        return {"content_base64": Base64Text(binascii.b2a_base64(text.encode("utf-8"), newline=False).decode("ascii"))}
    return {"content": text}


class Base64Text(str):
    """Base64 (``payload``'s): the writer folds it without looking for what to escape, as it holds nothing to
    escape, no space and no line break (a role's scripts: some 80 KB a profile)."""

    __slots__ = ()


class _Unsafe(str):
    """A string of a group's data: written with Ansible's ``!unsafe`` tag."""

    __slots__ = ()


# what a double-quoted scalar may hold as it is (printable, and not one of YAML's escapes or line breaks)
_AS_IS_CLASS = r"[\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]"
_AS_IS = whole(rf"^{_AS_IS_CLASS}$")
# a character that needs an escape in a double-quoted scalar (any other is written as it is)
_NEEDS_ESCAPE = re.compile(rf"[^{_AS_IS_CLASS[1:-1]}]")
_ESCAPES = {"\x00": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
            "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P"}
_ESCAPED: dict[str, str] = {}
_ESCAPE_LENGTH = {"x": 4, "u": 6, "U": 10}  # an escape's length by the letter after its backslash; others 2
_PRINTABLE_LF_TAB = re.compile(r"[ -~\n\t]*")
_ASCII_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t"))  # the backslash first


def _escaped(ch: str) -> str:
    """One character as a YAML double-quoted scalar writes it."""
    if _AS_IS.match(ch):
        return ch
    if ch in _ESCAPES:
        return "\\" + _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    piece = _ESCAPED.get(ch)
    if piece is None:
        piece = _ESCAPED[ch] = _escaped(ch)
    return piece


def _escape_all(text: str) -> tuple[str, bool]:
    """``text`` with every character escaped that needs it, and whether every escape is two characters long: for
    ASCII text holding no control character but line feeds and tabs (a file's, mostly), by ``str.replace`` (in
    C), the backslash first."""
    if _PRINTABLE_LF_TAB.fullmatch(text):
        for ch, escape in _ASCII_ESCAPES:  # "in" first: a replace that finds nothing still takes as long as one
            if ch in text:
                text = text.replace(ch, escape)
        return text, True
    return _NEEDS_ESCAPE.sub(_escape, text), False


def _unit_end(escaped: str, at: int) -> int:
    """The end of the unit (a character, or one escape) of the escaped text that starts at ``at``."""
    if escaped[at] != "\\":
        return at + 1
    return at + _ESCAPE_LENGTH.get(escaped[at + 1], 2)


def _cut(escaped: str, at: int, stop: int, k: int) -> int:
    """``stop``, or where the escape it would split starts (``at``: where a unit starts, before ``stop``; ``k``:
    the last backslash before ``stop``, at most 9 before it: an escape is at most 10 characters long).

    Only a backslash starts an escape or is the second character of an escaped backslash: of a run of
    them, which starts a unit (after a character that is not one, or at ``at``), pairs are escaped
    backslashes, and an odd one out starts an escape."""
    j = k
    while j > at and escaped[j - 1] == "\\":
        j -= 1
    if (k - j) % 2:  # k ends an escaped backslash
        return stop
    return k if _unit_end(escaped, k) > stop else stop


def _double_quoted(text: str, column: int, indent: int, width: int, out: list[str], *,
                   base64_text: bool = False) -> int:
    """The inside of a double-quoted scalar (the opening quote written, ending at ``column``), appended to
    ``out``, broken by escaped line breaks (which add nothing to the value) where a line would pass the width;
    a space that starts a line is escaped (``\\ ``), as a line's leading white space is not part of the value.
    Returns the column after it.

    A line takes as many units (a character, an escape) as end before ``width - 1`` (the fold's backslash is
    the last), and the first unit of the scalar whatever its length: the bytes of writing each character
    alone and folding before it where it would pass (tests/test_vars_fold.py holds that writer). ``base64_text``:
    ``text`` is base64 (``Base64Text``), written as it is."""
    escaped, short_escapes = (text, True) if base64_text else _escape_all(text)
    end, at, limit = len(escaped), 0, width - 1
    first, later = limit - column, limit - indent
    if end <= first:  # it fits on the line (most values)
        out.append(escaped)
        return column + end
    fold = "\\\n" + " " * indent
    if end > first > 0 and later > 1 and (base64_text or ("\\" not in escaped and " " not in escaped)):
        # every unit one character, none a space (base64, mostly): the first line takes what fits after
        # the column, each later one the character the fold moved there and as many more as fit
        rows = [escaped[at:at + later] for at in range(first, end, later)]
        out.append(escaped[:first] + fold + fold.join(rows))
        return indent + len(rows[-1])
    if short_escapes and first > 1 and later > 3:
        return _folded_short(escaped, column, indent, limit, out)
    while at < end and end - at > limit - column:
        stop = at + limit - column  # the units that end by the limit go on this line
        if stop > at:
            k = escaped.rfind("\\", stop - 9 if stop - 9 > at else at, stop)
            if k >= 0:
                stop = _cut(escaped, at, stop, k)
        if stop <= at == 0:  # the scalar's first unit: written although it passes the limit, no fold before it
            at = _unit_end(escaped, 0)
            out.append(escaped[:at])
            column += at
            continue
        if stop < at:
            stop = at
        # the line ends before the next unit, which starts the next line whatever its length (a space escaped)
        unit = _unit_end(escaped, stop)
        piece = "\\ " if escaped[stop] == " " else escaped[stop:unit]
        out.append(escaped[at:stop] + fold + piece)
        column, at = indent + len(piece), unit
    out.append(escaped[at:])
    return column + end - at


def _folded_short(escaped: str, column: int, indent: int, limit: int, out: list[str]) -> int:
    """``_double_quoted``'s folding of a text whose units are one character or a two-character escape, where a line
    holds at least two (the first) or four (a later one): a line's last unit is cut in two only by an escape's
    backslash ending it, the odd one of the backslashes there (pairs are escaped backslashes)."""
    fold = "\\\n" + " " * indent
    end, at = len(escaped), 0
    while end - at > limit - column:
        stop = at + limit - column
        line = escaped[at:stop]
        if (len(line) - len(line.rstrip("\\"))) & 1:  # an escape's backslash ends it: the escape goes on
            stop -= 1
            line = line[:-1]
        unit = escaped[stop]
        if unit == "\\":
            piece, at = escaped[stop:stop + 2], stop + 2
        else:
            piece, at = ("\\ " if unit == " " else unit), stop + 1
        out.append(line + fold + piece)
        column = indent + len(piece)
    out.append(escaped[at:])
    return column + end - at


def _literal(text: str) -> bool:
    """Whether a string is written as a literal block: every line fits and holds no control character (else
    double-quoted: escapes, long lines folded); a one-line string is double-quoted."""
    if "\n" not in text:
        return False
    if CONTROL_BUT_LF.search(text):
        return False
    return max(map(len, text.split("\n"))) <= _LITERAL_WIDTH


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
                and (event.style == '"' or (event.style == "|" and block_as_is(scalar, astral=True)))):
            return yaml.emitter.ScalarAnalysis(
                scalar=scalar, empty=False, multiline=True, allow_flow_plain=False, allow_block_plain=False,
                allow_single_quoted=False, allow_double_quoted=True, allow_block=True)
        return super().analyze_scalar(scalar)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """``text`` in double quotes (``_double_quoted``; not folded where ``split`` is false)."""
        self.write_indicator('"', True)
        out: list[str] = []
        self.column = _double_quoted(text, self.column, self.indent or 0, self.best_width if split else 1 << 30,
                                     out)
        self.stream.write("".join(out))
        self.whitespace = self.indention = False
        self.write_indicator('"', False)


def _represent_unsafe(dumper: yaml.SafeDumper, data: _Unsafe) -> yaml.ScalarNode:
    text = str(data)
    return dumper.represent_scalar("!unsafe", text, style="|" if _literal(text) else '"')


_VarsDumper.add_representer(_Unsafe, _represent_unsafe)


def _tagged(value: Any) -> Any:
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items()}
    return value


class _Unsupported(Exception):
    """What ``_Writer`` leaves to PyYAML's emitter."""


class _Writer:
    """The bytes ``_VarsDumper`` writes for ``_tagged(data)``, written directly (the emitter's rules, for the
    node kinds group data holds): a block collection's items on lines of their own at its indent, the first
    one after a sequence's ``-`` on its line; empty collections in flow style; a scalar's continuation lines
    at its parent's indent + 2."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.fresh = True  # at the start of an empty line (the document's start, after a literal block)
        self.open_ended = False  # the last scalar was a literal block that keeps its final line breaks (|+)

    def document(self, data: dict[Any, Any]) -> str:
        return "".join(self.pieces(data))

    def pieces(self, data: dict[Any, Any]) -> list[str]:
        """The document's text in pieces, up to its last line break (or its end marker ``...``)."""
        if not data:
            raise _Unsupported
        self._mapping(data, 0, inline=False)
        self.out.append("...\n" if self.open_ended else "" if self.fresh else "\n")
        return self.out

    def _write(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)
        self.fresh = self.open_ended = False

    def _start(self, indent: int, inline: bool) -> None:
        """Where an item begins: on the line of the ``-`` before it, or on a line of its own."""
        if inline or self.fresh:
            self._write(" " * (indent - self.column))
        else:
            self.out.append("\n")
            self.column = 0
            self._write(" " * indent)

    def _mapping(self, data: dict[Any, Any], indent: int, inline: bool) -> None:
        for i, (key, value) in enumerate(data.items()):
            if type(key) is not str or len(key) > 100 or flow_key(key) != key:
                raise _Unsupported  # PyYAML quotes it, or writes it as a complex key
            self._start(indent, inline and not i)
            self._write(key + ":")
            self._node(value, indent + _INDENT)

    def _sequence(self, data: list[Any], indent: int, inline: bool) -> None:
        for i, value in enumerate(data):
            self._start(indent, inline and not i)
            self._write("-")
            self._node(value, indent + _INDENT)

    def _node(self, value: Any, indent: int) -> None:
        """A value after ``key:`` or ``-``; ``indent``: its block collection's, or its scalar's continuation."""
        if isinstance(value, str):
            self._string(value, indent, base64_text=value.__class__ is Base64Text)  # not str(value): a copy
        elif isinstance(value, (list, tuple, dict)):
            if not value:
                self._write(" {}" if isinstance(value, dict) else " []")
            elif isinstance(value, dict):
                self._mapping(value, indent, inline=self.out[-1] == "-")
            else:
                self._sequence(list(value), indent, inline=self.out[-1] == "-")
        elif value is None or type(value) in (bool, int):
            self._write(" " + ("null" if value is None else "true" if value is True else "false" if value is False
                               else str(value)))
        else:
            raise _Unsupported

    def _string(self, text: str, indent: int, base64_text: bool = False) -> None:
        if not _literal(text):  # base64 never is: no line break
            self._write(' !unsafe "')
            self.column = _double_quoted(text, self.column, indent, WIDTH, self.out, base64_text=base64_text)
            self._write('"')
            return
        if not block_as_is(text, astral=True):
            raise _Unsupported  # PyYAML's analysis chooses between a literal block and double quotes
        self._write(" !unsafe ")
        self.out.append(literal_block(text, indent))
        self.column, self.fresh, self.open_ended = 0, True, keeps_line_breaks(text)


def vars_yaml(data: dict[str, Any]) -> str:
    """Ansible variables as YAML: every string ``!unsafe``, keys in order, lines of at most ``WIDTH``."""
    try:
        return _Writer().document(data)
    except _Unsupported:
        return _dumped(data)


def vars_block(intro: str, data: dict[str, Any]) -> Block:
    """``intro`` (comment lines) and ``vars_yaml(data)`` as a block for a template, without its last line break:
    ``Checked`` where the writer wrote it (every string escaped, base64 or a literal block without a control
    character), else a plain Block, which the guard searches."""
    try:
        pieces = _Writer().pieces(data)
    except _Unsupported:
        return Block(intro + _dumped(data).rstrip("\n"))
    for row in intro.split("\n"):
        line(row, "a line of the group data's comment")
    while pieces and not pieces[-1].rstrip("\n"):  # the last line breaks cut from the pieces: one copy of the text
        pieces.pop()
    if pieces:
        pieces[-1] = pieces[-1].rstrip("\n")
    pieces.insert(0, intro)
    return Checked("".join(pieces))


def _dumped(data: dict[str, Any]) -> str:
    return str(yaml.dump(_tagged(data), Dumper=_VarsDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=WIDTH))
