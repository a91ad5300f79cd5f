"""NVIDIA's DRA driver beside migbake: the MIG device names a node publishes, and the claim templates to ask for one.

Facts (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu; docs/dra.md has them all):
- driver ``gpu.nvidia.com`` (cmd/gpu-kubelet-plugin/main.go@main l.45); MIG devices belong to the device class
  ``mig.nvidia.com`` (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-mig.yaml@main);
- a static MIG device is named ``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>`` since v25.12.0:
  the profile with its dots deleted, lower-cased, every character outside ``[a-z0-9-.]`` made ``-``
  (``+`` too), ``-`` trimmed (``MigSpecTuple.ToCanonicalName``/``toRFC1123Compliant``,
  cmd/gpu-kubelet-plugin/mig.go@v25.12.0 l.104-107; same at v0.4.0, v0.4.1, main); ``<minor>`` is the
  GPU's device minor (``/dev/nvidiaN``), ``<giProfileId>`` the ``ID`` column of ``nvidia-smi mig -lgip``
  (nvlib.go@v25.12.0 l.715-726). From v25.3.0 up to v25.8.1 the form was
  ``gpu-<minor>-mig-<giProfileId>-<start>-<size>`` (deviceinfo.go@v25.8.1 l.77-79, the same at v25.3.0 and
  v25.8.0): ``kubernetes.dra_driver_version`` says which (``naming``); a device name is a DNS label
  (resource.k8s.io/v1 ``Device.Name``, vendor/k8s.io/api/resource/v1/types.go@v25.12.0 l.259-264);
- the kubelet plugin knows only MIG profiles whose compute instance fills its GPU instance (``G == C``,
  nvlib.go@v25.12.0 l.533, v25.8.1 l.258): a compute-instance layout is refused (``dra-compute-instance``);
- a GPU with MIG off is the device ``gpu-<minor>`` of the device class ``gpu.nvidia.com``
  (deviceinfo.go@v25.12.0 l.113-115; deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml@main),
  its attribute ``productName`` NVML's device name (nvlib.go@v25.12.0 l.445; the claim of
  demo/specs/quickstart/v1/gpu-test1.yaml@v25.12.0 asks for the class alone);
- a CEL selector addresses the driver's bare attributes as ``device.attributes['gpu.nvidia.com'].profile``
  (site/content/docs/guides/gpu-allocation/mig.md@main; demo/specs/quickstart/v1/gpu-test4.yaml@v25.12.0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from migbake.document import emitter
from migbake.document.patterns import RELEASE_VERSION
from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel
from migbake.gpu.driverplacement import EntryPlacements, entry_placements
from migbake.gpu.placement import PlacedInstance
from migbake.profile.nodeprofile import GpuGroup, NodeProfile

DRIVER = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"  # the device class of whole GPUs (deviceclass-gpu.yaml@main)
CLAIM_API = "resource.k8s.io/v1"  # Kubernetes 1.34+; docs/dra.md shows resource.k8s.io/v1beta2 for 1.32/1.33
STRANDED_LOG = "has MIG mode enabled but no configured MIG devices"  # nvlib.go@v25.12.0 l.280-301
_NOT_RFC1123 = re.compile(r"[^a-z0-9.-]")
DNS_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")  # RFC 1123 label: what Device.Name must be
Naming = Literal["v25.12", "v25.8"]
NAMINGS: dict[str, str] = {"v25.12": "gpu-<minor>-mig-<profile>-<giProfileId>-<start> (DRA driver v25.12.0 and later)",
                           "v25.8": "gpu-<minor>-mig-<giProfileId>-<start>-<size> (DRA driver v25.3.0 to v25.8.1)"}


def naming(version: str) -> Naming | None:
    """The device naming of DRA driver ``version`` ("" the newest); None for a version before v25.3.0's line.

    v25.3.0 to v25.8.x: ``v25.8``; v25.12.0 and later, and kubernetes-sigs' restart at v0.4.0 and after:
    ``v25.12``; v0.1 to v0.3 are NVIDIA/k8s-dra-driver's older releases (another API): None.
    """
    if not version:
        return "v25.12"
    m = RELEASE_VERSION.fullmatch(version)
    if m is None:
        return None
    major, minor = int(m[1]), int(m[2])
    if major == 25:
        return "v25.8" if minor < 12 else "v25.12"
    if major == 0:
        return "v25.12" if minor >= 4 else None
    return "v25.12"


def canonical_profile(profile: str) -> str:
    """The profile as the driver writes it in a device name: ``1g.18gb+me`` -> ``1g18gb-me``."""
    name = _NOT_RFC1123.sub("-", profile.replace(".", "").lower()).strip("-")
    return (name[:-1] if name.endswith(".") else name)[:253]


@dataclass(frozen=True)
class DraDevice:
    """One MIG device the driver will publish for each GPU of an entry: its profile and placement."""

    profile: str
    gi_profile_id: int  # nvidia-smi mig -lgip's ID (the rule dra-device-name refuses a profile without one)
    start: int
    size: int

    @property
    def suffix(self) -> str:
        """``mig-3g71gb-9-4``: the device name after ``gpu-<minor>-`` (v25.12.0 and later)."""
        return f"mig-{canonical_profile(self.profile)}-{self.gi_profile_id}-{self.start}"

    @property
    def legacy_suffix(self) -> str:
        """``mig-9-4-4``: the device name after ``gpu-<minor>-`` up to v25.8.1 (id, start, size)."""
        return f"mig-{self.gi_profile_id}-{self.start}-{self.size}"

    def name(self, minor: int | str, form: Naming = "v25.12") -> str:
        """The device name on the GPU with device minor ``minor``, in the driver's naming ``form``."""
        return f"gpu-{minor}-{self.suffix if form == 'v25.12' else self.legacy_suffix}"


