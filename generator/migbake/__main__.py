"""``python -m migbake``: the same command line as ``migbake``."""

from migbake.cli.group import main

main(prog_name="migbake")
