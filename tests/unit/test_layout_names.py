"""Named layouts: ``mig.layouts`` and ``restore.layout`` validated, and one mig-parted config per name.

The rules are a table of good and bad profiles (rules.layoutnames); the generated config holds one config per
layout name, and NVIDIA's parser (``nvidia-mig-parted assert --valid-config -c NAME``) accepts each, while a
name the profile does not have is refused by that same parser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from realtools import assert_mig_parted_accepts, mig_parted_valid
from support import generate

from migbake.rules.validate import check_bytes

TWO_MODELS = """version: 1
name: two-models
gpus:
  - model: h100-80gb
    mig:
      layouts:
        infer: {1g.10gb: 7}
        train: {7g.80gb: 1}
        'yes': {3g.40gb: 2}
  - model: h200-141gb
    mig:
      layouts:
        infer: {1g.18gb: 7}
        train: {7g.141gb: 1}
        'yes': {3g.71gb: 2}
  - model: l40s
    devices: all
    mig: {enabled: false}
restore:
  layout: {from: [file, kubelet-labels, credential], default: infer}
"""


def _rules(text: str) -> list[tuple[str, str]]:
    checked = check_bytes(text.encode(), "p.yaml")
    return [(p.rule, p.pointer) for p in checked.problems]


CASES = {
    "two models, every name": (TWO_MODELS, []),
    "one model, no default": (TWO_MODELS.split("  - model: h200")[0] + "restore:\n  layout: {from: [credential]}\n",
                              []),
    "gap in the matrix": (TWO_MODELS.replace("        train: {7g.141gb: 1}\n", ""),
                          [("layout-name-missing", "/gpus/1/mig/layouts")]),
    "unknown default": (TWO_MODELS.replace("default: infer", "default: inference"),
                        [("layout-default-unknown", "/restore/layout/default")]),
    "a layout that does not fit": (TWO_MODELS.replace("train: {7g.80gb: 1}", "train: {7g.80gb: 2}"),
                                   [("count-above-max", "/gpus/0/mig/layouts/train/7g.80gb")]),
    "a profile of another model": (TWO_MODELS.replace("infer: {1g.18gb: 7}", "infer: {1g.10gb: 7}"),
                                   [("unknown-profile", "/gpus/1/mig/layouts/infer/1g.10gb")]),
    "a name with a newline": (TWO_MODELS.replace("        train: {7g.80gb: 1}\n",
                                                 "        \"train\\n\": {7g.80gb: 1}\n"),
                              [("schema-pattern", "/gpus/0/mig/layouts")]),
    "the network sources": (TWO_MODELS.replace("from: [file,", "from: [gce-metadata, ec2-tag, file,")
                            .replace("default: infer}", "default: infer, ec2_tag_key: mig-config}"), []),
    "ec2-tag without its tag key": (TWO_MODELS.replace("from: [file,", "from: [ec2-tag, file,"),
                                    [("layout-ec2-tag-key", "/restore/layout/from/0")]),
    "a tag key without ec2-tag": (TWO_MODELS.replace("default: infer}", "default: infer, ec2_tag_key: mig-config}"),
                                  [("layout-ec2-tag-key", "/restore/layout/ec2_tag_key")]),
    # instance metadata serves no tag key with '/' or a space, nor . .. _index (AWS EC2 User Guide)
    "a tag key instance metadata cannot serve": (
        TWO_MODELS.replace("from: [file,", "from: [ec2-tag, file,")
        .replace("default: infer}", "default: infer, ec2_tag_key: nvidia.com/mig.config}"),
        [("schema-pattern", "/restore/layout/ec2_tag_key")]),
    "the tag key _index": (TWO_MODELS.replace("from: [file,", "from: [ec2-tag, file,")
                           .replace("default: infer}", "default: infer, ec2_tag_key: _index}"),
                           [("schema-pattern", "/restore/layout/ec2_tag_key")]),
    # the network sources wait before the driver does: both within the unit's start timeout
    "network and driver waits past the timeout": (
        TWO_MODELS.replace("from: [file,", "from: [gce-metadata, file,")
        .replace("default: infer}", "default: infer, network_wait_seconds: 60}\n  timeout_seconds: 180"),
        [("driver-wait-timeout", "/restore/timeout_seconds")]),
    "network and driver waits within the timeout": (
        TWO_MODELS.replace("from: [file,", "from: [gce-metadata, file,")
        .replace("default: infer}", "default: infer, network_wait_seconds: 59}\n  timeout_seconds: 180"), []),
    "a network wait of 0": (TWO_MODELS.replace("default: infer}", "default: infer, network_wait_seconds: 0}"),
                            [("schema-range", "/restore/layout/network_wait_seconds")]),
    "names without a source": (TWO_MODELS.split("restore:")[0], [("layouts-without-source", "/gpus/0/mig/layouts")]),
    "a baked mig.config label": (TWO_MODELS + "kubelet: {layout: kubeadm}\nkubernetes:\n"
                                 "  node_labels: {nvidia.com/mig.config: infer}\n",
                                 [("node-label-mig-owner", "/kubernetes/node_labels/nvidia.com~1mig.config")]),
    # "current" is restore.config_name's default, which named layouts do not use: once accepted, and the
    # kubelet-labels source would then read a name the image does not have on every node
    "a baked mig.config label of the unnamed config": (
        TWO_MODELS + "kubelet: {layout: kubeadm}\nkubernetes:\n  node_labels: {nvidia.com/mig.config: current}\n",
        [("node-label-mig-owner", "/kubernetes/node_labels/nvidia.com~1mig.config")]),
    "layouts on MIG off": (TWO_MODELS.replace("mig: {enabled: false}", "mig: {enabled: false, layouts: {a: {}}}"),
                           [("layout-without-mig", "/gpus/2/mig/layouts")]),
}


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_rules_table(name: str) -> None:
    text, want = CASES[name]
    got = _rules(text)
    for item in want:
        assert item in got, got
    if not want:
        assert got == [], got
    else:
        assert {r for r, _ in got} <= {r for r, _ in want} | {"layout-name-missing"}, got


def test_the_model_carries_every_name_and_the_choice() -> None:
    profile = check_bytes(TWO_MODELS.encode(), "p.yaml").profile
    assert profile is not None
    assert profile.layout_names == ("infer", "train", "yes")
    assert profile.config_names == ("infer", "train", "yes")
    assert profile.restore.layout_from == ("file", "kubelet-labels", "credential")
    assert profile.restore.layout_default == "infer"
    assert profile.gpus[1].layout_named("train") == (("7g.141gb", 1),)
    assert profile.gpus[2].layout_named("train") == ()  # MIG off: the same entry under every name


def test_one_config_per_name_that_nvidia_s_parser_accepts(tmp_path: Path) -> None:
    out = generate(TWO_MODELS, tmp_path / "out")
    text = (out / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    configs = yaml.safe_load(text)["mig-configs"]
    # PyYAML (YAML 1.1) reads an unquoted yes as True: the emitter must have quoted it
    assert sorted(configs) == ["infer", "train", "yes"], text
    assert configs["train"][1]["mig-devices"] == {"7g.141gb": 1}
    assert configs["infer"][0]["mig-devices"] == {"1g.10gb": 7}
    assert configs["infer"][2] == configs["train"][2] and configs["train"][2]["mig-enabled"] is False
    assert "current" not in configs  # restore.config_name is not used with named layouts
    assert_mig_parted_accepts(text, ["infer", "train", "yes"], tmp_path / "config.yaml")


def test_nvidia_s_parser_refuses_a_name_the_config_does_not_have(tmp_path: Path) -> None:
    out = generate(TWO_MODELS, tmp_path / "out")
    ran = mig_parted_valid(out / "rootfs/etc/nvidia-mig/config.yaml", "inference")
    assert ran.rc != 0, ran.text


def test_a_profile_without_names_keeps_its_one_config(tmp_path: Path) -> None:
    one = "version: 1\nname: one\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
    out = generate(one, tmp_path / "out")
    assert list(yaml.safe_load((out / "rootfs/etc/nvidia-mig/config.yaml").read_text())["mig-configs"]) == ["current"]


def test_offline_preflight_names_every_layout_the_node_may_get(tmp_path: Path) -> None:
    from support import cli
    from test_preflight import fixtures

    profile = tmp_path / "node-profile.yaml"
    profile.write_text("version: 1\nname: real-h200\ngpu_count: 1\ngpus:\n  - model: h200-141gb\n"
                       "    mig: {layouts: {train: {7g.141gb: 1}, infer: {1g.18gb: 7}}}\n"
                       "restore:\n  layout: {from: [file]}\n")
    _, out, err = cli("preflight", str(profile), "--nvidia-smi-xml", str(fixtures() / "nvidia-smi-q.xml"))
    assert ("(profile: MIG Enabled, 1x 7g.141gb (train) or MIG Enabled, 7x 1g.18gb (infer)); the next boot's "
            "restore replaces this") in out, out + err


def test_show_lists_each_layout_by_name(tmp_path: Path) -> None:
    from support import cli

    profile = tmp_path / "node-profile.yaml"
    profile.write_text(TWO_MODELS)
    code, out, err = cli("show", str(profile))
    assert code == 0, err
    assert ("Layouts: infer, train, yes; a node learns its name at boot from file, kubelet-labels, credential (in "
            "that order), else takes infer; an unknown name fails closed") in out
    parts = out.split("\n=== layout ")
    assert [p.split(" ", 1)[0] for p in parts[1:]] == ["infer", "train", "yes"]
    train = parts[2]
    assert train.startswith("train (nvidia.com/mig.config=train) ===")
    assert "  7g.80gb x1" in train and "  7g.141gb x1" in train and "1g.10gb" not in train
    assert "nvidia.com/mig-7g.141gb: 1 each" in train
    assert "no file: named layouts, chosen at boot" in train


@pytest.mark.parametrize("name", ["1e3", "null", "on", "0x1F", "08", "2026-12-03", "a.b_c-d"])
def test_names_yaml_readers_disagree_on_reach_nvidia_s_parser_as_written(tmp_path: Path, name: str) -> None:
    text = TWO_MODELS.replace("'yes'", f"'{name}'").replace("        train: {7g.80gb: 1}\n", "").replace(
        "        train: {7g.141gb: 1}\n", "")
    out = generate(text, tmp_path / "out")
    config = (out / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert_mig_parted_accepts(config, ["infer", name], tmp_path / "config.yaml")
    script = (out / "rootfs/etc/nvidia-mig/restore.sh").read_text()
    assert f"layout_names=('infer' '{name}')" in script


def test_gpu_operator_export_has_every_name(tmp_path: Path) -> None:
    from support import cli

    profile = tmp_path / "node-profile.yaml"
    profile.write_text(TWO_MODELS)
    code, out, err = cli("export", str(profile), "--gpu-operator")
    assert code == 0, err
    for name in ("infer", "train", "yes"):
        assert f"kubectl label node NODE nvidia.com/mig.config={name}    # selects layout {name!r}" in out
    assert "mig.config=current" not in out
    body = yaml.safe_load(out)["data"]["config.yaml"]
    assert_mig_parted_accepts(body, ["infer", "train", "yes", "all-disabled"], tmp_path / "operator.yaml")
    other = tmp_path / "other.yaml"
    other.write_text("version: 1\nname: other\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n")
    code, out, err = cli("export", str(profile), str(other), "--gpu-operator")
    assert code == 1 and "named layouts (mig.layouts: infer, train, yes) are not yet merged" in err, (out, err)


@pytest.mark.parametrize("names,status", [("current, train", "PASS"), ("infer, train", "NOTE")],
                         ids=["label-names-a-layout", "label-names-another-config"])
def test_offline_preflight_takes_the_node_label_as_one_of_the_names(tmp_path: Path, names: str,
                                                                    status: str) -> None:
    import json

    from support import cli
    from test_gpu_operator import NODES

    first, second = names.split(", ")
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(f"version: 1\nname: labels\ngpus:\n  - model: h200-141gb\n    mig:\n      layouts:\n"
                       f"        {first}: {{1g.18gb: 7}}\n        {second}: {{7g.141gb: 1}}\n"
                       f"restore:\n  layout: {{from: [kubelet-labels]}}\n")
    _, out, _ = cli("preflight", str(profile), "--node-json", str(NODES / "mig-config-ours.json"), "--json")
    checks = {c["check"]: (c["status"], c["detail"]) for c in json.loads(out)["checks"]}
    # the fixture's node runs no mig-manager: a label naming another config acts on nothing (NOTE)
    assert checks["mig-config"][0] == status, checks["mig-config"]


def test_the_config_header_and_the_capture_follow_the_names(tmp_path: Path) -> None:
    from realtools import run

    out = generate(TWO_MODELS, tmp_path / "out")
    config = (out / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert "#   apply  -f /etc/nvidia-mig/config.yaml -c NAME\n" in config
    assert "# NAME: one config per named layout (infer, train, yes), chosen at boot from\n" in config
    ran = run(["bash", str(out / "scripts/capture-mig-config.sh")])
    assert ran.rc == 1 and "has named layouts (infer, train, yes)" in ran.err, ran.text
    assert "left unchanged" in ran.err


def test_an_empty_named_layout_warns() -> None:
    checked = check_bytes(TWO_MODELS.replace("train: {7g.80gb: 1}", "train: {}").encode(), "p.yaml")
    assert [(p.rule, p.severity, p.pointer) for p in checked.problems] == [
        ("empty-layout", "warning", "/gpus/0/mig/layouts/train")]
