"""The typed node profile: frozen dataclasses built from data the schema has accepted, defaults filled in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from migbake.catalog import canonical_pci_id

OnFailure = Literal["block-kubelet", "continue"]
ManagerAction = Literal["disable", "mask"]
Driver = Literal["host", "container"]
DeviceFilter = Literal["auto", "always", "never"]
MigStrategy = Literal["single", "mixed"]


@dataclass(frozen=True, slots=True)
class GpuGroup:
    """One entry of ``gpus``: identical GPUs sharing one MIG layout."""

    model: str
    devices: Literal["all"] | tuple[int, ...]
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]
    pci_device_ids: tuple[str, ...] = ()  # exactly the ids its device-filter names (empty: all of the model's)

    @property
    def layout_dict(self) -> dict[str, int]:
        """The layout as a mapping, in the profile's order."""
        return dict(self.layout)


@dataclass(frozen=True, slots=True)
class Kubelet:
    """Whether kubelet runs on the node, and its unit."""

    present: bool = True
    unit: str = "kubelet.service"


@dataclass(frozen=True, slots=True)
class Restore:
    """The restore unit and the config it applies."""

    unit: str = "nvidia-mig-restore.service"
    config_path: str = "/etc/nvidia-mig/config.yaml"
    config_name: str = "current"
    timeout_seconds: int = 480
    on_failure: OnFailure = "block-kubelet"


@dataclass(frozen=True, slots=True)
class Tools:
    """Paths of the NVIDIA tools on the node."""

    nvidia_smi: str = "/usr/bin/nvidia-smi"
    nvidia_mig_parted: str = "/usr/bin/nvidia-mig-parted"


@dataclass(frozen=True, slots=True)
class ConflictingManager:
    """The packaged MIG manager that must not also run at boot."""

    unit: str = "nvidia-mig-manager.service"
    action: ManagerAction = "disable"


@dataclass(frozen=True, slots=True)
class Kubernetes:
    """How the node's device plugin advertises MIG devices (its MIG strategy)."""

    mig_strategy: MigStrategy = "mixed"


@dataclass(frozen=True, slots=True)
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
    source_sha256: str = ""

    @property
    def drop_in_dir(self) -> str:
        """The kubelet drop-in folder, relative to /etc/systemd/system."""
        return f"{self.kubelet.unit}.d"


def _group(raw: dict[str, Any]) -> GpuGroup:
    devices = raw.get("devices", "all")
    mig = raw.get("mig", {})
    layout = mig.get("layout", {})
    return GpuGroup(
        model=str(raw["model"]),
        devices="all" if devices == "all" else tuple(int(d) for d in devices),
        mig_enabled=bool(mig.get("enabled", True)),
        layout=tuple((str(k), int(v)) for k, v in layout.items()),
        pci_device_ids=tuple(canonical_pci_id(str(p)) for p in raw.get("pci_device_ids", ())),
    )


def build_profile(data: dict[str, Any], source_text: str = "") -> NodeProfile:
    """The NodeProfile for ``data``, which must already have passed the schema."""
    kub, res = data.get("kubelet", {}), data.get("restore", {})
    tools, mgr = data.get("tools", {}), data.get("conflicting_manager", {})
    return NodeProfile(
        name=data["name"],
        description=data.get("description", ""),
        gpu_count=data.get("gpu_count"),
        gpus=tuple(_group(g) for g in data["gpus"]),
        kubelet=Kubelet(**kub),
        restore=Restore(**res),
        tools=Tools(**tools),
        conflicting_manager=ConflictingManager(**mgr),
        driver=data.get("driver", "host"),
        device_filter=data.get("device_filter", "auto"),
        kubernetes=Kubernetes(**data.get("kubernetes", {})),
        source_sha256=hashlib.sha256(source_text.encode("utf-8")).hexdigest(),
    )
