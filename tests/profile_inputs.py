"""Hypothesis strategies for node-profile inputs: the example profiles mutated, any value the schema allows, token soup.

Used by test_property.py. ``mutated_profiles`` starts from the profiles of images/ (``SEEDS``) and
deletes or adds keys, swaps values for other types, hostile strings, huge numbers and random Unicode,
emits block YAML, flow YAML or JSON and sometimes damages the text or the bytes; ``allowed_variants``
sets every field to values the schema allows; ``random_inputs`` is YAML-ish token soup and plain
random bytes and text.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st
from support import IMAGES

from migbake.document.patterns import matches

SEEDS: list[dict[str, Any]] = [yaml.safe_load((p / "node-profile.yaml").read_text()) for p in IMAGES]
KNOWN_KEYS = sorted(
    {
        "version",
        "name",
        "description",
        "gpu_count",
        "gpus",
        "model",
        "devices",
        "mig",
        "enabled",
        "layout",
        "kubelet",
        "present",
        "unit",
        "restore",
        "config_path",
        "config_name",
        "timeout_seconds",
        "on_failure",
        "tools",
        "nvidia_smi",
        "nvidia_mig_parted",
        "conflicting_manager",
        "action",
        "driver",
        "1g.10gb",
        "1g.18gb",
        "3g.40gb",
        "1g.10gb+me",
        "2g.20gb",
        "7g.80gb",
        "1c.3g.40gb",
        "4g.71gb",
    }
)
PLAUSIBLE = [
    "all",
    "h200-141gb",
    "a100-80gb",
    "A100-SXM4-40GB",
    "h100-80gb",
    "a30",
    "b200-180gb",
    "mask",
    "disable",
    "continue",
    "block-kubelet",
    "host",
    "container",
    "kubelet.service",
    "a@b:c-d.service",
    "/usr/bin/nvidia-smi",
    "/opt/x+y/-z.v1",
    "/etc/nvidia-mig/config.yaml",
    "current",
    "cfg.v1-x",
    "node-1",
    "0-0",
]
HOSTILE = [
    "$(reboot)",
    "`id`",
    "a;b",
    "a\nb",
    "a\rb",
    "%n",
    "%%",
    "${x}",
    "%{x}",
    "\u2028",
    "\x85",
    "\x7f",
    "\\",
    "'",
    '"',
    "../../etc",
    "/etc/../x",
    "-Hhost.service",
    "yes",
    "on",
    "0644",
    "~",
    "",
    " ",
    "#",
    "x" * 300,
    "é✓𝄞",
    "\ufeff",
    "\t",
    "*a",
    "&a",
    "!tag",
    "<<",
    "- x",
    "a: b",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 7.0, 8.0, -1.0, 1e30]),
    st.text(max_size=24),
    st.sampled_from(PLAUSIBLE),
    st.sampled_from(HOSTILE),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _slots(data: Any, out: list[tuple[Any, Any]] | None = None) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in ``data``: the places a mutation can hit."""
    out = [] if out is None else out
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((data, k))
            _slots(v, out)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((data, i))
            _slots(v, out)
    return out


@st.composite
def mutated_profiles(draw: st.DrawFn) -> bytes:
    """An example profile with a few structural mutations, emitted and maybe damaged as text/bytes."""
    data = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 4))):
        slots = _slots(data)
        op = draw(st.sampled_from(["delete", "replace", "insert", "plausible"]))
        if op == "insert" or not slots:
            targets = [c[k] for c, k in slots if isinstance(c[k], dict)] + [data]
            target = draw(st.sampled_from(targets))
            target[draw(st.sampled_from(KNOWN_KEYS) | st.text(max_size=10))] = draw(values)
            continue
        container, key = draw(st.sampled_from(slots))
        if op == "delete":
            del container[key]
        elif op == "replace":
            container[key] = draw(values)
        else:
            container[key] = draw(st.sampled_from(PLAUSIBLE) | st.integers(0, 9))
    form = draw(st.sampled_from(["block", "flow", "json"]))
    if form == "json":
        text = json.dumps(data, ensure_ascii=draw(st.booleans()))
    else:
        text = yaml.safe_dump(
            data, sort_keys=draw(st.booleans()), allow_unicode=True, default_flow_style=form == "flow"
        )
    damage = draw(st.sampled_from(["none", "none", "insert", "delete", "duplicate-line", "bytes"]))
    if damage == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=12) | st.sampled_from(HOSTILE)) + text[at:]
    elif damage == "delete" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + text[at + draw(st.integers(1, 20)) :]
    elif damage == "duplicate-line":
        lines = text.split("\n")
        at = draw(st.integers(0, len(lines) - 1))
        text = "\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]])
    raw = text.encode("utf-8")
    if damage == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=6)) + raw[at:]
    return raw


