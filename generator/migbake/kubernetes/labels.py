"""The GPU Operator beside migbake: the node labels that decide who owns MIG on a node.

Exactly one manager may own MIG on a node. With the GPU Operator's mig-manager enabled (its default),
every MIG-capable node without ``nvidia.com/mig.config`` is labelled with ``migManager.config.default``
(``all-disabled``) and the operator's mig-manager applies that after kubelet starts, undoing the
restored layout (gpu-operator ``controllers/nodelabeling_controller.go``). Its DaemonSet runs only where
``nvidia.com/gpu.deploy.mig-manager`` is ``true`` (``assets/state-mig-manager``). So a node whose MIG
migbake owns carries ``nvidia.com/gpu.deploy.mig-manager=false``, and ``nvidia.com/mig.config``, if set,
names our config. The generated verify and preflight scripts word the same verdicts
(``templates/scripts/_gpu-operator-labels.sh.j2``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from migbake.document.files import read_file_or_pipe
from migbake.document.patterns import whole
from migbake.document.shape_limits import json_shape, yaml_shape
from migbake.exits import EXIT_USAGE
from migbake.problems import MigbakeError

MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
OPERATOR_DEFAULT_CONFIG = "all-disabled"  # deployments/gpu-operator/values.yaml: migManager.config.default
# What `kubectl label` and the API server accept as a label's value (labelValueFmt, LabelValueMaxLength):
# kubernetes/kubernetes:staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
# @03014f486c86dbe8a7fbe275fe14250854aab219
LABEL_VALUE = whole(r"^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_VALUE_MAX = 63
MAX_NODE_JSON_BYTES = 4 * 1024 * 1024
MAX_DOCUMENT_DEPTH = 64  # kubectl's Node (managedFields included) and ClusterPolicy nest about 10 deep
MAX_DIGITS = 64  # Python's int() of thousands of digits is quadratic, and refuses 4,300 with a ValueError
NODE_JSON = "kubectl get node NAME -o json"
CLUSTER_POLICY = "kubectl get clusterpolicy NAME -o json"
FIX = (f"label the node {MIG_MANAGER_LABEL}=false (kubernetes.node_labels can register it so; the operator "
       "keeps a value that is set), or set migManager.enabled=false in the ClusterPolicy")

Status = Literal["PASS", "WARN", "NOTE", "FAIL"]
Verdict = tuple[str, Status, str]  # check, status, detail
POLICY_OFF = "the ClusterPolicy sets migManager.enabled=false"
GPU_CLUSTER_OFF = "the GPU Operator's DRA stack (GPUCluster) runs no MIG manager"


class NodeJsonError(MigbakeError):
    """A ``kubectl get node -o json`` file that cannot be read."""

    exit_code = EXIT_USAGE  # like an unreadable option value (a malformed nvidia-smi capture is exit 2 too)


try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader


def kind_word(value: object) -> str:
    """How a JSON/YAML value is named in a message: ``null``, ``a list``, ``a string``, ..."""
    if value is None:
        return "null"
    kinds = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"), (list, "a list"),
             (dict, "an object"))
    return next((word for t, word in kinds if isinstance(value, t)), type(value).__name__)


def _text(path: Path, what: str, *, yaml_too: bool) -> str:
    """The file's text (at most MAX_NODE_JSON_BYTES), its nesting and numbers within bounds before it is parsed."""
    data = read_file_or_pipe(path, MAX_NODE_JSON_BYTES, NodeJsonError)  # <(kubectl get ... -o json) too
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NodeJsonError(f"{path}: not UTF-8 text: {err}") from err
    shape = (yaml_shape if yaml_too else json_shape)(text, max_depth=MAX_DOCUMENT_DEPTH, max_digits=MAX_DIGITS)
    if shape is not None and shape.kind == "depth":
        raise NodeJsonError(f"{path}: line {shape.line}, column {shape.col}: nested deeper than "
                            f"{MAX_DOCUMENT_DEPTH} levels; {what} is a few levels deep")
    if shape is not None:
        raise NodeJsonError(f"{path}: line {shape.line}, column {shape.col}: a number of {shape.length} "
                            f"characters; {what} has none longer than {MAX_DIGITS}")
    return text


def _member(doc: dict[str, Any], key: str, path: Path, pointer: str) -> dict[str, Any]:
    """``doc[key]`` when it is an object (absent: empty); NodeJsonError naming its pointer otherwise."""
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise NodeJsonError(f"{path}: {pointer}: {kind_word(value)}, not an object")
    return value


def read_node(path: Path) -> tuple[dict[str, str], str]:
    """The labels and ``metadata.name`` ("" when it is no string) of one node from ``kubectl get node NAME -o json``
    (at most 4 MiB, 64 levels deep), the file read once: a pipe (``<(kubectl ...)``) cannot be read again."""
    text = _text(path, NODE_JSON, yaml_too=False)
    try:
        node = json.loads(text)
    except ValueError as err:  # JSONDecodeError
        raise NodeJsonError(f"{path}: not JSON: {err}") from err
    if not isinstance(node, dict) or node.get("kind") != "Node":
        raise NodeJsonError(f"{path}: not one Node ({NODE_JSON}; a NodeList is refused)")
    metadata = _member(node, "metadata", path, "/metadata")
    labels = _member(metadata, "labels", path, "/metadata/labels")
    for key, value in labels.items():
        if not isinstance(value, str):
            pointer = "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")
            raise NodeJsonError(f"{path}: {pointer}: {kind_word(value)}, not a string (a label's value)")
    name = metadata.get("name")
    return dict(labels), name if isinstance(name, str) else ""


