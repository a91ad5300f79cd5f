"""NVIDIA's DRA driver beside migbake: the MIG device names a node publishes, and the claim templates to ask for one.

Facts (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu; docs/dra.md has them all):
- driver ``gpu.nvidia.com`` (cmd/gpu-kubelet-plugin/main.go@main l.45); MIG devices belong to the device class
  ``mig.nvidia.com`` (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-mig.yaml@main);
- a static MIG device is named ``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>`` since v25.12.0:
  the profile with its dots deleted, lower-cased, every character outside ``[a-z0-9-.]`` made ``-``
  (``+`` too), ``-`` trimmed (``MigSpecTuple.ToCanonicalName``/``toRFC1123Compliant``,
  cmd/gpu-kubelet-plugin/mig.go@v25.12.0 l.104-107; same at v0.4.0, v0.4.1, main); ``<minor>`` is the
  GPU's device minor (``/dev/nvidiaN``), ``<giProfileId>`` the ``ID`` column of ``nvidia-smi mig -lgip``
  (nvlib.go@v25.12.0 l.715-726). Up to v25.8.1 the form was ``gpu-<minor>-mig-<giProfileId>-<start>-<size>``
  (deviceinfo.go@v25.8.1 l.77-79);
- a CEL selector addresses the driver's bare attributes as ``device.attributes['gpu.nvidia.com'].profile``
  (site/content/docs/guides/gpu-allocation/mig.md@main; demo/specs/quickstart/v1/gpu-test4.yaml@v25.12.0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from migbake.document import emitter
from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel
from migbake.gpu.driverplacement import placements_of
from migbake.profile.nodeprofile import GpuGroup, NodeProfile

DRIVER = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
CLAIM_API = "resource.k8s.io/v1"  # Kubernetes 1.34+; docs/dra.md shows resource.k8s.io/v1beta2 for 1.32/1.33
STRANDED_LOG = "has MIG mode enabled but no configured MIG devices"  # nvlib.go@v25.12.0 l.280-301
_NOT_RFC1123 = re.compile(r"[^a-z0-9.-]")


def canonical_profile(profile: str) -> str:
    """The profile as the driver writes it in a device name: ``1g.18gb+me`` -> ``1g18gb-me``."""
    name = _NOT_RFC1123.sub("-", profile.replace(".", "").lower()).strip("-")
    return (name[:-1] if name.endswith(".") else name)[:253]


@dataclass(frozen=True)
class DraDevice:
    """One MIG device the driver will publish for each GPU of an entry: its profile and placement."""

    profile: str
    gi_profile_id: int | None  # None: the catalog does not know the profile's id (the name cannot be told)
    start: int
    size: int

    @property
    def suffix(self) -> str:
        """``mig-3g71gb-9-4``: the device name after ``gpu-<minor>-``."""
        gid = "?" if self.gi_profile_id is None else str(self.gi_profile_id)
        return f"mig-{canonical_profile(self.profile)}-{gid}-{self.start}"

    def name(self, minor: int | str) -> str:
        """The device name on the GPU with device minor ``minor``."""
        return f"gpu-{minor}-{self.suffix}"


@dataclass(frozen=True)
class DraEntry:
    """The MIG devices one ``gpus`` entry publishes per GPU under allocation ``dra``."""

    entry: int
    model: str
    devices: str  # ``all`` or the GPU indices, space-separated
    mig: bool  # MIG on: the GPU is published as these devices, never as gpu-<minor>
    instances: tuple[DraDevice, ...]  # in the order apply creates them


def _devices(group: GpuGroup, model: GpuModel) -> tuple[DraDevice, ...]:
    if not group.mig_enabled:
        return ()
    out = []
    for placed in placements_of(model, group.layout_dict):
        p = model.profile(placed.profile)
        out.append(DraDevice(placed.profile, p.nvidia_smi_id if p else None, placed.start, placed.size))
    return tuple(out)


def dra_entries(profile: NodeProfile) -> tuple[DraEntry, ...]:
    """Per ``gpus`` entry, the MIG devices each of its GPUs publishes (empty for MIG off or other allocations)."""
    if profile.kubernetes.allocation != "dra":
        return ()
    return tuple(DraEntry(i, m.key, "all" if g.devices == "all" else " ".join(map(str, g.devices)),
                          g.mig_enabled, _devices(g, m))
                 for i, (g, m) in enumerate(zip(profile.gpus, profile.models)))


@dataclass(frozen=True)
class DraExpectation:
    """What the GPUs of one ``gpus`` entry publish under ``dra``: preflight's and verify's one expectation."""

    gpus: tuple[int, ...] | None  # the GPUs to check; None: every GPU the node publishes (no gpu_count)
    mig: bool  # MIG on: exactly ``want`` on each GPU; off: the whole GPU ``gpu-<minor>``
    want: tuple[tuple[str, str], ...]  # (profile, device name after ``gpu-<minor>-``), in creation order


def dra_expectations(profile: NodeProfile) -> tuple[DraExpectation, ...]:
    """Per ``gpus`` entry under ``dra``, the GPUs to check and the devices each publishes (() otherwise)."""
    out = []
    for e in dra_entries(profile):
        if e.devices != "all":
            gpus: tuple[int, ...] | None = tuple(int(x) for x in e.devices.split())
        else:
            gpus = None if profile.gpu_count is None else tuple(range(profile.gpu_count))
        out.append(DraExpectation(gpus, e.mig, tuple((d.profile, d.suffix) for d in e.instances)))
    return tuple(out)


def whole_instance_profiles(profile: NodeProfile) -> list[str]:
    """The GPU-instance profiles of every layout (compute-instance forms left out), sorted."""
    names = set()
    for g in profile.gpus:
        for name, _ in (g.layout if g.mig_enabled else ()):
            m = PROFILE_NAME_RE.match(name)
            if m is not None and (m["c"] is None or m["c"] == m["g"]):
                names.add(name)
    return sorted(names)


def selector(profile_name: str) -> str:
    """The CEL expression that matches exactly the MIG devices of ``profile_name`` (a catalog name: no quote)."""
    return f"device.attributes['{DRIVER}'].profile == '{profile_name}'"


def claim_name(profile_name: str, taken: set[str]) -> str:
    """A DNS-label name for the template of ``profile_name`` (``mig-1g-18gb-me``), unique among ``taken``."""
    base = "mig-" + re.sub(r"[^a-z0-9]+", "-", profile_name.lower()).strip("-")
    name = base if base not in taken else base + "-" + ("no-me" if profile_name.endswith("-me") else "2")
    taken.add(name)
    return name


def claim_templates(profile: NodeProfile, api: str = CLAIM_API) -> list[dict[str, Any]]:
    """One ResourceClaimTemplate per GPU-instance profile of the layouts: one device of that profile."""
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for prof in whole_instance_profiles(profile):
        name = claim_name(prof, taken)
        exact = {"deviceClassName": MIG_CLASS, "selectors": [{"cel": {"expression": selector(prof)}}]}
        request: dict[str, Any] = {"name": "mig"}
        if api.endswith("v1beta1"):
            request.update(exact)  # v1beta1: the fields sit on the request itself
        else:
            request["exactly"] = exact
        out.append({"apiVersion": api, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                    "spec": {"spec": {"devices": {"requests": [request]}}}})
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


def dra_report(profile: NodeProfile) -> list[str]:
    """Lines for ``migbake show`` under a DRA allocation: what the driver publishes (dra) or does (dra-dynamic)."""
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
    lines = [f"Kubernetes DRA (kubernetes.allocation: dra): the devices driver {DRIVER} publishes in the node's "
             f"ResourceSlice (device class {MIG_CLASS}); names as v25.12.0 and later write them, <minor> the GPU's "
             "device minor (/dev/nvidiaN, usually its index):"]
    for e in dra_entries(profile):
        if not e.mig:
            for gpu in _gpu_indices(e.devices, profile.gpu_count):
                lines.append(f"  gpu-{gpu} (the whole GPU: MIG off)")
            continue
        for gpu in _gpu_indices(e.devices, profile.gpu_count):
            lines.append(f"  GPU {gpu} ({e.model}): " + ", ".join(d.name(gpu) for d in e.instances))
    if any(d.gi_profile_id is None for e in dra_entries(profile) for d in e.instances):
        lines.append("  ?: the catalog does not know this profile's GPU-instance profile id (nvidia-smi mig -lgip)")
    lines.append("  Placements (the last two numbers: GI profile id, first memory slice) are migbake's prediction of "
                 "where the driver puts each instance (NVIDIA documents no rule); the restore compares them with "
                 "nvidia-smi mig -lgi (restore.placements). Claims that select by profile are unaffected.")
    return lines
