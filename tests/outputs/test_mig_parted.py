"""NVIDIA's own parser judges every mig-parted config migbake writes: generate (every example image, every
valid profile of the test corpus, edge cases), export and export --gpu-operator (every config in the
ConfigMap). The helper itself is shown to fail on configs NVIDIA's parser refuses.

Import round trips of NVIDIA's own configs go through the same helper in test_import_nvidia.py, and the
property test's accepted inputs in test_property.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from realtools import assert_mig_parted_accepts, device_filter_problems, mig_parted_refusals, mig_parted_valid
from support import HELD_KUBELET, IMAGES, REPO, CliRunner

from migbake.cli.group import main
from migbake.migparted.config import mig_parted_config_text
from migbake.profile.nodeprofile import NodeProfile
from migbake.rules.validate import check_bytes, check_file

GOOD = """\
version: v1
mig-configs:
  all-1g.10gb:
  - devices: all
    mig-enabled: true
    mig-devices: {1g.10gb: 7}
"""

# what NVIDIA's parser refuses (or cannot find), each a reason a config of ours could go wrong
REFUSED = {
    "zero-counts": (GOOD.replace("1g.10gb: 7", "1g.10gb: 0"), "all-1g.10gb"),
    "unknown-entry-key": (GOOD.replace("    mig-enabled", "    mig-enable: true\n    mig-enabled"), "all-1g.10gb"),
    "missing-mig-enabled": (GOOD.replace("    mig-enabled: true\n", ""), "all-1g.10gb"),
    "devices-with-mig-off": (GOOD.replace("mig-enabled: true", "mig-enabled: false"), "all-1g.10gb"),
    "bad-profile-name": (GOOD.replace("1g.10gb: 7", "1g.10GB: 7"), "all-1g.10gb"),
    "version-v2": (GOOD.replace("version: v1", "version: v2"), "all-1g.10gb"),
    "no-such-config": (GOOD, "all-1g.20gb"),
    "unquoted-off-is-a-boolean": (GOOD.replace("all-1g.10gb:", "off:"), "off"),
    "unquoted-y-is-a-boolean": (GOOD.replace("all-1g.10gb:", "y:"), "y"),
    "empty-config": ("version: v1\nmig-configs:\n  a: []\n", "a"),
    "filter-unquoted-number": (GOOD.replace("  - devices: all", "  - device-filter: 0x233010DE\n    devices: all"),
                               "all-1g.10gb"),
}


def _profile(text: str) -> NodeProfile:
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return checked.profile


def _generated(profile: NodeProfile, tmp_path: Path) -> list[str]:
    """The config generate writes for ``profile``, judged by NVIDIA's parser under each of its config names (the
    layout names of a profile with named layouts)."""
    return assert_mig_parted_accepts(mig_parted_config_text(profile), list(profile.config_names),
                                     tmp_path / "config.yaml")


def test_the_real_parser_accepts_a_good_config(tmp_path: Path) -> None:
    assert assert_mig_parted_accepts(GOOD, None, tmp_path / "good.yaml") == ["all-1g.10gb"]


@pytest.mark.parametrize("name", sorted(REFUSED), ids=sorted(REFUSED))
def test_the_real_parser_refuses(name: str, tmp_path: Path) -> None:
    text, config = REFUSED[name]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    ran = mig_parted_valid(path, config)
    assert ran.rc == 1 and "Selected MIG configuration is valid" not in ran.text, ran.text
    with pytest.raises(AssertionError, match="refused it"):
        assert_mig_parted_accepts(text, [config], path)


def test_the_batch_check_reports_each_refusal(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(REFUSED["zero-counts"][0])
    (refused,) = mig_parted_refusals([(good, "all-1g.10gb"), (bad, "all-1g.10gb"), (good, "all-1g.10gb")])
    assert refused.startswith(f"{bad} -c all-1g.10gb: ") and "all counts for all MigProfiles are 0" in refused


def test_device_filters_are_checked_by_us_because_mig_parted_does_not(tmp_path: Path) -> None:
    typo = GOOD.replace("  - devices: all", '  - device-filter: "233010DE"\n    devices: all')
    path = tmp_path / "typo.yaml"
    path.write_text(typo)
    assert mig_parted_valid(path, "all-1g.10gb").rc == 0  # NVIDIA's parser lets it through: it matches nothing
    assert device_filter_problems(typo) == ["all-1g.10gb/0: device-filter '233010DE'"]
    with pytest.raises(AssertionError):
        assert_mig_parted_accepts(typo, None, path)


@pytest.mark.parametrize("image", IMAGES, ids=[p.name for p in IMAGES])
def test_generate_of_every_image(image: Path, tmp_path: Path) -> None:
    checked = check_file(image / "node-profile.yaml")
    assert checked.profile is not None
    written = (image / "generated" / "rootfs" / checked.profile.restore.config_path.lstrip("/")).read_text()
    names = list(checked.profile.layout_names) or [checked.profile.restore.config_name]  # named layouts: each
    assert_mig_parted_accepts(written, names, tmp_path / "config.yaml")


@pytest.mark.parametrize("image", HELD_KUBELET, ids=[p.name for p in HELD_KUBELET])
def test_export_and_gpu_operator_export_of_every_image(image: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    plain = runner.invoke(main, ["export", str(image / "node-profile.yaml")])
    assert plain.exit_code == 0, plain.stderr
    assert_mig_parted_accepts(plain.stdout, None, tmp_path / "export.yaml")
    operator = runner.invoke(main, ["export", "--gpu-operator", str(image / "node-profile.yaml")])
    assert operator.exit_code == 0, operator.stderr
    config = yaml.safe_load(operator.stdout)["data"]["config.yaml"]
    names = [str(n) for n in yaml.safe_load(config)["mig-configs"]]
    assert assert_mig_parted_accepts(config, None, tmp_path / "configmap-config.yaml") == names


def _corpus() -> dict[str, str]:
    """Every profile of the test corpus that migbake accepts (tests/cases/valid, warning, ...)."""
    out = {}
    for path in sorted((REPO / "tests" / "cases").glob("*/*/node-profile.yaml")):
        if check_file(path).profile is not None:
            out[f"{path.parent.parent.name}/{path.parent.name}"] = path.read_text(encoding="utf-8")
    return out


CORPUS = _corpus()

_GPU = "gpus: [{model: h200-141gb, mig: {layout: {1g.18gb: 7}}}]\n"
EDGES = {
    **{f"config-name-{n}": f"version: 1\nname: x\nrestore: {{config_name: '{n}'}}\n{_GPU}"
       for n in ("y", "N", "on", "off", "yes", "true", "null", "1e3", "2001-12-14", "012", "0x1F", "a.b_c-d")},
    "dgx-station": ("version: 1\nname: dgx\ngpus:\n"
                    "  - {model: a100-80gb, pci_device_ids: ['0x20B210DE'], mig: {layout: {3g.40gb: 2}}}\n"
                    "  - {model: dgx-display, mig: {enabled: false}}\n"),
    "exact-ids-one-model": ("version: 1\nname: x\ngpus:\n"
                            "  - {model: h200, pci_device_ids: ['0x233b10de'], mig: {layout: {7g.141gb: 1}}}\n"),
    "compute-instances": ("version: 1\nname: x\ngpus:\n"
                          "  - {model: a100-40gb, mig: {layout: {1c.3g.20gb: 3, 3g.20gb: 1}}}\n"),
    "mig-on-no-instances-and-off": ("version: 1\nname: x\ngpus:\n  - {model: a30, devices: [0], mig: {layout: {}}}\n"
                                    "  - {model: a30, devices: [1], mig: {enabled: false}}\n"),
    "gb200-pre-production": ("version: 1\nname: x\ngpus:\n"
                             "  - {model: gb200-189gb, mig: {layout: {4g.95gb: 1, 3g.95gb: 1}}}\n"),
}


@pytest.mark.parametrize("name", sorted(CORPUS), ids=sorted(CORPUS))
def test_generate_of_every_corpus_profile(name: str, tmp_path: Path) -> None:
    _generated(_profile(CORPUS[name]), tmp_path)


@pytest.mark.parametrize("name", sorted(EDGES), ids=sorted(EDGES))
def test_generate_of_edge_profiles(name: str, tmp_path: Path) -> None:
    _generated(_profile(EDGES[name]), tmp_path)