def node_name_of(path: Path, name: str) -> str:
    """``metadata.name`` as ``read_node`` gave it, refused when it names no node."""
    if not name:
        raise NodeJsonError(f"{path}: metadata.name is not a node name")
    return name


def read_node_labels(path: Path) -> dict[str, str]:
    """The labels of one node from ``kubectl get node NAME -o json`` (at most 4 MiB, 64 levels deep)."""
    return read_node(path)[0]


def label_value_problem(value: str) -> str:
    """Why ``value`` can be no Kubernetes label value ("" when it can be one)."""
    if len(value) > LABEL_VALUE_MAX:
        return f"{len(value)} characters; a label value has at most {LABEL_VALUE_MAX}"
    if not LABEL_VALUE.match(value):
        return "a label value starts and ends with a letter or digit, with only - _ . between"
    return ""


def config_label_problem(config_name: str) -> str:
    """Why ``nvidia.com/mig.config`` can never name ``config_name`` ("" when it can)."""
    why = label_value_problem(config_name)
    return (f"restore.config_name {config_name!r} can be no value of the label {MIG_CONFIG_LABEL} ({why}), so the "
            "GPU Operator's mig-manager can never select it: end it with a letter or digit") if why else ""


def unselectable_config(config_name: str) -> str:
    """The ``mig-config`` check's WARN detail for a node without the label when no label could name
    ``config_name`` ("" when one could): offline preflight and the generated scripts say the same."""
    why = config_label_problem(config_name)
    return f"no {MIG_CONFIG_LABEL} label, and none could name our config: {why}" if why else ""


def label_checks(labels: Mapping[str, str], config_name: str, *, node_labels: tuple[tuple[str, str], ...] = (),
                 mig_manager_enabled: bool | None = None, missing_label: Status = "WARN",
                 operator_kind: str = "ClusterPolicy") -> list[Verdict]:
    """``gpu-operator`` (may the operator's mig-manager run here?), ``mig-config`` (does it name ours, or
    act on nothing?) and, with ``node_labels``, ``node-labels`` (did kubelet register the node with them?).

    ``mig_manager_enabled``: the ClusterPolicy's ``spec.migManager.enabled`` when one was given (None:
    unknown; a GPUCluster, ``operator_kind``, has none). The operator puts ``mig.config=all-disabled`` on
    every MIG-capable node without the label while migManager is enabled, whatever
    ``gpu.deploy.mig-manager`` says (``nodelabeling_controller.go``), and adds
    ``gpu.deploy.mig-manager=true`` only where that label is absent (``state_manager.go``).
    """
    deploy = labels.get(MIG_MANAGER_LABEL)
    gpu_cluster = operator_kind == "GPUCluster"
    off = GPU_CLUSTER_OFF if gpu_cluster else POLICY_OFF
    operator = any(k.startswith(DEPLOY_PREFIX) for k in labels)
    if labels.get(OPERANDS_LABEL) == "false":
        owner: Verdict = ("gpu-operator", "PASS",
                          f"{OPERANDS_LABEL}=false: the GPU Operator deploys nothing on this node")
    elif mig_manager_enabled is False:
        owner = ("gpu-operator", "PASS", f"{off}: the GPU Operator deploys no mig-manager on any node")
    elif deploy == "false":
        owner = ("gpu-operator", "PASS", f"{MIG_MANAGER_LABEL}=false: the GPU Operator deploys no mig-manager on "
                 "this node")
    elif deploy is not None:
        owner = ("gpu-operator", "FAIL", f"{MIG_MANAGER_LABEL}={deploy}: the GPU Operator deploys its mig-manager "
                 f"on this node, which applies the config that {MIG_CONFIG_LABEL} names ({OPERATOR_DEFAULT_CONFIG} "
                 f"by default) after kubelet starts and undoes the restored layout; {FIX}")
    elif operator:
        owner = ("gpu-operator", "WARN", f"the GPU Operator labels this node ({DEPLOY_PREFIX}*) but has not set "
                 f"{MIG_MANAGER_LABEL}: it deploys its mig-manager once the node is MIG-capable; {FIX}")
    else:
        owner = ("gpu-operator", "PASS", f"no GPU Operator labels on this node ({DEPLOY_PREFIX}*)")
    idle = labels.get(OPERANDS_LABEL) == "false" or mig_manager_enabled is False or deploy == "false"
    value = labels.get(MIG_CONFIG_LABEL)
    if value is None and unselectable_config(config_name):
        config: Verdict = ("mig-config", "WARN", unselectable_config(config_name))
    elif value is None:
        config = ("mig-config", "PASS", f"no {MIG_CONFIG_LABEL} label")
    elif value == config_name:
        config = ("mig-config", "PASS", f"{MIG_CONFIG_LABEL}={value}: the config this node restores")
    elif idle:
        why = off if mig_manager_enabled is False and deploy != "false" else (
            f"{OPERANDS_LABEL}=false" if labels.get(OPERANDS_LABEL) == "false" else f"{MIG_MANAGER_LABEL}=false")
        tail = (f"a GPUCluster reads no {MIG_CONFIG_LABEL} label" if gpu_cluster else
                f"the operator sets {OPERATOR_DEFAULT_CONFIG} on every MIG-capable node without the label while "
                "migManager is enabled, and sets it again if removed")
        config = ("mig-config", "NOTE", f"{MIG_CONFIG_LABEL}={value} acts on nothing here: no mig-manager of the "
                  f"GPU Operator runs on this node ({why}); {tail}")
    else:
        config = ("mig-config", "FAIL", f"{MIG_CONFIG_LABEL}={value} names a config other than ours "
                  f"({config_name}): a mig-manager of the GPU Operator would apply it over the restored layout; "
                  f"removing the label does not last (the operator sets {OPERATOR_DEFAULT_CONFIG} again on a "
                  f"MIG-capable node without it): label the node {MIG_MANAGER_LABEL}=false (the operator keeps "
                  "a value that is set), or set migManager.enabled=false in the ClusterPolicy")
    checks = [owner, config]
    if node_labels:
        missing = [f"{k}={v}" for k, v in node_labels if labels.get(k) != v]
        if missing:
            checks.append(("node-labels", missing_label, f"the node lacks {', '.join(missing)} "
                           "(kubernetes.node_labels): kubelet sets them only when the node registers (delete the "
                           "Node object and restart kubelet, or kubectl label it), and only where kubelet.layout "
                           "matches how this node starts kubelet"))
        else:
            checks.append(("node-labels", "PASS", f"the node has {', '.join(f'{k}={v}' for k, v in node_labels)} "
                           "(kubernetes.node_labels)"))
    return checks


