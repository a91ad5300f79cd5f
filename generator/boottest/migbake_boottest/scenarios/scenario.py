"""Test fixtures installed INTO a guest rootfs (never on the host): simulated NVIDIA tools, fake units.

What a boot-test image gets on top of the plain Debian rootfs:
- ``nvidia-smi`` and ``nvidia-mig-parted`` simulators (``guest/``) that model a Hopper- or Ampere-like GPU
  and log every call with a timestamp to /var/log/mig-stub.log;
- an enabled fake ``kubelet.service`` and an enabled fake conflicting ``nvidia-mig-manager.service``;
- ``test-report.service``: writes /var/log/test-report.txt and powers the VM off;
- the simulated GPUs on a simulated PCI bus: a sysfs tree (vendor, device, class per GPU) bind-mounted
  over the guest's /sys/bus/pci/devices early in the boot, so the generated scripts, as they are on a real
  node, read it where they read the PCI bus (they take no path from their environment): the restore
  decides from it whether the machine has an NVIDIA GPU at all (``gpu/presence.py``);
- cloud-init NoCloud settings, and a masked serial getty (no udev in minbase: it would wait forever);
- sshd and D-Bus masked: only ``enable_ssh`` (a guest that an SSH client drives, reboots and powers off,
  as a running node) unmasks them.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

import yaml

from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, run

GUEST = Path(__file__).parents[1] / "guest"
STUB_LOG = "/var/log/mig-stub.log"
REPORT = "/var/log/test-report.txt"
GPU_STATE_AT_KUBELET = "/run/boottest/gpu-state-at-kubelet.txt"  # /run: this boot's, never an earlier boot's
# a drop-in of the fake kubelet: its first start of the boot records the simulated GPUs (scenarios.dra_claims)
GPU_STATE_DROP_IN = "kubelet.service.d/90-boottest-gpu-state.conf"
GPU_STATE_DROP_IN_TEXT = (
    "# Test fixture for boot tests ONLY: the simulated GPUs as kubelet finds them when it first starts\n"
    "[Service]\n"
    f"ExecStartPre=-/bin/sh -c 'mkdir -p /run/boottest; [ -e {GPU_STATE_AT_KUBELET} ] || "
    f"MIG_STUB_REPORT=1 /usr/lib/simgpu/nvidia-smi --simgpu-state >{GPU_STATE_AT_KUBELET} 2>&1'\n")
SYSTEM_UNITS = "usr/lib/systemd/system"

IMITATION = ("the shell imitation of nvidia-mig-parted (no --mig-parted given): it agrees with migbake's "
             "reading of mig-parted by construction, not with NVIDIA's tool")
Generation = Literal["hopper", "ampere"]
Scenario = Literal["ok", "fail-apply", "fail-assert", "driver-late", "driver-too-late", "gpu-client",
                   "manager-reenabled", "ampere-pending", "ampere-pending-stuck", "cdi", "provided-later-missing",
                   "no-gpu", "layout-unknown", "layout-missing", "driver-container", "driver-container-fail",
                   "driver-restart", "driver-restart-userspace", "cpu-node"]
NO_GPU: Final = "no-gpu"  # scenarios.presence: boot 1 without a GPU on the PCI bus, boot 2 with one and no driver
# the simulated PCI bus (a sysfs tree), and the mount unit that puts it over the guest's own
SIMULATED_SYSFS = "/usr/lib/boottest/sys"
PCI_BUS = "/sys/bus/pci/devices"
PCI_BUS_MOUNT = "sys-bus-pci-devices.mount"  # systemd.mount(5): named after its Where= (systemd-escape --path)
_PCI_BUS_MOUNT_TEXT = f"""# Test fixture for boot tests ONLY: the simulated PCI bus over the guest's own
[Unit]
Description=Simulated PCI bus (boot test fixture)
DefaultDependencies=no
Before=sysinit.target

[Mount]
What={SIMULATED_SYSFS}/bus/pci/devices
Where={PCI_BUS}
Type=none
Options=bind

