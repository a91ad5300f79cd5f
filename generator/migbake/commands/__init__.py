"""The commands of the ``migbake`` command line, one module per area; ``migbake.cli`` assembles them."""
