"""Rules on ``kubernetes.allocation``: what static MIG (``dra``) and DynamicMIG (``dra-dynamic``) ask of a layout.

Facts from NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, docs/dra.md cites each):
- its kubelet plugin discovers MIG devices once, at start, and a GPU with MIG on and no instances is
  published neither as a GPU nor as any slice ("Physical GPU gpu-N has MIG mode enabled but no configured
  MIG devices", cmd/gpu-kubelet-plugin/nvlib.go@v25.12.0 l.280-301): under ``dra`` that strands the GPU;
- with DynamicMIG the plugin destroys, at start, every MIG device it did not create
  (``DestroyUnknownMIGDevices``, cmd/gpu-kubelet-plugin/device_state.go@main l.400-485): under
  ``dra-dynamic`` a layout would be created at every boot and destroyed moments later;
- the device plugin's MIG strategy (and the nvidia.com/mig-<profile> resources it names) plays no part.
"""

from __future__ import annotations

from collections.abc import Iterator

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules.layouts import model_of


def allocation_of(data: object) -> str:
    """``kubernetes.allocation`` of the raw profile (``device-plugin`` when unset or not a string)."""
    value = as_mapping(as_mapping(data).get("kubernetes")).get("allocation", "device-plugin")
    return value if isinstance(value, str) else "device-plugin"


def rule_allocation(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """dra: a MIG GPU needs instances (else it is stranded); dra-dynamic: no layout; neither: no mig_strategy."""
    allocation = allocation_of(data)
    if allocation not in ("dra", "dra-dynamic"):
        return
    for ptr, group in gpu_entries(data):
        if (model := model_of(group, catalog)) is not None and not model.has_mig:
            continue  # rule_no_mig
        mig = as_mapping(group.get("mig"))
        layout = mig.get("layout", {})
        if allocation == "dra" and mig.get("enabled", True) is True and isinstance(layout, dict) and not layout:
            yield loaded.problem(f"{ptr}/mig" if "mig" in group else ptr,
                                 "MIG is on with no instances under kubernetes.allocation dra: the DRA driver "
                                 "publishes neither the GPU nor any MIG device of it (the GPU is stranded: "
                                 "'MIG mode enabled but no configured MIG devices'); give a layout, set "
                                 "mig.enabled: false to publish the whole GPU, or use allocation dra-dynamic",
                                 "dra-stranded-gpu")
        if allocation == "dra-dynamic" and isinstance(layout, dict) and layout:
            yield loaded.problem(f"{ptr}/mig/layout", "a layout under kubernetes.allocation dra-dynamic: the DRA "
                                 "driver's DynamicMIG creates MIG devices per claim and destroys every MIG device "
                                 "it did not create when it starts; remove the layout (or use allocation dra for "
                                 "a static layout)", "dra-dynamic-layout")
    strategy = as_mapping(as_mapping(data).get("kubernetes"))
    if "mig_strategy" in strategy:
        yield loaded.problem("/kubernetes/mig_strategy", f"mig_strategy does not apply under kubernetes.allocation "
                             f"{allocation}: the device plugin's strategy and its nvidia.com/mig-<profile> "
                             "resources are not used; the DRA driver publishes MIG devices under the device "
                             "class mig.nvidia.com", "dra-device-plugin-setting", severity="warning")


def rule_placements(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """restore.placements means something only under allocation dra (the device names encode placements)."""
    restore = as_mapping(as_mapping(data).get("restore"))
    if "placements" in restore and allocation_of(data) != "dra":
        yield loaded.problem("/restore/placements", "restore.placements applies only with kubernetes.allocation "
                             "dra (DRA device names encode each instance's placement); it is ignored here",
                             "placements-without-dra", severity="warning")
