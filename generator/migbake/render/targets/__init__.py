"""The output targets, one module each: a function from the render plan to the files of that target.

Each is declared in ``render.tree.TARGETS`` (its folders, what it reads, when it applies). A target reads only
the plan (``render.plan``), the files of the targets it declares it reads (``render.artifact``), the
quoting and guard helpers (``render.quoting``, ``render.guard``) and the template environment
(``render.environment``, with the variables every target shares from ``context``). It never imports the
profile, the catalog, ``kubernetes``, ``migparted``, ``node`` or ``slurm``: when a target needs a value
the plan does not have, the part of the plan that serves it (``render.parts``) grows a field
(import-linter holds this for every module here: pyproject's [tool.importlinter]).

May import ``render.plan``, ``render.artifact``, ``render.quoting``, ``render.guard``, ``render.environment``,
its own folder and the foundation.
"""
