"""The node profile: its JSON Schema pass (``schema``; ``fastschema``: the yes/no fast path) and the typed,
frozen node profile built from data the schema accepted (``nodeprofile``).

May import ``gpu``, ``document`` and the foundation modules.
"""
