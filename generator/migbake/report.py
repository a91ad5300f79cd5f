"""Validation reports in the formats CI systems read: text, JSON, GitHub annotations, SARIF 2.1.0, JUnit XML.

Each function takes the checked files (file name -> problems) and returns the whole report as text. A warning
set aside (``validation.ignore`` in the profile, ``validate --ignore``) is counted and listed as ignored in
every format, never dropped: text a line, JSON a list, GitHub a notice, SARIF a result with ``suppressions``,
JUnit a skipped test case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from migbake import __version__
from migbake.exits import EXIT_INVALID, EXIT_USAGE
from migbake.problems import Ignored, Problem, unreadable
from migbake.wording import plural

INFO_URI = "https://github.com/migbake/migbake"


@dataclass(frozen=True)
class FileResult:
    """One checked file and what was found in it."""

    file: str
    problems: Sequence[Problem]
    ignored: Sequence[Ignored] = ()

    @property
    def errors(self) -> int:
        """How many problems are errors."""
        return sum(p.severity == "error" for p in self.problems)


def exit_code(results: Sequence[FileResult], *, strict: bool = False) -> int:
    """``validate``'s exit code: 2 when a file cannot be read at all, else 1 when any is invalid (with
    ``strict``: has any problem, warnings too), else 0."""
    if any(unreadable(r.problems) for r in results):
        return EXIT_USAGE
    return EXIT_INVALID if any(r.errors or (strict and r.problems) for r in results) else 0


def summary(results: Sequence[FileResult], *, strict: bool = False) -> str:
    """``2 problems in 1 file (3 checked)`` or ``3 files valid``, plus warnings.

    With ``strict`` a warning fails its file as an error does (``exit_code``), and the words say so:
    ``1 problem in 1 file (1 checked): 1 warning counted as an error (--strict)``.
    """
    errors = sum(r.errors for r in results)
    warnings = sum(len(r.problems) for r in results) - errors
    ignored = sum(len(r.ignored) for r in results)
    also = f", {plural(ignored, 'warning')} ignored" if ignored else ""
    if strict and warnings:
        failing = sum(bool(r.problems) for r in results)
        return (f"{plural(errors + warnings, 'problem')} in {plural(failing, 'file')} ({len(results)} checked): "
                f"{plural(warnings, 'warning')} counted as {'an error' if warnings == 1 else 'errors'} (--strict)"
                + also)
    bad = sum(r.errors > 0 for r in results)
    text = (f"{plural(errors, 'problem')} in {plural(bad, 'file')} ({len(results)} checked)" if errors
            else f"{plural(len(results), 'file')} valid")
    if warnings:
        text += f", {plural(warnings, 'warning')}"
    return text + also


def text_report(results: Sequence[FileResult], *, color: bool = False, with_summary: bool = True,
                strict: bool = False) -> str:
    """One ``FILE:LINE:COL: severity: /pointer: message [rule]`` line per problem, then one
    ``FILE:LINE:COL: ignored: /pointer: message [rule] (why)`` per ignored warning, then a summary."""
    lines = []
    for r in results:
        for p in r.problems:
            line = p.format()
            if color:
                code = "31" if p.severity == "error" else "33"
                head = f"{p.location()}: "
                line = head + f"\x1b[1;{code}m{p.severity}\x1b[0m" + line[len(head) + len(p.severity):]
            lines.append(line)
        lines += [i.format() for i in r.ignored]
    if with_summary:
        lines.append(summary(results, strict=strict))
    return "\n".join(lines) + ("\n" if lines else "")


def _json_problem(p: Problem) -> dict[str, object]:
    return {"line": p.line, "column": p.col, "pointer": p.pointer, "severity": p.severity, "rule": p.rule,
            "message": p.message}


def json_report(results: Sequence[FileResult]) -> str:
    """A JSON document: every file, its validity and problems, and a summary."""
    doc = {
        "tool": "migbake", "version": __version__,
        "files": [{
            "file": r.file, "valid": r.errors == 0,
            "problems": [_json_problem(p) for p in r.problems],
            "ignored": [{**_json_problem(i.problem), "ignored_by": i.suppression.by,
                         "reason": i.suppression.reason} for i in r.ignored],
        } for r in results],
        "summary": {"files": len(results), "invalid_files": sum(r.errors > 0 for r in results),
                    "errors": sum(r.errors for r in results),
                    "warnings": sum(len(r.problems) - r.errors for r in results),
                    "ignored": sum(len(r.ignored) for r in results)},
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github_report(results: Sequence[FileResult]) -> str:
    """GitHub Actions workflow commands: ``::error file=F,line=L,col=C,title=T::message``; an ignored warning is a
    ``::notice`` whose title says it is ignored and whose message ends with why."""
    lines = []
    for r in results:
        shown: list[tuple[Problem, str, str, str]] = [(p, p.severity, f"migbake {p.rule}", "") for p in r.problems]
        shown += [(i.problem, "notice", f"migbake {i.problem.rule} (ignored)", f" ({i.suppression.why()})")
                  for i in r.ignored]
        for p, level, title, why in shown:
            lines.append(f"::{level} file={_gh_prop(p.file)},line={p.line},col={p.col},"
                         f"title={_gh_prop(title)}::{_gh_data((p.pointer or '/') + ': ' + p.message + why)}")
    return "\n".join(lines) + ("\n" if lines else "")


def sarif_uri(path: str) -> str:
    """A file name as SARIF's ``artifactLocation.uri`` wants it: a URI reference (SARIF 2.1.0 §3.4.3, RFC 3986), every
    byte outside the unreserved set and ``/`` percent-encoded (a space, ``#``, ``?``, ``%``, ``:``; the bytes of a
    file name that are not UTF-8 as they were on disk)."""
    return quote(path, safe="/", errors="surrogateescape")


def _sarif_location(p: Problem, index: int, line: int, col: int) -> dict[str, object]:
    return {"physicalLocation": {"artifactLocation": {"uri": sarif_uri(p.file), "index": index},
                                 "region": {"startLine": line, "startColumn": col}}}


def _sarif_result(p: Problem, index: int, rule_index: int) -> dict[str, object]:
    return {"ruleId": p.rule, "ruleIndex": rule_index, "level": "error" if p.severity == "error" else "warning",
            "message": {"text": f"{p.pointer or '/'}: {p.message}"},
            "locations": [_sarif_location(p, index, p.line, p.col)]}


def _sarif_suppression(ignored: Ignored, index: int) -> dict[str, object]:
    s = ignored.suppression
    if s.by == "flag":
        return {"kind": "external", "status": "accepted", "justification": "migbake validate --ignore"}
    return {"kind": "inSource", "status": "accepted", "justification": s.reason,
            "location": _sarif_location(ignored.problem, index, s.line, s.col)}


def sarif_report(results: Sequence[FileResult], summaries: Mapping[str, str] | None = None) -> str:
    """A SARIF 2.1.0 log with one run of migbake; an ignored warning is a result with ``suppressions`` (§3.27.23):
    kind ``inSource`` (the profile's ``validation.ignore``, its reason the justification, its place the
    location) or ``external`` (``--ignore``). ``summaries``: each rule id's one line (its declaration's), the
    ``shortDescription`` of the rule (§3.49.9)."""
    said = summaries or {}
    rules = sorted({p.rule for r in results for p in [*r.problems, *(i.problem for i in r.ignored)]})
    index = {rule: i for i, rule in enumerate(rules)}
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "migbake", "version": __version__, "informationUri": INFO_URI,
                "rules": [{"id": rule, "name": rule,
                           "shortDescription": {"text": said.get(rule, f"migbake rule {rule}")},
                           "helpUri": f"{INFO_URI}#validation-output"} for rule in rules],
            }},
            "artifacts": [{"location": {"uri": sarif_uri(r.file)}} for r in results],
            "results": [_sarif_result(p, i, index[p.rule]) for i, r in enumerate(results) for p in r.problems]
                       + [{**_sarif_result(g.problem, i, index[g.problem.rule]),
                           "suppressions": [_sarif_suppression(g, i)]} for i, r in enumerate(results)
                          for g in r.ignored],
        }],
    }
    return json.dumps(sarif, indent=2, ensure_ascii=False) + "\n"


# characters XML 1.0 allows in no form, not even as a character reference (XML 1.0 §2.2 Char): C0 but tab,
# LF and CR; lone surrogates (a file name's undecodable bytes); U+FFFE and U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    r"""``text`` as XML can carry it: ElementTree escapes markup (``<``, ``&``, quotes); a character no XML
    document may hold is written as its escape (``\x01``), as migbake's messages write it."""
    return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], text)


