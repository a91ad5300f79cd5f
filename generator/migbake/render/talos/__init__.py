"""Talos Linux (``OUT/talos/``): machine-config patches whose static pod restores the MIG layout."""
