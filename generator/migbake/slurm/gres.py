"""What slurmd counts on a node of a profile: the ``Gres=`` counts per kind of node and the explicit device lines.

How slurmd names a MIG device when ``gres.conf`` says ``AutoDetect=nvml``
(SchedMD/slurm@slurm-25-11-0-1:src/plugins/gpu/nvml/gpu_nvml.c, ``_get_system_gpu_list_nvml`` and
``_handle_mig``; the same from slurm-23-02-6-1 to master): the parent GPU's NVML name
(``nvmlDeviceGetName``), lowercased with spaces made ``_`` (``gpu_common_underscorify_tolower``,
src/plugins/gpu/common/gpu_common.c) and cut at its first ``-``, then the MIG device's own NVML name
from its ``mig`` on: ``NVIDIA A100-SXM4-80GB MIG 3g.40gb`` gives ``_3g.40gb``, so the type is
``nvidia_a100_3g.40gb``. That part is the driver's profile name (``1g.18gb``, ``1c.3g.40gb``,
``1g.10gb+me``), the name the catalog and mig-parted use, so every model with MIG is typed.

Older slurmd (slurm-22-05-8-1, Debian 12's, to slurm-23-02-5-1) built the part from
``nvmlDeviceGetAttributes`` instead: ``_<gpuInstanceSliceCount>g.<roundl(memorySizeMB / 1024)>gb``, the
memory of the instance rather than its name (an H200 ``1g.18gb`` was ``1g.16gb``); migbake does not write
those names (docs/slurm.md says what to do there). Current slurmd falls back to the memory, rounded up, with
``<n>c.`` for a compute instance, only when the MIG device's name has no ``mig`` in it.

``slurm.conf`` need not repeat the board's part: slurmd cuts a detected type down to a configured type
that is a substring of it (``_normalize_sys_gres_types`` in ``src/plugins/gres/gpu/gres_gpu.c``;
doc/html/gres.shtml: "This type must be a substring of the MIG Profile string"). migbake writes the
GPU instance's ``<slices>g.<GB>gb``, which is the same on every board of a model (SXM, PCIe, ...) and a
substring of every form of it: a compute instance's ``..._1c.3g.40gb`` and a ``..._1g.10gb+me`` count
as ``3g.40gb`` and ``1g.10gb``. A whole GPU (MIG off) is named after its board alone, which differs
between a model's boards, so a node with one is untyped (``gpu:N``, Slurm's plain form).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel
from migbake.gpu.driverplacement import EntryPlacements
from migbake.gpu.placement import PlacedInstance
from migbake.kubernetes.resources import NodeKind
from migbake.profile.nodeprofile import NodeProfile

# the driver's MIG capability minors (/proc/driver/nvidia-caps/mig-minors): config 1, monitor 2, then per
# GPU 15 GPU instances, each its access minor followed by eight compute-instance minors
_CAPS_FIRST, _PER_GI, _GIS = 3, 9, 15


def slurm_applies(profile: NodeProfile) -> bool:
    """A ``slurm`` section, or slurmd among the consumers: generate writes the ``slurm/`` files."""
    return profile.slurm.present or any(_is_slurmd(c.unit) for c in profile.consumers)


def _is_slurmd(unit: str) -> bool:
    return unit == "slurmd.service" or unit.startswith("slurmd@")


def mig_type(name: str) -> str | None:
    """The GPU instance's ``<slices>g.<GB>gb`` of a layout name (``1c.3g.40gb+me`` -> ``3g.40gb``): a substring of
    the type slurmd reports for every MIG device of that GPU instance; None for a name that is not a profile."""
    m = PROFILE_NAME_RE.match(name)
    return None if m is None else f"{int(m['g'])}g.{int(m['gb'])}gb"


def nvml_prefix(nvidia_smi_name: str) -> str:
    """The board's part of slurmd's MIG type: ``NVIDIA H100 80GB HBM3`` -> ``nvidia_h100_80gb_hbm3``."""
    return nvidia_smi_name.lower().replace(" ", "_").split("-")[0]


@dataclass(frozen=True)
class SlurmNode:
    """One kind of node: its label, GPUs, the Gres counts (type -> count; None: untyped), why untyped,
    its folder under ``slurm/`` ("" for the only kind) and its explicit device lines (``autodetect: false``)."""

    label: str
    gpus: int | None
    counts: dict[str | None, int]
    why_untyped: str
    key: str = ""
    devices: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Every GPU-like device slurmd counts: MIG devices, and whole GPUs with MIG off."""
        return sum(self.counts.values())

    def gres(self) -> str:
        """``gpu:3g.40gb:8`` or ``gpu:8`` (empty when there is nothing)."""
        if not self.total:
            return ""
        if None in self.counts:
            return f"gpu:{self.total}"
        return ",".join(f"gpu:{t}:{n}" for t, n in self.counts.items())


