"""Rule suppression: a profile's ``validation.ignore`` and ``validate --ignore``: which warnings are set aside, and why.

Only a warning can be set aside: an error says the node would fail, and no reason makes it boot. An ignored
warning is counted and listed in every report (``report``), never dropped.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem, Suppression
from migbake.rules.registry import RULES

# the rule ids a suppression may name: those that only ever warn
IGNORABLE = tuple(sorted(r.id for r in RULES.values() if r.severity == "warning"))


def _entries(data: object) -> list[tuple[str, dict[str, Any]]]:
    listed = as_mapping(as_mapping(data).get("validation")).get("ignore")
    if not isinstance(listed, list):
        return []
    return [(f"/validation/ignore/{i}", e) for i, e in enumerate(listed) if isinstance(e, dict)]


def why_not_ignorable(rule: str) -> str | None:
    """Why ``rule`` cannot be ignored (an id migbake does not report, or an error rule); None: it can."""
    known = RULES.get(rule)
    if known is None:
        close = difflib.get_close_matches(rule, list(RULES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (f"{rule!r} is not a rule id migbake reports{hint} (warnings that can be ignored: "
                f"{', '.join(IGNORABLE)})")
    if known.severity == "error":
        return (f"{rule!r} is an error rule ({known.summary}): errors cannot be ignored, only warnings "
                f"({', '.join(IGNORABLE)})")
    return None


def rule_ignore(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each ``validation.ignore`` names a rule migbake reports that warns: an error cannot be ignored."""
    for ptr, entry in _entries(data):
        rule = entry.get("rule")
        if not isinstance(rule, str) or (why := why_not_ignorable(rule)) is None:
            continue  # the schema reports a rule that is not a string
        yield loaded.problem(f"{ptr}/rule", why, "ignore-unknown-rule" if rule not in RULES else "ignore-error-rule")


def profile_suppressions(loaded: LoadedProfile, problems: Sequence[Problem]) -> list[Suppression]:
    """The suppressions a profile's ``validation.ignore`` makes: each entry naming a warning rule with a reason,
    and with none of ``problems`` (the schema's too) inside it."""
    found = []
    for ptr, entry in _entries(loaded.data):
        rule, reason = entry.get("rule"), entry.get("reason")
        if any(p.pointer == ptr or p.pointer.startswith(ptr + "/") for p in problems):
            continue
        if isinstance(rule, str) and isinstance(reason, str) and why_not_ignorable(rule) is None:
            line, col = loaded.where(ptr)
            found.append(Suppression(rule, "profile", reason, line, col, ptr))
    return found
