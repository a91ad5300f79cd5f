"""The claims of ampere-pending, ampere-pending-stuck and cdi over recorded guest evidence (no VM, no root).

Recorded from real runs with NVIDIA's nvidia-mig-parted over the simulated GPU: ``data/ampere-pending``
(packer, 8x A100: boot 1 rebooted, boot 2 restored) and ``data/cdi`` (h200-inference). Each claim is
shown to pass on the recording and to FAIL on a doctored copy where what it guards went wrong.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from click.testing import CliRunner
from test_boot_real import simulated_node
from vm_support import REPO, unavailable

from migbake.cli.group import main
from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import parse_report
from migbake_boottest.scenarios.claims import BootContext, Claim, evaluate
from migbake_boottest.scenarios.reset import DEFAULT_MARKER, applies, check
from migbake_boottest.scenarios.reset_claims import Evidence, boot_claims, cdi_writes, run_claims
from migbake_boottest.scenarios.scenario import GUEST
from migbake_boottest.simgpu.node import GpuState

DATA = Path(__file__).parent / "data"
A100_MIXED = tuple([GpuState(True, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})] * 4
                   + [GpuState(True, {"1g.10gb": 7})] * 4)
H200_SEVEN = tuple([GpuState(True, {"1g.18gb": 7})] * 8)


def text(name: str) -> str:
    return (DATA / name).read_text()


def evidence(boot: int, *, report: str | None = None, record: str | None = None, marker: str | None = None,
             cdi_log: str | None = None, cdi_final: str | None = None) -> Evidence:
    return Evidence(boot=boot, exit_code=0, timed_out=False, console="",
                    report=None if report is None else parse_report(report), report_path=None,
                    record=None if record is None else parse_report(record), marker=marker,
                    marker_path=DEFAULT_MARKER, cdi_log=cdi_log, cdi_final=cdi_final)


def ampere(scenario: str = "ampere-pending") -> BootContext:
    return BootContext("packer", scenario, "ampere", 1, "", expected=A100_MIXED)  # type: ignore[arg-type]


def recorded_ampere() -> list[Evidence]:
    return [evidence(1, record=text("ampere-pending/boot-record-1.txt"), marker=text("ampere-pending/marker-1.txt")),
            evidence(2, report=text("ampere-pending/report-2.txt"), record=text("ampere-pending/boot-record-2.txt"))]


def failed(claims: list[Claim]) -> set[str]:
    return {c.id for c in claims if not c.passed}


def test_the_recorded_ampere_run_holds_every_claim() -> None:
    first, second = recorded_ampere()
    one = boot_claims(first, ampere())
    assert {c.id for c in one} == {"rebooted-cleanly", "reboot-marker-set", "reboot-reason-logged",
                                   "kubelet-down-before-reboot", "mode-pending-at-reboot"}
    assert not failed(one), one
    two = boot_claims(second, replace(ampere(), boot=2))
    wanted = {"exported-layout", "kubelet-active", "restore-before-kubelet", "reboot-marker-cleared"}
    assert wanted <= {c.id for c in two}
    assert not failed(two), two
    assert not failed(run_claims([first, second], ampere()))


def test_a_boot_that_did_not_reboot_or_a_second_reboot_fails_the_boot_count() -> None:
    first, second = recorded_ampere()
    rebooted_again = replace(second, record=first.record, report=None)
    assert failed(run_claims([first, rebooted_again, second], ampere())) == {"boot-count"}
    assert failed(run_claims([second], ampere())) == {"boot-count"}
    # boot 1 without the reboot: no record, no marker
    assert failed(boot_claims(replace(first, record=None, marker=None), ampere())) >= {
        "rebooted-cleanly", "reboot-marker-set", "kubelet-down-before-reboot"}


def test_a_marker_left_behind_fails_the_cleared_claim() -> None:
    second = recorded_ampere()[1]
    left = replace(second, marker="1796093341 GPU 0 (Disabled -> Enabled)\n")
    assert failed(boot_claims(left, replace(ampere(), boot=2))) == {"reboot-marker-cleared"}


def test_stuck_claims_want_the_restore_failed_and_no_second_reboot() -> None:
    second = recorded_ampere()[1]  # a restore that succeeded is the wrong outcome for the stuck scenario
    got = failed(boot_claims(second, replace(ampere("ampere-pending-stuck"), boot=2)))
    assert {"restore-failed", "kubelet-never-started", "reboot-not-repeated", "reboot-marker-kept"} <= got


def test_the_recorded_cdi_boot_holds_its_claims() -> None:
    ev = evidence(1, report=text("cdi/report-1.txt"), cdi_log=text("cdi/cdi-refresh-1.log"),
                  cdi_final=text("cdi/cdi-spec-1.yaml"))
    ctx = BootContext("cloud-init", "cdi", "hopper", 1, "", expected=H200_SEVEN)
    claims = {c.id: c for c in boot_claims(ev, ctx)}
    assert claims["cdi-written-early"].passed, claims["cdi-written-early"]
    assert claims["cdi-spec-current"].passed, claims["cdi-spec-current"]


def test_a_last_write_before_the_restore_fails_the_cdi_claim() -> None:
    """Without the restore's refresh the last spec is the early one: no MIG devices, written before assert."""
    log = text("cdi/cdi-refresh-1.log")
    writes = cdi_writes(log)
    assert len(writes) >= 2
    early_only = log[:log.index("=== write", 1)]
    ev = evidence(1, report=text("cdi/report-1.txt"), cdi_log=early_only, cdi_final=writes[0][1])
    ctx = BootContext("cloud-init", "cdi", "hopper", 1, "", expected=H200_SEVEN)
    claims = {c.id: c for c in boot_claims(ev, ctx)}
    assert not claims["cdi-spec-current"].passed
    assert "GPU 0: {} != {'1g.18gb': 7}" in claims["cdi-spec-current"].evidence
    # a spec that lists the devices but is not the one on disk at the end fails too
    stale = replace(ev, cdi_log=log, cdi_final=writes[0][1])
    assert not {c.id: c for c in boot_claims(stale, ctx)}["cdi-spec-current"].passed