def slurm_nodes(profile: NodeProfile, kinds: Sequence[NodeKind], placed: EntryPlacements) -> list[SlurmNode]:
    """Per kind of node (``kinds``: one per GPU model when the image serves several), what slurmd will count;
    explicit device lines from the entries' placements (``placed``: the render plan's, predicted once)."""
    models = profile.models
    out = []
    for kind in kinds:
        counts: dict[str | None, int] = {}
        whole = False
        gpus: int | None = 0
        for i, n in zip(kind.groups, kind.gpus):
            group = profile.gpus[i]
            gpus = None if n is None or gpus is None else gpus + n
            per_gpu: dict[str | None, int] = {None: 1} if not group.mig_enabled else {}
            whole = whole or not group.mig_enabled
            for name, count in group.layout if group.mig_enabled else ():
                t = mig_type(name)
                per_gpu[t] = per_gpu.get(t, 0) + count
            for t, c in per_gpu.items():
                counts[t] = counts.get(t, 0) + c * (n or 0)
        why = ""
        if profile.slurm.gres_types == "untyped":
            why = "slurm.gres_types is untyped"
        elif whole:
            why = "a GPU with MIG off is named after its board, which differs between a model's boards"
        if why:
            counts = {None: sum(counts.values())}
        key = models[kind.groups[0]].key if len(kinds) > 1 else ""
        node = SlurmNode(kind.label, gpus, counts, why, key)
        if not profile.slurm.autodetect:
            node = replace(node, devices=tuple(_explicit_lines(profile, kind, node, placed)))
        out.append(node)
    return out


def gi_id(start: int, size: int, total_slices: int) -> int:
    """The GPU instance id the driver gives a placement: 0 for the whole GPU, then halves, quarters, ..."""
    return total_slices // size - 1 + start // size


def _explicit_lines(profile: NodeProfile, kind: NodeKind, node: SlurmNode, placed: EntryPlacements
                    ) -> Iterator[str]:
    """One line per device slurmd counts on a node of ``kind``: every MIG device (each compute instance), or
    the whole GPU with MIG off; all typed or all untyped, as ``node.counts`` (slurmd refuses a mix)."""
    models = profile.models
    index = 0
    for i, n in zip(kind.groups, kind.gpus):
        group, model = profile.gpus[i], models[i]
        indices = range(index, index + (n or 0)) if group.devices == "all" else group.devices
        index += n or 0
        for gpu in indices:
            yield from _gpu_lines(group.mig_enabled, placed[i], model, gpu, None in node.counts)


def _gpu_lines(mig: bool, placed: tuple[PlacedInstance, ...], model: GpuModel, gpu: int, untyped: bool
               ) -> Iterator[str]:
    if not mig:
        yield f"Name=gpu File=/dev/nvidia{gpu}"
        return
    # where apply puts each GPU instance: the plan's prediction (gpu.driverplacement), as restore.sh and the
    # DRA device names have it; by start, as the lines were before
    for instance in sorted(placed, key=lambda p: (p.start, p.profile)):
        t = "" if untyped else f" Type={mig_type(instance.profile)}"
        gi_index = gi_id(instance.start, instance.size, model.total_memory_slices)
        gi = _CAPS_FIRST + gpu * _GIS * _PER_GI + gi_index * _PER_GI
        # one MIG device per compute instance: compute instances 0, 1, ... of the GPU instance, in creation order
        for ci in range(len(instance.carries) or 1):
            yield (f"Name=gpu{t} MultipleFiles=/dev/nvidia{gpu},/dev/nvidia-caps/nvidia-cap{gi},"
                   f"/dev/nvidia-caps/nvidia-cap{gi + 1 + ci}")


