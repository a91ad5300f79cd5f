"""The forms of YAML every writer of migbake's decides by: what go-yaml reads a plain word as, and a literal block.

``go_yaml_reading``: what a plain scalar is to go-yaml (Butane, mig-parted, Kubernetes) when not a string;
``read_as_string``: whether every reader takes a plain word as that string.
``block_as_is``, ``keeps_line_breaks`` and ``literal_block``: whether the emitters write a text as a literal
block as it is, and the bytes they write for it. ``emitter`` (the one YAML emitter) and the Ansible variables'
writer share them.
"""

from __future__ import annotations

import re
from functools import lru_cache

import yaml

STR_TAG = "tag:yaml.org,2002:str"

# go-yaml's resolution of a plain scalar (go-yaml/yaml:resolve.go@v2.4.0, the v2 that sigs.k8s.io/yaml and
# mig-parted read with; @v3.0.1, Butane's (coreos/butane:go.mod@011bb0c4: gopkg.in/yaml.v3 v3.0.1), is the same
# less v2's y/n/yes/no/on/off booleans): the words of its
# resolve map, then by the first character: a '.' tries Go's ParseFloat; a sign or a digit a timestamp of one
# of its allowedTimestampFormats, then, underscores removed, ParseInt and ParseUint with base 0 (0x, 0o, 0b and
# a leading 0: octal, Go >= 1.13), then its yamlStyleFloat; v3 adds 0o octals, which base 0 already reads.
# The YAML 1.2 core schema's null, bool, int and float forms are all among these.
_GO_TRUE = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_GO_FALSE = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_GO_NULL = ("", "~", "null", "Null", "NULL")
_GO_SPECIAL_FLOATS = (".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                      "-.inf", "-.Inf", "-.INF")
_GO_WORDS = {**dict.fromkeys(_GO_TRUE, "the boolean true"), **dict.fromkeys(_GO_FALSE, "the boolean false"),
             **dict.fromkeys(_GO_NULL, "null"), **dict.fromkeys(_GO_SPECIAL_FLOATS, "a number"),
             "<<": "a merge key"}
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-(0?[1-9]|1[0-2])-(0?[1-9]|[12][0-9]|3[01])"
                           r"([Tt][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})"
                           r"| [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?)?")


def go_yaml_reading(text: str) -> str | None:
    """What go-yaml v2 reads the plain scalar ``text`` as when not a string ("the boolean true"); None: a string."""
    if text in _GO_WORDS:
        return _GO_WORDS[text]
    first = text[:1]
    if first == ".":
        return "a number" if _GO_FLOAT.fullmatch(text) else None
    if first and first in "+-0123456789":
        if _GO_TIMESTAMP.fullmatch(text):
            return "a timestamp"
        plain = text.replace("_", "")
        if _GO_INT.fullmatch(plain) or _GO_FLOAT.fullmatch(plain):
            return "a number"
    return None


_PYYAML = yaml.resolver.Resolver()  # PyYAML's YAML 1.1 resolution


def read_as_string(word: str) -> bool:
    """Whether every reader takes the plain scalar ``word`` as that string: PyYAML (YAML 1.1, cloud-init,
    Ansible) and go-yaml (``go_yaml_reading``, which covers YAML 1.2's forms). A caller checks first that its
    emitter writes ``word`` plain at all."""
    return (go_yaml_reading(word) is None
            and _PYYAML.resolve(yaml.ScalarNode, word, (True, False)) == STR_TAG)  # type: ignore[no-untyped-call]


# the characters a literal block may hold as they are, and \n: of the Basic Multilingual Plane (libyaml's
# IS_PRINTABLE), and beyond it too (PyYAML's pure-Python emitter)
_BLOCK_BMP = "\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\n"
_ASTRAL = "\U00010000-\U0010fffe"


@lru_cache(maxsize=2)
def _block_characters(astral: bool) -> re.Pattern[str]:
    """The characters a block may hold, as a pattern compiled when first needed (each takes some 2.5 ms, a
    cold ``validate``'s time)."""
    return re.compile(f"[{_BLOCK_BMP}{_ASTRAL if astral else ''}]*")


@lru_cache(maxsize=256)  # a file is a block of several documents: Butane for three OSes, the MachineConfig
def block_as_is(text: str, *, astral: bool) -> bool:
    """Whether an emitter's analysis allows ``text`` as a literal block (analyze_scalar's rules for one): every
    character printable or a line feed (``astral``: also beyond the Basic Multilingual Plane, as PyYAML's
    pure-Python emitter; libyaml's only within it), no space before a line break or at the end."""
    return (_block_characters(astral).fullmatch(text) is not None and " \n" not in text
            and not text.endswith(" "))


def keeps_line_breaks(text: str) -> bool:
    """Whether a literal block of ``text`` keeps its last line breaks (``|+``: it is one, or ends with two)."""
    return text == "\n" or text.endswith("\n\n")


@lru_cache(maxsize=256)
def literal_block(text: str, indent: int) -> str:
    """``text`` as the emitters write a literal block after its key's ``:`` and a space: ``|``, the hints (an
    indentation indicator where it starts with a space or a line break; ``-`` where it ends without one, ``+``
    where it keeps its last line breaks), then every line indented by ``indent`` (an empty line not), ending
    with a line break. For a ``text`` the emitter writes as it is (``block_as_is``)."""
    hints = ("2" if text[0] in " \n" else "") + (
        "-" if not text.endswith("\n") else "+" if keeps_line_breaks(text) else "")
    rows = indented(text[:-1] if text.endswith("\n") else text, indent)  # an empty line has no indentation
    return f"|{hints}\n{rows}\n"


def indented(text: str, spaces: int) -> str:
    """``text``'s lines each indented by ``spaces`` (an empty line not; only a line feed ends a line), by
    ``str.replace`` in C: a loop over the lines, or a regular expression's ``^``, looks at every character."""
    pad = " " * spaces
    if not text or not pad:
        return text
    out = pad + text.replace("\n", "\n" + pad)
    empty = "\n" + pad + "\n"
    if empty in out:  # an empty line got the pad: twice, as a run of them is taken every other one at a time
        out = out.replace(empty, "\n\n").replace(empty, "\n\n")
    if out.endswith("\n" + pad):  # a last line that is empty
        out = out[:-len(pad)]
    return out[len(pad):] if text.startswith("\n") else out
