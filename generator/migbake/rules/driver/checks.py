"""Rules on a driver container (``driver: container``): what stays down until the restore, and Ampere's MIG mode."""

from __future__ import annotations

from collections.abc import Iterator

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.rules.layouts import model_of


@rule("restore-hold", "error", "restore.hold does not fit the driver: kubelet with a driver container, or "
      "gpu-plugins with a host driver")
def rule_restore_hold(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """A driver container is a pod that kubelet starts: holding kubelet until MIG is restored would wait forever."""
    doc = as_mapping(data)
    driver = doc.get("driver", "host")
    restore = as_mapping(doc.get("restore"))
    hold = restore.get("hold")
    if driver == "container" and hold == "kubelet":
        yield loaded.problem("/restore/hold", "restore.hold: kubelet with driver: container: the driver container "
                             "is a pod that kubelet starts, so kubelet held until MIG is restored would never "
                             "start; allowed: gpu-plugins (the GPU plugins wait for /run/migbake/mig-ready)",
                             "restore-hold")
    elif driver != "container" and hold == "gpu-plugins":
        yield loaded.problem("/restore/hold", "restore.hold: gpu-plugins with a host driver: the watcher that "
                             "holds the GPU plugins serves a driver container only; allowed: kubelet (the restore "
                             "runs before kubelet), or driver: container", "restore-hold")
    if driver == "container" and doc.get("consumers"):
        yield loaded.problem("/consumers", "consumers with driver: container: the layout is restored only after "
                             "kubelet has started the driver container, so no unit can be ordered after it; "
                             "allowed: no consumers (the GPU plugins wait through restore.hold: gpu-plugins)",
                             "restore-hold")


@rule("driver-container-ampere", "warning", "driver: container on Ampere: MIG mode must be enabled once, out of band")
def rule_driver_container_ampere(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Ampere changes MIG mode only with a GPU reset, which the driver container prevents; the mode survives reboots."""
    if as_mapping(data).get("driver") != "container":
        return
    for ptr, group in gpu_entries(data):
        model = model_of(group, catalog)
        mig = as_mapping(group.get("mig"))
        if model is None or not model.has_mig or not model.mig_mode_persists or mig.get("enabled") is False:
            continue
        yield loaded.problem(ptr, f"{group.get('model')} ({model.generation.capitalize()}) with driver: container: "
                             "a MIG mode change needs a GPU reset, which the driver container's nvidia-persistenced "
                             "prevents; the mode survives reboots, so enable MIG mode once, out of band (nvidia-smi "
                             "-mig 1 with the GPU idle, then a reboot); at boot a GPU whose MIG mode is off fails "
                             "closed, never reset", "driver-container-ampere")
