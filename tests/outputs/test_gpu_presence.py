"""GPU presence decided from the PCI bus: restore.sh, verify and preflight on a fake sysfs tree.

No NVIDIA GPU on the machine (none at all, or only NVIDIA's other PCI functions and a Mellanox NIC): the
restore logs "no NVIDIA GPU on this machine: nothing to restore", its metric says 0 GPUs, it succeeds and
touches no NVIDIA tool; ``restore.no_gpu: fail`` fails instead. NVIDIA GPUs without a driver fail closed
as before. verify and preflight report the same cases in the same words (``gpu/presence.py``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from support import H200_3D, WORLD, PciDevice, fake_sysfs
from test_generated_scripts import good_node
from test_preflight import SimNode
from test_preflight_script import preflight_node
from test_restore_script import A100, make_node

from migbake.gpu import presence
from migbake.gpu.presence import sysfs_device_ids

pytestmark = pytest.mark.realtool

MELLANOX_IB: PciDevice = ("0000:3b:00.0", "0x15b3", "0x101b", "0x020700")  # ConnectX-6, InfiniBand
NVSWITCH: PciDevice = ("0000:07:00.0", "0x10de", "0x22a3", "0x068000")  # NVIDIA, a bridge (NVSwitch)
GPU_AUDIO: PciDevice = ("0000:18:00.1", "0x10de", "0x22ba", "0x040300")  # NVIDIA, the GPU's HDA function
VGA: PciDevice = ("0000:01:00.0", "0x10DE", "0x2335", "0x030000")  # a display VGA controller (upper case)
OTHER_VGA: PciDevice = ("0000:00:02.0", "0x1234", "0x1111", "0x030000")  # QEMU's std VGA: not NVIDIA
NO_GPU_TREES = {"empty": [], "nic-and-nvidia-non-gpus": [MELLANOX_IB, NVSWITCH, GPU_AUDIO, OTHER_VGA]}


@pytest.fixture
def sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Point the test copies of the scripts at a fake sysfs holding the given PCI devices."""
    def make(devices: list[PciDevice]) -> Path:
        root = fake_sysfs(tmp_path / f"sys{len(list(tmp_path.glob('sys*')))}", devices)
        WORLD.point("sys", root)
        return WORLD.path("sys")  # where the scripts read it, as their messages say
    return make


def test_device_ids_in_sysfs_form() -> None:
    assert sysfs_device_ids("0x233510DE 0x233B10DE 0x20B210DE") == "0x20b2 0x2335 0x233b"
    assert sysfs_device_ids("0x12341234") == ""  # another vendor's id is no NVIDIA device


# --- restore.sh ---------------------------------------------------------------------------------

@pytest.mark.parametrize("tree", sorted(NO_GPU_TREES))
def test_restore_without_an_nvidia_gpu_succeeds_and_says_why(tmp_path: Path, sysfs, tree: str) -> None:  # type: ignore[no-untyped-def]
    root = sysfs(NO_GPU_TREES[tree])
    node = make_node(tmp_path)
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert (f"nvidia-mig-restore.service: no NVIDIA GPU on this machine: nothing to restore (no PCI device of "
            f"vendor 0x10de and class display VGA or 3D in {root}/bus/pci/devices; restore.no_gpu: succeed)"
            in ran.out)
    assert node.calls() == []  # neither nvidia-smi nor nvidia-mig-parted
    values = node.metric_values()
    assert values["migbake_mig_restore_nvidia_gpus"] == 0 and values["migbake_mig_restore_success"] == 1


