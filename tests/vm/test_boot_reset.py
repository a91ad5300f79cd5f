"""The boot-test scenarios of a GPU reset and of CDI, each once, with NVIDIA's real nvidia-mig-parted.

- ``ampere-pending`` (8x A100, Packer): the GPU reset fails, the restore reboots once, the next boot restores;
- ``ampere-pending-stuck`` (same): the mode stays pending: one reboot, then fail closed, no second reboot;
- ``cdi`` (8x H200, both paths; toolkit v1.20's units): the CDI spec written last lists the restored MIG
  devices; by Packer the boot's first spec is already written after the restore (Before= the refresh).
Budget: about 6-8 minutes on 2 cores under TCG (each run prints its boot times).
"""

from __future__ import annotations

import pytest
from support import REPO, shared_file
from test_boot_real import MIG_PARTED, simulated_node

from migbake.boottest import BootAssets, run_boot_test
from migbake.boottest.scenarios.claims import BootPath
from migbake.boottest.scenarios.scenario import Scenario

pytestmark = pytest.mark.vm
AMPERE_BOOT_1 = {"rebooted-cleanly", "reboot-marker-set", "reboot-reason-logged", "kubelet-down-before-reboot",
                 "mode-pending-at-reboot"}
CASES: list[tuple[str, BootPath, Scenario, int, set[str]]] = [
    ("a100-80gb-mixed", "packer", "ampere-pending", 1, {"reboot-marker-cleared", "exported-layout", "kubelet-active"}),
    ("a100-80gb-mixed", "packer", "ampere-pending-stuck", 1, {"reboot-not-repeated", "kubelet-never-started"}),
    ("h200-inference", "packer", "cdi", 2, {"cdi-spec-current", "cdi-after-restore", "exported-layout"}),
    ("h200-inference", "cloud-init", "cdi", 1, {"cdi-spec-current", "cdi-written-early", "cloud-init-done"}),
]


@pytest.mark.parametrize(("image", "path", "scenario", "boots", "last_claims"), CASES,
                         ids=[f"{c[2]}-{c[1]}" for c in CASES])
def test_scenario_with_the_real_mig_parted(image: str, path: BootPath, scenario: Scenario, boots: int,
                                           last_claims: set[str], boot_assets: BootAssets) -> None:
    mig_parted = shared_file(MIG_PARTED)
    folder = REPO / "images" / image
    result = run_boot_test(folder / "generated", path=path, scenario=scenario, boots=boots, assets=boot_assets,
                           log=print, mig_parted=mig_parted, node=simulated_node(folder))
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
