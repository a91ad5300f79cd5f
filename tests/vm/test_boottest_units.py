"""Fast checks of the boot-test library itself (no VM, no root): parsing, claims, guest script lint."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from vm_support import SAMPLE_OUT, unavailable

from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import parse_report
from migbake_boottest.run import boot_timeout
from migbake_boottest.scenarios.claims import BootContext, evaluate
from migbake_boottest.scenarios.scenario import (
    GUEST,
    RestoreCommands,
    restore_commands_from_unit,
    simulated_gpu_for_config,
)

DATA = Path(__file__).parent / "data"
MANAGER = "nvidia-mig-manager.service"
SHELL_SCRIPTS = ("nvidia-smi", "nvidia-mig-parted", "test-report", "initramfs-init")
FAIL_CONSOLE = ("[\x1b[0;1;31mFAILED\x1b[0m] Failed to start nvidia-mig… MIG configuration before kubelet.\n"
                "[\x1b[0;1;33mDEPEND\x1b[0m] Dependency failed for kube… Fake kubelet (boot test fixture).\n")


def ok_ctx(boot: int = 2, console: str = "") -> BootContext:
    return BootContext("packer", "ok", "hopper", boot, console)


def failed_ids(text: str, ctx: BootContext) -> set[str]:
    return {c.id for c in evaluate(parse_report(text), ctx) if not c.passed}


def set_unit_property(text: str, unit: str, key: str, value: str) -> str:
    """``text`` with one ``systemctl show`` property of ``unit`` changed."""
    head, marker, rest = text.partition(f"=== show {unit}\n")
    section, sep, tail = rest.partition("\n=== ")
    lines = [f"{key}={value}" if line.startswith(f"{key}=") else line for line in section.splitlines()]
    return head + marker + "\n".join(lines) + sep + tail


def test_guest_shell_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        unavailable("shellcheck is not installed")
    result = subprocess.run(["shellcheck", "-f", "gcc", *(str(GUEST / s) for s in SHELL_SCRIPTS)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_restore_commands_default_to_the_seed_paths() -> None:
    unit = (SAMPLE_OUT / "rootfs/etc/systemd/system/nvidia-mig-restore.service").read_text()
    assert restore_commands_from_unit(unit) == RestoreCommands()


def test_restore_commands_follow_other_tool_paths() -> None:
    unit = ("[Service]\nExecStartPre=-/opt/nvidia/bin/nvidia-smi\n"
            "ExecStart=/usr/local/bin/nvidia-mig-parted apply -f /etc/mig/layout.yaml -c node\n")
    assert restore_commands_from_unit(unit) == RestoreCommands(
        "/opt/nvidia/bin/nvidia-smi", "/usr/local/bin/nvidia-mig-parted", "/etc/mig/layout.yaml", "node")


def test_recorded_ok_report_passes_every_claim() -> None:
    claims = evaluate(parse_report((DATA / "report-ok-boot2.txt").read_text()), ok_ctx())
    assert [c.id for c in claims if not c.passed] == []
    assert "restored-after-reboot" in {c.id for c in claims}


def test_recorded_fail_apply_report_passes_every_claim() -> None:
    ctx = BootContext("packer", "fail-apply", "hopper", 1, FAIL_CONSOLE)
    assert failed_ids((DATA / "report-fail-apply.txt").read_text(), ctx) == set()


def test_fail_claims_need_the_console_status_lines() -> None:
    ctx = BootContext("packer", "fail-apply", "hopper", 1, "")
    assert failed_ids((DATA / "report-fail-apply.txt").read_text(), ctx) == {"failure-visible"}


@pytest.mark.parametrize(("edit", "failing"), [
    (lambda t: set_unit_property(t, MANAGER, "UnitFileState", "enabled"), {"mig-manager-never-ran"}),
    (lambda t: set_unit_property(t, MANAGER, "InactiveExitTimestampMonotonic", "7000000"),
     {"mig-manager-never-ran"}),
    (lambda t: t.replace("file 644 root:root /etc/nvidia-mig/config.yaml",
                         "file 600 root:root /etc/nvidia-mig/config.yaml"), {"files-installed"}),
    (lambda t: t.replace(" kubelet ExecStartPre\n", " kubelet ExecStartPre\n1.0 kubelet ExecStartPre\n"),
     {"kubelet-started-once"}),
    (lambda t: t.replace("rc=0", "rc=1"), {"layout-applied", "restored-after-reboot"}),
    (lambda t: t.replace("=== end\n", ""), {"report-complete"}),
], ids=["manager-enabled", "manager-started", "config-mode", "kubelet-twice", "assert-fails", "cut-off"])
def test_claims_notice_a_broken_boot(edit: Callable[[str], str], failing: set[str]) -> None:
    text = (DATA / "report-ok-boot2.txt").read_text()
    assert failed_ids(edit(text), ok_ctx()) == failing


def test_claims_notice_kubelet_before_the_restore() -> None:
    lines = (DATA / "report-ok-boot2.txt").read_text().splitlines(keepends=True)
    start = lines.index("=== stub-log\n") + 1
    kubelet = next(i for i, line in enumerate(lines) if line.endswith(" kubelet ExecStartPre\n"))
    stamp = lines[start].split()[0]
    lines[kubelet] = f"{float(stamp) - 1:.9f} kubelet ExecStartPre\n"
    lines.insert(start, lines.pop(kubelet))
    assert failed_ids("".join(lines), ok_ctx()) == {"call-order"}


def test_missing_report_is_a_failed_claim() -> None:
    claims = evaluate(None, ok_ctx(console="[   12.0] reached target\n"))
    assert [(c.id, c.passed) for c in claims] == [("report-complete", False)]
    assert "reached target" in claims[0].evidence


@pytest.mark.parametrize(("config", "device_id", "count"), [
    ("version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: false\n", "0x233010DE", 1),
    ("version: v1\nmig-configs:\n  current:\n  - devices: [0, 1, 2, 3]\n    mig-enabled: false\n"
     "  - devices: [4, 5, 6, 7]\n    mig-enabled: false\n", "0x233010DE", 8),
    ("version: v1\nmig-configs:\n  current:\n  - device-filter: ['0x233510DE:0x18AB10DE', '0x233B10DE']\n"
     "    devices: all\n    mig-enabled: false\n", "0x233510DE", 1),
    ("version: v1\nmig-configs:\n  other:\n  - devices: [0, 9]\n    mig-enabled: false\n", "0x233010DE", 1),
    ("version: [\n", "0x233010DE", 1),
], ids=["all", "device-lists", "filters", "other-config", "broken-yaml"])
def test_simulated_gpus_fit_the_config(config: str, device_id: str, count: int) -> None:
    model = simulated_gpu_for_config(config, "current", "hopper")
    assert (model.device_id, model.count, model.generation) == (device_id, count, "hopper")


def test_a_node_without_kubelet_gets_no_kubelet_claims() -> None:
    text = (DATA / "report-ok-boot2.txt").read_text().replace(
        "file 644 root:root /etc/systemd/system/kubelet.service.d/20-mig-restore.conf",
        "missing /etc/systemd/system/kubelet.service.d/20-mig-restore.conf")
    claims = evaluate(parse_report(text), BootContext("packer", "ok", "hopper", 2, "", kubelet=False))
    assert [c.id for c in claims if not c.passed] == []
    assert not {"restore-before-kubelet", "kubelet-active", "kubelet-started-once"} & {c.id for c in claims}
    assert failed_ids(text, ok_ctx()) == {"files-installed"}


def real_report(walked: list[int], export: str, state_lines: int) -> str:
    """The recorded ok report with the sections a run of NVIDIA's mig-parted adds."""
    text = (DATA / "report-ok-boot2.txt").read_text()
    head, _, rest = text.partition("=== mig-state\n")
    _, _, rest = rest.partition("=== mig-assert\n")
    debug = "".join(f'time="x" level=debug msg="  GPU {i}: 0x233510DE:0x18BF10DE"\n' for i in walked)
    state = "".join(f"gpu {i} bus 0 mig 1 pending 1 instances -\n" for i in range(state_lines))
    return (head + "=== mig-state\n" + export + "=== mig-assert\n" + debug + "rc=0\n"
            + "=== simgpu-state\n" + state + rest[rest.index("=== cloud-init"):])