[Install]
WantedBy=sysinit.target
"""
MELLANOX_NIC = ("0000:3b:00.0", "0x15b3", "0x101b", "0x020700")  # not a GPU: on every simulated bus
# the base image lacks nvidia-mig-parted, which the output's image.provided_later leaves to a later
# provisioner that never ran: the bake passes, the restore fails closed at boot naming it
PROVIDED_LATER_MISSING: Final = "provided-later-missing"
# named layouts (scenarios.layouts): the node says a name the image does not have, or says none and the
# profile has no default; the restore fails closed before it calls any NVIDIA tool
LAYOUT_UNKNOWN: Final = "layout-unknown"
LAYOUT_MISSING: Final = "layout-missing"


@dataclass(frozen=True)
class SimulatedGpu:
    """The GPU the simulators pretend to be."""

    generation: Generation
    name: str
    device_id: str  # mig-parted device-filter form, e.g. 0x233010DE
    count: int = 1


SIMULATED_GPUS: dict[Generation, SimulatedGpu] = {
    "hopper": SimulatedGpu("hopper", "NVIDIA H100 80GB HBM3", "0x233010DE"),
    "ampere": SimulatedGpu("ampere", "NVIDIA A100-SXM4-80GB", "0x20B210DE"),
}


@dataclass(frozen=True)
class RestoreCommands:
    """What the restore unit under test calls: where the simulators must be, and the config it selects."""

    nvidia_smi: str = "/usr/bin/nvidia-smi"
    nvidia_mig_parted: str = "/usr/bin/nvidia-mig-parted"
    config_file: str = "/etc/nvidia-mig/config.yaml"
    config_name: str = "current"


# restore.sh's settings, one quoted shell word each (templates/rootfs/etc/nvidia-mig/restore.sh.j2)
_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.@-]+\.service")
_LAYOUT_NAMES = re.compile(r"layout_names=\((.*)\)")  # restore.sh's named layouts (scripts/_layout-source.sh.j2)
_SCRIPT_SETTINGS = {"smi": "nvidia_smi", "mig_parted": "nvidia_mig_parted", "config": "config_file",
                    "config_name": "config_name"}


def restore_commands(out_dir: Path, unit_path: str) -> RestoreCommands:
    """What the restore unit at ``out_dir/unit_path`` calls, and the config it selects.

    Today's unit runs ``ExecStart=/bin/bash SCRIPT``: the tools and the config are the script's settings
    (``smi=``, ``mig_parted=``, ``config=``, ``config_name=``). An older output calls the tools in the
    unit itself: then they come from its ExecStartPre=/ExecStart= lines.
    """
    unit_text = (out_dir / unit_path).read_text()
    for raw in unit_text.splitlines():
        key, sep, value = raw.strip().partition("=")
        words = shlex.split(value) if sep and key == "ExecStart" else []
        if len(words) == 2 and words[0].lstrip("-@:+!").endswith("/bash"):
            script = out_dir / "rootfs" / words[1].lstrip("/")
            return restore_commands_from_script(script.read_text()) if script.is_file() else RestoreCommands()
    return restore_commands_from_unit(unit_text)


def restore_commands_from_script(script_text: str) -> RestoreCommands:
    """The ``smi=``, ``mig_parted=``, ``config=`` and ``config_name=`` settings of a restore.sh."""
    found: dict[str, str] = {}
    default = ""
    names: list[str] = []
    for raw in script_text.splitlines():
        listed = _LAYOUT_NAMES.fullmatch(raw)
        if listed and not names:
            names = shlex.split(listed[1])
        name, sep, value = raw.partition("=")
        # the two names may carry a comment after them (config_name='' on a named-layouts restore)
        wanted = sep and (name in _SCRIPT_SETTINGS or name == "layout_default")
        words = shlex.split(value, comments=name in ("config_name", "layout_default")) if wanted else []
        if name == "layout_default" and len(words) == 1:
            default = words[0]
        elif name in _SCRIPT_SETTINGS and _SCRIPT_SETTINGS[name] not in found and len(words) == 1:
            found[_SCRIPT_SETTINGS[name]] = words[0]
    if found.get("config_name") == "":  # named layouts (restore.layout): the name is found at boot; its default
        found["config_name"] = default or (names[0] if names else "")  # (no default: a node must say one)
    return RestoreCommands(**found)


def restore_commands_from_unit(unit_text: str) -> RestoreCommands:
    """Read the tool paths and ``-f``/``-c`` values from a restore unit's ExecStartPre=/ExecStart= lines."""
    found: dict[str, str] = {}
    for raw in unit_text.splitlines():
        key, sep, value = raw.strip().partition("=")
        if not sep or key not in ("ExecStartPre", "ExecStart"):
            continue
        words = shlex.split(value)
        if not words:
            continue
        program = words[0].lstrip("-@:+!")
        if key == "ExecStartPre" and program.endswith("/nvidia-smi"):
            found["nvidia_smi"] = program
        if key == "ExecStart" and program.endswith("/nvidia-mig-parted"):
            found["nvidia_mig_parted"] = program
            for flag, name in (("-f", "config_file"), ("-c", "config_name")):
                if flag in words[:-1]:
                    found[name] = words[words.index(flag) + 1]
    return RestoreCommands(**found)


