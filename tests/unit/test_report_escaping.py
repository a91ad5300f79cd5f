"""Every report format writes a file name through the format's own escaping: JUnit stays well-formed XML whatever
the name holds, and SARIF's ``artifactLocation.uri`` is a URI reference that decodes back to the name."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote
from xml.etree import ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from migbake.problems import Ignored, Problem, Suppression
from migbake.report import FileResult, junit_report, sarif_report

# a file name as Python holds it (os.fsdecode): any character, and the lone surrogates U+DC80..U+DCFF that stand
# for the bytes of a name that are not UTF-8 (PEP 383); no other lone surrogate comes from a file system
NAMES = st.text(st.one_of(st.characters(codec=None, exclude_categories=("Cs",)),
                          st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)), min_size=1, max_size=30)
# RFC 3986 §2: what a URI reference may hold unescaped here (unreserved, "/", and the percent of an escape)
URI_CHARS = re.compile(r"[A-Za-z0-9._~/%-]*")


def _results(name: str) -> list[FileResult]:
    error = Problem(name, 3, 5, "/gpus/0", f"bad {name}", "count-above-max")
    warning = Problem(name, 4, 1, "/x", "odd", "config-name-label", "warning")
    return [FileResult(name, [error], [Ignored(warning, Suppression("config-name-label", "flag"))])]


@given(NAMES)
def test_junit_is_well_formed_whatever_the_file_name(name: str) -> None:
    root = ET.fromstring(junit_report(_results(name)).encode("utf-8", "surrogateescape"))
    case = root.find("testsuite/testcase")
    assert case is not None
    if not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", name):
        assert case.get("name") == name  # what XML can hold is kept as it is


@given(NAMES)
def test_sarif_uri_is_a_uri_reference_naming_the_file(name: str) -> None:
    log = json.loads(sarif_report(_results(name)))
    run = log["runs"][0]
    uris = [run["artifacts"][0]["location"]["uri"]] + [
        loc["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"] for loc in r["locations"]]
    for uri in uris:
        assert URI_CHARS.fullmatch(uri), uri
        assert unquote(uri, errors="surrogateescape") == name


def test_a_space_and_a_hash_are_escaped() -> None:
    log = json.loads(sarif_report(_results("my images/a#1.yaml")))
    assert log["runs"][0]["artifacts"][0]["location"]["uri"] == "my%20images/a%231.yaml"
