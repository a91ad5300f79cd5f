"""migbake import: an nvidia-mig-parted config (an export of a known-good node) -> a node profile, or refused
with the reason, at the config's own line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from realtools import assert_mig_parted_accepts
from support import H200_EXPORT, H200_FIXTURES, cli, generate

from migbake.gpu.catalog import load_catalog
from migbake.node.importer import ImportRefused, import_config
from migbake.node.nvidiasmi import read_capture
from migbake.rules.validate import check_bytes

H200_XML = H200_FIXTURES / "nvidia-smi-q.xml"


def fixture_xml() -> Path:
    """The real `nvidia-smi -q -x` of an H200 (tests/fixtures/h200)."""
    return H200_XML


# `nvidia-mig-parted export` of a single-type node: no device-filter (README example shape)
EXPORT_ONE_MODEL = """\
version: v1
mig-configs:
  current:
  - devices: [0, 1, 2, 3]
    mig-enabled: true
    mig-devices:
      1g.10gb: 2
      2g.20gb: 1
      3g.40gb: 1
  - devices: [4, 5, 6, 7]
    mig-enabled: true
    mig-devices:
      1g.10gb: 7
"""

# export of a node with two GPU types: one-element filters become strings, flow style lists
EXPORT_TWO_MODELS = """\
version: v1
mig-configs:
  current:
  - device-filter: "0x233010DE"
    devices: [0, 1]
    mig-enabled: true
    mig-devices:
      3g.40gb: 2
  - device-filter: "0x233510DE"
    devices: [2, 3]
    mig-enabled: true
    mig-devices:
      1g.18gb: 7
  - device-filter: "0x233510DE"
    devices: [4]
    mig-enabled: false
    mig-devices: {}
