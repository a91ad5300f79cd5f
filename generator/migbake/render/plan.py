"""The render plan: everything a node gets, derived once from a typed node profile.

``make_plan`` is the one place where the profile's groups become the mig-parted config, its device
filters and their notes, what verify and preflight expect of each GPU, the exact placement of every
instance, the Kubernetes resources and the Slurm counts per kind of node, how kubelet gets its labels,
the first boot's commands, the generation notes, the paths of every file and the consumers each unit
orders. Every output target (``render/targets/``) reads this plan and derives nothing again: a target
may read the profile's own settings through ``plan.profile`` (its name, paths, units, timeouts), never
its GPUs or their catalog models, and never calls the derivations. It is also the object to read when
asking "what will this node get?".

The plan is a few top-level fields and one part per concern (``render.parts``: ``mig``, ``expect``, ``kubelet``,
``dra``, ``slurm``, ``platforms``, ``restore``, ``consumers``, ``first_boot``); a target reads the part it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from migbake import __version__
from migbake.gpu.driverplacement import EntryPlacements
from migbake.gpu.placement import PlacedInstance
from migbake.gpu.presence import gpu_presence
from migbake.kubernetes.dra import (
    DraDevice,
    DraEntry,
    DraExpectation,
    NamedDevices,
    advertised,
    claim_templates_yaml,
    dra_entries,
    dra_expectations,
    naming,
    placements,
)
from migbake.kubernetes.gate import GateSpec, gate_spec, plugins_wait
from migbake.kubernetes.kubelet import (
    LAYOUT_LABELS_ENV,
    NODEADM_DROPIN,
    NODECONFIG_MEDIA_TYPE,
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
    nodeconfig_labels,
    nodeconfig_part,
    unit_checked,
)
from migbake.kubernetes.labels import MIG_CONFIG_LABEL, unselectable_config
from migbake.kubernetes.managed import entries_of, verdicts
from migbake.kubernetes.objectnames import kubeadm_template_name, nodepool_name  # for the targets: re-exported
from migbake.kubernetes.overlays import NO_OVERLAYS, overlays
from migbake.kubernetes.readiness import KUBELET_KUBECONFIGS, startup_readiness
from migbake.kubernetes.resources import NodeKind, entry_resources, node_kinds, per_gpu, verify_groups
from migbake.migparted.config import config_yaml, filter_notes, mig_parted_config, uses_device_filter
from migbake.node.drivergates import driver_gate
from migbake.node.expectations import AFTER_RESET, Expectation, expectations
from migbake.profile.firstboot import commands
from migbake.profile.nodefacts import immutable_writable
from migbake.profile.nodeprofile import BasePiece, Consumer, NodeProfile
from migbake.render.guard import Block
from migbake.render.guard import line as guard_line
from migbake.render.parts import (
    NO_FORMS,
    NODE_PATHS,
    ConsumerPlan,
    DraPlan,
    ExpectPlan,
    FirstBoot,
    GroupPlacement,
    KubeletPlan,
    MigPlan,
    MimePart,
    NodePaths,
    PlatformPlan,
    RestorePlan,
    UserDataForms,
)
from migbake.slurm.gres import SlurmNode, SlurmPlan, slurm_plan

__all__ = ["KUBELET_KUBECONFIGS", "LAYOUT_FILE", "MIG_CONFIG_LABEL", "NODECONFIG_MEDIA_TYPE",
           "NO_FORMS", "BasePiece", "Consumer", "ConsumerPlan", "DraDevice", "DraEntry", "DraExpectation", "DraPlan",
           "ExpectPlan", "Expectation", "FirstBoot", "GroupPlacement", "KubeletPlan", "MigPlan", "MimePart", "NodeKind",
           "NodePaths",
           "PlacedInstance", "PlatformPlan", "RenderPlan", "RestorePlan", "SlurmNode", "SlurmPlan", "UserDataForms",
           "kubeadm_template_name", "make_plan", "nodepool_name"]

DROPIN_NAME = "20-mig-restore.conf"
LAYOUT_FILE = "/etc/migbake/layout"  # restore.layout's ``file`` source (templates/scripts/_layout-source.sh.j2)
SYSTEM_UNITS = "etc/systemd/system"


@dataclass(frozen=True)
class RenderPlan:
    """What the output tree is made of, for one node profile (paths are relative to the node's /), in parts."""

    profile: NodeProfile  # its settings only (name, paths, units, timeouts): every derived value is in a part
    header: str  # the comment lines every generated file starts with (``#`` form)
    mig: MigPlan
    expect: ExpectPlan
    kubelet: KubeletPlan
    dra: DraPlan
    slurm: SlurmPlan | None  # the slurm/ files' content, or None when the profile writes none
    platforms: PlatformPlan
    restore: RestorePlan
    consumers: ConsumerPlan
    first_boot: FirstBoot
    user_data: UserDataForms = NO_FORMS  # generate's --user-data-* options (set by ``tree.render``)
    node: NodePaths = NODE_PATHS  # where the node scripts read the machine: the real paths but in tests
    gate: GateSpec | None = None  # what OUT/kubernetes/gate/ says, where the GPU plugins wait (not kubelet)
    seed_layout: str = ""  # generate --layout: the layout name the user-data and Kickstart write (LAYOUT_FILE)

    @property
    def gate_enabled(self) -> bool:
        """Whether the GPU plugins, not kubelet, wait for the restored layout (a driver container: kubelet starts
        the driver, so holding kubelet would wait forever): OUT/kubernetes/gate/ is written."""
        return self.gate is not None

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
        return ["/" + self.consumer_dropin_rel(c.drop_in_dir) for c in self.consumers.all]


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
    checked = p.kubelet.layout if unit_checked(p) else ""
    variable = layout_variable(p)
    # kubeadm: our ExecStart= for the profile's labels, and also without them for a layout name's label
    ours = p.kubelet.layout == "kubeadm" and (layout == "kubeadm" or bool(variable))
    command = kubeadm_command(binary) if ours or checked == "kubeadm" else ""  # once: our ExecStart= and the check
    if layout == "kubeadm":
        assignment = f"{OUR_VARIABLE}={flag}"
    if ours:
        exec_start = kubeadm_exec_start(command)
    elif variable and p.kubelet.layout == "eks-al2023":
        exec_start = nodeadm_exec_start(binary)
    nodeconfig = nodeconfig_labels(flag) if layout == "eks-al2023" else ""  # once: the drop-in and the MIME part
    # the labels the variable carries besides the name's: those the drop-in's Environment= line gives it
    carried = flag[len("--node-labels="):] if variable and assignment else ""
    return KubeletPlan(layout, flag, assignment, exec_start, OUR_VARIABLE, NODEADM_DROPIN if nodeconfig else "",
                       nodeadm_dropin(nodeconfig, head) if nodeconfig else "",
                       nodeconfig_part(nodeconfig) if nodeconfig else "", binary, checked,
                       command if checked == "kubeadm" else "", variable, carried,
                       LAYOUT_LABELS_ENV if variable else "")


def _placements(p: NodeProfile) -> tuple[GroupPlacement, ...]:
    """Per entry, where apply puts its instances: the one prediction of the render (``dra.placements``)."""
    return tuple(GroupPlacement(i, g.gpu.key, g.gpu.total_memory_slices, where)
                 for i, (g, where) in enumerate(zip(p.gpus, placements(p))))


def _placement_text(instances: tuple[PlacedInstance, ...]) -> str:
    """What restore.sh compares with ``nvidia-smi mig -lgi`` for one entry: ``PROFILE@START`` sorted (C order)."""
    return " ".join(sorted(f"{i.profile}@{i.start}" for i in instances))


def _placement_groups(groups: tuple[dict[str, str], ...], placed: tuple[GroupPlacement, ...]
                      ) -> tuple[dict[str, str], ...]:
    """Per entry, what restore.sh compares with ``nvidia-smi mig -lgi`` (``_placement_text``)."""
    return tuple({**g, "placements": _placement_text(p.instances)} for g, p in zip(groups, placed))


def _named_dra(p: NodeProfile, named_where: tuple[tuple[str, EntryPlacements], ...], first: tuple[DraEntry, ...]
               ) -> tuple[NamedDevices, tuple[tuple[str, tuple[str, ...]], ...]]:
    """Allocation dra with named layouts: per name, each entry's devices (``dra_entries`` of the name's layout and
    placements; ``first``: the first name's, the plan's own) and its placements as restore.sh compares them;
    ((), ()) otherwise."""
    if p.kubernetes.allocation != "dra":
        return (), ()
    devices = tuple((name, tuple(e.instances for e in (dra_entries(p.named(name), where) if i else first)))
                    for i, (name, where) in enumerate(named_where))
    texts = tuple((name, tuple(_placement_text(i) for i in where)) for name, where in named_where)
    return devices, texts
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
    resources = entry_resources(p)  # once: the kinds' totals and verify's groups both read it
    kinds = tuple(node_kinds(p, filtered, resources))
    head = header(p)
    reset_models = tuple(sorted({g.gpu.name_as_written(g.model) for g in p.gpus if g.gpu.mig_mode_persists}))
    bootcmd, runcmd = commands(p)
    groups, placed = tuple(verify_groups(p, filtered, resources)), _placements(p)
    where = tuple(g.instances for g in placed)  # the one prediction: every reader below takes it
    # named layouts: each name's placements, the first name's being ``where`` (its layout stands for the entry)
    named_where = tuple((name, where if i == 0 else tuple(g.instances for g in _placements(p.named(name))))
                        for i, name in enumerate(p.layout_names))
    dra = dra_entries(p, where)
    dra_on = p.kubernetes.allocation == "dra"
    named_devices, named_placements = _named_dra(p, named_where, dra)
    return RenderPlan(
        profile=p,
        header=head,
        gate=gate_spec(p) if plugins_wait(p) else None,
        mig=MigPlan(
            config=config,
            config_text=config_yaml(config),
            device_filter=filtered,
            filter_notes=tuple(filter_notes(p, filtered)),
            gpu_notes=tuple(gpu_notes(p)),
            per_gpu=per_gpu,
            layout_names=p.layout_names,
            named_resources=_named_resources(p),
            unselectable_config=unselectable_config(p.restore.config_name),
        ),
        expect=ExpectPlan(
            expectations=expectations(p, filtered),
            verify_groups=groups,
            node_kinds=kinds,
            placements=placed,
            named_placements=named_where,
            gpu_modes=tuple("on" if g.mig_enabled else "off" for g in p.gpus),
            mig_on=any(g.mig_enabled for g in p.gpus),
        ),
        kubelet=_kubelet(p, flag, head),
        dra=DraPlan(
            allocation=p.kubernetes.allocation,
            entries=dra,
            expected=dra_expectations(p, dra),
            naming=naming(p.kubernetes.dra_driver_version) or "v25.12",
            claim_templates=claim_templates_yaml(p),
            placement_check=p.restore.placements if dra_on else "",
            placement_groups=_placement_groups(groups, placed) if dra_on else (),
            advertises=advertised(p),
            named_devices=named_devices,
            named_placements=named_placements,
        ),
        slurm=slurm_plan(p, kinds, where, named_where),
        platforms=PlatformPlan(
            eks=eks_family(p),
            bottlerocket=_bottlerocket(p),
            ignition_fetch=bool(p.tools.nvidia_mig_parted_url) and immutable_writable(p.tools.nvidia_mig_parted),
            download_mig_parted=bool(p.tools.nvidia_mig_parted_url),
            node_overlays=overlays(p) if eks_family(p) == "eks-al2023" else NO_OVERLAYS,
            startup=startup_readiness(p),
        ),
        restore=RestorePlan(
            config_rel=p.restore.config_path.lstrip("/"),
            unit_rel=f"{SYSTEM_UNITS}/{p.restore.unit}",
            reset_models=reset_models,
            reset_path=p.restore.on_reset_required if reset_models else "none",
            after_reset=AFTER_RESET.get(p.restore.on_reset_required, ""),  # another value: the guard stops it
            presence=gpu_presence(p.restore.no_gpu, [g["pci_ids"] for g in groups]),
            driver_gate=driver_gate(p),
            mode_on_ids=tuple(sorted({i for g in p.gpus if p.watches_driver and g.mig_enabled and
                                      g.gpu.has_mig and g.gpu.mig_mode_persists
                                      for i in (g.pci_device_ids or g.gpu.pci_device_ids)})),
        ),
        consumers=ConsumerPlan(
            all=p.all_consumers,
            text=p.consumers_text(),
            held_text=p.consumers_text(only_fail_closed=True),
            held_units=p.held_units,
            bake_pieces=p.base_pieces_at("bake"),
            boot_pieces=p.base_pieces_at("boot"),
        ),
        first_boot=FirstBoot(tuple(map(tuple, bootcmd)), tuple(map(tuple, runcmd))),
    )
