"""What a new user tripped on (issue 44), each pinned by a test that failed before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import REPO, cli

from migbake.rules.validate import PROFILE_GLOBS

H200 = REPO / "images/h200-inference/node-profile.yaml"


def test_images_and_validate_find_the_same_profiles(tmp_path: Path) -> None:
    """``images DIR`` found only ``*/node-profile.yaml``; ``validate DIR`` every PROFILE_GLOBS name at any depth."""
    top = tmp_path / "images"
    names = ["a/node-profile.yaml", "b/node-profile.yml", "c/gpu.profile.yaml", "d/deep/node-profile.yaml",
             "e.profile.yml"]
    for name in names:
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(H200, top / name)
    (top / "f").mkdir()
    (top / "f/notes.yaml").write_text("not a profile\n")
    code, out, err = cli("validate", str(top))
    assert code == 0, out + err
    assert out == f"{len(names)} files valid\n"
    code, out, err = cli("images", str(top))
    assert code == 0, out + err
    trees = sorted(p.parent.relative_to(top).as_posix() for p in top.rglob(".migbake-output"))
    assert trees == ["a/generated", "b/generated", "c/gpu.generated", "d/deep/generated", "e.generated"]
    assert cli("images", "--check", str(top))[0] == 0
    # an empty folder: both say the same, naming every name they look for
    (tmp_path / "empty").mkdir()
    said = {cli(cmd, str(tmp_path / "empty"))[2].splitlines()[-1] for cmd in ("validate", "images")}
    assert said == {f"migbake: error: {tmp_path / 'empty'}: no {', '.join(PROFILE_GLOBS)} below this directory"}


def test_a_mig_parted_config_given_to_validate_says_migbake_import(tmp_path: Path) -> None:
    config = REPO / "tests/fixtures/mig-parted-export-h200-7x1g.yaml"
    code, out, _ = cli("validate", str(config))
    assert code == 1
    assert out == (f"{config}:2:1: error: /mig-configs: this is an nvidia-mig-parted config (version: v1, "
                   "mig-configs), not a node profile: make a profile of it with `migbake import FILE -o "
                   "node-profile.yaml` "
                   "(--config NAME chooses one of its configs) [mig-parted-config]\n1 problem in 1 file (1 checked)\n")
    # and the command it names makes a valid profile of it
    profile = tmp_path / "node-profile.yaml"
    assert cli("import", str(config), "--model", "h200", "-o", str(profile))[0] == 0
    assert cli("validate", str(profile))[0] == 0
    # a profile that merely has version v1 is not taken for one
    (tmp_path / "v1.yaml").write_text("version: v1\nname: x\ngpus: []\n")
    assert "[mig-parted-config]" not in cli("validate", str(tmp_path / "v1.yaml"))[1]


def test_a_global_option_after_the_command_says_where_it_goes() -> None:
    profile = str(H200)
    for args, hint in [
        (["validate", profile, "--debug"], "--debug is an option of migbake itself: put it before the command "
                                          "(migbake --debug validate ...)"),
        (["validate", "--catalog", "x.json", profile], "--catalog is an option of migbake itself: put it before "
                                                      "the command (migbake --catalog FILE validate ...)"),
        (["generate", "--catalog=x.json", profile, "-o", "out"], "(migbake --catalog FILE generate ...)"),
        (["gpus", "--version"], "--version is an option of migbake itself: `migbake --version`"),
    ]:
        code, out, err = cli(*args)
        assert code == 2 and out == "", args
        assert err.splitlines()[-1].startswith("migbake: error: No such option"), err
        assert err.splitlines()[-1].endswith(hint), (args, err)
    # an option that is nobody's gets no such hint
    code, _, err = cli("validate", profile, "--nope")
    assert code == 2 and "option of migbake itself" not in err


def test_an_h100_pcie_profiles_comments_name_the_pcie_board(tmp_path: Path) -> None:
    """The comments named the catalog model's first name (H100-SXM5-80GB) whatever board the profile named."""
    for written, board in [("NVIDIA H100 PCIe", "H100-PCIE-80GB"), ("H100 PCIe", "H100-PCIE-80GB"),
                           ('"0x233110DE"', "H100-PCIE-80GB"), ("H100-SXM5-80GB", "H100-SXM5-80GB"),
                           ("A100 PCIe 80GB", "A100-PCIE-80GB")]:
        profile = tmp_path / "p.yaml"
        profile.write_text(f"version: 1\nname: p\ngpus:\n  - model: {written}\n    mig: {{layout: {{7g.80gb: 1}}}}\n")
        out = tmp_path / written.strip('"').replace(" ", "_")
        code, _, err = cli("generate", str(profile), "-o", str(out), "--outputs", "rootfs,cloud-init")
        assert code == 0, err
        for path in ("rootfs/etc/nvidia-mig/config.yaml", "cloud-init/user-data"):
            text = (out / path).read_text()
            assert f"# {board} (" in text, (written, path)
            other = "SXM" if "PCIE" in board else "PCIE"
            assert other not in text.upper().replace("NVIDIA-MIG", ""), (written, path)


def test_dra_doc_counts_the_h200s_memory_slices_from_the_catalog() -> None:
    """docs/dra.md said 7x 1g.18gb uses every memory slice of an H200: it leaves one (catalog: 8 slices)."""
    from migbake.gpu.catalog import load_catalog

    h200 = load_catalog().find("h200-141gb")
    assert h200 is not None
    one = h200.profile("1g.18gb")
    assert one is not None
    starts = sorted(p.start for p in one.placements)
    free = h200.total_memory_slices - one.max_count * one.memory_slices
    text = " ".join((REPO / "docs/dra.md").read_text().split())
    assert "uses every memory slice (7x 1g.18gb)" not in text
    claim = (f"{one.max_count}x 1g.18gb on an H200 sits at starts {starts[0]}-{starts[-1]}, and leaves {free} of its "
             f"{h200.total_memory_slices} memory slices free (no 1g.18gb placement starts at slice "
             f"{h200.total_memory_slices - 1})")
    assert free == 1 and claim in text


def test_the_pre_commit_hook_takes_the_same_names() -> None:
    import fnmatch
    import re

    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    files = re.compile(next(h["files"] for h in hooks if h["id"] == "migbake-validate"))
    for path in ("node-profile.yaml", "a/node-profile.yml", "a/gpu.profile.yaml", "b/x.profile.yml", "profile.yaml",
                 "a/node-profile.yaml.bak", "a/notes.yaml", "a/.profile.yaml", "node-profiles.yaml"):
        name = path.rsplit("/", 1)[-1]
        assert bool(files.search(path)) == any(fnmatch.fnmatchcase(name, g) for g in PROFILE_GLOBS), path
