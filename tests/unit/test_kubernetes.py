"""The Kubernetes view: device-plugin resource names and totals, the single-strategy rule, `migbake show`,
`migbake export --gpu-operator`, and the verify script's allocatable comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support import HELD_KUBELET, IMAGES, REPO, cli, generate
from test_multimodel import H100_H200, run_verify

from migbake.document.patterns import RELEASE_VERSION
from migbake.kubernetes.resources import node_kinds, resource_name, resource_report
from migbake.profile.nodeprofile import NodeProfile
from migbake.rules.validate import check_bytes


def _profile(text: str) -> NodeProfile:
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return checked.profile


def _one(layout: str, extra: str = "", model: str = "h200-141gb") -> str:
    return f"version: 1\nname: k\n{extra}gpus:\n  - model: {model}\n    mig: {{layout: {layout}}}\n"


@pytest.mark.parametrize(("name", "strategy", "want"), [
    ("1g.18gb", "mixed", "nvidia.com/mig-1g.18gb"),
    ("1g.10gb+me", "mixed", "nvidia.com/mig-1g.10gb.me"),
    ("1g.24gb-me", "mixed", "nvidia.com/mig-1g.24gb-me"),
    ("1c.3g.40gb", "mixed", None),
    ("3g.71gb", "single", "nvidia.com/gpu"),
    ("2c.3g.71gb", "single", None),
], ids=["plain", "media-extension", "no-media", "compute-instance", "single", "single-compute-instance"])
def test_resource_names(name: str, strategy: str, want: str | None) -> None:
    assert resource_name(name, strategy) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "version", "want"), [
    ("1g.10gb+me", "v0.19.3", "nvidia.com/mig-1g.10gb"),
    ("1g.24gb-me", "0.17.0", "nvidia.com/mig-1g.24gb"),
    ("1g.24gb+gfx", "v0.19.0", "nvidia.com/mig-1g.24gb"),
    ("1g.10gb+me", "v0.20.0", "nvidia.com/mig-1g.10gb.me"),
    ("1g.10gb+me", "v1.0.0", "nvidia.com/mig-1g.10gb.me"),
    ("1g.10gb+me", "", "nvidia.com/mig-1g.10gb.me"),
    ("3g.40gb", "v0.19.3", "nvidia.com/mig-3g.40gb"),
])
def test_resource_names_follow_the_device_plugin_version(name: str, version: str, want: str) -> None:
    # NVIDIA/k8s-device-plugin#1807 (v0.20.0) anchored the resource patterns; before it the plain profile's
    # pattern, listed first, matched the suffixed forms too
    assert resource_name(name, "mixed", version) == want


# NVIDIA/k8s-device-plugin#1462: two A100 80GB with 5x 1g.10gb, 1x 1g.10gb+me and 1x 1g.20gb each advertised
# nvidia.com/mig-1g.10gb: 12 and nvidia.com/mig-1g.20gb: 2 under the plugin of that time
ME_LAYOUT = "{1g.10gb: 5, 1g.10gb+me: 1, 1g.20gb: 1}"


def test_an_older_device_plugin_counts_the_media_form_with_its_plain_profile() -> None:
    old = _profile(_one(ME_LAYOUT, "gpu_count: 2\nkubernetes: {device_plugin_version: v0.19.3}\n", "a100-80gb"))
    assert [k.totals for k in node_kinds(old)] == [{"nvidia.com/mig-1g.10gb": 12, "nvidia.com/mig-1g.20gb": 2}]
    report = "\n".join(resource_report(old))
    assert "device plugin MIG strategy: mixed, device plugin v0.19.3" in report
    assert "counted with their plain profile: 1g.10gb+me (device plugin v0.19.3" in report
    new = _profile(_one(ME_LAYOUT, "gpu_count: 2\n", "a100-80gb"))
    assert [k.totals for k in node_kinds(new)] == [
        {"nvidia.com/mig-1g.10gb": 10, "nvidia.com/mig-1g.10gb.me": 2, "nvidia.com/mig-1g.20gb": 2}]
    assert "counted with their plain profile" not in "\n".join(resource_report(new))


@pytest.mark.parametrize("bad", ["latest", "v0.20", "0.20.0-rc.1", "v00.20.0"])
def test_device_plugin_version_is_a_release(bad: str) -> None:
    checked = check_bytes(_one("{1g.18gb: 7}", f"kubernetes: {{device_plugin_version: {bad!r}}}\n").encode(), "p.yaml")
    assert [p.pointer for p in checked.problems] == ["/kubernetes/device_plugin_version"], checked.problems


def test_the_schema_and_the_code_read_a_release_version_alike() -> None:
    """Both *_version keys' schema patterns are the one pattern the code reads versions with (declared once)."""
    schema = json.loads((REPO / "schemas/node-profile.schema.json").read_text(encoding="utf-8"))
    kubernetes = schema["properties"]["kubernetes"]["properties"]
    for key in ("device_plugin_version", "dra_driver_version"):
        assert kubernetes[key]["pattern"] == f"^{RELEASE_VERSION.pattern}$", key


