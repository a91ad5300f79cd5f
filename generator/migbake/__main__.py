"""``python -m migbake``: the same command line as ``migbake``."""

from migbake.cli import main

main(prog_name="migbake")
