"""The one YAML emitter of everything migbake writes: a plain scalar only where no YAML reader types it otherwise.

Butane, MachineConfig, DRA claims, mig-parted configs, Ansible variables and imported profiles are
dumped here (``dump``, or ``SafeDumper`` for an emitter that needs its own writing), and single scalars
that templates and targets print come from ``flow_scalar``. A string is written plain only when every
reader of the output takes it as a string: PyYAML (YAML 1.1, cloud-init and Ansible), the YAML 1.2 core
schema, and go-yaml v2 and v3 (Butane, Ignition tools, mig-parted and Kubernetes through sigs.k8s.io/yaml),
whose resolution ``go_yaml_reading`` follows. libyaml's C emitter writes the bytes where PyYAML has it;
the pure-Python emitter (same bytes, tests/test_yaml_emitter.py) where it does not.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Any

import yaml

from migbake.document import blockwriter, jsontext
from migbake.document.patterns import PRINTABLE_ASCII_LF, search_beyond
from migbake.document.quickyaml import MAP_TAG, SEQ_TAG, STR_TAG, QuickResolve
from migbake.document.yamlforms import (
    block_as_is,
    go_yaml_reading,
    indented,
    keeps_line_breaks,
    literal_block,
    read_as_string,
)

# a tag no reader gives a plain scalar: the emitter quotes a string whose plain form resolves to it
_TYPED_ELSEWHERE = "tag:migbake,2026:typed-by-another-reader"


class GoSafeResolve:
    """PyYAML's resolution, and a string that go-yaml (or YAML 1.2) would type resolved to a tag no string has.

    PyYAML's emitter writes a string plain only where the resolver gives its plain form the string tag,
    so every such string is quoted, by the C emitter and the pure-Python one alike. Placed before
    ``QuickResolve`` and a PyYAML dumper class.
    """

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode:
            return SEQ_TAG if kind is yaml.SequenceNode else MAP_TAG
        key = (type(self), value, implicit[0], implicit[1])  # the emitter asks twice a scalar, keys again and again
        tag = _RESOLVED.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
            if tag == STR_TAG and implicit[0] and go_yaml_reading(value) is not None:
                tag = _TYPED_ELSEWHERE
            if len(value) <= 200 and len(_RESOLVED) < 20_000:
                _RESOLVED[key] = tag
        return str(tag)


_RESOLVED: dict[tuple[type, str, bool, bool], str] = {}


class SafeDumper(GoSafeResolve, QuickResolve, yaml.SafeDumper):
    """PyYAML's pure-Python safe dumper with the resolution above (for emitters that override its writing)."""


_CBase: type[yaml.SafeDumper] | None = getattr(yaml, "CSafeDumper", None)


class _CSafeDumper(GoSafeResolve, QuickResolve, _CBase or yaml.SafeDumper):  # type: ignore[misc]
    """libyaml's emitter with the resolution above (PyYAML's pure-Python one where libyaml is absent)."""


HAVE_LIBYAML = _CBase is not None


class SingleQuoted(str):
    """A string the emitter writes in single quotes whatever it holds (a mig-parted config name, for one)."""

    __slots__ = ()


_SCALAR_TAGS = {str: STR_TAG, int: "tag:yaml.org,2002:int", bool: "tag:yaml.org,2002:bool",
                SingleQuoted: STR_TAG}


def _node(value: object, literal: bool, flow: bool | None) -> yaml.Node | None:
    """The node PyYAML's safe representer makes of ``value`` (keys in order, never an alias), built directly:
    the representer costs as much as libyaml's emitting. None for a value of another type."""
    kind = type(value)
    tag = _SCALAR_TAGS.get(kind)
    if tag is not None:
        if kind is bool:
            return yaml.ScalarNode(tag, "true" if value else "false")
        text = str(value)
        style = "'" if kind is SingleQuoted else "|" if literal and "\n" in text else None
        return yaml.ScalarNode(tag, text, style=style)
    if value is None:
        return yaml.ScalarNode("tag:yaml.org,2002:null", "null")
    if kind is list:
        items = [_node(v, literal, flow) for v in value]  # type: ignore[attr-defined]
        if None in items:
            return None
        return yaml.SequenceNode(SEQ_TAG, items, flow_style=_flow_style(flow, items))
    if kind is dict:
        pairs = [(_node(k, literal, flow), _node(v, literal, flow)) for k, v in value.items()]  # type: ignore[attr-defined]
        if any(k is None or v is None for k, v in pairs):
            return None
        return yaml.MappingNode(MAP_TAG, pairs, flow_style=_flow_style(flow, [n for p in pairs for n in p]))
    return None


