"""The simulated NVIDIA driver container and the stub GPU plugins, installed into a boot-test guest (test-only).

On top of the simulated GPU with NVIDIA's real mig-parted (``simgpu.guest``), for the driver-container
scenarios (``drivercontainer.scenarios``):
- the driver's userspace leaves the host: the simulated ``libnvidia-ml.so.1`` and ``nvidia-smi`` move into
  the container's image (/var/lib/boottest/driver-container/image), the host's ld.so.cache forgets them;
- ``boottest-driver-container.service`` (After=kubelet.service, after a per-boot delay): loads the dummy
  ``nvidia`` modules built for the guest kernel (``drivercontainer.kmod``), then runs ``nvidia-driver`` in
  its own mount namespace, whose root holds that userspace, exposes it at /run/nvidia/driver without /sys's
  submounts, and writes the PID file and ``.driver-ctr-ready`` (``guest/driver-container``,
  ``guest/nvidia-driver``); its stop removes them and, in mode ``unload``, the modules and the MIG state;
- two stub GPU plugins: ``boottest-plugin-gated.service`` runs the gate's ``migbake-wait`` step taken from
  the output (``wait_step``), ``boottest-plugin-control.service`` none; both record the MIG state they see;
- a stub ``kubectl`` that logs its arguments; ``boottest-driver-scenario.service``, which restarts the
  driver as the scenario asks and writes what the claims read (``guest/driver-scenario``).
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from migbake_boottest.drivercontainer.kmod import DriverModules
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, run
from migbake_boottest.scenarios.scenario import SYSTEM_UNITS
from migbake_boottest.scenarios.scenario import _write as write_guest
from migbake_boottest.simgpu.build import LIBRARY
from migbake_boottest.simgpu.guest import SIMGPU

GUEST = Path(__file__).with_name("guest")
LIB = "/usr/lib/boottest/driver-container"
CONF = "/etc/boottest/driver-container"
IMAGE = "/var/lib/boottest/driver-container/image"
SCENARIO_LOG = "/var/log/driver-scenario.txt"
KUBECTL_LOG = "/var/log/kubectl-calls.log"
MANAGED = "/etc/migbake/managed"
KUBECONFIG = "/etc/kubernetes/kubelet.conf"  # the first of the watcher's kubelet credentials
MODULES_STANDIN = "mount --bind /run/simgpu/modules /proc/modules\n"
GATE_DIR = "kubernetes/gate"
WAIT_CONTAINER = "migbake-wait"
UNITS = {
    "boottest-driver-container.service": f"""# Test fixture for boot tests ONLY: a simulated NVIDIA driver container.
[Unit]
Description=Simulated NVIDIA driver container (boot test fixture)
After=kubelet.service

[Service]
Type=simple
ExecStart={LIB}/driver-container start
ExecStop={LIB}/driver-container stop
TimeoutStartSec=infinity
TimeoutStopSec=30

[Install]
WantedBy=multi-user.target
""",
    "boottest-plugin-gated.service": f"""# Test fixture for boot tests ONLY: a GPU plugin behind the migbake-wait gate.
[Unit]
Description=Stub GPU plugin behind the gate (boot test fixture)
After=kubelet.service

[Service]
Type=simple
RemainAfterExit=yes
ExecStart={LIB}/gpu-plugin gated

[Install]
WantedBy=multi-user.target
""",
    "boottest-plugin-control.service": f"""# Test fixture for boot tests ONLY: the plugin without the gate.
[Unit]
Description=Stub GPU plugin without the gate (boot test fixture)

[Service]
Type=oneshot
ExecStart={LIB}/gpu-plugin control
""",
    "boottest-driver-scenario.service": f"""# Test fixture for boot tests ONLY: drives the driver-container scenario.
[Unit]
Description=Driver-container scenario (boot test fixture)
After=kubelet.service boottest-driver-container.service

[Service]
Type=oneshot
TimeoutStartSec=infinity
ExecStart={LIB}/driver-scenario

