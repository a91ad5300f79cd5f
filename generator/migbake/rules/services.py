"""Semantic rules about the restore's neighbours: its timing, the services that wait for it, kubelet's labels.

Like ``rules.general`` these read the raw data defensively (the schema may have failed elsewhere) and
yield problems with a rule id; ``rules.registry.CHECKS`` runs them with the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migbake.document.loader import LoadedProfile, join_pointer
from migbake.document.patterns import whole
from migbake.gpu.catalog import Catalog
from migbake.kubernetes.labels import MIG_CONFIG_LABEL, MIG_MANAGER_LABEL, config_label_problem
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.rules.layoutnames import layout_names
from migbake.rules.units import unsafe_env

# label namespaces kubelet may set on its own node (NodeRestriction admission plugin); any other key
# under kubernetes.io / k8s.io is refused at registration
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
KUBELET_LABEL_KEYS = ("kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os",
                      "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
                      "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
                      "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                      "failure-domain.beta.kubernetes.io/zone")


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object, default: int) -> int | None:
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@rule("driver-wait-timeout", "error", "restore.driver_wait_seconds (with a network layout source, plus "
      "restore.layout.network_wait_seconds) not below restore.timeout_seconds")
def rule_driver_wait(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The driver wait, and the network sources' wait before it, end before systemd's start timeout kills the
    restore."""
    restore = _mapping(_mapping(data).get("restore"))
    wait = _int(restore.get("driver_wait_seconds"), 120)
    timeout = _int(restore.get("timeout_seconds"), 480)
    choice = _mapping(restore.get("layout"))
    sources = choice.get("from")
    network = isinstance(sources, list) and bool({"gce-metadata", "ec2-tag"} & {str(s) for s in sources})
    net_wait = _int(choice.get("network_wait_seconds"), 20) if network else 0
    if wait is None or timeout is None or net_wait is None or wait + net_wait < timeout:
        return
    where = "/restore/driver_wait_seconds" if "driver_wait_seconds" in restore else "/restore/timeout_seconds"
    what = (f"driver_wait_seconds {wait} and restore.layout.network_wait_seconds {net_wait} together are"
            if net_wait else f"driver_wait_seconds {wait} is")
    yield loaded.problem(where, f"{what} not less than timeout_seconds {timeout}: systemd "
                         "would kill the restore (TimeoutStartSec) while it still waits for the driver, without "
                         "saying why; lower restore.driver_wait_seconds or raise restore.timeout_seconds",
                         "driver-wait-timeout")


