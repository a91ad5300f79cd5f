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

from migbake.kubernetes.gate import (
    CEL_DAEMONSET_POD,
    CEL_NOT_GATED,
    MANAGED_FILE,
    MOUNT_ROOT,
    READY_FILE,
    VOLUMES,
    WAIT_CONTAINER,
    PodMatch,
    cel_selects,
    cel_text,
    gate_plugins,
    matches,
    wait_image,
)
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
# the API server merges an ApplyConfiguration into the pod as server-side apply does; each nested object is
# constructed by its field path (Object.spec.initContainers{...}), as in the example of
# https://kubernetes.io/docs/reference/access-authn-authz/mutating-admission-policy/ (its init container example)
_ROOT = "Object"


def kubernetes_gate(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """``kubernetes/gate/``: the admission policies that hold the GPU plugins' pods until the node's layout is
    restored (declared to apply where the plugins, not kubelet, wait: ``plan.gate_enabled``)."""
    plugins = gate_plugins(plan.profile)
    step = wait_script(templates)
    patch = pod_patch(wait_image(plan.profile), step)
    shared = {"plugins": plugins, "container": WAIT_CONTAINER, "ready": READY_FILE, "managed": MANAGED_FILE,
              "name": "migbake-wait-for-mig"}
    return [
        templates.file(f"{GATE}/mutating-admission-policy.yaml.j2", f"{GATE}/mutating-admission-policy.yaml", 0o644, {
            **shared,
            "selects": cel_selects(plugins),
            "daemonset_pod": CEL_DAEMONSET_POD,
            "not_gated": CEL_NOT_GATED,
            "apply_configuration": yaml_text(cel_object({"spec": patch}, _ROOT) + "\n", 10),
        }),
        templates.file(f"{GATE}/kyverno-clusterpolicy.yaml.j2", f"{GATE}/kyverno-clusterpolicy.yaml", 0o644, {
            **shared,
            "rules": kyverno_rules(plugins),
            "pod_patch": yaml_block(patch, 12),
        }),
        Artifact(f"{GATE}/migbake-wait.sh", step, 0o644),
    ]


def wait_script(templates: Templates, managed: str = MOUNT_ROOT + MANAGED_FILE,
                ready: str = MOUNT_ROOT + READY_FILE) -> str:
    """The init container's script (templates/kubernetes/gate/migbake-wait.sh.j2): the one text of the step,
    which the policies inject and the boot test runs, with the paths where it sees the two host files."""
    return templates.text(f"{GATE}/migbake-wait.sh.j2", {"managed": managed, "ready": ready})


def pod_patch(image: str, script: str) -> dict[str, object]:
    """What the policies add to a pod's spec: the init container and the two read-only host folders.

    The folders are hostPath DirectoryOrCreate: on a node where one is missing (a node that is not migbake's,
    or before the watcher first ran) kubelet creates it empty, so the pod still starts and the script sees no
    file (kubernetes/kubernetes@v1.36.0:staging/src/k8s.io/api/core/v1/types.go, HostPathDirectoryOrCreate).
    """
    return {
        "initContainers": [{
            "name": WAIT_CONTAINER,
            "image": image,
            "command": ["sh", "-c", script],
            "volumeMounts": [{"name": name, "mountPath": MOUNT_ROOT + path, "readOnly": True}
                             for name, path in VOLUMES],
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
        }],
        "volumes": [{"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}} for name, path in VOLUMES],
    }


def cel_object(value: object, type_path: str, indent: int = 0) -> str:
    """``value`` as a CEL value for an ApplyConfiguration: a mapping is an object of the type ``type_path`` (its
    fields' types are the path and the field name), a list's items are of the list's type."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        fields = [f"{pad}{k}: {cel_object(v, f'{type_path}.{k}', indent + 1)}" for k, v in value.items()]
        return type_path + "{\n" + ",\n".join(fields) + "\n" + "  " * indent + "}"
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value) and len(value) < 4:
            return "[" + ", ".join(cel_text(v) for v in value) + "]"
        items = [pad + cel_object(v, type_path, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return cel_text(str(value))


def kyverno_rules(plugins: tuple[str, ...]) -> list[dict[str, object]]:
    """One Kyverno rule for the plugins known by a label alone, one per label a chart gives several DaemonSets'
    pods (its container names tell them apart): each holds only pods a DaemonSet created."""
    daemonset = {"key": "{{ request.object.metadata.ownerReferences[?kind == 'DaemonSet'] || `[]` | length(@) }}",
                 "operator": "GreaterThan", "value": 0}
    chosen = matches(plugins)
    rules: list[dict[str, object]] = []
    plain = [m for m in chosen if not m.container]
    if plain:
        rules.append({"name": WAIT_CONTAINER, "matches": plain, "preconditions": yaml_block([daemonset], 10)})
    shared: dict[tuple[str, str], list[PodMatch]] = {}
    for m in chosen:
        if m.container:
            shared.setdefault((m.key, m.value), []).append(m)
    for (_key, value), ms in shared.items():
        names = {"key": "{{ request.object.spec.containers[].name }}", "operator": "AnyIn",
                 "value": [m.container for m in ms]}
        rules.append({"name": f"{WAIT_CONTAINER}-{value}", "matches": ms[:1],
                      "preconditions": yaml_block([daemonset, names], 10)})
    return rules