def test_the_reboot_scenarios_apply_only_to_ampere() -> None:
    assert applies("cdi", False) and applies("ampere-pending", True)
    assert not applies("ampere-pending", False) and not applies("ampere-pending-stuck", False)


def test_the_new_guest_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        unavailable("shellcheck is not installed")
    scripts = [str(GUEST / name) for name in ("boot-record", "fake-cdi-refresh", "nvidia-smi")]
    result = subprocess.run(["shellcheck", "-f", "gcc", *scripts], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_the_pending_mode_query_is_not_a_step_of_a_failed_restore() -> None:
    """restore.sh asks nvidia-smi for a pending mode after a failed apply (Ampere): not a restore step."""
    lines = text("report-fail-apply.txt").splitlines()
    at = next(i for i, line in enumerate(lines) if "nvidia-mig-parted apply" in line)
    stamp = lines[at].split()[0]
    query = "nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader"
    lines.insert(at + 1, f"{stamp} {query}")
    ctx = BootContext("packer", "fail-apply", "ampere", 1, "")
    claims = {c.id: c for c in evaluate(parse_report("\n".join(lines)), ctx)}
    assert claims["stub-calls"].passed, claims["stub-calls"]


@pytest.mark.parametrize(("profile", "args", "message"), [
    ("h200-inference", ["--scenario", "cdi"], "--scenario cdi needs --mig-parted"),
    ("a100-80gb-mixed", ["--scenario", "ampere-pending-stuck"], "--scenario ampere-pending-stuck needs --mig-parted"),
    ("h200-inference", ["--scenario", "ampere-pending", "--mig-parted", __file__],
     "--scenario ampere-pending needs a profile with an Ampere GPU"),
])
def test_the_cli_refuses_what_cannot_run_with_a_usage_error(profile: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["boot-test", str(REPO / "images" / profile / "node-profile.yaml"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_run_boot_test_refuses_them_too() -> None:
    image = REPO / "images" / "h200-inference"
    with pytest.raises(BootTestError, match="needs NVIDIA's nvidia-mig-parted"):
        check("cdi", None, None)
    with pytest.raises(BootTestError, match="needs an Ampere GPU"):
        check("ampere-pending", Path(__file__), simulated_node(image))
    check("ok", None, None)


def test_the_imitation_answers_the_pending_mode_query_too() -> None:
    """The shell imitation (no --mig-parted) changes MIG mode at once: current and pending always agree."""
    if Path("/etc/mig-stub").exists() or Path("/run/mig-stub").exists():
        pytest.skip("this host has the imitation's state folders")
    query = ["--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader"]
    ran = subprocess.run(["bash", str(GUEST / "nvidia-smi"), *query], capture_output=True, text=True, check=False,
                         env={"MIG_STUB_REPORT": "1", "PATH": "/usr/bin:/bin"})
    assert (ran.returncode, ran.stdout) == (0, "0, Disabled, Disabled\n"), ran.stderr
