"""The generated verify-mig-restore.sh, run for real on a fake node (test_generated_scripts.good_node).

It must pass a good node and name the unit that failed on a bad one; it checks the config file, that
every consumer starts after the restore, the conflicting manager's state as the profile asks for it, and
warns about the reboot marker. As for every generated script, no real nvidia-smi or nvidia-mig-parted is
ever called (test_generated_scripts.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realtools import Ran
from test_generated_scripts import good_node

pytestmark = pytest.mark.realtool


def _lines(ran: Ran, kind: str) -> list[str]:
    return [line for line in ran.out.splitlines() if line.startswith(kind)]


def test_verify_passes_a_good_node(tmp_path: Path) -> None:
    node, script = good_node(tmp_path)
    ran = node.run(script)
    assert ran.rc == 0, ran.text
    assert _lines(ran, "FAIL") == [] and "All checks passed." in ran.out
    assert len(_lines(ran, "PASS")) >= 8, ran.out
    assert node.calls("journalctl") == []
    assert node.calls("mig-parted") == [f"assert -f {node.config} -c current"]
    assert not any(
        c.startswith(("enable", "disable", "start", "stop", "mask")) for c in node.calls("systemctl")
    )


BAD = {
    "restore-failed": (
        {
            "active/nvidia-mig-restore.service": "failed",
            "props/nvidia-mig-restore.service.Result": "exit-code",
            "mig-parted.mode": "assert-fails",
        },
        "FAIL  nvidia-mig-restore.service is not active (result: exit-code)",
    ),
    "restore-disabled": (
        {"enabled/nvidia-mig-restore.service": "disabled"},
        "FAIL  nvidia-mig-restore.service is not enabled",
    ),
    "manager-enabled": (
        {"enabled/nvidia-mig-manager.service": "enabled"},
        "FAIL  nvidia-mig-manager.service is enabled: two services would apply MIG at boot (a package upgrade",
    ),
    "kubelet-first": (
        {"props/kubelet.service.InactiveExitTimestampMonotonic": "500"},
        "FAIL  kubelet.service started before the restore finished",
    ),
    "not-required": (
        {"props/kubelet.service.Requires": "sysinit.target"},
        "FAIL  kubelet.service does not Require nvidia-mig-restore.service",
    ),
    "driver-missing": ({"smi.mode": "fails"}, "FAIL  NVIDIA GPU(s) on this machine but no NVIDIA driver: "),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_verify_fails_a_bad_node_and_names_the_unit(tmp_path: Path, case: str) -> None:
    node, script = good_node(tmp_path)
    changes, line = BAD[case]
    for name, value in changes.items():
        node.set(name, value)
    ran = node.run(script)
    assert ran.rc == 1, ran.text
    assert any(line in f for f in _lines(ran, "FAIL")), ran.out
    assert "Some checks failed" in ran.out
    assert node.calls("journalctl") == ["-b -u nvidia-mig-restore.service --no-pager -n 20"]
    assert "journal: apply failed" in ran.out


def test_verify_checks_the_config_file(tmp_path: Path) -> None:
    node, script = good_node(tmp_path)
    node.config.unlink()
    ran = node.run(script)
    assert ran.rc == 1 and f"FAIL  config {node.config} is missing" in ran.out, ran.out
    # no PASS may speak of the missing config as if it were there (seen on a real H200)
    assert not [line for line in _lines(ran, "PASS") if "config '" in line or str(node.config) in line], ran.out
    assert f"INFO  nvidia-mig-parted assert not run: there is no {node.config} to assert" in ran.out
    assert "GPU(s) matches an entry of the config 'current' this script was generated with" in ran.out
    assert node.calls("mig-parted") == []


# --- verify: consumers, the manager's state, the reboot marker ------------------------------------


def test_verify_checks_every_consumer(tmp_path: Path) -> None:
    extra = "consumers: [{unit: slurmd.service}, {unit: inference.service, fail_closed: false}]\n"
    node, script = good_node(tmp_path, extra, ("slurmd.service", "inference.service"))
    node.set("props/inference.service.Requires", "sysinit.target")
    ran = node.run(script)
    assert ran.rc == 0, ran.text
    for unit in ("kubelet.service", "slurmd.service"):
        assert f"PASS  {unit} Requires= nvidia-mig-restore.service (fail closed)" in ran.out
        assert f"PASS  the restore finished before {unit} started" in ran.out
    assert "inference.service Requires" not in ran.out  # fail_closed: false needs no Requires=
    assert "PASS  inference.service is ordered After= nvidia-mig-restore.service" in ran.out

    node.set("props/slurmd.service.InactiveExitTimestampMonotonic", "500")
    node.set("active/inference.service", "failed")
    ran = node.run(script)
    assert ran.rc == 1
    assert _lines(ran, "FAIL") == ["FAIL  slurmd.service started before the restore finished"], ran.out
    assert "WARN  inference.service is not active" in ran.out


@pytest.mark.parametrize(("state", "action", "line"), [
    ("disabled", "mask", "WARN  nvidia-mig-manager.service is disabled, not masked: the next package upgrade"),
    ("disabled", "disable", "PASS  nvidia-mig-manager.service is disabled (conflicting_manager.action: disable"),
    ("masked", "mask", "PASS  nvidia-mig-manager.service is masked"),
], ids=["disabled-but-mask-wanted", "disabled-as-asked", "masked"])
def test_verify_words_the_manager_state(tmp_path: Path, state: str, action: str, line: str) -> None:
    node, script = good_node(tmp_path, f"conflicting_manager: {{action: {action}}}\n")
    node.set("enabled/nvidia-mig-manager.service", state)
    ran = node.run(script)
    assert ran.rc == 0 and line in ran.out, ran.out


def test_verify_warns_about_a_reboot_marker(tmp_path: Path) -> None:
    node, script = good_node(tmp_path)
    marker = node.root / "var/lib/migbake/reboot-attempted"
    marker.parent.mkdir(parents=True)
    marker.write_text("1764000000 GPU 0 (Disabled -> Enabled)\n")
    ran = node.run(script)
    assert ran.rc == 0
    assert "WARN  " + str(marker) + " exists: the restore rebooted the node once" in ran.out
