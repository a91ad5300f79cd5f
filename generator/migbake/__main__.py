"""``python -m migbake``: the same command line as ``migbake``."""

from migbake.cli.entry import run

run(prog_name="migbake")
