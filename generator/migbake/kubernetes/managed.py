"""What GKE, AKS and Bottlerocket express natively: one uniform MIG profile per GPU model (``gpu/data/``).

GKE (``gpu-partition-size``), AKS (``gpuInstanceProfile MIG<N>g``) and Bottlerocket
(``settings.kubelet-device-plugins.nvidia.mig.profile."<model>"``) each fill every GPU of a node with one
MIG profile, as many times as it fits (the data file's sources say where each table comes from). A
layout is native there when every ``gpus`` entry of a model has MIG on with exactly that: one profile,
the count the platform creates. The rules (raw data) and the render plan (typed profile) both ask here,
through ``Entry``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from migbake.packagedata import managed_text
from migbake.wording import instances

Platform = Literal["gke", "aks", "bottlerocket"]
PLATFORM_NAMES = {"gke": "GKE", "aks": "AKS", "bottlerocket": "Bottlerocket"}


@dataclass(frozen=True)
class Entry:
    """One ``gpus`` entry as the platforms see it: where it is, its catalog model, MIG on or off, its layout."""

    pointer: str
    model: str  # the catalog model's key ("" when the catalog does not know it)
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]
    gpu_count: int | None = None  # how many GPUs of the node it covers, when the profile says


@dataclass(frozen=True)
class Verdict:
    """Whether one platform expresses the layout of one GPU model natively, and how (or why not)."""

    platform: Platform
    model: str
    profile: str = ""  # the one MIG profile on every GPU, when native
    count: int = 0  # ... and how many of it on each GPU
    value: str = ""  # the platform's own word for it: the GKE size, MIG<N>g, the Bottlerocket profile
    key: str = ""  # GKE accelerator type, Bottlerocket model key
    pointer: str = ""  # the entry that breaks it, when not native
    reason: str = ""  # why not, when not native

    @property
    def native(self) -> bool:
        """Whether the platform can say it."""
        return not self.reason


@lru_cache(maxsize=1)
def managed_data() -> dict[str, Any]:
    """The packaged table (``gpu/data/managed-mig.json``)."""
    data: dict[str, Any] = json.loads(managed_text())
    return data


def platform_models(platform: Platform) -> dict[str, Any]:
    """The catalog models a platform knows, with its table for each."""
    models: dict[str, Any] = managed_data()[platform]["models"]
    return models


def _native_profiles(platform: Platform, row: Any) -> dict[str, tuple[str, int, str]]:
    """``{MIG profile: (the platform's value, count per GPU, model key)}`` of a model the platform knows (``row``:
    its table in ``platform_models``; None: a model it does not know)."""
    if row is None:
        return {}
    if platform == "gke":
        return {size: (size, int(n), str(row["accelerator"])) for size, n in row["sizes"].items()}
    if platform == "aks":
        return {str(p["size"]): (value, int(p["count"]), "") for value, p in row["profiles"].items()}
    return {name: (name, int(n), str(row["key"])) for name, n in row["profiles"].items()}


def _why_mixed(platform: Platform) -> str:
    if platform == "bottlerocket":
        issue = managed_data()["bottlerocket"]["mixed_issue"]
        return (f"Bottlerocket sets one MIG profile per GPU model (mig.profile); mixed layouts are {issue}, "
                "still open")
    if platform == "gke":
        return "GKE gives a node pool one gpu-partition-size, the same on every GPU"
    return "AKS gives a node pool one gpuInstanceProfile, the same on every GPU"


def verdicts(platform: Platform, entries: Sequence[Entry]) -> list[Verdict]:
    """For each GPU model of the entries (in their order), whether ``platform`` expresses its layout."""
    by_model: dict[str, list[Entry]] = {}
    for e in entries:
        by_model.setdefault(e.model, []).append(e)
    models = platform_models(platform)  # once: every model's verdict reads the same table
    return [_verdict(platform, model, group, models) for model, group in by_model.items()]


def _verdict(platform: Platform, model: str, group: Sequence[Entry], models: dict[str, Any]) -> Verdict:
    name = PLATFORM_NAMES[platform]
    first = group[0]
    native = _native_profiles(platform, models.get(model))
    known = ", ".join(models)
    if not native:
        return Verdict(platform, model, pointer=f"{first.pointer}/model",
                       reason=f"{model or 'this GPU'} is not a GPU model {name} partitions natively ({known})")
    for e in group:
        if not e.mig_enabled:
            return Verdict(platform, model, pointer=e.pointer,
                           reason=f"MIG is off here: {name} partitions every {model} GPU of the node")
        if len(e.layout) != 1:
            return Verdict(platform, model, pointer=f"{e.pointer}/mig/layout",
                           reason=f"{instances(dict(e.layout)) or 'no instances'}: {_why_mixed(platform)}")
        if e.layout != first.layout:
            return Verdict(platform, model, pointer=f"{e.pointer}/mig/layout",
                           reason=f"{instances(dict(e.layout))} differs from {first.pointer} "
                                  f"({instances(dict(first.layout))}): {_why_mixed(platform)}")
    profile, count = first.layout[0]
    if profile not in native:
        return Verdict(platform, model, pointer=f"{first.pointer}/mig/layout",
                       reason=f"{profile} is not a size {name} offers for {model} ({', '.join(native)})")
    value, fills, key = native[profile]
    if count != fills:
        return Verdict(platform, model, pointer=f"{first.pointer}/mig/layout/{profile}",
                       reason=f"{profile} x{count}: {name} fills every {model} GPU with {profile} x{fills}")
    return Verdict(platform, model, profile, count, value, key)


def entries_of(gpus: Sequence[Any]) -> list[Entry]:
    """The typed profile's ``gpus`` (``GpuGroup``) as platform entries."""
    return [Entry(f"/gpus/{i}", g.gpu.key, g.mig_enabled, g.layout,
                  None if g.devices == "all" else len(g.devices)) for i, g in enumerate(gpus)]


def format_command(template: str, values: Mapping[str, object]) -> str:
    """A flag or Terraform line of the data file with the verdict's values in its ``{fields}``."""
    return template.format(**values)


def _gpus_per_node(entries: Sequence[Entry], model: str, one_model: bool, gpu_count: int | None) -> str:
    counts = [e.gpu_count for e in entries if e.model == model]
    if all(c is not None for c in counts):
        return str(sum(c for c in counts if c is not None))
    return str(gpu_count) if one_model and gpu_count else "COUNT"


def managed_report(entries: Sequence[Entry], gpu_count: int | None, kubelet: bool,
                   allocation: str = "device-plugin", named: bool = False) -> list[str]:
    """``migbake show``'s lines: per platform and GPU model, native or not, with the flag and Terraform or why
    (``named``: one of the profile's named layouts, for which no settings.toml is written)."""
    lines = ["", "Native MIG elsewhere (one MIG profile on every GPU of a node pool or instance):"]
    one_model = len({e.model for e in entries}) == 1
    dra = allocation != "device-plugin"
    written = kubelet and not dra and not named and all(v.native for v in verdicts("bottlerocket", entries))
    platforms: tuple[Platform, ...] = ("gke", "aks", "bottlerocket")
    for platform in platforms:
        table = managed_data()[platform]
        for v in verdicts(platform, entries):
            head = f"  {PLATFORM_NAMES[v.platform]}, {v.model or 'unknown model'}:"
            if not v.native:
                lines.append(f"{head} not native: {v.pointer}: {v.reason}")
            elif platform == "bottlerocket":
                where = "OUT/bottlerocket/settings.toml" if written else (
                    f"no file: kubernetes.allocation {allocation} (Bottlerocket's MIG settings are its device "
                    "plugin's)" if dra else
                    "no file: named layouts, chosen at boot; Bottlerocket's settings hold one profile" if named else
                    "no file: another model is not native" if kubelet else "no file: kubelet.present is false")
                lines.append(f'{head} native: mig.profile."{v.key}" = "{v.value}" ({where})')
            else:
                values = {"accelerator": v.key, "count": _gpus_per_node(entries, v.model, one_model, gpu_count),
                          "size": v.value, "value": v.value}
                word = f"gpu-partition-size={v.value}" if platform == "gke" else f"gpuInstanceProfile {v.value}"
                lines.append(f"{head} native: {word} ({v.profile} x{v.count} on every GPU)")
                lines.append(f"    {format_command(table['flag'], values)}")
                lines.append(f"    Terraform: {format_command(table['terraform'], values)}")
    return lines
