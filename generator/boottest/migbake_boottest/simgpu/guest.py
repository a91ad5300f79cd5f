"""The simulated GPU in a guest image, with NVIDIA's real nvidia-mig-parted as the actor (test-only).

What a boot-test image gets when ``--mig-parted PATH`` is given, instead of the shell imitation:
- the fake ``libnvidia-ml.so.1`` in /usr/lib/simgpu, found through /etc/ld.so.conf.d + ``ldconfig``
  (mig-parted dlopens it by name; never LD_BIND_NOW: the binary would die at start-up);
- the simulated ``nvidia-smi`` at the restore unit's path, and /etc/simgpu/simgpu.conf (the node,
  generated from the catalog; MIG state in /run/simgpu, Ampere's MIG mode in /var/lib/simgpu);
- the real binary in /usr/lib/simgpu, behind a wrapper at the unit's path that only logs the call;
- ``simgpu-standins.service`` (early, before sysinit.target): bind-mounts stand-ins over
  /proc/modules and /sys/bus/pci/devices, which mig-parted reads besides NVML, and over /proc/driver
  (the host driver's ``nvidia/version``, which the preflight reads: the real H200's line), and records
  the GPU state at boot; a short /usr/share/misc/pci.ids if the image has none.
None of this is ever part of what migbake generates.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from migbake_boottest.hostrun import Log, no_log, run
from migbake_boottest.simgpu.build import LIBRARY, SimGpuBuild
from migbake_boottest.simgpu.node import NVIDIA_MODULES, SimulatedNode, model_device_id, render_config, write_sysfs

SIMGPU = "/usr/lib/simgpu"
KNOB_DIR = "/etc/simgpu"
BOOT_STATE = "/var/log/simgpu-boot-state.txt"
PCI_IDS = "/usr/share/misc/pci.ids"
STANDINS_UNIT = "simgpu-standins.service"
# a scenario of the boot test -> the knob that makes the real mig-parted fail there
SCENARIO_KNOBS = {"fail-apply": "in-use", "fail-assert": "volatile-instances"}

# /proc/driver/nvidia/version of the real H200 (tests/fixtures/h200/host-driver.txt), one quoted word a line
DRIVER_VERSION_LINES = ("'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                        "(nixbld@)  ' 'GCC version:  gcc version 15.3.0 (GCC) '")
_STANDINS = f"""#!/bin/sh
# Test fixture for boot tests ONLY: stand-ins for what mig-parted reads besides NVML (a loaded
# nvidia module in /proc/modules, the GPUs in /sys/bus/pci/devices) and for the host driver's
# /proc/driver/nvidia/version (the preflight's driver check), then the GPU state at boot.
set -eu
mkdir -p /run/simgpu/proc-driver/nvidia
{{ cat /proc/modules; cat {SIMGPU}/nvidia-modules; }} >/run/simgpu/modules
mount --bind /run/simgpu/modules /proc/modules
printf '%s\\n' {DRIVER_VERSION_LINES} >/run/simgpu/proc-driver/nvidia/version
mount --bind /run/simgpu/proc-driver /proc/driver
mount --bind {SIMGPU}/sysfs /sys/bus/pci/devices
MIG_STUB_REPORT=1 {SIMGPU}/nvidia-smi --simgpu-state >{BOOT_STATE} 2>&1 || echo "nvidia-smi rc=$?" >>{BOOT_STATE}
"""
_UNIT = f"""# Test fixture for boot tests ONLY: the simulated GPU's stand-ins, before anything uses the GPU.
[Unit]
Description=Simulated GPU stand-ins (boot test fixture)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target nvidia-mig-restore.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={SIMGPU}/standins

[Install]
WantedBy=sysinit.target
"""
_WRAPPER = f"""#!/bin/sh
# Test fixture for boot tests ONLY: logs the call for the boot-order claims, then runs NVIDIA's real
# nvidia-mig-parted unchanged.
[ -n "${{MIG_STUB_REPORT:-}}" ] || echo "$(date +%s.%N) nvidia-mig-parted $*" >>/var/log/mig-stub.log
exec {SIMGPU}/nvidia-mig-parted "$@"
"""


def install_simgpu(rootfs: Path, *, node: SimulatedNode, build: SimGpuBuild, mig_parted: Path,
                   nvidia_smi: str, nvidia_mig_parted: str, log: Log = no_log) -> None:
    """Install the simulated GPU, its stand-ins unit and the real ``mig_parted`` into ``rootfs``."""
    log(f"installing the simulated GPU ({node.count}x {node.model.key}) and {mig_parted} into {rootfs}")
    lib = _dir(rootfs, SIMGPU)
    _copy(build.library, lib / LIBRARY, 0o755)
    _copy(build.nvidia_smi, lib / "nvidia-smi", 0o755)
    _copy(build.nvidia_smi, _guest(rootfs, nvidia_smi), 0o755)
    _copy(mig_parted, lib / "nvidia-mig-parted", 0o755)
    _text(_guest(rootfs, nvidia_mig_parted), _WRAPPER, 0o755)
    _text(lib / "standins", _STANDINS, 0o755)
    _text(lib / "nvidia-modules", NVIDIA_MODULES, 0o644)
    write_sysfs(node, lib / "sysfs")
    _text(_dir(rootfs, KNOB_DIR) / "simgpu.conf", render_config(
        node, state_dir="/run/simgpu", persist_dir="/var/lib/simgpu", knobs=KNOB_DIR,
        call_log="/var/log/mig-stub.log"), 0o644)
    _text(_guest(rootfs, "/etc/ld.so.conf.d/simgpu.conf"), f"# boot test fixture: the simulated GPU\n{SIMGPU}\n",
          0o644)
    run(["ldconfig", "-r", rootfs], log=log)
    pci_ids = _guest(rootfs, PCI_IDS)
    if not pci_ids.exists():
        _text(pci_ids, _pci_ids(node), 0o644)
    _text(_guest(rootfs, f"/usr/lib/systemd/system/{STANDINS_UNIT}"), _UNIT, 0o644)
    run(["systemctl", "--quiet", f"--root={rootfs}", "enable", STANDINS_UNIT], log=log)


def _pci_ids(node: SimulatedNode) -> str:
    # go-nvlib parses the whole pci.ids for every GPU at every enumeration; with none on disk it parses
    # its embedded 1.3 MB copy, which under TCG costs ~40 s per mig-parted run with 8 GPUs.
    return (f"# boot test fixture: the few pci.ids lines the simulated GPUs need (pciutils format)\n"
            f"10de  NVIDIA Corporation\n\t{model_device_id(node.model):04x}  {node.model.display_name}\n"
            f"C 03  Display controller\n\t02  3D controller\n")


def set_knob(rootfs: Path, name: str, value: str = "") -> None:
    """Turn on fault knob ``name`` of the simulated GPU (simgpu/README.md) in the guest image."""
    _text(_dir(rootfs, KNOB_DIR) / name, value + ("\n" if value else ""), 0o644)


def _guest(rootfs: Path, path: str) -> Path:
    target = rootfs / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    return target


def _dir(rootfs: Path, path: str) -> Path:
    folder = rootfs / path.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _copy(source: Path, dest: Path, mode: int) -> None:
    shutil.copyfile(source, dest)
    dest.chmod(mode)


def _text(dest: Path, text: str, mode: int) -> None:
    dest.write_text(text)
    dest.chmod(mode)
