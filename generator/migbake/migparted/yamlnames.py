"""How NVIDIA's mig-parted reads a config name: go-yaml v2 (YAML 1.1, under sigs.k8s.io/yaml) resolves a plain key.

A plain (unquoted) key that it reads as a boolean, null or number is not that name to mig-parted: its
YAML-to-JSON step turns it into another string (``y`` -> ``true``, ``1e3`` -> ``1000``), so
``nvidia-mig-parted apply -c y`` does not find it (tests/cli/test_output_dir_safety.py asks NVIDIA's binary).
"""

from __future__ import annotations

import yaml

from migbake.document.yamlforms import go_yaml_reading

__all__ = ["go_yaml_reading", "unquoted_config_key"]  # go-yaml's resolution lives with the one emitter


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
