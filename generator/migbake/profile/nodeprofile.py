"""The typed node profile: frozen dataclasses built from data the schema has accepted, defaults filled in."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Literal

from migbake.gpu.catalog import Catalog, GpuModel, canonical_pci_id, load_catalog
from migbake.profile.nodefacts import normal_path

OnFailure = Literal["block-kubelet", "continue"]
ManagerAction = Literal["disable", "mask"]
Driver = Literal["host", "container"]
DeviceFilter = Literal["auto", "always", "never"]
MigStrategy = Literal["single", "mixed"]
OnResetRequired = Literal["reboot-once", "fail"]
CdiRefresh = Literal["auto", "never"]
KubeletLayout = Literal["generic", "kubeadm", "eks-al2023", "eks-al2"]
Allocation = Literal["device-plugin", "dra", "dra-dynamic"]
PlacementCheck = Literal["warn", "strict"]
NoGpu = Literal["succeed", "fail"]
Cdmm = Literal["disabled", "unknown"]
Hold = Literal["kubelet", "gpu-plugins"]
# driver: container: the watcher unit's default name, and where the driver container exposes its root
# (NVIDIA/gpu-driver-container@06a208ca:ubuntu24.04/nvidia-driver, _mount_rootfs: mount --rbind / /run/nvidia/driver)
WATCH_UNIT = "migbake-driver-watch.service"
DRIVER_ROOT = "/run/nvidia/driver"



@dataclass(frozen=True)
class GpuGroup:
    """One entry of ``gpus``: identical GPUs sharing one MIG layout."""

    model: str
    devices: Literal["all"] | tuple[int, ...]
    mig_enabled: bool
    layout: tuple[tuple[str, int], ...]
    gpu: GpuModel  # the catalog model ``model`` names, resolved once when the profile is built
    pci_device_ids: tuple[str, ...] = ()  # exactly the ids its device-filter names (empty: all of the model's)
    # mig.layouts: (name, layout) in the profile's order; empty: the one unnamed ``layout``
    layouts: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    def layout_named(self, name: str) -> tuple[tuple[str, int], ...]:
        """The layout of ``name`` (mig.layouts), or the unnamed one for an entry without names (MIG off)."""
        return dict(self.layouts).get(name, self.layout)

    @property
    def layout_dict(self) -> dict[str, int]:
        """The layout as a mapping, in the profile's order."""
        return dict(self.layout)


@dataclass(frozen=True)
class Kubelet:
    """Whether kubelet runs on the node, and its unit."""

    present: bool = True
    unit: str = "kubelet.service"
    layout: KubeletLayout = "generic"  # how kubelet is started: how node_labels reach it
    binary: str = ""  # kubelet's executable; "" = the layout's (kubernetes.kubelet.kubelet_binary)


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
    placements: PlacementCheck = "warn"  # allocation dra: a placement other than the plan's fails the restore
    no_gpu: NoGpu = "succeed"  # a machine without an NVIDIA GPU (PCI): nothing to restore, or a failure
    cdmm: Cdmm = "unknown"  # CDMM on the Grace nodes, as the profile states it (disabled: checked; cdmm-unknown)
    layout_from: tuple[str, ...] = ()  # restore.layout.from: where the node learns its layout name, in order
    layout_default: str = ""  # restore.layout.default ("": none, a node without a name fails closed)
    layout_ec2_tag_key: str = ""  # restore.layout.ec2_tag_key: the instance tag the ec2-tag source reads
    layout_network_wait_seconds: int = 20  # restore.layout.network_wait_seconds: the network sources' wait, in all
    hold: Hold = "kubelet"  # what stays down until the layout is restored (gpu-plugins: the driver is a container)
    driver_root: str = DRIVER_ROOT  # driver: container: the driver container's root on the host


@dataclass(frozen=True)
class Tools:
    """Paths of the NVIDIA tools on the node."""

    nvidia_smi: str = "/usr/bin/nvidia-smi"
    nvidia_mig_parted: str = "/usr/bin/nvidia-mig-parted"
    nvidia_mig_parted_url: str = ""  # where Ignition fetches the binary (Butane configs); empty: the base image has it
    nvidia_mig_parted_sha256: str = ""  # its sha256 (lowercase hex), given with the URL


