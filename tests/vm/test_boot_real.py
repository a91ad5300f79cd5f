"""The boot test with NVIDIA's real nvidia-mig-parted over simulated GPUs: the main VM coverage.

Every example image, both delivery paths: ok with a reboot (by Packer; by cloud-init one boot: OK_BOOTS, the reboot
through cloud-init is test_boot_node.py's), the guest's kubelet started as the image's kubelet.layout has it
(kubeadm deb for a100-80gb-mixed, kubeadm rpm for h100-h200-inference, EKS AL2023's nodeadm for h200-inference:
claim kubelet-labels); a fault (fail-apply or fail-assert) on every image by the Packer path and fail-assert on the
Ampere image (pending mode change, 8 GPUs) by cloud-init (fail-apply by cloud-init: test_boot_node.py), to keep the
tier's time in bounds (a boot with 8 simulated GPUs takes 35-80 s under TCG). h100-h200-inference chooses its named
layout at boot: each of its runs says the name from another source (LAYOUTS: kubelet's labels, a system credential,
the file written by training's own cloud-init seed), and a name it does not have or none at all (its default left
out) keeps kubelet down. A layout the GPU cannot place fails with mig-parted's own error. `migbake boot-test
--mig-parted` runs the full matrix. The binary comes from ../shared/tools (skipped locally when absent, a failure in
CI).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest

from migbake.render.tree import render
from migbake.render.write import Origin, write_tree
from migbake.rules.validate import check_bytes
from migbake_boottest import BootAssets, run_boot_test
from migbake_boottest.scenarios.claims import BootPath
from migbake_boottest.scenarios.layouts import LayoutChoice
from migbake_boottest.scenarios.node import promises_of, variant
from migbake_boottest.scenarios.scenario import Scenario
from migbake_boottest.simgpu.node import SimulatedNode, node_for_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support.py
from support import IMAGES, REPO, shared_file
from vm_support import OK_CLAIMS

pytestmark = pytest.mark.vm
MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
REAL_CLAIMS = {"gpu-count", "exported-layout"}
KUBELET_CLAIMS = {"restore-before-kubelet", "kubelet-active", "kubelet-started-once", "manual-stop-refused"}


def simulated_node(image: Path, layout: LayoutChoice | None = None) -> SimulatedNode:
    """The image's node as the simulated GPUs should end up: of ``layout``'s name, else the default layout."""
    checked = check_bytes((image / "node-profile.yaml").read_bytes(), str(image / "node-profile.yaml"))
    assert checked.profile is not None
    name = layout.name if layout is not None else checked.profile.restore.layout_default
    return node_for_profile(checked.profile.named(name) if name else checked.profile)


# h100-slurm through cloud-init is not here: test_boot_node.py boots it twice (manager-reenabled) with
# every ok claim on both boots, which saves two cloud-init boots of the tier
MATRIX = [(image, path) for path in ("packer", "cloud-init") for image in IMAGES
          if (image.name, path) != ("h100-slurm", "cloud-init")]
# the faults: each of the two by both paths, and on every image one of them by Packer (the consumers, the kubelet
# layouts and the GPU generations differ; the restore's failure path does not), 5 boots instead of 10; fail-apply
# by cloud-init is test_boot_node.py's test_slurmd_kept_down_through_cloud_init (h100-slurm, every claim)
FAULTS = {("a100-80gb-mixed", "packer"): ("fail-assert",), ("h100-h200-inference", "packer"): ("fail-apply",),
          ("h100-slurm", "packer"): ("fail-apply",), ("h200-inference", "packer"): ("fail-assert",),
          ("a100-80gb-mixed", "cloud-init"): ("fail-assert",)}

# the ok runs reboot once (the layout comes back on the second boot) by Packer on every image; the cloud-init ok
# runs boot once (a cloud-init boot costs two Packer boots under TCG): the second boot of a cloud-init node is
# the image's own boot, which the Packer runs hold on every image (EKS AL2023's nodeadm included), and
# test_boot_node.py's manager-reenabled boots h100-slurm twice by cloud-init with every ok claim on both boots
OK_BOOTS = {(image.name, "cloud-init"): 1 for image in IMAGES}

# h100-h200-inference has named layouts chosen at boot (restore.layout: kubelet-labels, credential, file; default
# inference): its boots say "training", each from another source (scenarios.layouts), which adds no boot. The
# cloud-init run boots training's own seed (`generate --layout training`, the bytes of
# OUT/cloud-init/layouts/training/user-data: tests/outputs/test_layout_seeds.py), whose write_files give the file
# source its name with nothing written by hand (seeded). The Packer ok run also shows that a credential the node
# does not have is skipped (the unit's LoadCredential=)
LAYOUTS = {("h100-h200-inference", "packer", "ok"): LayoutChoice("kubelet-labels", "training"),
           ("h100-h200-inference", "cloud-init", "ok"): LayoutChoice("file", "training", seeded=True),
           ("h100-h200-inference", "packer", "fail-apply"): LayoutChoice("credential", "training")}


@pytest.mark.parametrize(("image", "path"), MATRIX, ids=[f"{i.name}-{p}" for i, p in MATRIX])
def test_every_scenario_with_the_real_mig_parted(image: Path, path: BootPath, boot_assets: BootAssets,
                                                 tmp_path: Path) -> None:
    mig_parted = shared_file(MIG_PARTED)
    checked = check_bytes((image / "node-profile.yaml").read_bytes(), "node-profile.yaml")
    assert checked.profile is not None
    expect = checked.profile.restore.on_failure
    plan = [("ok", OK_BOOTS.get((image.name, path), 2))]
    plan += [(fault, 1) for fault in FAULTS.get((image.name, path), ())]
    for scenario, boots in plan:
        # the guest's kubelet as the profile's kubelet.layout starts it (kubeadm: deb, and rpm for the mixed image)
        package = "rpm" if image.name == "h100-h200-inference" else "deb"
        layout = LAYOUTS.get((image.name, path, scenario))
        out = image / "generated"
        if layout is not None and layout.seeded:  # the seed of that layout, as `generate --layout NAME` writes it
            out = tmp_path / f"{scenario}-{layout.name}"
            write_tree(render(checked.profile, layout=layout.name), out,
                       origin=Origin.of("-", out, checked.profile.name, checked.profile.source_sha256,
                                        layout=layout.name))
        result = run_boot_test(out, path=path, scenario=scenario, boots=boots,  # type: ignore[arg-type]
                               assets=boot_assets, log=print, mig_parted=mig_parted,
                               node=simulated_node(image, layout), expect=expect,
                               promises=promises_of(checked.profile), kubeadm_package=package, layout=layout)
        print(result.summary())
        assert result.passed, result.summary()
        assert result.actor.startswith("NVIDIA nvidia-mig-parted")
        if layout is not None:  # the name came from where the boot put it, on every boot, also a failing one
            assert all("layout-chosen" in {c.id for c in boot.claims} for boot in result.boots), result.summary()
            if scenario == "ok":  # ... and kubelet registers with it, whichever source gave it
                assert all("layout-label" in {c.id for c in boot.claims} for boot in result.boots), result.summary()
        if scenario == "ok":
            # every claim the stand-in's ok boots make (test_boot.py), kubelet's where the image has kubelet
            # and metrics-success where it writes metrics (migbake_boottest.scenarios.claims.evaluate, node_claims)
            want = set(OK_CLAIMS - KUBELET_CLAIMS - {"metrics-success"}) | REAL_CLAIMS
            if checked.profile.kubelet.present:
                want |= KUBELET_CLAIMS
            assert all({c.id for c in boot.claims} >= want for boot in result.boots), want
            assert len(result.boots) == boots
            if boots > 1:
                assert "restored-after-reboot" in {c.id for c in result.boots[1].claims}
            if checked.profile.kubelet.layout in ("kubeadm", "eks-al2023"):  # labels and the admin's flags
                assert all("kubelet-labels" in {c.id for c in b.claims} for b in result.boots)
        else:
            assert {c.id for c in result.boots[0].claims} >= {"restore-failed"} | (
                {"kubelet-never-started"} if checked.profile.kubelet.present else set())


def test_a_layout_the_gpu_cannot_place_fails_with_mig_parteds_error(boot_assets: BootAssets, tmp_path: Path) -> None:
    mig_parted = shared_file(MIG_PARTED)
    image = REPO / "images" / "h200-inference"
    out = tmp_path / "out"
    shutil.copytree(image / "generated", out)
    config = out / "rootfs/etc/nvidia-mig/config.yaml"
    config.write_text(config.read_text().replace("1g.18gb: 7", "3g.71gb: 3"))
    result = run_boot_test(out, path="packer", scenario="ok", boots=1, assets=boot_assets, log=print,
                           mig_parted=mig_parted, node=simulated_node(image), on_failure="clean")
    print(result.summary())
    failed = {c.id: c for _, c in result.failed_claims()}
    assert {"restore-active", "layout-applied", "exported-layout"} <= set(failed), failed
    # mig-parted's own words (without -d it logs only the last error: every ordering of the instances failed;
    # tests/vm/test_simgpu.py shows the per-instance ERROR_INSUFFICIENT_RESOURCES with -d)
    error = "error setting MIGConfig: error attempting multiple config orderings: all orderings failed"
    assert error in failed["restore-active"].evidence


@pytest.mark.parametrize("scenario", ["layout-unknown", "layout-missing"])
def test_a_node_that_says_an_unknown_or_no_layout_keeps_kubelet_down(scenario: Scenario, boot_assets: BootAssets,
                                                                    tmp_path: Path) -> None:
    """h100-h200-inference's restore fails closed before any NVIDIA tool: a name it does not have (from the
    file), or no name at all with the default left out (scenarios.node.variant); kubelet never starts."""
    image = REPO / "images" / "h100-h200-inference"
    checked = check_bytes((image / "node-profile.yaml").read_bytes(), "node-profile.yaml")
    assert checked.profile is not None
    booted = variant(checked.profile, scenario)
    assert bool(booted.restore.layout_default) == (scenario != "layout-missing")
    out = tmp_path / "out"
    write_tree(render(booted), out, origin=Origin.of("-", out, booted.name, booted.source_sha256))
    layout = LayoutChoice("file", "serving") if scenario == "layout-unknown" else None
    result = run_boot_test(out, path="packer", scenario=scenario, assets=boot_assets, log=print,
                           mig_parted=shared_file(MIG_PARTED), node=simulated_node(image), layout=layout,
                           promises=promises_of(booted), kubeadm_package="rpm")
    print(result.summary())
    assert result.passed, result.summary()
    want = {"restore-failed", "failure-visible", "stub-calls", "kubelet-never-started"}
    assert {c.id for c in result.boots[0].claims} >= want | ({"layout-chosen"} if layout else set())
