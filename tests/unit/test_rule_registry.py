"""One registry of rule ids: every id the corpus and the code report is registered with its severity,
and every registered id has a case that reports it (catalog-file ids: a test of catalog files).

A rule is one declaration (``@rule`` on its check, or a line of rules/registry.py): declared twice is refused,
a check reports only what it declares and with the declared severity, every check of the rule modules runs,
and the docs document exactly the declared rules (the generated reference lists each; every id a page names is
declared)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import types
from collections.abc import Iterable, Iterator

import pytest
from support import REPO
from test_warning_cases import _readme_rule_ids

import migbake.rules
from migbake.document.loader import LoadedProfile
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules.declare import Check, Rule, UndeclaredRule, rule
from migbake.rules.registry import CHECKS, IGNORABLE, RULES, checks_of, rule_table, why_not_ignorable

CASES = REPO / "tests" / "cases"
# ids no profile can reach today; each says why it stays registered
UNREACHED = {"schema-name": "propertyNames failures arrive as the nested pattern error (schema-pattern)"}


def _corpus() -> dict[str, set[str]]:
    """rule id -> the severities the corpus pins for it."""
    found: dict[str, set[str]] = {}
    for expected in CASES.glob("*/*/expected.txt"):
        for severity, rule_id in re.findall(r": (error|warning): .*\[([a-z0-9.-]+)\]\s*$", expected.read_text(),
                                            re.M):
            found.setdefault(rule_id, set()).add(severity)
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
    pinned = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("test_*.py"))
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


def _yields(*rule_ids: str) -> object:
    def check(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
        for rule_id in rule_ids:
            yield Problem("f.yaml", 1, 1, "/x", "m", rule_id)  # made an error, as loaded.problem makes it
    return check


def test_a_check_gives_each_problem_the_severity_its_declaration_says() -> None:
    check = rule("empty-layout", "warning", "s")(rule("placement", "error", "s")(_yields("empty-layout", "placement")))  # type: ignore[arg-type]
    assert [(p.rule, p.severity) for p in check(None, {}, None)] == [  # type: ignore[arg-type]
        ("empty-layout", "warning"), ("placement", "error")]
    assert [r.id for r in check.rules] == ["empty-layout", "placement"]  # top to bottom, as written


def test_a_check_refuses_a_rule_it_does_not_declare() -> None:
    check = rule("empty-layout", "warning", "s")(_yields("empty-layout", "placement"))  # type: ignore[arg-type]
    with pytest.raises(UndeclaredRule, match=r"check reports 'placement', which it does not declare"):
        list(check(None, {}, None))  # type: ignore[arg-type]


def test_the_checks_declare_exactly_the_rules_of_the_rules_stage() -> None:
    by_checks = [r.id for c in CHECKS for r in c.rules]
    assert len(by_checks) == len(set(by_checks))
    assert sorted(by_checks) == sorted(r.id for r in RULES.values() if r.stage == "rules")
    late = [c.name for c in CHECKS if c.late]
    assert late == ["rule_layout_fits", "rule_cluster_api_limits"]  # they read what every other check found


def test_a_rule_declared_twice_is_refused() -> None:
    assert list(rule_table([Rule("a", "rules", "s"), Rule("b", "yaml", "s")])) == ["a", "b"]
    with pytest.raises(ValueError, match="'a' is declared twice"):
        rule_table([Rule("a", "rules", "s"), Rule("a", "yaml", "t")])


def _defined_checks() -> set[Check]:
    found: set[Check] = set()
    for info in pkgutil.iter_modules(migbake.rules.__path__, "migbake.rules."):
        found.update(checks_of([importlib.import_module(info.name)]))
    return found


def test_every_check_of_the_rule_modules_runs() -> None:
    # a check in a module not in rules.registry.CHECK_MODULES would never run
    assert len(_defined_checks()) > 30
    assert [c.name for c in _defined_checks() - set(CHECKS)] == []
    stray = types.ModuleType("migbake.rules.stray")
    check = rule("placement", "error", "s")(_yields("placement"))  # type: ignore[arg-type]
    check.function.__module__ = stray.__name__  # type: ignore[union-attr]
    stray.rule_stray = check  # type: ignore[attr-defined]
    assert checks_of([stray]) == (check,) and check not in CHECKS


def test_a_raise_site_cannot_make_a_severity_the_declaration_does_not_say() -> None:
    # tests/conftest.py: a rule found outside a check keeps its declared severity; a warning of an error rule fails
    with pytest.raises(AssertionError, match="'yaml-syntax' made as warning: it is declared error"):
        Problem("f", 1, 1, "/", "m", "yaml-syntax", "warning")
    with pytest.raises(AssertionError, match="'placement' made as warning"):
        Problem("f", 1, 1, "/", "m", "placement", "warning")
    assert Problem("f", 1, 1, "/", "m", "empty-layout", "warning").severity == "warning"


REFERENCE = REPO / "docs" / "reference" / "rules.md"
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]


def documented(reference: str) -> dict[str, str]:
    """rule id -> severity, as the rule reference's headings say (``### `id` (severity)``)."""
    return dict(re.findall(r"^### `([a-z0-9.-]+)` \((error|warning)\)$", reference, re.M))


