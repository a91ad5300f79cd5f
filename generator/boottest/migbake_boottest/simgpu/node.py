"""The simulated GPU node of a boot test: which GPUs, their simgpu.conf generated from the catalog.

The fake ``libnvidia-ml.so.1`` (``simgpu/``, C) reads a node description in its own small text format
(``simgpu/README.md``). Everything in it is derived here from migbake's catalog: the GPU-instance
profile table (NVML profile index, id, slices, instance count, memory, placements) and the
compute-instance profiles go-nvlib enumerates. The profile memory is chosen so that go-nvlib's
rounding (``getMigMemorySizeGB``) gives back exactly the catalog's names, as the real H200's
143771 MiB gives ``1g.18gb``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel, MigProfile
from migbake.gpu.driverplacement import placements_of
from migbake.profile.nodeprofile import NodeProfile
from migbake_boottest.errors import BootTestError

# go-nvml const.go: the NVML GPU-instance profile constants (the index mig-parted walks)
GI_PROFILE_INDEX = {
    "GPU_INSTANCE_PROFILE_1_SLICE": 0, "GPU_INSTANCE_PROFILE_2_SLICE": 1, "GPU_INSTANCE_PROFILE_3_SLICE": 2,
    "GPU_INSTANCE_PROFILE_4_SLICE": 3, "GPU_INSTANCE_PROFILE_7_SLICE": 4, "GPU_INSTANCE_PROFILE_8_SLICE": 5,
    "GPU_INSTANCE_PROFILE_6_SLICE": 6, "GPU_INSTANCE_PROFILE_1_SLICE_REV1": 7,
    "GPU_INSTANCE_PROFILE_2_SLICE_REV1": 8, "GPU_INSTANCE_PROFILE_1_SLICE_REV2": 9,
    "GPU_INSTANCE_PROFILE_1_SLICE_GFX": 10, "GPU_INSTANCE_PROFILE_2_SLICE_GFX": 11,
    "GPU_INSTANCE_PROFILE_4_SLICE_GFX": 12, "GPU_INSTANCE_PROFILE_1_SLICE_NO_ME": 13,
    "GPU_INSTANCE_PROFILE_2_SLICE_NO_ME": 14, "GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME": 15,
    "GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME": 16, "GPU_INSTANCE_PROFILE_3_SLICE_GFX": 17,
}
# compute-instance profile index -> compute slices (REV1 and 7_SLICE_NVL are never offered here)
CI_PROFILE_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}
NVIDIA_MODULES = ("nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)\n"
                  "nvidia 14299136 - - Live 0xffffffffc0400000 (O)\n")  # as on the real H200
SUBSYSTEM = (0x18BF, 0x10DE)  # the real H200's subsystem device and vendor
# What a real driver answered, per model: the device memory (MiB, nvmlDeviceGetMemoryInfo) and, per
# GPU-instance profile index, nvmlDeviceGetGpuInstanceProfileInfo's (memorySizeMB, SMs, copy engines,
# decoders, encoders, JPEG, OFA). H200: driver 580.159.04, tests/fixtures/h200/nvml-probe.txt. Models
# without a capture get values derived from the catalog (the names and counts still come out right).
REAL_DRIVER: dict[str, tuple[int, dict[int, tuple[int, int, int, int, int, int, int]]]] = {
    "h200-141gb": (143771, {0: (16384, 16, 1, 1, 0, 1, 0), 1: (33280, 32, 2, 2, 0, 2, 0),
                            2: (71424, 60, 3, 3, 0, 3, 0), 3: (71424, 64, 4, 4, 0, 4, 0),
                            4: (143360, 132, 8, 7, 0, 7, 1), 7: (16384, 16, 1, 1, 0, 1, 1),
                            9: (33280, 26, 1, 1, 0, 1, 0)}),
}


@dataclass(frozen=True)
class GpuState:
    """What one GPU must look like after a boot: MIG mode and instances (profile name -> count)."""

    mig_enabled: bool
    layout: Mapping[str, int]
    placements: tuple[str, ...] = ()  # kubernetes.allocation dra: the plan's ``PROFILE@START`` (gpu.driverplacement)


@dataclass(frozen=True)
class SimulatedNode:
    """The GPUs a boot test simulates, and what the profile promises for each of them."""

    model: GpuModel
    gpus: tuple[GpuState, ...]

    @property
    def count(self) -> int:
        return len(self.gpus)

    def pci_address(self, index: int) -> str:
        """The sysfs address of GPU ``index`` (increasing, so NVML and sysfs agree on the order)."""
        return f"0000:{0x18 + 0x10 * index:02x}:00.0"


def node_for_profile(profile: NodeProfile) -> SimulatedNode:
    """One model (the first ``gpus`` entry's), ``gpu_count`` GPUs, each with the layout the profile gives it.

    As in mig-parted, the last entry of that model that names a GPU decides it; a node profile with
    several models is simulated with its first model (the others' entries must then not match).
    """
    models = [g.gpu if g.gpu.has_mig else None for g in profile.gpus]  # resolved once, with the profile
    first = models[0]
    if first is None:
        raise BootTestError(f"unknown GPU model {profile.gpus[0].model!r}")
    listed = [i for g in profile.gpus if g.devices != "all" for i in g.devices]
    count = profile.gpu_count or (max(listed) + 1 if listed else 1)
    states = []
    for index in range(count):
        state = GpuState(False, {})
        for group, model in zip(profile.gpus, models):
            if model is first and (group.devices == "all" or index in group.devices):
                placed = (placements_of(model, group.layout_dict) if group.mig_enabled
                          and profile.kubernetes.allocation == "dra" else ())
                state = GpuState(group.mig_enabled, dict(group.layout),
                                 tuple(sorted(f"{p.profile}@{p.start}" for p in placed)))
        states.append(state)
    return SimulatedNode(first, tuple(states))


def node_of_model(model: GpuModel, layouts: list[dict[str, int]]) -> SimulatedNode:
    """A node of ``len(layouts)`` GPUs of ``model`` with MIG on and these layouts (host tests)."""
    return SimulatedNode(model, tuple(GpuState(True, dict(layout)) for layout in layouts))


def total_gb(model: GpuModel) -> int:
    """The device memory in whole GB (rounded up) under which go-nvlib names every profile as the catalog."""
    wanted = []
    for p in model.profiles:
        match = PROFILE_NAME_RE.match(p.name)
        if match is None:
            raise BootTestError(f"{model.key}: cannot read the memory of profile {p.name!r}")
        wanted.append((_eighths(model, p), int(match["gb"])))
    for gb in range(1, 2048):
        if all(round_half_away(k * gb / 8) == size for k, size in wanted):
            return gb
    raise BootTestError(f"{model.key}: no device memory size gives the catalog's profile names")


def round_half_away(x: float) -> int:
    """Go's ``math.Round`` (halves away from zero), unlike Python's banker's ``round``."""
    return math.floor(x + 0.5)


def render_config(node: SimulatedNode, *, state_dir: str, persist_dir: str, knobs: str,
                  call_log: str = "") -> str:
    """The text of simgpu.conf for ``node``: MIG mode in ``persist_dir`` if it survives a reboot."""
    model = node.model
    memory_mib, real = REAL_DRIVER.get(model.key, (total_gb(model) * 1024 - 600, {}))
    device = model_device_id(model)
    lines = [
        f"# simgpu node (migbake boot tests only): {node.count}x {model.key}, generated from the catalog",
        # the driver's own name (nvidia-smi --query-gpu=name, nvmlDeviceGetName) when the catalog knows it
        f"name {model.nvidia_smi_names[0] if model.nvidia_smi_names else model.display_name}",
        f"gpus {node.count}",
        f"memory_mib {memory_mib}",
        f"compute_slices {model.total_compute_slices}",
        f"memory_slices {model.total_memory_slices}",
        f"max_gpu_instances {model.max_gpu_instances}",
        f"reset_required {int(model.mig_mode_persists)}",
        f"mode_file {persist_dir if model.mig_mode_persists else state_dir}/mig-mode",
        f"instances_file {state_dir}/instances",
        f"knobs {knobs}",
    ] + ([f"call_log {call_log}"] if call_log else [])
    for index in range(node.count):
        lines.append(f"pci {index} {node.pci_address(index)} 0x{device:04x} 0x{SUBSYSTEM[0]:04x}{SUBSYSTEM[1]:04x}")
    for p in model.profiles:
        index = GI_PROFILE_INDEX[p.nvml_enum]
        eighths = _eighths(model, p)
        media = int(p.media_extension)
        info = real.get(index) or (int(memory_mib * eighths * 0.97 / 8), 16 * p.g + 4 * (p.g == 7),
                                      p.g + (1 if p.g == 7 else 0), p.g, 0, p.g, int(media or p.g == 7))
        profile_id = p.nvidia_smi_id if p.nvidia_smi_id is not None else 100 + index
        lines.append(f"profile {index} {profile_id} {p.g} {p.max_count} {' '.join(map(str, info))} {media}")
        lines.append(f"label {index} {p.name}")
        lines.append(f"placements {index} " + " ".join(f"{x.start}:{x.size}" for x in p.placements))
        for ci_index, c in CI_PROFILE_SLICES.items():
            if c <= p.g and (c == p.g or 2 * c <= p.g + 1):  # go-nvlib's VisitMigProfiles rule
                lines.append(f"ci {index} {ci_index} {c} {p.g // c}")
    return "\n".join(lines) + "\n"


def write_sysfs(node: SimulatedNode, devices_dir: Path) -> None:
    """Stand-ins for /sys/bus/pci/devices/<addr>/ of every simulated GPU (what go-nvlib's nvpci reads)."""
    device = model_device_id(node.model)
    for index in range(node.count):
        folder = devices_dir / node.pci_address(index)
        folder.mkdir(parents=True, exist_ok=True)
        bar = 0x100000000000 + index * 0x10000000000
        files = {
            "vendor": "0x10de", "device": f"0x{device:04x}", "class": "0x030200", "revision": "0xa1",
            "subsystem_device": f"0x{SUBSYSTEM[0]:04x}", "subsystem_vendor": f"0x{SUBSYSTEM[1]:04x}",
            "numa_node": "-1", "reset_method": "flr",
            "resource": "\n".join([f"0x{bar + 0x4002000000:016x} 0x{bar + 0x4002ffffff:016x} 0x000000000014220c",
                                   "0x0000000000000000 0x0000000000000000 0x0000000000000000",
                                   f"0x{bar:016x} 0x{bar + 0x3fffffffff:016x} 0x000000000014220c"]
                                  + ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 4),
        }
        for name, text in files.items():
            (folder / name).write_text(text + "\n")


def model_device_id(model: GpuModel) -> int:
    """The 16-bit PCI device id of ``model``'s first catalog PCI id (``0x233510DE`` -> 0x2335)."""
    return int(model.pci_device_ids[0][2:6], 16)


def _eighths(model: GpuModel, profile: MigProfile) -> int:
    return profile.memory_slices * 8 // model.total_memory_slices