TOTALS = {
    "h200-all-8": (_one("{1g.18gb: 7}", "gpu_count: 8\n"), [{"nvidia.com/mig-1g.18gb": 56}]),
    "h200-single-8": (_one("{1g.18gb: 7}", "gpu_count: 8\nkubernetes: {mig_strategy: single}\n"),
                      [{"nvidia.com/gpu": 56}]),
    "mixed-layout": (_one("{3g.71gb: 1, 2g.35gb: 1, 1g.18gb: 2}", "gpu_count: 2\n"), [
        {"nvidia.com/mig-3g.71gb": 2, "nvidia.com/mig-2g.35gb": 2, "nvidia.com/mig-1g.18gb": 4}]),
    "mig-off-counts-whole-gpus": (
        "version: 1\nname: k\ngpu_count: 4\ngpus:\n"
        "  - {model: a100-80gb, devices: [0, 1], mig: {layout: {1g.10gb: 7}}}\n"
        "  - {model: a100-80gb, devices: [2, 3], mig: {enabled: false}}\n",
        [{"nvidia.com/mig-1g.10gb": 14, "nvidia.com/gpu": 2}]),
    "two-models": (H100_H200 + "gpu_count: 8\n",
                   [{"nvidia.com/mig-1g.10gb": 56}, {"nvidia.com/mig-1g.18gb": 56}]),
    "unknown-count": (_one("{1g.18gb: 7}"), [None]),
}


@pytest.mark.parametrize("name", sorted(TOTALS), ids=sorted(TOTALS))
def test_totals(name: str) -> None:
    text, want = TOTALS[name]
    assert [k.totals for k in node_kinds(_profile(text))] == want


def test_report_without_gpu_count_shows_per_gpu_counts() -> None:
    lines = resource_report(_profile(_one("{1g.18gb: 7}")))
    text = "\n".join(lines)
    assert "per GPU" in text and "set gpu_count" in text and "nvidia.com/mig-1g.18gb: 7 each" in text


def test_report_names_resources_the_plugin_does_not_list() -> None:
    text = "\n".join(resource_report(_profile(_one("{1c.3g.71gb: 2, 3g.71gb: 1}", "gpu_count: 1\n"))))
    assert "nvidia.com/mig-3g.71gb: 1" in text and "not advertised: 1c.3g.71gb" in text


# --- the single strategy ------------------------------------------------------------------------------

SINGLE = "kubernetes: {mig_strategy: single}\n"
# the mig_strategy: single cases are folders of tests/cases/{valid,warning,invalid}/strategy-*


def test_single_strategy_message_cites_the_device_plugin() -> None:
    (p,) = check_bytes(_one("{3g.71gb: 1, 1g.18gb: 4}", SINGLE).encode(), "p.yaml").problems
    assert "More than one MIG device type present on node" in p.message and "mixed" in p.message


# --- the command line ------------------------------------------------------------------------------