"""

EXPORT_H200 = H200_EXPORT.read_text()  # the shape of `nvidia-mig-parted export`


def _import(text: str, **kw: object) -> str:
    return import_config(text.encode(), "export.yaml", **kw).text  # type: ignore[arg-type]


def _generated_entries(profile_text: str, tmp_path: Path) -> list[dict[str, object]]:
    out = generate(profile_text, tmp_path / "out")
    text = (out / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert_mig_parted_accepts(text, ["current"], tmp_path / "round-trip.yaml")  # NVIDIA's parser agrees
    config = yaml.safe_load(text)
    entries: list[dict[str, object]] = config["mig-configs"]["current"]
    return entries


@pytest.mark.parametrize(("export", "kw"), [
    (EXPORT_ONE_MODEL, {"model": "a100-80gb"}),
    (EXPORT_TWO_MODELS, {}),
    (EXPORT_H200, {"model": "h200"}),
], ids=["one-model-no-filter", "two-models-filtered", "h200-all"])
def test_import_then_generate_round_trips(tmp_path: Path, export: str, kw: dict[str, str]) -> None:
    model = load_catalog().find(kw["model"]) if "model" in kw else None
    profile = _import(export, model=model)
    original = yaml.safe_load(export)["mig-configs"]["current"]
    generated = _generated_entries(profile, tmp_path)
    assert [e["mig-devices"] for e in generated] == [e["mig-devices"] for e in original]
    assert [e["devices"] for e in generated] == [e["devices"] for e in original]
    assert [e["mig-enabled"] for e in generated] == [e["mig-enabled"] for e in original]


def test_import_is_deterministic_and_says_where_it_came_from() -> None:
    a, b = _import(EXPORT_TWO_MODELS), _import(EXPORT_TWO_MODELS)
    assert a == b
    header = [line for line in a.splitlines() if line.startswith("#")]
    assert header[0].startswith("# Imported by migbake ") and "export.yaml" in header[0]
    assert "config 'current'" in header[0]
    assert any("h100-80gb: from device-filter 0x233010DE" in line for line in header)
    data = yaml.safe_load(a)
    assert data["name"] == "imported-h100-80gb-h200-141gb"
    assert [g["model"] for g in data["gpus"]] == ["h100-80gb", "h200-141gb", "h200-141gb"]


def test_single_model_filter_is_kept_exactly(tmp_path: Path) -> None:
    export = EXPORT_H200.replace("  - devices: all", '  - device-filter: "0x233510DE"\n    devices: all')
    profile = _import(export)
    data = yaml.safe_load(profile)
    assert data["device_filter"] == "always"
    assert data["gpus"][0]["pci_device_ids"] == ["0x233510DE"]  # not widened to H200 NVL's 0x233B10DE
    (entry,) = _generated_entries(profile, tmp_path)
    assert entry["device-filter"] == ["0x233510DE"]


def test_import_with_the_h200_fixture_xml() -> None:
    capture = read_capture(fixture_xml(), "nvidia-smi-xml")
    profile = _import(EXPORT_H200, capture=capture)
    data = yaml.safe_load(profile)
    assert data["gpus"] == [{"model": "h200-141gb", "devices": "all", "mig": {"layout": {"1g.18gb": 7}}}]
    assert data["gpu_count"] == 1
    assert "nvidia-smi -q -x: NVIDIA H200, 0x233510DE" in profile
    assert check_bytes(profile.encode(), "p.yaml").problems == []


def test_xml_node_not_covered_by_the_config() -> None:
    capture = read_capture(fixture_xml(), "nvidia-smi-xml")
    export = EXPORT_H200.replace("  - devices: all", '  - device-filter: "0x233010DE"\n    devices: all')
    with pytest.raises(ImportRefused) as e:
        _import(export.replace("1g.18gb", "1g.10gb"), capture=capture)
    assert [p.rule for p in e.value.problems] == ["import-gpu-uncovered"]
    assert "NVIDIA H200, 0x233510DE" in e.value.problems[0].message


def test_xml_node_gpu_matched_by_two_entries() -> None:
    capture = read_capture(fixture_xml(), "nvidia-smi-xml")
    with pytest.raises(ImportRefused) as e:
        _import(_config(_entry(devices="all", **_H200_FILTER), _entry(devices="[0]", **_H200_FILTER)),
                capture=capture)
    assert [(p.rule, p.line) for p in e.value.problems] == [("import-overlap", 8)]
    assert "the last one winning" in e.value.problems[0].message


def _entry(**fields: str) -> str:
    body = {"device-filter": "-", "devices": "all", "mig-enabled": "true", "mig-devices": "{1g.18gb: 7}"}
    body.update(fields)
    kept = [(k, v) for k, v in body.items() if v != "-"]
    lines = [f"    {k}: {v}" if i else f"  - {k}: {v}" for i, (k, v) in enumerate(kept)]
    return "\n".join(lines) + "\n"


_MALFORMED = "import-filter-malformed"
_H200_FILTER = {"device-filter": '"0x233510DE"'}


def _config(*entries: str, version: str = "v1") -> str:
    return f"version: {version}\nmig-configs:\n  current:\n" + "".join(entries)


REFUSED = {
    "filter-typo-no-0x": (_config(_entry(**{"device-filter": '"233510DE"'})), _MALFORMED, 4),
    "filter-typo-short": (_config(_entry(**{"device-filter": '"0x23351DE"'})), _MALFORMED, 4),
    "filter-typo-non-hex": (_config(_entry(**{"device-filter": '["0x2335G0DE"]'})), _MALFORMED, 4),
    "filter-unquoted-number": (_config(_entry(**{"device-filter": "0x233510DE"})), _MALFORMED, 4),
    "filter-subsystem": (_config(_entry(**{"device-filter": '"0x233510DE:0x18BF10DE"'})),
                         "import-filter-subsystem", 4),
    "filter-not-nvidia": (_config(_entry(**{"device-filter": '"0x12341000"'})), "import-filter-unknown", 4),
    "filter-unknown-model": (_config(_entry(**{"device-filter": '"0x1DB610DE"'})), "import-filter-unknown",
                             4),
    "unknown-version": (_config(_entry(), version="v2"), "import-version", 1),
    "unexpected-entry-key": (_config(_entry(extra="1")), "import-entry", 7),
    "mig-off-with-devices": (_config(_entry(**{"mig-enabled": "false"})), "import-mig", 6),
    "mig-on-without-devices": (_config(_entry(**{"mig-devices": "-"})), "import-mig", 4),
    "all-counts-zero": (_config(_entry(**{"mig-devices": "{1g.18gb: 0}"})), "import-mig", 6),
    "bad-devices": (_config(_entry(devices="[0, 0]")), "import-devices", 4),
    "overlap": (_config(_entry(devices="[0, 1]", **_H200_FILTER), _entry(devices="[1]", **_H200_FILTER)),
                "device-overlap", 8),
    "no-model": (_config(_entry(**{"device-filter": '""'})), "import-model", 4),
    "several-configs-other-entries": ("version: v1\nmig-configs:\n  a:\n" + _entry(**_H200_FILTER) + "  b:\n"
                                      + _entry(devices="[0]", **_H200_FILTER), "import-layouts", 8),
    "several-configs-mig-off-in-one": ("version: v1\nmig-configs:\n  a:\n" + _entry(**_H200_FILTER) + "  b:\n"
                                       + _entry(**_H200_FILTER, **{"mig-enabled": "false", "mig-devices": "{}"}),
                                       "import-layouts", 9),
    "several-configs-name-not-a-label": ("version: v1\nmig-configs:\n  a:\n" + _entry(**_H200_FILTER)
                                         + "  b-:\n" + _entry(**_H200_FILTER), "import-config-name", 8),
    "profile-unknown-to-model": (_config(_entry(**_H200_FILTER, **{"mig-devices": "{1g.5gb: 7}"})),
                                 "unknown-profile", 4),
    "not-a-config": ("- just\n- a list\n", "import-config", 1),
    "unexpected-top-level-key": ("extra: 1\n" + _config(_entry()), "import-key", 1),
}


@pytest.mark.parametrize("name", sorted(REFUSED), ids=sorted(REFUSED))
def test_import_refuses(name: str) -> None:
    text, rule, line = REFUSED[name]
    with pytest.raises(ImportRefused) as e:
        _import(text)
    rules = [(p.rule, p.line) for p in e.value.problems]
    assert (rule, line) in rules, [p.format() for p in e.value.problems]
    assert all(p.file == "export.yaml" for p in e.value.problems)


def test_filter_typo_message_says_it_would_match_nothing() -> None:
    with pytest.raises(ImportRefused) as e:
        _import(_config(_entry(**{"device-filter": '"20B010DE"'})))
    (p,) = e.value.problems
    assert "'20B010DE'" in p.message and "silently ignores" in p.message and "match no GPU" in p.message


def test_accepted_filter_forms() -> None:
    for f in ('"0x233510de"', '"0X233510DE"', '["0x233510DE", "0x233B10DE"]'):
        data = yaml.safe_load(_import(_config(_entry(**{"device-filter": f}))))
        assert data["gpus"][0]["model"] == "h200-141gb", f


def test_config_choice_and_zero_counts() -> None:
    second = _entry(**{"mig-devices": "{7g.141gb: 1, 1g.18gb: 0}"})
    text = "version: v1\nmig-configs:\n  a:\n" + _entry() + "  b:\n" + second
    data = yaml.safe_load(_import(text, config="b", model=load_catalog().find("h200")))
    assert data["gpus"][0]["mig"] == {"layout": {"7g.141gb": 1}}
    assert data["restore"] == {"config_name": "b"}


# --- the command line ------------------------------------------------------------------------------

def test_cli_import_to_stdout_and_file(tmp_path: Path) -> None:
    src = tmp_path / "export.yaml"
    src.write_text(EXPORT_H200)
    code, out, _ = cli("import", str(src), "--model", "h200-141gb", "--name", "h200-known-good")
    assert code == 0 and yaml.safe_load(out)["name"] == "h200-known-good"
    dest = tmp_path / "node-profile.yaml"
    code, out, err = cli("import", str(src), "--nvidia-smi-xml", str(fixture_xml()), "-o", str(dest))
    assert code == 0 and out == "" and f"wrote {dest}" in err
    assert cli("validate", str(dest))[0] == 0
    assert cli("import", str(src), "--model", "h200", "-o", str(dest))[0] == 2  # exists, no --force
    assert cli("import", str(src), "--model", "h200", "-o", str(dest), "--force")[0] == 0


def test_cli_import_from_stdin() -> None:
    code, out, _ = cli("import", "-", "--model", "h200", stdin=EXPORT_H200)
    assert code == 0 and "standard input" in out


def test_cli_import_refusal_and_usage(tmp_path: Path) -> None:
    src = tmp_path / "export.yaml"
    src.write_text(_config(_entry(**{"device-filter": '"233510DE"'})))
    code, out, err = cli("import", str(src))
    assert code == 1 and out == ""
    assert f"{src}:4:" in err and "[import-filter-malformed]" in err and "nothing written" in err
    assert cli("import", str(src), "--model", "h200", "--nvidia-smi-xml", str(fixture_xml()))[0] == 2
    code, _, err = cli("import", str(src), "--model", "h2000")
    assert code == 2 and "unknown GPU model" in err


SEVERAL = """\
version: v1
mig-configs:
  inference:
  - device-filter: "0x233010DE"
    devices: all
    mig-enabled: true
    mig-devices:
      1g.10gb: 7
  training:
  - device-filter: "0x233010DE"
    devices: all
    mig-enabled: true
    mig-devices:
      3g.40gb: 2
  "mixed.1":
  - device-filter: "0x233010DE"
    devices: all
    mig-enabled: true
    mig-devices:
      1g.10gb: 2
      2g.20gb: 1
      3g.40gb: 1
