"""Rule suppression: a profile's ``validation.ignore`` and ``validate --ignore``: which warnings are set aside, and why.

Only a warning can be set aside: an error says the node would fail, and no reason makes it boot. An ignored
warning is counted and listed in every report (``report``), never dropped. Which rule ids may be named, and the
check of a profile's entries, are the rule table's (``rules.registry.why_not_ignorable``, ``rule_ignore``).
"""

from __future__ import annotations

from collections.abc import Sequence

from migbake.document.loader import LoadedProfile
from migbake.problems import Problem, Suppression
from migbake.rules.registry import ignore_entries, why_not_ignorable


def profile_suppressions(loaded: LoadedProfile, problems: Sequence[Problem]) -> list[Suppression]:
    """The suppressions a profile's ``validation.ignore`` makes: each entry naming a warning rule with a reason,
    and with none of ``problems`` (the schema's too) inside it."""
    found = []
    for ptr, entry in ignore_entries(loaded.data):
        rule, reason = entry.get("rule"), entry.get("reason")
        if any(p.pointer == ptr or p.pointer.startswith(ptr + "/") for p in problems):
            continue
        if isinstance(rule, str) and isinstance(reason, str) and why_not_ignorable(rule) is None:
            line, col = loaded.where(ptr)
            found.append(Suppression(rule, "profile", reason, line, col, ptr))
    return found
