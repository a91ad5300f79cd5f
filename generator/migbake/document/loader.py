"""Read a node-profile YAML file into plain data, keeping the line and column of every key and value.

PyYAML's composer keeps a mark on every node; we build the data ourselves from those nodes so that
every later problem can say FILE:LINE:COL. Things YAML lets through silently are problems here:
duplicate keys, aliases, YAML 1.1 booleans (``yes``/``on``) and octal-looking numbers (``0644``),
a byte-order mark, bytes that are not UTF-8, several documents, an empty file, a huge file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from migbake.document.files import read_regular
from migbake.problems import UNREADABLE, Problem

MAX_PROFILE_BYTES = 256 * 1024
MAX_DEPTH = 32
# libyaml's composer recurses once per level and crashes the interpreter (SIGSEGV) somewhere past
# ~10000 levels, which fit easily in MAX_PROFILE_BYTES: such files are refused from the event stream
MAX_PARSE_DEPTH = 4 * MAX_DEPTH
# no setting takes a number longer than this; longer ones would also hit Python's int/str limit
MAX_NUMBER_CHARS = 40

try:  # the C composer is several times faster; positions are the same
    _CLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _CLoader = yaml.SafeLoader


class _Loader(_CLoader):  # type: ignore[misc]
    """The safe loader (libyaml's where PyYAML has it)."""


_BOOL_WORDS = {"true", "false"}
_ALIAS_TAG = "tag:migbake,2024:alias"
_ALIAS_MESSAGE = "YAML aliases (*name) are not allowed in a node profile: write the value out"


class _AliasLoader(yaml.SafeLoader):
    """The Python composer, except that an alias becomes a marker node where the alias stands.

    libyaml's composer hands back the anchored node itself, which has the anchor's position; used
    only for files that hold an alias. Never expands anything (no alias bombs).
    """

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):  # type: ignore[no-untyped-call, unused-ignore]  # typed in newer stubs
            event = self.get_event()  # type: ignore[no-untyped-call]
            return yaml.ScalarNode(_ALIAS_TAG, event.anchor, event.start_mark, event.end_mark)
        return super().compose_node(parent, index)


def escape_pointer_token(token: str) -> str:
    """RFC 6901 escaping of one JSON Pointer reference token."""
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(parent: str, token: str | int) -> str:
    """The pointer to ``token`` inside ``parent``."""
    return f"{parent}/{escape_pointer_token(str(token))}"


@dataclass
class LoadedProfile:
    """A profile file as plain data, plus where each value (and each mapping key) stands."""

    file: str
    text: str
    data: object
    value_pos: dict[str, tuple[int, int]] = field(default_factory=dict)
    key_pos: dict[str, tuple[int, int]] = field(default_factory=dict)
    # values the loader already reported as unreadable (an alias, a YAML 1.1 boolean, a number it
    # cannot read): the schema says nothing more about them, one problem is one line
    unreadable: set[str] = field(default_factory=set)
    # the text of each unquoted scalar YAML read as something other than a string (`false`, `0x20B210DE`):
    # where a string was wanted, the message can say what to quote
    plain: dict[str, str] = field(default_factory=dict)

    def where(self, pointer: str, *, key: bool = False) -> tuple[int, int]:
        """Line and column of ``pointer`` (its key if ``key``), falling back to the nearest parent."""
        table = self.key_pos if key else self.value_pos
        p = pointer
        while True:
            if p in table:
                return table[p]
            if key and p in self.value_pos:
                return self.value_pos[p]
            if not p:
                return (1, 1)
            p = p.rsplit("/", 1)[0]

    def problem(self, pointer: str, message: str, rule: str, *, key: bool = False) -> Problem:
        """A problem of ``rule`` located at ``pointer`` in this file; its severity is the rule's declaration's (a
        check of ``rules`` gives it, ``rules.declare``; a rule of the loader or the schema is an error)."""
        line, col = self.where(pointer, key=key)
        return Problem(self.file, line, col, pointer, message, rule)


