"""Boot the output under test in a real Debian VM: the Packer path and the cloud-init path."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest

from migbake_boottest import BootAssets, BootTestError, BootTestResult, run_boot_test
from migbake_boottest.scenarios.node import discover_promises

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support.py
from support import REPO, generate
from vm_support import OK_CLAIMS, booted_with_the_real_tool

pytestmark = pytest.mark.vm

# the guest's kubelet, started as the output's kubelet.layout has it, records its argv
# (migbake_boottest.scenarios.kubelet)
LAYOUT_CLAIMS = {"kubelet-labels"}
FAIL_CLAIMS = {"report-complete", "mig-manager-never-ran", "restore-enabled", "files-installed",
               "restore-failed", "kubelet-never-started", "failure-visible", "stub-calls", "metrics-success"}


def claim_ids(result: BootTestResult, boot: int) -> set[str]:
    """The claims of one boot; the kubelet layout's claim aside where the output has no layout to model."""
    ids = {c.id for c in result.boots[boot - 1].claims}
    layout = discover_promises(result.out_dir).kubelet_layout
    if layout in ("kubeadm", "eks-al2023") and ids & {"kubelet-active"}:
        assert ids >= LAYOUT_CLAIMS, ids
        return ids - LAYOUT_CLAIMS
    return ids


def passing_run(out_dir: Path, **kwargs: Any) -> BootTestResult:
    """A boot test run (its summary printed) in which every claim holds."""
    result = run_boot_test(out_dir, log=print, **kwargs)
    print(result.summary())
    assert result.passed, result.summary()
    return result


def test_packer_ok_restores_before_kubelet_on_every_boot(out_dir: Path, boot_assets: BootAssets) -> None:
    booted_with_the_real_tool()
    result = passing_run(out_dir, path="packer", scenario="ok", boots=2, gpu_generation="hopper",
                         assets=boot_assets)
    assert claim_ids(result, 1) == OK_CLAIMS
    assert claim_ids(result, 2) == OK_CLAIMS | {"restored-after-reboot"}


def test_packer_fail_apply_keeps_kubelet_down(out_dir: Path, boot_assets: BootAssets) -> None:
    booted_with_the_real_tool()
    result = passing_run(out_dir, path="packer", scenario="fail-apply", boots=1, gpu_generation="hopper",
                         assets=boot_assets)
    assert claim_ids(result, 1) == FAIL_CLAIMS


def test_cloud_init_hold_two_boots(out_dir: Path, boot_assets: BootAssets) -> None:
    booted_with_the_real_tool()
    result = passing_run(out_dir, path="cloud-init", scenario="ok", boots=2, gpu_generation="ampere",
                         assets=boot_assets)
    assert claim_ids(result, 1) == OK_CLAIMS | {"cloud-init-done"}
    assert claim_ids(result, 2) == OK_CLAIMS | {"cloud-init-done", "restored-after-reboot"}


def doctored(out_dir: Path, tmp_path: Path, rel: str, change: Callable[[str], str]) -> Path:
    """A copy of ``out_dir`` whose file ``rel`` was changed (the change must change it)."""
    broken = tmp_path / "out"
    shutil.copytree(out_dir, broken)
    text = (broken / rel).read_text()
    assert change(text) != text, rel
    (broken / rel).write_text(change(text))
    return broken


def test_claims_catch_a_drop_in_without_requires(out_dir: Path, boot_assets: BootAssets,
                                                 tmp_path: Path) -> None:
    """Self-test: with only ordering (no Requires=), a failed restore no longer keeps kubelet down."""
    broken = doctored(out_dir, tmp_path, "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf",
                      lambda text: text.replace("Requires=", "Wants="))
    result = run_boot_test(broken, path="packer", scenario="fail-apply", boots=1, assets=boot_assets,
                           on_failure="clean", log=print)
    print(result.summary())
    assert {c.id for _, c in result.failed_claims()} == {"kubelet-never-started", "failure-visible"}


