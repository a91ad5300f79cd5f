"""What a real node says: nvidia-smi captures read safely (``nvidiasmi``), what each gpus entry asks of the node
(``expectations``), what the node's driver offers (``driveroffer``: a generate-config capture), the
offline preflight (``preflight``) and import of a known-good node's mig-parted config
into a profile (``importer``).

May import ``rules``, ``kubernetes``, ``migparted``, ``profile``, ``gpu``, ``document`` and the foundation modules.
"""
