"""Boot-test scenarios of a GPU reset and of CDI: ``ampere-pending``, ``ampere-pending-stuck``, ``cdi``.

All three need NVIDIA's real nvidia-mig-parted over the simulated GPU (``simgpu.guest``):
- ``ampere-pending``: an Ampere GPU with MIG off whose GPU reset fails (knob ``reset-fails``, as in a
  passthrough VM): mig-parted's ``apply`` leaves the mode change pending, the restore records its marker
  and reboots once; the change takes effect at that reboot and the second boot restores the layout.
- ``ampere-pending-stuck``: the change stays pending after the reboot too (``pending-forever``): one
  reboot, then the restore fails closed and the VM powers off through the report, never rebooting again.
- ``cdi``: fake ``nvidia-cdi-refresh.service`` and ``.path`` as toolkit v1.20 has them (restart on failure, not
  After=multi-user.target); the restore is ordered before the refresh, and restarts it for a refresh that
  already ran (cloud-init's first boot): the spec written last lists the restored MIG devices.

A guest that reboots itself ends its QEMU run (``-no-reboot``); the harness boots the same disk again,
counts the boots and stops after ``MAX_BOOTS``. Each boot is recorded in the guest at its orderly
shutdown (``guest/boot-record``): which shutdown job was queued, the restore's and kubelet's state.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import parse_report
from migbake_boottest.hostrun import Log, run
from migbake_boottest.scenarios.claims import BootContext, Claim
from migbake_boottest.scenarios.reset_claims import Evidence, boot_claims, run_claims
from migbake_boottest.scenarios.scenario import GUEST, REPORT, STUB_LOG, SYSTEM_UNITS, Scenario
from migbake_boottest.scenarios.scenario import _write as write_guest
from migbake_boottest.simgpu.guest import set_knob
from migbake_boottest.simgpu.node import SimulatedNode
from migbake_boottest.vm import image, qemu
from migbake_boottest.vm.kernel import KernelAssets

SCENARIOS: tuple[Scenario, ...] = ("ampere-pending", "ampere-pending-stuck", "cdi")
REBOOTING = ("ampere-pending", "ampere-pending-stuck")  # the guest reboots itself; Ampere profiles only
FAULT_KNOBS = {"ampere-pending": ("reset-fails",), "ampere-pending-stuck": ("reset-fails", "pending-forever")}
MAX_BOOTS = 3  # two are expected; one more shows a reboot loop without running into it forever
DEFAULT_MARKER = "/var/lib/migbake/reboot-attempted"
BOOT_RECORD = "/var/log/boot-record-{n}.txt"
CDI_LOG = "/var/log/cdi-refresh.log"
CDI_FINAL = "/var/log/cdi-spec-at-report.yaml"
REPORT_DROP_IN = "/etc/systemd/system/test-report.service.d/50-{name}.conf"
# The rebooting boot must not run the report (it would power off instead of rebooting): its start job
# is cancelled by the reboot, as any normal unit's is.
_REPORT_ON_REBOOT = """# Test fixture: a reboot cancels the report (it would turn the reboot into a power-off)
[Unit]
Conflicts=shutdown.target
Before=shutdown.target
"""
# The report waits for the restart of the CDI refresh that the restore queued, and copies the spec
# as it is at that moment (/var/run is gone after the power-off).
_REPORT_AFTER_CDI = f"""# Test fixture: the report reads the CDI spec after every refresh queued before it
[Unit]
After=nvidia-cdi-refresh.service

