"""OUT/bottlerocket/settings.toml: parsed by a TOML parser, its keys and model names checked against what was
read from Bottlerocket's source (tests/fixtures/bottlerocket/), written only for a layout Bottlerocket can say.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support import IMAGES, TESTS, generate

from migbake.kubernetes.managed import platform_models
from migbake.render.quoting import toml_string
from migbake.rules.validate import check_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 and 3.10
    import tomli as tomllib

FIXTURE = json.loads((TESTS / "fixtures/bottlerocket/nvidia-settings.json").read_text())
KEYS = FIXTURE["keys"]
MODELS = FIXTURE["models"]


def _profile(gpus: str, extra: str = "") -> str:
    return f"version: 1\nname: br\ngpus:\n{gpus}{extra}"


UNIFORM = _profile("  - model: h200\n    mig: {layout: {1g.35gb: 4}}\n")
TWO_MODELS = _profile("  - model: h100-80gb\n    mig: {layout: {2g.20gb: 3}}\n"
                      "  - model: a100-40gb\n    mig: {layout: {7g.40gb: 1}}\n")


def _settings(text: str, tmp_path: Path) -> dict[str, object] | None:
    out = generate(text, tmp_path / "out")
    path = out / "bottlerocket/settings.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _check_against_bottlerocket(settings: dict[str, object]) -> dict[str, str]:
    """Every key is one Bottlerocket has, every model key one nvidia-migmanager knows with that profile."""
    assert list(settings) == ["settings"]
    nvidia = settings["settings"]["kubelet-device-plugins"]["nvidia"]  # type: ignore[index]
    assert set(nvidia) <= set(KEYS) | {"mig"}
    assert nvidia["device-partitioning-strategy"] in KEYS["device-partitioning-strategy"]["values"]
    assert nvidia["device-partitioning-strategy"] == "mig"
    assert list(nvidia["mig"]) == ["profile"]
    profiles: dict[str, str] = nvidia["mig"]["profile"]
    for model, profile in profiles.items():
        assert re.fullmatch(KEYS["mig.profile"]["model_key_regex"], model), model
        assert re.fullmatch(KEYS["mig.profile"]["profile_value_regex"], profile), profile
        assert MODELS[model].get("status") is None, f"{model}: not confirmed in Bottlerocket's source"
        assert profile in MODELS[model]["profiles"], (model, profile)
    return profiles


@pytest.mark.parametrize("image", IMAGES, ids=[p.name for p in IMAGES])
def test_every_image_settings_are_bottlerocket_settings(image: Path, tmp_path: Path) -> None:
    settings = _settings((image / "node-profile.yaml").read_text(), tmp_path)
    if settings is not None:
        _check_against_bottlerocket(settings)


def test_a_uniform_profile_gets_its_settings(tmp_path: Path) -> None:
    settings = _settings(UNIFORM, tmp_path)
    assert settings is not None
    assert _check_against_bottlerocket(settings) == {"h200.141gb": "1g.35gb"}
    settings = _settings(TWO_MODELS, tmp_path / "two")
    assert settings is not None
    assert _check_against_bottlerocket(settings) == {"h100.80gb": "2g.20gb", "a100.40gb": "7g.40gb"}


@pytest.mark.parametrize(("gpus", "extra", "where", "why"), [
    ("  - model: h200\n    mig: {layout: {1g.18gb: 3, 2g.35gb: 1}}\n", "", "/gpus/0/mig/layout",
     "bottlerocket-os/bottlerocket#4483"),
    ("  - model: h200\n    devices: [0, 1]\n    mig: {layout: {1g.18gb: 7}}\n"
     "  - model: h200\n    devices: [2, 3]\n    mig: {layout: {3g.71gb: 2}}\n", "gpu_count: 4\n", "/gpus/1/mig/layout",
     "differs from /gpus/0"),
    ("  - model: h200\n    mig: {layout: {1g.18gb: 3}}\n", "", "/gpus/0/mig/layout/1g.18gb", "fills every"),
    ("  - model: h200\n    mig: {layout: {4g.71gb: 1}}\n", "", "/gpus/0/mig/layout", "4g.71gb is not a size"),
    ("  - model: a30\n    mig: {layout: {1g.6gb: 4}}\n", "", "/gpus/0/model", "not a GPU model Bottlerocket"),
    ("  - model: h100-80gb\n    mig: {enabled: false}\n", "", "/gpus/0", "MIG is off here"),
], ids=["mixed", "two-layouts", "not-full", "size-unknown-to-it", "unknown-model", "mig-off"])
def test_what_bottlerocket_cannot_say_gets_no_file_and_a_located_warning(
        gpus: str, extra: str, where: str, why: str, tmp_path: Path) -> None:
    assert _settings(_profile(gpus, extra), tmp_path) is None
    assert check_bytes(_profile(gpus, extra).encode(), "p.yaml").problems == []  # quiet unless required
    checked = check_bytes(_profile(gpus, extra + "bottlerocket: {required: true}\n").encode(), "p.yaml")
    assert [(p.pointer, p.rule, p.severity) for p in checked.problems] == \
        [(where, "bottlerocket-inexpressible", "warning")]
    assert why in checked.problems[0].message


def test_no_kubelet_no_bottlerocket(tmp_path: Path) -> None:
    assert _settings(UNIFORM + "kubelet: {present: false}\n", tmp_path) is None


def test_the_packaged_table_is_what_bottlerocket_knows() -> None:
    for model, row in platform_models("bottlerocket").items():
        known = MODELS[row["key"]]
        assert known.get("status") is None, model
        assert {p: str(n) for p, n in row["profiles"].items()}.items() <= known["profiles"].items(), model


@pytest.mark.parametrize("value", ["plain", 'quote"d', "back\\slash", "new\nline", "tab\t", "nul\x00", "del\x7f",
                                   "\x1b[31m", "café — ok", "\u2028", "'single'", "= [x]", "#", ""])
def test_toml_string_keeps_every_value(value: str) -> None:
    doc = f"{toml_string(value)} = {toml_string(value)}\n[t]\n{toml_string('k.' + value)} = 1\n"
    assert tomllib.loads(doc) == {value: value, "t": {"k." + value: 1}}
