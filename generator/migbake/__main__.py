"""``python -m migbake``: the same command line as ``migbake``."""

from migbake.entry import run

run(prog_name="migbake")
