"""NVIDIA's mig-parted: the config (format v1) migbake writes for a node profile (``config``).

May import ``profile``, ``gpu``, ``document`` and the foundation modules.
"""
