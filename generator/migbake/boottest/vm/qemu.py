"""Booting a disk image under QEMU until the guest powers off: exit code, duration, serial log."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from migbake.boottest.hostrun import Log, no_log, require_tools
from migbake.boottest.vm.kernel import KernelAssets

TIMEOUT_EXIT = 124  # what timeout(1) returns; used when the boot does not power off in time
QEMU = "qemu-system-x86_64"


@dataclass(frozen=True)
class BootRun:
    """One VM boot, from QEMU start to power-off (or timeout)."""

    exit_code: int
    duration_s: float
    serial_log: Path

    @property
    def timed_out(self) -> bool:
        return self.exit_code == TIMEOUT_EXIT


def kvm_usable() -> bool:
    """KVM only if /dev/kvm is writable, it is not the PVM backend, and the CPU has vmx or svm.

    The PVM backend (``kvm_pvm``) runs only PVM-enabled guests: a stock Debian kernel hangs after
    "Probing EDD". So machines like the CI runners here always use TCG.
    """
    if not os.access("/dev/kvm", os.W_OK) or Path("/sys/module/kvm_pvm").exists():
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


def boot(
    *,
    kernel: KernelAssets,
    disk: Path,
    serial_log: Path,
    seed: Path | None = None,
    timeout_s: float = 300,
    memory_mb: int = 1024,
    smp: int = 2,
    log: Log = no_log,
) -> BootRun:
    """Boot ``disk`` (root on /dev/vda, ``seed`` as a read-only second disk) until the guest powers off."""
    require_tools(QEMU)
    accel = "kvm" if kvm_usable() else "tcg"
    cmd = [
        QEMU, "-accel", accel, "-m", str(memory_mb), "-smp", str(smp),
        "-kernel", str(kernel.vmlinuz), "-initrd", str(kernel.initrd),
        "-append", "console=ttyS0 root=/dev/vda rw panic=-1",
        "-drive", f"file={disk},format=raw,if=virtio",
        "-display", "none", "-monitor", "none", "-serial", f"file:{serial_log}", "-nic", "none", "-no-reboot",
    ]
    if seed is not None:
        cmd += ["-drive", f"file={seed},format=raw,if=virtio,readonly=on"]
    serial_log.parent.mkdir(parents=True, exist_ok=True)
    log(f"booting {disk.name} with {accel} (timeout {timeout_s:.0f} s), console in {serial_log}")
    start = time.monotonic()
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()  # only the QEMU process this function started
            output, _ = proc.communicate()
            code = TIMEOUT_EXIT
    duration = time.monotonic() - start
    if output.strip():
        log(f"qemu said: {output.strip()}")
    log(f"boot ended with exit code {code} after {duration:.1f} s")
    return BootRun(code, duration, serial_log)
