"""The one exception the boot-test library raises."""

from __future__ import annotations

from migbake.problems import MigbakeError


class BootTestError(MigbakeError):
    """A boot test could not be prepared or run (a tool is missing, a build failed, ...): exit 1.

    Failed *claims* are not errors: they are results, reported in ``BootTestResult``.
    """

    multiline = True  # a failed build's or sshd's log tail

    def report(self) -> list[str]:
        return [f"migbake: error: boot test could not run: {self}"]
