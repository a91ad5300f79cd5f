"""GPU facts: MIG profiles, slices, placements and PCI ids per GPU model, read from package data.

The data file is ``data/mig-catalog.json``, a copy of the team's reference catalog
(``shared/reference/mig-catalog.json``); every value there carries its source and status.
This module only turns it into frozen, typed objects and answers look-ups.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from migbake.resources import catalog_text

# mig-parted's profile grammar (go-nvlib parseMigProfile), as a regular expression.
_ATTR = r"[A-Za-z](?:[A-Za-z0-9.]*[A-Za-z0-9])?"
PROFILE_NAME_RE = re.compile(
    rf"^(?:(?P<c>[0-9]+)c\.)?(?P<g>[0-9]+)g\.(?P<gb>[0-9]+)gb"
    rf"(?:(?P<sign>[+-])(?P<attrs>{_ATTR}(?:,{_ATTR})*))?$"
)


@dataclass(frozen=True, slots=True)
class Placement:
    """A GPU-instance placement: first memory slice and number of memory slices."""

    start: int
    size: int


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU model (for example ``1g.18gb`` on an H200)."""

    name: str
    g: int
    compute_slices: int
    memory_slices: int
    max_count: int
    attributes: tuple[str, ...]
    negative_attributes: tuple[str, ...]
    placements: tuple[Placement, ...]
    nvidia_smi_id: int | None
    status: str
    media_extension: bool  # a +me (or +me.all) profile: at most one such instance per GPU
    nvml_enum: str = ""  # the NVML constant, e.g. GPU_INSTANCE_PROFILE_1_SLICE_REV1


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A GPU model that supports MIG, as the catalog describes it."""

    key: str
    names: tuple[str, ...]
    aliases: tuple[str, ...]
    pci_device_ids: tuple[str, ...]
    generation: str
    mig_mode_persists: bool
    total_compute_slices: int
    total_memory_slices: int
    max_gpu_instances: int
    min_driver: str
    profiles: tuple[MigProfile, ...]
    ci_counts: dict[str, dict[str, int]]
    status: str

    def profile(self, name: str) -> MigProfile | None:
        """The GPU-instance profile called exactly ``name`` on this model, if any."""
        for p in self.profiles:
            if p.name == name:
                return p
        return None

    @property
    def profile_names(self) -> tuple[str, ...]:
        """Names of every GPU-instance profile of this model, in catalog order."""
        return tuple(p.name for p in self.profiles)

    @property
    def display_name(self) -> str:
        """A short human name (the first catalog name)."""
        return self.names[0] if self.names else self.key

    @property
    def hopper_or_later(self) -> bool:
        """Whether MIG mode itself is lost at reboot (Hopper and later)."""
        return not self.mig_mode_persists


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", s.lower())


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity: one per process
class Catalog:
    """Every GPU model migbake knows, with look-up by id, name or alias (case-insensitive)."""

    models: tuple[GpuModel, ...]
    source_snapshot: str

    def find(self, name: str) -> GpuModel | None:
        """The model whose id, name or alias is ``name`` (case and punctuation insensitive)."""
        return _index(self).get(_norm(name)) if name else None

    def by_key(self, key: str) -> GpuModel:
        """The model with catalog id ``key`` (KeyError if unknown)."""
        for m in self.models:
            if m.key == key:
                return m
        raise KeyError(key)

    def by_pci_id(self, pci_id: str) -> GpuModel | None:
        """The model with PCI id ``pci_id`` (``0xDDDDVVVV``, any case, optional ``0x``)."""
        want = canonical_pci_id(pci_id)
        for m in self.models:
            if want in m.pci_device_ids:
                return m
        return None

    def close_matches(self, name: str, n: int = 3) -> list[str]:
        """Catalog ids that look like ``name``, best first."""
        keys = [m.key for m in self.models]
        by_norm = {_norm(x): m.key for m in self.models for x in (m.key, *m.names, *m.aliases)}
        found = difflib.get_close_matches(_norm(name), list(by_norm), n=n * 2, cutoff=0.6)
        out: list[str] = []
        for f in found:
            k = by_norm[f]
            if k not in out:
                out.append(k)
        if not out:
            out = difflib.get_close_matches(name.lower(), keys, n=n, cutoff=0.4)
        return out[:n]

    def owners_of_profile(self, profile_name: str) -> list[GpuModel]:
        """Every model that has a GPU-instance profile called ``profile_name``."""
        return [m for m in self.models if m.profile(profile_name) is not None]

    @property
    def keys(self) -> tuple[str, ...]:
        """Every catalog id."""
        return tuple(m.key for m in self.models)


@lru_cache(maxsize=4)
def _index(catalog: Catalog) -> dict[str, GpuModel]:
    index: dict[str, GpuModel] = {}
    for m in catalog.models:
        for x in (m.key, *m.names, *m.aliases):
            index.setdefault(_norm(x), m)  # the first model to claim a name keeps it
    return index


def canonical_pci_id(pci_id: str) -> str:
    """``0x233510de`` -> ``0x233510DE`` (mig-parted's device-filter form)."""
    s = pci_id.strip()
    if s[:2].lower() == "0x":
        s = s[2:]
    return "0x" + s.upper()


def _profile(raw: dict[str, Any]) -> MigProfile:
    return MigProfile(
        name=raw["name"],
        g=int(raw["gi_slices_g"]),
        compute_slices=int(raw["compute_slices"]),
        memory_slices=int(raw["memory_slices"]),
        max_count=int(raw["max_count"]),
        attributes=tuple(raw.get("attributes", ())),
        negative_attributes=tuple(raw.get("negative_attributes", ())),
        placements=tuple(Placement(int(p["start"]), int(p["size"])) for p in raw["placements"]),
        nvidia_smi_id=raw.get("nvidia_smi_gi_profile_id"),
        status=str(raw.get("status", "")),
        media_extension=any(a == "me" or a.startswith("me.") for a in raw.get("attributes", ())),
        nvml_enum=str(raw.get("nvml_gi_profile_enum", "")),
    )


def _ci_counts(raw: dict[str, Any]) -> dict[str, dict[str, int]]:
    cip = raw.get("compute_instance_profiles") or {}
    table = cip.get("per_gi_compute_instance_counts_examples") or {}
    return {g: {c: int(n) for c, n in row.items()} for g, row in table.items()}


def _model(raw: dict[str, Any]) -> GpuModel:
    return GpuModel(
        key=raw["key"],
        names=tuple(raw.get("names", ())),
        aliases=tuple(raw.get("aliases", ())),
        pci_device_ids=tuple(canonical_pci_id(p["id"]) for p in raw.get("pci_device_ids", ())),
        generation=raw["generation"].split()[0],
        mig_mode_persists=bool(raw["mig_mode_persists_across_reboot"]),
        total_compute_slices=int(raw["total_compute_slices"]),
        total_memory_slices=int(raw["total_memory_slices"]),
        max_gpu_instances=int(raw["max_gpu_instances"]),
        min_driver=str(raw.get("min_driver", "")),
        profiles=tuple(_profile(p) for p in raw["profiles"]),
        ci_counts=_ci_counts(raw),
        status=str(raw.get("status", "")),
    )


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The packaged catalog (parsed once per process)."""
    raw = json.loads(catalog_text())
    snap = raw.get("snapshots", {}).get("NVIDIA/mig-parted", "")
    return Catalog(models=tuple(_model(g) for g in raw["gpus"]), source_snapshot=str(snap))
