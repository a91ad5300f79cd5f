"""The nvidia-mig-parted config (format v1) for a node profile, as plain data ready for a YAML emitter."""

from __future__ import annotations

import re
from typing import Any

import yaml

from migbake.catalog import Catalog, GpuModel, load_catalog
from migbake.nodeprofile import GpuGroup, NodeProfile, writes_device_filter


def group_models(profile: NodeProfile, catalog: Catalog | None = None) -> list[GpuModel]:
    """The catalog model of each ``gpus`` entry, in order (the profile has been validated)."""
    cat = catalog or load_catalog()
    models = []
    for g in profile.gpus:
        m = cat.find_gpu(g.model)
        if m is None:  # validation guarantees this cannot happen
            raise KeyError(g.model)
        models.append(m)
    return models


def uses_device_filter(profile: NodeProfile, catalog: Catalog | None = None) -> bool:
    """Whether entries carry a device-filter (``device_filter``; auto: several models, or exact ids)."""
    exact = any(g.pci_device_ids for g in profile.gpus)
    return writes_device_filter(profile.device_filter, (m.key for m in group_models(profile, catalog)), exact)


def entry_pci_ids(group: GpuGroup, model: GpuModel) -> tuple[str, ...]:
    """The PCI ids an entry's device-filter names: its own ``pci_device_ids``, else all of its model's."""
    return group.pci_device_ids or model.pci_device_ids


def filter_notes(profile: NodeProfile, catalog: Catalog | None = None) -> list[str]:
    """What the config does on a GPU the profile does not list: comment lines for the generated config."""
    if not uses_device_filter(profile, catalog):
        if profile.device_filter == "never":
            return ["No device-filter (device_filter: never): each entry applies to its GPU indices,",
                    "whatever the GPU model."]
        return ["No device-filter (one GPU model): on a GPU of another model apply tries these profile",
                "names and fails; device_filter: always makes such a node fail at assert instead."]
    seen: dict[str, dict[str, None]] = {}  # model -> its entries' ids, in order
    for g, m in zip(profile.gpus, group_models(profile, catalog)):
        seen.setdefault(m.key, {}).update(dict.fromkeys(entry_pci_ids(g, m)))
    held, anyway = profile.held_units, [c.unit for c in profile.all_consumers if not c.fail_closed]
    if held:
        kubelet = (f"{profile.consumers_text(only_fail_closed=True)} {'stays' if len(held) == 1 else 'stay'} "
                   "down (fail closed)")
    elif anyway:
        kubelet = f"{', '.join(anyway)} {'starts' if len(anyway) == 1 else 'start'} anyway (not fail-closed)"
    else:
        kubelet = "nothing waits for it"
    return [
        "Each entry applies only to GPUs whose PCI id is one of its model's (device-filter):",
        *(f"  {key}: {', '.join(ids)}" for key, ids in seen.items()),
        "A GPU of any other model matches no entry: apply leaves it alone, assert fails",
        f"(\"not all GPUs match the specified config\"), the restore unit fails and {kubelet};",
        "scripts/verify-mig-restore.sh names that GPU and its PCI id.",
    ]


def _entry(group: GpuGroup, model: GpuModel, with_filter: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if with_filter:
        entry["device-filter"] = list(entry_pci_ids(group, model))
    entry["devices"] = "all" if group.devices == "all" else list(group.devices)
    entry["mig-enabled"] = group.mig_enabled
    entry["mig-devices"] = dict(group.layout) if group.mig_enabled else {}
    return entry


def mig_parted_config(profile: NodeProfile, catalog: Catalog | None = None) -> dict[str, Any]:
    """``{version: v1, mig-configs: {<config_name>: [entries]}}`` exactly as apply/assert read it."""
    models = group_models(profile, catalog)
    with_filter = uses_device_filter(profile, catalog)
    entries = [_entry(g, m, with_filter) for g, m in zip(profile.gpus, models)]
    return {"version": "v1", "mig-configs": {_ConfigName(profile.restore.config_name): entries}}


class _ConfigName(str):
    """A config name, quoted unless every YAML 1.1 reader takes it plainly as a string."""

    __slots__ = ()


# mig-parted reads YAML with go-yaml v2, whose YAML 1.1 also reads y/n as booleans and 1e3 or a date as
# numbers; PyYAML would write those plainly. A name of letters first is plain text to both.
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_YAML11_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: faster


class _ConfigDumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """The emitter of mig-parted configs: config names quoted where go-yaml v2 would not read a string."""


def _represent_name(dumper: yaml.SafeDumper, name: _ConfigName) -> yaml.ScalarNode:
    plain = _PLAIN_NAME.match(name) and name.lower() not in _YAML11_WORDS
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(name), style=None if plain else "'")


_ConfigDumper.add_representer(_ConfigName, _represent_name)


def mig_parted_config_text(profile: NodeProfile, catalog: Catalog | None = None) -> str:
    """The config as YAML text, without comments (the generated file adds a header above it)."""
    return config_yaml(mig_parted_config(profile, catalog))


def config_yaml(data: dict[str, Any]) -> str:
    """A ``mig_parted_config`` dict (possibly with more configs) as the YAML text mig-parted reads."""
    return str(yaml.dump(data, Dumper=_ConfigDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100))
