"""What a valid profile is beyond its shape: the semantic rules (``general``: the profile as a whole and the
runner of every rule; ``gpus``: the GPU an entry names; ``layouts``: models and layouts; ``services``: the
restore's neighbours; ``units``: unit names and kubelet's environment; ``nodepaths``: the node paths a profile
names; ``limits``: the consumers' limits; ``slurm``: the Slurm section)
and ``validate``: one profile through load -> schema -> rules -> typed profile.

May import ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the foundation modules.
"""
