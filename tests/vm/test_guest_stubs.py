"""The simulated nvidia-smi / nvidia-mig-parted, run inside a chroot of the guest rootfs (no boot)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest

from migbake_boottest import BootAssets
from migbake_boottest.scenarios import scenario as fixtures

pytestmark = pytest.mark.vm

CONFIG = """version: v1
mig-configs:
  current:
  - devices: all
    mig-enabled: true
    mig-devices:
      "3g.40gb": 1
      "1g.10gb": 2
  other:
  - devices: all
    mig-enabled: false
"""


@pytest.fixture(scope="module")
def guest(boot_assets: BootAssets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = boot_assets.rootfs.fresh_copy(tmp_path_factory.mktemp("stubs") / "rootfs")
    fixtures.install_fixtures(root, gpu=fixtures.SIMULATED_GPUS["hopper"])
    (root / "etc/nvidia-mig").mkdir(parents=True)
    (root / "etc/nvidia-mig/config.yaml").write_text(CONFIG)
    yield root
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


@pytest.fixture
def fresh(guest: Path) -> Path:
    """The guest with no MIG state, no faults, an empty stub log, a Hopper GPU."""
    for leftover in ("run/mig-stub", "var/lib/mig-stub", "var/log/mig-stub.log", "etc/mig-stub/fail-apply",
                     "etc/mig-stub/fail-assert", "etc/mig-stub/fail-smi"):
        subprocess.run(["rm", "-rf", str(guest / leftover)], check=True)
    (guest / "etc/mig-stub/generation").write_text("hopper\n")
    return guest


def sh(root: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chroot", str(root), "/bin/bash", "-c", command], capture_output=True, text=True,
                          check=False)


APPLY = "nvidia-mig-parted apply -f /etc/nvidia-mig/config.yaml -c current"
ASSERT = "nvidia-mig-parted assert -f /etc/nvidia-mig/config.yaml -c current"


def test_apply_then_assert_and_export_round_trip(fresh: Path) -> None:
    assert sh(fresh, ASSERT).returncode == 1  # nothing applied yet
    applied = sh(fresh, APPLY)
    assert applied.returncode == 0, applied.stderr
    assert "GPU 0: MIG mode 0 -> 1, instances - -> 1g.10gb=2,3g.40gb=1" in applied.stdout
    assert sh(fresh, ASSERT).returncode == 0
    exported = sh(fresh, "nvidia-mig-parted export > /tmp/exported.yaml && "
                         "nvidia-mig-parted assert -f /tmp/exported.yaml -c current")
    assert exported.returncode == 0, exported.stderr
    log = (fresh / "var/log/mig-stub.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in log] == [
        ASSERT, APPLY, ASSERT, "nvidia-mig-parted export",
        "nvidia-mig-parted assert -f /tmp/exported.yaml -c current"]
    assert all(float(line.split()[0]) > 1e9 for line in log)


def test_assert_fails_on_another_layout(fresh: Path) -> None:
    assert sh(fresh, APPLY).returncode == 0
    other = sh(fresh, "nvidia-mig-parted assert -f /etc/nvidia-mig/config.yaml -c other")
    assert other.returncode == 1
    assert "Assertion failure" in other.stderr


@pytest.mark.parametrize(("fault", "command", "code"), [
    ("fail-apply", APPLY, 1), ("fail-assert", ASSERT, 1), ("fail-smi", "nvidia-smi", 9)],
    ids=["apply", "assert", "smi"])
def test_injected_faults(fresh: Path, fault: str, command: str, code: int) -> None:
    (fresh / "etc/mig-stub" / fault).touch()
    result = sh(fresh, command)
    assert result.returncode == code
    assert (fresh / "var/log/mig-stub.log").read_text().count("\n") == 1  # the failed call is logged


def test_unmatched_device_filter_fails_like_mig_parted(fresh: Path) -> None:
    (fresh / "tmp/filtered.yaml").write_text(
        'version: v1\nmig-configs:\n  current:\n  - device-filter: "0x20B010DE"\n    devices: all\n'
        "    mig-enabled: false\n")
    result = sh(fresh, "nvidia-mig-parted apply -f /tmp/filtered.yaml -c current")
    assert result.returncode == 1
    assert "not all GPUs match" in result.stderr


@pytest.mark.parametrize(("generation", "mode_after_reboot"), [("hopper", "false"), ("ampere", "true")])
def test_reboot_loses_instances_and_hopper_loses_mode(fresh: Path, generation: str,
                                                      mode_after_reboot: str) -> None:
    (fresh / "etc/mig-stub/generation").write_text(generation + "\n")
    assert sh(fresh, APPLY).returncode == 0
    subprocess.run(["rm", "-rf", str(fresh / "run/mig-stub")], check=True)  # what a reboot does to /run
    assert sh(fresh, ASSERT).returncode == 1
    exported = sh(fresh, "nvidia-mig-parted export").stdout
    assert f"mig-enabled: {mode_after_reboot}" in exported
    assert "mig-devices: {}" in exported


def test_nvidia_smi_lists_the_modelled_gpu(fresh: Path) -> None:
    listed = sh(fresh, "nvidia-smi -L")
    assert listed.returncode == 0
    assert listed.stdout.startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
