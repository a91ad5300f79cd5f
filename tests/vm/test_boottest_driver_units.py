"""The driver-container boot-test pieces without a VM: the plan, the wait step, the guest install, the claims.

The claims are replayed on a scenario log shaped like ``guest/driver-scenario``'s, and each one is shown
failing on doctored evidence. The wait step comes from the gate a real ``driver: container`` profile generates.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import generate

from migbake.problems import UsageError
from migbake.rules.validate import check_file
from migbake_boottest import session
from migbake_boottest.drivercontainer import claims, guest, scenarios
from migbake_boottest.drivercontainer.kmod import DriverModules, kernel_release
from migbake_boottest.errors import BootTestError
from migbake_boottest.simgpu.node import GpuState

PROFILE = Path(__file__).parent / "data" / "driver-container" / "node-profile.yaml"
EXPECTED = (GpuState(True, {"3g.40gb": 2}),)
LAYOUT = "gpu 0 bus 00000000:18:00.0 mig 1 pending 1 instances 3g.40gb@0,3g.40gb@4"
BARE = "gpu 0 bus 00000000:18:00.0 mig 0 pending 0 instances -"
GEN1, GEN2, GEN3 = "100.5.1.x", "200.9.2.x", "300.12.3.x"


def _profile():  # type: ignore[no-untyped-def]
    checked = check_file(PROFILE)
    assert checked.profile is not None
    return checked.profile


def scenario_log(*, restarts: tuple[str, ...] = (), control: str = BARE, gated: str | None = LAYOUT,
                 sys_rc: tuple[int, int] = (1, 0), stub: tuple[str, ...] = (), journal: str = "",
                 kubectl: str = "", host_has: str = "") -> str:
    """A scenario log as guest/driver-scenario writes it, with these parts."""
    lines = ["boot 1", "kubelet-active 4000000", "gated-recorded 1030.0"]
    records = ["=== plugin control 1020.5", "mig-ready: absent", control]
    if gated is not None:
        records += ["=== plugin gated 1030.0", f"mig-ready: gen={GEN1} layout=current config_sha=ab", gated]
    calls = ["1000.0 kubelet ExecStartPre", "1010.0 driver-container start boot=1 delay=3",
             "1021.0 nvidia-mig-parted assert -f x", "1022.0 nvidia-mig-parted apply -f x"]
    t, gen = 1100.0, GEN1
    for n, mode in enumerate(restarts):
        new = (GEN2, GEN3)[n]
        lines += [f"restart {mode}", f"mig-ready-before gen={gen} layout=current config_sha=ab",
                  f"driver-gone {t}", f"mig-ready-gone {t + 2.5}", f"restored {t + 30}",
                  f"mig-ready-after gen={new} layout=current config_sha=ab"]
        calls.append(f"{t + 10} nvidia-mig-parted assert -f x")
        if mode == "unload":
            calls.append(f"{t + 11} nvidia-mig-parted apply -f x")
        records += [f"=== plugin gated {t + 31}", f"mig-ready: gen={new} layout=current config_sha=ab", LAYOUT]
        t, gen = t + 100, new
    with_sys = ["  current:", *(["  - devices: all"] if sys_rc[1] == 0 else [])]
    sections = ["=== driver-container-unit", "ActiveState=active", "=== module", "initstate=live",
                "=== host-view", *([host_has] if host_has else []), "driver-root-sys-mounted=yes",
                "driver-root-sys-submounts=0", "driver-root-nvml=yes",
                "=== fallback", "--- chroot without /sys", f"rc={sys_rc[0]}", "mig-configs:", "  current: []",
                "--- chroot with /sys bound", f"rc={sys_rc[1]}", *with_sys,
                "=== plugins", *records, "=== kubectl", *([kubectl] if kubectl else []),
                "=== watcher-journal", *([journal] if journal else []), "=== stub-log", *calls, *stub, "=== end"]
    return "\n".join(lines + sections) + "\n"


def _failed(found: list[claims.Claim]) -> set[str]:
    return {c.id for c in found if not c.passed}


def test_a_good_driver_container_boot_holds_every_claim() -> None:
    found = claims.boot_claims(scenario_log(), scenarios.DRIVER_CONTAINER, EXPECTED, 1)
    assert {c.id for c in found} == {"kubelet-not-held", "driver-simulated", "fallback-binds-sys",
                                     "gated-sees-layout", "control-sees-unrestored"}
    assert not _failed(found), [c for c in found if not c.passed]


@pytest.mark.parametrize(("log", "broken"), [
    (scenario_log(gated=BARE), "gated-sees-layout"),
    (scenario_log(gated=None), "gated-sees-layout"),
    (scenario_log(control=LAYOUT), "control-sees-unrestored"),
    (scenario_log(sys_rc=(0, 0)).replace("  current: []", "  - devices: all"), "fallback-binds-sys"),
    (scenario_log(sys_rc=(1, 1)), "fallback-binds-sys"),
    (scenario_log(host_has="host has /usr/bin/nvidia-smi"), "driver-simulated"),
    (scenario_log().replace("1000.0 kubelet", "1011.0 kubelet"), "kubelet-not-held"),
    (scenario_log().replace("initstate=live", "initstate=absent"), "driver-simulated"),
    (scenario_log().replace("driver-root-sys-submounts=0", "driver-root-sys-submounts=3"), "driver-simulated"),
], ids=["gated-saw-bare-gpu", "gated-never-ran", "control-saw-layout", "chroot-worked-without-sys",
        "chroot-failed-with-sys", "nvidia-smi-on-host", "kubelet-after-driver", "module-not-live",
        "sys-submount-exposed"])
def test_each_driver_container_claim_fails_on_its_evidence(log: str, broken: str) -> None:
    assert broken in _failed(claims.boot_claims(log, scenarios.DRIVER_CONTAINER, EXPECTED, 1))


def test_restarts_unload_then_userspace() -> None:
    found = claims.boot_claims(scenario_log(restarts=("unload", "userspace")), scenarios.DRIVER_CONTAINER,
                               EXPECTED, 2)
    ids = {c.id for c in found}
    assert {"ready-gone-unload", "restored-unload", "reapplied-unload", "ready-gone-userspace",
            "restored-userspace", "asserted-userspace"} <= ids
    assert not _failed(found), [c for c in found if not c.passed]


@pytest.mark.parametrize(("old", "new", "broken"), [
    ("mig-ready-gone 1102.5", "mig-ready-stayed 1102.5", "ready-gone-unload"),
    ("mig-ready-gone 1102.5", "mig-ready-gone 1120.0", "ready-gone-unload"),
    (f"mig-ready-after gen={GEN2}", f"mig-ready-after gen={GEN1}", "restored-unload"),
    ("1111.0 nvidia-mig-parted apply", "1111.0 nvidia-mig-parted assert", "reapplied-unload"),
    ("1210.0 nvidia-mig-parted assert", "1210.0 nvidia-mig-parted apply", "asserted-userspace"),
], ids=["ready-file-stayed", "ready-file-slow", "same-generation", "no-apply-after-unload", "apply-after-userspace"])
def test_each_restart_claim_fails_on_its_evidence(old: str, new: str, broken: str) -> None:
    log = scenario_log(restarts=("unload", "userspace"))
    assert old in log
    assert broken in _failed(claims.boot_claims(log.replace(old, new), scenarios.DRIVER_CONTAINER, EXPECTED, 2))


FAIL_JOURNAL = ("attempt 1 of 3 failed: apply | attempt 2 of 3 failed | attempt 3 of 3 failed | FAILED: "
                "nvidia-mig-parted apply -f /etc/nvidia-mig/config.yaml -c current failed")
FAIL_STUB = ("1020.0 plugin-gated start", "1030.0 nvidia-mig-parted apply -f x", "1040.0 nvidia-mig-parted apply -f x")


def _fail_log(**kwargs: object) -> str:
    parts: dict[str, object] = {"gated": None, "journal": FAIL_JOURNAL, "stub": FAIL_STUB,
                                "kubectl": "1050.0 --kubeconfig=k label --overwrite node boottest "
                                           "migbake.io/mig-state=failed migbake.io/mig-ready-"}
    parts.update(kwargs)
    return scenario_log(**parts)  # type: ignore[arg-type]


def test_a_failed_restore_holds_its_claims() -> None:
    found = claims.boot_claims(_fail_log(), scenarios.FAIL, EXPECTED, 1)  # 3 applies: the log's own + 2
    assert {"gated-held", "failed-labelled", "failure-journal", "attempts-bounded"} <= {c.id for c in found}
    assert not _failed(found), [c for c in found if not c.passed]


@pytest.mark.parametrize(("kwargs", "broken"), [
    ({"gated": LAYOUT}, "gated-held"),
    ({"kubectl": ""}, "failed-labelled"),
    ({"journal": "attempt 1 of 3 failed"}, "failure-journal"),
    ({"stub": (*FAIL_STUB, "1045.0 nvidia-mig-parted apply -f x")}, "attempts-bounded"),
], ids=["plugin-started", "not-labelled", "no-reason", "one-apply-too-many"])
def test_each_failure_claim_fails_on_its_evidence(kwargs: dict[str, object], broken: str) -> None:
    assert broken in _failed(claims.boot_claims(_fail_log(**kwargs), scenarios.FAIL, EXPECTED, 1))


def test_a_cpu_node_is_never_held() -> None:
    log = scenario_log(journal="no /etc/migbake/managed: this node is not one migbake manages; idle")
    log = log.replace("mig-ready: gen=100.5.1.x layout=current config_sha=ab", "mig-ready: absent")
    log = log.replace("1021.0 nvidia-mig-parted assert -f x\n1022.0 nvidia-mig-parted apply -f x\n", "")
    found = claims.boot_claims(log, scenarios.CPU_NODE, EXPECTED, 1)
    assert not _failed(found), [c for c in found if not c.passed]
    held = log.replace("=== plugin gated 1030.0", "=== plugin other 1030.0")
    assert "gate-passes" in _failed(claims.boot_claims(held, scenarios.CPU_NODE, EXPECTED, 1))
    busy = log.replace("=== stub-log", "=== stub-log\n1025.0 nvidia-mig-parted apply -f x")
    assert "watcher-idle" in _failed(claims.boot_claims(busy, scenarios.CPU_NODE, EXPECTED, 1))


def test_a_missing_or_cut_log_is_a_failed_claim() -> None:
    assert _failed(claims.boot_claims(None, scenarios.DRIVER_CONTAINER, EXPECTED, 1)) == {"scenario-log"}
    cut = scenario_log().replace("=== end\n", "")
    assert _failed(claims.boot_claims(cut, scenarios.DRIVER_CONTAINER, EXPECTED, 1)) == {"scenario-log"}


def test_the_wait_step_is_the_gate_s_own(tmp_path: Path) -> None:
    out = generate(PROFILE.read_text(), tmp_path / "out")
    step = guest.wait_step(out)
    assert step.source.startswith("kubernetes/gate/")
    assert step.command[:2] == ("sh", "-c") and "mig-ready" in step.command[2]
    # the host's /etc (read-only: a Talos root cannot hold a new /etc/migbake) and Talos's marker folder
    assert {(host, ro) for _, host, ro in step.mounts} == {("/run/migbake", True), ("/etc", True),
                                                           ("/var/lib/migbake", True)}


def test_no_gate_no_wait_step(tmp_path: Path) -> None:
    with pytest.raises(BootTestError, match="no migbake-wait init container"):
        guest.wait_step(tmp_path)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_the_wait_script_runs_the_step_with_its_host_paths(tmp_path: Path) -> None:
    """The step's command sees its hostPath at its mountPath, read-only, as in the pod."""
    host, seen = tmp_path / "host", tmp_path / "ctr"
    host.mkdir()
    (host / "mig-ready").write_text("gen=1\n")
    gate = tmp_path / "out" / guest.GATE_DIR
    gate.mkdir(parents=True)
    (gate / "policy.yaml").write_text(
        "spec:\n  initContainers:\n  - name: migbake-wait\n    command: [sh, -c]\n"
        f"    args: ['cat {seen}/mig-ready && ! touch {seen}/x 2>/dev/null']\n"
        f"    volumeMounts: [{{name: run, mountPath: {seen}, readOnly: true}}]\n"
        f"  volumes: [{{name: run, hostPath: {{path: {host}}}}}]\n")
    script = tmp_path / "migbake-wait"
    script.write_text(guest.wait_script(guest.wait_step(tmp_path / "out")))
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=False)
    if "Operation not permitted" in done.stderr:
        pytest.skip("no mount namespaces here")
    assert (done.returncode, done.stdout) == (0, "gen=1\n"), done.stderr
    assert not (host / "x").exists()


