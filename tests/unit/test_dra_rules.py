"""Rules of the DRA allocations, with a table of good and bad inputs each.

- ``dra-compute-instance``: under ``dra`` a compute instance smaller than its GPU instance is refused (the DRA
  driver lists only profiles with G == C: kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/
  nvlib.go@v25.12.0 l.533; a MIG device of no listed profile fails its discovery, l.708);
- ``dra-device-name``: a predicted device name is always a DNS label with a GPU-instance profile id, or the
  profile is refused (it used to print ``gpu-0-mig-4g96gb-?-0``);
- ``kubernetes.dra_driver_version``: which naming the driver uses (``kubernetes.dra.naming``);
- ``bottlerocket-dra``: no Bottlerocket device-plugin settings for a DRA profile.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from support import CliRunner, generate

from migbake.cli.group import main
from migbake.kubernetes.dra import dra_report, naming
from migbake.packagedata import catalog_text
from migbake.render.plan import make_plan
from migbake.rules.validate import check_bytes

H200 = "version: 1\nname: p\nkubernetes: {{allocation: {allocation}}}\ngpu_count: 1\ngpus:\n  - model: {model}\n" \
       "    mig: {{layout: {layout}}}\n{extra}"


def _rules(allocation: str, layout: str, model: str = "NVIDIA H200", extra: str = "") -> list[str]:
    text = H200.format(allocation=allocation, layout=layout, model=model, extra=extra)
    return [p.rule for p in check_bytes(text.encode(), "p.yaml").problems]


@pytest.mark.parametrize(("allocation", "layout", "rules"), [
    ("dra", "{1c.3g.71gb: 2, 3g.71gb: 1}", ["dra-compute-instance"]),
    ("dra", "{2c.3g.71gb: 1, 4g.71gb: 1}", ["dra-compute-instance"]),
    ("dra", "{3g.71gb: 2}", []),
    ("device-plugin", "{1c.3g.71gb: 2, 3g.71gb: 1}", []),
], ids=["1c-of-3g", "2c-of-3g", "whole-instances", "device-plugin-allows"])
def test_compute_instances_under_dra(allocation: str, layout: str, rules: list[str]) -> None:
    assert _rules(allocation, layout) == rules


def test_no_question_mark_ever_reaches_a_device_name(tmp_path: Path) -> None:
    """Show printed gpu-0-mig-4g96gb-?-0. The packaged RTX PRO 6000 now has the driver's GI profile
    ids, and a catalog file's profile without one is refused, located, never named with a ``?``."""
    path = tmp_path / "p.yaml"
    path.write_text(H200.format(allocation="dra", layout="{4g.96gb: 1}", model="rtx-pro-6000-blackwell-96gb",
                                extra=""))
    result = CliRunner().invoke(main, ["show", str(path)])
    assert result.exit_code == 0 and "gpu-0-mig-4g96gb-0-0" in result.output, result.output
    raw = json.loads(catalog_text())
    gpu = copy.deepcopy(next(g for g in raw["gpus"] if g["key"] == "rtx-pro-6000-blackwell-96gb"))
    gpu.update(key="rtx-pro-6000-noid", names=["RTX NOID"], aliases=[], alias_notes={},
               nvidia_smi_names=[{"name": "NVIDIA RTX NOID", "pci_device_id": "0x2FFE10DE", "source": "test"}],
               pci_device_ids=[{"id": "0x2FFE10DE", "pci_ids_name": None}])
    for profile in gpu["profiles"]:
        profile.pop("nvidia_smi_gi_profile_id", None)
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps({"gpus": [gpu]}))
    path.write_text(H200.format(allocation="dra", layout="{4g.96gb: 1}", model="RTX NOID", extra=""))
    result = CliRunner().invoke(main, ["--catalog", str(catalog), "show", str(path)])
    assert result.exit_code == 1 and "?" not in result.output.replace("?)", ""), result.output
    assert "p.yaml:7:29: error: /gpus/0/mig/layout/4g.96gb:" in result.output, result.output
    assert "[dra-device-name]" in result.output


