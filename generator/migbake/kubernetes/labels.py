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
from typing import Literal

from migbake.exits import EXIT_USAGE
from migbake.problems import MigbakeError, read_bounded

MIG_MANAGER_LABEL = "nvidia.com/gpu.deploy.mig-manager"
OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
OPERATOR_DEFAULT_CONFIG = "all-disabled"  # deployments/gpu-operator/values.yaml: migManager.config.default
MAX_NODE_JSON_BYTES = 4 * 1024 * 1024
FIX = (f"label the node {MIG_MANAGER_LABEL}=false (kubernetes.node_labels can register it so)")

Verdict = tuple[str, Literal["PASS", "WARN", "FAIL"], str]  # check, status, detail


class NodeJsonError(MigbakeError):
    """A ``kubectl get node -o json`` file that cannot be read."""

    exit_code = EXIT_USAGE  # like an unreadable option value


def read_node_labels(path: Path) -> dict[str, str]:
    """The labels of one node from ``kubectl get node NAME -o json`` (at most 4 MiB)."""
    data = read_bounded(path, MAX_NODE_JSON_BYTES, NodeJsonError)
    try:
        node = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:  # ValueError: JSONDecodeError, a 5,000-digit number
        raise NodeJsonError(f"{path}: not JSON: {err}") from err
    except RecursionError as err:  # kubectl's Node is a few levels deep; this one is not
        raise NodeJsonError(f"{path}: nested too deep to be a Node (kubectl get node NAME -o json)") from err
    if not isinstance(node, dict) or node.get("kind") != "Node":
        raise NodeJsonError(f"{path}: not one Node (kubectl get node NAME -o json; a NodeList is refused)")
    labels = node.get("metadata", {}).get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise NodeJsonError(f"{path}: metadata.labels is not a map of strings")
    return {str(k): v for k, v in labels.items()}


def label_checks(labels: Mapping[str, str], config_name: str) -> list[Verdict]:
    """``gpu-operator`` (may the operator's mig-manager run here?) and ``mig-config`` (does it name ours?)."""
    deploy = labels.get(MIG_MANAGER_LABEL)
    operator = any(k.startswith(DEPLOY_PREFIX) for k in labels)
    if labels.get(OPERANDS_LABEL) == "false":
        owner: Verdict = ("gpu-operator", "PASS",
                          f"{OPERANDS_LABEL}=false: the GPU Operator deploys nothing on this node")
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
    value = labels.get(MIG_CONFIG_LABEL)
    if value is None:
        config: Verdict = ("mig-config", "PASS", f"no {MIG_CONFIG_LABEL} label")
    elif value == config_name:
        config = ("mig-config", "PASS", f"{MIG_CONFIG_LABEL}={value}: the config this node restores")
    else:
        config = ("mig-config", "FAIL", f"{MIG_CONFIG_LABEL}={value} names a config other than ours "
                  f"({config_name}): a mig-manager of the GPU Operator would apply it over the restored layout; "
                  f"remove the label (kubectl label node NODE {MIG_CONFIG_LABEL}-) or set it to {config_name}")
    return [owner, config]
