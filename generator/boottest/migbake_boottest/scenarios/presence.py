"""Boot-test scenario ``no-gpu``: the restore decides from the PCI bus whether there is a GPU at all.

Two boots of one image, on the shell imitation (no NVIDIA binary needed):

1. the simulated PCI bus holds no NVIDIA GPU (only a Mellanox NIC): the restore says ``no NVIDIA GPU on this
   machine: nothing to restore``, calls no NVIDIA tool, succeeds, and kubelet starts after it;
2. a fixture unit puts an NVIDIA 3D controller on the bus before the restore starts, and the driver is not
   there (the simulated nvidia-smi fails): the restore fails closed within its short driver wait
   (``restore.driver_wait_seconds`` 5: ``scenarios.node.variant``), says why, and kubelet never starts.

The claims read only what the guest reported (journal, ``systemctl show``, the stub log, the metrics file).
"""

from __future__ import annotations

from pathlib import Path

from migbake.gpu.presence import NO_DRIVER
from migbake.gpu.presence import NO_GPU as NO_GPU_WORDS
from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.claims import (
    RESTORE,
    BootContext,
    Claim,
    _consumer_active,
    _consumers,
    _never_started,
    _restore_active,
    _restore_before,
    _restore_failed,
)
from migbake_boottest.scenarios.promtext import PromTextError, parse_text
from migbake_boottest.scenarios.scenario import (
    MELLANOX_NIC,
    NO_GPU,
    SIMULATED_SYSFS,
    SYSTEM_UNITS,
    _write,
    simulated_pci_bus,
)
from migbake_boottest.simgpu.guest import KNOB_DIR

ARRIVING = "/usr/lib/boottest/second-boot-gpu"  # the GPU the fixture unit puts on the bus at boot 2
BOOTED_ONCE = "/var/lib/boottest/no-gpu-booted-once"
UNIT = "boottest-gpu-arrives.service"
_UNIT_TEXT = f"""# Test fixture for boot tests ONLY: the first boot has no NVIDIA GPU on the simulated PCI bus; from
# the second on, one NVIDIA 3D controller is there and the driver is not: the shell imitation's nvidia-smi
# fails (fail-smi), and so does the simulated NVML library under NVIDIA's own tools (driver-delay never).
[Unit]
Description=Simulated NVIDIA GPU arriving at the second boot (boot test fixture)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target {RESTORE}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'if [ -e {BOOTED_ONCE} ]; then cp -r {ARRIVING}/. {SIMULATED_SYSFS}/bus/pci/devices/ && \
touch /etc/mig-stub/fail-smi && \
mkdir -p {KNOB_DIR} && echo never >{KNOB_DIR}/driver-delay; \
else mkdir -p {BOOTED_ONCE.rsplit("/", 1)[0]} && touch {BOOTED_ONCE}; fi'

[Install]
WantedBy=sysinit.target
"""
GPU_DEVICE = ("0000:18:00.0", "0x10de", "0x2330", "0x030200")  # an H100 80GB, a 3D controller


def prepare_image(rootfs: Path) -> None:
    """No NVIDIA GPU on the bus, the GPU that arrives at boot 2 kept aside, and the unit that brings it."""
    simulated_pci_bus(rootfs, [])
    address, *values = GPU_DEVICE
    for name, value in zip(("vendor", "device", "class"), values):
        _write(rootfs, f"{ARRIVING}/{address}/{name}", value + "\n", 0o644)
    _write(rootfs, f"/{SYSTEM_UNITS}/{UNIT}", _UNIT_TEXT, 0o644)
    wants = rootfs / "etc/systemd/system/sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / UNIT
    if not link.is_symlink():
        link.symlink_to(f"/{SYSTEM_UNITS}/{UNIT}")


def fails(ctx: BootContext) -> bool:
    """Whether this boot's restore must fail (boot 2 of no-gpu: a GPU and no driver)."""
    return ctx.scenario == NO_GPU and ctx.boot >= 2


def presence_claims(report: GuestReport | None, ctx: BootContext) -> list[Claim]:
    """The claims of a ``no-gpu`` boot (none for other scenarios, or without a complete report)."""
    if report is None or not report.complete or ctx.scenario != NO_GPU:
        return []
    journal = report.section(f"journal {RESTORE}")
    nvidia = [c.event for c in report.calls() if c.event in ("smi", "apply", "assert")]
    if not fails(ctx):
        said = [line for line in journal if NO_GPU_WORDS in line]
        claims = [Claim("no-gpu-logged", f"the restore's journal says '{NO_GPU_WORDS}'", bool(said),
                        f"{said[0] if said else 'not in the journal: ' + ' | '.join(journal[-5:])}"),
                  Claim("no-gpu-no-nvidia-tool", "the restore ran no NVIDIA tool (the PCI bus decided)",
                        not nvidia, f"stub calls: {nvidia or 'none'}"),
                  _restore_active(report, ctx)]
        for unit, _ in _consumers(ctx):
            claims += [_restore_before(report, ctx, unit), _consumer_active(report, ctx, unit)]
        return claims + _metrics(ctx, success=1, gpus=0)
    said = [line for line in journal if NO_DRIVER in line and "did not answer within" in line]
    calls = [e for i, e in enumerate(nvidia) if i == 0 or nvidia[i - 1] != e]  # the driver wait polls smi
    claims = [Claim("gpu-no-driver-logged", f"the restore's journal says '{NO_DRIVER}: ...did not answer within'",
                    bool(said), f"{said[0] if said else 'not in the journal: ' + ' | '.join(journal[-5:])}"),
              Claim("gpu-no-driver-calls", "the restore only waited for the driver (nvidia-smi), no apply",
                    calls == ["smi"], f"stub calls: {calls or 'none'}"),
              _restore_failed(report, ctx)]
    claims += [_never_started(report, ctx, unit) for unit, closed in _consumers(ctx) if closed]
    return claims + _metrics(ctx, success=0, gpus=1)


def _metrics(ctx: BootContext, *, success: int, gpus: int) -> list[Claim]:
    if not ctx.metrics_path:
        return []
    want = {"migbake_mig_restore_success": success, "migbake_mig_restore_nvidia_gpus": gpus}
    try:
        samples = parse_text(ctx.metrics or "")
    except PromTextError as exc:
        return [Claim("no-gpu-metrics", f"the metrics say {want}", False, f"not the text format: {exc}")]
    have = {name: [value for _, value in samples.get(name, [])] for name in want}
    ok = all(have[name] == [float(value)] for name, value in want.items())
    return [Claim("no-gpu-metrics", f"{ctx.metrics_path} says {want}", ok, f"found {have}")]


__all__ = ["MELLANOX_NIC", "fails", "prepare_image", "presence_claims"]
