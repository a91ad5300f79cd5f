"""The typed node profile: frozen dataclasses built from data the schema has accepted, defaults filled in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from migbake.gpu.catalog import Catalog, GpuModel, canonical_pci_id, load_catalog

OnFailure = Literal["block-kubelet", "continue"]
ManagerAction = Literal["disable", "mask"]
Driver = Literal["host", "container"]
DeviceFilter = Literal["auto", "always", "never"]
MigStrategy = Literal["single", "mixed"]
OnResetRequired = Literal["reboot-once", "fail"]
CdiRefresh = Literal["auto", "never"]

# NVIDIA's known GPU clients: services that hold the GPU, so a MIG mode change or instance creation
# fails while they run. The restore unit is ordered Before= all of them (ordering only: harmless where
# absent). Sources: mig-parted deployments/systemd/hooks.sh (driver_services: nvsm, nvidia-dcgm;
# k8s_services: dcgm-exporter) and the GPU Operator's default-gpu-clients ConfigMap (clients.yaml).
GPU_CLIENTS = ("nvsm.service", "nvsm-mqtt.service", "nvsm-core.service", "nvsm-api-gateway.service",
               "nvsm-notifier.service", "nv_peer_mem.service", "nvidia-dcgm.service", "dcgm.service",
               "dcgm-exporter.service")
# NVIDIA's own unit is Before= and WantedBy= this target; DGX services are ordered after it.
GPU_RESET_TARGET = "nvidia-gpu-reset.target"


@dataclass(frozen=True)
class GpuGroup:
    """One entry of ``gpus``: identical GPUs sharing one MIG layout."""

    model: str
    devices: Literal["all"] | tuple[int, ...]
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]
    gpu: GpuModel  # the catalog model ``model`` names, resolved once when the profile is built
    pci_device_ids: tuple[str, ...] = ()  # exactly the ids its device-filter names (empty: all of the model's)

    @property
    def layout_dict(self) -> dict[str, int]:
        """The layout as a mapping, in the profile's order."""
        return dict(self.layout)


@dataclass(frozen=True)
class Kubelet:
    """Whether kubelet runs on the node, and its unit."""

    present: bool = True
    unit: str = "kubelet.service"


@dataclass(frozen=True)
class Restore:
    """The restore unit and the config it applies."""

    unit: str = "nvidia-mig-restore.service"
    config_path: str = "/etc/nvidia-mig/config.yaml"
    config_name: str = "current"
    timeout_seconds: int = 480
    on_failure: OnFailure = "block-kubelet"
    driver_wait_seconds: int = 120
    on_reset_required: OnResetRequired = "reboot-once"
    cdi_refresh: CdiRefresh = "auto"
    metrics_textfile: str = ""  # empty: no metrics file


@dataclass(frozen=True)
class Tools:
    """Paths of the NVIDIA tools on the node."""

    nvidia_smi: str = "/usr/bin/nvidia-smi"
    nvidia_mig_parted: str = "/usr/bin/nvidia-mig-parted"


@dataclass(frozen=True)
class ConflictingManager:
    """The packaged MIG manager that must not also run at boot."""

    unit: str = "nvidia-mig-manager.service"
    action: ManagerAction = "mask"


@dataclass(frozen=True)
class Kubernetes:
    """How the node's device plugin advertises MIG devices (its MIG strategy)."""

    mig_strategy: MigStrategy = "mixed"
    node_labels: tuple[tuple[str, str], ...] = ()
    kubelet_args_env: str = ""  # the variable kubelet's ExecStart expands for extra arguments


@dataclass(frozen=True)
class Consumer:
    """A service that uses the GPUs and must start after the restore (kubelet is the built-in one)."""

    unit: str
    fail_closed: bool = True

    @property
    def drop_in_dir(self) -> str:
        """Its drop-in folder, relative to /etc/systemd/system."""
        return f"{self.unit}.d"


