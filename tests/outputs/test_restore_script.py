"""The generated restore logic (rootfs/etc/nvidia-mig/restore.sh), run for real against simulated tools.

The unit runs it at every boot: wait for the driver (bounded), apply, the Ampere reboot-once path for a
MIG mode change that waits for a GPU reset, assert, the CDI refresh, the metrics file. Simulated
nvidia-smi, nvidia-mig-parted and systemctl (first on PATH, each call logged) stand in for the node;
the reboot marker is pointed into the test's folder. The metrics file is read with prometheus-client's
text parser, the same format node_exporter's textfile collector reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from realtools import Ran, run
from support import WORLD, generate

pytestmark = pytest.mark.realtool

SCRIPT = "rootfs/etc/nvidia-mig/restore.sh"
H200 = "  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
A100 = "  - model: a100-80gb\n    mig: {layout: {1g.10gb: 7}}\n"

FAKE_SMI = r"""#!/bin/bash
printf '%s\n' "$*" >>"$STATE/calls"
n=$(( $(cat "$STATE/smi.count" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$STATE/smi.count"
case "$*" in
  --query-gpu=index,mig.mode.current,mig.mode.pending*) cat "$STATE/modes" ;;
  '') if [ "$n" -le "$(cat "$STATE/smi.fails" 2>/dev/null || echo 0)" ]; then
        echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2; exit 9
      fi
      v=$(cat "$STATE/driver" 2>/dev/null || echo 580.159.04)
      echo "| NVIDIA-SMI $v   Driver Version: $v   CUDA Version: 13.0 |" ;;
  *) echo "fake nvidia-smi: unexpected $*" >&2; exit 97 ;;
esac
"""
FAKE_MIG_PARTED = r"""#!/bin/bash
printf 'nvidia-mig-parted %s\n' "$*" >>"$STATE/calls"
case "$1" in
  apply) [ "$(cat "$STATE/apply" 2>/dev/null || echo ok)" = ok ] || { echo "error: GPU reset" >&2; exit 1; } ;;
  assert) [ "$(cat "$STATE/assert" 2>/dev/null || echo ok)" = ok ] || { echo "not all GPUs match" >&2; exit 1; } ;;
  *) exit 97 ;;
esac
"""
FAKE_SYSTEMCTL = r"""#!/bin/bash
printf 'systemctl %s\n' "$*" >>"$STATE/calls"
case "$*" in
  "show -p LoadState --value nvidia-cdi-refresh.service") cat "$STATE/cdi" 2>/dev/null || echo not-found ;;
  "--no-block reboot" | "restart --no-block nvidia-cdi-refresh.service" | "reset-failed nvidia-cdi-refresh.service") ;;
  *) echo "fake systemctl: unexpected $*" >&2; exit 97 ;;