def junit_report(results: Sequence[FileResult]) -> str:
    """JUnit XML: one test case per file, failing when the file has errors; one skipped test case per ignored
    warning (JUnit classname "migbake.validate.ignored", the skip's message says why)."""
    from xml.etree import ElementTree as ET  # only this format needs XML: start-up does not pay for it

    ignored = sum(len(r.ignored) for r in results)
    suites = ET.Element("testsuites", name="migbake validate")
    suite = ET.SubElement(suites, "testsuite", name="migbake validate", tests=str(len(results) + ignored),
                          failures=str(sum(r.errors > 0 for r in results)), errors="0", skipped=str(ignored))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="migbake.validate", name=_xml(r.file))
        errors = [p for p in r.problems if p.severity == "error"]
        if errors:
            failure = ET.SubElement(case, "failure", type=_xml(errors[0].rule),
                                    message=_xml(f"{plural(len(errors), 'problem')}: {errors[0].message}"))
            failure.text = _xml("\n".join(p.format() for p in r.problems))
        elif r.problems:
            out = ET.SubElement(case, "system-out")
            out.text = _xml("\n".join(p.format() for p in r.problems))
    for r in results:
        for g in r.ignored:
            p = g.problem
            case = ET.SubElement(suite, "testcase", classname="migbake.validate.ignored",
                                 name=_xml(f"{r.file}:{p.line}:{p.col} [{p.rule}]"))
            skipped = ET.SubElement(case, "skipped", message=_xml(f"ignored ({g.suppression.why()})"))
            skipped.text = _xml(g.format())
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def render_report(fmt: str, results: Sequence[FileResult], *, color: bool = False,
                  with_summary: bool = True, strict: bool = False, summaries: Mapping[str, str] | None = None) -> str:
    """The report in format ``fmt`` (one of FORMATS); ``summaries``: each rule id's one line, for SARIF's rules."""
    if fmt == "text":
        return text_report(results, color=color, with_summary=with_summary, strict=strict)
    if fmt == "sarif":
        return sarif_report(results, summaries)
    return REPORTERS[fmt](results)


# every format and its reporter: `validate --format` offers exactly these
REPORTERS: dict[str, Callable[[Sequence[FileResult]], str]] = {
    "text": text_report, "json": json_report, "github": github_report, "sarif": sarif_report,
    "junit": junit_report}
FORMATS = tuple(REPORTERS)
