"""Whether a machine has an NVIDIA GPU, as its PCI bus says: the ids sysfs shows, and the restore's three cases.

The restore, verify and preflight decide it from the hardware before any NVIDIA tool runs: a PCI device
whose ``vendor`` is NVIDIA's and whose ``class`` is a display controller, VGA or 3D. The numbers are the
PCI-SIG's, as the Linux kernel names them in torvalds/linux:include/linux/pci_ids.h@v6.12
(``PCI_CLASS_DISPLAY_VGA 0x0300``, ``PCI_CLASS_DISPLAY_3D 0x0302``, ``PCI_VENDOR_ID_NVIDIA 0x10de``);
sysfs prints ``vendor`` as ``0x%04x`` and ``class`` as ``0x%06x`` (base class, subclass, programming
interface: drivers/pci/pci-sysfs.c@v6.12). NVIDIA's other PCI functions (the GPU's HDA audio, an NVSwitch
bridge) and NVIDIA Networking's adapters (vendor 0x15b3, Mellanox) are no GPU.

The words of the three cases live here once: the generated scripts print them (the plan carries them)
and the boot test's claims look for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

VENDOR_NVIDIA: Final = "0x10de"
# PCI class codes (base class 0x03 display controller): the subclass, the programming interface any
DISPLAY_CLASSES: Final = ("0x0300", "0x0302")

NO_GPU: Final = "no NVIDIA GPU on this machine: nothing to restore"
NO_GPU_FAIL: Final = ("no NVIDIA GPU on this machine, and restore.no_gpu: fail says this image must never run "
                      "without one")
NO_DRIVER: Final = "NVIDIA GPU(s) on this machine but no NVIDIA driver"
FOREIGN: Final = "NVIDIA GPU(s) on this machine that are not the profile's models"


@dataclass(frozen=True)
class GpuPresence:
    """What the scripts need to tell the three cases apart, and their words."""

    no_gpu: str  # restore.no_gpu: succeed (nothing to restore, the consumers start) or fail
    device_ids: str  # the profile's models as sysfs writes their ``device`` (``0x2335 0x20b5``), sorted
    no_gpu_words: str = NO_GPU
    no_gpu_fail_words: str = NO_GPU_FAIL
    no_driver_words: str = NO_DRIVER
    foreign_words: str = FOREIGN


def sysfs_device_ids(pci_ids: str) -> str:
    """``0x233510DE 0x20B510DE`` (mig-parted's device-filter form) -> ``0x20b5 0x2335`` (sysfs's ``device``)."""
    found = {f"0x{x[2:6].lower()}" for x in pci_ids.split() if x[6:].lower() == VENDOR_NVIDIA[2:]}
    return " ".join(sorted(found))


def gpu_presence(no_gpu: str, pci_ids: list[str]) -> GpuPresence:
    """The presence check of a profile: ``restore.no_gpu`` and every entry's PCI ids (device-filter form)."""
    return GpuPresence(no_gpu=no_gpu, device_ids=sysfs_device_ids(" ".join(pci_ids)))
