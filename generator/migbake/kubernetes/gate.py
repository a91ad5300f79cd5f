"""Which GPU plugins' pods wait for the restored MIG layout, and how an admission policy recognises them.

On a node whose NVIDIA driver is a container, migbake cannot restore MIG before kubelet: the driver is a pod.
So the GPU clients wait instead. An admission policy (``OUT/kubernetes/gate/``) adds to their pods the init
container ``migbake-wait``, which waits for the node's ``/run/migbake/mig-ready`` (written by migbake's watcher
once the layout is restored) and passes at once on a node without ``/etc/migbake/managed`` (not migbake's).

A plugin is known by the labels its pods carry, in the GPU Operator's operands and in the standalone charts.
Every gated pod is also a DaemonSet's pod: the DaemonSet controller creates each pod with a controller
reference to its DaemonSet (kubernetes/kubernetes@v1.36.0:pkg/controller/daemon/daemon_controller.go,
``metav1.NewControllerRef``), so a user's pod that copies a plugin's labels is not held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from migbake.profile.nodeprofile import NodeProfile

WAIT_CONTAINER = "migbake-wait"
# docker-library/repo-info@01a70542:repos/busybox/remote/1.37.0.md: the index digest of busybox:1.37.0 (all
# platforms); the init container needs only sh, [ and sleep
WAIT_IMAGE = ("docker.io/library/busybox:1.37.0"
              "@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0")
READY_FILE = "/run/migbake/mig-ready"  # written by the node's watcher once the layout is restored
MANAGED_FILE = "/etc/migbake/managed"  # written on the nodes whose MIG migbake restores
# where the init container sees the two host folders (read-only hostPath volumes)
MOUNT_ROOT = "/host"
VOLUMES = (("migbake-run", "/run/migbake"), ("migbake-etc", "/etc/migbake"))

GO = "NVIDIA/gpu-operator@v26.7.0"
DP = "NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin"
DRA = "kubernetes-sigs/dra-driver-nvidia-gpu"


@dataclass(frozen=True)
class PodMatch:
    """A plugin's pods: those with the label ``key=value`` (and, where ``container`` is set, a container of that
    name, which tells apart the DaemonSets of one chart that give their pods the same labels)."""

    key: str
    value: str
    container: str = ""
    source: str = ""  # where the label (and container name) is set: repo@tag:path


# gate.plugins -> its pods. The GPU Operator labels each operand's pods app=<name>; NVIDIA's device plugin chart
# gives its three DaemonSets' pods one label, app.kubernetes.io/name=<chart name> (``templateLabels``,
# templates/_helpers.tpl), and fixed container names; the DRA driver chart labels its kubelet plugin's pods
# <chart name>-component=kubelet-plugin (``selectorLabels``, templates/_helpers.tpl).
PLUGINS: dict[str, tuple[PodMatch, ...]] = {
    "device-plugin": (
        PodMatch("app", "nvidia-device-plugin-daemonset",
                 source=f"{GO}:assets/state-device-plugin/0500_daemonset.yaml"),
        PodMatch("app.kubernetes.io/name", "nvidia-device-plugin", "nvidia-device-plugin-ctr",
                 f"{DP}/templates/daemonset-device-plugin.yml"),
    ),
    "gpu-feature-discovery": (
        PodMatch("app", "gpu-feature-discovery", source=f"{GO}:assets/gpu-feature-discovery/0500_daemonset.yaml"),
        PodMatch("app.kubernetes.io/name", "nvidia-device-plugin", "gpu-feature-discovery-ctr",
                 f"{DP}/templates/daemonset-gfd.yml"),
    ),
    "dcgm": (
        PodMatch("app", "nvidia-dcgm", source=f"{GO}:assets/state-dcgm/0400_dcgm.yml"),
        PodMatch("app", "nvidia-dcgm-dra", source=f"{GO}:manifests/state-dcgm/0500_daemonset.yaml"),
    ),
    "dcgm-exporter": (
        PodMatch("app", "nvidia-dcgm-exporter", source=f"{GO}:assets/state-dcgm-exporter/0800_daemonset.yaml"),
        PodMatch("app", "nvidia-dcgm-exporter-dra", source=f"{GO}:manifests/state-dcgm-exporter/0700_daemonset.yaml"),
    ),
    "mps-control-daemon": (
        PodMatch("app", "nvidia-device-plugin-mps-control-daemon",
                 source=f"{GO}:assets/state-mps-control-daemon/0400_daemonset.yaml"),
        PodMatch("app.kubernetes.io/name", "nvidia-device-plugin", "mps-control-daemon-ctr",
                 f"{DP}/templates/daemonset-mps-control-daemon.yml"),
    ),
    "validator": (
        PodMatch("app", "nvidia-operator-validator",
                 source=f"{GO}:assets/state-operator-validation/0500_daemonset.yaml"),
        PodMatch("app", "nvidia-dra-validator", source=f"{GO}:manifests/state-dra-validation/0500_daemonset.yaml"),
    ),
    "dra-kubelet-plugin": (
        PodMatch("app", "nvidia-dra-driver-kubelet-plugin",
                 source=f"{GO}:manifests/state-dra-driver/0500_daemonset.yaml"),
        PodMatch("dra-driver-nvidia-gpu-component", "kubelet-plugin",
                 source=f"{DRA}@v0.4.1:deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml"),
        # the same chart before it moved to kubernetes-sigs, named nvidia-dra-driver-gpu (NVIDIA/k8s-dra-driver-gpu)
        PodMatch("nvidia-dra-driver-gpu-component", "kubelet-plugin",
                 source=f"{DRA}@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml"),
    ),
}
ALWAYS = ("device-plugin", "gpu-feature-discovery", "dcgm", "dcgm-exporter", "mps-control-daemon", "validator")


def plugins_wait(profile: NodeProfile) -> bool:
    """Whether the GPU plugins, not kubelet, wait for the restored layout (a driver container: kubelet starts the
    driver, so holding kubelet would wait forever)."""
    return profile.driver == "container" or getattr(profile.restore, "hold", "") == "gpu-plugins"


def gate_plugins(profile: NodeProfile) -> tuple[str, ...]:
    """The plugins whose pods wait: ``gate.plugins``, else every one that opens the GPU (and the DRA kubelet
    plugin when the DRA driver allocates the GPUs), in PLUGINS' order."""
    chosen = profile.gate.plugins or ALWAYS + (("dra-kubelet-plugin",) if profile.dra else ())
    return tuple(p for p in PLUGINS if p in chosen)


