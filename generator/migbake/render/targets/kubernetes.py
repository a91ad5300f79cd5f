"""Kubernetes (``OUT/kubernetes/``): ResourceClaimTemplates for the devices of a ``dra`` profile.

One ``resource.k8s.io/v1`` ResourceClaimTemplate per GPU-instance profile (of every layout name, with named
layouts: the union, one file for the pods of every pool): one device of the device class
``mig.nvidia.com`` whose ``profile`` attribute is that profile (the CEL form of
kubernetes-sigs/dra-driver-nvidia-gpu:demo/specs/quickstart/v1/gpu-test4.yaml@v25.12.0); and one per model of
the entries with MIG off: one whole GPU of the device class ``gpu.nvidia.com`` of that model (gpu-test1.yaml).
docs/dra.md shows the ``resource.k8s.io/v1beta2`` form for Kubernetes 1.32/1.33.
"""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard
from migbake.render.plan import RenderPlan

CLAIM_TEMPLATES = "kubernetes/resource-claim-templates.yaml"


def kubernetes(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """``kubernetes/resource-claim-templates.yaml`` (declared to apply when the profile's allocation is ``dra``)."""
    lines = [plan.header,
             "# One ResourceClaimTemplate per MIG profile of the layout, and per GPU model with MIG off (a whole",
             "# GPU, device class gpu.nvidia.com) (kubernetes.allocation: dra): reference",
             "# one from a pod's spec.resourceClaims[].resourceClaimTemplateName and the container's",
             "# resources.claims. resource.k8s.io/v1 needs Kubernetes 1.34 or later (docs/dra.md has the",
             "# v1beta2 form for 1.32/1.33). Apply with kubectl apply -n NAMESPACE -f this file."]
    if plan.mig.layout_names:
        lines += [f"# Named layouts ({', '.join(plan.mig.layout_names)}): the MIG profiles of every name, one set of",
                  "# templates for every pool; a claim is allocated on a node whose layout has that profile."]
    text = "\n".join(lines) + "\n" + plan.dra.claim_templates
    return [Artifact(CLAIM_TEMPLATES, guard(Block(text), "yaml", CLAIM_TEMPLATES), 0o644)]