esac
"""


@dataclass
class Node:
    """A folder with simulated tools, state files and the generated restore script pointed at them."""

    root: Path
    script: Path
    state: Path
    marker: Path
    metrics: Path

    def set(self, name: str, value: str) -> None:
        (self.state / name).write_text(value)

    def run(self) -> Ran:
        # proc: the processes and modules the reboot-once path looks at (an empty one: nothing holds the GPU)
        WORLD.point("proc", self.proc)
        env = {"PATH": f"{self.root / 'bin'}:/usr/bin:/bin", "STATE": str(self.state)}
        return run(["bash", str(self.script)], env=env, timeout=60)

    @property
    def proc(self) -> Path:
        path = self.root / "proc"
        path.mkdir(exist_ok=True)
        return path

    def calls(self) -> list[str]:
        log = self.state / "calls"
        return log.read_text().splitlines() if log.exists() else []

    def metric_values(self) -> dict[str, float]:
        """Every sample of the metrics file, parsed by prometheus-client (name -> value)."""
        from prometheus_client.parser import text_string_to_metric_families

        out = {}
        for family in text_string_to_metric_families(self.metrics.read_text()):
            assert family.type == "gauge" and family.documentation, family
            for sample in family.samples:
                assert sample.labels == {"profile": "restore-under-test", "config": "current"}, sample
                out[sample.name] = sample.value
        return out


def make_node(tmp_path: Path, gpus: str = H200, restore: str = "", metrics: bool = True) -> Node:
    root = tmp_path / "node"
    tools = root / "opt/nvidia"
    state = root / "state"
    state.mkdir(parents=True)
    prom = root / "textfile/migbake.prom"
    extra = f"  metrics_textfile: {prom}\n" if metrics else ""
    out = generate(f"version: 1\nname: restore-under-test\ngpus:\n{gpus}restore:\n  timeout_seconds: 300\n"
                   f"{restore}{extra}tools: {{nvidia_smi: {tools}/nvidia-smi, "
                   f"nvidia_mig_parted: {tools}/nvidia-mig-parted}}\n", tmp_path / "out", node_root=True)
    marker = root / "var/lib/migbake/reboot-attempted"
    text = (out / SCRIPT).read_text()
    assert text.count("\nmarker='/var/lib/migbake/reboot-attempted'\n") == 1
    script = root / "restore.sh"
    script.write_text(text.replace("\nmarker='/var/lib/migbake/reboot-attempted'\n", f"\nmarker='{marker}'\n"))
    for name, body in (("opt/nvidia/nvidia-smi", FAKE_SMI), ("opt/nvidia/nvidia-mig-parted", FAKE_MIG_PARTED),
                       ("bin/systemctl", FAKE_SYSTEMCTL)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
        (root / name).chmod(0o755)
    return Node(root, script, state, marker, prom)


def _tools(calls: list[str]) -> list[str]:
    """The mig-parted verbs and systemctl actions, in order (nvidia-smi polls left out)."""
    return [c.split(" -f ")[0] for c in calls if c.startswith(("nvidia-mig-parted", "systemctl"))]


def test_success_applies_asserts_and_reports_1(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert _tools(node.calls()) == ["nvidia-mig-parted apply", "nvidia-mig-parted assert",
                                    "systemctl show -p LoadState --value nvidia-cdi-refresh.service"]
    assert f"apply -f {tmp_path}" not in ran.text  # tool output is not echoed as our own
    values = node.metric_values()
    assert values["migbake_mig_restore_success"] == 1
    assert values["migbake_mig_restore_reboot_marker"] == 0
    assert 0 <= values["migbake_mig_restore_duration_seconds"] < 30
    assert values["migbake_mig_restore_last_run_timestamp_seconds"] > 1.7e9
    assert [p.name for p in node.metrics.parent.iterdir()] == ["migbake.prom"]  # the temp file was renamed


@pytest.mark.parametrize("step", ["apply", "assert"])
def test_failure_reports_0_and_exits_1(tmp_path: Path, step: str) -> None:
    node = make_node(tmp_path)
    node.set(step, "fails")
    ran = node.run()
    assert ran.rc == 1 and f"FAILED: nvidia-mig-parted {step} -f" in ran.err, ran.text
    assert node.metric_values()["migbake_mig_restore_success"] == 0
    assert not any("reboot" in c or "cdi-refresh" in c for c in node.calls())


@pytest.mark.parametrize(("driver", "said"), [("550.54.14", True), ("550.90.07", False), ("580.159.04", False)])
def test_a_driver_older_than_the_minimum_is_named_before_apply_fails(tmp_path: Path, driver: str, said: bool) -> None:
    """H200: MIG needs 550.90.07 or later (MIG User Guide, Deployment Considerations); the log says so first."""
    node = make_node(tmp_path)
    node.set("driver", driver)
    node.set("apply", "fails")
    ran = node.run()
    line = (f"driver {driver} is older than the oldest with MIG on h200-141gb: 550.90.07 (MIG User Guide, "
            "Deployment Considerations); apply will fail")
    assert ran.rc == 1 and (line in ran.text) is said, ran.text
    if said:
        assert ran.text.index(line) < ran.text.index("FAILED: nvidia-mig-parted apply")


GB200 = "  - model: gb200-186gb\n    mig: {layout: {3g.93gb: 2}}\n"
PARAMS = 'EnableUserNUMAManagement: 1\nCoherentGPUMemoryMode: "{}"\nRegistryDwords: ""\n'  # nv-procfs.c's lines


@pytest.mark.parametrize(("gpus", "mode", "said"), [(GB200, "driver", True), (GB200, "numa", False), (GB200, "", False),
                                                    (GB200, None, False), (H200, "driver", False)],
                         ids=["grace-cdmm-on", "grace-numa", "grace-unset", "grace-no-params", "h200-not-grace"])
def test_cdmm_on_a_grace_system_is_named_before_apply_fails(tmp_path: Path, gpus: str, mode: str | None,
                                                           said: bool) -> None:
    """Grace: MIG does not work with CDMM; the log says CDMM is on (the module's params file) before apply fails."""
    node = make_node(tmp_path, gpus, restore="  cdmm: disabled\n")
    if mode is not None:
        (node.proc / "driver/nvidia").mkdir(parents=True)
        (node.proc / "driver/nvidia/params").write_text(PARAMS.format(mode))
    node.set("apply", "fails")
    ran = node.run()
    proc = WORLD.path("proc")
    line = (f'CDMM is on ({proc}/driver/nvidia/params: CoherentGPUMemoryMode: "driver"): MIG does not work '
            "with CDMM on gb200-186gb (GPU Operator release notes 25.3.2); load nvidia with "
            "NVreg_CoherentGPUMemoryMode=numa")
    assert ran.rc == 1 and (line in ran.text) is said, ran.text
    assert ("CDMM is on" in ran.text) is said, ran.text
    if said:
        assert ran.text.index(line) < ran.text.index("FAILED: nvidia-mig-parted apply")


def test_no_metrics_file_without_the_key(tmp_path: Path) -> None:
    node = make_node(tmp_path, metrics=False)
    assert node.run().rc == 0
    assert not node.metrics.parent.exists()


# --- the driver answers late --------------------------------------------------------------------

def test_a_late_driver_is_waited_for(tmp_path: Path) -> None:
    node = make_node(tmp_path, restore="  driver_wait_seconds: 10\n")
    node.set("smi.fails", "2")
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert node.calls()[:3] == ["", "", ""]  # polled until the third answer
    assert re.search(r"the NVIDIA driver answers after [0-9]+ s", ran.out), ran.out


def test_a_driver_that_never_answers_fails_within_the_bound(tmp_path: Path) -> None:
    node = make_node(tmp_path, restore="  driver_wait_seconds: 1\n")
    node.set("smi.fails", "1000")
    ran = node.run()
    assert ran.rc == 1
    assert ("FAILED: NVIDIA GPU(s) on this machine but no NVIDIA driver: the NVIDIA driver did not answer "
            "within 1 s") in ran.err, ran.err
    assert "couldn't communicate with the NVIDIA driver" in ran.err
    assert _tools(node.calls()) == []  # neither apply nor assert ran
    assert node.metric_values()["migbake_mig_restore_success"] == 0


# --- Ampere: a MIG mode change that waits for a GPU reset ----------------------------------------

PENDING = "0, Disabled, Enabled\n1, Enabled, Enabled\n"
CURRENT = "0, Enabled, Enabled\n1, Enabled, Enabled\n"


def test_pending_mode_records_the_marker_and_reboots_once(tmp_path: Path) -> None:
    node = make_node(tmp_path, A100)
    node.set("apply", "fails")
    node.set("modes", PENDING)
    ran = node.run()
    assert ran.rc == 1, ran.text  # the consumers stay down until the next boot
    assert _tools(node.calls()) == ["nvidia-mig-parted apply", "systemctl --no-block reboot"]
    assert node.marker.read_text().split(" ", 1)[1] == "GPU 0 (Disabled -> Enabled)\n"
    assert "rebooting once" in ran.out
    assert "nothing was seen holding the GPU" in ran.out, ran.out
    values = node.metric_values()
    assert values["migbake_mig_restore_success"] == 0 and values["migbake_mig_restore_reboot_marker"] == 1


def test_the_reboot_once_path_names_what_holds_the_gpu(tmp_path: Path) -> None:
    # the restore says which blocker of the GPU reset it met (the preflight's gpu-reset check, same code)
    node = make_node(tmp_path, A100)
    node.set("apply", "fails")
    node.set("modes", PENDING)
    (node.proc / "modules").write_text("nvidia_uvm 1 0 - Live 0x0\nnvidia_drm 2 1 - Live 0x0\nnvidia 3 2 - Live 0x0\n")
    for pid, comm in (("812", "nvidia-persiste"), ("1400", "nv-fabricmanage"), ("2201", "Xorg"), ("9", "bash")):
        (node.proc / pid).mkdir()
        (node.proc / pid / "comm").write_text(comm + "\n")
    ran = node.run()
    assert ran.rc == 1 and "rebooting once" in ran.out, ran.text
    said = ran.out.split("(the reset was blocked by what holds the GPU: ", 1)[1].split("); rebooting once", 1)[0]
    assert said.split("; ") == [  # the module first, then the processes in /proc's order
        "the nvidia_drm module is loaded", "the fabric manager runs (nv-fabricmanager, pid 1400)",
        "a display server runs (Xorg, pid 2201)", "nvidia-persistenced runs (persistence mode, pid 812)"], said
    # still pending after the reboot: the failure says the same
    (node.proc / "9" / "comm").write_text("Xwayland\n")
    ran = node.run()
    assert ran.rc == 1 and "not rebooting again" in ran.err, ran.text
    assert "a display server runs (Xwayland, pid 9)" in ran.err, ran.err


def test_after_the_reboot_the_mode_is_current_so_it_applies_asserts_and_clears_the_marker(tmp_path: Path) -> None:
    node = make_node(tmp_path, A100)
    node.marker.parent.mkdir(parents=True)
    node.marker.write_text("1764000000 GPU 0 (Disabled -> Enabled)\n")
    node.set("modes", CURRENT)
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert _tools(node.calls())[:2] == ["nvidia-mig-parted apply", "nvidia-mig-parted assert"]
    assert not any("reboot" in c for c in node.calls())
    assert not node.marker.exists() and "removed" in ran.out
    assert node.metric_values()["migbake_mig_restore_reboot_marker"] == 0


def test_still_pending_after_the_reboot_fails_and_never_reboots_again(tmp_path: Path) -> None:
    node = make_node(tmp_path, A100)
    node.marker.parent.mkdir(parents=True)
    node.marker.write_text("1764000000 GPU 0 (Disabled -> Enabled)\n")
    node.set("apply", "fails")
    node.set("modes", PENDING)
    for _ in range(2):  # every later boot too
        ran = node.run()
        assert ran.rc == 1
        assert "still after the reboot recorded in" in ran.err and "not rebooting again" in ran.err, ran.err
    assert not any("reboot" in c for c in node.calls())
    assert node.marker.exists()
    assert node.metric_values()["migbake_mig_restore_reboot_marker"] == 1


def test_on_reset_required_fail_never_reboots(tmp_path: Path) -> None:
    node = make_node(tmp_path, A100, restore="  on_reset_required: fail\n")
    node.set("apply", "fails")
    node.set("modes", PENDING)
    ran = node.run()
    assert ran.rc == 1 and "restore.on_reset_required: fail" in ran.err, ran.err
    assert not any("reboot" in c for c in node.calls()) and not node.marker.exists()


def test_hopper_never_takes_the_reboot_path(tmp_path: Path) -> None:
    node = make_node(tmp_path, H200)
    node.set("apply", "fails")
    node.set("modes", PENDING)  # even if nvidia-smi said so, the script does not ask
    ran = node.run()
    assert ran.rc == 1 and "FAILED: nvidia-mig-parted apply" in ran.err
    assert not any("mig.mode.pending" in c or "reboot" in c for c in node.calls())
    assert "reset_path='none'" in node.script.read_text()


# --- CDI ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("setting", "unit", "restarted"), [
    ("auto", "loaded", True), ("auto", "not-found", False), ("never", "loaded", False)],
    ids=["auto-toolkit-present", "auto-toolkit-absent", "never"])
def test_cdi_refresh_after_a_successful_assert(tmp_path: Path, setting: str, unit: str, restarted: bool) -> None:
    node = make_node(tmp_path, restore=f"  cdi_refresh: {setting}\n")
    node.set("cdi", unit)
    ran = node.run()
    assert ran.rc == 0, ran.text
    tools = _tools(node.calls())
    assert ("systemctl restart --no-block nvidia-cdi-refresh.service" in tools) is restarted
    if restarted:
        assert tools.index("systemctl restart --no-block nvidia-cdi-refresh.service") > tools.index(
            "nvidia-mig-parted assert")
        # a refresh that failed up to its start limit (toolkit v1.20: Restart=on-failure) takes no restart
        # until reset-failed
        assert tools.index("systemctl reset-failed nvidia-cdi-refresh.service") == tools.index(
            "systemctl restart --no-block nvidia-cdi-refresh.service") - 1


def test_metrics_parser_rejects_a_broken_file(tmp_path: Path) -> None:
    """The parser the tests trust does reject what node_exporter would reject."""
    from prometheus_client.parser import text_string_to_metric_families

    with pytest.raises(ValueError):
        list(text_string_to_metric_families('migbake_mig_restore_success{profile="x" 1\n'))
