"""The render plan's parts: one frozen dataclass per concern with the values it derives (``render.plan`` holds them).

``RenderPlan`` keeps a few top-level fields (the profile's settings, the header, the user-data forms) and
one part per concern: the mig-parted config (``MigPlan``), what verify and preflight expect of each GPU
(``ExpectPlan``), how kubelet gets its labels (``KubeletPlan``), the Kubernetes allocation and DRA
(``DraPlan``), the platforms' own forms (``PlatformPlan``), the restore unit and script (``RestorePlan``),
the consumers and the base image's pieces (``ConsumerPlan``), the first boot (``FirstBoot``) and Slurm
(``slurm.gres.SlurmPlan``). A target reads the part it needs; ``render.plan.make_plan`` fills them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migbake.gpu.placement import PlacedInstance
from migbake.gpu.presence import GpuPresence
from migbake.kubernetes.dra import DRIVER, STRANDED_LOG, DraEntry, DraExpectation, NamedDevices
from migbake.kubernetes.resources import NodeKind
from migbake.node.drivergates import NO_GATE, DriverGate
from migbake.node.expectations import Expectation
from migbake.profile.nodefacts import GPU_CLIENTS, GPU_RESET_TARGET, REBOOT_MARKER, RESTORE_AFTER, RESTORE_SCRIPT
from migbake.profile.nodeprofile import UNIT_DIRS, BasePiece, Consumer


@dataclass(frozen=True)
class KubeletPlan:
    """How kubelet gets the profile's node labels, per ``kubelet.layout`` (``none``: no label to pass)."""

    layout: str  # generic, kubeadm, eks-al2023, eks-al2, or none
    label_flag: str  # ``--node-labels=k=v,...`` for kubelet, or "" when no label is set (or passed)
    labels_assignment: str  # ``VAR=--node-labels=...`` for an Environment= line of our drop-in, or ""
    exec_start: str  # kubeadm: our ExecStart= (kubeadm's command plus our variable), else ""
    our_variable: str  # the variable our kubeadm drop-in adds to kubeadm's command
    nodeadm_path: str  # eks-al2023: the NodeConfig drop-in's absolute path, else ""
    nodeadm_text: str  # ... and its text (header included), else ""
    nodeconfig_part: str = ""  # eks-al2023: the same labels as a NodeConfig part of MIME user data, else ""
    binary: str = ""  # kubelet's executable (kubelet.binary, else the layout's; "" for generic without one)
    unit_layout: str = ""  # the layout preflight and verify check kubelet's unit against ("": no check)
    kubeadm_command: str = ""  # kubeadm: the ExecStart= kubeadm's drop-in must have on the node, else ""
    # named layouts: the variable the restore sets in ``layout_env_file`` (the drop-in reads it), "" for none;
    # ``layout_labels`` the profile's labels it carries besides nvidia.com/mig.config (``k=v,...``, "" for none)
    layout_variable: str = ""
    layout_labels: str = ""
    layout_env_file: str = ""


@dataclass(frozen=True)
class FirstBoot:
    """cloud-init's commands: bootcmd holds the GPU's users, runcmd restores and starts them again."""

    bootcmd: tuple[tuple[str, ...], ...]
    runcmd: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class MimePart:
    """The user's own part of a multi-part user-data (``generate --user-data-mime FILE[:TYPE]``), read and typed
    (``render.mime_parts.user_part``)."""

    text: str
    name: str  # the file's name, the part's filename
    media_type: str  # its MIME type: TYPE when given (text/TYPE for a subtype), else told by its content


@dataclass(frozen=True)
class UserDataForms:
    """The forms of the user-data ``generate`` is asked for besides cloud-init/user-data (the ``user-data`` target)."""

    gzip: bool = False
    mime: MimePart | None = None


NO_FORMS = UserDataForms()


@dataclass(frozen=True)
class GroupPlacement:
    """Where the restore places the instances of one ``gpus`` entry on each of its GPUs."""

    entry: int  # the index of the ``gpus`` entry
    model: str  # the catalog model's key
    memory_slices: int  # the model's memory slices (placements start at 0 .. memory_slices - 1)
    instances: tuple[PlacedInstance, ...]  # in the order apply creates them; empty with MIG off
    # (gpu.driverplacement: mig-parted's creation order and the modelled driver choice of placement)


@dataclass(frozen=True)
class MigPlan:
    """The mig-parted config the node gets, its device filters, its named layouts and what a reboot loses."""

    config: dict[str, Any]  # the mig-parted config (format v1), as data
    config_text: str  # ... and as the YAML the node gets
    device_filter: bool  # whether the config's entries carry device-filters
    filter_notes: tuple[str, ...]
    gpu_notes: tuple[str, ...]  # what a reboot loses, per GPU model
    per_gpu: str  # the layouts, one text (``1g.18gb: 7``), or ``MIG off``
    layout_names: tuple[str, ...]  # mig.layouts' names (configs of the same names; restore.layout chooses one)
    named_resources: tuple[tuple[str, tuple[str, ...]], ...]  # per name, each entry's resources (verify's form)
    unselectable_config: str  # the mig-config WARN when no nvidia.com/mig.config label could name our config