[Install]
WantedBy=multi-user.target
""",
}
REPORT_DROP_IN = ("# Test fixture for boot tests ONLY: the report waits for the driver-container scenario\n"
                  "[Unit]\nAfter=boottest-driver-scenario.service\n")


@dataclass(frozen=True)
class WaitStep:
    """The gate's ``migbake-wait`` init container: its command and its hostPath volumes (mount path, host path)."""

    source: str  # the output file it was read from
    command: tuple[str, ...]
    mounts: tuple[tuple[str, str, bool], ...]  # (mountPath, hostPath, readOnly)


@dataclass(frozen=True)
class DriverSettings:
    """A disk's simulated driver: its delay (s) per boot (the last for later boots), its stop mode, the restarts
    the scenario makes per boot (boot number -> modes), how long the scenario waits, whether the node is ours."""

    delays_s: tuple[int, ...] = (10,)
    mode: str = "unload"
    restarts: tuple[tuple[int, tuple[str, ...]], ...] = ()
    wait_s: int = 180
    managed: bool = True
    watch_unit: str = "migbake-driver-watch.service"


def wait_step(out_dir: Path) -> WaitStep:
    """The ``migbake-wait`` init container of OUT/kubernetes/gate/, with the hostPath volumes its mounts name.

    Read from any YAML document there that spells the container out (a Kyverno policy's patch does; the
    MutatingAdmissionPolicy writes it in CEL). BootTestError when none does.
    """
    folder = out_dir / GATE_DIR
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            raise BootTestError(f"{path}: not YAML: {exc}") from None
        for doc in docs:
            found = _find_wait(doc)
            if found is not None:
                return _step(found, doc, str(path.relative_to(out_dir)))
    raise BootTestError(f"{out_dir}: no {WAIT_CONTAINER} init container spelled out in {GATE_DIR}/*.yaml")


def _find_wait(node: object) -> dict[str, object] | None:
    if isinstance(node, dict):
        if node.get("name") == WAIT_CONTAINER and isinstance(node.get("command"), list):
            return node
        children: list[object] = list(node.values())
    elif isinstance(node, list):
        children = list(node)
    else:
        return None
    for child in children:
        found = _find_wait(child)
        if found is not None:
            return found
    return None


def _volumes(node: object) -> dict[str, str]:
    """Every ``{name, hostPath: {path}}`` volume anywhere in ``node``."""
    found: dict[str, str] = {}
    if isinstance(node, dict):
        host = node.get("hostPath")
        if isinstance(node.get("name"), str) and isinstance(host, dict) and isinstance(host.get("path"), str):
            found[str(node["name"])] = str(host["path"])
        for child in node.values():
            found.update(_volumes(child))
    elif isinstance(node, list):
        for child in node:
            found.update(_volumes(child))
    return found


def _step(container: dict[str, object], doc: object, source: str) -> WaitStep:
    raw_command = container["command"]
    command = [str(w) for w in raw_command] if isinstance(raw_command, list) else []
    args = container.get("args")
    command += [str(w) for w in args] if isinstance(args, list) else []
    volumes = _volumes(doc)
    mounts = []
    raw_mounts = container.get("volumeMounts")
    for mount in raw_mounts if isinstance(raw_mounts, list) else []:
        if not isinstance(mount, dict) or mount.get("name") not in volumes:
            raise BootTestError(f"{source}: {WAIT_CONTAINER} mounts {mount!r}, which is no hostPath volume there")
        mounts.append((str(mount["mountPath"]), volumes[str(mount["name"])], bool(mount.get("readOnly", False))))
    return WaitStep(source, tuple(command), tuple(mounts))


def wait_script(step: WaitStep) -> str:
    """A guest script that runs ``step``'s command as kubelet would: its hostPaths at its mount paths, read-only
    where the mount says so, in a mount namespace of its own."""
    binds = []
    for mount_path, host_path, read_only in step.mounts:
        if mount_path == host_path and not read_only:
            continue
        # hostPath type DirectoryOrCreate: kubelet makes the host's folder when it is missing
        binds.append(f"mkdir -p {shlex.quote(host_path)} {shlex.quote(mount_path)} && "
                     f"mount --bind {shlex.quote(host_path)} {shlex.quote(mount_path)}")
        if read_only:
            binds.append(f"mount -o remount,bind,ro {shlex.quote(mount_path)}")
    inner = " && ".join([*binds, f"exec {shlex.join(step.command)}"])
    return ("#!/bin/sh\n# Test fixture for boot tests ONLY: the migbake-wait init container of "
            f"{step.source}, run as kubelet would run it\n"
            f"exec unshare --mount sh -c {shlex.quote(inner)}\n")


