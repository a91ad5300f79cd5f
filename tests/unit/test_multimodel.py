"""Several GPU models in one image: device-filter per entry, device_filter auto|always|never, coverage and
overlap rules, and what the generated config and verify script say about a GPU the profile does not list."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from support import CASES_ROOT, REPO, generate

from migbake.gpu.catalog import load_catalog
from migbake.migparted.config import mig_parted_config, uses_device_filter
from migbake.profile.nodeprofile import NodeProfile
from migbake.rules.validate import check_bytes

H100_H200 = (CASES_ROOT / "valid/multimodel-auto-one-model/node-profile.yaml").read_text()

H200 = """\
version: 1
name: one-model
gpus:
  - model: h200-141gb
    mig: {layout: {1g.18gb: 7}}
"""


def _profile(text: str) -> NodeProfile:
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return checked.profile


# --- the rules: coverage and overlaps ---------------------------------------------------------

def _two(first: str, second: str, extra: str = "") -> str:
    return (f"version: 1\nname: t\n{extra}gpus:\n"
            f"  - {{model: h100-80gb, devices: {first}, mig: {{layout: {{1g.10gb: 7}}}}}}\n"
            f"  - {{model: h200-141gb, devices: {second}, mig: {{layout: {{1g.18gb: 7}}}}}}\n")


# the rule cases (overlaps, coverage, filter modes) are folders of tests/cases/{valid,warning,invalid}/multimodel-*


def test_uncovered_message_says_what_happens_at_boot() -> None:
    checked = check_bytes(_two("[0, 1, 2, 3]", "all", "gpu_count: 8\n").encode(), "p.yaml")
    (problem,) = checked.problems
    assert "GPUs 4-7" in problem.message and "not all GPUs match" in problem.message
    assert "device_filter: never" in problem.message


# --- the generated config --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "mode", "filtered"), [
    (H100_H200, "auto", True), (H100_H200, "always", True), (H200, "auto", False), (H200, "always", True),
    (H200, "never", False),
], ids=["two-auto", "two-always", "one-auto", "one-always", "one-never"])
def test_device_filter_modes(text: str, mode: str, filtered: bool) -> None:
    prof = _profile(text + f"device_filter: {mode}\n")
    assert uses_device_filter(prof) is filtered
    entries = mig_parted_config(prof)["mig-configs"]["current"]
    assert all(("device-filter" in e) is filtered for e in entries)


def test_filters_are_canonical_catalog_ids_and_stay_strings(tmp_path: Path) -> None:
    out = generate(H100_H200, tmp_path / "out")
    config = yaml.safe_load((out / "rootfs/etc/nvidia-mig/config.yaml").read_text())
    cat = load_catalog()
    entries = config["mig-configs"]["current"]
    assert [e["device-filter"] for e in entries] == [list(cat.by_key("h100-80gb").pci_device_ids),
                                                     list(cat.by_key("h200-141gb").pci_device_ids)]
    for e in entries:
        for f in e["device-filter"]:
            assert isinstance(f, str) and re.fullmatch(r"0x[0-9A-F]{4}10DE", f), f
    assert [e["mig-devices"] for e in entries] == [{"1g.10gb": 7}, {"1g.18gb": 7}]


@pytest.mark.parametrize(("extra", "words"), [
    ("", ["matches no entry", "not all GPUs match the specified config", "kubelet.service stays down"]),
    ("restore: {on_failure: continue}\n", ["kubelet.service starts anyway"]),
], ids=["block-kubelet", "continue"])
def test_generated_config_documents_a_foreign_gpu(tmp_path: Path, extra: str, words: list[str]) -> None:
    text = (generate(H100_H200 + extra, tmp_path / "out") / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    comments = " ".join(line for line in text.splitlines() if line.startswith("#"))
    for w in words:
        assert w in comments
    assert "0x233010DE" in comments and "0x233510DE" in comments


def test_single_model_config_says_how_to_fail_closed(tmp_path: Path) -> None:
    text = (generate(H200, tmp_path / "out") / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert "device_filter: always" in text and "device-filter:" not in text


def test_docs_document_the_foreign_gpu_and_the_new_keys() -> None:
    readme = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    for word in ("not all GPUs match", "device_filter", "fails closed", "mig_strategy", "migbake import",
                 "--gpu-operator", "nvidia.com/mig.config"):
        assert word in readme, word


def test_multimodel_image_exists_and_filters() -> None:
    images = [p for p in (REPO / "images").glob("*/node-profile.yaml")
              if len({g["model"] for g in yaml.safe_load(p.read_text())["gpus"]}) > 1]
    assert images, "an image in images/ serves several GPU models"
    for p in images:
        config = (p.parent / "generated/rootfs/etc/nvidia-mig/config.yaml").read_text()
        gpus = yaml.safe_load(p.read_text())["gpus"]
        names = len(gpus[0]["mig"].get("layouts", {})) or 1  # one config per named layout, each with every entry
        assert config.count("device-filter:") == len(gpus) * names


# --- the verify script on a node with stub tools ------------------------------------------------

def _stub(path: Path, text: str) -> Path:
    path.write_text("#!/usr/bin/env bash\n" + text)
    path.chmod(0o755)
    return path


def run_verify(tmp_path: Path, profile: str, gpus: list[str], allocatable: str | None = None) -> str:
    """Run the generated verify script with a stub nvidia-smi (these GPUs) and, optionally, kubectl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "gpus.csv").write_text("".join(f"{i}, {pci}\n" for i, pci in enumerate(gpus)))
    smi = _stub(bin_dir / "nvidia-smi", f'case "$*" in\n  *--query-gpu=index,pci.device_id*) cat '
                f'{tmp_path}/gpus.csv ;;\n  -L) echo "GPU 0: stub" ;;\nesac\n')
    mig = _stub(bin_dir / "nvidia-mig-parted", "exit 1\n")
    if allocatable is not None:
        _stub(bin_dir / "kubectl", f"printf '%b' {shlex.quote(allocatable)}\n")
    config = tmp_path / "etc/nvidia-mig/config.yaml"  # installed, as on a node the restore ran on
    text = profile + f"tools: {{nvidia_smi: {smi}, nvidia_mig_parted: {mig}}}\nrestore: {{config_path: {config}}}\n"
    out = generate(text, tmp_path / "out", node_root=True)
    config.parent.mkdir(parents=True)
    config.write_bytes((out / "rootfs" / str(config).lstrip("/")).read_bytes())
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    ran = subprocess.run(["bash", str(out / "scripts/verify-mig-restore.sh")], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    return ran.stdout


@pytest.mark.parametrize(("gpus", "line"), [
    (["0x233010DE", "0x233010DE"], "PASS  each of the 2 GPU(s) matches an entry"),
    (["0x233510DE", "0x233B10DE"], "PASS  each of the 2 GPU(s) matches an entry"),
    (["0x233010DE", "0x20B210DE"], "FAIL  NVIDIA GPU(s) on this machine that are not the profile's models: "
                                   "GPU 1 (0x20B210DE): no entry of config 'current' matches"),
], ids=["h100-node", "h200-node", "a100-in-h100-node"])
def test_verify_names_a_gpu_the_image_does_not_serve(tmp_path: Path, gpus: list[str], line: str) -> None:
    out = run_verify(tmp_path, H100_H200, gpus)
    assert line in out, out
    if line.startswith("FAIL"):
        assert "this image serves h100-80gb, h200-141gb" in out
        assert "not all GPUs match the specified config" in out


def test_verify_without_filter_says_apply_tries_foreign_profiles(tmp_path: Path) -> None:
    out = run_verify(tmp_path, H200, ["0x233010DE"])
    assert ("FAIL  NVIDIA GPU(s) on this machine that are not the profile's models: GPU 0 (0x233010DE) is not "
            "h200-141gb: the entry has no device-filter") in out, out
