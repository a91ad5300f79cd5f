"""What a node of each layout name will advertise, per GPU model, for Karpenter's NodeOverlay (scale from zero).

Karpenter learns extended resources only from nodes that run, so a pod asking for ``nvidia.com/mig-1g.10gb``
cannot make an empty MIG NodePool launch a node. A ``NodeOverlay`` (``karpenter.sh/v1alpha1``) adds extended
resources to the instance types its ``requirements`` select in the scheduling simulation; its ``capacity`` of
several overlays that match one instance type is merged (kubernetes-sigs/karpenter@v1.14.1:
pkg/apis/crds/karpenter.sh_nodeoverlays.yaml, pkg/controllers/nodeoverlay/controller.go).

The numbers are those ``migbake show`` prints (``resources.node_kinds`` of the profile as a node of that
name sees it, under its MIG strategy and device-plugin version): one overlay per (layout name, GPU model),
for a kind of node whose GPU count is known.

Karpenter matches an overlay against the NodePool's name (``karpenter.sh/nodepool``), its template labels and
the instance type's own labels (controller.go ``getOverlaidOfferings``). The AWS provider labels each
instance type with its GPUs' name, memory in MiB and count: ``karpenter.k8s.aws/instance-gpu-name``,
``-memory``, ``-count`` (aws/karpenter-provider-aws@v1.14.1: pkg/apis/v1/labels.go; values from
pkg/providers/instancetype/types.go, lower-cased). ``EC2_GPUS`` holds those values for the catalog's models
that EC2 sells, as the provider's instance-type reference lists them
(aws/karpenter-provider-aws@v1.14.1: website/content/en/docs/reference/instance-types.md: p4d.24xlarge,
p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge, p6-b300.48xlarge).
"""

from __future__ import annotations

from dataclasses import dataclass

from migbake.kubernetes.resources import node_kinds
from migbake.profile.nodeprofile import NodeProfile

# catalog model key: (karpenter.k8s.aws/instance-gpu-name, karpenter.k8s.aws/instance-gpu-memory in MiB)
EC2_GPUS: dict[str, tuple[str, str]] = {
    "a100-40gb": ("a100", "40960"),  # p4d
    "a100-80gb": ("a100", "81920"),  # p4de
    "h100-80gb": ("h100", "81920"),  # p5
    "h200-141gb": ("h200", "144384"),  # p5e, p5en
    "b200-180gb": ("b200", "183359"),  # p6-b200
    "b300": ("b300", "275040"),  # p6-b300
}
GPU_NAME_LABEL = "karpenter.k8s.aws/instance-gpu-name"
GPU_MEMORY_LABEL = "karpenter.k8s.aws/instance-gpu-memory"
GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"


@dataclass(frozen=True)
class Overlay:
    """One NodeOverlay's content: a layout name on the instance types of one GPU model."""

    layout: str
    model: str  # catalog key
    gpus: int  # the GPUs of such a node
    capacity: tuple[tuple[str, int], ...]  # extended resource, count (show's totals)
    instance_labels: tuple[tuple[str, str], ...]  # the AWS provider's labels of the instance types it fits


@dataclass(frozen=True)
class OverlayPlan:
    """The overlays, and why a layout's model gets none (one line each)."""

    overlays: tuple[Overlay, ...] = ()
    left_out: tuple[str, ...] = ()


NO_OVERLAYS = OverlayPlan()  # a profile Karpenter does not start (kubelet.layout other than eks-al2023)


def overlays(profile: NodeProfile) -> OverlayPlan:
    """Per layout name, per kind of node ``show`` lists: an overlay when that kind has one GPU model that EC2
    sells and a known GPU count, else a line saying why not."""
    if profile.kubernetes.allocation != "device-plugin":
        # pods ask for DRA devices (ResourceClaims), not extended resources: an overlay cannot describe them
        return OverlayPlan((), (f"any layout: kubernetes.allocation {profile.kubernetes.allocation} publishes "
                                "DRA devices, which a NodeOverlay cannot describe (docs/karpenter.md)",))
    found: list[Overlay] = []
    left_out: list[str] = []
    for name in profile.layout_names:
        named = profile.named(name)
        for kind in node_kinds(named):
            models = sorted({named.models[i].key for i in kind.groups})
            what = f"layout {name}, {kind.label}"
            if len(models) != 1:
                left_out.append(f"{what}: GPUs of several models on one node ({', '.join(models)})")
            elif models[0] not in EC2_GPUS:
                left_out.append(f"{what}: migbake knows no EC2 instance type with {models[0]} GPUs")
            elif kind.totals is None or None in kind.gpus:
                left_out.append(f"{what}: the GPU count is unknown (set gpu_count)")
            elif not kind.totals:
                left_out.append(f"{what}: it advertises no extended resource")
            else:
                gpus = sum(n for n in kind.gpus if n is not None)
                gpu_name, memory = EC2_GPUS[models[0]]
                labels = ((GPU_NAME_LABEL, gpu_name), (GPU_MEMORY_LABEL, memory), (GPU_COUNT_LABEL, str(gpus)))
                found.append(Overlay(name, models[0], gpus, tuple(kind.totals.items()), labels))
    return OverlayPlan(tuple(found), tuple(left_out))