def install(rootfs: Path, *, modules: DriverModules, step: WaitStep, settings: DriverSettings, nvidia_smi: str,
            log: Log = no_log) -> None:
    """Install the simulated driver container, the stub plugins and kubectl into ``rootfs`` (after simgpu)."""
    log(f"installing the simulated driver container into {rootfs}")
    image = rootfs / IMAGE.lstrip("/")
    (image / "bin").mkdir(parents=True, exist_ok=True)
    (image / "lib").mkdir(parents=True, exist_ok=True)
    # the driver's userspace lives in the container only: off the host's paths and out of its ld.so.cache
    shutil.move(rootfs / SIMGPU.lstrip("/") / LIBRARY, image / "lib" / LIBRARY)
    shutil.copyfile(rootfs / SIMGPU.lstrip("/") / "nvidia-smi", image / "bin/nvidia-smi")
    (image / "bin/nvidia-smi").chmod(0o755)
    (rootfs / nvidia_smi.lstrip("/")).unlink(missing_ok=True)
    (rootfs / "etc/ld.so.conf.d/simgpu.conf").unlink(missing_ok=True)
    run(["ldconfig", "-r", rootfs], log=log)
    lib = rootfs / LIB.lstrip("/")
    lib.mkdir(parents=True, exist_ok=True)
    for module in modules.modules:
        shutil.copyfile(module, lib / module.name)
    shutil.copyfile(modules.modctl, lib / "modctl")
    (lib / "modctl").chmod(0o755)
    for name in ("driver-container", "nvidia-driver", "gpu-plugin", "driver-scenario"):
        write_guest(rootfs, f"{LIB}/{name}", (GUEST / name).read_text(), 0o755)
    write_guest(rootfs, "/usr/lib/boottest/migbake-wait", wait_script(step), 0o755)
    write_guest(rootfs, "/usr/bin/kubectl", (GUEST / "kubectl").read_text(), 0o755)
    # kubelet's credentials, so that the watcher labels the node through the stub kubectl
    write_guest(rootfs, KUBECONFIG, "# Test fixture for boot tests ONLY: no cluster behind it\n", 0o600)
    # mig-parted reads /proc/modules: the dummy modules are real there, so the simulated GPU's stand-in goes
    standins = rootfs / SIMGPU.lstrip("/") / "standins"
    standins.write_text(standins.read_text().replace(MODULES_STANDIN, ""))
    (rootfs / "var/lib/boottest/driver-container/root").mkdir(parents=True, exist_ok=True)
    write_settings(rootfs, settings)
    for unit, text in UNITS.items():
        write_guest(rootfs, f"/{SYSTEM_UNITS}/{unit}", text, 0o644)
    write_guest(rootfs, f"/{SYSTEM_UNITS}/test-report.service.d/60-driver-container.conf", REPORT_DROP_IN, 0o644)
    run(["systemctl", "--quiet", f"--root={rootfs}", "enable", "boottest-driver-container.service",
         "boottest-plugin-gated.service", "boottest-driver-scenario.service"], log=log)


def write_settings(rootfs: Path, settings: DriverSettings) -> None:
    """The driver's delays, stop mode, restarts, wait limit and watcher unit; ``/etc/migbake/managed`` or not."""
    for name, value in (("delays", " ".join(map(str, settings.delays_s))), ("mode", settings.mode),
                        ("wait", str(settings.wait_s)), ("watch-unit", settings.watch_unit)):
        write_guest(rootfs, f"{CONF}/{name}", value + "\n", 0o644)
    for boot, modes in settings.restarts:
        write_guest(rootfs, f"{CONF}/restarts-{boot}", " ".join(modes) + "\n", 0o644)
    if not settings.managed:
        (rootfs / MANAGED.lstrip("/")).unlink(missing_ok=True)
