"""Fast checks of the node-neighbour claims (consumers, metrics, driver-late, gpu-client, manager-reenabled).

Over reports recorded from real boots (NVIDIA's mig-parted over the simulated GPU); no VM, no root.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from pathlib import Path

import click
import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from prometheus_client.parser import text_string_to_metric_families

from migbake_boottest import command as boot_test
from migbake_boottest.guestreport import parse_report
from migbake_boottest.scenarios.claims import BootContext, evaluate
from migbake_boottest.scenarios.kubelet import labels_claim
from migbake_boottest.scenarios.node import NODE_SCENARIOS, Promises, discover_promises
from migbake_boottest.scenarios.node_claims import metrics_verdict, node_claims
from migbake_boottest.scenarios.promtext import PromTextError, parse_text
from migbake_boottest.simgpu.node import GpuState

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]
SLURMD = (("slurmd.service", True),)
METRICS = "/var/lib/node_exporter/textfile_collector/migbake.prom"
LAYOUT = (GpuState(True, {"3g.40gb": 2}),) * 4


def ctx(scenario: str = "ok", *, console: str = "", metrics: str | None = None, boot: int = 1) -> BootContext:
    """A Slurm node (no kubelet, slurmd fail closed) booted with NVIDIA's mig-parted."""
    return BootContext("packer", scenario, "hopper", boot, console, kubelet=False,  # type: ignore[arg-type]
                       expected=LAYOUT, consumers=SLURMD, metrics_path=METRICS, metrics=metrics)


def verdicts(report: str, context: BootContext) -> dict[str, bool]:
    parsed = parse_report((DATA / report).read_text())
    return {c.id: c.passed for c in evaluate(parsed, context) + node_claims(parsed, context)}


def test_a_slurm_node_gets_the_consumer_claims_of_kubelet() -> None:
    got = verdicts("report-slurm-ok.txt", ctx(metrics=(DATA / "metrics-ok.prom").read_text()))
    assert {"restore-before-slurmd", "slurmd-active", "slurmd-started-once", "metrics-success",
            "manual-stop-refused"} <= set(got)
    assert not {i for i in got if "kubelet" in i}
    assert [i for i, ok in got.items() if not ok] == []


def test_consumer_claims_notice_slurmd_before_the_restore() -> None:
    text = (DATA / "report-slurm-ok.txt").read_text()
    start = text.index("=== show slurmd.service")
    section = text[start:text.index("=== ", start + 4)]
    early = "\n".join("InactiveExitTimestampMonotonic=1" if line.startswith("InactiveExitTimestampMonotonic=")
                      else line for line in section.splitlines()) + "\n"
    parsed = parse_report(text.replace(section, early))
    failed = {c.id for c in evaluate(parsed, ctx()) if not c.passed}
    assert failed == {"restore-before-slurmd"}


def test_manual_stop_claim_wants_slurmd_running() -> None:
    text = (DATA / "report-slurm-ok.txt").read_text().replace("slurmd.service=active", "slurmd.service=inactive")
    assert {c.id for c in evaluate(parse_report(text), ctx()) if not c.passed} == {"manual-stop-refused"}


def test_a_missing_consumer_drop_in_fails_files_installed() -> None:
    text = (DATA / "report-slurm-ok.txt").read_text().replace(
        "file 644 root:root /etc/systemd/system/slurmd.service.d/20-mig-restore.conf",
        "missing /etc/systemd/system/slurmd.service.d/20-mig-restore.conf")
    failed = {c.id for c in evaluate(parse_report(text), ctx()) if not c.passed}
    assert failed == {"files-installed"}


@pytest.mark.parametrize(("scenario", "metrics", "passed"), [
    ("ok", "ok", True), ("fail-apply", "ok", False), ("ok", None, False), ("ok", "garbled", False),
    ("fail-assert", "failed", True), ("ok", "failed", False)])
def test_metrics_claim(scenario: str, metrics: str | None, passed: bool) -> None:
    text = (DATA / "metrics-ok.prom").read_text()
    chosen = {"ok": text, "failed": text.replace('"} 1\n', '"} 0\n', 1), "garbled": text + "what {\n",
              None: None}[metrics]
    ok, evidence = metrics_verdict(chosen, 0 if scenario.startswith("fail") else 1)
    assert ok is passed, evidence


def test_the_metrics_parser_agrees_with_prometheus_client() -> None:
    text = (DATA / "metrics-ok.prom").read_text()
    ours = parse_text(text)
    theirs = {s.name: [(dict(s.labels), s.value)] for family in text_string_to_metric_families(text)
              for s in family.samples}
    assert ours == theirs
    assert ours["migbake_mig_restore_success"] == [({"profile": "h100-slurm", "config": "current"}, 1.0)]
    tricky = 'm{a="x\\"y",b="\\\\"} 2.5 1700000000\nn +Inf\n'
    assert parse_text(tricky) == {"m": [({"a": 'x"y', "b": "\\"}, 2.5)], "n": [({}, float("inf"))]}
    with pytest.raises(PromTextError):
        parse_text("m{a=unquoted} 1\n")


