"""The one YAML emitter's bytes for a block document of plain words, numbers and literal blocks, written directly.

A Butane config and a MachineConfig are mappings and lists of paths, names, numbers and booleans, and the files
as literal blocks (or as ``data:`` URLs). ``emitter.dump`` builds PyYAML nodes of such a document and libyaml
resolves and writes each (the blocks spliced in), which costs more than the whole of most targets. ``document``
writes the bytes libyaml writes, for what it is sure of: block collections (PyYAML's and libyaml's layout: two
spaces, a list under its key at the key's column), scalars that every reader takes as strings written plain
(``plain``), ``''``, ints, booleans, null and literal blocks libyaml writes as they are (``yamlforms.literal_block``).
Anything else (a word a reader would type, a space, a quote, a list in a list) returns None, and the emitter
writes the document as before. tests/test_yaml_emitter.py compares the two on generated documents and on every
document a render of the example images dumps.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from migbake.document.patterns import ascii_beyond
from migbake.document.yamlforms import block_as_is, keeps_line_breaks, literal_block, read_as_string

# a word libyaml writes plain in a block collection: no space, quote, '#', '&', '[', '{' or line break; it starts
# with a letter, a digit or '/' (no indicator) and does not end with ':' (a key's). PyYAML's analysis agrees.
_WORD = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/@:;,+=%~*'()!-]*")
_WORD_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/")  # _WORD's, as sets
_WORD_REST = "".join(sorted(_WORD_FIRST)).encode("ascii") + b"._@:;,+=%~*'()!-"
_KEY_MAX = 100  # well below the emitters' simple keys (PyYAML's check_simple_key: shorter than 128): a longer is theirs


class _Other(Exception):
    """What the emitter writes itself."""


@lru_cache(maxsize=4096)  # the same words in every document
def plain(text: str) -> bool:
    """Whether libyaml writes the string ``text`` plain in a block collection, and every reader (PyYAML,
    YAML 1.2, go-yaml) reads that as the string: a word of ``_WORD`` that no reader types."""
    if len(text) > _KEY_MAX:  # a long word (a data: URL): its characters looked for in C, not by _WORD's walk
        return text[0] in _WORD_FIRST and ascii_beyond(text, _WORD_REST) is False and not text.endswith(":") \
            and read_as_string(text)
    return _WORD.fullmatch(text) is not None and not text.endswith(":") and read_as_string(text)


def document(data: object, *, literal: bool = True) -> str | None:
    """``data`` (a non-empty dict) as ``emitter.dump(data, literal=literal)`` writes it; None: left to the emitter.

    Without ``literal`` a string with a line break is the emitter's (it double-quotes it); a plain word is written
    whole at any width (the emitters fold a plain scalar only at a space, which none holds)."""
    if type(data) is not dict or not data:
        return None
    out: list[str] = []
    try:
        _mapping(data, "", "", out, literal)
    except _Other:
        return None
    return "".join(out)


def _mapping(data: dict[Any, Any], first: str, pad: str, out: list[str], literal: bool) -> None:
    """A block mapping whose keys are at the column of ``pad``; ``first``: what its first key's line starts with
    (``- ``, after the list's own indentation), else its keys start on lines of their own."""
    lead = first
    for key, value in data.items():
        if type(key) is not str or len(key) > _KEY_MAX or not plain(key):
            raise _Other
        out.append(f"{lead or pad}{key}:")
        lead = ""
        _value(value, pad, out, literal)


def _value(value: Any, pad: str, out: list[str], literal: bool) -> None:
    """The value of a key at the column of ``pad``, from after its ``:`` to the end of its last line."""
    kind = type(value)
    if kind is dict or kind is list:
        if not value:
            out.append(" {}\n" if kind is dict else " []\n")
        elif kind is dict:
            out.append("\n")
            _mapping(value, "", pad + "  ", out, literal)
        else:
            out.append("\n")
            _sequence(value, pad, out, literal)
    elif kind is str and "\n" in value:
        if not literal or keeps_line_breaks(value) or not block_as_is(value, astral=False):
            raise _Other
        out.append(" " + literal_block(value, len(pad) + 2))
    else:
        out.append(f" {_scalar(value)}\n")


def _sequence(items: list[Any], pad: str, out: list[str], literal: bool) -> None:
    """A block list under its key (its dashes at the key's column, ``pad``)."""
    for item in items:
        kind = type(item)
        if kind is dict and item:
            _mapping(item, pad + "- ", pad + "  ", out, literal)
        elif kind is list or (kind is str and "\n" in item):
            raise _Other  # a list in a list, a block as an item: as libyaml writes them
        else:
            out.append(f"{pad}- {'{}' if kind is dict else _scalar(item)}\n")


def _scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        if value == "":
            return "''"
        if plain(value):
            return str(value)
    elif kind is bool:
        return "true" if value else "false"
    elif kind is int:
        return str(value)
    elif value is None:
        return "null"
    raise _Other
