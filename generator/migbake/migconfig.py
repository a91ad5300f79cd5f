"""The nvidia-mig-parted config (format v1) for a node profile, as plain data ready for a YAML emitter."""

from __future__ import annotations

from typing import Any

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


def uses_device_filter(profile: NodeProfile, catalog: Catalog | None = None) -> bool:
    """Whether entries carry a device-filter: only when the profile names more than one GPU model."""
    return len({m.key for m in group_models(profile, catalog)}) > 1


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
