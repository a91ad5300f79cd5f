"""The render plan: everything a node gets, derived once from a typed node profile.

``make_plan`` is the one place where the profile's groups become the mig-parted config, its device
filters and their notes, what verify and preflight expect of each GPU, the exact placement of every
instance, the Kubernetes resources and the Slurm counts per kind of node, how kubelet gets its labels,
the first boot's commands, the generation notes, the paths of every file and the consumers each unit
orders. Every output target (``render/targets/``) reads this plan and derives nothing again: a target
may read the profile's own settings through ``plan.profile`` (its name, paths, units, timeouts), never
its GPUs or their catalog models, and never calls the derivations. It is also the object to read when
asking "what will this node get?".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from migbake import __version__
from migbake.gpu.placement import PlacedInstance
from migbake.gpu.presence import GpuPresence, gpu_presence
from migbake.kubernetes.dra import (
    DRIVER,
    STRANDED_LOG,
    DraDevice,
    DraEntry,
    DraExpectation,
    advertised,
    claim_templates_yaml,
    dra_entries,
    dra_expectations,
    naming,
    placements,
)
from migbake.kubernetes.kubelet import (
    LAYOUT_LABELS_ENV,
    NODEADM_DROPIN,
    OUR_VARIABLE,
    eks_family,
    kubeadm_command,
    kubeadm_exec_start,
    kubelet_binary,
    labels_apply,
    layout_variable,
    node_labels_flag,
    nodeadm_dropin,
    nodeadm_exec_start,
    nodeconfig_part,
    unit_checked,
)
from migbake.kubernetes.labels import MIG_CONFIG_LABEL, unselectable_config
from migbake.kubernetes.managed import entries_of, verdicts
from migbake.kubernetes.resources import NodeKind, node_kinds, per_gpu, verify_groups
from migbake.migparted.config import config_yaml, filter_notes, mig_parted_config, uses_device_filter
from migbake.node.drivergates import NO_GATE, DriverGate, driver_gate
from migbake.node.expectations import AFTER_RESET, Expectation, expectations
from migbake.profile.nodeprofile import UNIT_DIRS, BasePiece, Consumer, NodeProfile
from migbake.profile.units import (
    GPU_CLIENTS,
    GPU_RESET_TARGET,
    REBOOT_MARKER,
    RESTORE_AFTER,
    RESTORE_SCRIPT,
    immutable_writable,
)
from migbake.render.firstboot import commands
from migbake.render.guard import Block
from migbake.render.guard import line as guard_line
from migbake.slurm.gres import SlurmNode, SlurmPlan, slurm_plan

__all__ = ["LAYOUT_FILE", "MIG_CONFIG_LABEL",
           "BasePiece", "Consumer", "DraDevice", "DraEntry", "DraExpectation", "Expectation", "KubeletPlan", "MimePart",
           "NodeKind", "PlacedInstance", "RenderPlan", "SlurmNode", "SlurmPlan", "UserDataForms", "make_plan"]

DROPIN_NAME = "20-mig-restore.conf"
LAYOUT_FILE = "/etc/migbake/layout"  # restore.layout's ``file`` source (templates/scripts/_layout-source.sh.j2)
SYSTEM_UNITS = "etc/systemd/system"


@dataclass(frozen=True)
class KubeletPlan:
    """How kubelet gets the profile's node labels, per ``kubelet.layout`` (``none``: no label to pass)."""

    layout: str  # generic, kubeadm, eks-al2023, eks-al2, or none
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
    """The user's own part of a multi-part user-data (``generate --user-data-mime FILE[:TYPE]``)."""

    text: str
    name: str  # the file's name, the part's filename
    kind: str | None = None  # TYPE, when given


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
class RenderPlan:
    """What the output tree is made of, for one node profile (paths are relative to the node's /)."""

    profile: NodeProfile  # its settings only (name, paths, units, timeouts): every derived value is a field
    header: str  # the comment lines every generated file starts with (``#`` form)
    config: dict[str, Any]  # the mig-parted config (format v1), as data
    config_text: str  # ... and as the YAML the node gets
    device_filter: bool  # whether the config's entries carry device-filters
    filter_notes: tuple[str, ...]
    expectations: tuple[Expectation, ...]  # what verify and preflight expect of each gpus entry
    verify_groups: tuple[dict[str, str], ...]
    node_kinds: tuple[NodeKind, ...]  # the kinds of node the image serves, with their Kubernetes resources
    placements: tuple[GroupPlacement, ...]  # per gpus entry, where each instance goes
    gpu_notes: tuple[str, ...]  # what a reboot loses, per GPU model
    reset_models: tuple[str, ...]  # display names of the models whose MIG mode survives a reboot (Ampere)
    reset_path: str  # restore.on_reset_required when a model needs a reset for a mode change, else ``none``
    after_reset: str  # what the first restore does after a MIG mode change waits for a reset (preflight's words)
    per_gpu: str  # the layouts, one text (``1g.18gb: 7``), or ``MIG off``
    layout_names: tuple[str, ...]  # mig.layouts' names (configs of the same names; restore.layout chooses one)
    named_resources: tuple[tuple[str, tuple[str, ...]], ...]  # per name, each entry's resources (verify's form)
    node_label_flag: str  # ``--node-labels=k=v,...`` for kubelet, or "" when no label is set
    kubelet: KubeletPlan
    unselectable_config: str  # the mig-config WARN when no nvidia.com/mig.config label could name our config
    config_rel: str
    unit_rel: str
    consumers: tuple[Consumer, ...]  # kubelet (when present), then the profile's consumers
    consumers_text: str  # ``kubelet.service and slurmd.service`` (``no consumer``)
    held_text: str  # ... the fail-closed ones only
    held_units: tuple[str, ...]  # the fail-closed consumers
    bake_pieces: tuple[BasePiece, ...]  # what the bake checks the base image for (tools, units)
    boot_pieces: tuple[BasePiece, ...]  # ... and what restore.sh checks at boot instead (image.provided_later)
    first_boot: FirstBoot
    slurm: SlurmPlan | None  # the slurm/ files' content, or None when the profile writes none
    eks: str  # eks-al2023 or eks-al2 when kubelet is started the EKS way (base AMI, Karpenter), else ""
    presence: GpuPresence  # whether the machine has an NVIDIA GPU (sysfs): the profile's models, the words
    allocation: str = "device-plugin"  # kubernetes.allocation: device-plugin, dra or dra-dynamic
    dra: tuple[DraEntry, ...] = ()  # allocation dra: per gpus entry, the MIG devices each GPU publishes
    dra_expected: tuple[DraExpectation, ...] = ()  # allocation dra: what verify and preflight check per entry
    mig_on: bool = False  # some gpus entry has MIG on (preflight's nvswitch row)
    driver_gate: DriverGate = NO_GATE  # the oldest driver per MIG model; a mixed MIG/full-GPU node
    advertises: str = ""  # what the node advertises to Kubernetes under kubernetes.allocation (Ansible's words)
    dra_driver: str = DRIVER  # the DRA driver whose ResourceSlices verify reads
    dra_naming: str = "v25.12"  # kubernetes.dra_driver_version's device naming (v25.12 or v25.8)
    dra_stranded_log: str = STRANDED_LOG  # what the driver logs for a stranded GPU (verify's words)
    claim_templates: str = ""  # allocation dra: one ResourceClaimTemplate per profile, YAML documents
    placement_check: str = ""  # allocation dra: restore.placements (warn, strict); "" for no check
    placement_groups: tuple[dict[str, str], ...] = ()  # allocation dra: verify_groups + ``placements``
    gpu_modes: tuple[str, ...] = ()  # per gpus entry, "on" (MIG on) or "off", as the config says (dra-dynamic's verify)
    bottlerocket: tuple[tuple[str, str], ...] = ()  # (Bottlerocket model key, MIG profile) when it can say it
    ignition_fetch: bool = False  # the Butane configs download nvidia-mig-parted (a URL, a writable path)
    download_mig_parted: bool = False  # cloud-init, Karpenter and Packer download it (tools.nvidia_mig_parted_url)
    gpu_clients: tuple[str, ...] = GPU_CLIENTS  # NVIDIA's units that use the GPU (ordered after the restore)
    restore_after: tuple[str, ...] = RESTORE_AFTER  # what the restore orders after
    reset_target: str = GPU_RESET_TARGET
    restore_script: str = RESTORE_SCRIPT
    reboot_marker: str = REBOOT_MARKER
    unit_dirs: tuple[str, ...] = UNIT_DIRS  # systemd's unit folders, the node's first
    user_data: UserDataForms = NO_FORMS  # generate's --user-data-* options (set by ``tree.render``)

    @property
    def dropin_rel(self) -> str:
        """The kubelet drop-in."""
        return self.consumer_dropin_rel(self.profile.drop_in_dir)

    def consumer_dropin_rel(self, drop_in_dir: str) -> str:
        """The restore's drop-in in a consumer's drop-in folder."""
        return f"{SYSTEM_UNITS}/{drop_in_dir}/{DROPIN_NAME}"

    @property
    def dropin_paths(self) -> list[str]:
        """Every consumer's drop-in, as an absolute path."""
        return ["/" + self.consumer_dropin_rel(c.drop_in_dir) for c in self.consumers]


