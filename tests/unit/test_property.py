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

import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from profile_inputs import SEEDS, allowed_variants, mutated_profiles, random_inputs
from realtools import cloud_init_schema, device_filter_problems, mig_parted_refusals, shellcheck

from migbake.render.tree import render
from migbake.rules.validate import ValidationResult, check_bytes

# on a failure Hypothesis' pytest plugin imports libcst, which warns through mypy_extensions: with
# filterwarnings = error that warning would turn the report of the real failure into an INTERNALERROR
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

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

def _check_problems(checked: ValidationResult) -> None:
    for p in checked.problems:
        assert p.line >= 1 and p.col >= 1, p
        assert p.pointer == "" or p.pointer.startswith("/"), p
        assert "\n" not in p.format() and "\r" not in p.format(), p
        assert p.rule and p.severity in ("error", "warning"), p
    if checked.profile is None:
        assert any(p.severity == "error" for p in checked.problems), checked.problems


def _fast_checks(checked: ValidationResult) -> None:
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
    names = list(checked.profile.layout_names) or [checked.profile.restore.config_name]  # named layouts: each
    assert list(cfg["mig-configs"]) == names
    assert device_filter_problems(config[0].content) == []
    for name in names:  # NVIDIA's parser judges each config the file holds
        key = (config[0].content, name)
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
