"""``migbake show``: each GPU drawn slice by slice, what the restore runs before, its Kubernetes and Slurm resources.

Last, per GPU model, whether GKE, AKS and Bottlerocket express the layout natively (``kubernetes.managed``).
With named layouts (``mig.layouts``), where a node learns its name, then all of that per name.
"""

from __future__ import annotations

from pathlib import Path

import click

from migbake.commands.common import PROFILE_PATH, valid_profile
from migbake.exits import printable
from migbake.gpu.boardnames import twin_lines
from migbake.gpu.catalog import Catalog, CatalogChoice
from migbake.gpu.placement import fit
from migbake.gpu.slicemap import render_slice_map
from migbake.kubernetes.dra import dra_report
from migbake.kubernetes.kubelet import LAYOUT_LABELS_ENV, eks_family, layout_report, layout_variable
from migbake.kubernetes.managed import entries_of, managed_report
from migbake.kubernetes.resources import resource_report
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.plan import gpu_notes, make_plan, nodepool_name
from migbake.render.targets.clusterapi import TEMPLATE_V1BETA2, object_name_of
from migbake.render.targets.karpenter import NODEPOOLS
from migbake.slurm.gres import show_lines
from migbake.wording import instances


def _say(text: str = "") -> None:
    """Lines of output, every character a terminal would act on escaped (a description's U+202E too)."""
    click.echo("\n".join(printable(line) for line in text.split("\n")))


@click.command()
@click.argument("profile", type=PROFILE_PATH)
def show(profile: Path) -> None:
    """Draw each GPU's memory slices with the profile's MIG instances placed on them (`-`: standard input)."""
    prof = valid_profile(profile)
    catalog = click.get_current_context().ensure_object(CatalogChoice).load()
    _say(f"{prof.name}: {prof.description}" if prof.description else prof.name)
    for note in gpu_notes(prof):
        _say(f"  {note}")
    closed = [c.unit for c in prof.all_consumers if c.fail_closed]
    opened = [c.unit for c in prof.all_consumers if not c.fail_closed]
    _say(f"  The restore runs before {prof.consumers_text() if prof.all_consumers else 'no consumer'}"
               + (f"; a failed restore keeps {', '.join(closed)} down" if closed else "")
               + (f"; {', '.join(opened)} start anyway" if opened else "") + ".")
    if not prof.layout_names:
        _layout(prof, catalog, named=False)
        return
    default = prof.restore.layout_default
    _say(f"  Layouts: {', '.join(prof.layout_names)}; a node learns its name at boot from "
         f"{', '.join(prof.restore.layout_from)} (in that order), "
         + (f"else takes {default}" if default else "else fails closed")
         + "; an unknown name fails closed (docs/layouts-at-boot.md).")
    if "ec2-tag" in prof.restore.layout_from:
        _say(f"  ec2-tag reads the instance tag {prof.restore.layout_ec2_tag_key} through IMDSv2, only where access "
             "to tags in instance metadata is allowed on the instance (off by default; Karpenter disables it).")
    if "gce-metadata" in prof.restore.layout_from or "ec2-tag" in prof.restore.layout_from:
        _say(f"  The network sources need curl on the node and wait at most "
             f"{prof.restore.layout_network_wait_seconds} s in all; no answer is no name from them.")
    karpenter = eks_family(prof) == "eks-al2023"
    if karpenter:
        _say(f"  Karpenter: one NodePool per name in OUT/{NODEPOOLS}, labelling its nodes nvidia.com/mig.config=NAME, "
             + ("which the restore reads (kubelet-labels)." if "kubelet-labels" in prof.restore.layout_from else
                "but restore.layout.from lacks kubelet-labels: the restore does not read that label.")
             + " EC2 instance tags cannot say the name: Karpenter disables them in instance metadata.")
    variable = layout_variable(prof)
    others = [s for s in prof.restore.layout_from if s != "kubelet-labels"] + (["the default"] if default else [])
    if prof.kubelet.present and others:
        _say("  Node label: when " + " or ".join(others) + " gives the name"
             + (f", the restore gives kubelet nvidia.com/mig.config=NAME in {variable} of {LAYOUT_LABELS_ENV}, "
                "which the kubelet drop-in reads." if variable else
                f", kubelet gets no label for it: kubelet.layout {prof.kubelet.layout} has no variable migbake "
                "passes to kubelet (generic: kubernetes.kubelet_args_env)."))
    capi = prof.kubelet.present and prof.kubelet.layout == "kubeadm"
    if capi:
        per_name = TEMPLATE_V1BETA2.replace(".yaml", "-NAME.yaml")
        _say(f"  Cluster API: one KubeadmConfigTemplate per name in OUT/{per_name}"
             + (", which writes the name to /etc/migbake/layout (file)." if "file" in prof.restore.layout_from else
                ", labelled only: restore.layout.from lacks file, so a Cluster API node learns no name at its first "
                "boot (cluster-api-layout-source)."))
    for name in prof.layout_names:
        _say(f"\n=== layout {name} (nvidia.com/mig.config={name}) ===")
        if karpenter:
            _say(f"  Karpenter NodePool: {nodepool_name(prof.name, name)}")
        if capi:
            _say(f"  Cluster API KubeadmConfigTemplate: {object_name_of(prof.name, name)}")
        _layout(prof.named(name), catalog, named=True, folder=f"slurm/{name}/")


def _layout(prof: NodeProfile, catalog: Catalog, *, named: bool, folder: str = "slurm/") -> None:
    """Each entry drawn, then the resources and the managed platforms of one layout of the profile (``folder``:
    where its Slurm files are)."""
    plan = make_plan(prof)  # the placements, Slurm's nodes and the DRA devices: predicted once, as generate does
    for i, (group, m) in enumerate(zip(prof.gpus, prof.models)):
        devices = "all GPUs" if group.devices == "all" else "GPUs " + ", ".join(map(str, group.devices))
        _say(f"\n/gpus/{i}: {m.key}, {devices}")
        dynamic = prof.kubernetes.allocation == "dra-dynamic"
        if not group.mig_enabled:
            _say("  MIG disabled: the DRA driver turns MIG on per claim" if dynamic and m.has_mig
                       else "  MIG disabled: the whole GPU is one device")
            continue
        layout = group.layout_dict
        if not layout:
            _say("  MIG enabled, no instances" + (": the DRA driver creates them per claim" if dynamic else ""))
            continue
        _say(f"  {instances(layout)}")
        for line in twin_lines(catalog, m, layout):
            _say(line)
        # under dra the plan's placements (what the driver names and the restore checks), else the packing
        placed = plan.expect.placements[i].instances if prof.kubernetes.allocation == "dra" else \
            fit(m, layout).placements
        _say(render_slice_map(m, placed))
    if plan.slurm is not None:
        for line in show_lines(prof, plan.slurm.nodes, plan.expect.node_kinds, folder):
            _say(line)
    if prof.kubelet.present or plan.slurm is None:
        if plan.slurm is not None:
            _say()
        for line in (dra_report(prof, plan.dra.entries) if prof.dra else resource_report(prof)):
            _say(line)
        for line in layout_report(prof):
            _say(line)
    for line in managed_report(entries_of(prof.gpus), prof.gpu_count, prof.kubelet.present,
                               prof.kubernetes.allocation, named):
        _say(line)
