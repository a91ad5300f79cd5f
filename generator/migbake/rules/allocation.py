"""Rules on ``kubernetes.allocation``: what static MIG (``dra``) and DynamicMIG (``dra-dynamic``) ask of a layout.

Facts from NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, docs/dra.md cites each):
- its kubelet plugin discovers MIG devices once, at start, and a GPU with MIG on and no instances is
  published neither as a GPU nor as any slice ("Physical GPU gpu-N has MIG mode enabled but no configured
  MIG devices", cmd/gpu-kubelet-plugin/nvlib.go@v25.12.0 l.280-301): under ``dra`` that strands the GPU;
- with DynamicMIG the plugin destroys, at start, every MIG device it did not create
  (``DestroyUnknownMIGDevices``, cmd/gpu-kubelet-plugin/device_state.go@main l.400-485): under
  ``dra-dynamic`` a layout would be created at every boot and destroyed moments later;
- the device plugin's MIG strategy (and the nvidia.com/mig-<profile> resources it names) plays no part;
- the plugin knows only the MIG profiles whose compute instance fills its GPU instance: it builds its profile
  list with ``if migProfile.GetInfo().G != migProfile.GetInfo().C { continue }`` (nvlib.go@v25.12.0 l.533,
  v25.8.1 l.258, v0.4.0 l.585), and a MIG device of no listed profile fails its discovery ("error getting
  profile info for MIG device", l.708, then "error discovering MIG devices for GPU", l.271), at start
  (device_state.go@v25.12.0 l.84): under ``dra`` a compute-instance layout is refused;
- a device is named by a DNS label (resource.k8s.io/v1 ``Device.Name``, vendor/k8s.io/api/resource/v1/
  types.go@v25.12.0 l.259-264) that holds the GPU-instance profile id: a profile the catalog knows no id of,
  or whose name would not be a DNS label, is refused under ``dra``;
- the restore's placement check compares the placements with migbake's own model of NVIDIA's undocumented
  choice (gpu/driverplacement.py, docs/dra.md): ``restore.placements: strict`` is a warning that says so.
"""

from __future__ import annotations

from collections.abc import Iterator

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.document.patterns import RELEASE_VERSION
from migbake.gpu.catalog import Catalog, GpuModel
from migbake.kubernetes.dra import DNS_LABEL, canonical_profile, naming
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.rules.layouts import layout_entries, model_of


def allocation_of(data: object) -> str:
    """``kubernetes.allocation`` of the raw profile (``device-plugin`` when unset or not a string)."""
    value = as_mapping(as_mapping(data).get("kubernetes")).get("allocation", "device-plugin")
    return value if isinstance(value, str) else "device-plugin"


@rule("dra-stranded-gpu", "error",
      "allocation dra: a MIG GPU with no instances (the DRA driver publishes nothing of it)")
@rule("dra-dynamic-layout", "error",
      "kubernetes.allocation dra-dynamic with a layout (DynamicMIG destroys it at start)")
@rule("dra-device-plugin-setting", "warning",
      "a device-plugin setting (mig_strategy) under a DRA allocation: it does not apply")
@rule("dra-compute-instance", "error",
      "allocation dra: a compute-instance profile (the DRA driver knows whole GIs only)")
@rule("dra-device-name", "error",
      "allocation dra: a profile whose device name cannot be told (no GI id) or is no DNS label")
def rule_allocation(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """dra: a MIG GPU needs instances (else it is stranded); dra-dynamic: no layout; neither: no mig_strategy."""
    allocation = allocation_of(data)
    if allocation not in ("dra", "dra-dynamic"):
        return
    for ptr, group in gpu_entries(data):
        if (model := model_of(group, catalog)) is not None and not model.has_mig:
            continue  # rule_no_mig
        mig = as_mapping(group.get("mig"))
        if "layouts" in mig:  # named layouts: each judged as a layout (an empty one: rules.layoutnames)
            if allocation == "dra" and model is not None and mig.get("enabled", True) is True:
                yield from _dra_layout(loaded, ptr, group, model)
            elif allocation == "dra-dynamic" and mig.get("enabled", True) is True:
                yield loaded.problem(f"{ptr}/mig/layouts", "named layouts under kubernetes.allocation dra-dynamic: "
                                     "the DRA driver's DynamicMIG creates MIG devices per claim and destroys every "
                                     "MIG device it did not create when it starts, so there is no layout to choose; "
                                     "remove the layouts (or use allocation dra for static layouts)",
                                     "dra-dynamic-layout", key=True)
            continue
        layout = mig.get("layout", {})
        if allocation == "dra" and mig.get("enabled", True) is True and isinstance(layout, dict) and not layout:
            yield loaded.problem(f"{ptr}/mig" if "mig" in group else ptr,
                                 "MIG is on with no instances under kubernetes.allocation dra: the DRA driver "
                                 "publishes neither the GPU nor any MIG device of it (the GPU is stranded: "
                                 "'MIG mode enabled but no configured MIG devices'); give a layout, set "
                                 "mig.enabled: false to publish the whole GPU, or use allocation dra-dynamic",
                                 "dra-stranded-gpu")
        if allocation == "dra" and model is not None and mig.get("enabled", True) is True:
            yield from _dra_layout(loaded, ptr, group, model)
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
                             "class mig.nvidia.com", "dra-device-plugin-setting")