SEVEN = "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n" \
        "      1g.18gb: 7\n"


@pytest.mark.parametrize(("walked", "export", "count", "failing"), [
    ([0, 1], SEVEN, 2, set()),
    ([], "version: v1\nmig-configs:\n  current: []\n", 2, {"gpu-count", "exported-layout"}),  # the zero-GPU trap
    ([0, 1], SEVEN.replace("7\n", "6\n"), 2, {"exported-layout"}),
    ([0], SEVEN, 1, {"gpu-count", "exported-layout"}),
], ids=["ok", "zero-gpus", "other-layout", "one-gpu-missing"])
def test_real_mig_parted_claims(walked: list[int], export: str, count: int, failing: set[str]) -> None:
    from migbake_boottest.simgpu.node import GpuState
    ctx = BootContext("packer", "ok", "hopper", 1, "", expected=(GpuState(True, {"1g.18gb": 7}),) * 2)
    ids = {c.id for c in evaluate(parse_report(real_report(walked, export, count)), ctx) if not c.passed}
    assert ids == failing


@pytest.mark.parametrize(("given", "env", "expected"), [
    (None, "", 300.0), (None, "900", 900.0), (45.0, "900", 45.0), (None, "0.5", 0.5)])
def test_the_boot_timeout_comes_from_the_caller_then_the_environment(
        given: float | None, env: str, expected: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIGBAKE_BOOT_TIMEOUT", env)
    assert boot_timeout(given) == expected


@pytest.mark.parametrize("env", ["0", "-5", "ten", "nan", "1e9"])
def test_a_boot_timeout_that_is_not_seconds_is_refused(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIGBAKE_BOOT_TIMEOUT", env)
    with pytest.raises(BootTestError, match="MIGBAKE_BOOT_TIMEOUT"):
        boot_timeout(None)