@dataclass(frozen=True)
class DraEntry:
    """The MIG devices one ``gpus`` entry publishes per GPU under allocation ``dra``."""

    entry: int
    model: str
    devices: str  # ``all`` or the GPU indices, space-separated
    mig: bool  # MIG on: the GPU is published as these devices, never as gpu-<minor>
    instances: tuple[DraDevice, ...]  # in the order apply creates them


# named layouts: per layout name, per gpus entry, the MIG devices each GPU publishes under that name
NamedDevices = tuple[tuple[str, tuple[tuple[DraDevice, ...], ...]], ...]


def placements(profile: NodeProfile) -> EntryPlacements:
    """Per ``gpus`` entry, where apply puts its instances (one prediction per entry; the plan keeps it)."""
    return entry_placements((g.mig_enabled, m, g.layout_dict) for g, m in zip(profile.gpus, profile.models))


def _devices(group: GpuGroup, model: GpuModel, placed: tuple[PlacedInstance, ...]) -> tuple[DraDevice, ...]:
    if not group.mig_enabled:
        return ()
    out = []
    for instance in placed:
        p = model.profile(instance.profile)
        if p is None or p.nvidia_smi_id is None:  # the rule dra-device-name refuses such a profile
            raise ValueError(f"{model.key} {instance.profile}: no GPU-instance profile id")
        out.append(DraDevice(instance.profile, p.nvidia_smi_id, instance.start, instance.size))
    return tuple(out)


def dra_entries(profile: NodeProfile, placed: EntryPlacements) -> tuple[DraEntry, ...]:
    """Per ``gpus`` entry, the MIG devices each of its GPUs publishes (empty for MIG off or other allocations),
    from the entries' placements (``placed``: the render plan's, predicted once by ``placements``)."""
    if profile.kubernetes.allocation != "dra":
        return ()
    return tuple(DraEntry(i, m.key, "all" if g.devices == "all" else " ".join(map(str, g.devices)),
                          g.mig_enabled, _devices(g, m, where))
                 for i, (g, m, where) in enumerate(zip(profile.gpus, profile.models, placed)))


@dataclass(frozen=True)
class DraExpectation:
    """What the GPUs of one ``gpus`` entry publish under ``dra``: preflight's and verify's one expectation."""

    gpus: tuple[int, ...] | None  # the GPUs to check; None: every GPU the node publishes (no gpu_count)
    mig: bool  # MIG on: exactly ``want`` on each GPU; off: the whole GPU ``gpu-<minor>``
    want: tuple[DraDevice, ...]  # in creation order
    # devices: all in a profile of several models: only the GPUs whose productName attribute (NVML's device
    # name, nvlib.go@v25.12.0 l.445) is one of these belong to the entry; () for every GPU of ``gpus``
    products: tuple[str, ...] = ()
    model: str = ""


