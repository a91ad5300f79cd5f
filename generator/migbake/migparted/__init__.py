"""NVIDIA's mig-parted: the config (format v1) migbake writes for a node profile (``config``), and how its
YAML reads a config name (``yamlnames``).

May import ``profile``, ``gpu``, ``document`` and the foundation modules.
"""
