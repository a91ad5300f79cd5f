"""The driver-container scenarios in the VM, with NVIDIA's real nvidia-mig-parted over the simulated GPU.

A ``driver: container`` profile (one H100, two 3g.40gb; restore.hold: gpu-plugins) by the Packer path:
- ``driver-container``: two boots with the driver 20 s and then 3 s late; the gated stub plugin sees the
  layout, the ungated control the bare GPU; the second boot restarts the driver twice (modules unloaded,
  then userspace only), which carries the claims of ``driver-restart`` and ``driver-restart-userspace``;
- ``driver-container-fail``: apply fails: the plugin stays held, the node is labelled failed, the journal
  says why, a bounded number of attempts;
- ``cpu-node``: no /etc/migbake/managed: the watcher idles and the gate lets the plugin start at once.
Every boot: kubelet is not held, the simulated driver's signals, and the /sys fallback.
Budget: 4 boots (each ~60-180 s under TCG on 2 shared cores; each run prints its boot times).
"""

from __future__ import annotations

from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import generate, shared_file
from test_boot_real import MIG_PARTED

from migbake.rules.validate import check_file
from migbake_boottest import BootAssets, run_boot_test
from migbake_boottest.scenarios.node import promises_of
from migbake_boottest.scenarios.scenario import Scenario
from migbake_boottest.simgpu.node import node_for_profile

pytestmark = pytest.mark.vm
PROFILE = Path(__file__).parent / "data" / "driver-container" / "node-profile.yaml"
EVERY_BOOT = {"kubelet-not-held", "driver-simulated", "fallback-binds-sys"}
RESTARTS = {"ready-gone-unload", "restored-unload", "reapplied-unload", "ready-gone-userspace",
            "restored-userspace", "asserted-userspace"}
# scenario -> the claims of each of its boots (besides EVERY_BOOT)
CASES: dict[Scenario, list[set[str]]] = {
    "driver-container": [{"gated-sees-layout", "control-sees-unrestored"},
                         {"gated-sees-layout", "control-sees-unrestored", *RESTARTS}],
    "driver-container-fail": [{"gated-held", "failed-labelled", "failure-journal", "attempts-bounded"}],
    "cpu-node": [{"watcher-idle", "gate-passes"}],
}


@pytest.mark.parametrize("scenario", list(CASES))
def test_driver_container_scenario(scenario: Scenario, boot_assets: BootAssets, tmp_path: Path) -> None:
    checked = check_file(PROFILE)
    assert checked.profile is not None
    out = generate(PROFILE.read_text(), tmp_path / "out")
    result = run_boot_test(out, path="packer", scenario=scenario, boots=len(CASES[scenario]), assets=boot_assets,
                           log=print, mig_parted=shared_file(MIG_PARTED), node=node_for_profile(checked.profile),
                           promises=promises_of(checked.profile))
    print(result.summary())
    print(f"boot times {scenario}: " + ", ".join(f"{b.duration_s:.1f} s" for b in result.boots))
    assert result.passed, result.summary()
    assert [{c.id for c in b.claims} for b in result.boots] == [EVERY_BOOT | want for want in CASES[scenario]]
