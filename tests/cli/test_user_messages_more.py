"""The terminal and CI fixes of issue 25, one test each: what a user sees when something is off."""

from __future__ import annotations

from pathlib import Path

from support import IMAGES, TESTS, cli

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
    assert code == 2 and "migbake: warning" not in err  # refused to write: nothing to warn about
    out = tmp_path / "out"
    code, _, err = cli("generate", profile, "-o", str(out), "--user-data-mime", str(big))
    assert code == 0 and "migbake: warning: cloud-init/user-data.mime is " in err
    code, _, err = cli("generate", profile, "-o", str(out), "--check")
    assert code == 0 and "migbake: warning" not in err


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
