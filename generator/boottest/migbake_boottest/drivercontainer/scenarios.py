"""The driver-container scenarios of the boot test: what each boots, and preparing its image.

A ``driver: container`` profile (restore.hold: gpu-plugins) boots with NVIDIA's real mig-parted over the
simulated GPU, the simulated driver container and the stub plugins (``drivercontainer.guest``); migbake's
watcher restores the layout when the driver comes up. By name only, the Packer path only:

- ``driver-container``: two boots with different driver delays (20 s, then 3 s); the second also restarts
  the driver twice, unloading its modules and then userspace only, so one boot sequence carries the claims of
  ``driver-restart`` and ``driver-restart-userspace`` too;
- ``driver-container-fail``: apply fails (the simulated GPU is in use): one boot;
- ``driver-restart``, ``driver-restart-userspace``: one boot with one restart of that kind;
- ``cpu-node``: no ``/etc/migbake/managed`` (a node migbake does not manage): one boot.
Every boot also tries NVIDIA's mig-parted in the driver's exposed root without and with the host's /sys
(claim ``fallback-binds-sys``), the reason the watcher's fallback binds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from migbake_boottest.drivercontainer import guest
from migbake_boottest.drivercontainer.kmod import build_modules
from migbake_boottest.hostrun import Log, no_log
from migbake_boottest.scenarios.scenario import Scenario
from migbake_boottest.simgpu.guest import set_knob

DRIVER_CONTAINER: Final = "driver-container"
FAIL: Final = "driver-container-fail"
RESTART: Final = "driver-restart"
RESTART_USERSPACE: Final = "driver-restart-userspace"
CPU_NODE: Final = "cpu-node"
SCENARIOS: tuple[Scenario, ...] = (DRIVER_CONTAINER, FAIL, RESTART, RESTART_USERSPACE, CPU_NODE)
WATCH_UNIT = "rootfs/etc/systemd/system/migbake-driver-watch.service"  # restore.unit's default with a container
WATCH_SCRIPT = "/etc/nvidia-mig/driver-watch.sh"


def watch_unit(out_dir: Path) -> str:
    """The output's watcher unit (``rootfs/etc/systemd/system/NAME``): the one that runs driver-watch.sh."""
    units = sorted((out_dir / WATCH_UNIT).parent.glob("*.service"))
    found = [u for u in units if WATCH_SCRIPT in u.read_text()]
    return str(found[0].relative_to(out_dir)) if found else WATCH_UNIT


@dataclass(frozen=True)
class Plan:
    """What a scenario boots: the driver's settings and how many boots."""

    settings: guest.DriverSettings
    boots: int


PLANS: dict[str, Plan] = {
    DRIVER_CONTAINER: Plan(guest.DriverSettings(delays_s=(20, 3), restarts=((2, ("unload", "userspace")),)), 2),
    FAIL: Plan(guest.DriverSettings(delays_s=(3,), wait_s=150), 1),  # stops waiting once labelled failed
    RESTART: Plan(guest.DriverSettings(delays_s=(3,), restarts=((1, ("unload",)),)), 1),
    RESTART_USERSPACE: Plan(guest.DriverSettings(delays_s=(3,), restarts=((1, ("userspace",)),)), 1),
    CPU_NODE: Plan(guest.DriverSettings(delays_s=(3,), wait_s=90, managed=False), 1),
}


def boots_for(scenario: str) -> int:
    """How many boots ``scenario`` takes."""
    return PLANS[scenario].boots


def prepare_image(rootfs: Path, scenario: str, out_dir: Path, *, kernel_package: str, kernel_cache: Path,
                  nvidia_smi: str, watch_unit: str, log: Log = no_log) -> None:
    """Install the simulated driver container and the stub plugins for ``scenario`` into ``rootfs``."""
    modules = build_modules(kernel_package, kernel_cache, log=log)
    settings = PLANS[scenario].settings
    settings = guest.DriverSettings(settings.delays_s, settings.mode, settings.restarts, settings.wait_s,
                                    settings.managed, watch_unit)
    guest.install(rootfs, modules=modules, step=guest.wait_step(out_dir), settings=settings,
                  nvidia_smi=nvidia_smi, log=log)
    if scenario == FAIL:
        set_knob(rootfs, "in-use")  # the simulated GPU refuses the change: mig-parted's apply fails


def after_delivery(rootfs: Path, scenario: str) -> None:
    """cpu-node: the delivery wrote ``/etc/migbake/managed``; a node that is not ours lacks it."""
    if scenario == CPU_NODE:
        (rootfs / guest.MANAGED.lstrip("/")).unlink(missing_ok=True)