def _dra_layout(loaded: LoadedProfile, ptr: str, group: dict[str, object], model: GpuModel) -> Iterator[Problem]:
    """dra: no compute-instance profile; each profile has a GPU-instance profile id and a DNS-label device name."""
    for entry in layout_entries(ptr, group):
        gi, where = entry.gi_name, entry.pointer
        if entry.c is not None and entry.c != entry.g:
            yield loaded.problem(where, f"{entry.name!r} is a compute instance smaller than its GPU instance ({gi}): "
                                 "NVIDIA's DRA driver knows only MIG devices whose compute instance fills the GPU "
                                 "instance, and one it does not know fails its kubelet plugin's device discovery "
                                 "('error getting profile info for MIG device', kubernetes-sigs/dra-driver-nvidia-gpu "
                                 "cmd/gpu-kubelet-plugin/nvlib.go@v25.12.0 l.533, l.708); use the GPU-instance "
                                 f"profile {gi!r} under kubernetes.allocation dra, or the device plugin",
                                 "dra-compute-instance")
            continue
        if (prof := model.profile(gi)) is None:
            continue  # the layout rules name the profile
        if prof.nvidia_smi_id is None:
            yield loaded.problem(where, f"{gi!r} of {model.key}: the catalog has no GPU-instance profile id for it "
                                 "(nvidia-smi mig -lgip's ID; nvidia_smi_gi_profile_id in a catalog file), and the "
                                 "DRA driver's device names hold it: add it to the catalog, or use another "
                                 "allocation", "dra-device-name")
            continue
        start = max((pl.start for pl in prof.placements), default=0)
        name = f"gpu-9999-mig-{canonical_profile(gi)}-{prof.nvidia_smi_id}-{start}"
        if not DNS_LABEL.fullmatch(name):
            yield loaded.problem(where, f"{gi!r} of {model.key}: the DRA driver's device name for it ({name}, with a "
                                 "4-digit device minor) is not a DNS label (lower-case letters, digits and '-', at "
                                 "most 63 characters), which resource.k8s.io/v1 requires of a device name",
                                 "dra-device-name")


@rule("dra-driver-version", "error",
      "kubernetes.dra_driver_version: a release whose device names migbake does not know")
def rule_dra_driver_version(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """kubernetes.dra_driver_version names a release of NVIDIA's DRA driver whose device names migbake knows."""
    version = as_mapping(as_mapping(data).get("kubernetes")).get("dra_driver_version")
    if isinstance(version, str) and RELEASE_VERSION.fullmatch(version) and naming(version) is None:
        yield loaded.problem("/kubernetes/dra_driver_version", f"{version!r}: kubernetes-sigs/dra-driver-nvidia-gpu's "
                             "releases are v25.3.0 to v25.12.x, then v0.4.0 and later (after the move to "
                             "kubernetes-sigs); v0.1 to v0.3 are NVIDIA's older k8s-dra-driver, whose API and device "
                             "names differ", "dra-driver-version")


@rule("placements-without-dra", "warning", "restore.placements without kubernetes.allocation dra: ignored")
@rule("placements-strict-model", "warning", "restore.placements strict: fails on migbake's placement model, not a fact")
def rule_placements(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """restore.placements: only under allocation dra; ``strict`` enforces migbake's model, not a documented fact."""
    restore = as_mapping(as_mapping(data).get("restore"))
    if "placements" in restore and allocation_of(data) != "dra":
        yield loaded.problem("/restore/placements", "restore.placements applies only with kubernetes.allocation "
                             "dra (DRA device names encode each instance's placement); it is ignored here",
                             "placements-without-dra")
    elif restore.get("placements") == "strict":
        yield loaded.problem("/restore/placements", "restore.placements strict fails the restore, and so keeps "
                             "kubelet down, when a GPU instance is not at the placement migbake predicted (migbake "
                             "show): the prediction is migbake's model of where the NVIDIA driver puts an instance "
                             "created without a placement, which NVIDIA does not document (docs/dra.md); a driver "
                             "that places otherwise fails every node of a rollout. Claims that select by profile "
                             "do not depend on it; use warn unless something relies on the device names",
                             "placements-strict-model")


@rule("gate-unused", "warning", "gate: set where kubelet, not the GPU plugins, waits for the layout: ignored")
def rule_gate_unused(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The gate (OUT/kubernetes/gate/) is written only where the GPU plugins wait: a driver container."""
    d = as_mapping(data)
    if "gate" in d and d.get("driver") != "container" and as_mapping(d.get("restore")).get("hold") != "gpu-plugins":
        yield loaded.problem("/gate", "gate applies only where the GPU plugins wait for the layout (driver: "
                             "container, restore.hold gpu-plugins); with a host driver the restore holds kubelet "
                             "and every GPU client, and no admission policy is written: it is ignored here",
                             "gate-unused")