@rule("consumer-clash", "error", "a consumer that is kubelet, the restore itself, or listed twice")
def rule_consumers(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each consumer is listed once and is none of the restore, the manager or the built-in kubelet."""
    d = _mapping(data)
    consumers = d.get("consumers")
    if not isinstance(consumers, list):
        return
    kubelet = _mapping(d.get("kubelet"))
    others = {
        _mapping(d.get("restore")).get("unit", "nvidia-mig-restore.service"): "the restore unit itself",
        _mapping(d.get("conflicting_manager")).get("unit", "nvidia-mig-manager.service"):
            "the conflicting manager, which the bake masks or disables",
    }
    if kubelet.get("present", True) is True:
        others[kubelet.get("unit", "kubelet.service")] = ("kubelet, the built-in consumer (kubelet.present is "
                                                         "true); remove it here, or set kubelet.present: false")
    seen: dict[str, int] = {}
    for i, c in enumerate(consumers):
        unit = _mapping(c).get("unit")
        if not isinstance(unit, str):
            continue
        ptr = f"/consumers/{i}/unit"
        if isinstance(others.get(unit), str):
            yield loaded.problem(ptr, f"{unit!r} is {others[unit]}", "consumer-clash")
        elif unit in seen:
            yield loaded.problem(ptr, f"{unit!r} is already /consumers/{seen[unit]}: list each consumer once",
                                 "consumer-clash")
        else:
            seen[unit] = i


@rule("provided-later-unknown", "error",
      "an image.provided_later unit that is neither kubelet's nor a fail-closed consumer's")
def rule_provided_later(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each unit of image.provided_later is one the bake checks: kubelet's (if present), a fail-closed consumer's."""
    d = _mapping(data)
    items = _mapping(d.get("image")).get("provided_later")
    if not isinstance(items, list):
        return
    kubelet = _mapping(d.get("kubelet"))
    checked = [kubelet.get("unit", "kubelet.service")] if kubelet.get("present", True) is True else []
    consumers = d.get("consumers")
    checked += [_mapping(c).get("unit") for c in (consumers if isinstance(consumers, list) else [])
                if _mapping(c).get("fail_closed", True) is True]
    allowed = ", ".join(["nvidia-mig-parted", "nvidia-smi", *(u for u in checked if isinstance(u, str))])
    for i, item in enumerate(items):
        if isinstance(item, str) and item.endswith(".service") and item not in checked:
            yield loaded.problem(f"/image/provided_later/{i}", f"{item!r} is not something the bake checks "
                                 "(kubelet's unit when kubelet.present, or a fail-closed consumer's); "
                                 f"allowed here: {allowed}", "provided-later-unknown")


def _kubelet_may_set(key: str) -> bool:
    prefix = key.rpartition("/")[0]
    if not prefix:
        return True
    restricted = prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io"))
    return (not restricted or key in KUBELET_LABEL_KEYS or prefix in KUBELET_LABEL_NAMESPACES
            or prefix.endswith(tuple("." + n for n in KUBELET_LABEL_NAMESPACES)))


_CONFIG_NAME_CHARACTERS = whole(r"^[A-Za-z0-9_.-]{1,63}$")


@rule("config-name-label", "warning",
      "restore.config_name no label value can carry (a trailing - . _): nvidia.com/mig.config cannot select it")
def rule_config_name_label(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Where kubelet runs, restore.config_name can be a label value: nvidia.com/mig.config=<name> selects it."""
    d = _mapping(data)
    name = _mapping(d.get("restore")).get("config_name")
    if _mapping(d.get("kubelet")).get("present", True) is False or not isinstance(name, str):
        return
    if not _CONFIG_NAME_CHARACTERS.match(name):
        return  # the schema's pattern refuses it (schema-pattern): no warning on top
    why = config_label_problem(name)
    if why:
        yield loaded.problem("/restore/config_name", why + " (migbake export --gpu-operator refuses it)",
                             "config-name-label")


@rule("node-labels-no-args-env", "error", "kubernetes.node_labels with kubelet.layout generic and no kubelet_args_env")
@rule("node-labels-env-file", "warning",
      "kubelet.layout generic: an EnvironmentFile= of kubelet may override kubelet_args_env")
@rule("args-env-with-layout", "error", "kubernetes.kubelet_args_env with a kubelet.layout other than generic")
@rule("node-labels-no-kubelet", "error", "kubernetes.node_labels with kubelet.present: false")
@rule("node-label-restricted", "error", "a node label kubelet may not set on itself (kubernetes.io/ and k8s.io/)")
@rule("node-label-mig-owner", "error", "a node label that hands MIG to the GPU Operator's mig-manager")
def rule_node_labels(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """node_labels can be expressed: kubelet runs, says how it takes extra arguments, and may set each label."""
    d = _mapping(data)
    k8s = _mapping(d.get("kubernetes"))
    labels = k8s.get("node_labels")
    if not isinstance(labels, dict) or not labels:
        return
    if _mapping(d.get("kubelet")).get("present", True) is False:
        yield loaded.problem("/kubernetes/node_labels", "node_labels cannot be expressed: kubelet.present is "
                             "false, so there is no kubelet to register the node with them", "node-labels-no-kubelet")
        return
    layout = _mapping(d.get("kubelet")).get("layout", "generic")
    env = k8s.get("kubelet_args_env")
    if layout == "generic" and not isinstance(env, str):
        yield loaded.problem("/kubernetes/node_labels", "node_labels cannot be expressed without "
                             "kubernetes.kubelet_args_env or kubelet.layout: with layout generic migbake passes "
                             "--node-labels through the environment variable that kubelet's ExecStart expands; "
                             "set kubelet.layout (kubeadm, eks-al2023, eks-al2) or kubelet_args_env, or set the "
                             "labels at registration yourself (docs/kubernetes.md)", "node-labels-no-args-env")
    elif layout == "generic":
        if not unsafe_env(str(env)):  # an unsafe variable is refused (kubelet-args-env-unsafe): no warning on top
            yield loaded.problem("/kubernetes/kubelet_args_env", f"an EnvironmentFile= of kubelet's unit that sets "
                                 f"{env} overrides the drop-in's Environment= (systemd applies EnvironmentFile= "
                                 "last), and the labels are lost: kubeadm's 10-kubeadm.conf reads /etc/default/kubelet "
                                 "or /etc/sysconfig/kubelet, where admins set KUBELET_EXTRA_ARGS; set kubelet.layout "
                                 "(kubeadm, eks-al2023, eks-al2) when the node is one of those, or name a variable no "
                                 "such file sets", "node-labels-env-file")
    elif isinstance(env, str):
        yield loaded.problem("/kubernetes/kubelet_args_env", f"kubelet_args_env applies to kubelet.layout generic "
                             f"only; with layout {layout} migbake passes the labels its own way: remove it",
                             "args-env-with-layout")
    config = _mapping(d.get("restore")).get("config_name", "current")
    for key, value in labels.items():
        ptr = join_pointer("/kubernetes/node_labels", key)
        if not isinstance(value, str) and _kubelet_may_set(str(key)):
            continue  # an unquoted false is the schema's (one problem: quote it), not a second one here
        if not _kubelet_may_set(str(key)):
            yield loaded.problem(ptr, f"kubelet may not set {key!r} on its own node (NodeRestriction admits only "
                                 "kubelet.kubernetes.io/, node.kubernetes.io/ and a few well-known keys under "
                                 "kubernetes.io and k8s.io): set it with kubectl label instead",
                                 "node-label-restricted", key=True)
        elif key == MIG_MANAGER_LABEL and value != "false":
            yield loaded.problem(ptr, f"{key}={value!r} would let the GPU Operator deploy its mig-manager here, "
                                 "which applies its own config and undoes the restored layout; use \"false\" "
                                 "(exactly one manager may own MIG on a node)", "node-label-mig-owner")
        elif key == MIG_CONFIG_LABEL and layout_names(data):
            yield loaded.problem(ptr, f"{key}={value!r} in the image gives every node the same layout name, while "
                                 "named layouts are chosen per node at boot: set the label per pool (a Karpenter "
                                 "NodePool, kubeletExtraArgs) or use the file or credential source, and remove it "
                                 "here (docs/layouts-at-boot.md)", "node-label-mig-owner")
        elif key == MIG_CONFIG_LABEL and value != config:
            yield loaded.problem(ptr, f"{key}={value!r} names a config other than ours ({config!r}, "
                                 "restore.config_name)", "node-label-mig-owner")


# awslabs/amazon-eks-ami:README.md@v20260724 L3 (and doc/usage/al2.md L4)
AL2_END = ("Amazon EKS stopped publishing EKS-optimized Amazon Linux 2 (AL2) AMIs on November 26, 2025 "
           "(awslabs/amazon-eks-ami README)")


@rule("eks-al2-unpublished", "warning", "kubelet.layout eks-al2: EKS no longer publishes Amazon Linux 2 AMIs")
def rule_eks_al2(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """kubelet.layout eks-al2: its AMIs are no longer published; eks-al2023 is the layout of today's EKS AMIs."""
    kubelet = _mapping(_mapping(data).get("kubelet"))
    if kubelet.get("layout") == "eks-al2" and kubelet.get("present", True) is not False:
        yield loaded.problem("/kubelet/layout", f"{AL2_END}: a new node of this layout has no current base AMI "
                             "and gets no more fixes; use kubelet.layout eks-al2023 (the AL2023 NVIDIA AMIs, "
                             "nodeadm)", "eks-al2-unpublished")
