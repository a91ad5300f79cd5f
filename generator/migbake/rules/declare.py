"""How a rule is declared: ``Rule`` (id, stage, severity, one line) and ``@rule``, which makes a check of a function.

A check is a function ``(loaded, data, catalog) -> problems``; each ``@rule(...)`` above it declares one rule id
it reports, once, with its severity and summary::

    @rule("empty-layout", "warning", "MIG on with no instances: the device plugin fails on such a GPU")
    @rule("layout-without-mig", "error", "a layout on an entry with MIG off")
    def rule_mig_enabled(loaded, data, catalog): ...

Its raise sites name only the id (``loaded.problem(pointer, message, "empty-layout")``): the check gives each
problem the severity its declaration says, and a problem of an id the check does not declare is a bug it
refuses (``UndeclaredRule``). ``rules.registry`` gathers every check of the rule modules for the run and every
rule, these and those raised outside a check (YAML, schema, catalog files, import, captures), into one table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from migbake.document.loader import LoadedProfile
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem, Severity

# render: found once the files are rendered, before any is written (``render.rendered_limits``: a consumer's size limit)
Stage = Literal["yaml", "schema", "rules", "catalog", "import", "capture", "render"]
CheckFunction = Callable[[LoadedProfile, object, Catalog], Iterator[Problem]]
# a check that reads the problems every other check found (it runs after them): rule_layout_fits
LateCheckFunction = Callable[[LoadedProfile, object, Catalog, Sequence[Problem]], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    """One rule id: what a problem with it means, where it is found, and whether it fails the profile."""

    id: str
    stage: Stage
    summary: str
    severity: Severity = "error"


class UndeclaredRule(LookupError):
    """A check reported a rule id it does not declare (a bug of migbake: add its ``@rule``)."""


@dataclass(frozen=True)
class Check:
    """A function that yields problems, with the rules it declares (``@rule``); called as the function is."""

    function: CheckFunction | LateCheckFunction
    rules: tuple[Rule, ...]
    late: bool = False  # reads what the other checks found: run last (``function`` is a LateCheckFunction)

    @property
    def name(self) -> str:
        """The function's name (``rule_mig_enabled``)."""
        return getattr(self.function, "__name__", repr(self.function))

    @cached_property
    def severities(self) -> dict[str, Severity]:
        """The severity of each rule id it declares."""
        return {r.id: r.severity for r in self.rules}

    def declared(self, problems: Iterator[Problem]) -> Iterator[Problem]:
        """``problems`` with the severity each one's declaration gives it; an undeclared id raises."""
        severity = self.severities
        for p in problems:
            if p.rule not in severity:
                raise UndeclaredRule(f"{self.name} reports {p.rule!r}, which it does not declare: add "
                                     f"@rule({p.rule!r}, SEVERITY, SUMMARY) above it")
            yield p if p.severity == severity[p.rule] else replace(p, severity=severity[p.rule])

    def __call__(self, loaded: LoadedProfile, data: object, catalog: Catalog,
                 earlier: Sequence[Problem] = ()) -> Iterator[Problem]:
        if self.late:
            late: LateCheckFunction = self.function  # type: ignore[assignment]
            return self.declared(late(loaded, data, catalog, earlier))
        plain: CheckFunction = self.function  # type: ignore[assignment]
        return self.declared(plain(loaded, data, catalog))


def rule(rule_id: str, severity: Severity, summary: str, *,
         late: bool = False) -> Callable[[CheckFunction | LateCheckFunction | Check], Check]:
    """Declare ``rule_id`` (its severity, and one line without a full stop) on the check below; several stack.

    ``late``: the function takes a fourth argument, the problems every other check found, and runs after them.
    """
    declared = Rule(rule_id, "rules", summary, severity)

    def declare(below: CheckFunction | LateCheckFunction | Check) -> Check:
        if isinstance(below, Check):
            return Check(below.function, (declared, *below.rules), below.late or late)
        return Check(below, (declared,), late)

    return declare
