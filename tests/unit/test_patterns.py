"""Every pattern migbake applies matches the whole string, and no control character.

Walks both schemas (node profile, GPU catalog): each ``pattern`` is anchored, refuses VALID + "\\n",
VALID + "\\r" and VALID with a control character (C0, DEL, C1 with U+0085, U+2028/2029) inside, and
the fast check and jsonschema (as migbake configures it) give the same verdict on every one of those.
Then the same through the front doors: a profile, the importer, a catalog file.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import IMAGES, REPO

from migbake.document.patterns import (
    compile_pattern,
    matches,
    schema_patterns,
    whole,
)
from migbake.document.schema_messages import _Validator
from migbake.profile.fastschema import compile_schema
from migbake.rules.validate import check_bytes

SCHEMAS = {name: json.loads((REPO / "schemas" / name).read_text()) for name in
           ("node-profile.schema.json", "mig-catalog.schema.json")}
PATTERNS = sorted({(name, where, p) for name, s in SCHEMAS.items() for where, p in schema_patterns(s)})
CONTROLS = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]] + ["\u2028", "\u2029"]
ENDINGS = ["\n", "\r", "\r\n", "\u2028", "\x85"]
COUNTS: Counter[str] = Counter()
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


def _hostile(valid: str) -> list[str]:
    """VALID with a line ending after it, and with each control character at its start, middle and end."""
    out = [valid + e for e in ENDINGS] + [e + valid for e in ENDINGS]
    mid = len(valid) // 2
    for c in CONTROLS:
        out += [c + valid, valid[:mid] + c + valid[mid:], valid + c]
    return out


def test_there_are_patterns_in_both_schemas() -> None:
    assert {name for name, _, _ in PATTERNS} == set(SCHEMAS)
    assert len(PATTERNS) >= 15


@pytest.mark.parametrize(("schema", "where", "pattern"), PATTERNS, ids=[f"{n[:4]}{w}" for n, w, _ in PATTERNS])
def test_every_schema_pattern_is_anchored(schema: str, where: str, pattern: str) -> None:
    assert pattern.startswith("^") and pattern.endswith("$"), f"{schema}{where}: {pattern!r} must match whole"


@pytest.mark.parametrize(("schema", "where", "pattern"), PATTERNS, ids=[f"{n[:4]}{w}" for n, w, _ in PATTERNS])
def test_every_schema_pattern_refuses_line_ends_and_controls(schema: str, where: str, pattern: str) -> None:
    fast = compile_schema({"type": "string", "pattern": pattern})
    slow = _Validator({"type": "string", "pattern": pattern})
    ok = matches  # the one helper, as the schema, the fast check, importer and catalog use it

    @SETTINGS
    @given(valid=st.from_regex(pattern, fullmatch=True).filter(lambda s: ok(pattern, s)))
    def check(valid: str) -> None:
        assert fast(valid) and slow.is_valid(valid), valid
        for bad in _hostile(valid):
            COUNTS["class1-patterns"] += 1
            refused = not ok(pattern, bad)
            assert refused, f"{schema}{where}: {pattern!r} accepts {bad!r}"
            assert fast(bad) == slow.is_valid(bad) == (not refused), f"fast and jsonschema disagree on {bad!r}"

    check()


@pytest.mark.parametrize(("pattern", "text", "expected"), [
    ("^a$", "a", True), ("^a$", "a\n", False), ("^a.b$", "a\rb", False), ("^a.b$", "a\u2028b", False),
    ("^a.b$", "a-b", True), ("^[$.]+$", "$.", True), ("^[$.]+$", "$.\n", False), (r"^\$$", "$", True),
    (r"^\d$", "\u0663", False), (r"^\d$", "3", True), ("b$", "ab\n", False), ("^[]a]$", "]", True),
    ("^[^]a]$", "b", True), ("^[^]a]$", "]", False),
], ids=lambda v: repr(v)[:16])
def test_the_helper_reads_a_pattern_as_ecma_262_does(pattern: str, text: str, expected: bool) -> None:
    assert matches(pattern, text) is expected
    assert (compile_pattern(pattern).search(text) is not None) is expected


def test_whole_refuses_a_pattern_that_is_not_anchored() -> None:
    with pytest.raises(ValueError, match="whole-string"):
        whole("[a-z]+")


# --- through the front doors -------------------------------------------------------------------

SEED = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
SEED.get("kubelet", {}).pop("layout", None)  # the generic layout, where kubernetes.kubelet_args_env applies
SEED.setdefault("kubernetes", {})["kubelet_args_env"] = "KUBELET_EXTRA_ARGS"
PROFILE_FIELDS: list[tuple[tuple[str, ...], str]] = [
    (("name",), "node-x"), (("description",), "an H200 node"), (("kubelet", "unit"), "kubelet.service"),
    (("restore", "unit"), "mig-x.service"), (("restore", "config_path"), "/etc/nvidia-mig/x.yaml"),
    (("restore", "config_name"), "cfg-1"), (("tools", "nvidia_smi"), "/usr/bin/nvidia-smi"),
    (("tools", "nvidia_mig_parted"), "/usr/local/bin/nvidia-mig-parted"),
    (("conflicting_manager", "unit"), "nvidia-mig-manager.service"),
    (("kubernetes", "kubelet_args_env"), "KUBELET_EXTRA_ARGS"),
]


def _with(data: dict[str, Any], path: tuple[str, ...], value: object) -> bytes:
    out = json.loads(json.dumps(data))
    target = out
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return json.dumps(out).encode()


@pytest.mark.parametrize(("path", "valid"), PROFILE_FIELDS, ids=["/".join(p) for p, _ in PROFILE_FIELDS])
def test_a_profile_field_with_a_line_end_or_control_is_refused(path: tuple[str, ...], valid: str) -> None:
    assert check_bytes(_with(SEED, path, valid), "p.yaml").ok
    for bad in [valid + e for e in ENDINGS] + [valid[:3] + c + valid[3:] for c in CONTROLS if c != "\t"]:
        COUNTS["class1-profile"] += 1
        checked = check_bytes(_with(SEED, path, bad), "p.yaml")
        assert not checked.ok, f"{'/'.join(path)} = {bad!r} validates"
        assert any(p.pointer == "/" + "/".join(path) for p in checked.problems), checked.problems


@pytest.mark.parametrize(("where", "bad"), [
    ("key", {"node-x\n": "ok"}), ("value", {"node-x": "ok\n"}), ("key", {"example.com/a\r": "b"}),
], ids=["key-lf", "value-lf", "key-cr"])
def test_node_labels_end_where_they_look_like_they_end(where: str, bad: dict[str, str]) -> None:
    data = json.loads(json.dumps(SEED))
    data.setdefault("kubernetes", {}).update({"kubelet_args_env": "KUBELET_EXTRA_ARGS", "node_labels": bad})
    COUNTS["class1-profile"] += 1
    assert not check_bytes(json.dumps(data).encode(), "p.yaml").ok


def test_a_pci_device_id_with_a_newline_is_refused() -> None:
    data = json.loads(json.dumps(SEED))
    data["gpus"][0]["pci_device_ids"] = ["0x233510DE\n"]
    COUNTS["class1-profile"] += 1
    checked = check_bytes(json.dumps(data).encode(), "p.yaml")
    assert not checked.ok and any(p.pointer == "/gpus/0/pci_device_ids/0" for p in checked.problems)


def test_the_importer_refuses_a_config_name_with_a_newline(tmp_path: Path) -> None:
    from migbake.node.importer import ImportRefused, import_config

    cfg = tmp_path / "config.yaml"
    cfg.write_text('version: v1\nmig-configs:\n  "all-1g\\n":\n    - devices: all\n      mig-enabled: false\n')
    COUNTS["class1-import"] += 1
    with pytest.raises(ImportRefused) as caught:
        import_config(cfg.read_bytes(), str(cfg), config="all-1g\n")
    assert [p.rule for p in caught.value.problems] == ["import-config-name"]


def test_report_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """How many hostile inputs this module tried."""
    with capsys.disabled():
        print("\nclass 1 (patterns):", dict(COUNTS))
