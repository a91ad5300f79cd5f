"""The driver-container watcher (rootfs/etc/nvidia-mig/driver-watch.sh), run for real in a sandbox.

The script takes no path from the environment, so the test renders its own copy with every node path under
the test's folder (``rootfs.watch_paths`` with a root): a fake /run/nvidia with the driver's ready file and
PID file, a fake /sys/module/nvidia/initstate and /proc/PID/{comm,stat}. Stub nsenter, unshare, nvidia-smi,
nvidia-mig-parted, nvidia-ctk and kubectl, first on PATH, record their argv. The watcher is started in the
background and stopped once what it must do has happened (or a bounded time has passed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from realtools import run

from migbake.profile.nodeprofile import build_profile
from migbake.render.environment import Templates
from migbake.render.plan import make_plan
from migbake.render.targets.context import shared_variables
from migbake.render.targets.rootfs import watch_paths

pytestmark = pytest.mark.realtool

H100 = "  - model: h100-80gb\n    mig: {layout: {1g.10gb: 7}}\n"
A100 = "  - model: a100-80gb\n    mig: {layout: {3g.40gb: 2}}\n"

STUB = r"""#!/bin/bash
printf '%s %s\n' "${0##*/}" "$*" >>"$STATE/calls"
"""
# nsenter -t PID -m -- CMD...: CMD on the host (the sandbox has no other namespace)
NSENTER = STUB + r"""[ "$1" = -t ] && [ "$3" = -m ] && [ "$4" = -- ] || exit 97
shift 4; exec "$@"
"""
# unshare -m -- /bin/sh -c SCRIPT sh SYS ROOT CMD...: CMD on the host, recording the bind it was asked for
UNSHARE = STUB + r"""[ "$1" = -m ] && [ "$2" = -- ] || exit 97
printf 'bind %s %s/sys\n' "$7" "$8" >>"$STATE/calls"
shift 8; exec "$@"
"""
MIG_PARTED = STUB + r"""n=$(( $(cat "$STATE/$1.count" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$STATE/$1.count"
case "$1" in
  assert) [ -e "$STATE/applied" ] || [ -e "$STATE/mig-kept" ] ;;
  apply) if [ -e "$STATE/apply-fails" ]; then echo "error: apply" >&2; exit 1; fi; touch "$STATE/applied" ;;
  *) exit 97 ;;
esac
"""
SMI = STUB + r"""case "$*" in
  --query-gpu=index,pci.device_id,mig.mode.current*) cat "$STATE/modes" ;;
  '') ;;
  *) exit 97 ;;
esac
"""
# kubectl --kubeconfig=FILE auth whoami: a node's user only for credentials that are a node's
KUBECTL = STUB + r"""case "$*" in
  *" auth whoami "*) grep -q node-credentials "${1#--kubeconfig=}" && echo system:node:gpu-1 || exit 1 ;;
esac
"""


@dataclass
class Sandbox:
    """A node's paths under a folder, the stubs first on PATH, and the watcher rendered for them."""

    root: Path
    state: Path
    script: Path
    env: dict[str, str]

    @property
    def ready(self) -> Path:
        return self.root / "run/migbake/mig-ready"

    def calls(self) -> list[str]:
        f = self.state / "calls"
        return f.read_text().splitlines() if f.exists() else []

    def driver_up(self, pid: int = 4242, start: str = "777") -> None:
        """The driver container as NVIDIA's writes itself: its PID file, the module live, the ready file by mv."""
        proc = self.root / "proc" / str(pid)
        proc.mkdir(parents=True, exist_ok=True)
        (proc / "comm").write_text("nvidia-driver\n")
        (proc / "stat").write_text(f"{pid} (nvidia-driver) S 1 {pid} {pid} 0 -1 4194560 "
                                   + " ".join(["0"] * 12) + f" {start} 0 0\n")  # starttime: field 22
        (self.root / "run/nvidia/nvidia-driver.pid").write_text(f"{pid}\n")
        (self.root / "sys/module/nvidia/initstate").write_text("live\n")
        tmp = self.root / "run/nvidia/validations/.driver-ctr-ready.tmp"
        tmp.write_text("GDRCOPY_ENABLED: false\n")
        tmp.rename(self.root / "run/nvidia/validations/.driver-ctr-ready")

    def driver_gone(self) -> None:
        (self.root / "run/nvidia/validations/.driver-ctr-ready").unlink()

    def running(self) -> Watcher:
        return Watcher(subprocess.Popen(["bash", str(self.script)], env=self.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True))


