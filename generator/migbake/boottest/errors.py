"""The one exception the boot-test library raises."""

from __future__ import annotations


class BootTestError(Exception):
    """A boot test could not be prepared or run (a tool is missing, a build failed, ...).

    Failed *claims* are not errors: they are results, reported in ``BootTestResult``.
    """
