"""The commands of the ``migbake`` command line, one module per command; ``migbake.cli.group`` assembles them.

A command parses its options, calls the library and reports; ``common`` holds what several share. May
import every library layer below it, never ``cli`` or the boot test.
"""
