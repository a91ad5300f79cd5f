"""Render: a validated node profile into the output tree, in memory: one plan (``plan``) derived once, one
module per output target reading only that plan (``targets/``), the declared targets and the path checks
(``tree``), the template environment (``environment``), quoting per language (``quoting``) and the check
every printed value passes (``guard``), the consumers' limits only the rendered files show (``limits``), the
user's own part of a multi-part user-data and EC2's size limit (``userdata``; the forms are a target), and the
atomic writer with ``--check`` (``write``).

May import ``node``, ``slurm``, ``rules``, ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the
foundation (``targets/`` much less: see its docstring).
"""