def test_promises_of_a_generated_output() -> None:
    assert discover_promises(REPO / "images/h100-slurm/generated") == Promises(SLURMD, METRICS)
    mig_manager_off = (("nvidia.com/gpu.deploy.mig-manager", "false"),)
    assert discover_promises(REPO / "images/a100-80gb-mixed/generated") == Promises((), "", "kubeadm",
                                                                                    mig_manager_off)
    h200 = discover_promises(REPO / "images/h200-inference/generated")
    assert (h200.kubelet_layout, h200.node_labels) == ("eks-al2023", mig_manager_off)


LABELS = (("nvidia.com/gpu.deploy.mig-manager", "false"), ("nvidia.com/mig.config", "current"))
ARGV_FLAGS = "--node-labels=nvidia.com/gpu.deploy.mig-manager=false,nvidia.com/mig.config=current"


@pytest.mark.parametrize(("argv", "holds"), [
    (f"--kubeconfig=/etc/kubernetes/kubelet.conf\n--node-ip=10.0.2.15\n--max-pods=250\n{ARGV_FLAGS}\n", True),
    ("--kubeconfig=/etc/kubernetes/kubelet.conf\n--node-ip=10.0.2.15\n--max-pods=250\n", False),  # labels lost
    (f"{ARGV_FLAGS}\n", False),  # the admin's flags lost (an ExecStart= without KUBELET_EXTRA_ARGS)
    (None, False),
    # the labels in two arguments (kubelet merges them), as the restore's label file and the admin's can give them
    ("--node-ip=10.0.2.15\n--max-pods=250\n--node-labels=nvidia.com/mig.config=current\n"
     "--node-labels=nvidia.com/gpu.deploy.mig-manager=false,x=y\n", True),
    ("--node-ip=10.0.2.15\n--max-pods=250\n--node-labels=nvidia.com/mig.config=current\n", False),  # one lost
    ("--node-ip=10.0.2.15\n--max-pods=250\n--node-labels=nvidia.com/mig.config=current\n"
     "--node-ips=nvidia.com/gpu.deploy.mig-manager=false\n", False),  # not a label argument
], ids=["both", "no-labels", "no-admin-flags", "no-argv", "two-arguments", "one-lost", "not-a-label-flag"])
def test_kubelet_labels_claim(argv: str | None, holds: bool) -> None:
    for fixture in ("kubeadm-deb", "kubeadm-rpm", "eks-al2023"):
        [claim] = labels_claim(argv, fixture, LABELS)  # type: ignore[arg-type]
        assert claim.id == "kubelet-labels" and claim.passed is holds, claim
    assert labels_claim(argv, "plain", LABELS) == []


def test_the_cli_names_every_node_scenario() -> None:
    from migbake_boottest.drivercontainer.scenarios import SCENARIOS as DRIVER_SCENARIOS
    from migbake_boottest.scenarios.reset import SCENARIOS as RESET_SCENARIOS
    from migbake_boottest.scenarios.scenario import Scenario

    every = {"ok", "fail-apply", "fail-assert", "provided-later-missing", "no-gpu", "layout-unknown", "layout-missing",
             *NODE_SCENARIOS, *RESET_SCENARIOS, *DRIVER_SCENARIOS}
    assert set(typing.get_args(Scenario)) == every
    choices = next(p.type for p in boot_test.boot_test.params if p.name == "scenario")
    assert isinstance(choices, click.Choice) and set(choices.choices) == every | {"all"}


@pytest.mark.parametrize("scenario", NODE_SCENARIOS)
def test_a_node_scenario_without_mig_parted_is_a_usage_error(scenario: str) -> None:
    run = subprocess.run([sys.executable, "-m", "migbake", "boot-test", "images/h100-slurm/node-profile.yaml",
                          "--scenario", scenario], capture_output=True, text=True, check=False, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO / "generator")})
    assert run.returncode == 2, run.stderr
    assert "--mig-parted" in run.stderr


DRIVER_FAIL_CONSOLE = ("[\x1b[0;1;31mFAILED\x1b[0m] Failed to start nvidia-mig…onfiguration at boot (h100-slurm).\n"
                       "[\x1b[0;1;33mDEPEND\x1b[0m] Dependency failed for slur…- Fake slurmd (boot test fixture).\n")


def test_recorded_driver_late_boot_passes_and_a_prompt_driver_fails_driver_waited() -> None:
    got = verdicts("report-driver-late.txt", ctx("driver-late", metrics=(DATA / "metrics-ok.prom").read_text()))
    assert "driver-waited" in got and [i for i, ok in got.items() if not ok] == []
    prompt = verdicts("report-slurm-ok.txt", ctx("driver-late", metrics=(DATA / "metrics-ok.prom").read_text()))
    assert [i for i, ok in prompt.items() if not ok] == ["driver-waited"]