GPU_CLUSTER_NOTE = ("the GPU Operator's DRA stack (GPUCluster): it runs no MIG manager and reads no "
                    f"{MIG_CONFIG_LABEL} label (NVIDIA/gpu-operator:internal/state/manager.go@v26.7.0 reconciles "
                    "the DRA driver, DCGM, DCGM Exporter and the DRA validator only); the node's MIG layout is "
                    "the restore's alone")


def read_document(path: Path, what: str) -> Any:
    """The one JSON or YAML document of ``path`` (``what``: the kubectl command that prints it), read once with the
    bounds of ``--node-json`` (4 MiB, 64 levels deep, numbers of 64 characters); YAML aliases are refused."""
    text = _text(path, what, yaml_too=True)
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_Loader)):
            raise NodeJsonError(f"{path}: YAML aliases are not read")
        return yaml.load(text, Loader=_Loader)  # JSON is YAML
    except yaml.YAMLError as err:
        raise NodeJsonError(f"{path}: not JSON or YAML: {err}") from err


def read_cluster_policy(path: Path) -> bool:
    """``spec.migManager.enabled`` of a ClusterPolicy (``kubectl get clusterpolicy NAME -o json`` or ``-o yaml``;
    a List holding exactly one ClusterPolicy is taken too). Unset means enabled (``MIGManagerSpec.IsEnabled``).
    A GPUCluster (``nvidia.com/v1alpha1``, the operator's DRA stack) has no MIG manager: False. Read with the
    bounds of ``--node-json``: 4 MiB, 64 levels deep, numbers of 64 characters."""
    return read_operator_cr(path)[1]


def read_operator_cr(path: Path) -> tuple[str, bool]:
    """The kind (ClusterPolicy or GPUCluster) and whether the operator runs a mig-manager (see above)."""
    doc = read_document(path, CLUSTER_POLICY)
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        items = [i for i in doc["items"] if isinstance(i, dict) and i.get("kind") in ("ClusterPolicy", "GPUCluster")]
        doc = items[0] if len(items) == 1 else None
    if isinstance(doc, dict) and doc.get("kind") == "GPUCluster":
        # NVIDIA/gpu-operator:api/nvidia/v1alpha1/gpucluster_types.go@v26.7.0: no MIG field at all
        return "GPUCluster", False
    if not isinstance(doc, dict) or doc.get("kind") != "ClusterPolicy":
        raise NodeJsonError(f"{path}: not one ClusterPolicy or GPUCluster ({CLUSTER_POLICY}, "
                            "kubectl get gpucluster gpu-cluster -o json)")
    mig = _member(_member(doc, "spec", path, "/spec"), "migManager", path, "/spec/migManager")
    enabled = mig.get("enabled", True)
    if not isinstance(enabled, bool):
        raise NodeJsonError(f"{path}: /spec/migManager/enabled: {kind_word(enabled)}, not true or false")
    return "ClusterPolicy", enabled