@dataclass(frozen=True)
class SlurmPlan:
    """What the ``slurm/`` files say: the node's name, how slurmd finds devices, each kind of node, device lines.

    With named layouts (``mig.layouts``) the files are per name: ``named`` holds one plan per layout name (its
    ``layout`` that name, its files under ``slurm/NAME/``), and this plan's own ``nodes`` are empty.
    """

    node_name: str
    autodetect: bool
    nodes: tuple[SlurmNode, ...]
    layout: str = ""  # the layout name these files are for ("": the one unnamed layout)
    named: tuple[SlurmPlan, ...] = ()  # named layouts: one plan per name, in the profile's order

    @property
    def folder(self) -> str:
        """Where this plan's files go in OUT: ``slurm/``, or ``slurm/NAME/`` for a named layout."""
        return f"slurm/{self.layout}/" if self.layout else "slurm/"


def slurm_plan(profile: NodeProfile, kinds: Sequence[NodeKind], placed: EntryPlacements,
               named: Sequence[tuple[str, EntryPlacements]] = ()) -> SlurmPlan | None:
    """The Slurm files' content for ``profile`` (None when it writes none), from its kinds of node and the
    entries' placements (the render plan's); with named layouts, ``named`` holds each name's placements (the
    kinds are the same under every name: the GPUs do not change with the layout)."""
    if not slurm_applies(profile):
        return None
    s, autodetect = profile.slurm, profile.slurm.autodetect
    if named:
        # each pool has its own hosts: slurm.node_name as a mapping gives each layout name its NodeName=
        return SlurmPlan(s.node_name or profile.name, autodetect, (), named=tuple(
            SlurmPlan(s.node_name_for(name) or profile.name, autodetect,
                      tuple(slurm_nodes(profile.named(name), kinds, where)), name)
            for name, where in named))
    return SlurmPlan(s.node_name or profile.name, autodetect, tuple(slurm_nodes(profile, kinds, placed)))


def show_lines(profile: NodeProfile, nodes: Sequence[SlurmNode], kinds: Sequence[NodeKind],
               folder: str = "slurm/") -> list[str]:
    """Lines for ``migbake show``: what slurmd will count, per kind of node (``nodes`` and ``kinds``: the render
    plan's, ``RenderPlan.slurm.nodes`` and ``RenderPlan.expect.node_kinds``; ``folder``: where the files are,
    ``SlurmPlan.folder``)."""
    if profile.slurm.autodetect:
        where = f"{folder}gres.conf: AutoDetect=nvml"
    elif len(nodes) > 1:
        where = f"{folder}<model>/gres.conf per kind of node: explicit MIG device lines"
    else:
        where = f"{folder}gres.conf: explicit MIG device lines"
    lines = [f"Slurm GRES ({where}; {folder}slurm.conf.node):"]
    for node in nodes:
        if node.gpus is None:
            lines.append(f"  {node.label}: the GPU count is unknown (set gpu_count for the Gres= counts)")
            continue
        lines.append(f"  {node.label} ({node.gpus} GPUs): Gres={node.gres() or '(no GPU devices)'}")
        if node.why_untyped and node.total:
            lines.append(f"    untyped: {node.why_untyped}")
    models = profile.models
    typed = [(t, models[kind.groups[0]]) for node, kind in zip(nodes, kinds)
             for t in node.counts if t and models[kind.groups[0]].nvidia_smi_names][:1]
    if typed:
        t, m = typed[0]
        board = m.nvidia_smi_names[0]
        lines.append(f"  slurmd's own type names start with the board's NVML name ({nvml_prefix(board)}_{t} on "
                     f"{board}); Gres= names the part after it, which slurmd matches as a substring")
    return lines