def test_failed_packer_build_is_an_error_and_leaves_nothing_running(out_dir: Path, boot_assets: BootAssets,
                                                                   tmp_path: Path) -> None:
    broken = doctored(out_dir, tmp_path, "packer/scripts/install-mig-restore.sh", lambda text: text + "exit 3\n")
    said: list[str] = []

    def log(line: str) -> None:
        print(line)
        said.append(line)

    with pytest.raises(BootTestError, match="non-zero exit status: 3"):
        run_boot_test(broken, path="packer", assets=boot_assets, log=log)
    # This run's own chroot mount and sshd, as its log names them: other VM tests run beside this one (the
    # other shard) and hold chroots and sshds of their own, so only what this build started is judged.
    text = "\n".join(said)
    mountpoints = re.findall(r"^\$ mount --bind \S+ (/run/migbake-chroot\.\S+)$", text, re.M)
    pids = re.findall(r"^sshd \(pid (\d+)\)", text, re.M)
    assert mountpoints and pids, "the build's log no longer names its chroot mount and sshd:\n" + text
    mounted = {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
    assert not mounted & set(mountpoints), mounted & set(mountpoints)
    alive = [pid for pid in pids if b"sshd_config" in _read(Path("/proc", pid, "cmdline"))]
    assert not alive, f"sshd still running: {alive}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""


def test_on_failure_continue_starts_kubelet_anyway(out_dir: Path, boot_assets: BootAssets,
                                                   tmp_path: Path) -> None:
    """restore.on_failure: continue: a failed restore is visible, and kubelet starts anyway."""
    import subprocess

    profile = tmp_path / "continue.yaml"
    profile.write_text("version: 1\nname: continue\ngpus:\n  - model: h100-80gb\n    mig:\n"
                       "      layout: {1g.10gb: 7}\nrestore: {on_failure: continue}\n")
    out = tmp_path / "out"
    subprocess.run(["migbake", "generate", str(profile), "-o", str(out)], check=True)
    result = passing_run(out, path="packer", scenario="fail-assert", boots=1, assets=boot_assets, expect="continue")
    assert "kubelet-started-anyway" in claim_ids(result, 1)


def test_claims_catch_a_user_data_that_starts_kubelet_early(out_dir: Path, boot_assets: BootAssets,
                                                            tmp_path: Path) -> None:
    """Self-test: without the bootcmd hold, the first boot starts kubelet (and the manager) unprotected.

    On an image whose kubelet the image itself enables (layout generic): on EKS AL2023 (the example's layout)
    nodeadm-run starts kubelet only after cloud-final, so there the hold is not what keeps it down.
    """
    text = (REPO / "images/h200-inference/node-profile.yaml").read_text()
    generic = tmp_path / "generic"
    generate(re.sub(r"^  layout: .*\n", "", text, flags=re.M).split("\nkubernetes:\n")[0] + "\n", generic,
             production=True)
    broken = doctored(generic, tmp_path, "cloud-init/user-data",
                      lambda text: text[:text.index("bootcmd:\n")] + text[text.index("write_files:\n"):])
    result = run_boot_test(broken, path="cloud-init", scenario="ok", boots=1, assets=boot_assets,
                           on_failure="clean", log=print)
    print(result.summary())
    failed = {c.id for _, c in result.failed_claims()}
    assert {"mig-manager-never-ran", "restore-before-kubelet"} <= failed, failed


def test_provided_later_moves_the_check_to_the_boot(boot_assets: BootAssets, tmp_path: Path) -> None:
    """image.provided_later: [nvidia-mig-parted], and the later provisioner never installed it: the bake
    (a real Packer build into an image without it) passes, the restore fails closed at boot naming it."""
    profile = REPO / "images/h200-inference/node-profile.yaml"
    out = generate(profile.read_text() + "image:\n  provided_later: [nvidia-mig-parted]\n", tmp_path / "out",
                   production=True)
    result = passing_run(out, path="packer", scenario="provided-later-missing", boots=1, assets=boot_assets)
    assert claim_ids(result, 1) == FAIL_CLAIMS
    visible = next(c for c in result.boots[0].claims if c.id == "failure-visible")
    assert "which image.provided_later says a later provisioner of the build installs" in visible.evidence


NO_GPU_BASE = {"report-complete", "mig-manager-never-ran", "restore-enabled", "files-installed", "no-gpu-metrics"}


def test_no_gpu_starts_kubelet_then_a_gpu_without_its_driver_keeps_it_down(boot_assets: BootAssets,
                                                                            tmp_path: Path) -> None:
    """Scenario no-gpu (scenarios.presence): boot 1 has no NVIDIA GPU on the simulated PCI bus, so
    the restore says why and kubelet starts; boot 2 has one and no driver, so kubelet stays down."""
    out = generate("version: 1\nname: no-gpu\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
                   "restore:\n  driver_wait_seconds: 5\n"
                   "  metrics_textfile: /var/lib/node_exporter/textfile_collector/migbake.prom\n", tmp_path / "out",
                   production=True)
    result = passing_run(out, path="packer", scenario="no-gpu", boots=2, assets=boot_assets)
    assert claim_ids(result, 1) == NO_GPU_BASE | {"no-gpu-logged", "no-gpu-no-nvidia-tool", "restore-active",
                                                  "restore-before-kubelet", "kubelet-active"}
    assert claim_ids(result, 2) == NO_GPU_BASE | {"gpu-no-driver-logged", "gpu-no-driver-calls", "restore-failed",
                                                  "kubelet-never-started"}
