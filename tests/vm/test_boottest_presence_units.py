"""The boot-test scenario ``no-gpu`` without a VM: its plan, its guest content, and its claims.

The claims are replayed on recorded reports of other scenarios made into this scenario's evidence
(``report-ok-boot2.txt``: the restore and kubelet active; ``report-driver-too-late.txt``: the restore failed
waiting for the driver, kubelet never started), and each claim is shown failing on doctored evidence.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import IMAGES, REPO, WORLD, generate

from migbake.gpu.presence import NO_DRIVER, NO_GPU
from migbake.rules.validate import check_file
from migbake_boottest import session
from migbake_boottest.guestreport import parse_report
from migbake_boottest.scenarios import presence
from migbake_boottest.scenarios import scenario as fixtures
from migbake_boottest.scenarios.claims import BootContext, evaluate
from migbake_boottest.scenarios.node import boots_for, variant

DATA = Path(__file__).parent / "data"
RESTORE = "nvidia-mig-restore.service"
OK = (DATA / "report-ok-boot2.txt").read_text()
TOO_LATE = (DATA / "report-driver-too-late.txt").read_text()


def _profile():  # type: ignore[no-untyped-def]
    checked = check_file(IMAGES[0] / "node-profile.yaml")
    assert checked.profile is not None
    return checked.profile


def _section(text: str, name: str, lines: list[str]) -> str:
    head, marker, rest = text.partition(f"=== {name}\n")
    assert marker, name
    _, sep, tail = rest.partition("\n=== ")
    return head + marker + "".join(f"{line}\n" for line in lines) + "=== " + tail if sep else text


def _boot1(**doctored: list[str]) -> str:
    """No GPU: the restore logged why, called no NVIDIA tool, kubelet started after it."""
    text = _section(OK, "stub-log", doctored.get("stub", ["1796007274.016850570 kubelet ExecStartPre"]))
    return _section(text, f"journal {RESTORE}", doctored.get("journal", [
        f"{RESTORE}: {NO_GPU} (no PCI device of vendor 0x10de and class display VGA or 3D in "
        "/sys/bus/pci/devices; restore.no_gpu: succeed)"]))


def _boot2(journal: list[str] | None = None) -> str:
    """A GPU without its driver: the restore failed after polling nvidia-smi, kubelet never started."""
    return _section(TOO_LATE, f"journal {RESTORE}", journal if journal is not None else [
        f"{RESTORE}: FAILED: {NO_DRIVER}: the NVIDIA driver did not answer within 5 s (nvidia-smi: ...)"])


def _ctx(boot: int, metrics: str | None = None) -> BootContext:
    """Boot 1 replays an h200 report (kubelet), boot 2 an h100-slurm one (no kubelet; slurmd fail-closed)."""
    consumers = () if boot == 1 else (("slurmd.service", True),)
    return BootContext("packer", fixtures.NO_GPU, "hopper", boot, "", kubelet=boot == 1, consumers=consumers,
                       metrics_path="/m.prom" if metrics else "", metrics=metrics)


def _set(text: str, unit: str, key: str, value: str) -> str:
    head, marker, rest = text.partition(f"=== show {unit}\n")
    section, sep, tail = rest.partition("\n=== ")
    lines = [f"{key}={value}" if line.startswith(f"{key}=") else line for line in section.splitlines()]
    return head + marker + "\n".join(lines) + sep + tail


def _failed(text: str, ctx: BootContext) -> set[str]:
    report = parse_report(text)
    return {c.id for c in evaluate(report, ctx) + presence.presence_claims(report, ctx) if not c.passed}


def test_the_plan_asks_for_it_by_name_only_and_boots_twice_with_a_short_driver_wait() -> None:
    prof = _profile()
    plan = session.plan(prof, scenario=fixtures.NO_GPU)
    assert plan.scenarios == (fixtures.NO_GPU,) and plan.mig_parted is None
    assert fixtures.NO_GPU not in session.plan(prof).scenarios  # not part of all
    assert boots_for(fixtures.NO_GPU, "packer", 1) == 2
    assert variant(prof, fixtures.NO_GPU).restore.driver_wait_seconds == 5
    assert fixtures.NO_GPU in session.SCENARIO_CHOICES


def test_the_cli_takes_the_scenario() -> None:
    ran = subprocess.run([sys.executable, "-m", "migbake", "boot-test", str(IMAGES[0] / "node-profile.yaml"),
                          "--scenario", "no-gpu", "--help"], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": str(REPO / "generator")})
    assert ran.returncode == 0 and "no-gpu" in ran.stdout, ran.stderr


@pytest.mark.parametrize("boot", [1, 2])
def test_the_recorded_evidence_holds_every_claim(boot: int) -> None:
    text = _boot1() if boot == 1 else _boot2()
    report = parse_report(text)
    claims = evaluate(report, _ctx(boot)) + presence.presence_claims(report, _ctx(boot))
    assert [c.id for c in claims if not c.passed] == [], [c for c in claims if not c.passed]
    ids = {c.id for c in claims}
    want = ({"no-gpu-logged", "no-gpu-no-nvidia-tool", "restore-active", "kubelet-active", "restore-before-kubelet"}
            if boot == 1 else {"gpu-no-driver-logged", "gpu-no-driver-calls", "restore-failed",
                               "slurmd-never-started"})
    assert want <= ids


@pytest.mark.parametrize("doctored, claim", [
    (lambda: _boot1(journal=["nvidia-mig-restore.service: the NVIDIA driver answers after 0 s"]), "no-gpu-logged"),
    (lambda: _boot1(stub=["1.0 nvidia-smi ", "2.0 kubelet ExecStartPre"]), "no-gpu-no-nvidia-tool"),
    (lambda: _section(_boot1(), f"show {RESTORE}", ["Result=exit-code", "ActiveState=failed", "SubState=failed",
                                                     "UnitFileState=enabled"]), "restore-active"),
    (lambda: _set(_boot1(), "kubelet.service", "ActiveState", "inactive"), "kubelet-active"),
], ids=["no-reason-logged", "an-nvidia-tool-ran", "restore-failed", "kubelet-down"])
def test_each_claim_of_the_first_boot_fails_on_doctored_evidence(doctored, claim: str) -> None:  # type: ignore[no-untyped-def]
    assert claim in _failed(doctored(), _ctx(1))


@pytest.mark.parametrize("doctored, claim", [
    (lambda: _boot2(journal=[f"{RESTORE}: FAILED: the NVIDIA driver did not answer within 5 s"]),
     "gpu-no-driver-logged"),
    (lambda: _section(_boot2(), "stub-log", ["1.0 nvidia-smi", "2.0 nvidia-mig-parted apply -f x -c current"]),
     "gpu-no-driver-calls"),
    (lambda: _section(_boot2(), "stub-log", ["1.0 nvidia-smi", "2.0 slurmd ExecStartPre"]), "slurmd-never-started"),
    (lambda: _set(_boot2(), RESTORE, "ActiveState", "active"), "restore-failed"),
], ids=["words-missing", "apply-ran", "consumer-started", "restore-not-failed"])
def test_each_claim_of_the_second_boot_fails_on_doctored_evidence(doctored, claim: str) -> None:  # type: ignore[no-untyped-def]
    assert claim in _failed(doctored(), _ctx(2))


def test_the_metrics_claim_wants_zero_gpus_then_one() -> None:
    prom = ('# TYPE migbake_mig_restore_success gauge\nmigbake_mig_restore_success{profile="p",config="c"} 1\n'
            '# TYPE migbake_mig_restore_nvidia_gpus gauge\nmigbake_mig_restore_nvidia_gpus{profile="p",config="c"} 0\n')
    assert "no-gpu-metrics" not in _failed(_boot1(), _ctx(1, prom))
    assert "no-gpu-metrics" in _failed(_boot2(), _ctx(2, prom))  # boot 2 must say success 0 and 1 GPU


def test_the_guest_content_builds_and_the_restore_reads_it(tmp_path: Path) -> None:
    """The image's PCI bus has no GPU (only a NIC); the fixture unit's command, run twice, adds one."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    fixtures.install_fixtures(rootfs, gpu=fixtures.SIMULATED_GPUS["hopper"])
    bus = rootfs / fixtures.SIMULATED_SYSFS.lstrip("/") / "bus/pci/devices"
    assert sorted(p.name for p in bus.iterdir()) == ["0000:18:00.0", "0000:3b:00.0"]  # the GPU, the NIC
    mount = (rootfs / "usr/lib/systemd/system" / fixtures.PCI_BUS_MOUNT).read_text()
    assert f"What={fixtures.SIMULATED_SYSFS}/bus/pci/devices\nWhere=/sys/bus/pci/devices\n" in mount
    assert (rootfs / "etc/systemd/system/sysinit.target.wants" / fixtures.PCI_BUS_MOUNT).is_symlink()
    presence.prepare_image(rootfs)
    assert sorted(p.name for p in bus.iterdir()) == ["0000:3b:00.0"]
    assert (rootfs / "etc/systemd/system/sysinit.target.wants" / presence.UNIT).is_symlink()
    unit = (rootfs / "usr/lib/systemd/system" / presence.UNIT).read_text()
    [command] = re.findall(r"^ExecStart=/bin/sh -c '(.*)'$", unit.replace("\\\n", ""), re.M)
    local = re.sub(r"(?<![\w.])/(usr|var|etc)/", lambda m: f"{rootfs}/{m.group(1)}/", command)
    # the guest's /sys/bus/pci/devices is this tree (the mount above); here, a test copy reads it
    WORLD.point("sys", rootfs / fixtures.SIMULATED_SYSFS.lstrip("/"))
    out = generate((IMAGES[0] / "node-profile.yaml").read_text(), tmp_path / "out")
    restore = out / "rootfs/etc/nvidia-mig/restore.sh"
    env = {"PATH": "/usr/bin:/bin"}

    def boot() -> subprocess.CompletedProcess[str]:
        subprocess.run(["sh", "-c", local], check=True)
        return subprocess.run(["bash", str(restore)], capture_output=True, text=True, env=env, check=False,
                              timeout=60)

    first = boot()
    assert first.returncode == 0 and NO_GPU in first.stdout, first
    assert sorted(p.name for p in bus.iterdir()) == ["0000:3b:00.0"]
    (rootfs / "etc/mig-stub").mkdir(exist_ok=True)
    subprocess.run(["sh", "-c", local], check=True)  # the second boot's fixture run
    assert sorted(p.name for p in bus.iterdir()) == ["0000:18:00.0", "0000:3b:00.0"]
    assert (rootfs / "etc/mig-stub/fail-smi").exists()
    # NVIDIA's tools over the simulated NVML library see no driver either (--mig-parted BIN)
    assert (rootfs / "etc/simgpu/driver-delay").read_text() == "never\n"
