"""GPU facts: the catalog of MIG profiles per GPU model (``catalog``, ``data/``) and ``--catalog`` files
(``catalogfile``), GPU names (``names``), exact placement (``placement``) and maximal layouts (``maximal``), both
by one bounded search (``search``), layout suggestions (``suggestions``),
the slice map picture (``slicemap``) and mig-parted's device filters by PCI id (``devicefilter``).

May import ``document`` and the foundation modules; knows nothing of profiles.
"""
