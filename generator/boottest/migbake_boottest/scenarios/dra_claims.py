"""Claims of a DRA profile's boot: the simulated GPUs as kubelet found them when it started.

The fake kubelet records the simulated GPUs in an ExecStartPre of a fixture drop-in (``scenario.GPU_STATE_AT_KUBELET``,
its first start of the boot), and the report carries that record (section ``simgpu-kubelet-state``,
``gpu N bus B mig MODE pending P instances PROFILE@START,...``). NVIDIA's DRA driver discovers static MIG
devices once, when its plugin starts under kubelet, and names them by placement
(kubernetes-sigs/dra-driver-nvidia-gpu:cmd/gpu-kubelet-plugin/nvlib.go@v25.12.0 l.199-202, mig.go l.104-107);
DynamicMIG wants no MIG device it did not create, MIG off on Hopper and MIG on on Ampere, which cannot
change the mode without a reset (nvlib.go@main l.1503-1556, device_state.go@main l.400-485). So:

- ``dra``: ``placements-at-kubelet``: every GPU had the plan's instances at the plan's placements;
- ``dra-dynamic``: ``dynamic-at-kubelet``: no GPU had an instance, and each had the MIG mode the
  restore leaves it (off on Hopper; on on Ampere, after the reboot-once path completed the change).
"""

from __future__ import annotations

from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.claims import BootContext, Claim

SECTION = "simgpu-kubelet-state"  # the report's copy of scenario.GPU_STATE_AT_KUBELET


def kubelet_gpus(report: GuestReport) -> dict[int, tuple[str, tuple[str, ...]]]:
    """Per GPU index, its MIG mode (``0``/``1``) and sorted instances (``PROFILE@START``) at kubelet's start."""
    found: dict[int, tuple[str, tuple[str, ...]]] = {}
    for line in report.section(SECTION):
        words = line.split()
        if len(words) == 10 and words[0] == "gpu" and words[1].isdigit() and words[4] == "mig" \
                and words[8] == "instances":
            found[int(words[1])] = (words[5], tuple(sorted(() if words[9] == "-" else words[9].split(","))))
    return found


def dra_claims(report: GuestReport | None, ctx: BootContext) -> list[Claim]:
    """The claim of a ``dra`` or ``dra-dynamic`` boot in which kubelet started (none otherwise)."""
    if report is None or not report.complete or ctx.expected is None or ctx.allocation == "device-plugin":
        return []
    seen = kubelet_gpus(report)
    recorded = " | ".join(report.section(SECTION)) or "nothing recorded (kubelet did not start?)"
    if ctx.allocation == "dra":
        want = {i: ("1" if g.mig_enabled else "0", tuple(sorted(g.placements))) for i, g in enumerate(ctx.expected)}
        wrong = [f"GPU {i}: {_words(seen.get(i))}, the plan has {_words(w)}" for i, w in want.items()
                 if seen.get(i) != w] + [f"unexpected GPU {i}" for i in sorted(set(seen) - set(want))]
        return [Claim("placements-at-kubelet", "when kubelet started, every GPU had the plan's instances at the "
                      "plan's placements (the DRA driver's device names)",
                      bool(want) and any(g.placements for g in ctx.expected) and not wrong,
                      ("; ".join(wrong) if seen else recorded) or f"{len(want)} GPU(s) as planned: {recorded}")]
    want = {i: ("1" if g.mig_enabled else "0", ()) for i, g in enumerate(ctx.expected)}
    wrong = [f"GPU {i}: {_words(seen.get(i))}, want {_words(w)}" for i, w in want.items() if seen.get(i) != w]
    wrong += [f"unexpected GPU {i}" for i in sorted(set(seen) - set(want))]
    mode = "on (Ampere: a mode change needs a reset)" if ctx.generation == "ampere" else "off (Hopper)"
    return [Claim("dynamic-at-kubelet", f"when kubelet started, no GPU had a MIG instance and MIG mode was {mode}",
                  bool(want) and not wrong,
                  ("; ".join(wrong) if seen else recorded) or f"{len(want)} GPU(s): {recorded}")]


def _words(state: tuple[str, tuple[str, ...]] | None) -> str:
    if state is None:
        return "not recorded"
    return f"MIG {'on' if state[0] == '1' else 'off'}, instances {','.join(state[1]) or 'none'}"