def test_restore_no_gpu_fail_fails(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([MELLANOX_IB])
    node = make_node(tmp_path, restore="  no_gpu: fail\n")
    ran = node.run()
    assert ran.rc == 1
    assert f"FAILED: {presence.NO_GPU_FAIL} (no PCI device" in ran.err, ran.err
    assert node.calls() == [] and node.metric_values()["migbake_mig_restore_success"] == 0


@pytest.mark.parametrize("device", [H200_3D, VGA], ids=["3d-controller", "vga"])
def test_an_nvidia_gpu_without_its_driver_fails_closed(tmp_path: Path, sysfs, device: PciDevice) -> None:  # type: ignore[no-untyped-def]
    sysfs([MELLANOX_IB, device])
    node = make_node(tmp_path, restore="  driver_wait_seconds: 1\n  no_gpu: succeed\n")
    node.set("smi.fails", "1000")
    ran = node.run()
    assert ran.rc == 1
    assert f"1 NVIDIA GPU(s) on the PCI bus: {device[0]} (0x2335)" in ran.out
    assert f"FAILED: {presence.NO_DRIVER}: the NVIDIA driver did not answer within 1 s" in ran.err, ran.err
    values = node.metric_values()
    assert values["migbake_mig_restore_nvidia_gpus"] == 1 and values["migbake_mig_restore_success"] == 0


def test_a_gpu_of_another_model_is_named_when_the_restore_fails(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([("0000:18:00.0", "0x10de", "0x20b2", "0x030200")])  # an A100 on an H200 profile
    node = make_node(tmp_path)
    node.set("apply", "fails")
    ran = node.run()
    assert ran.rc == 1
    assert f"failed; {presence.FOREIGN}: 0000:18:00.0 (0x20b2)" in ran.err, ran.err
    node = make_node(tmp_path / "a100", gpus=A100)  # the same GPU on an A100 profile: no such words
    node.set("apply", "fails")
    assert presence.FOREIGN not in node.run().err


# --- verify ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("tree", sorted(NO_GPU_TREES))
def test_verify_without_an_nvidia_gpu_passes_and_skips_the_gpu_checks(tmp_path: Path, sysfs, tree: str) -> None:  # type: ignore[no-untyped-def]
    sysfs(NO_GPU_TREES[tree])
    node, script = good_node(tmp_path)
    node.set("smi.mode", "fails")  # no driver either: nothing may ask it
    ran = node.run(script)
    assert ran.rc == 0, ran.text
    assert f"PASS  {presence.NO_GPU} (restore.no_gpu: succeed): the GPU checks are skipped" in ran.out
    assert node.calls("mig-parted") == [] and "FAIL" not in ran.out


def test_verify_no_gpu_fail(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([])
    node, script = good_node(tmp_path, restore_extra="  no_gpu: fail\n")
    ran = node.run(script)
    assert ran.rc == 1
    assert f"FAIL  {presence.NO_GPU_FAIL} (restore.no_gpu: fail): the restore fails and kubelet.service" in ran.out


def test_verify_gpu_without_driver_uses_the_words(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([H200_3D])
    node, script = good_node(tmp_path)
    node.set("smi.mode", "fails")
    ran = node.run(script)
    assert ran.rc == 1 and f"FAIL  {presence.NO_DRIVER}: " in ran.out, ran.out


# --- preflight ------------------------------------------------------------------------------------

@pytest.mark.parametrize("tree", sorted(NO_GPU_TREES))
def test_preflight_without_an_nvidia_gpu_is_ready(tmp_path: Path, sysfs, tree: str) -> None:  # type: ignore[no-untyped-def]
    sysfs(NO_GPU_TREES[tree])
    ran = preflight_node(tmp_path, SimNode(gpus=[], nvidia_smi=False, mig_parted=False, driver="none"))
    assert ran.rc == 0 and ran.report["ready"] is True, ran.report
    assert ran.status["pci-gpus"] == "PASS" and ran.detail["pci-gpus"].startswith(presence.NO_GPU)
    for check in ("nvidia-smi", "driver", "gpu-count", "gpus/0", "coverage", "mig-state", "mig-parted"):
        assert (ran.status[check], ran.detail[check]) == ("SKIP", presence.NO_GPU), check
    assert ran.calls == [c for c in ran.calls if c.startswith("systemctl")]  # no NVIDIA tool ran


def test_preflight_no_gpu_fail_is_not_ready(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([])
    ran = preflight_node(tmp_path, SimNode(gpus=[], nvidia_smi=False, driver="none"),
                         extra="restore: {no_gpu: fail}\n")
    assert ran.rc == 1 and ran.status["pci-gpus"] == "FAIL"
    assert ran.detail["pci-gpus"].startswith(presence.NO_GPU_FAIL)


def test_preflight_gpu_without_driver_and_of_another_model(tmp_path: Path, sysfs) -> None:  # type: ignore[no-untyped-def]
    sysfs([H200_3D])
    (tmp_path / "h200").mkdir()
    ran = preflight_node(tmp_path / "h200", SimNode(nvidia_smi=False, driver="none"))
    assert ran.rc == 1
    assert ran.detail["nvidia-smi"].startswith(f"{presence.NO_DRIVER}: ")
    assert ran.detail["driver"].startswith(f"{presence.NO_DRIVER}: no NVIDIA kernel driver on the host")
    assert ran.status["pci-gpus"] == "PASS"  # an H200 on an H200 profile
    sysfs([("0000:18:00.0", "0x10de", "0x20b2", "0x030200")])
    (tmp_path / "a100").mkdir()
    ran = preflight_node(tmp_path / "a100", SimNode(nvidia_smi=False, driver="none"))
    assert ran.status["pci-gpus"] == "FAIL"
    assert ran.detail["pci-gpus"].startswith(f"{presence.FOREIGN}: 0000:18:00.0 (0x20b2) on the PCI bus")


def test_the_words_have_one_source(tmp_path: Path) -> None:
    """Each script sets each case's words once, from the plan (gpu/presence.py), and prints that variable."""
    from support import generate

    out = generate("version: 1\nname: words\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n",
                   tmp_path / "out")
    for rel in ("rootfs/etc/nvidia-mig/restore.sh", "scripts/verify-mig-restore.sh",
                "scripts/preflight-mig-restore.sh"):
        text = (out / rel).read_text()
        found = {line.partition("=")[0]: shlex.split(line.partition("=")[2])[0]
                 for line in text.splitlines() if line.startswith("words_")}
        assert found == {"words_no_gpu": presence.NO_GPU, "words_no_gpu_fail": presence.NO_GPU_FAIL,
                         "words_no_driver": presence.NO_DRIVER, "words_foreign": presence.FOREIGN}, rel
        assert sum(line.startswith("words_") for line in text.splitlines()) == 4
        rest = "\n".join(line for line in text.splitlines() if not line.startswith("words_"))
        assert "on this machine" not in rest, rel  # the scripts print the variables, never their own copy
