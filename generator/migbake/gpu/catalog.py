"""GPU facts: MIG profiles, slices, placements, PCI ids and names per GPU model, read from package data.

The data file is ``data/mig-catalog.json`` (first built from the reference catalog of NVIDIA's MIG
facts, ``shared/reference/mig-catalog.json``, plus what migbake added: models appended to ``gpus``, and
``non_mig_gpus``: GPUs without MIG); every value there carries its source and status. A catalog file
given with ``--catalog`` / ``MIGBAKE_CATALOG`` (see ``catalogfile``) adds or replaces models; which catalog
a command uses is a value passed down to it (``CatalogChoice``), never a setting of this module. This
module turns the data into frozen, typed objects and answers look-ups: by id, by any name nvidia-smi
prints or people write (``gpunames``), by PCI id; and it says why a name is not a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from migbake.document.patterns import whole
from migbake.gpu.names import Named, loose_key, rank, strict_key
from migbake.packagedata import catalog_text

# mig-parted's profile grammar (go-nvlib parseMigProfile), as a regular expression.
_ATTR = r"[A-Za-z](?:[A-Za-z0-9.]*[A-Za-z0-9])?"
PROFILE_NAME_RE = whole(
    rf"^(?:(?P<c>[0-9]+)c\.)?(?P<g>[0-9]+)g\.(?P<gb>[0-9]+)gb"
    rf"(?:(?P<sign>[+-])(?P<attrs>{_ATTR}(?:,{_ATTR})*))?$"
)


@dataclass(frozen=True)
class Placement:
    """A GPU-instance placement: first memory slice and number of memory slices."""

    start: int
    size: int


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as the catalog describes it: one with MIG, or (``has_mig`` false) one without."""

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
    has_mig: bool = True  # False: a GPU of ``non_mig_gpus`` (no profiles, no slices)
    alias_notes: dict[str, str] = field(default_factory=dict)  # alias -> why it is here (not part of the name)
    nvidia_smi_names: tuple[str, ...] = ()  # what nvidia-smi --query-gpu=name prints for this model
    memory_gb: int | None = None  # nominal, as the product is sold
    origin: str = ""  # "" for the packaged catalog, else the --catalog file it came from
    pci_names: tuple[str, ...] = ()  # pci.ids' name of each of pci_device_ids, in order ("" where unknown)
    min_driver_version: str = ""  # the oldest driver with MIG on this model ("" not known), e.g. 575.51.03
    grace_system: bool = False  # GH200, GB200, GB300: CDMM (coherent memory managed by the driver) excludes MIG

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

    def name_as_written(self, written: str) -> str:
        """The catalog name of the board ``written`` (a profile's ``gpus[].model``) names, for generated comments:
        ``H100-PCIE-80GB`` for ``NVIDIA H100 PCIe``, ``H100 PCIe`` or ``0x233110DE`` (pci.ids: ``GH100 [H100
        PCIe]``), never the first name's ``SXM5``; the first name when ``written`` tells no form factor apart."""
        said = loose_key(written)
        if _PCI_ID.match(written.strip()):
            pci = canonical_pci_id(written.strip())
            said = next((loose_key(n) for i, n in zip(self.pci_device_ids, self.pci_names) if i == pci), said)
        for form in _FORMS:
            if form in said:
                return next((n for n in self.names if form in loose_key(n)), self.display_name)
        return self.display_name

    @property
    def short_name(self) -> str:
        """The shortest of the catalog names (``L40S`` rather than ``NVIDIA L40S``)."""
        return min(self.names, key=len) if self.names else self.key

    @property
    def all_names(self) -> tuple[str, ...]:
        """Every name this model answers to: id, names, aliases, nvidia-smi names."""
        return (self.key, *self.names, *self.aliases, *self.nvidia_smi_names)

    def telling_apart(self) -> str:
        """What distinguishes this model from others of the same name: memory, PCI ids, nvidia-smi names."""
        parts = [f"{self.memory_gb} GB"] if self.memory_gb else []
        parts.append("PCI " + ", ".join(self.pci_device_ids))
        if self.nvidia_smi_names:
            parts.append("nvidia-smi: " + ", ".join(repr(n) for n in self.nvidia_smi_names))
        return f"{self.key} ({'; '.join(parts)})"