@dataclass(frozen=True)
class ExpectPlan:
    """What verify and preflight expect of each ``gpus`` entry: its GPUs, its MIG mode, its instances and where."""

    expectations: tuple[Expectation, ...]  # per gpus entry: model, count, layout, PCI IDs
    verify_groups: tuple[dict[str, str], ...]  # per gpus entry, what verify's script compares
    node_kinds: tuple[NodeKind, ...]  # the kinds of node the image serves, with their Kubernetes resources
    placements: tuple[GroupPlacement, ...]  # per gpus entry, where each instance goes
    # named layouts: per name, per gpus entry, where apply puts its instances under that name (the first name's
    # are ``placements``); () for one unnamed layout
    named_placements: tuple[tuple[str, tuple[tuple[PlacedInstance, ...], ...]], ...] = ()
    gpu_modes: tuple[str, ...] = ()  # per gpus entry, "on" (MIG on) or "off", as the config says (dra-dynamic's verify)
    mig_on: bool = False  # some gpus entry has MIG on (preflight's nvswitch row)


@dataclass(frozen=True)
class DraPlan:
    """How Kubernetes allocates the GPUs (``kubernetes.allocation``) and, under DRA, what the driver publishes."""

    allocation: str = "device-plugin"  # kubernetes.allocation: device-plugin, dra or dra-dynamic
    entries: tuple[DraEntry, ...] = ()  # allocation dra: per gpus entry, the MIG devices each GPU publishes
    expected: tuple[DraExpectation, ...] = ()  # allocation dra: what verify and preflight check per entry
    driver: str = DRIVER  # the DRA driver whose ResourceSlices verify reads
    naming: str = "v25.12"  # kubernetes.dra_driver_version's device naming (v25.12 or v25.8)
    stranded_log: str = STRANDED_LOG  # what the driver logs for a stranded GPU (verify's words)
    claim_templates: str = ""  # allocation dra: one ResourceClaimTemplate per profile, YAML documents
    placement_check: str = ""  # allocation dra: restore.placements (warn, strict); "" for no check
    placement_groups: tuple[dict[str, str], ...] = ()  # allocation dra: verify_groups + ``placements``
    advertises: str = ""  # what the node advertises to Kubernetes under kubernetes.allocation (Ansible's words)
    # allocation dra with named layouts: per name, per gpus entry, the MIG devices each GPU publishes under that
    # name (verify's expectation of the name the node gets; ``entries`` are the first name's), and the
    # ``PROFILE@START`` text restore.sh compares under that name (``placement_groups``' ``placements``)
    named_devices: NamedDevices = ()
    named_placements: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class PlatformPlan:
    """What the platforms' own forms need: EKS, Bottlerocket, Butane/Ignition and the mig-parted download."""

    eks: str = ""  # eks-al2023 or eks-al2 when kubelet is started the EKS way (base AMI, Karpenter), else ""
    bottlerocket: tuple[tuple[str, str], ...] = ()  # (Bottlerocket model key, MIG profile) when it can say it
    ignition_fetch: bool = False  # the Butane configs download nvidia-mig-parted (a URL, a writable path)
    download_mig_parted: bool = False  # cloud-init, Karpenter and Packer download it (tools.nvidia_mig_parted_url)


@dataclass(frozen=True)
class RestorePlan:
    """The restore unit and script: their paths, the resets, the GPU's presence and driver, what they order."""

    config_rel: str  # the mig-parted config's path, relative to the node's /
    unit_rel: str  # the restore unit's path, relative to the node's /
    reset_models: tuple[str, ...]  # display names of the models whose MIG mode survives a reboot (Ampere)
    reset_path: str  # restore.on_reset_required when a model needs a reset for a mode change, else ``none``
    after_reset: str  # what the first restore does after a MIG mode change waits for a reset (preflight's words)
    presence: GpuPresence  # whether the machine has an NVIDIA GPU (sysfs): the profile's models, the words
    driver_gate: DriverGate = NO_GATE  # the oldest driver per MIG model; a mixed MIG/full-GPU node
    gpu_clients: tuple[str, ...] = GPU_CLIENTS  # NVIDIA's units that use the GPU (ordered after the restore)
    after: tuple[str, ...] = RESTORE_AFTER  # what the restore orders after
    reset_target: str = GPU_RESET_TARGET
    script: str = RESTORE_SCRIPT  # restore.sh on the node
    reboot_marker: str = REBOOT_MARKER
    unit_dirs: tuple[str, ...] = UNIT_DIRS  # systemd's unit folders, the node's first
    # driver: container: the PCI ids of the MIG GPUs whose mode changes only with a reset (Ampere): a mode found
    # off fails closed, as the driver container prevents the reset
    mode_on_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsumerPlan:
    """The units the restore holds (the consumers) and the pieces the base image must hold for it."""

    all: tuple[Consumer, ...]  # kubelet (when present), then the profile's consumers
    text: str  # ``kubelet.service and slurmd.service`` (``no consumer``)
    held_text: str  # ... the fail-closed ones only
    held_units: tuple[str, ...]  # the fail-closed consumers
    bake_pieces: tuple[BasePiece, ...]  # what the bake checks the base image for (tools, units)
    boot_pieces: tuple[BasePiece, ...]  # ... and what restore.sh checks at boot instead (image.provided_later)
