"""Helm values and the OpenShift ClusterPolicy patch for a node whose driver is a container (``export --gpu-operator``).

The GPU Operator: its MIG manager off (two writers of MIG cannot share a node: it resumes every operand it paused
with ``true``, NVIDIA/mig-parted@v0.15.0:pkg/mig/reconfigure/reconfigure.go) and ``mig.strategy`` the profile's
(NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/values.yaml ``mig.strategy``, ``migManager.enabled``; the
same fields of a ClusterPolicy, api/nvidia/v1/clusterpolicy_types.go ``MIG``, ``MIGManager``). The standalone
charts: a node affinity that also requires the label ``migbake.io/mig-ready`` (a second lock beside the init
container), added to each term of the chart's own default, which it replaces (a Helm value is replaced whole).
"""

from __future__ import annotations

import copy
from typing import Any

from migbake.profile.nodeprofile import NodeProfile

READY_LABEL = "migbake.io/mig-ready"
_READY = {"key": READY_LABEL, "operator": "Exists"}


def _terms(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [*t, _READY]} for t in terms]}}}


def _is(key: str, value: str) -> list[dict[str, Any]]:
    return [{"key": key, "operator": "In", "values": [value]}]


# NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin/values.yaml ``affinity`` (one value for
# the device plugin, GFD and MPS DaemonSets: templates/daemonset-*.yml ``with .Values.affinity``)
DEVICE_PLUGIN_AFFINITY = _terms(_is("feature.node.kubernetes.io/pci-10de.present", "true"),
                                _is("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                                _is("nvidia.com/gpu.present", "true"))
# kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1:deployments/helm/dra-driver-nvidia-gpu/values.yaml
# ``kubeletPlugin.affinity`` (templates/kubeletplugin.yaml ``with .Values.kubeletPlugin.affinity``)
DRA_AFFINITY = _terms(_is("feature.node.kubernetes.io/pci-10de.present", "true"),
                      _is("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
                      _is("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
                      _is("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                      _is("nvidia.com/gpu.present", "true"))


def gpu_operator_values(profile: NodeProfile) -> dict[str, Any]:
    """``helm install gpu-operator nvidia/gpu-operator -f`` this: the MIG manager off, the profile's strategy."""
    return {"mig": {"strategy": profile.kubernetes.mig_strategy}, "migManager": {"enabled": False}}


def clusterpolicy_patch(profile: NodeProfile) -> dict[str, Any]:
    """``oc patch clusterpolicy NAME --type merge --patch-file`` this (OpenShift installs the operator by OLM)."""
    return {"spec": gpu_operator_values(profile)}


def device_plugin_values(profile: NodeProfile) -> dict[str, Any]:
    """NVIDIA's device plugin chart: the profile's strategy, and the node affinity with the ready label."""
    return {"migStrategy": profile.kubernetes.mig_strategy, "affinity": copy.deepcopy(DEVICE_PLUGIN_AFFINITY)}


def dra_driver_values(profile: NodeProfile) -> dict[str, Any]:
    """The DRA driver chart: its kubelet plugin's node affinity with the ready label."""
    return {"kubeletPlugin": {"affinity": copy.deepcopy(DRA_AFFINITY)}}