def named(pages: Iterable[str]) -> set[str]:
    """The rule ids doc pages name: a quoted problem line's ``[rule]`` (``FILE:LINE:COL: error: ...``), a command
    line's ``--ignore ID,ID``, a ``validation.ignore`` entry's ``rule: ID``."""
    found: set[str] = set()
    for text in pages:
        found.update(re.findall(r"^\S+:\d+:\d+: (?:error|warning|ignored): .*\[([a-z0-9.-]+)\]", text, re.M))
        for command in re.findall(r"^\$? ?migbake (.*?)(?:\s#.*)?$", text, re.M):
            found.update(i for ids in re.findall(r"--ignore[ =]([a-z0-9.,-]+)", command) for i in ids.split(","))
        found.update(re.findall(r"^\s*-? ?rule: ([a-z0-9.-]+)\s*$", text, re.M))
    return found


def test_the_reference_documents_exactly_the_declared_rules() -> None:
    listed = documented(REFERENCE.read_text(encoding="utf-8"))
    assert sorted(set(RULES) - set(listed)) == [], "declared, not documented: run python docs/reference/generate.py"
    assert sorted(set(listed) - set(RULES)) == [], "documented in docs/reference/rules.md, declared nowhere"
    assert listed == {r.id: r.severity for r in RULES.values()}
    assert documented("### `no-such-rule` (error)\n### `placement` (warning)\n") == {
        "no-such-rule": "error", "placement": "warning"}


def test_every_rule_id_a_doc_page_names_is_declared() -> None:
    pages = [p.read_text(encoding="utf-8") for p in PAGES]
    found = named(pages) | set(_readme_rule_ids())
    assert len(found) > 60 and "empty-layout" in found and "devices-without-gpu-count" in found
    assert sorted(found - set(RULES)) == [], "rule ids the docs name that no declaration has"
    bad = "x.yaml:1:1: warning: /gpus: m [empty-layot]\n$ migbake validate --ignore empty-layout,no-such p.yaml\n"
    assert named([bad]) - set(RULES) == {"empty-layot", "no-such"}


def test_the_ignore_messages_list_every_warning_rule_and_only_those() -> None:
    # the case corpus pins these messages up to the list (a new warning rule changes no case of another rule)
    listed = r"\((?:warnings that can be ignored: )?([a-z0-9, -]+)\)$"
    for rule_id in ("count-above-max", "empty-layuot"):
        why = why_not_ignorable(rule_id)
        assert why is not None
        found = re.search(listed, why)
        assert found and found[1].split(", ") == list(IGNORABLE), why
    assert sorted(IGNORABLE) == sorted(r.id for r in RULES.values() if r.severity == "warning")
    assert "empty-layout" in IGNORABLE and "placement" not in IGNORABLE and why_not_ignorable("empty-layout") is None