def _flow_style(flow: bool | None, children: list[Any]) -> bool:
    """PyYAML's ``default_flow_style``: None is flow where every child is a scalar of no set style."""
    if flow is not None:
        return flow
    return all(isinstance(n, yaml.ScalarNode) and not n.style for n in children)


class _LiteralRepresent:
    """The representer's way for what ``_node`` does not build (floats, tuples, subclasses)."""

    @staticmethod
    def text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        return dumper.represent_scalar(STR_TAG, text, style="|" if "\n" in text else None)

    @staticmethod
    def single(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        return dumper.represent_scalar(STR_TAG, str(text), style="'")


class _NoAliases:
    def ignore_aliases(self, data: Any) -> bool:
        return True


class _Fallback(_NoAliases, _CSafeDumper):
    pass


class _FallbackLiteral(_NoAliases, _CSafeDumper):
    pass


class _PureFallback(_NoAliases, SafeDumper):
    pass


class _PureFallbackLiteral(_NoAliases, SafeDumper):
    pass


for _cls in (_Fallback, _FallbackLiteral, _PureFallback, _PureFallbackLiteral):
    _cls.add_representer(SingleQuoted, _LiteralRepresent.single)
for _cls in (_FallbackLiteral, _PureFallbackLiteral):
    _cls.add_representer(str, _LiteralRepresent.text)


def dump(data: object, *, literal: bool = False, flow: bool | None = False, width: int = 1 << 20,
         pure: bool = False) -> str:
    """``data`` (dicts in their order, lists, str, int, bool, None) as one YAML document, never with an alias.

    ``literal``: a string with a line break as a literal block (``|``) where YAML allows one; ``flow``:
    PyYAML's ``default_flow_style``; ``width``: where long scalars fold; ``pure``: the pure-Python emitter
    even where libyaml is present (the tests compare the two).
    """
    if flow is False and not pure:
        text = blockwriter.document(data, literal=literal)
        if text is not None:
            return text
    node = _node(data, literal, flow)
    options: dict[str, Any] = {"allow_unicode": True, "width": width}
    if node is not None:
        if literal and flow is False and not pure and HAVE_LIBYAML:
            return _spliced(node, options)
        return str(yaml.serialize(node, Dumper=SafeDumper if pure else _CSafeDumper, **options))
    dumper = (_PureFallbackLiteral if literal else _PureFallback) if pure else (
        _FallbackLiteral if literal else _Fallback)
    return str(yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=flow, **options))


_MARK = f"migbake{os.urandom(8).hex()}block"  # no document's text holds it: a new one in every process
_NUMBER = re.compile(r"(\d+)\n")
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")  # YAML's line breaks beside \n (a block holds none)
_PREFIX = re.compile(r"[ ]*(?:- +)*")