def test_recorded_driver_too_late_boot_passes_every_claim() -> None:
    failed_metrics = (DATA / "metrics-ok.prom").read_text().replace('"} 1\n', '"} 0\n', 1)
    got = verdicts("report-driver-too-late.txt", ctx("driver-too-late", console=DRIVER_FAIL_CONSOLE,
                                                     metrics=failed_metrics))
    assert {"driver-wait-bounded", "slurmd-never-started", "failure-visible", "stub-calls"} <= set(got)
    assert [i for i, ok in got.items() if not ok] == []
    # without systemd's [DEPEND] line for slurmd, the console does not say why slurmd is down
    first_line = DRIVER_FAIL_CONSOLE.split("\n")[0]
    no_depend = verdicts("report-driver-too-late.txt",
                         ctx("driver-too-late", console=first_line, metrics=failed_metrics))
    assert [i for i, ok in no_depend.items() if not ok] == ["failure-visible"]


def test_driver_wait_bounded_notices_an_apply() -> None:
    text = (DATA / "report-driver-too-late.txt").read_text()
    stamp = text.split("=== stub-log\n", 1)[1].split()[0]
    text = text.replace("=== show nvidia-mig-restore.service",
                        f"{float(stamp) + 9:.6f} nvidia-mig-parted apply -f x -c current\n"
                        "=== show nvidia-mig-restore.service", 1)
    got = verdicts("report-driver-too-late.txt", ctx("driver-too-late"))  # sanity: the file itself
    assert got["driver-wait-bounded"]
    parsed = parse_report(text)
    claims = {c.id: c.passed for c in node_claims(parsed, ctx("driver-too-late"))}
    assert claims["driver-wait-bounded"] is False


def test_recorded_manager_reenabled_boots() -> None:
    """mask: the upgrade's enable is refused and every claim holds; disable: the manager undid the layout."""
    metrics = (DATA / "metrics-ok.prom").read_text()
    masked = verdicts("report-manager-masked.txt", ctx("manager-reenabled", metrics=metrics))
    assert masked["package-upgrade-ran"] and [i for i, ok in masked.items() if not ok] == []
    fight = verdicts("report-manager-disabled.txt", ctx("manager-reenabled", metrics=metrics))
    assert {i for i, ok in fight.items() if not ok} == {"mig-manager-never-ran", "layout-applied", "gpu-count",
                                                       "exported-layout"}
    no_upgrade = verdicts("report-slurm-ok.txt", ctx("manager-reenabled", metrics=metrics))
    assert [i for i, ok in no_upgrade.items() if not ok] == ["package-upgrade-ran"]


def test_recorded_gpu_client_boot_and_a_client_that_started_first() -> None:
    metrics = (DATA / "metrics-ok.prom").read_text()
    got = verdicts("report-gpu-client.txt", ctx("gpu-client", metrics=metrics))
    assert {"gpu-client-after-restore", "gpu-client-holds-gpu"} <= set(got)
    assert [i for i, ok in got.items() if not ok] == []
    text = (DATA / "report-gpu-client.txt").read_text()
    start = text.index("=== show nvidia-dcgm.service")
    section = text[start:text.index("=== ", start + 4)]
    early = "\n".join("InactiveExitTimestampMonotonic=5" if line.startswith("InactiveExitTimestampMonotonic=")
                      else line for line in section.splitlines()) + "\n"
    claims = node_claims(parse_report(text.replace(section, early)), ctx("gpu-client", metrics=metrics))
    assert [c.id for c in claims if not c.passed] == ["gpu-client-after-restore"]
    released = parse_report(text.replace("=== simgpu-knobs\nin-use=\n", "=== simgpu-knobs\n"))
    assert [c.id for c in node_claims(released, ctx("gpu-client", metrics=metrics)) if not c.passed] == [
        "gpu-client-holds-gpu"]


def test_recorded_boot_with_debians_own_slurmd() -> None:
    """A Packer boot of images/h100-slurm whose consumer was Debian's slurmd package (unit file and binary)."""
    real = dataclasses.replace(ctx(metrics=(DATA / "metrics-slurm-real-ok.prom").read_text()), real_slurmd=True)
    got = verdicts("report-slurm-real-ok.txt", real)
    assert got["slurmd-real"] and got["slurmd-active"] and got["restore-before-slurmd"]
    assert [i for i, ok in got.items() if not ok] == []
    text = (DATA / "report-slurm-real-ok.txt").read_text()
    fake = text.replace("slurmd: slurmd version 22.05.8 started\n", "")  # what the fake consumer's journal says
    parsed = parse_report(fake)
    assert not {c.id: c.passed for c in node_claims(parsed, real)}["slurmd-real"]


def test_provided_later_missing_needs_a_profile_that_lists_mig_parted() -> None:
    run = subprocess.run([sys.executable, "-m", "migbake", "boot-test", "images/h200-inference/node-profile.yaml",
                          "--scenario", "provided-later-missing"], capture_output=True, text=True, check=False,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "generator")})
    assert run.returncode == 2 and "image.provided_later lists nvidia-mig-parted" in run.stderr, run.stderr