@dataclass
class Watcher:
    proc: subprocess.Popen[str]

    def stop(self) -> str:
        os.killpg(self.proc.pid, signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        return out


def wait_for(what: Callable[[], bool], seconds: float = 20) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if what():
            return True
        time.sleep(0.1)
    return what()


def _render(profile_text: str, root: Path, **watch: object) -> str:
    import yaml

    profile = build_profile(yaml.safe_load(profile_text), profile_text)
    plan = make_plan(profile)
    paths = {**watch_paths(plan, str(root)), "poll": 0.2, **watch}
    return Templates(shared_variables(plan)).text("rootfs/etc/nvidia-mig/driver-watch.sh.j2", {"watch": paths})


def sandbox(tmp_path: Path, gpus: str = H100, *, managed: bool = True, kubectl: bool = True, extra: str = "",
            **watch: object) -> Sandbox:
    root, state, bin_dir = tmp_path / "node", tmp_path / "state", tmp_path / "bin"
    for d in ("run/nvidia/validations", "sys/module/nvidia", "proc", "etc/migbake", "etc/nvidia-mig",
              "etc/kubernetes", "usr/bin", "run/nvidia/driver/sys"):
        (root / d).mkdir(parents=True, exist_ok=True)
    state.mkdir()
    bin_dir.mkdir()
    stubs = {"nsenter": NSENTER, "unshare": UNSHARE, "nvidia-smi": SMI, "nvidia-ctk": STUB}
    if kubectl:
        stubs["kubectl"] = KUBECTL
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (root / "usr/bin/nvidia-mig-parted").write_text(MIG_PARTED)
    (root / "usr/bin/nvidia-mig-parted").chmod(0o755)
    (root / "etc/nvidia-mig/config.yaml").write_text("version: v1\n")
    (root / "etc/kubernetes/kubelet.conf").write_text("apiVersion: v1\n# node-credentials\n")
    (state / "modes").write_text("0, 0x20B510DE, Enabled\n")
    if managed:
        (root / "etc/migbake/managed").write_text("profile=p\n")
    profile = (f"version: 1\nname: p\ngpus:\n{gpus}driver: container\nrestore:\n"
               f"  metrics_textfile: {root}/metrics/migbake.prom\n  config_path: {root}/etc/nvidia-mig/config.yaml\n"
               f"tools:\n  nvidia_mig_parted: {root}/usr/bin/nvidia-mig-parted\n{extra}")
    script = tmp_path / "driver-watch.sh"
    script.write_text(_render(profile, root, **watch))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state)}
    return Sandbox(root, state, script, env)


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    yield sandbox(tmp_path)


def _ready_lines(box: Sandbox) -> dict[str, str]:
    return dict(line.split("=", 1) for line in box.ready.read_text().splitlines())


def test_the_rendered_watcher_passes_shellcheck(box: Sandbox) -> None:
    ran = run(["shellcheck", "-s", "bash", str(box.script)])
    assert ran.rc == 0, ran.text


def test_without_the_managed_file_it_idles(tmp_path: Path) -> None:
    box = sandbox(tmp_path, managed=False)
    box.driver_up()
    w = box.running()
    time.sleep(1.5)
    out = w.stop()
    assert box.calls() == []
    assert not box.ready.exists()
    assert out.count("not one migbake manages; idle") == 1, out


