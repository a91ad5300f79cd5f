"""Property: whatever bytes come in, validation never raises, and what it accepts renders to sound output.

Inputs are the example profiles of images/ mutated (keys deleted or added, values swapped for other
types, hostile strings, huge numbers, random Unicode), emitted as block YAML, flow YAML or JSON and
then sometimes damaged as text or bytes; plus YAML-ish token soup and plain random bytes. Every
accepted profile is rendered and its output passes the fast checks (PyYAML reads config.yaml and
user-data, ``bash -n`` reads every script); a few also go through shellcheck and cloud-init's schema,
and every distinct mig-parted config goes through NVIDIA's own parser (in one batch, at the end).

Derandomized, so CI sees the same inputs every run; the counts are printed by the last test
(``pytest -s`` or the ``-rA`` summary shows them).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from realtools import cloud_init_schema, device_filter_problems, mig_parted_refusals, shellcheck
from support import IMAGES

from migbake.loader import load_profile_bytes
from migbake.render import render
from migbake.schema import _fast_check
from migbake.schema_messages import _validator
from migbake.validate import Checked, check_bytes

# on a failure Hypothesis' pytest plugin imports libcst, which warns through mypy_extensions: with
# filterwarnings = error that warning would turn the report of the real failure into an INTERNALERROR
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

SEEDS: list[dict[str, Any]] = [yaml.safe_load((p / "node-profile.yaml").read_text()) for p in IMAGES]
COUNTS: Counter[str] = Counter()
MIG_CONFIGS: dict[tuple[str, str], Path] = {}  # (config text, config name) -> file, for NVIDIA's parser
MIG_CONFIG_DIR = Path(tempfile.mkdtemp(prefix="migbake-prop-mig-"))
DEEP_CHECKS = 6  # accepted profiles that also go through shellcheck and cloud-init (slow: ~1 s each)

# no explain phase: it would write .hypothesis/patches into the checkout on a failure
SETTINGS = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

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
allowed_units = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.:-]{0,16}(@[A-Za-z0-9_.:-]{1,8})?\.service\Z")
allowed_text = st.text(max_size=200).filter(
    lambda t: re.search(_PROPS["description"]["pattern"], t) is not None
)
FIELDS: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("name",): st.from_regex(_PROPS["name"]["pattern"], fullmatch=True),
    ("description",): allowed_text,
    ("kubelet", "unit"): allowed_units,
    ("kubelet", "present"): st.booleans(),
    ("restore", "unit"): allowed_units,
    ("restore", "config_path"): allowed_paths,
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


def _check_problems(checked: Checked) -> None:
    for p in checked.problems:
        assert p.line >= 1 and p.col >= 1, p
        assert p.pointer == "" or p.pointer.startswith("/"), p
        assert "\n" not in p.format() and "\r" not in p.format(), p
        assert p.rule and p.severity in ("error", "warning"), p
    if checked.profile is None:
        assert any(p.severity == "error" for p in checked.problems), checked.problems


def _fast_checks(checked: Checked) -> None:
    assert checked.profile is not None
    artifacts = render(checked.profile)
    COUNTS["rendered"] += 1
    files = {a.path: a for a in artifacts}
    config = [
        a
        for a in artifacts
        if a.path.startswith("rootfs/") and a.path.endswith(checked.profile.restore.config_path)
    ]
    assert len(config) == 1
    cfg = yaml.safe_load(config[0].content)
    assert list(cfg["mig-configs"]) == [checked.profile.restore.config_name]
    assert device_filter_problems(config[0].content) == []
    key = (config[0].content, checked.profile.restore.config_name)
    if key not in MIG_CONFIGS:
        MIG_CONFIGS[key] = MIG_CONFIG_DIR / f"{len(MIG_CONFIGS)}.yaml"
        MIG_CONFIGS[key].write_text(key[0], encoding="utf-8")
    user_data = yaml.safe_load(files["cloud-init/user-data"].content)
    assert set(user_data) == {"bootcmd", "write_files", "runcmd"}
    with tempfile.TemporaryDirectory(prefix="migbake-prop-") as tmp:
        scripts = []
        for a in artifacts:
            path = Path(tmp) / a.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(a.data)
            if a.path.endswith(".sh"):
                scripts.append(path)
        ran = subprocess.run(
            ["bash", "-c", 'for f; do bash -n "$f" || { echo "$f"; exit 1; }; done', "_", *map(str, scripts)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        if COUNTS["deep"] < DEEP_CHECKS and COUNTS["rendered"] % 30 == 1:  # spread over the strategies
            COUNTS["deep"] += 1
            sc = shellcheck(scripts)
            assert sc.rc == 0, sc.text
            ci = cloud_init_schema(Path(tmp) / "cloud-init/user-data")
            assert ci.rc == 0, ci.text


def _property(raw: bytes, kind: str) -> None:
    COUNTS["inputs"] += 1
    COUNTS[f"inputs:{kind}"] += 1
    checked = check_bytes(raw, "fuzz.yaml")  # must not raise, whatever the bytes
    _check_problems(checked)
    loaded, _ = load_profile_bytes(raw, "fuzz.yaml")
    if loaded.data is not None:  # the fast schema check and jsonschema give the same verdict
        assert _fast_check()(loaded.data) == _validator().is_valid(loaded.data), raw
    if checked.profile is not None:
        COUNTS["accepted"] += 1
        _fast_checks(checked)


@SETTINGS
@given(raw=mutated_profiles())
def test_mutated_profiles_never_crash_and_accepted_ones_render(raw: bytes) -> None:
    _property(raw, "mutated")


@settings(SETTINGS, max_examples=250)
@given(raw=allowed_variants())
def test_any_allowed_value_renders_to_sound_output(raw: bytes) -> None:
    _property(raw, "allowed")


@settings(SETTINGS, max_examples=400)
@given(raw=random_inputs)
def test_random_input_never_crashes(raw: bytes) -> None:
    _property(raw, "random")


def test_seeds_are_accepted() -> None:
    for seed in SEEDS:
        checked = check_bytes(yaml.safe_dump(seed).encode(), "seed.yaml")
        assert checked.ok, [p.format() for p in checked.problems]


def test_accepted_configs_pass_nvidias_parser() -> None:
    """Every distinct config the properties rendered, judged by nvidia-mig-parted (after them, in one batch)."""
    if not MIG_CONFIGS:
        pytest.skip("the property tests did not run")
    try:
        assert mig_parted_refusals([(path, name) for (_, name), path in MIG_CONFIGS.items()]) == []
    finally:
        shutil.rmtree(MIG_CONFIG_DIR, ignore_errors=True)
    COUNTS["mig-parted"] = len(MIG_CONFIGS)


def test_report_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """Print how many inputs the properties ran (last in the file, so after them)."""
    if not COUNTS["inputs"]:
        pytest.skip("the property tests did not run")
    with capsys.disabled():
        print(
            f"\nproperty inputs: {COUNTS['inputs']} ({COUNTS['inputs:mutated']} mutated, "
            f"{COUNTS['inputs:allowed']} schema-allowed variants, {COUNTS['inputs:random']} random); "
            f"accepted and rendered: {COUNTS['rendered']}; "
            f"shellcheck + cloud-init on {COUNTS['deep']}; nvidia-mig-parted on {COUNTS['mig-parted']} "
            "distinct configs"
        )
    assert COUNTS["rendered"] > 0, "no mutated profile was accepted: the mutations are too destructive"
