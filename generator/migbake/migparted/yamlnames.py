"""How NVIDIA's mig-parted reads a config name: go-yaml v2 (YAML 1.1, under sigs.k8s.io/yaml) resolves a plain key.

A plain (unquoted) key that it reads as a boolean, null or number is not that name to mig-parted: its
YAML-to-JSON step turns it into another string (``y`` -> ``true``, ``1e3`` -> ``1000``), so
``nvidia-mig-parted apply -c y`` does not find it (tests/test_security_output.py asks NVIDIA's binary).
"""

from __future__ import annotations

import re

import yaml

# how go-yaml v2 (mig-parted reads its config with sigs.k8s.io/yaml, on go-yaml v2) resolves a plain scalar
# that a config name may be: YAML 1.1's booleans and null, then, underscores removed, Go's ParseInt with
# base 0 (0x, 0o, 0b, a leading 0: octal), ParseUint, then its float pattern
_GO_BOOLS = {w: v for v, words in (("true", "y Y yes Yes YES true True TRUE on On ON"),
                                   ("false", "n N no No NO false False FALSE off Off OFF")) for w in words.split()}
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def go_yaml_reading(name: str) -> str | None:
    """What go-yaml v2 reads the plain scalar ``name`` as, when not a string ("the boolean true"); None: a string."""
    if name in _GO_BOOLS:
        return f"the boolean {_GO_BOOLS[name]}"
    if name in ("null", "Null", "NULL"):
        return "null (no name at all)"
    plain = name.replace("_", "")
    if _GO_INT.fullmatch(plain) or _GO_FLOAT.fullmatch(plain):
        return "a number"
    return None


def unquoted_config_key(text: str, key: str) -> bool:
    """Whether the config ``key`` of mig-configs is written plain (unquoted) in the YAML ``text``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:  # pragma: no cover - the loader has read it already
        return True
    for k, v in root.value if isinstance(root, yaml.MappingNode) else ():
        if k.value == "mig-configs" and isinstance(v, yaml.MappingNode):
            return any(ck.value == key and ck.style is None for ck, _ in v.value)
    return True
