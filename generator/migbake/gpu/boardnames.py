"""Profile names that differ between boards of one GPU: catalog models that share a PCI id and profile ids.

GB200 boards with the same PCI id (0x294110DE) report ``1g.23gb`` / ``3g.93gb`` / ``7g.186gb`` on
production drivers and ``1g.24gb`` / ``3g.95gb`` / ``7g.189gb`` on others (NVIDIA/mig-parted#227,
NVIDIA/gpu-operator#1303); mig-parted applies names literally, so a config with the other board's names
fails. The catalog keeps each naming as its own model; here a profile is matched across them by what
does not change between boards: its GPU-instance profile id (``nvidia-smi mig -lgip``'s ID column), its
attributes and its memory slices, not by its name.
"""

from __future__ import annotations

from collections.abc import Mapping

from migbake.gpu.catalog import Catalog, GpuModel, MigProfile

Identity = tuple[int | None, tuple[str, ...], tuple[str, ...], int]


def _identity(p: MigProfile) -> Identity:
    return p.nvidia_smi_id, p.attributes, p.negative_attributes, p.memory_slices


def twins(catalog: Catalog, model: GpuModel) -> list[tuple[GpuModel, dict[str, str]]]:
    """Other models with a PCI id of ``model`` whose profiles are the same ids under other names.

    Each comes with the map from ``model``'s profile names to the twin's (only where a name differs)."""
    found = []
    ids = set(model.pci_device_ids)
    theirs_by_identity: Mapping[Identity, MigProfile]
    for other in catalog.models:
        if other.key == model.key or not ids & set(other.pci_device_ids):
            continue
        theirs_by_identity = {_identity(p): p for p in other.profiles if p.nvidia_smi_id is not None}
        if any(p.nvidia_smi_id is None or _identity(p) not in theirs_by_identity for p in model.profiles):
            continue
        renamed = {p.name: theirs_by_identity[_identity(p)].name for p in model.profiles
                   if theirs_by_identity[_identity(p)].name != p.name}
        if renamed:
            found.append((other, renamed))
    return found


def twin_lines(catalog: Catalog, model: GpuModel, layout: Mapping[str, int]) -> list[str]:
    """What ``show`` says under an entry whose model has twins: which names a node of each kind reports."""
    lines = []
    for other, renamed in twins(catalog, model):
        mine = [name for name in layout if name in renamed]
        if not mine:
            continue
        theirs = ", ".join(f"{renamed[name]} for {name}" for name in mine)
        shared = ", ".join(sorted(set(model.pci_device_ids) & set(other.pci_device_ids)))
        lines.append(f"  Names: boards with PCI id {shared} report these profiles under other names on some "
                     f"boards: {theirs} ({other.key}; "
                     "NVIDIA/mig-parted#227). `nvidia-smi mig -lgip` on the node says which; mig-parted needs the "
                     f"node's names, so write the model that matches it ({model.key} or {other.key}).")
    return lines