_SCHEMA = json.loads((Path(__file__).parents[1] / "schemas/node-profile.schema.json").read_text())
_PROPS = _SCHEMA["properties"]
_segment = st.from_regex(r"\A[A-Za-z0-9._+-]{1,12}\Z").filter(lambda seg: seg not in (".", ".."))
allowed_paths = st.lists(_segment, min_size=1, max_size=4).map(lambda segs: "/" + "/".join(segs))
# restore.config_path: any path inside the folders output-path-not-allowed allows (rules/nodepaths.py)
allowed_config_paths = st.tuples(st.sampled_from(["/etc/nvidia-mig", "/etc/migbake"]), allowed_paths).map(
    lambda parts: parts[0] + parts[1])
allowed_units = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.:-]{0,16}(@[A-Za-z0-9_.:-]{1,8})?\.service\Z")
allowed_text = st.text(max_size=200).filter(
    lambda t: matches(_PROPS["description"]["pattern"], t)
)
FIELDS: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("name",): st.from_regex(_PROPS["name"]["pattern"], fullmatch=True),
    ("description",): allowed_text,
    ("kubelet", "unit"): allowed_units,
    ("kubelet", "present"): st.booleans(),
    ("restore", "unit"): allowed_units,
    ("restore", "config_path"): allowed_config_paths,
    ("restore", "config_name"): st.from_regex(
        _PROPS["restore"]["properties"]["config_name"]["pattern"], fullmatch=True
    ),
    ("restore", "timeout_seconds"): st.integers(30, 3600),
    ("restore", "on_failure"): st.sampled_from(["block-kubelet", "continue"]),
    ("tools", "nvidia_smi"): allowed_paths,
    ("tools", "nvidia_mig_parted"): allowed_paths,
    ("conflicting_manager", "unit"): allowed_units,
    ("conflicting_manager", "action"): st.sampled_from(["disable", "mask"]),
}


@st.composite
def allowed_variants(draw: st.DrawFn) -> bytes:
    """An example profile with some settings replaced by any value the schema allows."""
    data = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for path in draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=6, unique=True)):
        target = data
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = draw(FIELDS[path])
    return yaml.safe_dump(data, allow_unicode=draw(st.booleans())).encode("utf-8")


TOKENS = [
    "version: 1\n",
    "name: x\n",
    "name: 0-nasty\n",
    "gpus:\n",
    "  - model: a30\n",
    "    mig:\n",
    "      layout: {1g.6gb: 4}\n",
    "  - ",
    "model: h200-141gb\n",
    "devices: [0, 1]\n",
    "{",
    "}",
    "[",
    "]",
    ": ",
    "- ",
    "&a ",
    "*a",
    "!!str ",
    "!x ",
    "<<: *a\n",
    "---\n",
    "...\n",
    "\t",
    "'",
    '"',
    "# c\n",
    "\n",
    "yes",
    "0x10",
    "0644",
    "~",
    "? ",
    "|\n",
    ">-\n",
    "%YAML 1.1\n",
    "  ",
    "kubelet: {present: false}\n",
    "restore: {unit: a.service}\n",
    "\ufeff",
    "\x00",
    "\u2028",
    "9" * 50,
    "1e3",
    ".inf",
    "\\",
]
token_soup = st.lists(st.sampled_from(TOKENS), max_size=30).map(lambda ts: "".join(ts).encode("utf-8"))
random_inputs = st.one_of(
    st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-8")), token_soup
)
