"""Rules about the GPU an entry names: a GPU without MIG keeps MIG off, an entry's exact PCI ids, CDMM on Grace.

Split from ``rules.general`` because they read the catalog's PCI ids, its list of GPUs without MIG and
its Grace systems rather than MIG layouts.
"""

from __future__ import annotations

from collections.abc import Iterator

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.gpu.catalog import Catalog, canonical_pci_id
from migbake.problems import Problem
from migbake.rules.declare import rule


@rule("no-mig", "error", "a GPU without MIG (L40S, L4, A10, T4) that does not say mig: {enabled: false}")
def rule_no_mig(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """A GPU without MIG (a display GPU, an L40S, ...) is listed only with ``mig: {enabled: false}``."""
    for ptr, group in gpu_entries(data):
        model = group.get("model")
        gpu = catalog.find_gpu(model) if isinstance(model, str) else None
        if gpu is None or gpu.has_mig:
            continue
        mig = group.get("mig")
        if not isinstance(mig, dict):
            if "mig" not in group:
                yield loaded.problem(ptr, f"{gpu.short_name} ({gpu.key}) has no MIG: list it with mig: "
                                     "{enabled: false} (mig-parted then keeps MIG off on it)", "no-mig")
            continue  # the schema reports a mig that is not a mapping
        layout = mig.get("layout")
        if isinstance(layout, dict) and layout:
            yield loaded.problem(f"{ptr}/mig/layout", f"{gpu.short_name} ({gpu.key}) has no MIG, so no MIG "
                                 "layout: remove the layout and write mig: {enabled: false}", "no-mig")
        elif mig.get("enabled", True) is not False:
            where = f"{ptr}/mig/enabled" if "enabled" in mig else f"{ptr}/mig"
            yield loaded.problem(where, f"{gpu.short_name} ({gpu.key}) has no MIG: write mig: "
                                 "{enabled: false}", "no-mig")


@rule("pci-device-id", "error", "pci_device_ids not of the entry's own GPU model")
@rule("pci-ids-unfiltered", "error", "pci_device_ids on a config without a device-filter that would carry them")
def rule_pci_device_ids(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """An entry's ``pci_device_ids`` are distinct PCI ids of its own model, and reach a device-filter."""
    never = as_mapping(data).get("device_filter") == "never"
    for ptr, group in gpu_entries(data):
        ids = group.get("pci_device_ids")
        model = group.get("model")
        gpu = catalog.find_gpu(model) if isinstance(model, str) else None
        if not isinstance(ids, list):
            continue  # absent, or the schema reports it
        if never and ids:
            yield loaded.problem(f"{ptr}/pci_device_ids", "device_filter: never writes no device-filter, so "
                                 "these PCI ids would match nothing: remove them or set device_filter: always",
                                 "pci-ids-unfiltered")
        seen: dict[str, int] = {}
        for j, raw in enumerate(ids):
            if not isinstance(raw, str) or gpu is None:
                continue  # the schema or rule_known_model reports it
            pci = canonical_pci_id(raw)
            here = f"{ptr}/pci_device_ids/{j}"
            if pci not in gpu.pci_device_ids:
                yield loaded.problem(here, f"{raw!r} is not a PCI device id of {gpu.display_name} ({gpu.key}); "
                                     f"allowed: {', '.join(gpu.pci_device_ids)}", "pci-device-id")
            elif pci in seen:
                yield loaded.problem(here, f"{raw!r} repeats {ptr}/pci_device_ids/{seen[pci]}",
                                     "pci-device-id")
            else:
                seen[pci] = j


# What a node shows and what the warning asks to check (node/drivergates.py holds the sources): MIG does not
# work with CDMM, which the GPU Operator's driver container turns on from 580.65.06 on Grace-based systems
# (NVIDIA/cloud-native-docs:gpu-operator/release-notes.rst, 25.3.2 known issues); the nvidia module's
# NVreg_CoherentGPUMemoryMode, printed in /proc/driver/nvidia/params (NVIDIA/open-gpu-kernel-modules:
# kernel-open/nvidia/nv-reg.h and nv-procfs.c@580.65.06).
CDMM_CHECK = ("on the node, /proc/driver/nvidia/params must not show CoherentGPUMemoryMode: \"driver\" (CDMM; "
              "\"numa\" or unset is not: the nvidia module's parameter NVreg_CoherentGPUMemoryMode); then state "
              "restore.cdmm: disabled")


@rule("cdmm-unknown", "warning", "MIG on a Grace model (GH200, GB200, GB300) without restore.cdmm: disabled")
def rule_cdmm_unknown(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """On a Grace-based model MIG needs CDMM off: a profile with MIG on one says it checked (restore.cdmm)."""
    if as_mapping(as_mapping(data).get("restore")).get("cdmm") == "disabled":
        return
    for ptr, group in gpu_entries(data):
        model = group.get("model")
        gpu = catalog.find_gpu(model) if isinstance(model, str) else None
        if gpu is None or not gpu.grace_system or as_mapping(group.get("mig")).get("enabled", True) is False:
            continue
        yield loaded.problem(f"{ptr}/model", f"{gpu.short_name} ({gpu.key}) is in a Grace system, where MIG does "
                             "not work with CDMM (coherent driver memory management), which the GPU Operator's "
                             f"driver container turns on from driver 580.65.06; {CDMM_CHECK}", "cdmm-unknown")
