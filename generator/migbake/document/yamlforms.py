"""The forms of YAML every writer of migbake's decides by: what go-yaml reads a plain word as, and an indented block.

``go_yaml_reading``: what a plain scalar is to go-yaml (Butane, mig-parted, Kubernetes) when not a string;
``read_as_string``: whether every reader takes a plain word as that string.
``indented``: a text's lines indented, for a block printed inside another document.
"""

from __future__ import annotations

import re

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