def wait_image(profile: NodeProfile) -> str:
    """The init container's image."""
    return profile.gate.wait_image or WAIT_IMAGE


def matches(plugins: tuple[str, ...]) -> tuple[PodMatch, ...]:
    """The pod matches of ``plugins``, each once."""
    return tuple(dict.fromkeys(m for p in plugins for m in PLUGINS[p]))


def cel_text(text: str) -> str:
    """``text`` as a CEL string literal, several lines too (the init container's script): a JSON string is one, as
    CEL's double-quoted strings take the same escapes, \\n and \\uXXXX included (``dra.cel_string`` is for one line)."""
    return json.dumps(text, ensure_ascii=True)


def cel_selects(plugins: tuple[str, ...]) -> str:
    """A CEL expression over ``object`` (a Pod) true for the pods of ``plugins`` and false for any other pod,
    never an error: every field it reads may be absent from a pod."""
    labels = "object.metadata.labels"
    clauses = []
    plain: dict[str, list[str]] = {}
    for m in matches(plugins):
        if not m.container:
            plain.setdefault(m.key, []).append(m.value)
    for key, values in plain.items():
        k = cel_text(key)
        one = (f"{labels}[{k}] == {cel_text(values[0])}" if len(values) == 1
               else f"{labels}[{k}] in [{', '.join(map(cel_text, values))}]")
        clauses.append(f"({k} in {labels} && {one})")
    by_label: dict[tuple[str, str], list[str]] = {}
    for m in matches(plugins):
        if m.container:
            by_label.setdefault((m.key, m.value), []).append(m.container)
    for (key, value), names in by_label.items():
        k = cel_text(key)
        clauses.append(f"({k} in {labels} && {labels}[{k}] == {cel_text(value)} && object.spec.containers.exists("
                       f"c, c.name in [{', '.join(map(cel_text, names))}]))")
    return f"has(object.metadata.labels) && ({' || '.join(clauses)})"


CEL_DAEMONSET_POD = ("has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
                     "r.apiVersion == 'apps/v1' && r.kind == 'DaemonSet')")
CEL_NOT_GATED = (f"!has(object.spec.initContainers) || "
                 f"!object.spec.initContainers.exists(c, c.name == {cel_text(WAIT_CONTAINER)})")


_ROOT = "Object"


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
        rules.append({"name": WAIT_CONTAINER, "matches": plain, "preconditions": [daemonset]})
    shared: dict[tuple[str, str], list[PodMatch]] = {}
    for m in chosen:
        if m.container:
            shared.setdefault((m.key, m.value), []).append(m)
    for (_key, value), ms in shared.items():
        names = {"key": "{{ request.object.spec.containers[].name }}", "operator": "AnyIn",
                 "value": [m.container for m in ms]}
        rules.append({"name": f"{WAIT_CONTAINER}-{value}", "matches": ms[:1],
                      "preconditions": [daemonset, names]})
    return rules


@dataclass(frozen=True)
class GateSpec:
    """What the gate's files say for one profile (the render plan's ``gate``)."""

    plugins: tuple[str, ...]
    image: str
    selects: str = ""
    daemonset_pod: str = CEL_DAEMONSET_POD
    not_gated: str = CEL_NOT_GATED
    container: str = WAIT_CONTAINER
    ready: str = READY_FILE
    managed: str = MANAGED_FILE
    ready_mount: str = MOUNT_ROOT + READY_FILE
    managed_mount: str = MOUNT_ROOT + MANAGED_FILE

    def apply_configuration(self, script: str) -> str:
        """The policy's ApplyConfiguration expression."""
        return cel_object({"spec": pod_patch(self.image, script)}, _ROOT) + "\n"

    def kyverno_rules(self) -> list[dict[str, object]]:
        """The Kyverno rules (their preconditions as data)."""
        return kyverno_rules(self.plugins)

    def pod_patch(self, script: str) -> dict[str, object]:
        """What the policies add to a pod's spec."""
        return pod_patch(self.image, script)


def gate_spec(profile: NodeProfile) -> GateSpec:
    """The gate of ``profile``."""
    plugins = gate_plugins(profile)
    return GateSpec(plugins, wait_image(profile), cel_selects(plugins))