def simulated_gpu_for_config(config_text: str, config_name: str, generation: Generation) -> SimulatedGpu:
    """The simulated GPUs a mig-parted config fits: its first device-filter's ID, as many GPUs as it lists.

    A config without device lists (``devices: all``) gets one GPU; without filters, the generation's ID.
    """
    model = SIMULATED_GPUS[generation]
    try:
        spec = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return model  # the guest's apply reports the broken file
    configs = spec.get("mig-configs") if isinstance(spec, dict) else None
    entries = configs.get(config_name) if isinstance(configs, dict) else None
    if not isinstance(entries, list):
        return model
    indices: list[int] = [0]
    filters: list[object] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        devices, found = entry.get("devices"), entry.get("device-filter")
        if isinstance(devices, list):
            indices += [i for i in devices if isinstance(i, int) and i >= 0]
        filters += [found] if isinstance(found, str) else found if isinstance(found, list) else []
    device_id = str(filters[0]).split(":")[0] if filters and filters[0] else model.device_id
    return replace(model, device_id=device_id, count=max(indices) + 1)


def install_fixtures(
    rootfs: Path,
    *,
    gpu: SimulatedGpu,
    commands: RestoreCommands = RestoreCommands(),
    kubelet: bool = True,
    actor: str = IMITATION,
    log: Log = no_log,
    consumers: tuple[str, ...] = (),
) -> None:
    """Install the simulators, fake units and report service into ``rootfs``, and enable them.

    ``kubelet=False`` models a node without kubelet (the output under test then has no kubelet drop-in).
    ``consumers``: the profile's other consumer units (slurmd.service, ...), each a fake that logs its start.
    With another ``actor`` than the imitation, the caller installs the tools (``simgpu.guest``).
    """
    log(f"installing boot-test fixtures ({gpu.generation}, {gpu.name}) into {rootfs}")
    if actor == IMITATION:
        _install(rootfs, "nvidia-smi", commands.nvidia_smi, 0o755)
        _install(rootfs, "nvidia-mig-parted", commands.nvidia_mig_parted, 0o755)
        _install(rootfs, "desired-state", "/usr/lib/mig-stub/desired-state", 0o755)
    stub_etc = rootfs / "etc/mig-stub"
    stub_etc.mkdir(parents=True, exist_ok=True)
    for name, value in (("generation", gpu.generation), ("gpu-name", gpu.name),
                        ("device-id", gpu.device_id), ("gpu-count", str(gpu.count))):
        (stub_etc / name).write_text(value + "\n")
    report = (GUEST / "test-report").read_text()
    for placeholder, value in (("@NVIDIA_MIG_PARTED@", commands.nvidia_mig_parted),
                               ("@MIG_CONFIG_FILE@", commands.config_file),
                               ("@MIG_CONFIG_NAME@", commands.config_name), ("@ACTOR@", actor)):
        report = report.replace(placeholder, shlex.quote(value))
    simulated_pci_bus(rootfs, [gpu.device_id] * gpu.count)
    for unit in consumers:
        if not _UNIT_NAME.fullmatch(unit):
            raise BootTestError(f"unsupported consumer unit name {unit!r}")
        if unit == "slurmd.service" and (rootfs / REAL_SLURMD_UNIT).is_file():
            real_slurmd(rootfs)
        else:
            _write(rootfs, f"/{SYSTEM_UNITS}/{unit}", consumer_unit(unit), 0o644)
    report = report.replace("@CONSUMERS@", " ".join(consumers))
    if consumers:  # the report waits for them too
        _write(rootfs, f"/{SYSTEM_UNITS}/test-report.service.d/consumers.conf",
               f"# Test fixture for boot tests ONLY\n[Unit]\nAfter={' '.join(consumers)}\n", 0o644)
    _write(rootfs, "/usr/local/sbin/test-report", report, 0o755)
    units = ["nvidia-mig-manager.service", "test-report.service"] + (["kubelet.service"] if kubelet else [])
    for unit in units:
        _install(rootfs, unit, f"/{SYSTEM_UNITS}/{unit}", 0o644)
    if kubelet:  # the GPUs as kubelet finds them when it starts (the DRA claims, scenarios.dra_claims)
        _write(rootfs, f"/{SYSTEM_UNITS}/{GPU_STATE_DROP_IN}", GPU_STATE_DROP_IN_TEXT, 0o644)
    units += list(consumers)  # written above
    _install(rootfs, "90-boottest.cfg", "/etc/cloud/cloud.cfg.d/90-boottest.cfg", 0o644)
    _write(rootfs, "/etc/default/locale", "LANG=C.UTF-8\n", 0o644)
    systemctl = ["systemctl", "--quiet", f"--root={rootfs}"]
    run([*systemctl, "enable", *units], log=log)
    run([*systemctl, "mask", "serial-getty@ttyS0.service", *SSH_UNITS], log=log)