def test_driver_present_and_mig_lost_applies_then_asserts_through_nsenter(box: Sandbox) -> None:
    w = box.running()
    time.sleep(0.6)
    assert box.calls() == [], "nothing runs before the driver is there"
    box.driver_up()
    metrics = box.root / "metrics/migbake.prom"
    # the ready file, then the labels and the metrics: wait for all three before stopping the watcher
    assert wait_for(lambda: box.ready.exists() and metrics.exists()
                    and any(c.startswith("kubectl") and " label " in c for c in box.calls())), w.stop()
    out = w.stop()
    stage = box.root / "run/nvidia/migbake"
    cfg = f"-f {stage}/config.yaml -c current"
    mig = [c for c in box.calls() if c.startswith("nvidia-mig-parted")]
    assert mig == [f"nvidia-mig-parted assert {cfg}", f"nvidia-mig-parted apply {cfg}",
                   f"nvidia-mig-parted assert {cfg}"], out
    assert f"nsenter -t 4242 -m -- {stage}/nvidia-mig-parted apply {cfg}" in box.calls()
    # the post-steps of NVIDIA's MIG manager: nvidia-smi in the driver's namespace, the control device nodes
    assert "nsenter -t 4242 -m -- nvidia-smi" in box.calls()
    assert f"nvidia-ctk system create-device-nodes --control-devices --dev-root={box.root}/run/nvidia/driver" \
        in box.calls()
    lines = _ready_lines(box)
    assert lines["layout"] == "current"
    assert lines["gen"].startswith("4242.777.")
    assert len(lines["config_sha"]) == 64
    label = next(c for c in box.calls() if c.startswith("kubectl") and " label " in c)
    assert "node gpu-1" in label and "migbake.io/mig-state=ready" in label
    assert f"migbake.io/mig-ready={lines['config_sha'][:16]}" in label
    assert "nvidia.com/gpu.deploy.mig-manager=false" in label
    assert "migbake_mig_restore_success{profile=\"p\",config=\"current\"} 1" in metrics.read_text()


def test_mig_kept_is_only_asserted(box: Sandbox) -> None:
    (box.state / "mig-kept").touch()
    box.driver_up()
    w = box.running()
    assert wait_for(box.ready.exists), w.stop()
    w.stop()
    assert [c.split()[1] for c in box.calls() if c.startswith("nvidia-mig-parted")] == ["assert"]


def test_driver_gone_removes_the_ready_file_and_a_new_generation_restores_again(box: Sandbox) -> None:
    box.driver_up()
    w = box.running()
    assert wait_for(box.ready.exists), w.stop()
    first = _ready_lines(box)["gen"]
    box.driver_gone()
    assert wait_for(lambda: not box.ready.exists(), 3), w.stop()
    (box.state / "applied").unlink()  # the module was unloaded: MIG is lost
    box.driver_up(pid=5151, start="999")
    assert wait_for(box.ready.exists), w.stop()
    w.stop()
    second = _ready_lines(box)["gen"]
    assert second != first and second.startswith("5151.999.")
    assert [c.split()[1] for c in box.calls() if c.startswith("nvidia-mig-parted")].count("apply") == 2


def test_a_failed_apply_is_retried_a_bounded_number_of_times_then_labelled_failed(tmp_path: Path) -> None:
    box = sandbox(tmp_path, attempts=2)
    (box.state / "apply-fails").touch()
    box.driver_up()
    w = box.running()
    assert wait_for(lambda: any("mig-state=failed" in c for c in box.calls()), 30), w.stop()
    time.sleep(1)  # the same generation: no further attempt
    out = w.stop()
    assert (box.state / "apply.count").read_text().strip() == "2"
    assert not box.ready.exists()
    assert "FAILED: nvidia-mig-parted apply" in out
    assert "migbake_mig_restore_success{profile=\"p\",config=\"current\"} 0" in \
        (box.root / "metrics/migbake.prom").read_text()


def test_ampere_with_mig_mode_off_fails_closed_without_apply(tmp_path: Path) -> None:
    box = sandbox(tmp_path, A100)
    (box.state / "modes").write_text("0, 0x20B510DE, Disabled\n")
    box.driver_up()
    w = box.running()
    assert wait_for(lambda: any("mig-state=failed" in c for c in box.calls()), 10), w.stop()
    out = w.stop()
    assert [c.split()[1] for c in box.calls() if c.startswith("nvidia-mig-parted")] == ["assert"]
    assert "MIG mode is off on GPU 0" in out and "out of band" in out
    assert not box.ready.exists()