@dataclass(frozen=True)
class Image:
    """What the base image holds: the pieces a later provisioner of the same build installs."""

    provided_later: tuple[str, ...] = ()  # tool names (nvidia-mig-parted, nvidia-smi) and unit names


# where a unit piece counts as present: systemd's unit folders (the bake's and the restore's check,
# scripts/_base-image-check.sh.j2, and the Ansible role's); NAME@.service counts for NAME@X.service
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
             "/usr/lib/systemd/system", "/lib/systemd/system")


@dataclass(frozen=True)
class BasePiece:
    """One thing the restore needs from the base image: a tool at its path, or a unit."""

    name: str  # nvidia-mig-parted, nvidia-smi, or a unit name
    kind: Literal["tool", "unit"]
    path: str = ""  # a tool's path

    @property
    def template(self) -> str:
        """The unit file that also provides it: NAME@.service for NAME@X.service, else the unit itself."""
        return self.name.split("@", 1)[0] + "@.service" if "@" in self.name else self.name


@dataclass(frozen=True)
class ConflictingManager:
    """The packaged MIG manager that must not also run at boot."""

    unit: str = "nvidia-mig-manager.service"
    action: ManagerAction = "mask"


@dataclass(frozen=True)
class Kubernetes:
    """Who allocates the node's GPUs (device plugin or DRA driver), and the device plugin's MIG strategy."""

    allocation: Allocation = "device-plugin"
    mig_strategy: MigStrategy = "mixed"
    node_labels: tuple[tuple[str, str], ...] = ()
    kubelet_args_env: str = ""  # the variable kubelet's ExecStart expands for extra arguments
    dra_driver_version: str = ""  # NVIDIA's DRA driver version (its device naming); "": the newest naming
    device_plugin_version: str = ""  # NVIDIA's device plugin version (its resource names); "": the newest


GresTypes = Literal["typed", "untyped"]


@dataclass(frozen=True)
class Slurm:
    """The ``slurm`` section: how the generated gres.conf and slurm.conf.node describe the node."""

    present: bool = False  # the profile has a slurm section (a slurmd consumer also makes migbake write them)
    node_name: str = ""  # empty: the profile's name
    autodetect: bool = True
    gres_types: GresTypes = "typed"
    layout_node_names: tuple[tuple[str, str], ...] = ()  # node_name as a mapping: (layout name, node name)

    def node_name_for(self, layout: str) -> str:
        """NodeName= for the files of ``layout`` ("": the one unnamed layout); empty: the profile's name."""
        return dict(self.layout_node_names).get(layout, self.node_name)


@dataclass(frozen=True)
class OpenShift:
    """The ``openshift`` section: the MachineConfigPool the generated MachineConfig targets."""

    role: str = "gpu-mig"  # a pool of its own: worker and master reach every node of their pool


@dataclass(frozen=True)
class Bottlerocket:
    """The ``bottlerocket`` section: whether a layout Bottlerocket cannot express is a warning."""

    required: bool = False