def test_a_device_name_longer_than_a_dns_label_is_refused(tmp_path: Path) -> None:
    """A catalog file's profile whose canonical name makes the device name longer than 63 characters."""
    raw = json.loads(catalog_text())
    gpu = copy.deepcopy(next(g for g in raw["gpus"] if g["key"] == "h200-141gb"))
    gpu.update(key="h300-200gb", names=["H300"], aliases=[], alias_notes={},
               nvidia_smi_names=[{"name": "NVIDIA H300", "pci_device_id": "0x2FFF10DE", "source": "test"}],
               pci_device_ids=[{"id": "0x2FFF10DE", "pci_ids_name": None}])
    for length, ok in ((50, False), (20, True)):
        profile = copy.deepcopy(next(x for x in gpu["profiles"] if x["name"] == "1g.18gb+me"))
        profile.update(name="1g.18gb+" + "a" * length, attributes=["a" * length])
        extra = copy.deepcopy(gpu)
        extra["profiles"].append(profile)
        catalog, path = tmp_path / f"c{length}.json", tmp_path / f"p{length}.yaml"
        catalog.write_text(json.dumps({"gpus": [extra]}))
        path.write_text(H200.format(allocation="dra", layout=f"{{{profile['name']}: 1}}", model="H300", extra=""))
        result = CliRunner().invoke(main, ["--catalog", str(catalog), "validate", str(path)])
        assert (result.exit_code == 0) == ok, result.output
        assert ok or ("is not a DNS label" in result.output and "[dra-device-name]" in result.output)


@pytest.mark.parametrize(("version", "form"), [
    ("", "v25.12"), ("v25.3.0", "v25.8"), ("v25.8.1", "v25.8"), ("25.8.0", "v25.8"), ("v25.12.0", "v25.12"),
    ("v0.4.0", "v25.12"), ("v0.4.1", "v25.12"), ("v1.0.0", "v25.12"), ("v0.3.0", None), ("v25.8", None),
    ("v25.8.1\n", None), ("latest", None),
])
def test_the_driver_version_says_the_naming(version: str, form: str | None) -> None:
    assert naming(version) == form


@pytest.mark.parametrize(("version", "rules"), [
    ("v25.8.1", []), ("v0.4.0", []), ("v0.3.0", ["dra-driver-version"]), ("25.8", ["schema-pattern"]),
])
def test_the_driver_version_key(version: str, rules: list[str]) -> None:
    text = H200.format(allocation=f"dra, dra_driver_version: '{version}'", layout="{3g.71gb: 2}",
                       model="NVIDIA H200", extra="")
    found = [p.rule for p in check_bytes(text.encode(), "p.yaml").problems]
    assert [r for r in found if not r.startswith("schema")] == [r for r in rules if not r.startswith("schema")]
    assert any(r.startswith("schema") for r in found) == any(r.startswith("schema") for r in rules), found


def test_show_prints_the_naming_the_profile_names() -> None:
    for version, name in (("", "gpu-0-mig-3g71gb-9-0"), ("v25.8.1", "gpu-0-mig-9-0-4")):
        extra = f", dra_driver_version: {version}" if version else ""
        text = H200.format(allocation="dra" + extra, layout="{3g.71gb: 2}", model="NVIDIA H200", extra="")
        profile = check_bytes(text.encode(), "p.yaml").profile
        assert profile is not None
        assert name in "\n".join(dra_report(profile, make_plan(profile).dra.entries))


@pytest.mark.parametrize(("allocation", "written"), [("device-plugin", True), ("dra", False), ("dra-dynamic", False)])
def test_bottlerocket_settings_only_for_the_device_plugin(tmp_path: Path, allocation: str, written: bool) -> None:
    """Bottlerocket's MIG settings configure its device plugin: none for a DRA profile."""
    layout = "{1g.18gb: 7}"
    text = H200.format(allocation=allocation, layout=layout, model="NVIDIA H200", extra="")
    if allocation == "dra-dynamic":
        text = text.replace(f"    mig: {{layout: {layout}}}\n", "")
    out = generate(text, tmp_path / "out")
    assert (out / "bottlerocket/settings.toml").exists() == written
    required = text + "bottlerocket: {required: true}\n"
    rules = [p.rule for p in check_bytes(required.encode(), "p.yaml").problems]
    assert ("bottlerocket-dra" in rules) == (not written), rules
