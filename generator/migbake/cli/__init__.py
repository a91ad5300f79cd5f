"""The command line's top floor: the console entry (``entry``: the quick path without click) and the click group
(``group``: COMMANDS, the one place any error becomes ``migbake: error: ...`` and its exit code).

May import every floor below (``commands`` lazily, through COMMANDS). Nothing imports ``cli`` but ``__main__``.
This ``__init__`` stays empty: importing ``migbake.cli.entry`` must not load click.
"""
