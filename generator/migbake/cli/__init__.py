"""The command line's top layer: the click group (``group``: COMMANDS, the one place any error becomes
``migbake: error: ...`` and its exit code), which the ``migbake`` console script runs.

May import every layer below (``commands`` lazily, through COMMANDS). Nothing imports ``cli`` but ``__main__``.
"""