def test_without_a_live_driver_pid_it_chroots_with_the_hosts_sys_bound(box: Sandbox) -> None:
    box.driver_up()
    (box.root / "run/nvidia/nvidia-driver.pid").write_text("999999\n")  # stale: no such process
    w = box.running()
    assert wait_for(box.ready.exists), w.stop()
    w.stop()
    assert f"bind {box.root}/sys {box.root}/run/nvidia/driver/sys" in box.calls()
    assert not any(c.startswith("nsenter") for c in box.calls())
    assert _ready_lines(box)["gen"].startswith("none.none.")


def test_the_module_not_live_is_no_driver(box: Sandbox) -> None:
    box.driver_up()
    (box.root / "sys/module/nvidia/initstate").write_text("going\n")
    w = box.running()
    time.sleep(1)
    w.stop()
    assert box.calls() == [] and not box.ready.exists()


def _verify(box: Sandbox, tmp_path: Path) -> tuple[int, str]:
    """The generated verify of the same profile, its paths under the sandbox too, with a stub systemctl."""
    import yaml

    profile_text = (f"version: 1\nname: p\ngpus:\n{H100}driver: container\nrestore:\n"
                    f"  config_path: {box.root}/etc/nvidia-mig/config.yaml\n")
    plan = make_plan(build_profile(yaml.safe_load(profile_text), profile_text))
    script = tmp_path / "verify.sh"
    script.write_text(Templates(shared_variables(plan)).text(
        "scripts/verify-driver-watch.sh.j2", {"watch": watch_paths(plan, str(box.root))}))
    systemctl = Path(box.env["PATH"].split(":")[0]) / "systemctl"
    systemctl.write_text("#!/bin/sh\necho active\n")
    systemctl.chmod(0o755)
    ran = run(["bash", str(script)], env=box.env)
    return ran.rc, ran.out


def test_verify_passes_for_the_running_drivers_generation_and_fails_for_a_stale_one(box: Sandbox,
                                                                                    tmp_path: Path) -> None:
    box.driver_up()
    w = box.running()
    assert wait_for(box.ready.exists), w.stop()
    w.stop()
    rc, out = _verify(box, tmp_path)
    assert rc == 0, out
    assert "PASS  assert" in out and "FAIL" not in out
    box.driver_up(pid=5151)  # a new driver the watcher has not seen
    rc, out = _verify(box, tmp_path)
    assert rc == 1 and "is of driver PID 4242, the driver now runs as PID 5151" in out, out


def test_preflight_fails_without_a_driver_container(tmp_path: Path) -> None:
    """driver: container: no driver container running fails the driver and nvidia-smi rows (no host nvidia-smi)."""
    from test_preflight import SimNode
    from test_preflight_script import preflight_node

    ran = preflight_node(tmp_path, SimNode(driver="none"), extra="driver: container\n")
    assert ran.status["driver"] == "FAIL" and ran.status["nvidia-smi"] == "FAIL", ran.report
    assert "no driver container runs" in ran.detail["nvidia-smi"]
    assert not any(c.startswith("nvidia-smi") for c in ran.calls)