def test_install_moves_the_driver_userspace_off_the_host(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    for rel in ("usr/lib/simgpu/libnvidia-ml.so.1", "usr/lib/simgpu/nvidia-smi", "usr/bin/nvidia-smi",
                "etc/ld.so.conf.d/simgpu.conf", "etc/migbake/managed"):
        (rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / rel).write_text(rel)
    (rootfs / "usr/lib/simgpu/standins").write_text("set -eu\n" + guest.MODULES_STANDIN + "echo done\n")
    built = tmp_path / "built"
    built.mkdir()
    for name in ("nvidia.ko", "nvidia_uvm.ko", "modctl"):
        (built / name).write_text(name)
    modules = DriverModules((built / "nvidia.ko", built / "nvidia_uvm.ko"), built / "modctl")
    step = guest.WaitStep("kubernetes/gate/x.yaml", ("true",), ())
    settings = guest.DriverSettings(delays_s=(20, 3), restarts=((2, ("unload", "userspace")),), managed=False)
    guest.install(rootfs, modules=modules, step=step, settings=settings, nvidia_smi="/usr/bin/nvidia-smi")
    assert not (rootfs / "usr/lib/simgpu/libnvidia-ml.so.1").exists()
    assert not (rootfs / "usr/bin/nvidia-smi").exists()
    assert not (rootfs / "etc/ld.so.conf.d/simgpu.conf").exists()
    assert (rootfs / guest.IMAGE.lstrip("/") / "lib/libnvidia-ml.so.1").read_text().endswith("libnvidia-ml.so.1")
    assert (rootfs / guest.IMAGE.lstrip("/") / "bin/nvidia-smi").is_file()
    assert "/proc/modules" not in (rootfs / "usr/lib/simgpu/standins").read_text()
    assert (rootfs / guest.CONF.lstrip("/") / "delays").read_text() == "20 3\n"
    assert (rootfs / guest.CONF.lstrip("/") / "restarts-2").read_text() == "unload userspace\n"
    assert not (rootfs / "etc/migbake/managed").exists()
    wanted = rootfs / "etc/systemd/system/multi-user.target.wants"
    assert {p.name for p in wanted.iterdir()} == {"boottest-driver-container.service",
                                                  "boottest-plugin-gated.service", "boottest-driver-scenario.service"}


def test_kernel_release() -> None:
    assert kernel_release("linux-image-6.1.0-57-amd64") == "6.1.0-57-amd64"
    with pytest.raises(BootTestError):
        kernel_release("linux-image-amd64")


def test_the_scenarios_are_asked_for_by_name_on_the_packer_path(tmp_path: Path) -> None:
    profile = _profile()
    tool = tmp_path / "nvidia-mig-parted"
    tool.write_text("")
    plan = session.plan(profile, scenario="driver-container", mig_parted=tool)
    assert (plan.scenarios, plan.paths) == (("driver-container",), ("packer",))
    assert "driver-container" not in session.plan(profile, scenario="all", mig_parted=tool).scenarios
    with pytest.raises(UsageError, match="needs --mig-parted"):
        session.plan(profile, scenario="cpu-node")
    with pytest.raises(UsageError, match="Packer path only"):
        session.plan(profile, scenario="cpu-node", paths="cloud-init", mig_parted=tool)
    host = check_file(Path(__file__).parents[2] / "images" / "h100-slurm" / "node-profile.yaml").profile
    with pytest.raises(UsageError, match="driver: container"):
        session.plan(host, scenario="driver-restart", mig_parted=tool)
    assert [scenarios.boots_for(s) for s in scenarios.SCENARIOS] == [2, 1, 1, 1, 1]


@pytest.mark.parametrize("script", sorted(p.name for p in guest.GUEST.iterdir()))
def test_the_guest_scripts_pass_shellcheck(script: str) -> None:
    """They run as root in every driver-container boot: POSIX sh, shellcheck-clean."""
    tool = shutil.which("shellcheck")
    if tool is None:
        pytest.skip("shellcheck is not installed")
    done = subprocess.run([tool, "-s", "sh", str(guest.GUEST / script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
