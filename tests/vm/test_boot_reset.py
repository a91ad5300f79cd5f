"""The boot-test scenarios of a GPU reset and of CDI, each once, with NVIDIA's real nvidia-mig-parted.

- ``ampere-pending`` (8x A100, Packer): the GPU reset fails, the restore reboots once, the next boot restores;
- ``ampere-pending-stuck`` (same): the mode stays pending: one reboot, then fail closed, no second reboot;
- ``cdi`` (8x H200, both paths; toolkit v1.20's units): the CDI spec written last lists the restored MIG
  devices; by Packer the boot's first spec is already written after the restore (Before= the refresh).
The DRA claims (``scenarios.dra_claims``) share these boots with a variant of the profile
(``dra_variant``): by Packer ``cdi`` boots h200-inference under ``kubernetes.allocation: dra`` with a layout
whose placements are not forced (3g.71gb@4, 2g.35gb@0, 1g.18gb@2, @3: ``placements-at-kubelet`` on both
boots), by cloud-init under ``dra-dynamic`` (Hopper: MIG off, no instance at kubelet's start). The one
new run is ``ampere-pending`` under ``dra-dynamic`` with 2 A100s: MIG on with no instance at kubelet's start
after the reboot-once path.
Budget: about 6-8 minutes on 2 cores under TCG (each run prints its boot times), plus the 2 small boots.
"""

from __future__ import annotations

from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import REPO, generate, shared_file
from test_boot_real import MIG_PARTED, simulated_node

from migbake.rules.validate import check_bytes
from migbake_boottest import BootAssets, run_boot_test
from migbake_boottest.scenarios.claims import BootPath
from migbake_boottest.scenarios.node import promises_of
from migbake_boottest.scenarios.scenario import Scenario
from migbake_boottest.simgpu.node import node_for_profile

pytestmark = pytest.mark.vm
AMPERE_BOOT_1 = {"rebooted-cleanly", "reboot-marker-set", "reboot-reason-logged", "kubelet-down-before-reboot",
                 "mode-pending-at-reboot"}
# (image, path, scenario, boots, claims of the last boot, kubernetes.allocation of the variant or "")
CASES: list[tuple[str, BootPath, Scenario, int, set[str], str]] = [
    ("a100-80gb-mixed", "packer", "ampere-pending", 1, {"reboot-marker-cleared", "exported-layout", "kubelet-active"},
     ""),
    ("a100-80gb-mixed", "packer", "ampere-pending-stuck", 1, {"reboot-not-repeated", "kubelet-never-started"}, ""),
    ("h200-inference", "packer", "cdi", 2, {"cdi-spec-current", "cdi-after-restore", "exported-layout",
                                            "placements-at-kubelet"}, "dra"),
    ("h200-inference", "cloud-init", "cdi", 1, {"cdi-spec-current", "cdi-written-early", "cloud-init-done",
                                                "dynamic-at-kubelet"}, "dra-dynamic"),
    ("a100-80gb-mixed", "packer", "ampere-pending", 1, {"reboot-marker-cleared", "exported-layout",
                                                        "dynamic-at-kubelet"}, "dra-dynamic"),
]
H200_MIXED = "3g.71gb: 1\n        2g.35gb: 1\n        1g.18gb: 2"  # placements not forced by the layout


def dra_variant(image: str, allocation: str, gpus: int | None = None) -> str:
    """``image``'s profile under ``kubernetes.allocation`` (dra-dynamic: no layout; dra on the H200: a mixed one)."""
    text = (REPO / "images" / image / "node-profile.yaml").read_text()
    assert text.count("\nkubernetes:\n") == 1 and text.count("gpu_count: 8\n") == 1
    text = text.replace("\nkubernetes:\n", f"\nkubernetes:\n  allocation: {allocation}\n")
    if gpus is not None:
        text = text.replace("gpu_count: 8\n", f"gpu_count: {gpus}\n")
    if allocation == "dra-dynamic":  # every GPU: MIG as the restore leaves it per architecture, no layout
        head, rest = text.split("\ngpus:\n", 1)
        tail = rest[rest.index("\nkubelet:"):]
        model = rest.split("model: ", 1)[1].split("\n", 1)[0]
        text = f"{head}\ngpus:\n  - model: {model}\n    devices: all\n{tail}"
    elif image == "h200-inference":
        text = text.replace("1g.18gb: 7", H200_MIXED)
    return text


@pytest.mark.parametrize(("image", "path", "scenario", "boots", "last_claims", "allocation"), CASES,
                         ids=[f"{c[2]}-{c[1]}" + (f"-{c[5]}" if c[5] else "") for c in CASES])
def test_scenario_with_the_real_mig_parted(image: str, path: BootPath, scenario: Scenario, boots: int,
                                           last_claims: set[str], allocation: str, boot_assets: BootAssets,
                                           tmp_path: Path) -> None:
    mig_parted = shared_file(MIG_PARTED)
    folder = REPO / "images" / image
    out, node, promises = folder / "generated", simulated_node(folder), None
    if allocation:  # a variant of the image's profile: the DRA claims share this scenario's boots
        text = dra_variant(image, allocation, 2 if scenario == "ampere-pending" else None)
        checked = check_bytes(text.encode(), "node-profile.yaml")
        assert checked.profile is not None, [p.format() for p in checked.problems]
        out, node, promises = generate(text, tmp_path / "out", production=True), node_for_profile(checked.profile), \
            promises_of(checked.profile)
    result = run_boot_test(out, path=path, scenario=scenario, boots=boots, assets=boot_assets,
                           log=print, mig_parted=mig_parted, node=node, promises=promises)
    print(result.summary())
    print(f"boot times {scenario}/{path}: " + ", ".join(f"{b.duration_s:.1f} s" for b in result.boots))
    assert result.passed, result.summary()
    ids = [{c.id for c in b.claims} for b in result.boots]
    if scenario == "cdi":
        assert len(result.boots) == boots
    else:
        assert len(result.boots) == 2 and ids[0] == AMPERE_BOOT_1
        assert "boot-count" in ids[1]
    assert last_claims <= ids[-1]
    if allocation == "dra":  # when kubelet started, on every boot
        assert all("placements-at-kubelet" in i for i in ids)