@dataclass(frozen=True)
class Resolution:
    """What a GPU model name means: one model, several (ambiguous), a GPU without MIG, or nothing."""

    model: GpuModel | None
    candidates: tuple[GpuModel, ...] = ()
    non_mig: GpuModel | None = None  # a GPU without MIG of that name


# the form factors a product name tells apart (H100-SXM5-80GB, H100-PCIE-80GB, H100 NVL), as loose_key writes them
_FORMS = ("pcie", "sxm", "nvl")
# 0x233010DE (mig-parted's device-filter, nvidia-smi's pci.device_id) or 10de:2330 (lspci -nn: vendor:device)
_PCI_ID = whole(r"^(?:(0[xX])?[0-9a-fA-F]{8}|[0-9a-fA-F]{4}:[0-9a-fA-F]{4})$")
_LSPCI_ID = whole(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one per process
class Catalog:
    """Every GPU model migbake knows, with look-up by id, name, alias, nvidia-smi name or PCI id.

    ``models`` are the GPUs with MIG; ``non_mig_gpus`` the GPUs without it (a DGX Station's display
    GPU, L4, L40S, ...), which a profile may list only with MIG off. ``find`` and ``by_key`` see MIG
    models only; ``non_mig_gpu`` the others; ``find_gpu`` and ``by_pci_id`` both kinds.
    """

    models: tuple[GpuModel, ...]
    source_snapshot: str
    non_mig_gpus: tuple[GpuModel, ...] = ()
    files: tuple[str, ...] = ()  # --catalog files merged in

    def resolve(self, name: str) -> Resolution:
        """What ``name`` means: the strict normal form first, the loose one (``-`` = space) if that finds nothing."""
        by_id = _id_resolutions(self)  # profiles name models by catalog id: each is looked up many times
        found = by_id.get(name)
        if found is None:
            found = self._resolve(name)
            if name in by_id:
                by_id[name] = found
        return found

    def _resolve(self, name: str) -> Resolution:
        if not name or not name.strip():
            return Resolution(None)
        if _PCI_ID.match(name.strip()):
            by_pci = self.by_pci_id(name)
            if by_pci is not None and by_pci.has_mig:
                return Resolution(by_pci)
        strict, loose = _index(self)
        for table, k in ((strict, strict_key(name)), (loose, loose_key(name))):
            found = table.get(k, ())
            if len(found) == 1:
                return Resolution(found[0])
            if found:
                order = rank(name, [_named(m) for m in found], n=len(found), cutoff=0.0)
                return Resolution(None, tuple(self.by_key(key) for key in order))
        return Resolution(None, non_mig=self.non_mig_gpu(name))

    def find(self, name: str) -> GpuModel | None:
        """The one model ``name`` means (None when unknown, ambiguous or a GPU without MIG)."""
        return self.resolve(name).model

    def non_mig_gpu(self, name: str) -> GpuModel | None:
        """The GPU *without* MIG called ``name`` (any case, with or without ``NVIDIA``) or with that PCI id.

        For messages such as "L40S has no MIG"; the result has ``has_mig`` false and no profiles.
        """
        if not name or not name.strip():
            return None
        want, pci = loose_key(name), canonical_pci_id(name) if _PCI_ID.match(name.strip()) else ""
        for g in self.non_mig_gpus:
            if want in {loose_key(n) for n in (g.key, *g.names, *g.aliases)} or pci in g.pci_device_ids:
                return g
        return None

    def find_gpu(self, name: str) -> GpuModel | None:
        """What a profile's ``gpus[].model`` may name: a MIG model, else a GPU without MIG."""
        return self.find(name) or self.non_mig_gpu(name)

    def unknown_model(self, name: str) -> tuple[str, str]:
        """Why ``name`` is not one model, as (message, rule id): ambiguous, without MIG, or unknown."""
        found = self.resolve(name)
        if found.candidates:
            apart = "; ".join(m.telling_apart() for m in found.candidates)
            return (f"{name!r} is the name of {len(found.candidates)} GPU models with different MIG profiles: "
                    f"{apart}; write the id of yours (its memory size or nvidia-smi's pci.device_id tells "
                    "them apart)", "ambiguous-model")
        if found.non_mig is not None:
            g = found.non_mig
            short = g.short_name
            called = "" if strict_key(name) == strict_key(short) else f"{name!r} is the {short}; "
            return (f"{short} has no MIG ({called}PCI {', '.join(g.pci_device_ids)}): there is no MIG layout "
                    "to restore on it (`migbake gpus` lists the GPUs with MIG)", "no-mig")
        close = self.close_matches(name)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return (f"unknown GPU model {name!r}{hint} (`migbake gpus` lists every model; for a GPU migbake does "
                "not know yet, add it with --catalog FILE)", "unknown-model")

    def by_key(self, key: str) -> GpuModel:
        """The model with catalog id ``key`` (KeyError if unknown)."""
        for m in self.models:
            if m.key == key:
                return m
        raise KeyError(key)

    def by_pci_id(self, pci_id: str) -> GpuModel | None:
        """The GPU with PCI id ``pci_id`` (``0xDDDDVVVV``, any case, optional ``0x``): MIG models first."""
        found = self.all_by_pci_id(pci_id)
        return found[0] if found else None

    def all_by_pci_id(self, pci_id: str) -> list[GpuModel]:
        """Every GPU with PCI id ``pci_id``, MIG models first (a board's pre-production names share its id)."""
        want = canonical_pci_id(pci_id)
        return [m for m in (*self.models, *self.non_mig_gpus) if want in m.pci_device_ids]

    def close_matches(self, name: str, n: int = 3) -> list[str]:
        """Catalog ids that ``name`` most likely means, best first (see ``gpunames.rank``)."""
        return rank(name, [_named(m) for m in self.models], n=n)

    def owners_of_profile(self, profile_name: str) -> list[GpuModel]:
        """Every model that has a GPU-instance profile called ``profile_name``."""
        return [m for m in self.models if m.profile(profile_name) is not None]

    @property
    def keys(self) -> tuple[str, ...]:
        """Every catalog id."""
        return tuple(m.key for m in self.models)


def _named(m: GpuModel) -> Named:
    return Named(m.key, m.names, (*m.aliases, *m.nvidia_smi_names))


Index = dict[str, tuple[GpuModel, ...]]


@lru_cache(maxsize=8)
def _index(catalog: Catalog) -> tuple[Index, Index]:
    """Strict and loose normal form -> every model with such a name (two or more: an ambiguous name)."""
    strict: Index = {}
    loose: Index = {}
    for m in catalog.models:
        for x in m.all_names:
            for table, k in ((strict, strict_key(x)), (loose, loose_key(x))):
                if m not in table.get(k, ()):
                    table[k] = (*table.get(k, ()), m)
    return strict, loose


@lru_cache(maxsize=8)
def _id_resolutions(catalog: Catalog) -> dict[str, Resolution | None]:
    """What each catalog id resolves to, filled in at its first look-up (None: not looked up yet)."""
    return dict.fromkeys(m.key for m in catalog.models)


def gpu_instance_name(name: str) -> str | None:
    """The GPU-instance profile a layout name uses: ``1c.3g.40gb`` -> ``3g.40gb``; None if not a profile name."""
    m = PROFILE_NAME_RE.match(name)
    if not m:
        return None
    suffix = f"{m['sign']}{m['attrs']}" if m["sign"] else ""
    return f"{int(m['g'])}g.{int(m['gb'])}gb{suffix}"


def canonical_pci_id(pci_id: str) -> str:
    """``0x233510de`` or lspci's ``10de:2335`` -> ``0x233510DE`` (mig-parted's device-filter form)."""
    s = pci_id.strip()
    lspci = _LSPCI_ID.match(s)
    if lspci:
        return "0x" + (lspci[2] + lspci[1]).upper()
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


def _model(raw: dict[str, Any], origin: str = "") -> GpuModel:
    memory = raw.get("memory_gb_nominal")
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
        alias_notes={str(k): str(v) for k, v in (raw.get("alias_notes") or {}).items()},
        nvidia_smi_names=tuple(str(n["name"]) for n in raw.get("nvidia_smi_names", ())),
        memory_gb=memory if isinstance(memory, int) and not isinstance(memory, bool) else None,
        origin=origin,
        pci_names=tuple(str(p.get("pci_ids_name", "")) for p in raw.get("pci_device_ids", ())),
        min_driver_version=str(raw.get("min_driver_version", "")),
        grace_system=raw.get("grace_system") is True,
    )


