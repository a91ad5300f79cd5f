"""The node profile: its JSON Schema pass (``schema``; ``fastschema``: the yes/no fast path) and the typed,
frozen node profile built from data the schema accepted (``nodeprofile``), and the facts about the node's
systemd units and paths around the restore (``units``), and the first boot's cloud-init commands derived from the
typed profile (``firstboot``: the Cluster API rule measures them before anything is rendered).

May import ``gpu``, ``document`` and the foundation modules.
"""