def dra_expectations(profile: NodeProfile, entries: tuple[DraEntry, ...]) -> tuple[DraExpectation, ...]:
    """Per ``gpus`` entry under ``dra``, the GPUs to check and the devices each publishes (() otherwise), from
    ``entries`` (``dra_entries``: the render plan's)."""
    out = []
    several = len({m.key for m in profile.models}) > 1
    for e, m in zip(entries, profile.models):
        if e.devices != "all":
            gpus: tuple[int, ...] | None = tuple(int(x) for x in e.devices.split())
        else:
            gpus = None if profile.gpu_count is None else tuple(range(profile.gpu_count))
        products = (m.nvidia_smi_names or m.names) if several and e.devices == "all" else ()
        out.append(DraExpectation(gpus, e.mig, e.instances, tuple(products), m.key))
    return tuple(out)


def whole_instance_profiles(profile: NodeProfile) -> list[str]:
    """The GPU-instance profiles of every layout, of every name with named layouts (the union: a claim template
    serves the pods of every pool), compute-instance forms left out; sorted."""
    names = set()
    for g in (g for g in profile.gpus if g.mig_enabled):
        for layout in [lay for _, lay in g.layouts] or [g.layout]:
            for name, _ in layout:
                m = PROFILE_NAME_RE.match(name)
                if m is not None and (m["c"] is None or m["c"] == m["g"]):
                    names.add(name)
    return sorted(names)


def selector(profile_name: str) -> str:
    """The CEL expression that matches exactly the MIG devices of ``profile_name`` (a catalog name: no quote)."""
    return f"device.attributes['{DRIVER}'].profile == '{profile_name}'"


