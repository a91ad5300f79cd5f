"""The one YAML emitter of everything migbake writes: a plain scalar only where no YAML reader types it otherwise.

Butane, MachineConfig, DRA claims, mig-parted configs, Ansible variables and imported profiles are
dumped here (``dump``, or ``SafeDumper`` for an emitter that needs its own writing), and single scalars
that templates and targets print come from ``flow_scalar``. A string is written plain only when every
reader of the output takes it as a string: PyYAML (YAML 1.1, cloud-init and Ansible), the YAML 1.2 core
schema, and go-yaml v2 and v3 (Butane, Ignition tools, mig-parted and Kubernetes through sigs.k8s.io/yaml),
whose resolution ``go_yaml_reading`` follows. libyaml's C emitter writes the bytes where PyYAML has it;
the pure-Python emitter (same bytes, tests/unit/test_yaml_emitter.py) where it does not.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import yaml

from migbake.document.yamlforms import STR_TAG, go_yaml_reading, indented, read_as_string

# a tag no reader gives a plain scalar: the emitter quotes a string whose plain form resolves to it
_TYPED_ELSEWHERE = "tag:migbake,2026:typed-by-another-reader"


class GoSafeResolve:
    """PyYAML's resolution, and a string that go-yaml (or YAML 1.2) would type resolved to a tag no string has.

    PyYAML's emitter writes a string plain only where the resolver gives its plain form the string tag,
    so every such string is quoted, by the C emitter and the pure-Python one alike. Placed before a PyYAML
    dumper class.
    """

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        tag = str(super().resolve(kind, value, implicit))  # type: ignore[misc]
        if kind is yaml.ScalarNode and tag == STR_TAG and implicit[0] and go_yaml_reading(value) is not None:
            return _TYPED_ELSEWHERE
        return tag


class SafeDumper(GoSafeResolve, yaml.SafeDumper):
    """PyYAML's pure-Python safe dumper with the resolution above (for emitters that override its writing)."""


_CBase: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # PyYAML built without libyaml: the pure one


class _CSafeDumper(GoSafeResolve, _CBase):  # type: ignore[misc]
    """libyaml's emitter with the resolution above (PyYAML's pure-Python one where libyaml is absent)."""


class SingleQuoted(str):
    """A string the emitter writes in single quotes whatever it holds (a mig-parted config name, for one)."""

    __slots__ = ()


def _single_quoted(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(STR_TAG, str(text), style="'")


def _literal_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """A string with a line break as a literal block (``|``) where the emitter allows one."""
    return dumper.represent_scalar(STR_TAG, text, style="|" if "\n" in text else None)


class _NoAliases:
    def ignore_aliases(self, data: Any) -> bool:
        return True


class _Dumper(_NoAliases, _CSafeDumper):
    pass


class _LiteralDumper(_NoAliases, _CSafeDumper):
    pass


class _PureDumper(_NoAliases, SafeDumper):
    pass


class _PureLiteralDumper(_NoAliases, SafeDumper):
    pass


for _cls in (_Dumper, _LiteralDumper, _PureDumper, _PureLiteralDumper):
    _cls.add_representer(SingleQuoted, _single_quoted)
for _cls in (_LiteralDumper, _PureLiteralDumper):
    _cls.add_representer(str, _literal_text)


def dump(data: object, *, literal: bool = False, flow: bool | None = False, width: int = 1 << 20,
         pure: bool = False) -> str:
    """``data`` (dicts in their order, lists, str, int, bool, None) as one YAML document, never with an alias.

    ``literal``: a string with a line break as a literal block (``|``) where YAML allows one; ``flow``:
    PyYAML's ``default_flow_style``; ``width``: where long scalars fold; ``pure``: the pure-Python emitter
    even where libyaml is present (the tests compare the two).
    """
    dumper = (_PureLiteralDumper if literal else _PureDumper) if pure else (_LiteralDumper if literal else _Dumper)
    return str(yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=flow, allow_unicode=True,
                         width=width))


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


def flow_scalar(value: object, *, ascii_only: bool = False) -> str:
    """A scalar (or an empty list or mapping) as a YAML flow scalar: JSON, which YAML 1.2 and cloud-init's
    YAML 1.1 loader read as it is; a string is always double-quoted, so no reader types it. ``ascii_only``:
    non-ASCII characters escaped too."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# what a literal block may not hold (YAML 1.1's non-printable characters, and the line breaks other than
# \n that a YAML 1.1 reader takes as the end of a line), beside a tab and \n
_NOT_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ufeff]")


def block_scalar(text: str, indent: int) -> str:
    """``text`` as the value after a ``key:``: a literal block (``|``, its lines indented by ``indent`` spaces)
    when it ends with exactly one line break, starts with no space or line break and every character may
    stand in one; else ``flow_scalar``."""
    if (not text.endswith("\n") or text.endswith("\n\n") or text.startswith((" ", "\n"))
            or _NOT_IN_BLOCK.search(text)):
        return flow_scalar(text)
    return "|\n" + indented(text[:-1], indent)
