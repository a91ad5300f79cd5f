"""Import of an nvidia-mig-parted file with several configs: one profile whose named layouts are the configs.

mig-parted's ``mig-configs`` maps each config name to its own list of entries, and a node applies the one
``nvidia-mig-parted apply -c NAME`` selects (NVIDIA/mig-parted@v0.15.0:api/spec/v1/spec.go, ``Spec.MigConfigs``;
the GPU Operator's MIG manager selects it by the node label ``nvidia.com/mig.config``). A node profile's named
layouts (``mig.layouts``) are the same thing with one set of GPU entries: each entry (model, devices, device-filter
ids) names a layout per name. So every config must give the same entries in the same order, differing only in
their ``mig-devices``, and keep MIG on (or off) for each; otherwise the file is refused, at the config that
differs, with ``--config NAME`` to import one config alone. The imported profile reads the layout name at boot
from kubelet's ``nvidia.com/mig.config`` label (the label that selected the config), else ``/etc/migbake/layout``,
and has no default: a node that says no name fails closed until the profile names one (``restore.layout.default``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from migbake.document.loader import LoadedProfile, join_pointer
from migbake.gpu.catalog import GpuModel
from migbake.problems import Problem

LAYOUT_FROM = ["kubelet-labels", "file"]
LAYOUT_SOURCE_NOTE = ("restore.layout: the name from kubelet's nvidia.com/mig.config label, else /etc/migbake/layout; "
                      "no default, so a node that says no name fails closed (add restore.layout.default to choose "
                      "one).")


class Group(Protocol):
    """One profile entry made from a config entry (``importer._Group``)."""

    @property
    def origin(self) -> str: ...
    @property
    def model(self) -> GpuModel: ...
    @property
    def devices(self) -> str | list[int]: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def layout(self) -> dict[str, int]: ...
    @property
    def pci_ids(self) -> list[str]: ...


def _shape(g: Group) -> tuple[str, str, tuple[str, ...]]:
    return g.model.key, str(g.devices), tuple(g.pci_ids)


def _describe(groups: Sequence[Group]) -> str:
    return "; ".join(f"{g.model.key} devices {g.devices}" + (f" ({', '.join(g.pci_ids)})" if g.pci_ids else "")
                     for g in groups)


def layouts_profile(loaded: LoadedProfile, configs: Sequence[tuple[str, Sequence[Group]]], name: str,
                    gpu_count: int | None, any_filter: bool, problems: list[Problem]) -> dict[str, Any]:
    """The profile data of ``configs`` (name, its entries) as named layouts; a problem in ``problems`` (located at
    the config) for each config whose entries differ from the first's."""
    first, reference = configs[0]
    for cfg, groups in configs[1:]:
        here = join_pointer("/mig-configs", cfg)
        if [_shape(g) for g in groups] != [_shape(g) for g in reference]:
            problems.append(loaded.problem(here, f"config {cfg!r} has other GPU entries ({_describe(groups)}) than "
                                           f"{first!r} ({_describe(reference)}): named layouts share one set of "
                                           "entries (model, devices, device-filter) and differ only in mig-devices; "
                                           f"import one config alone with --config {cfg}", "import-layouts",
                                           key=True))
            continue
        for g, r in zip(groups, reference):
            if g.enabled != r.enabled:
                problems.append(loaded.problem(g.origin, f"MIG is {'on' if g.enabled else 'off'} here and "
                                               f"{'on' if r.enabled else 'off'} in {r.origin}: a profile's named "
                                               "layouts keep MIG on (or off) for an entry in every layout; import "
                                               f"one config alone with --config {cfg}", "import-layouts"))
    keys = list(dict.fromkeys(g.model.key for g in reference))
    default = f"imported-{'-'.join(keys)}"[:63].rstrip("-")
    data: dict[str, Any] = {"version": 1, "name": name or default}
    if gpu_count is not None:
        data["gpu_count"] = gpu_count
    entries = []
    for i, g in enumerate(reference):
        mig = ({"layouts": {cfg: dict(groups[i].layout) for cfg, groups in configs}} if g.enabled
               else {"enabled": False})
        entries.append({"model": g.model.key, "devices": g.devices,
                        **({"pci_device_ids": list(g.pci_ids)} if g.pci_ids else {}), "mig": mig})
    data["gpus"] = entries
    if any_filter:
        data["device_filter"] = "always"  # keep the filter: on other hardware, fail at assert
    data["restore"] = {"layout": {"from": list(LAYOUT_FROM)}}
    return data