def simulated_pci_bus(rootfs: Path, device_ids: list[str]) -> None:
    """The guest's simulated PCI bus: one NVIDIA 3D controller per id (0x233010DE form), and a Mellanox NIC.

    It replaces the bus written before (the simulated node may have other GPUs than the config suggests).
    A bind mount (``PCI_BUS_MOUNT``, before sysinit.target) puts it over the guest's /sys/bus/pci/devices, where
    every unit and SSH session reads it; the files under test are the generated ones, unchanged.
    """
    devices = rootfs / SIMULATED_SYSFS.lstrip("/") / "bus/pci/devices"
    if devices.exists():
        shutil.rmtree(devices)
    gpus = [(f"0000:{0x18 + 0x10 * i:02x}:00.0", "0x10de", "0x" + d[2:6].lower(), "0x030200")
            for i, d in enumerate(device_ids)]
    for address, vendor, device, klass in [*gpus, MELLANOX_NIC]:
        for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
            _write(rootfs, f"{SIMULATED_SYSFS}/bus/pci/devices/{address}/{name}", value + "\n", 0o644)
    _write(rootfs, f"/{SYSTEM_UNITS}/{PCI_BUS_MOUNT}", _PCI_BUS_MOUNT_TEXT, 0o644)
    wants = rootfs / "etc/systemd/system/sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    if not (wants / PCI_BUS_MOUNT).is_symlink():
        (wants / PCI_BUS_MOUNT).symlink_to(f"/{SYSTEM_UNITS}/{PCI_BUS_MOUNT}")


# Debian's openssh-server, D-Bus and systemd-logind (which schedules the reboot `shutdown -r 0` asks
# for, over the system bus): masked, a boot is what it was before the rootfs had them (logind's
# condition is that dbus.service exists, and it would fail without a bus)
SSH_UNITS = ("ssh.service", "ssh.socket", "dbus.service", "dbus.socket", "systemd-logind.service")
STAY_UP = "/etc/boottest/stay-up"  # test-report does not power the guest off


