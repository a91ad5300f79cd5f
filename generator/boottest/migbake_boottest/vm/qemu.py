"""Booting a disk image under QEMU until the guest powers off (exit code, duration, serial log), or in
the background as a running node an SSH client reaches.

As each boot ends, one line (``boot_line``) goes to the logger ``migbake_boottest.boots`` (INFO): a long run of boots
says how far it is (tests/vm/conftest.py shows each line live, also from pytest-xdist's workers).
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from migbake_boottest.hostrun import Log, no_log, require_tools
from migbake_boottest.vm.kernel import KernelAssets

TIMEOUT_EXIT = 124  # what timeout(1) returns; used when the boot does not power off in time
BOOTS = logging.getLogger("migbake_boottest.boots")  # one INFO record per boot, as it ends
QEMU = "qemu-system-x86_64"
# Under TCG the guest kernel finds the TSCs "unsynchronized" and falls back to the HPET: every clock read is
# a syscall and an emulated MMIO access. TCG's TSC comes from QEMU's one virtual clock, so it is reliable;
# with it (and without the Spectre mitigations, which a throwaway test guest does not need) a cloud-init
# boot of h200-inference took 103-112 s of guest uptime instead of 130 s, measured here.
TCG_KERNEL_ARGS = " clocksource=tsc tsc=reliable mitigations=off"


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


def boot(*, kernel: KernelAssets, disk: Path, serial_log: Path, seed: Path | None = None,
         timeout_s: float = 300, kernel_args: str = "", log: Log = no_log) -> BootRun:
    """Boot ``disk`` (root on /dev/vda, ``seed`` as a read-only second disk) until the guest powers off.

    A guest that reboots ends the run too (``-no-reboot``): the harness boots the disk again.
    """
    with start(kernel=kernel, disk=disk, serial_log=serial_log, seed=seed, kernel_args=kernel_args, log=log) as vm:
        return vm.wait(timeout_s)


class RunningVm:
    """A QEMU process started by ``start``: ``wait`` for its power-off, or leave the block to kill it."""

    def __init__(self, cmd: list[str], serial_log: Path, log: Log) -> None:
        self.serial_log = serial_log
        self._log = log
        self._start = time.monotonic()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, errors="replace")

    def __enter__(self) -> RunningVm:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc.poll() is None:
            self._log("the guest is still running: killing its QEMU")
            self.wait(0)
        self._proc.__exit__(None, None, None)

    def wait(self, timeout_s: float) -> BootRun:
        """Wait up to ``timeout_s`` for the guest to power off (then QEMU is killed: ``timed_out``)."""
        try:
            output, _ = self._proc.communicate(timeout=timeout_s)
            code = self._proc.returncode
        except subprocess.TimeoutExpired:
            self._proc.kill()  # only the QEMU process this object started
            output, _ = self._proc.communicate()
            code = TIMEOUT_EXIT
        duration = time.monotonic() - self._start
        if output.strip():
            self._log(f"qemu said: {output.strip()}")
        self._log(f"boot ended with exit code {code} after {duration:.1f} s")
        run = BootRun(code, duration, self.serial_log)
        BOOTS.info("%s", boot_line(run))
        return run


def boot_line(run: BootRun) -> str:
    """One line for a boot that ended: its run's work folder (named for the path, scenario and GPU generation), which
    boot of the run (``serial-N.log``: boot N), how it ended and how long it took."""
    ended = ("killed at the timeout" if run.timed_out else
             "powered off" if run.exit_code == 0 else f"QEMU exited {run.exit_code}")
    stem = run.serial_log.stem
    which = f"boot {stem[len('serial-'):]}" if stem.startswith("serial-") else run.serial_log.name
    return f"{run.serial_log.parent.name} {which}: {ended} after {run.duration_s:.0f} s"


def start(
    *,
    kernel: KernelAssets,
    disk: Path,
    serial_log: Path,
    seed: Path | None = None,
    memory_mb: int = 1024,
    smp: int = 1,  # one vCPU: under TCG each is a host thread; two guests of two beside the rest of the suite on 2
    # cores took the whole .ci/run 2,604 s, guests of one 2,129 s (2026-12-04, every test passing in both)
    ssh_port: int | None = None,
    kernel_args: str = "",
    log: Log = no_log,
) -> RunningVm:
    """Start QEMU on ``disk`` in the background.

    Without ``ssh_port`` the VM has no NIC and a reboot ends QEMU. With it, the guest gets a virtio NIC on
    QEMU's user-mode network with its port 22 forwarded to 127.0.0.1:``ssh_port`` (loopback only), and
    it may reboot inside the same QEMU run, as a running node does: only a power-off ends it.
    ``kernel_args`` (with a leading blank) end the kernel command line (a boot's system credential).
    """
    require_tools(QEMU)
    accel = "kvm" if kvm_usable() else "tcg"
    cmd = [
        QEMU, "-accel", accel, "-m", str(memory_mb), "-smp", str(smp),
        "-kernel", str(kernel.vmlinuz), "-initrd", str(kernel.initrd),
        # not for a guest that reboots inside its QEMU run (ssh_port): one such warm reboot hung at
        # "sched_clock: Marking stable" with them (the fleet test, beside other CPU-bound work); without them
        # those reboots passed in every earlier run
        "-append", "console=ttyS0 root=/dev/vda rw panic=-1"
        + (TCG_KERNEL_ARGS if accel == "tcg" and ssh_port is None else "")
        + kernel_args,
        "-drive", f"file={disk},format=raw,if=virtio",
        "-display", "none", "-monitor", "none", "-serial", f"file:{serial_log}",
    ]
    if ssh_port is None:
        cmd += ["-nic", "none", "-no-reboot"]
    else:
        cmd += ["-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{int(ssh_port)}-:22"]
    if seed is not None:
        cmd += ["-drive", f"file={seed},format=raw,if=virtio,readonly=on"]
    serial_log.parent.mkdir(parents=True, exist_ok=True)
    where = "" if ssh_port is None else f", ssh on 127.0.0.1:{ssh_port}"
    log(f"booting {disk.name} with {accel}{where}, console in {serial_log}")
    return RunningVm(cmd, serial_log, log)