class _Builder:
    """Turns composed YAML nodes into plain data, recording positions and problems."""

    def __init__(self, loaded: LoadedProfile) -> None:
        self.loaded = loaded
        self.problems: list[Problem] = []
        self._seen: set[int] = set()

    def _at(self, node: yaml.Node, pointer: str, message: str, rule: str) -> None:
        m = node.start_mark
        self.problems.append(Problem(self.loaded.file, m.line + 1, m.column + 1, pointer, message, rule))

    def build(self, node: yaml.Node, pointer: str = "", depth: int = 0) -> object:
        self.loaded.value_pos[pointer] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if node.tag == _ALIAS_TAG:
            self.loaded.unreadable.add(pointer)
            self._at(node, pointer, _ALIAS_MESSAGE, "yaml-alias")
            return None
        if id(node) in self._seen:
            # the composer hands back the anchored node itself; its key is where the alias stands
            line, col = self.loaded.key_pos.get(pointer, self.loaded.value_pos[pointer])
            self.loaded.value_pos[pointer] = (line, col)
            self.loaded.unreadable.add(pointer)
            self.problems.append(Problem(self.loaded.file, line, col, pointer, "YAML aliases (*name) are not "
                                         "allowed in a node profile: write the value out", "yaml-alias"))
            return None
        self._seen.add(id(node))
        if depth > MAX_DEPTH:
            self._at(node, pointer, f"nesting deeper than {MAX_DEPTH} levels", "yaml-too-deep")
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, pointer, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, join_pointer(pointer, i), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node, pointer)

    def _mapping(self, node: yaml.MappingNode, pointer: str, depth: int) -> dict[str, object]:
        out: dict[str, object] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._at(key_node, pointer, "YAML merge keys (<<) are not allowed in a node profile",
                         "yaml-merge-key")
                continue
            if key_node.tag == _ALIAS_TAG:
                self._at(key_node, pointer, _ALIAS_MESSAGE, "yaml-alias")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._at(key_node, pointer, "a mapping key must be a plain string", "yaml-key-type")
                continue
            key = str(key_node.value)
            if key_node.tag != "tag:yaml.org,2002:str":
                kind = key_node.tag.rsplit(":", 1)[-1]
                self._at(key_node, pointer, f"the key {key!r} is read as a {kind} by YAML 1.1; keys must be "
                         f"strings (quote it: '{key}')", "yaml-key-type")
            child = join_pointer(pointer, key)
            if key in out:
                first = self.loaded.key_pos.get(child, (0, 0))
                self._at(key_node, child, f"duplicate key {key!r} (first at line {first[0]}); YAML would "
                         "silently keep the last one", "duplicate-key")
                continue
            self.loaded.key_pos[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = self.build(value_node, child, depth + 1)
        return out

    def _scalar(self, node: yaml.Node, pointer: str) -> object:
        text = str(node.value)
        if node.tag == "tag:yaml.org,2002:str":
            return text
        if not getattr(node, "style", None):  # plain (libyaml: '', PyYAML: None): no quotes, no block scalar
            self.loaded.plain[pointer] = text
        if node.tag == "tag:yaml.org,2002:bool":
            if text.lower() not in _BOOL_WORDS:
                self.loaded.unreadable.add(pointer)
                self._at(node, pointer, f"{text!r} is a boolean in YAML 1.1 but a string in YAML 1.2; "
                         "write true or false (or quote it for a string)", "yaml-1.1-bool")
            return text.lower() in {"true", "yes", "on", "y"}
        if node.tag == "tag:yaml.org,2002:int":
            return self._int(node, pointer, text)
        if node.tag == "tag:yaml.org,2002:float":
            try:
                return float(text.replace("_", ""))
            except ValueError:
                return text
        if node.tag == "tag:yaml.org,2002:null":
            return None
        # timestamps, binary, custom tags: keep the text, the schema will say what type it wanted
        if node.tag.startswith("tag:yaml.org,2002:") and node.tag not in (
                "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"):
            return text
        if node.tag.startswith("!"):
            self._at(node, pointer, f"YAML tag {node.tag} is not allowed in a node profile", "yaml-tag")
        return text

    def _int(self, node: yaml.Node, pointer: str, text: str) -> object:
        clean = text.replace("_", "")
        sign = -1 if clean.startswith("-") else 1
        digits = clean.lstrip("+-")
        if len(digits) > MAX_NUMBER_CHARS:
            self.loaded.unreadable.add(pointer)
            self._at(node, pointer, f"{text[:20]!r}... ({len(digits)} characters) is far too large a "
                     "number for any setting", "number-too-large")
            return None
        if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
            octal = f" ({int(digits, 8)})" if set(digits) <= set("01234567") else ""
            self._at(node, pointer, f"{text!r} has a leading 0: YAML 1.1 reads it as octal{octal}, YAML 1.2 "
                     "as decimal; write it without the leading 0, or quote it", "yaml-1.1-octal")
            return sign * int(digits, 10)
        try:
            return sign * int(digits, 0)
        except ValueError:
            self.loaded.unreadable.add(pointer)
            self._at(node, pointer, f"{text!r} is a YAML 1.1 number form migbake does not accept; write a "
                     "plain decimal number", "yaml-number")
            return text


def _tab_at(text: str, index: int) -> bool:
    """Whether the parser stopped at a tab that is part of a line's leading whitespace."""
    start = text.rfind("\n", 0, index) + 1
    lead = text[start:index + 1]
    return "\t" in lead and not lead.strip(" \t")


def _plainly_shallow(text: str) -> bool:
    """True when the text can hold no alias and no nesting deeper than MAX_PARSE_DEPTH.

    Then the event pre-scan (which guards the recursive composer) can be skipped: a block level needs
    at least one more column of indentation (or of ``- ``/``? `` indicators), a flow level a bracket.
    """
    if "*" in text:
        return False
    flow = text.count("[") + text.count("{")
    indent = max((len(line) - len(line.lstrip(" -?")) for line in text.splitlines()), default=0)
    return flow + indent + 1 <= MAX_PARSE_DEPTH


def _position_of_offset(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    line = before.count(b"\n") + 1
    col = offset - (before.rfind(b"\n") + 1) + 1
    return line, col


def load_profile_bytes(data: bytes, file: str) -> tuple[LoadedProfile, list[Problem]]:
    """Parse ``data`` (the bytes of ``file``) into a LoadedProfile and the problems found on the way."""
    loaded = LoadedProfile(file=file, text="", data=None)

    def fail(line: int, col: int, message: str, rule: str) -> tuple[LoadedProfile, list[Problem]]:
        return loaded, [Problem(file, line, col, "", message, rule)]

    if len(data) > MAX_PROFILE_BYTES:
        return fail(1, 1, f"the file is {len(data)} bytes; a node profile may be at most "
                    f"{MAX_PROFILE_BYTES} bytes", "file-too-large")
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return fail(1, 1, "the file starts with a byte-order mark; save it as UTF-8 without BOM", "byte-order-mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _position_of_offset(data, e.start)
        return fail(line, col, f"byte 0x{data[e.start]:02x} is not UTF-8; save the file as UTF-8", "not-utf8")
    if "\x00" in text:
        line, col = _position_of_offset(data, data.index(b"\x00"))
        return fail(line, col, "the file contains a NUL byte", "not-text")
    loaded.text = text
    try:
        depth, aliases = 0, False
        for event in ([] if _plainly_shallow(text) else yaml.parse(text, Loader=_Loader)):
            aliases = aliases or isinstance(event, yaml.AliasEvent)
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_PARSE_DEPTH:
                    m = event.start_mark
                    line, col = (m.line + 1, m.column + 1) if m else (1, 1)
                    return fail(line, col, f"nesting deeper than {MAX_PARSE_DEPTH} levels", "yaml-too-deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        nodes = list(yaml.compose_all(text, Loader=_AliasLoader if aliases else _Loader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = " ".join(x for x in (e.context, e.problem) if x)
        if mark and _tab_at(text, mark.index):
            what = "a tab character in the indentation; YAML indents with spaces only"
        return fail(line, col, f"YAML syntax error: {what}", "yaml-syntax")
    except yaml.reader.ReaderError as e:
        char = chr(e.character) if isinstance(e.character, int) else str(e.character)
        at = max(text.find(char), 0)  # the reader stops at the first one (libyaml counts bytes, not chars)
        line, col = text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1
        return fail(line, col, f"the file contains the control character U+{ord(char):04X}, which YAML does "
                    "not allow", "not-text")
    except yaml.YAMLError as e:
        return fail(1, 1, "YAML error: " + " ".join(str(e).split()), "yaml-syntax")
    docs = [n for n in nodes if n is not None]
    if not docs:
        return fail(1, 1, "the file is empty; a node profile is a YAML mapping with version, name and gpus",
                    "empty-file")
    if len(nodes) > 1:
        second = nodes[1]
        line = second.start_mark.line + 1 if second is not None else 1
        return fail(line, 1, "the file holds several YAML documents (---); a node profile is one document",
                    "multiple-documents")
    root = docs[0]
    builder = _Builder(loaded)
    loaded.data = builder.build(root)
    problems = builder.problems
    if not isinstance(root, yaml.MappingNode):
        loaded.unreadable.add("")  # one problem: the schema's "expected mapping" would repeat it
        problems.append(Problem(file, root.start_mark.line + 1, root.start_mark.column + 1, "",
                                "the document must be a YAML mapping (version, name, gpus, ...)", "not-a-mapping"))
    return loaded, problems


def read_profile(path: Path, display: str | None = None) -> tuple[LoadedProfile, list[Problem]]:
    """Read and parse the profile at ``path``; ``display`` is the name used in problems."""
    name = display if display is not None else str(path)
    try:
        data = read_regular(path, MAX_PROFILE_BYTES)
    except OSError as e:
        why = e.strerror or str(e)
        if isinstance(e, IsADirectoryError):
            inside = path / "node-profile.yaml"
            why = "it is a directory, not a profile file" + (f" (give {inside})" if inside.is_file() else "")
        return LoadedProfile(file=name, text="", data=None), [
            Problem(name, 1, 1, "", f"cannot read the file: {why}", UNREADABLE)]
    return load_profile_bytes(data, name)


def iter_pointers(data: object, pointer: str = "") -> Iterator[tuple[str, object]]:
    """Every (pointer, value) pair in ``data``, depth first."""
    yield pointer, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from iter_pointers(v, join_pointer(pointer, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from iter_pointers(v, join_pointer(pointer, i))


def as_mapping(value: object) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one (rules read raw data defensively)."""
    return value if isinstance(value, dict) else {}


def gpu_entries(data: object) -> list[tuple[str, dict[str, Any]]]:
    """``(pointer, entry)`` for each mapping in the raw profile's ``gpus`` list."""
    gpus = as_mapping(data).get("gpus")
    if not isinstance(gpus, list):
        return []
    return [(f"/gpus/{i}", g) for i, g in enumerate(gpus) if isinstance(g, dict)]
