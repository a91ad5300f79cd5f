"""The nvidia-mig-parted config (format v1) for a node profile, as plain data ready for a YAML emitter."""

from __future__ import annotations

from typing import Any

from migbake.document import emitter
from migbake.document.emitter import SingleQuoted
from migbake.document.patterns import whole
from migbake.gpu.catalog import GpuModel
from migbake.gpu.devicefilter import writes_device_filter
from migbake.profile.nodeprofile import GpuGroup, NodeProfile


def uses_device_filter(profile: NodeProfile) -> bool:
    """Whether entries carry a device-filter (``device_filter``; auto: several models, or exact ids)."""
    exact = any(g.pci_device_ids for g in profile.gpus)
    return writes_device_filter(profile.device_filter, (m.key for m in profile.models), exact)


def entry_pci_ids(group: GpuGroup, model: GpuModel) -> tuple[str, ...]:
    """The PCI ids an entry's device-filter names: its own ``pci_device_ids``, else all of its model's."""
    return group.pci_device_ids or model.pci_device_ids


def filter_notes(profile: NodeProfile, with_filter: bool | None = None) -> list[str]:
    """What the config does on a GPU the profile does not list: comment lines for the generated config
    (``with_filter``: ``uses_device_filter(profile)`` when the caller knows it)."""
    if not (uses_device_filter(profile) if with_filter is None else with_filter):
        if profile.device_filter == "never":
            return ["No device-filter (device_filter: never): each entry applies to its GPU indices,",
                    "whatever the GPU model."]
        return ["No device-filter (one GPU model): on a GPU of another model apply tries these profile",
                "names and fails; device_filter: always makes such a node fail at assert instead."]
    seen: dict[str, dict[str, None]] = {}  # model -> its entries' ids, in order
    for g, m in zip(profile.gpus, profile.models):
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


def _entry(group: GpuGroup, model: GpuModel, with_filter: bool, layout_name: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if with_filter:
        entry["device-filter"] = list(entry_pci_ids(group, model))
    entry["devices"] = "all" if group.devices == "all" else list(group.devices)
    entry["mig-enabled"] = group.mig_enabled
    layout = group.layout_named(layout_name) if layout_name else group.layout
    entry["mig-devices"] = dict(layout) if group.mig_enabled else {}
    return entry


def mig_parted_config(profile: NodeProfile, name: str = "", with_filter: bool | None = None) -> dict[str, Any]:
    """``{version: v1, mig-configs: {<config_name>: [entries]}}`` exactly as apply/assert read it (``name``:
    another key than ``restore.config_name``; ``with_filter``: ``uses_device_filter(profile)`` when known).

    With named layouts (``mig.layouts``), one config per name, keyed by the name (``name`` is then ignored):
    the restore selects the node's with ``-c NAME``."""
    models = profile.models
    with_filter = uses_device_filter(profile) if with_filter is None else with_filter
    if profile.layout_names:
        return {"version": "v1", "mig-configs": {
            _config_name(n): [_entry(g, m, with_filter, n) for g, m in zip(profile.gpus, models)]
            for n in profile.layout_names}}
    entries = [_entry(g, m, with_filter) for g, m in zip(profile.gpus, models)]
    return {"version": "v1", "mig-configs": {_config_name(name or profile.restore.config_name): entries}}


# mig-parted reads YAML with go-yaml v2, whose YAML 1.1 also reads y/n as booleans and 1e3 or a date as
# numbers: the one emitter (document.emitter) quotes every such name. A name that does not start with a
# letter, or holds other characters, is single-quoted whatever it is (as migbake always wrote it).
_PLAIN_NAME = whole(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _config_name(name: str) -> str:
    """A config name: plain where the emitter allows, else single-quoted."""
    return name if _PLAIN_NAME.match(name) else SingleQuoted(name)


def mig_parted_config_text(profile: NodeProfile) -> str:
    """The config as YAML text, without comments (the generated file adds a header above it)."""
    return config_yaml(mig_parted_config(profile))


def config_yaml(data: dict[str, Any]) -> str:
    """A ``mig_parted_config`` dict (possibly with more configs) as the YAML text mig-parted reads."""
    return emitter.dump(data, width=100)
