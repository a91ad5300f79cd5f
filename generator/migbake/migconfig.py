"""The nvidia-mig-parted config (format v1) for a node profile, as plain data ready for a YAML emitter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from migbake.catalog import Catalog, GpuModel, load_catalog
from migbake.model import GpuGroup, NodeProfile


def group_models(profile: NodeProfile, catalog: Catalog | None = None) -> list[GpuModel]:
    """The catalog model of each ``gpus`` entry, in order (the profile has been validated)."""
    cat = catalog or load_catalog()
    models = []
    for g in profile.gpus:
        m = cat.find(g.model)
        if m is None:  # validation guarantees this cannot happen
            raise KeyError(g.model)
        models.append(m)
    return models


def filter_on(mode: str, model_keys: Iterable[str]) -> bool:
    """Whether entries carry a device-filter: ``always``, ``never``, or (``auto``) with several models."""
    if mode in ("always", "never"):
        return mode == "always"
    return len(set(model_keys)) > 1


def uses_device_filter(profile: NodeProfile, catalog: Catalog | None = None) -> bool:
    """Whether entries carry a device-filter (the profile's ``device_filter``; auto: several models)."""
    return filter_on(profile.device_filter, (m.key for m in group_models(profile, catalog)))


def filter_notes(profile: NodeProfile, catalog: Catalog | None = None) -> list[str]:
    """What the config does on a GPU the profile does not list: comment lines for the generated config."""
    if not uses_device_filter(profile, catalog):
        if profile.device_filter == "never":
            return ["No device-filter (device_filter: never): each entry applies to its GPU indices,",
                    "whatever the GPU model."]
        return ["No device-filter (one GPU model): on a GPU of another model apply tries these profile",
                "names and fails; device_filter: always makes such a node fail at assert instead."]
    seen: dict[str, GpuModel] = {m.key: m for m in group_models(profile, catalog)}
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
        *(f"  {m.key}: {', '.join(m.pci_device_ids)}" for m in seen.values()),
        "A GPU of any other model matches no entry: apply leaves it alone, assert fails",
        f"(\"not all GPUs match the specified config\"), the restore unit fails and {kubelet};",
        "scripts/verify-mig-restore.sh names that GPU and its PCI id.",
    ]


def _entry(group: GpuGroup, model: GpuModel, with_filter: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if with_filter:
        entry["device-filter"] = list(model.pci_device_ids)
    entry["devices"] = "all" if group.devices == "all" else list(group.devices)
    entry["mig-enabled"] = group.mig_enabled
    entry["mig-devices"] = dict(group.layout) if group.mig_enabled else {}
    return entry


def mig_parted_config(profile: NodeProfile, catalog: Catalog | None = None) -> dict[str, Any]:
    """``{version: v1, mig-configs: {<config_name>: [entries]}}`` exactly as apply/assert read it."""
    models = group_models(profile, catalog)
    with_filter = uses_device_filter(profile, catalog)
    entries = [_entry(g, m, with_filter) for g, m in zip(profile.gpus, models)]
    return {"version": "v1", "mig-configs": {profile.restore.config_name: entries}}


def mig_parted_config_text(profile: NodeProfile, catalog: Catalog | None = None) -> str:
    """The config as YAML text, without comments (the generated file adds a header above it)."""
    data = mig_parted_config(profile, catalog)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter: same text, faster
    return str(yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                         width=100))