def test_preflight_passes_a_ready_driver_container(tmp_path: Path) -> None:
    """A ready driver container passes; nvidia-smi runs in its namespace (nsenter, a stub here)."""
    import json

    from support import generate
    from test_preflight import SimNode, install, profile_yaml

    root = tmp_path / "node"
    root.mkdir()
    node = SimNode(driver="none", files={"sbin/nsenter": '#!/bin/sh\nshift 4\nexec "$(dirname "$0")/../usr/bin/$@"\n'})
    env = install(node, root)
    (root / "run/nvidia/validations").mkdir(parents=True)
    (root / "run/nvidia/validations/.driver-ctr-ready").write_text("")
    (root / "run/nvidia/nvidia-driver.pid").write_text("4242\n")
    (root / "proc/4242").mkdir(parents=True)
    (root / "proc/4242/comm").write_text("nvidia-driver\n")
    import shutil

    from support import WORLD

    sysfs = tmp_path / "sys"  # the test copy's /sys: the default GPU's, with the nvidia module live
    shutil.copytree(WORLD.gpu_sysfs, sysfs, symlinks=True)
    WORLD.point("sys", sysfs)
    (sysfs / "module/nvidia").mkdir(parents=True, exist_ok=True)
    (sysfs / "module/nvidia/initstate").write_text("live\n")
    out = generate(profile_yaml(root, extra="driver: container\n"), tmp_path / "out")
    ran = run([str(out / "scripts/preflight-mig-restore.sh"), "--json"], env=env)
    status = {c["check"]: c["status"] for c in json.loads(ran.out)["checks"]}
    assert status["driver"] == "PASS" and status["nvidia-smi"] == "PASS", ran.text


def test_labels_use_the_kubeconfig_that_is_a_nodes(tmp_path: Path) -> None:
    """A kubeconfig that is not a node's (another tool's file at that path) is passed over for kubeadm's."""
    box = sandbox(tmp_path)
    (box.root / "var/lib/kubelet").mkdir(parents=True)
    (box.root / "var/lib/kubelet/kubeconfig").write_text("apiVersion: v1\n")
    box.driver_up()
    w = box.running()
    assert wait_for(lambda: any(" label " in c for c in box.calls())), w.stop()
    w.stop()
    label = next(c for c in box.calls() if " label " in c)
    assert label.startswith(f"kubectl --kubeconfig={box.root}/etc/kubernetes/kubelet.conf label --overwrite node gpu-1")


def test_the_openshift_machineconfig_carries_the_watcher_and_holds_no_kubelet(tmp_path: Path) -> None:
    """The GPU pool's MachineConfig (made by butane --strict from openshift-<role>.bu): the watcher enabled, its
    script and the managed file written, NVIDIA's packaged MIG manager masked, no kubelet drop-in."""
    import yaml
    from support import generate

    text = ("version: 1\nname: p\ngpus:\n" + H100 + "driver: container\n")
    out = generate(text, tmp_path / "out")
    mc = yaml.safe_load((out / "butane/openshift-gpu-mig.yaml").read_text())
    assert mc["kind"] == "MachineConfig"
    assert mc["metadata"]["labels"] == {"machineconfiguration.openshift.io/role": "gpu-mig"}
    config = mc["spec"]["config"]
    units = {u["name"]: u for u in config["systemd"]["units"]}
    assert units["migbake-driver-watch.service"]["enabled"] is True
    assert "Type=simple" in units["migbake-driver-watch.service"]["contents"]
    assert units["nvidia-mig-manager.service"] == {"name": "nvidia-mig-manager.service", "mask": True}
    assert "kubelet.service" not in units and "nvidia-mig-restore.service" not in units
    paths = {f["path"] for f in config["storage"]["files"]}
    assert {"/etc/nvidia-mig/driver-watch.sh", "/etc/migbake/managed"} <= paths
    assert "/etc/nvidia-mig/restore.sh" not in paths


def test_an_existing_management_cdi_spec_is_regenerated_with_nvidias_flags(box: Sandbox) -> None:
    spec = box.root / "var/run/cdi/management.nvidia.com-gpu.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text("old spec\n")
    box.driver_up()
    w = box.running()
    assert wait_for(box.ready.exists), w.stop()
    w.stop()
    drv = box.root / "run/nvidia/driver"
    hook = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert (f"nvidia-ctk cdi generate --mode=management --driver-root={drv} --dev-root={drv} "
            f"--vendor=management.nvidia.com --class=gpu --nvidia-cdi-hook-path={hook}") in box.calls()
    assert spec.read_text() == ""  # the stub's output replaced it whole
    assert not list(spec.parent.glob("*.tmp"))
