"""The Kubernetes side of a node: the extended resources the device plugin advertises and the GPU Operator
ConfigMap (``resources``), the node labels that decide who owns MIG on a node (``labels``), and how
``kubernetes.node_labels`` reach kubelet per ``kubelet.layout`` (``kubelet``), what Karpenter's NodeOverlays say a
node of each layout advertises (``overlays``) and the startup taint lifted by the restore's node condition
(``readiness``).

May import ``migparted``, ``profile``, ``gpu`` and the foundation modules.
"""
