"""The node's neighbours in a booted VM, with NVIDIA's real nvidia-mig-parted over the simulated GPU.

One image (h100-slurm: no kubelet, slurmd fail closed, a metrics file), one boot per run where the
scenario allows: driver-late, gpu-client and manager-reenabled through both delivery paths; the
variants (a driver wait below the delay, an explicit `disable` of the packaged manager) by Packer;
slurmd kept down by a failed restore through cloud-init (the Packer path and the ok runs of both paths
are in test_boot_real.py). The binary comes from ../shared/tools (skipped locally when absent, a
failure in CI). Each run prints its boot times.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from prometheus_client.parser import text_string_to_metric_families

from migbake.profile.nodeprofile import NodeProfile
from migbake.render.tree import render
from migbake.render.write import Origin, write_tree
from migbake.rules.validate import check_bytes
from migbake_boottest import BootAssets, BootTestResult, run_boot_test
from migbake_boottest.scenarios.claims import BootPath
from migbake_boottest.scenarios.node import boots_for, promises_of, variant
from migbake_boottest.scenarios.scenario import Scenario
from migbake_boottest.simgpu.node import node_for_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support.py
from support import REPO, shared_file

pytestmark = pytest.mark.vm
MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
IMAGE = REPO / "images" / "h100-slurm"
CONSUMER_OK = {"restore-before-slurmd", "slurmd-active", "slurmd-started-once", "slurmd-real", "metrics-success",
               "restore-active", "exported-layout", "gpu-count", "mig-manager-never-ran"}


def profile() -> NodeProfile:
    checked = check_bytes((IMAGE / "node-profile.yaml").read_bytes(), str(IMAGE / "node-profile.yaml"))
    assert checked.profile is not None
    return checked.profile


def boot(prof: NodeProfile, path: BootPath, scenario: Scenario, assets: BootAssets, tmp_path: Path,
         **kwargs: object) -> BootTestResult:
    """Generate ``prof`` as the scenario boots it, boot it, print the claims and the boot times."""
    booted = variant(prof, scenario)
    out = tmp_path / "out"
    write_tree(render(booted), out, origin=Origin.of("-", out, booted.name, booted.source_sha256))
    result = run_boot_test(out, path=path, scenario=scenario, boots=boots_for(scenario, path, 1), assets=assets,
                           log=print, mig_parted=shared_file(MIG_PARTED), node=node_for_profile(booted),
                           expect=booted.restore.on_failure, promises=promises_of(booted), **kwargs)  # type: ignore[arg-type]
    print(result.summary())
    print(f"BOOT TIMES {path}/{scenario}: " + ", ".join(f"{b.duration_s:.1f} s" for b in result.boots))
    return result


def ids(result: BootTestResult, index: int = -1) -> set[str]:
    return {c.id for c in result.boots[index].claims}


@pytest.mark.parametrize("path", ["packer", "cloud-init"])
def test_driver_late(path: BootPath, boot_assets: BootAssets, tmp_path: Path) -> None:
    result = boot(profile(), path, "driver-late", boot_assets, tmp_path)
    assert result.passed, result.summary()
    assert ids(result) >= CONSUMER_OK | {"driver-waited"}


def test_driver_too_late_fails_closed(boot_assets: BootAssets, tmp_path: Path) -> None:
    result = boot(profile(), "packer", "driver-too-late", boot_assets, tmp_path)
    assert result.passed, result.summary()
    assert ids(result) >= {"restore-failed", "failure-visible", "slurmd-never-started", "driver-wait-bounded",
                           "metrics-success", "stub-calls"}


@pytest.mark.parametrize("path", ["packer", "cloud-init"])
def test_gpu_client(path: BootPath, boot_assets: BootAssets, tmp_path: Path) -> None:
    result = boot(profile(), path, "gpu-client", boot_assets, tmp_path)
    assert result.passed, result.summary()
    assert ids(result) >= CONSUMER_OK | {"gpu-client-after-restore", "gpu-client-holds-gpu"}


@pytest.mark.parametrize("path", ["packer", "cloud-init"])
def test_manager_reenabled_stays_masked(path: BootPath, boot_assets: BootAssets, tmp_path: Path) -> None:
    prof = profile()
    assert prof.conflicting_manager.action == "mask"
    result = boot(prof, path, "manager-reenabled", boot_assets, tmp_path)
    assert result.passed, result.summary()
    assert ids(result) >= CONSUMER_OK | {"package-upgrade-ran"}
    assert "masked" in next(c.evidence for c in result.boots[-1].claims if c.id == "package-upgrade-ran")
    if path == "cloud-init":  # boot 1 is the cloud-init ok boot of test_boot_real.py, boot 2 its reboot
        assert ids(result, 0) >= CONSUMER_OK | {"cloud-init-done", "manual-stop-refused"}
        assert "restored-after-reboot" in ids(result, 1)


def test_manager_reenabled_after_disable_fights(boot_assets: BootAssets, tmp_path: Path) -> None:
    """Self-test: with an explicit `disable`, the upgrade re-enables the manager and it undoes the layout."""
    prof = profile()
    prof = dataclasses.replace(prof, conflicting_manager=dataclasses.replace(prof.conflicting_manager,
                                                                            action="disable"))
    result = boot(prof, "packer", "manager-reenabled", boot_assets, tmp_path, on_failure="clean")
    failed = {c.id for _, c in result.failed_claims()}
    # assert stops at the first GPU that differs: it walks one GPU, so gpu-count fails with the rest
    assert failed == {"mig-manager-never-ran", "exported-layout", "layout-applied", "gpu-count"}, result.summary()


def test_slurmd_kept_down_through_cloud_init(boot_assets: BootAssets, tmp_path: Path) -> None:
    result = boot(profile(), "cloud-init", "fail-apply", boot_assets, tmp_path)
    assert result.passed, result.summary()
    assert ids(result) >= {"slurmd-never-started", "failure-visible", "restore-failed", "metrics-success"}
    metrics = (result.work_dir / "metrics-1.prom").read_text()
    samples = {s.name: s for family in text_string_to_metric_families(metrics) for s in family.samples}
    assert samples["migbake_mig_restore_success"].value == 0
    assert samples["migbake_mig_restore_success"].labels == {"profile": "h100-slurm", "config": "current"}
    assert samples["migbake_mig_restore_last_run_timestamp_seconds"].value > 1.7e9
