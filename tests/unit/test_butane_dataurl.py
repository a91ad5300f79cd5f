"""migbake's Butane-to-Ignition pieces without the binaries: data: URLs as butane makes them, and the YAML emitter.

The fixture (tests/fixtures/butane/, butane v0.29.0's own output) pins butane's choice between the
percent-escaped and the base64 form; migbake never gzips (render/targets/ignition.py says why), so where
butane gzipped the two are equal as data only.
"""

from __future__ import annotations

import json

import pytest
import yaml
from ignition_tree import decode_data_url
from support import TESTS

from migbake.render.quoting import yaml_document
from migbake.render.targets.ignition import data_url

FIXTURES = TESTS / "fixtures" / "butane"
INPUTS: dict[str, str] = json.loads((FIXTURES / "encoding-cases.inputs.json").read_text(encoding="utf-8"))
BUTANE = {f["path"][len("/etc/"):]: f["contents"]
          for f in json.loads((FIXTURES / "encoding-cases.ign").read_text())["storage"]["files"]}


@pytest.mark.parametrize("name", sorted(INPUTS), ids=sorted(INPUTS))
def test_data_url_as_butane_makes_it(name: str) -> None:
    data = INPUTS[name].encode("utf-8")
    ours, theirs = data_url(data), BUTANE[name]
    assert decode_data_url(ours) == data == decode_data_url(theirs["source"], theirs["compression"])
    if theirs["compression"] == "":
        assert ours == theirs["source"]  # the same form, byte for byte (butane gzips only the others)


@pytest.mark.parametrize(("data", "url"), [
    (b"hello world\n", "data:,hello%20world%0A"),
    (b"", "data:,"),
    (b"a-b_c.d!e~f*g'h(i)j", "data:,a-b_c.d!e~f*g'h(i)j"),
    (b"%%%%", "data:,%25%25%25%25"),
    (b"%" * 12, "data:;base64,JSUlJSUlJSUlJSUl"),
], ids=["short", "empty", "unreserved", "escaped-shorter", "base64-shorter"])
def test_data_url_forms(data: bytes, url: str) -> None:
    assert data_url(data) == url


@pytest.mark.parametrize("value", [
    "on", "yes", "0644", "0o644", "1e3", "null", "~", "a: b", "#x", "- x", "'q'", '"q"', "x\\y", "trailing \n",
    "two\nlines\n", "  leading\n", "tab\there", "café — ok\n", "{a}", "[a]", "*alias", "&anchor", "!tag", "%x", "@x",
    "`x", "|", ">", "2025-01-01", "0x1F", ".inf", "\u2028", "no newline at end\nx",
], ids=lambda v: repr(v)[:20])
def test_yaml_document_keeps_every_string(value: str) -> None:
    data = {"k": value, "list": [value, {"inline": value}], "mode": 420, "on": True}
    assert yaml.safe_load(yaml_document(data)) == data