def enable_ssh(rootfs: Path, public_key: str, *, log: Log = no_log) -> None:
    """Let an SSH client drive the guest as root with ``public_key``, and keep it up after its report.

    The guest then answers on its port 22 (``qemu.start``'s ``ssh_port``), and test-report writes its
    report on every boot but powers nothing off: the client reboots and powers off the guest itself.
    """
    if not re.fullmatch(r"ssh-ed25519 [A-Za-z0-9+/=]+( [\w@.-]+)?", public_key.strip()):
        raise BootTestError("enable_ssh takes one ssh-ed25519 public key")
    (rootfs / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    _write(rootfs, "/root/.ssh/authorized_keys", public_key.strip() + "\n", 0o600)
    _write(rootfs, STAY_UP, "", 0o644)
    run(["systemctl", "--quiet", f"--root={rootfs}", "unmask", *SSH_UNITS], log=log)
    run(["systemctl", "--quiet", f"--root={rootfs}", "enable", "ssh.service", "dbus.socket"], log=log)


def consumer_unit(unit: str) -> str:
    """A fake consumer ``unit`` (like the fake kubelet): logs "NAME ExecStartPre" when it starts, then idles."""
    name = unit.removesuffix(".service")
    return (f"# Test fixture for boot tests ONLY: a fake {name} that logs when it starts and then idles.\n"
            f"[Unit]\nDescription=Fake {name} (boot test fixture)\n\n[Service]\n"
            f"ExecStartPre=/bin/sh -c 'echo \"$(date +%%s.%%N) {name} ExecStartPre\" >>{STUB_LOG}'\n"
            "ExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=multi-user.target\n")


REAL_SLURMD_UNIT = "lib/systemd/system/slurmd.service"  # Debian's package (the rootfs includes slurmd)
SLURM_NODE = "boottest"


def real_slurmd(rootfs: Path) -> None:
    """Debian's own slurmd as the consumer: its unit file and binary unchanged, a minimal slurm.conf.

    Without a controller or munge key in reach it starts, says "slurmd version ... started" and keeps
    retrying to register, as a fresh node does. A test drop-in logs its start like the fake consumers.
    """
    _write(rootfs, "/etc/slurm/slurm.conf",
           "# Test fixture for boot tests ONLY: a node that needs no controller to start.\n"
           "ClusterName=boottest\nSlurmctldHost=localhost(127.0.0.1)\n"
           f"NodeName={SLURM_NODE} NodeAddr=127.0.0.1 CPUs=1\n"
           "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSlurmdSpoolDir=/var/lib/slurm/slurmd\n"
           "SlurmdLogFile=/var/log/slurm/slurmd.log\n"
           f"PartitionName=boottest Nodes={SLURM_NODE} Default=YES\n", 0o644)
    # the guest has no D-Bus daemon: slurmd's cgroup/v2 plugin makes its scope itself (22.05's IgnoreSystemd)
    _write(rootfs, "/etc/slurm/cgroup.conf", "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n", 0o644)
    _write(rootfs, "/etc/default/slurmd", f"SLURMD_OPTIONS='-N {SLURM_NODE}'\n", 0o644)
    _write(rootfs, f"/{SYSTEM_UNITS}/slurmd.service.d/10-boottest-log.conf",
           "# Test fixture for boot tests ONLY: log the start of the real slurmd. slurmd resolves the\n"
           "# machine's own host name, which the test image's /etc/hosts lacks, and asks getaddrinfo with\n"
           "# AI_ADDRCONFIG, which finds nothing on a VM without a network: give lo a second address.\n[Service]\n"
           "ExecStartPre=-/sbin/ip link set lo up\nExecStartPre=-/sbin/ip addr add 10.254.0.1/32 dev lo\n"
           "ExecStartPre=/bin/sh -c 'grep -qw \"$(hostname)\" /etc/hosts || "
           "echo \"127.0.1.1 $(hostname)\" >>/etc/hosts'\n"
           f"ExecStartPre=/bin/sh -c 'echo \"$(date +%%s.%%N) slurmd ExecStartPre\" >>{STUB_LOG}'\n", 0o644)


def disable_cloud_init(rootfs: Path) -> None:
    """Keep cloud-init from running at boot (the Packer path bakes everything in)."""
    _write(rootfs, "/etc/cloud/cloud-init.disabled", "", 0o644)


def inject_fault(rootfs: Path, scenario: Scenario) -> None:
    """Make the simulated tool fail as ``scenario`` asks (``ok`` injects nothing)."""
    if scenario == "ok":
        return
    if scenario in (PROVIDED_LATER_MISSING, NO_GPU, LAYOUT_UNKNOWN, LAYOUT_MISSING):  # the image's, not a tool's
        return
    tool = scenario.removeprefix("fail-")
    if tool not in ("apply", "assert", "smi"):
        raise BootTestError(f"unknown scenario {scenario!r}")
    _write(rootfs, f"/etc/mig-stub/fail-{tool}", "", 0o644)


def _install(rootfs: Path, guest_name: str, dest: str, mode: int) -> None:
    _write(rootfs, dest, (GUEST / guest_name).read_text(), mode)


def _write(rootfs: Path, dest: str, text: str, mode: int) -> None:
    if not dest.startswith("/"):
        raise BootTestError(f"guest path must be absolute: {dest!r}")
    target = rootfs / dest.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.parent.resolve().is_relative_to(rootfs.resolve()):  # an absolute symlink in the image
        raise BootTestError(f"{dest} would be written outside the guest rootfs {rootfs}")
    if target.is_symlink():
        target.unlink()
    target.write_text(text)
    target.chmod(mode)
    shutil.chown(target, 0, 0)