"""


def test_several_configs_become_named_layouts(tmp_path: Path) -> None:
    """Each config a layout of the same name; generate's mig-parted config holds each, which NVIDIA's parser accepts,
    with the same MIG devices the file had."""
    text = _import(SEVERAL)
    profile = yaml.safe_load(text)
    (gpu,) = profile["gpus"]
    assert gpu["model"] == "h100-80gb"
    assert gpu["mig"] == {"layouts": {"inference": {"1g.10gb": 7}, "training": {"3g.40gb": 2},
                                      "mixed.1": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}
    assert profile["restore"]["layout"] == {"from": ["kubelet-labels", "file"]}
    assert "configs 'inference', 'training', 'mixed.1' as named layouts" in text
    out = generate(text, tmp_path / "out")
    generated = (out / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    names = ["inference", "training", "mixed.1"]
    assert_mig_parted_accepts(generated, names, tmp_path / "round-trip.yaml")
    configs = yaml.safe_load(generated)["mig-configs"]
    assert sorted(configs) == sorted(names)
    original = yaml.safe_load(SEVERAL)["mig-configs"]
    for name in names:
        assert [e["mig-devices"] for e in configs[name]] == [original[name][0]["mig-devices"]], name


def test_several_configs_one_chosen_stays_one_layout() -> None:
    profile = yaml.safe_load(_import(SEVERAL, config="training"))
    assert all(g["mig"] == {"layout": {"3g.40gb": 2}} for g in profile["gpus"])
    assert profile["restore"] == {"config_name": "training"}


def test_the_import_command_writes_named_layouts(tmp_path: Path) -> None:
    src = tmp_path / "gpu-operator.yaml"
    src.write_text(SEVERAL)
    rc, out, err = cli("import", str(src))
    assert rc == 0, err
    assert set(yaml.safe_load(out)["gpus"][0]["mig"]["layouts"]) == {"inference", "training", "mixed.1"}
    src.write_text(SEVERAL.replace("    devices: all\n    mig-enabled: true\n    mig-devices:\n      3g.40gb: 2",
                                   "    devices: [0]\n    mig-enabled: true\n    mig-devices:\n      3g.40gb: 2"))
    rc, out, err = cli("import", str(src))
    assert rc == 1 and f"{src}:9:" in err and "import-layouts" in err and "--config training" in err, err
