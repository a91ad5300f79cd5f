"""Kubernetes (``OUT/kubernetes/``): ResourceClaimTemplates for the devices of a ``dra`` profile, and the admission
policies that hold the GPU plugins' pods on nodes whose driver is a container (``kubernetes/gate/``).

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
from migbake.render.quoting import yaml_block, yaml_text

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


GATE = "kubernetes/gate"


def kubernetes_gate(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """``kubernetes/gate/``: the admission policies that hold the GPU plugins' pods until the node's layout is
    restored (declared to apply where the plugins, not kubelet, wait: ``plan.gate_enabled``)."""
    gate = plan.gate
    if gate is None:
        return []
    step = wait_script(templates, gate.managed_mount, gate.ready_mount)
    shared = {"plugins": gate.plugins, "container": gate.container, "ready": gate.ready, "managed": gate.managed,
              "name": "migbake-wait-for-mig"}
    rules = [{**r, "preconditions": yaml_block(r["preconditions"], 10)} for r in gate.kyverno_rules()]
    return [
        templates.file(f"{GATE}/mutating-admission-policy.yaml.j2", f"{GATE}/mutating-admission-policy.yaml", 0o644, {
            **shared, "selects": gate.selects, "daemonset_pod": gate.daemonset_pod, "not_gated": gate.not_gated,
            "apply_configuration": yaml_text(gate.apply_configuration(step), 10)}),
        templates.file(f"{GATE}/kyverno-clusterpolicy.yaml.j2", f"{GATE}/kyverno-clusterpolicy.yaml", 0o644, {
            **shared, "rules": rules, "pod_patch": yaml_block(gate.pod_patch(step), 12)}),
        Artifact(f"{GATE}/migbake-wait.sh", step, 0o644),
    ]


def wait_script(templates: Templates, managed: str, ready: str) -> str:
    """The init container's script (templates/kubernetes/gate/migbake-wait.sh.j2): the one text of the step,
    which the policies inject and the boot test runs, with the paths where it sees the two host files."""
    return templates.text(f"{GATE}/migbake-wait.sh.j2", {"managed": managed, "ready": ready})
