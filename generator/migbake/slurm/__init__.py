"""The Slurm view of a profile (``gres``): what slurmd counts per kind of node, its GRES types and device lines.

May import ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the foundation.
"""