def _non_mig(raw: dict[str, Any]) -> GpuModel:
    return GpuModel(
        key=raw["key"], names=tuple(raw.get("names", ())), aliases=tuple(raw.get("aliases", ())),
        pci_device_ids=tuple(canonical_pci_id(p["id"]) for p in raw["pci_device_ids"]),
        generation=raw["generation"], mig_mode_persists=False, total_compute_slices=0, total_memory_slices=0,
        max_gpu_instances=0, min_driver="", profiles=(), ci_counts={}, status="", has_mig=False,
    )


def _non_mig_list(data: dict[str, Any]) -> list[GpuModel]:
    return [_non_mig(g) for g in (data.get("non_mig_gpus") or {}).get("gpus", ())]


def build_catalog(raw: dict[str, Any], extra: Sequence[tuple[str, dict[str, Any]]] = ()) -> Catalog:
    """A catalog from the packaged data ``raw`` plus catalog files ``extra`` ((name, data), later wins).

    A model of a file replaces the model with the same id, else it is added; files' models come
    first, so that their names win over the packaged ones.
    """
    models = {g["key"]: _model(g) for g in raw["gpus"]}
    added: dict[str, GpuModel] = {}
    non_mig = _non_mig_list(raw)
    for origin, data in extra:
        for g in data.get("gpus", ()):
            models.pop(g["key"], None)
            added.pop(g["key"], None)
            added[g["key"]] = _model(g, origin)
        non_mig += _non_mig_list(data)
    snap = raw.get("snapshots", {}).get("NVIDIA/mig-parted", "")
    return Catalog(models=(*added.values(), *models.values()), source_snapshot=str(snap),
                   non_mig_gpus=tuple(non_mig), files=tuple(origin for origin, _ in extra))


@lru_cache(maxsize=4)
def load_catalog(file: Path | None = None) -> Catalog:
    """The packaged catalog, plus the catalog file ``file`` (``--catalog``) when one is given; each parsed once."""
    raw = json.loads(catalog_text())
    if file is None:
        return build_catalog(raw)
    # only a --catalog file needs the JSON Schema pass (and jsonschema's import time): `gpus` stays quick
    from migbake.gpu.catalogfile import read_catalog_file

    return build_catalog(raw, [(str(file), read_catalog_file(file))])


@dataclass(frozen=True)
class CatalogChoice:
    """Which catalog a command uses: the packaged one, plus the catalog file ``file`` when there is one.

    The command line makes one (``--catalog`` / ``MIGBAKE_CATALOG``) and passes it down. ``load()`` reads it
    at the first need: a stage that needs no catalog for an input (a profile that is not a mapping) never
    reads the file, so a bad catalog file is reported only where the catalog is used.
    """

    file: Path | None = None

    def load(self) -> Catalog:
        """The catalog itself (parsed once per process)."""
        return load_catalog(self.file)


PACKAGED = CatalogChoice()  # the packaged catalog alone: the default wherever no catalog is passed
