"""The driver gates of preflight: the oldest driver with MIG per GPU model, and a 570 driver bug with mixed nodes.

Both preflights (``migbake preflight`` on a capture, the generated script on the node) read the same
facts from here, so that they word the ``driver-mig`` row alike:

- The minimum driver per model is the catalog's ``min_driver_version`` (the MIG User Guide's table,
  https://docs.nvidia.com/datacenter/tesla/mig-user-guide/620/deployment-considerations.html). Below it
  the row FAILs and names the minimum.
- "For drivers 570.124.06, 570.133.20, 570.148.08, and 570.158.01, GPU workloads cannot be scheduled on
  nodes that have a mix of MIG slices and full GPUs" (pods stay Pending; upgrade to 570.172.08:
  NVIDIA/cloud-native-docs:gpu-operator/release-notes.rst, GPU Operator 25.3.2 known issues,
  NVIDIA/gpu-operator#1361). A Kubernetes profile with one entry MIG on and another MIG off, on a driver
  from 570.124.06 to 570.158.01, gets a WARN naming 570.172.08.
- CDMM (coherent driver memory management) "is not compatible with the Multi-Instance GPUs (MIG)" and the
  GPU Operator's driver container turns it on from 580.65.06 on Grace-based systems (GH200, GB200; same
  release notes). A node shows it in ``/proc/driver/nvidia/params``: ``CoherentGPUMemoryMode: "driver"`` is
  CDMM, ``"numa"`` (or unset, the default of the 580.65.06 module) onlines the memory as a NUMA node
  (NVIDIA/open-gpu-kernel-modules:kernel-open/nvidia/nv-reg.h@580.65.06, printed by nv-procfs.c). The
  script's ``cdmm`` row reads it for profiles with a Grace model (catalog ``grace_system``), and so does the
  restore's log before its apply fails; ``validate`` warns (``cdmm-unknown``) until the profile states
  ``restore.cdmm: disabled``, which also makes an unset mode a PASS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migbake.profile.nodeprofile import NodeProfile

CHECK = "driver-mig"
BUG_FIRST, BUG_LAST, BUG_FIXED = "570.124.06", "570.158.01", "570.172.08"
BUG_LISTED = "570.124.06, 570.133.20, 570.148.08 and 570.158.01"
_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}")


def version_key(version: str) -> tuple[int, ...] | None:
    """``575.51.03`` -> ``(575, 51, 3, 0)`` (4 fields, as the script pads them); None for anything else."""
    if not _VERSION.fullmatch(version):
        return None
    fields = [int(x) for x in version.split(".")]
    return tuple(fields + [0] * (4 - len(fields)))


@dataclass(frozen=True)
class DriverGate:
    """What a profile asks of the driver: each MIG model's minimum, and whether the node mixes MIG and full GPUs."""

    minimums: tuple[tuple[str, str], ...]  # (catalog id, oldest driver with MIG), MIG entries only, each once
    mixed: bool  # a Kubernetes node with MIG GPUs and full GPUs side by side
    grace: tuple[str, ...] = ()  # MIG entries' models in Grace systems: the cdmm row checks CDMM is off


NO_GATE = DriverGate((), False)


def driver_gate(profile: NodeProfile) -> DriverGate:
    """The gate of ``profile``: models of entries with MIG on that have a known minimum, in profile order."""
    minimums: dict[str, str] = {}
    for g, m in zip(profile.gpus, profile.models):
        if g.mig_enabled and m.min_driver_version:
            minimums.setdefault(m.key, m.min_driver_version)
    kinds = {g.mig_enabled for g in profile.gpus}
    grace = tuple(dict.fromkeys(m.key for g, m in zip(profile.gpus, profile.models)
                                if g.mig_enabled and m.grace_system))
    return DriverGate(tuple(minimums.items()), profile.kubelet.present and kinds == {True, False}, grace)


def judge(gate: DriverGate, version: str) -> tuple[str, str]:
    """(status, detail) of the ``driver-mig`` row for a node whose driver is ``version``."""
    have = version_key(version)
    if have is None:
        return "SKIP", f"driver version {version or 'unknown'} is not one nvidia-smi prints: not compared"
    old = [(key, low) for key, low in gate.minimums if have < (version_key(low) or ())]
    if old:
        return "FAIL", "; ".join(f"driver {version} is older than the oldest with MIG on {key}: {low} (MIG User "
                                 "Guide, Deployment Considerations)" for key, low in old)
    if gate.mixed and version_key(BUG_FIRST) <= have <= version_key(BUG_LAST):  # type: ignore[operator]
        return "WARN", (f"driver {version}: with MIG GPUs and full GPUs on one node, drivers {BUG_LISTED} leave GPU "
                        f"pods Pending (NVIDIA/gpu-operator#1361); upgrade to {BUG_FIXED} or later")
    if not gate.minimums:
        return "PASS", f"driver {version} (no minimum known for the profile's MIG models)"
    return "PASS", f"driver {version}, at least {', '.join(f'{low} ({key})' for key, low in gate.minimums)}"