def header(profile: NodeProfile, comment: str = "#") -> str:
    """The first lines of every generated file: what generated it, from which profile.

    It names the profile and migbake's version, not the profile's sha256: that is in OUT's marker
    (``.migbake-output``) alone, so a change to the profile rewrites only the files it changes.
    """
    lines = [
        f"Generated by migbake {__version__} from node profile {profile.name!r}.",
        "Do not edit: change the profile and run `migbake generate`.",
    ]
    if profile.description:
        lines.append(f"Node: {profile.description}")
    return Block("\n".join(f"{comment} {guard_line(line, 'the header line')}" for line in lines))


def gpu_notes(profile: NodeProfile) -> list[str]:
    """Generation-aware notes: what a reboot loses on each GPU model of the profile."""
    notes = []
    seen = set()
    for g in profile.gpus:
        m, name = g.gpu, g.gpu.name_as_written(g.model)  # the board the profile names: PCIe, not the first name's SXM
        if (m.key, name) in seen:
            continue
        seen.add((m.key, name))
        if not m.has_mig:
            notes.append(f"{name}: no MIG; mig-parted keeps MIG off on it.")
        elif profile.kubernetes.allocation == "dra-dynamic":
            notes.append(f"{name} ({m.generation.capitalize()}): " + (
                "MIG mode survives a reboot and changes only with a GPU reset: the restore keeps it on, with no "
                "instances; the DRA driver creates them per claim." if m.mig_mode_persists else
                "the restore keeps MIG off; the DRA driver turns it on and creates instances per claim."))
        elif m.mig_mode_persists:
            notes.append(f"{name} ({m.generation.capitalize()}): MIG mode survives a reboot, "
                         "the GPU/compute instances do not; apply re-creates them.")
        else:
            notes.append(f"{name} ({m.generation.capitalize()}): MIG mode and the instances are "
                         "both lost at every reboot; apply re-enables MIG and re-creates them.")
    return notes