@dataclass(frozen=True)
class NodeProfile:
    """A whole node profile, version 1."""

    name: str
    gpus: tuple[GpuGroup, ...]
    description: str = ""
    gpu_count: int | None = None
    kubelet: Kubelet = Kubelet()
    restore: Restore = Restore()
    tools: Tools = Tools()
    conflicting_manager: ConflictingManager = ConflictingManager()
    driver: Driver = "host"
    device_filter: DeviceFilter = "auto"
    kubernetes: Kubernetes = Kubernetes()
    consumers: tuple[Consumer, ...] = ()
    source_sha256: str = ""

    @property
    def models(self) -> tuple[GpuModel, ...]:
        """The catalog model of each ``gpus`` entry, in order."""
        return tuple(g.gpu for g in self.gpus)

    @property
    def drop_in_dir(self) -> str:
        """The kubelet drop-in folder, relative to /etc/systemd/system."""
        return f"{self.kubelet.unit}.d"

    @property
    def all_consumers(self) -> tuple[Consumer, ...]:
        """kubelet (when present; fail closed unless on_failure is continue), then ``consumers``."""
        kubelet = (Consumer(self.kubelet.unit, self.restore.on_failure == "block-kubelet"),)
        return (kubelet if self.kubelet.present else ()) + self.consumers

    @property
    def held_units(self) -> tuple[str, ...]:
        """The fail-closed consumers: what a failed restore keeps down."""
        return tuple(c.unit for c in self.all_consumers if c.fail_closed)

    def consumers_text(self, *, only_fail_closed: bool = False) -> str:
        """``kubelet.service and slurmd.service``, or ``no consumer`` (for messages and comments)."""
        units = self.held_units if only_fail_closed else tuple(c.unit for c in self.all_consumers)
        if not units:
            return "no consumer"
        return units[0] if len(units) == 1 else ", ".join(units[:-1]) + " and " + units[-1]


def _group(raw: dict[str, Any], catalog: Catalog) -> GpuGroup:
    gpu = catalog.find_gpu(str(raw["model"]))
    if gpu is None:  # the rules refuse an unknown model before a profile is built
        raise KeyError(raw["model"])
    devices = raw.get("devices", "all")
    mig = raw.get("mig", {})
    layout = mig.get("layout", {})
    return GpuGroup(
        model=str(raw["model"]),
        devices="all" if devices == "all" else tuple(int(d) for d in devices),
        mig_enabled=bool(mig.get("enabled", True)),
        layout=tuple((str(k), int(v)) for k, v in layout.items()),
        gpu=gpu,
        pci_device_ids=tuple(canonical_pci_id(str(p)) for p in raw.get("pci_device_ids", ())),
    )


def build_profile(data: dict[str, Any], source_text: str = "", catalog: Catalog | None = None) -> NodeProfile:
    """The NodeProfile for ``data``, which must already have passed the schema and the rules (its GPU models
    are resolved here, once, in ``catalog``: by default the selected one)."""
    cat = catalog or load_catalog()
    kub, res = data.get("kubelet", {}), data.get("restore", {})
    tools, mgr = data.get("tools", {}), data.get("conflicting_manager", {})
    k8s = dict(data.get("kubernetes", {}))
    k8s["node_labels"] = tuple((str(k), str(v)) for k, v in k8s.get("node_labels", {}).items())
    return NodeProfile(
        name=data["name"],
        description=data.get("description", ""),
        gpu_count=data.get("gpu_count"),
        gpus=tuple(_group(g, cat) for g in data["gpus"]),
        kubelet=Kubelet(**kub),
        restore=Restore(**res),
        tools=Tools(**tools),
        conflicting_manager=ConflictingManager(**mgr),
        driver=data.get("driver", "host"),
        device_filter=data.get("device_filter", "auto"),
        kubernetes=Kubernetes(**k8s),
        consumers=tuple(Consumer(str(c["unit"]), bool(c.get("fail_closed", True)))
                        for c in data.get("consumers", [])),
        source_sha256=hashlib.sha256(source_text.encode("utf-8")).hexdigest(),
    )
