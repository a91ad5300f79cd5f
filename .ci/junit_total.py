"""Add up the JUnit XML reports of .ci/run's two pytest runs into one closing line.

Prints ``total: N passed, N failed, N skipped`` (errors count as failed), so the run ends with one line that
counts every test of both runs; a report that is missing or unreadable counts as one failure.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def counts(path: str) -> tuple[int, int, int]:
    """(passed, failed, skipped) of one JUnit XML report; (0, 1, 0) where it cannot be read."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        print(f"junit_total: {path}: {err}", file=sys.stderr)
        return 0, 1, 0
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = failed = skipped = 0
    for suite in suites:
        tests += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return tests - failed - skipped, failed, skipped


def main(paths: list[str]) -> int:
    passed = failed = skipped = 0
    for path in paths:
        p, f, s = counts(path)
        passed, failed, skipped = passed + p, failed + f, skipped + s
    print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
