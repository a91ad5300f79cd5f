"""The Kubernetes side of a node: the extended resources the device plugin advertises and the GPU Operator
ConfigMap (``resources``), and the node labels that decide who owns MIG on a node (``labels``).

May import ``migparted``, ``profile``, ``gpu`` and the foundation modules.
"""
