"""One registry of rule ids: every id the corpus and the code report is registered with its severity,
and every registered id has a case that reports it (catalog-file ids: a test of catalog files)."""

from __future__ import annotations

import re

import pytest
from support import REPO

from migbake.problems import Problem
from migbake.rules.registry import RULES

CASES = REPO / "tests" / "cases"
# ids no profile can reach today; each says why it stays registered
UNREACHED = {"schema-name": "propertyNames failures arrive as the nested pattern error (schema-pattern)"}


def _corpus() -> dict[str, set[str]]:
    """rule id -> the severities the corpus pins for it."""
    found: dict[str, set[str]] = {}
    for expected in CASES.glob("*/*/expected.txt"):
        for severity, rule in re.findall(r": (error|warning): .*\[([a-z0-9.-]+)\]\s*$", expected.read_text(), re.M):
            found.setdefault(rule, set()).add(severity)
    return found


def test_every_rule_the_corpus_reports_is_registered_with_its_severity() -> None:
    corpus = _corpus()
    assert sorted(set(corpus) - set(RULES)) == [], "rule ids without an entry in rules/registry.py"
    assert {r: s for r, s in corpus.items() if s != {RULES[r].severity}} == {}


def test_every_registered_rule_has_a_case() -> None:
    # a case folder of the corpus, or (for what no profile file can show: an unreadable file, a bad
    # catalog file, an imported config) a test module that pins the id: in a reported line, or as the
    # rule its table expects
    corpus = set(_corpus())
    pinned = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").glob("test_*.py"))
    pinned = pinned.replace("\\[", "[").replace("\\]", "]")
    missing = [r.id for r in RULES.values() if r.id not in UNREACHED and r.id not in corpus
               and f"[{r.id}]" not in pinned and f'"{r.id}"' not in pinned]
    assert missing == []


def test_a_problem_with_an_unregistered_rule_fails_the_test_that_makes_it() -> None:
    # tests/conftest.py checks every Problem made in a test run against the registry
    with pytest.raises(AssertionError, match=r"not in generator/migbake/rules/registry\.py"):
        Problem("f", 1, 1, "/", "m", "no-such-rule")
    assert Problem("f", 1, 1, "/", "m", "placement").rule == "placement"


def test_the_registry_says_something_for_each_rule() -> None:
    assert all(r.summary and not r.summary.endswith(".") for r in RULES.values())
    assert len(RULES) > 60
