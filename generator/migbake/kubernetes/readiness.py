"""Startup readiness (``kubernetes.startup_taint``): new nodes stay off the scheduler until the restore is done.

A node of an autoscaled pool may take a GPU pod the moment the device plugin registers. NVIDIA's own example
holds such nodes with a startup taint that kubernetes-sigs/node-readiness-controller removes once a node
condition says the GPU is ready (NVIDIA/gpu-operator#2573). migbake does the same with the restore as the
reporter:

- the Karpenter NodePools carry ``STARTUP_TAINT`` as ``startupTaints`` (applied when the node registers);
- a ``NodeReadinessRule`` (``readiness.node.x-k8s.io/v1alpha1``, kubernetes-sigs/node-readiness-controller@v0.5.0:
  api/v1alpha1/groupversion_info.go, nodereadinessrule_types.go) removes it once ``MIG_READY`` is True, in
  ``bootstrap-only`` mode: a condition left True from the boot before never re-opens a node already past it;
- after a successful restore the node sets ``MIG_READY`` on its own Node's status with kubelet's credentials
  (the Node authorizer and NodeRestriction let a node change its own status, never its taints:
  kubernetes/kubernetes:plugin/pkg/admission/noderestriction/admission.go).

The taint key starts with ``readiness.k8s.io/``, which the rule's CRD requires and whose names the controller's
guide gives as ``readiness.k8s.io/<component>-not-ready`` (docs/book/src/user-guide/concepts.md@v0.5.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from migbake.profile.nodeprofile import NodeProfile

# key, value, effect: NoSchedule, as the controller's examples (a NoExecute taint would evict running pods)
STARTUP_TAINT = ("readiness.k8s.io/mig-not-ready", "pending", "NoSchedule")
MIG_READY = "migbake.io/MIGReady"  # the node condition the restore sets True
# kubelet's kubeconfig, where the restore and the driver-container watcher find kubelet's credentials: nodeadm's
# and OpenShift's (awslabs/amazon-eks-ami@v20260724:nodeadm/internal/kubelet/kubeconfig.go;
# openshift/machine-config-operator@14b7ed34 kubelet.service.yaml), then kubeadm's (kubernetes/kubernetes:
# cmd/kubeadm/app/constants/constants.go, KubeletKubeConfigFileName in /etc/kubernetes)
KUBELET_KUBECONFIGS = ("/var/lib/kubelet/kubeconfig", "/etc/kubernetes/kubelet.conf")


@dataclass(frozen=True)
class StartupReadiness:
    """The startup taint, the condition that lifts it, and where the restore finds kubelet's kubeconfig."""

    taint_key: str
    taint_value: str
    taint_effect: str
    condition: str
    kubeconfigs: tuple[str, ...]


def startup_readiness(profile: NodeProfile) -> StartupReadiness | None:
    """The profile's startup readiness, or None without ``kubernetes.startup_taint`` (or without kubelet)."""
    if not (profile.kubernetes.startup_taint and profile.kubelet.present):
        return None
    return StartupReadiness(*STARTUP_TAINT, MIG_READY, KUBELET_KUBECONFIGS)