def test_show_lists_the_extended_resources() -> None:
    image = next(p for p in IMAGES if p.name == "h200-inference")
    code, out, _ = cli("show", str(image / "node-profile.yaml"))
    assert code == 0 and "nvidia.com/mig-1g.18gb: 56" in out


def _strip_comments(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.parametrize("image", HELD_KUBELET, ids=[p.name for p in HELD_KUBELET])
def test_gpu_operator_configmap_matches_the_baked_config(image: Path) -> None:
    code, out, err = cli("export", "--gpu-operator", str(image / "node-profile.yaml"))
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "ConfigMap"
    assert doc["metadata"] == {"name": f"{image.name}-mig-parted-config"}
    assert list(doc["data"]) == ["config.yaml"]
    profile = yaml.safe_load((image / "node-profile.yaml").read_text())
    path = profile.get("restore", {}).get("config_path", "/etc/nvidia-mig/config.yaml")
    baked = image / "generated/rootfs" / path.lstrip("/")
    # the baked config, then the operator's default all-disabled (the label value it puts on unlabelled nodes)
    exported = doc["data"]["config.yaml"]
    assert exported.startswith(_strip_comments(baked.read_text()))
    want = yaml.safe_load(baked.read_text())
    want["mig-configs"]["all-disabled"] = [{"devices": "all", "mig-enabled": False}]
    assert yaml.safe_load(exported) == want
    names = list(yaml.safe_load(baked.read_text())["mig-configs"])  # one per named layout, else config_name
    assert names == list(profile["gpus"][0]["mig"].get("layouts", {})) or [
        profile.get("restore", {}).get("config_name", "current")]
    for name in names:
        label = f"nvidia.com/mig.config={name}"
        assert label in out and label in err


def test_export_to_file_and_plain_config(tmp_path: Path) -> None:
    src = tmp_path / "p.yaml"
    src.write_text(H100_H200 + "restore: {config_name: inference}\n")
    dest = tmp_path / "cm.yaml"
    code, out, err = cli("export", "--gpu-operator", str(src), "-o", str(dest))
    assert code == 0 and out == "" and "nvidia.com/mig.config=inference" in err
    assert yaml.safe_load(dest.read_text())["metadata"]["name"] == "fleet-mig-parted-config"
    code, out, _ = cli("export", str(src))
    assert code == 0
    assert yaml.safe_load(out)["mig-configs"]["inference"][0]["device-filter"][0] == "0x233010DE"
    bad = tmp_path / "bad.yaml"
    bad.write_text(_one("{3g.71gb: 1, 1g.18gb: 4}", SINGLE))
    assert cli("export", "--gpu-operator", str(bad))[0] == 1


# --- the verify script compares allocatable -------------------------------------------------------

@pytest.mark.parametrize(("allocatable", "lines"), [
    ("cpu=8\nnvidia.com/mig-1g.10gb=14\n",
     ["INFO  allocatable nvidia.com/mig-1g.10gb: 14, as the layout gives"]),
    ("cpu=8\nnvidia.com/gpu=2\n",
     ["WARN  allocatable nvidia.com/gpu: 2, the layout gives none",
      "WARN  allocatable nvidia.com/mig-1g.10gb: none, the layout gives 14"]),
], ids=["as-expected", "single-strategy-cluster"])
def test_verify_compares_allocatable(tmp_path: Path, allocatable: str, lines: list[str]) -> None:
    out = run_verify(tmp_path, H100_H200, ["0x233010DE", "0x233110DE"], allocatable)
    for line in lines:
        assert line in out, out


def test_verify_without_kubectl_says_nothing_about_allocatable(tmp_path: Path) -> None:
    out = run_verify(tmp_path, H100_H200, ["0x233010DE"])
    assert "allocatable" not in out


def test_generated_tree_has_no_kubernetes_file(tmp_path: Path) -> None:
    out = generate(H100_H200, tmp_path / "out")
    assert not list(out.rglob("*configmap*"))