def _kubelet(p: NodeProfile, flag: str, head: str) -> KubeletPlan:
    layout = p.kubelet.layout if flag else "none"
    assignment = exec_start = ""
    if layout == "generic" and p.kubernetes.kubelet_args_env:
        assignment = f"{p.kubernetes.kubelet_args_env}={flag}"
    binary = kubelet_binary(p)
    if layout == "kubeadm":
        assignment, exec_start = f"{OUR_VARIABLE}={flag}", kubeadm_exec_start(binary)
    eks = layout == "eks-al2023"
    checked = p.kubelet.layout if unit_checked(p) else ""
    variable = layout_variable(p)
    if variable and p.kubelet.layout == "kubeadm":
        exec_start = kubeadm_exec_start(binary)  # also without node labels: the name's label needs it
    elif variable and p.kubelet.layout == "eks-al2023":
        exec_start = nodeadm_exec_start(binary)
    # the labels the variable carries besides the name's: those the drop-in's Environment= line gives it
    carried = flag[len("--node-labels="):] if variable and assignment else ""
    return KubeletPlan(layout, assignment, exec_start, OUR_VARIABLE, NODEADM_DROPIN if eks else "",
                       nodeadm_dropin(p, head) if eks else "", nodeconfig_part(p) if eks else "", binary, checked,
                       kubeadm_command(binary) if checked == "kubeadm" else "", variable, carried,
                       LAYOUT_LABELS_ENV if variable else "")


def _placements(p: NodeProfile) -> tuple[GroupPlacement, ...]:
    """Per entry, where apply puts its instances: the one prediction of the render (``dra.placements``)."""
    return tuple(GroupPlacement(i, g.gpu.key, g.gpu.total_memory_slices, where)
                 for i, (g, where) in enumerate(zip(p.gpus, placements(p))))


def _placement_groups(groups: tuple[dict[str, str], ...], placed: tuple[GroupPlacement, ...]
                      ) -> tuple[dict[str, str], ...]:
    """Per entry, what restore.sh compares with ``nvidia-smi mig -lgi``: ``PROFILE@START`` sorted (C order)."""
    return tuple({**g, "placements": " ".join(sorted(f"{i.profile}@{i.start}" for i in p.instances))}
                 for g, p in zip(groups, placed))
def _bottlerocket(p: NodeProfile) -> tuple[tuple[str, str], ...]:
    """One MIG profile per Bottlerocket model key, when Bottlerocket expresses every model's layout, else ().

    Bottlerocket's aws-k8s-*-nvidia variants are Kubernetes nodes: a profile without kubelet gets none. Its MIG
    settings are its device plugin's: a profile whose GPUs the DRA driver allocates gets none (``bottlerocket-dra``).
    """
    if p.layout_names:  # Bottlerocket's settings say one profile per model: one layout, not a choice at boot
        return ()
    found = verdicts("bottlerocket", entries_of(p.gpus)) \
        if p.kubelet.present and p.kubernetes.allocation == "device-plugin" else []
    return tuple((v.key, v.value) for v in found) if found and all(v.native for v in found) else ()


