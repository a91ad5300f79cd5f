"""What a valid profile is beyond its shape: the semantic rules, each declared once (``declare``: ``@rule``;
``registry``: every rule id and every check, run in order; ``general``: the profile's GPU entries as a whole;
``gpus``: the GPU an entry names; ``layouts``: models and layouts; ``services``: the restore's neighbours;
``units``: unit names and kubelet's environment; ``nodepaths``: the node paths a profile names; ``allocation``:
``kubernetes.allocation``; ``platforms``: the immutable and managed OSes; ``limits``: the consumers' limits;
``slurm``: the Slurm section; ``ignore``: suppressions) and ``validate``: one profile through load -> schema ->
rules -> typed profile.

May import ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the foundation modules.
"""
