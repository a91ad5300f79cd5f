"""Choosing outputs: ``outputs:`` in a profile and ``generate --outputs a,b``.

The written tree holds exactly the folders asked for (and the marker); what a folder carries of another
(Karpenter's userData, Cluster API's files) is byte for byte the same whether or not that other folder is
written; ``--check`` compares only the folders asked for, and the marker keeps ``--outputs`` for a later check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import IMAGES, REPO, cli

from migbake.render.origin import Origin
from migbake.render.tree import OUTPUT_NAMES

H200 = REPO / "images/h200-inference"
A100 = REPO / "images/a100-80gb-mixed"  # has cluster-api


def _tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _top(out: Path) -> set[str]:
    return {p.name for p in out.iterdir()}


def test_the_schema_names_exactly_the_targets() -> None:
    schema = json.loads((REPO / "schemas/node-profile.schema.json").read_text())
    items = schema["properties"]["outputs"]["items"]
    assert tuple(items["enum"]) == OUTPUT_NAMES
    # the item's description names them too, in the same order
    assert items["description"] == f"An output folder: {', '.join(OUTPUT_NAMES[:-1])} or {OUTPUT_NAMES[-1]}."


@pytest.mark.parametrize("image", IMAGES, ids=[i.name for i in IMAGES])
def test_every_generated_folder_is_an_output_name(image: Path) -> None:
    folders = {p.name for p in (image / "generated").iterdir() if p.is_dir()}
    assert folders and folders <= set(OUTPUT_NAMES)


def test_only_the_asked_folders_are_written_and_dependencies_stay_byte_identical(tmp_path: Path) -> None:
    full, some, alone = tmp_path / "full", tmp_path / "some", tmp_path / "alone"
    assert cli("generate", str(H200 / "node-profile.yaml"), "-o", str(full))[0] == 0
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(some), "--outputs",
                       "karpenter,cloud-init")
    assert code == 0, err
    assert _top(some) == {".migbake-output", "cloud-init", "karpenter"}
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(alone), "--outputs", "karpenter")
    assert code == 0, err
    assert _top(alone) == {".migbake-output", "karpenter"}
    nodeclass = "karpenter/ec2nodeclass.yaml"
    assert (alone / nodeclass).read_bytes() == (full / nodeclass).read_bytes() == (some / nodeclass).read_bytes()
    whole = _tree(full)
    assert {k: v for k, v in whole.items() if k.startswith(("cloud-init/", "karpenter/"))} == {
        k: v for k, v in _tree(some).items() if k != ".migbake-output"}


def test_cluster_api_alone_carries_the_same_rootfs_files(tmp_path: Path) -> None:
    full, alone = tmp_path / "full", tmp_path / "alone"
    assert cli("generate", str(A100 / "node-profile.yaml"), "-o", str(full))[0] == 0
    assert cli("generate", str(A100 / "node-profile.yaml"), "-o", str(alone), "--outputs", "cluster-api")[0] == 0
    assert _top(alone) == {".migbake-output", "cluster-api"}
    assert {k: v for k, v in _tree(alone).items() if k != ".migbake-output"} == {
        k: v for k, v in _tree(full).items() if k.startswith("cluster-api/")}


def _profile(tmp_path: Path, outputs: str) -> Path:
    p = tmp_path / "node-profile.yaml"
    p.write_text((H200 / "node-profile.yaml").read_text() + f"outputs: {outputs}\n")
    return p


def test_profile_outputs_and_check(tmp_path: Path) -> None:
    profile, out = _profile(tmp_path, "[scripts, rootfs]"), tmp_path / "out"
    assert cli("generate", str(profile), "-o", str(out))[0] == 0
    assert _top(out) == {".migbake-output", "rootfs", "scripts"}
    assert "outputs: rootfs,scripts\n" in (out / ".migbake-output").read_text()
    code, stdout, _ = cli("generate", str(profile), "-o", str(out), "--check")
    assert code == 0, stdout
    # a folder not asked for is stale, and so is a changed file of one that is
    (out / "scripts/verify-mig-restore.sh").write_text("#!/bin/sh\n")
    code, stdout, _ = cli("generate", str(profile), "-o", str(out), "--check")
    assert code == 1 and "scripts/verify-mig-restore.sh (on disk)" in stdout
    assert cli("generate", str(profile), "-o", str(out))[0] == 0
    code, stdout, _ = cli("generate", str(profile), "-o", str(out), "--check", "--outputs", "rootfs")
    assert code == 1 and "not generated (would be removed): scripts/" in stdout
    # the profile asks for more: the tree written before lacks it
    _profile(tmp_path, "[scripts, rootfs, packer]")
    code, stdout, _ = cli("generate", str(profile), "-o", str(out), "--check")
    assert code == 1 and "missing: packer/" in stdout


def test_the_flag_overrides_the_profile_and_the_marker_keeps_it(tmp_path: Path) -> None:
    profile, out = _profile(tmp_path, "[rootfs]"), tmp_path / "out"
    code, _, err = cli("generate", str(profile), "-o", str(out), "--outputs", "scripts")
    assert code == 0, err
    assert _top(out) == {".migbake-output", "scripts"}
    assert "outputs: scripts (--outputs)\n" in (out / ".migbake-output").read_text()
    code, stdout, err = cli("generate", str(profile), "-o", str(out), "--check")
    assert code == 0, stdout + err  # the folders --outputs chose, compared again
    (out / "scripts/verify-mig-restore.sh").write_text("#!/bin/sh\n")
    code, _, err = cli("generate", str(profile), "-o", str(out), "--check")
    assert code == 1 and "--outputs scripts" in err  # the fix names the same folders
    assert cli("generate", str(profile), "-o", str(out))[0] == 0  # without the flag: the profile's
    assert _top(out) == {".migbake-output", "rootfs"}


def test_an_unknown_output_is_a_usage_error_or_a_located_problem(tmp_path: Path) -> None:
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(tmp_path / "o"), "--outputs",
                       "rootfs,cloudinit")
    assert code == 2
    assert "'cloudinit': no such output (did you mean 'cloud-init'?); allowed: " + ", ".join(OUTPUT_NAMES) in err
    assert not (tmp_path / "o").exists()
    profile = _profile(tmp_path, "[rootfs, cloudinit]")
    code, out, _ = cli("validate", str(profile))
    assert code == 1
    line = len((H200 / "node-profile.yaml").read_text().splitlines()) + 1
    assert f"{profile}:{line}:19: error: /outputs/1: 'cloudinit' is not allowed here; expected \"rootfs\", " in out
    assert out.count("[schema-enum]") == 1
    code, out, _ = cli("validate", str(_profile(tmp_path, "[]")))
    assert code == 1 and "/outputs" in out


def test_user_data_forms_need_cloud_init(tmp_path: Path) -> None:
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(tmp_path / "o"), "--outputs",
                       "karpenter", "--user-data-gzip")
    assert code == 2 and "add cloud-init" in err
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(tmp_path / "o"), "--outputs",
                       "karpenter,cloud-init", "--user-data-gzip")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "o/cloud-init").iterdir()) == ["user-data", "user-data.gz"]


def test_images_honours_the_profiles_outputs(tmp_path: Path) -> None:
    repo = tmp_path / "images"
    shutil.copytree(H200, repo / "h200", ignore=shutil.ignore_patterns("generated"))
    with (repo / "h200/node-profile.yaml").open("a") as fh:
        fh.write("outputs: [karpenter, rootfs]\n")
    code, _, err = cli("images", str(repo))
    assert code == 0, err
    assert _top(repo / "h200/generated") == {".migbake-output", "karpenter", "rootfs"}
    assert cli("images", "--check", str(repo))[0] == 0
    shutil.rmtree(repo / "h200/generated/rootfs")
    assert cli("images", "--check", str(repo))[0] == 1


def test_a_marker_without_outputs_means_all() -> None:
    text = "profile: p\nname: n\nsha256: x\nuser-data-gzip: no\nuser-data-mime: no\n"
    origin = Origin.parse(text)
    assert origin is not None and origin.outputs == () and not origin.outputs_option
    again = Origin.parse(Origin("p", "n", "x", outputs=("rootfs", "karpenter"), outputs_option=True).text())
    assert again is not None and again.outputs == ("rootfs", "karpenter") and again.outputs_option


def test_bake_needs_packer_among_the_outputs(tmp_path: Path) -> None:
    profile = _profile(tmp_path, "[rootfs, karpenter]")
    code, _, err = cli("bake", str(profile), "--only", "null.ssh", "--var", "ssh_host=x", "--dry-run")
    assert code == 2 and "leaves out packer" in err
    assert not (tmp_path / "generated").exists()


def test_an_asked_output_with_nothing_to_write_is_said(tmp_path: Path) -> None:
    code, _, err = cli("generate", str(H200 / "node-profile.yaml"), "-o", str(tmp_path / "o"), "--outputs",
                       "rootfs,slurm")
    assert code == 0
    assert "migbake: note: nothing to write in slurm for this profile" in err
    assert _top(tmp_path / "o") == {".migbake-output", "rootfs"}