@dataclass(frozen=True)
class Gate:
    """The ``gate`` section: which GPU plugins' pods wait for the restored layout, and the image that waits."""

    plugins: tuple[str, ...] = ()  # empty: the default set (migbake.kubernetes.gate.default_plugins)
    wait_image: str = ""  # empty: migbake.kubernetes.gate.WAIT_IMAGE


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
    image: Image = Image()
    conflicting_manager: ConflictingManager = ConflictingManager()
    driver: Driver = "host"
    device_filter: DeviceFilter = "auto"
    kubernetes: Kubernetes = Kubernetes()
    consumers: tuple[Consumer, ...] = ()
    slurm: Slurm = Slurm()
    openshift: OpenShift = OpenShift()
    bottlerocket: Bottlerocket = Bottlerocket()
    gate: Gate = Gate()
    outputs: tuple[str, ...] = ()  # the output folders to write (``outputs:``); empty: all of them
    source_sha256: str = ""

    @property
    def dra(self) -> bool:
        """Whether NVIDIA's DRA driver allocates the GPUs (static or dynamic MIG), not the device plugin."""
        return self.kubernetes.allocation != "device-plugin"

    @property
    def layout_names(self) -> tuple[str, ...]:
        """The names of ``mig.layouts`` in the order the entries first give them (empty: one unnamed layout)."""
        return tuple(dict.fromkeys(name for g in self.gpus for name, _ in g.layouts))

    def named(self, name: str) -> NodeProfile:
        """The profile as a node of layout ``name`` sees it: each entry with that one layout (``show`` per name)."""
        return replace(self, gpus=tuple(replace(g, layout=g.layout_named(name), layouts=()) for g in self.gpus))

    @property
    def config_names(self) -> tuple[str, ...]:
        """The configs of the generated mig-parted file: the layout names, or ``restore.config_name``."""
        return self.layout_names or (self.restore.config_name,)

    @property
    def models(self) -> tuple[GpuModel, ...]:
        """The catalog model of each ``gpus`` entry, in order."""
        return tuple(g.gpu for g in self.gpus)

    @property
    def drop_in_dir(self) -> str:
        """The kubelet drop-in folder, relative to /etc/systemd/system."""
        return f"{self.kubelet.unit}.d"

    @property
    def watches_driver(self) -> bool:
        """Whether the node's driver is a container: a watcher restores the layout when it comes up."""
        return self.driver == "container"

    @property
    def all_consumers(self) -> tuple[Consumer, ...]:
        """kubelet (when present and held; fail closed unless on_failure is continue), then ``consumers``."""
        if self.restore.hold == "gpu-plugins":  # nothing is ordered before kubelet: the GPU plugins wait instead
            return self.consumers
        kubelet = (Consumer(self.kubelet.unit, self.restore.on_failure == "block-kubelet"),)
        return (kubelet if self.kubelet.present else ()) + self.consumers

    @property
    def held_units(self) -> tuple[str, ...]:
        """The fail-closed consumers: what a failed restore keeps down."""
        return tuple(c.unit for c in self.all_consumers if c.fail_closed)

    @property
    def base_pieces(self) -> tuple[BasePiece, ...]:
        """What the base image must hold: both tools, kubelet's unit (when present), each fail-closed consumer's."""
        units = ((self.kubelet.unit,) if self.kubelet.present else ()) + tuple(
            c.unit for c in self.consumers if c.fail_closed)
        # a driver container brings nvidia-smi in its own root: the host has none
        smi = () if self.watches_driver else (BasePiece("nvidia-smi", "tool", self.tools.nvidia_smi),)
        return (BasePiece("nvidia-mig-parted", "tool", self.tools.nvidia_mig_parted), *smi,
                *(BasePiece(u, "unit") for u in units))

    def base_pieces_at(self, when: Literal["bake", "boot"]) -> tuple[BasePiece, ...]:
        """The pieces the bake checks (not provided later), or those the restore checks at boot (provided later)."""
        later = set(self.image.provided_later)
        return tuple(p for p in self.base_pieces if (p.name in later) == (when == "boot"))

    def consumers_text(self, *, only_fail_closed: bool = False) -> str:
        """``kubelet.service and slurmd.service``, or ``no consumer`` (for messages and comments)."""
        units = self.held_units if only_fail_closed else tuple(c.unit for c in self.all_consumers)
        if not units:
            return "no consumer"
        return units[0] if len(units) == 1 else ", ".join(units[:-1]) + " and " + units[-1]


def dynamic_mig_mode(gpu: GpuModel, enabled: bool) -> bool:
    """The MIG mode the restore sets under allocation ``dra-dynamic``: on (no instances) only on a GPU that
    cannot change MIG mode without a reset (Ampere), off on Hopper and newer, where the DRA driver turns it
    on per claim (``isDynamicMIGCapable``/``supportsMIGModeToggle``,
    kubernetes-sigs/dra-driver-nvidia-gpu:cmd/gpu-kubelet-plugin/nvlib.go@v0.4.0)."""
    return enabled and gpu.has_mig and gpu.mig_mode_persists


