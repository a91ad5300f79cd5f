"""What a user sees when something is off: each message says what happened and how to fix it."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import IMAGES, REPO, TESTS, cli

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


IMAGE = next(p for p in IMAGES if p.name == "h200-inference")

TAB_PROFILE = "version: 1\nname: x\ngpus:\n  - model: h200-141gb\n    mig:\n\t  layout: {1g.18gb: 1}\n"


def test_a_tab_in_the_indentation_says_so() -> None:
    code, out, _ = cli("validate", "-", stdin=TAB_PROFILE)
    assert code == 1
    assert out.splitlines()[0] == ("<stdin>:6:1: error: /: YAML syntax error: a tab character in the indentation; "
                                   "YAML indents with spaces only [yaml-syntax]")
    assert "cannot start any token" not in out


def test_the_size_warning_only_follows_a_write(tmp_path: Path) -> None:
    big = tmp_path / "part.sh"
    big.write_text("#!/bin/sh\n" + "# padding\n" * 2100)  # 21 KB: the MIME bundle is over EC2's 16 KB
    profile = str(IMAGE / "node-profile.yaml")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("not migbake's\n")
    code, _, err = cli("generate", profile, "-o", str(taken), "--user-data-mime", str(big))
    assert code == 2 and "[ec2-user-data-size]" not in err  # refused to write: nothing to warn about
    out = tmp_path / "out"
    code, _, err = cli("generate", profile, "-o", str(out), "--user-data-mime", str(big))
    assert code == 0 and "warning: /kubelet/layout: cloud-init/user-data.mime is " in err
    code, _, err = cli("generate", profile, "-o", str(out), "--check", "--user-data-mime", str(big))
    assert code == 0 and "[ec2-user-data-size]" not in err


WARNING_CASE = TESTS / "cases/warning/devices-without-gpu-count/node-profile.yaml"


def test_strict_makes_warnings_errors(tmp_path: Path) -> None:
    code, out, _ = cli("validate", str(WARNING_CASE))
    assert code == 0 and "warning:" in out
    code, out, _ = cli("validate", "--strict", str(WARNING_CASE))
    assert code == 1 and "warning:" in out
    code, _, _ = cli("validate", "--strict", str(IMAGE / "node-profile.yaml"))
    assert code == 0
    code, _, err = cli("generate", "--strict", str(WARNING_CASE), "-o", str(tmp_path / "out"))
    assert code == 1 and "warning:" in err and "invalid, nothing written" in err
    assert not (tmp_path / "out").exists()


def test_show_words_free_memory_slices_as_a_list() -> None:
    text = "version: 1\nname: x\ngpus:\n  - model: h200-141gb\n    mig:\n      layout: {3g.71gb: 1, 1g.18gb: 1}\n"
    code, out, _ = cli("show", "-", stdin=text)
    assert code == 0
    assert "memory slices 5/8 used, compute slices 4/7 used, memory slices 5-7 free\n" in out


def test_import_from_stdin_names_it_stdin() -> None:
    export = (TESTS / "fixtures/mig-parted-export-h200-7x1g.yaml").read_text()
    code, _, err = cli("import", "-", stdin=export)
    assert code == 1 and err.startswith("<stdin>:4:5: error:") and "migbake: <stdin>: cannot import" in err
    code, out, _ = cli("import", "-", "--model", "h200-141gb", stdin=export)
    assert code == 0 and " from standard input (sha256 " in out


def test_layouts_gb_is_the_gpus_memory_not_the_names_sum() -> None:
    code, out, _ = cli("layouts", "h200-141gb")
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("{4g.71gb: 1, 3g.71gb: 1}"))
    assert row.split()[-2] == "141"  # the names add up to 142
    code, out, _ = cli("layouts", "h100-94gb")
    row = next(line for line in out.splitlines() if line.strip().startswith("{4g.47gb: 1, 3g.47gb: 1}"))
    assert row.split()[-2] == "94"


def test_a_name_without_its_dot_gets_a_did_you_mean_with_the_models_own_names() -> None:
    text = "version: 1\nname: x\ngpus:\n  - model: h100-80gb\n    mig:\n      layout: {1g10gb: 1}\n"
    code, out, _ = cli("validate", "-", stdin=text)
    assert code == 1
    assert out.splitlines()[0] == (
        "<stdin>:6:15: error: /gpus/0/mig/layout: '1g10gb' is not allowed here; expected a MIG profile name of "
        "H100-SXM5-80GB (h100-80gb): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; "
        "did you mean '1g.10gb'? [schema-pattern]")
    assert "1g.18gb" not in out  # an H200 name would mislead


def test_pci_ids_as_lspci_prints_them(tmp_path: Path) -> None:
    text = ("version: 1\nname: x\ngpus:\n  - model: 10de:2335\n    pci_device_ids: [10de:2335]\n"
            "    mig:\n      layout: {1g.18gb: 7}\n")
    code, out, _ = cli("validate", "-", stdin=text)
    assert (code, out) == (0, "1 file valid\n")
    out_dir = tmp_path / "out"
    assert cli("generate", "-", "-o", str(out_dir), stdin=text)[0] == 0
    config = (out_dir / "rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert "device-filter: [0x233510DE]" in config or "- 0x233510DE" in config or "0x233510DE" in config


def test_preflight_reads_the_readmes_own_query(tmp_path: Path) -> None:
    capture = tmp_path / "q.csv"
    capture.write_text("name, pci.device_id\n" + "NVIDIA H200, 0x233510DE\n" * 8)  # README: Writing your first profile
    code, out, _ = cli("preflight", str(IMAGE / "node-profile.yaml"), "--nvidia-smi-csv", str(capture))
    assert code == 0, out
    assert "gpu-count    PASS   8 GPU(s), as gpu_count says" in out
    assert "mig-state    SKIP   GPU 0,1,2,3,4,5,6,7: the capture has no MIG mode" in out


def test_articles_and_numbers_read_right() -> None:
    from migbake.wording import article, gpus

    assert [article(w) for w in ("A100-SXM4-80GB", "H200-SXM5-141GB", "B200", "GH200", "h100-80gb", "L40S",
                                 "a100-80gb", "RTX PRO 6000")] == ["an", "an", "a", "a", "an", "an", "an", "an"]
    assert (gpus([4]), gpus([4, 5, 6, 7])) == ("GPU 4", "GPUs 4-7")