[Service]
ExecStartPre=/bin/sh -c 'cat /var/run/cdi/nvidia.yaml >{CDI_FINAL} 2>&1 || echo "no spec" >{CDI_FINAL}'
"""


def applies(scenario: str, ampere: bool) -> bool:
    """Whether ``scenario`` fits a profile: the reboot scenarios need an Ampere GPU (MIG mode persists)."""
    return scenario not in REBOOTING or ampere


def check(scenario: str, mig_parted: Path | None, node: SimulatedNode | None) -> None:
    """Raise BootTestError when ``scenario`` (one of these) cannot run: no NVIDIA binary, or no Ampere GPU."""
    if scenario not in SCENARIOS:
        return
    if mig_parted is None or node is None:
        raise BootTestError(f"scenario {scenario} needs NVIDIA's nvidia-mig-parted over the simulated GPU (mig_parted)")
    if not applies(scenario, node.model.mig_mode_persists):
        raise BootTestError(f"scenario {scenario} needs an Ampere GPU (MIG mode kept across reboots), "
                            f"not {node.model.key}")


def reboot_marker(out_dir: Path) -> str:
    """The ``marker=`` setting of the generated restore.sh (the default path if there is none)."""
    script = out_dir / "rootfs/etc/nvidia-mig/restore.sh"
    if script.is_file():
        for line in script.read_text().splitlines():
            name, sep, value = line.partition("=")
            words = shlex.split(value) if sep and name == "marker" else []
            if len(words) == 1:
                return words[0]
    return DEFAULT_MARKER


def prepare_image(rootfs: Path, scenario: str, out_dir: Path, log: Log) -> None:
    """Install what ``scenario``'s simulated world adds to the guest image (after ``simgpu.guest``)."""
    if scenario not in SCENARIOS:
        raise BootTestError(f"unknown scenario {scenario!r}")
    for knob in FAULT_KNOBS.get(scenario, ()):
        set_knob(rootfs, knob)
    units: list[str] = []
    if scenario in REBOOTING:
        record = (GUEST / "boot-record").read_text().replace("@MARKER@", shlex.quote(reboot_marker(out_dir)))
        write_guest(rootfs, "/usr/local/sbin/boot-record", record, 0o755)
        write_guest(rootfs, f"/{SYSTEM_UNITS}/boot-record.service", (GUEST / "boot-record.service").read_text(), 0o644)
        write_guest(rootfs, REPORT_DROP_IN.format(name="reboot"), _REPORT_ON_REBOOT, 0o644)
        units.append("boot-record.service")
    else:
        write_guest(rootfs, "/usr/local/sbin/fake-cdi-refresh", (GUEST / "fake-cdi-refresh").read_text(), 0o755)
        for unit in ("nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"):  # toolkit v1.20's units
            write_guest(rootfs, f"/{SYSTEM_UNITS}/{unit}", (GUEST / unit).read_text(), 0o644)
        write_guest(rootfs, REPORT_DROP_IN.format(name="cdi"), _REPORT_AFTER_CDI, 0o644)
        units += ["nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"]
    run(["systemctl", "--quiet", f"--root={rootfs}", "enable", *units], log=log)


def boot_all(ctx: BootContext, *, disk: Path, seed: Path | None, kernel: KernelAssets, work: Path,
             boots: int, marker: str, timeout_s: float, log: Log) -> list[tuple[int, float, Path, Path | None,
                                                                                tuple[Claim, ...]]]:
    """Boot until the scenario is over; per boot (exit code, seconds, console, report, claims).

    ``cdi``: ``boots`` boots. The reboot scenarios: again while the guest ended a boot by rebooting,
    at most ``MAX_BOOTS``; the last boot also carries the claims about the whole run (boot count).
    """
    rebooting = ctx.scenario in REBOOTING
    limit = MAX_BOOTS if rebooting else boots
    runs: list[qemu.BootRun] = []
    evidence: list[Evidence] = []
    claims: list[list[Claim]] = []
    for index in range(1, limit + 1):
        if index > 1:  # each boot's evidence from that boot only (the boot records are numbered)
            for stale in (STUB_LOG, REPORT, CDI_LOG, CDI_FINAL):
                image.remove_file(disk, stale, log=log)
        runs.append(qemu.boot(kernel=kernel, disk=disk, seed=seed, serial_log=work / f"serial-{index}.log",
                              timeout_s=timeout_s, log=log))
        evidence.append(_read_evidence(disk, work, index, marker, runs[-1], log))
        claims.append(boot_claims(evidence[-1], replace(ctx, boot=index)))
        if rebooting and (not evidence[-1].rebooted or runs[-1].exit_code != 0):
            break
    if rebooting:
        claims[-1] += run_claims(evidence, ctx)
    for index, boot in enumerate(claims, start=1):
        for claim in boot:
            log(f"boot {index}: [{'ok' if claim.passed else 'FAIL'}] {claim.id}: {claim.evidence}")
    return [(r.exit_code, r.duration_s, r.serial_log, e.report_path, tuple(c))
            for r, e, c in zip(runs, evidence, claims)]


def _read_evidence(disk: Path, work: Path, index: int, marker: str, result: qemu.BootRun, log: Log) -> Evidence:
    def keep(guest: str, name: str) -> tuple[str | None, Path | None]:
        text = image.read_file(disk, guest, log=log)
        if text is None:
            return None, None
        local = work / name
        local.write_text(text)
        return text, local

    report, report_path = keep(REPORT, f"report-{index}.txt")
    record, _ = keep(BOOT_RECORD.format(n=index), f"boot-record-{index}.txt")
    cdi_log, _ = keep(CDI_LOG, f"cdi-refresh-{index}.log")
    cdi_final, _ = keep(CDI_FINAL, f"cdi-spec-{index}.yaml")
    console = result.serial_log.read_text(errors="replace") if result.serial_log.exists() else ""
    return Evidence(
        boot=index, exit_code=result.exit_code, timed_out=result.timed_out, console=console,
        report=None if report is None else parse_report(report), report_path=report_path,
        record=None if record is None else parse_report(record),
        marker=image.read_file(disk, marker, log=log), marker_path=marker, cdi_log=cdi_log, cdi_final=cdi_final)