def _per_gpu(p: NodeProfile, name: str) -> str:
    """The distinct layouts of the MIG GPUs (of layout ``name``; "": the unnamed ones) as one text."""
    layouts = {tuple(sorted(g.layout_named(name) if name else g.layout)) for g in p.gpus if g.mig_enabled}
    return "; ".join(sorted(", ".join(f"{n}: {c}" for n, c in lay) or "no instances"
                            for lay in layouts)) or "MIG off"


def _named_resources(p: NodeProfile) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per layout name, the resources one GPU of each entry advertises under it (``r=n r=n``)."""
    strategy, version = p.kubernetes.mig_strategy, p.kubernetes.device_plugin_version
    return tuple((name, tuple(" ".join(f"{r}={n}" for r, n in per_gpu(replace(g, layout=g.layout_named(name)),
                                                                        strategy, version).items()) for g in p.gpus))
                 for name in p.layout_names)


def make_plan(profile: NodeProfile) -> RenderPlan:
    """The plan of ``profile``'s output tree: every derived value, computed once."""
    p = profile
    per_gpu = "; ".join(f"{name}: {_per_gpu(p, name)}" for name in p.layout_names) or _per_gpu(p, "")
    flag = node_labels_flag(p) if labels_apply(p) else ""  # passed as kubelet.layout says
    filtered = uses_device_filter(p)
    config = mig_parted_config(p, with_filter=filtered)
    kinds = tuple(node_kinds(p, filtered))
    head = header(p)
    reset_models = tuple(sorted({g.gpu.name_as_written(g.model) for g in p.gpus if g.gpu.mig_mode_persists}))
    bootcmd, runcmd = commands(p)
    groups, placed = tuple(verify_groups(p, filtered)), _placements(p)
    where = tuple(g.instances for g in placed)  # the one prediction: every reader below takes it
    dra = dra_entries(p, where)
    return RenderPlan(
        profile=p,
        header=head,
        config=config,
        config_text=config_yaml(config),
        device_filter=filtered,
        filter_notes=tuple(filter_notes(p, filtered)),
        expectations=expectations(p, filtered),
        verify_groups=groups,
        node_kinds=kinds,
        placements=placed,
        gpu_notes=tuple(gpu_notes(p)),
        reset_models=reset_models,
        reset_path=p.restore.on_reset_required if reset_models else "none",
        after_reset=AFTER_RESET.get(p.restore.on_reset_required, ""),  # another value: the guard stops it
        per_gpu=per_gpu,
        layout_names=p.layout_names,
        named_resources=_named_resources(p),
        node_label_flag=flag,
        kubelet=_kubelet(p, flag, head),
        unselectable_config=unselectable_config(p.restore.config_name),
        config_rel=p.restore.config_path.lstrip("/"),
        unit_rel=f"{SYSTEM_UNITS}/{p.restore.unit}",
        consumers=p.all_consumers,
        consumers_text=p.consumers_text(),
        held_text=p.consumers_text(only_fail_closed=True),
        held_units=p.held_units,
        bake_pieces=p.base_pieces_at("bake"),
        boot_pieces=p.base_pieces_at("boot"),
        first_boot=FirstBoot(tuple(map(tuple, bootcmd)), tuple(map(tuple, runcmd))),
        slurm=slurm_plan(p, kinds, where),
        allocation=p.kubernetes.allocation,
        dra=dra,
        dra_expected=dra_expectations(p, dra),
        dra_naming=naming(p.kubernetes.dra_driver_version) or "v25.12",
        driver_gate=driver_gate(p),
        mig_on=any(g.mig_enabled for g in p.gpus),
        advertises=advertised(p),
        claim_templates=claim_templates_yaml(p),
        placement_check=p.restore.placements if p.kubernetes.allocation == "dra" else "",
        placement_groups=_placement_groups(groups, placed) if p.kubernetes.allocation == "dra" else (),
        gpu_modes=tuple("on" if g.mig_enabled else "off" for g in p.gpus),
        bottlerocket=_bottlerocket(p),
        ignition_fetch=bool(p.tools.nvidia_mig_parted_url) and immutable_writable(p.tools.nvidia_mig_parted),
        download_mig_parted=bool(p.tools.nvidia_mig_parted_url),
        eks=eks_family(p),
        presence=gpu_presence(p.restore.no_gpu, [g["pci_ids"] for g in groups]),
    )