def _group(raw: dict[str, Any], catalog: Catalog, allocation: str = "device-plugin") -> GpuGroup:
    gpu = catalog.find_gpu(str(raw["model"]))
    if gpu is None:  # the rules refuse an unknown model before a profile is built
        raise KeyError(raw["model"])
    devices = raw.get("devices", "all")
    mig = raw.get("mig", {})
    layout = mig.get("layout", {})
    named = tuple((str(n), tuple((str(k), int(v)) for k, v in lay.items()))
                  for n, lay in mig.get("layouts", {}).items())
    if named:  # where one layout is read, the first named layout stands for the entry
        layout = dict(named[0][1])
    enabled = bool(mig.get("enabled", True))
    return GpuGroup(
        model=str(raw["model"]),
        devices="all" if devices == "all" else tuple(int(d) for d in devices),
        mig_enabled=dynamic_mig_mode(gpu, enabled) if allocation == "dra-dynamic" else enabled,
        layout=tuple((str(k), int(v)) for k, v in layout.items()),
        gpu=gpu,
        pci_device_ids=tuple(canonical_pci_id(str(p)) for p in raw.get("pci_device_ids", ())),
        layouts=named,
    )


def build_profile(data: dict[str, Any], source_text: str = "", catalog: Catalog | None = None) -> NodeProfile:
    """The NodeProfile for ``data``, which must already have passed the schema and the rules (its GPU models
    are resolved here, once, in ``catalog``: by default the packaged one)."""
    cat = catalog or load_catalog()
    kub, res = data.get("kubelet", {}), data.get("restore", {})
    tools, mgr = data.get("tools", {}), data.get("conflicting_manager", {})
    # the paths migbake writes, as the kernel will resolve them (the rules judged them normalised too)
    res = {k: normal_path(v) if k in ("config_path", "metrics_textfile", "driver_root") else v
           for k, v in res.items()}
    if data.get("driver") == "container":  # the rules refuse hold kubelet with a driver container
        res.setdefault("unit", WATCH_UNIT)
        res.setdefault("hold", "gpu-plugins")
    choice = res.pop("layout", None)
    if choice is not None:
        res["layout_from"] = tuple(str(s) for s in choice["from"])
        res["layout_default"] = str(choice.get("default", ""))
        res["layout_ec2_tag_key"] = str(choice.get("ec2_tag_key", ""))
        res["layout_network_wait_seconds"] = int(choice.get("network_wait_seconds", 20))
    k8s = dict(data.get("kubernetes", {}))
    k8s["node_labels"] = tuple((str(k), str(v)) for k, v in k8s.get("node_labels", {}).items())
    return NodeProfile(
        name=data["name"],
        description=data.get("description", ""),
        gpu_count=data.get("gpu_count"),
        gpus=tuple(_group(g, cat, str(k8s.get("allocation", "device-plugin"))) for g in data["gpus"]),
        kubelet=Kubelet(**{**kub, **({"binary": normal_path(kub["binary"])} if "binary" in kub else {})}),
        restore=Restore(**res),
        tools=Tools(**tools),
        image=Image(tuple(str(x) for x in data.get("image", {}).get("provided_later", ()))),
        conflicting_manager=ConflictingManager(**mgr),
        driver=data.get("driver", "host"),
        device_filter=data.get("device_filter", "auto"),
        kubernetes=Kubernetes(**k8s),
        consumers=tuple(Consumer(str(c["unit"]), bool(c.get("fail_closed", True)))
                        for c in data.get("consumers", [])),
        slurm=_slurm(data["slurm"]) if "slurm" in data else Slurm(),
        openshift=OpenShift(**data.get("openshift", {})),
        bottlerocket=Bottlerocket(**data.get("bottlerocket", {})),
        gate=Gate(tuple(str(p) for p in data.get("gate", {}).get("plugins", ())),
                  str(data.get("gate", {}).get("wait_image", ""))),
        outputs=tuple(str(o) for o in data.get("outputs", ())),
        source_sha256=hashlib.sha256(source_text.encode("utf-8")).hexdigest(),
    )


def _slurm(section: dict[str, Any]) -> Slurm:
    """The ``slurm`` section; ``node_name`` either one name for every layout or a mapping layout name -> name."""
    name = section.get("node_name", "")
    if isinstance(name, dict):
        return Slurm(present=True, **{**section, "node_name": "",
                                      "layout_node_names": tuple((str(k), str(v)) for k, v in name.items())})
    return Slurm(present=True, **section)