def _spliced(root: yaml.Node, options: dict[str, Any]) -> str:
    """``root`` by libyaml, with each literal block of a mapping value that libyaml writes as it is
    (``block_as_is`` for libyaml, no line breaks kept at the end: ``|+``) written here instead, the same bytes
    (tests/test_yaml_emitter.py): libyaml walks a block a character at a time, and blocks (the files of a
    Butane config) are most of a document. Each goes to libyaml as a plain word on the line of its key, then
    takes its place (``literal_block``, its lines indented by the key's column + 2)."""
    blocks: list[str] = []
    marked: list[tuple[list[Any], int, Any]] = []  # (a mapping's pairs, the index, the pair as it was)
    # whole: libyaml writes the document, blocks and all: a block keeps its last line breaks (|+), which libyaml
    # remembers, or a text holds a line break other than \n, which ends a line where rfind("\n") does not look
    stack, whole = [root], False
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for i, (key, value) in enumerate(node.value):
                stack.append(key)
                if (isinstance(value, yaml.ScalarNode) and value.style == "|" and not keeps_line_breaks(value.value)
                        and block_as_is(value.value, astral=False)):
                    marked.append((node.value, i, node.value[i]))
                    node.value[i] = (key, yaml.ScalarNode(STR_TAG, f"{_MARK}{len(blocks)}"))
                    blocks.append(value.value)
                else:
                    stack.append(value)
        elif isinstance(node, yaml.ScalarNode):
            whole = (whole or (node.style == "|" and keeps_line_breaks(node.value))
                     or any(b in node.value for b in _OTHER_BREAKS))
    text = "" if whole else str(yaml.serialize(root, Dumper=_CSafeDumper, **options))
    pieces = text.split(_MARK)  # each but the first: a block's number, its line's end, what follows
    out = [pieces[0]]
    for piece in pieces[1:] if len(pieces) == len(blocks) + 1 else ():
        number = _NUMBER.match(piece)
        line = out[-1][out[-1].rfind("\n") + 1:]  # "  - key: " (the key's column: after the spaces and dashes)
        key_at = _PREFIX.match(line).end()  # type: ignore[union-attr]
        if number is None or not line.endswith(": ") or line.startswith((": ", "? "), key_at):
            break  # not on a key's line (": " after a long key's "? KEY" line): libyaml writes the document
        out[-1] += literal_block(blocks[int(number.group(1))], key_at + 2)
        out.append(piece[number.end():])
    if text and len(out) == len(pieces) == len(blocks) + 1:
        return "".join(out)
    for pairs, i, pair in marked:  # a |+ block, or one not on its key's line (none is): libyaml writes them all
        pairs[i] = pair
    return str(yaml.serialize(root, Dumper=_CSafeDumper, **options))


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@lru_cache(maxsize=4096)  # the same keys in every document
def flow_key(key: str) -> str:
    """A mapping key: plain when it is a word every reader takes as that string, else ``flow_scalar``."""
    if _PLAIN_KEY.fullmatch(key) and read_as_string(key):
        return key
    return flow_scalar(key, ascii_only=True)


# characters a YAML 1.1 reader (PyYAML, cloud-init) rejects or reads as a line break inside a quoted
# scalar, although JSON leaves them raw
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
_JSON = json.JSONEncoder(ensure_ascii=False).encode
_JSON_ASCII = json.JSONEncoder().encode


def flow_scalar(value: object, *, ascii_only: bool = False) -> str:
    """A scalar (or an empty list or mapping) as a YAML flow scalar: JSON, which YAML 1.2 and cloud-init's
    YAML 1.1 loader read as it is; a string is always double-quoted, so no reader types it. ``ascii_only``:
    non-ASCII characters escaped too."""
    text = (_JSON_ASCII(value) if ascii_only else jsontext.string(value) if isinstance(value, str)
            else _JSON(value))
    unsafe = "\x7f" in text if text.isascii() else _YAML_UNSAFE.search(text) is not None  # DEL: the one in ASCII
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if unsafe else text


# what a literal block may not hold (YAML 1.1's non-printable characters, and the line breaks other than
# \n that a YAML 1.1 reader takes as the end of a line), beside a tab and \n
_NOT_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ufeff]")
_IN_BLOCK_ASCII = PRINTABLE_ASCII_LF + b"\t"  # what _NOT_IN_BLOCK leaves of ASCII


def block_scalar(text: str, indent: int) -> str:
    """``text`` as the value after a ``key:``: a literal block (``|``, its lines indented by ``indent`` spaces)
    when it ends with exactly one line break, starts with no space or line break and every character may
    stand in one; else ``flow_scalar``."""
    if (not text.endswith("\n") or text.endswith("\n\n") or text.startswith((" ", "\n"))
            or search_beyond(_NOT_IN_BLOCK, text, _IN_BLOCK_ASCII)):
        return flow_scalar(text)
    return "|\n" + indented(text[:-1], indent)