def cel_string(text: str) -> str:
    """``text`` as a single-quoted CEL string literal (backslash and quote escaped: cel-spec's string escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def whole_gpu_models(profile: NodeProfile) -> list[GpuModel]:
    """The MIG-capable models of entries with MIG off (published whole, as ``gpu-<minor>``), in profile order."""
    out: list[GpuModel] = []
    for g, m in zip(profile.gpus, profile.models):
        if not g.mig_enabled and m not in out:
            out.append(m)
    return out


def gpu_selector(model: GpuModel) -> str:
    """The CEL expression that matches whole GPUs of ``model`` (its NVML product names), never a MIG device."""
    names = ", ".join(cel_string(n) for n in (model.nvidia_smi_names or model.names))
    return f"device.attributes['{DRIVER}'].type == 'gpu' && device.attributes['{DRIVER}'].productName in [{names}]"


def claim_name(profile_name: str, taken: set[str]) -> str:
    """A DNS-label name for the template of ``profile_name`` (``mig-1g-18gb-me``), unique among ``taken``."""
    base = "mig-" + re.sub(r"[^a-z0-9]+", "-", profile_name.lower()).strip("-")
    name = base if base not in taken else base + "-" + ("no-me" if profile_name.endswith("-me") else "2")
    taken.add(name)
    return name


def _template(api: str, name: str, request_name: str, device_class: str, expression: str) -> dict[str, Any]:
    exact = {"deviceClassName": device_class, "selectors": [{"cel": {"expression": expression}}]}
    request: dict[str, Any] = {"name": request_name}
    if api.endswith("v1beta1"):
        request.update(exact)  # v1beta1: the fields sit on the request itself
    else:
        request["exactly"] = exact
    return {"apiVersion": api, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [request]}}}}


def claim_templates(profile: NodeProfile, api: str = CLAIM_API) -> list[dict[str, Any]]:
    """One ResourceClaimTemplate per GPU-instance profile of the layouts (one device of that profile), and one
    per model of the entries with MIG off (one whole GPU of that model, device class ``gpu.nvidia.com``)."""
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for prof in whole_instance_profiles(profile):
        out.append(_template(api, claim_name(prof, taken), "mig", MIG_CLASS, selector(prof)))
    for model in whole_gpu_models(profile):
        name = "gpu-" + re.sub(r"[^a-z0-9]+", "-", model.key.lower()).strip("-")
        out.append(_template(api, name, "gpu", GPU_CLASS, gpu_selector(model)))
    return out


def claim_templates_yaml(profile: NodeProfile) -> str:
    """The templates as YAML documents (``---`` before each), or "" when the profile has none."""
    if profile.kubernetes.allocation != "dra":
        return ""
    return "".join("---\n" + emitter.dump(t, width=1000) for t in claim_templates(profile))


def advertised(profile: NodeProfile) -> str:
    """One sentence for the Ansible activation: what the node advertises to Kubernetes under its allocation."""
    allocation = profile.kubernetes.allocation
    if allocation == "dra":
        return (f"Kubernetes (kubernetes.allocation: dra): no device-plugin resources; NVIDIA's DRA driver ({DRIVER}) "
                f"publishes the layout's MIG devices in the node's ResourceSlice (device class {MIG_CLASS}, the "
                "names migbake show lists) when its kubelet plugin starts; verify reads them where kubectl can:")
    if allocation == "dra-dynamic":
        return ("Kubernetes (kubernetes.allocation: dra-dynamic): the restore created no MIG device; NVIDIA's DRA "
                f"driver ({DRIVER}, DynamicMIG) creates them per claim and must find no static one; verify reads "
                "the ResourceSlices where kubectl can:")
    return ("Kubernetes (kubernetes.allocation: device-plugin): NVIDIA's device plugin advertises the layout as "
            f"nvidia.com/* extended resources (MIG strategy {profile.kubernetes.mig_strategy}); verify compares "
            "the node's allocatable with the layout where kubectl can:")


def _gpu_indices(devices: str, count: int | None) -> list[str]:
    if devices != "all":
        return devices.split()
    return [str(i) for i in range(count)] if count else ["<minor>"]


def dra_report(profile: NodeProfile, entries: tuple[DraEntry, ...]) -> list[str]:
    """Lines for ``migbake show`` under a DRA allocation: what the driver publishes (dra) or does (dra-dynamic);
    ``entries``: the render plan's (``RenderPlan.dra.entries``)."""
    if profile.kubernetes.allocation == "dra-dynamic":
        lines = ["Kubernetes DRA (kubernetes.allocation: dra-dynamic): the DRA driver's DynamicMIG creates MIG "
                 "devices per claim; the restore creates none."]
        for i, (g, m) in enumerate(zip(profile.gpus, profile.models)):
            state = ("MIG on, no instances (Ampere: MIG mode changes need a GPU reset, so it is on before the "
                     "driver starts)" if g.mig_enabled else
                     "MIG off (the driver turns MIG on per claim)" if m.has_mig and m.mig_mode_persists is False
                     else "MIG off")
            lines.append(f"  /gpus/{i} ({m.key}): {state}")
        lines.append("  The driver needs featureGates.DynamicMIG=true (and on Kubernetes 1.34/1.35 the "
                     "DRAPartitionableDevices gate): docs/dra.md.")
        return lines
    form = naming(profile.kubernetes.dra_driver_version) or "v25.12"
    lines = [f"Kubernetes DRA (kubernetes.allocation: dra): the devices driver {DRIVER} publishes in the node's "
             f"ResourceSlice (device class {MIG_CLASS}); names {NAMINGS[form]} (kubernetes.dra_driver_version), "
             "<minor> the GPU's device minor (/dev/nvidiaN, usually its index):"]
    for e in entries:
        if not e.mig:
            for gpu in _gpu_indices(e.devices, profile.gpu_count):
                lines.append(f"  gpu-{gpu} (the whole GPU: MIG off)")
            continue
        for gpu in _gpu_indices(e.devices, profile.gpu_count):
            lines.append(f"  GPU {gpu} ({e.model}): " + ", ".join(d.name(gpu, form) for d in e.instances))
    numbers = "GI profile id, first memory slice" if form == "v25.12" else "GI profile id, first memory slice, size"
    lines.append(f"  Placements (the last numbers: {numbers}) are migbake's prediction of "
                 "where the driver puts each instance (NVIDIA documents no rule); the restore compares them with "
                 "nvidia-smi mig -lgi (restore.placements). Claims that select by profile are unaffected.")
    return lines
