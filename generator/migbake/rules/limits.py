"""Limits of the consumers of migbake's output, checked on the profile before anything is written.

- Ignition (and butane, which validates with Ignition's code) parses every unit and drop-in with
  go-systemd's ``unit.Deserialize`` (coreos/ignition:config/shared/validations/unit.go@bb6182a3 imports
  github.com/coreos/go-systemd/unit), which refuses a line of ``SYSTEMD_LINE_MAX`` = 2048 bytes or more:
  "line too long (max 2048 bytes)" (coreos/go-systemd:unit/deserialize.go, ``lex``; butane v0.29.0 prints
  "invalid unit content: line too long (max 2048 bytes)" for a 2048-byte line and takes 2047 bytes). The
  profile makes two unit lines long: the restore unit's comment that names every consumer
  (``consumer_line``), and the kubelet drop-in's ``Environment=`` with ``--node-labels`` (``labels_line``):
  ``unit-line-too-long``.
- Cluster API's KubeadmConfigTemplate CRD, v1beta2 (the storage version): a ``kubeletExtraArgs`` item's
  ``value`` (the node labels) at most 1024 characters (``maxLength: 1024``, kubernetes-sigs/cluster-api:
  bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml@v1.14.0, as
  tests/fixtures/crds/kubeadmconfigtemplate-v1beta2.openapi.json holds it; v1beta1's map has no limit):
  ``cluster-api-limit``. A ``preKubeadmCommands`` item (``maxLength: 10240``) is checked where it is made,
  in ``render.targets.clusterapi``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.rules.layoutnames import layout_names

SYSTEMD_LINE_MAX = 2048  # go-systemd: a line of this many bytes or more is refused
CAPI_ARG_VALUE_MAX = 1024  # cluster-api v1beta2 KubeadmConfigTemplate: kubeletExtraArgs[].value maxLength
OUR_VARIABLE = "MIGBAKE_KUBELET_ARGS"  # kubernetes.kubelet.OUR_VARIABLE (kubeadm's drop-in)


def _units(d: dict[str, Any]) -> list[str]:
    kubelet = as_mapping(d.get("kubelet"))
    units = [str(kubelet.get("unit", "kubelet.service"))] if kubelet.get("present", True) is True else []
    consumers = d.get("consumers")
    units += [str(as_mapping(c).get("unit", "")) for c in (consumers if isinstance(consumers, list) else [])]
    return [u for u in units if u]


def consumer_line(d: dict[str, Any]) -> str:
    """The restore unit's longest profile-made line: its comment naming the profile and every consumer."""
    units = _units(d)
    text = units[0] if len(units) == 1 else ", ".join(units[:-1]) + " and " + units[-1] if units else ""
    return (f"# Restores the MIG layout of node profile {d.get('name', '')} at every boot, before "
            f"{text if units else 'any GPU client'}:")


def labels_flag(d: dict[str, Any]) -> str:
    """kubelet's ``--node-labels=k=v,...`` (kubernetes.kubelet.node_labels_flag), "" without labels."""
    labels = as_mapping(as_mapping(d.get("kubernetes")).get("node_labels"))
    if not labels or as_mapping(d.get("kubelet")).get("present", True) is not True:
        return ""
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items())


def labels_line(d: dict[str, Any]) -> str:
    """The kubelet drop-in's ``Environment=`` line that carries the labels ("" when the layout has none)."""
    flag = labels_flag(d)
    layout = as_mapping(d.get("kubelet")).get("layout", "generic")
    env = as_mapping(d.get("kubernetes")).get("kubelet_args_env", "")
    var = OUR_VARIABLE if layout == "kubeadm" else env if layout == "generic" and env else ""
    return f"Environment={var}={flag}" if flag and var else ""


@rule("unit-line-too-long", "error",
      "consumers or node labels that make a unit line of 2048 bytes or more (Ignition, butane: go-systemd's unit "
      "parser refuses it)")
def rule_unit_lines(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """No line of a unit or drop-in migbake writes reaches Ignition's 2048-byte limit (go-systemd)."""
    d = as_mapping(data)
    for pointer, line, what in (("/consumers", consumer_line(d), "the consumers (kubelet's unit and consumers)"),
                                ("/kubernetes/node_labels", labels_line(d), "kubelet's --node-labels")):
        size = len(line.encode("utf-8"))
        if size >= SYSTEMD_LINE_MAX:
            yield loaded.problem(pointer, f"{what} make a line of {size} bytes in a systemd unit migbake writes; "
                                 f"Ignition and butane refuse a unit line of {SYSTEMD_LINE_MAX} bytes or more "
                                 "(go-systemd's unit parser: line too long), so OUT/butane would not build; "
                                 "use fewer or shorter names", "unit-line-too-long")


@rule("cluster-api-limit", "error",
      "node labels longer than Cluster API's kubeletExtraArgs value limit (1024, v1beta2 CRD)")
def rule_cluster_api_limits(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The node labels fit Cluster API's kubeletExtraArgs value limit (1024 characters, v1beta2)."""
    d = as_mapping(data)
    if as_mapping(d.get("kubelet")).get("layout") != "kubeadm":
        return  # OUT/cluster-api is written for kubelet.layout kubeadm only
    flag = labels_flag(d)
    names = layout_names(data)  # a template per name adds nvidia.com/mig.config=NAME (render.targets.clusterapi)
    longest = max(names, key=len) if names else ""
    value = ",".join(filter(None, [flag[len("--node-labels="):], f"nvidia.com/mig.config={longest}" if names else ""]))
    if len(value) > CAPI_ARG_VALUE_MAX:
        yield loaded.problem("/kubernetes/node_labels", f"the node-labels value is {len(value)} characters; Cluster "
                             f"API's KubeadmConfigTemplate (v1beta2) takes a kubeletExtraArgs value of at "
                             f"most {CAPI_ARG_VALUE_MAX} (its CRD's maxLength), so the API server would refuse "
                             "OUT/cluster-api; use fewer or shorter labels", "cluster-api-limit")
