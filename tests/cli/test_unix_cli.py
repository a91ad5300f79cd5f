"""The CLI as a Unix tool: a closed pipe ends quietly, `-` reads stdin, one exit-code table; bake never surprises."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import IMAGES, REPO, cli, migbake_shell

from migbake.bake.packer import SOURCE_NAMES
from migbake.cli.group import COMMANDS, OPTIONAL
from migbake.exits import EXIT_CODES
from migbake.render.write import OUTPUT_MARKER

PROFILE = REPO / "images/h200-inference/node-profile.yaml"
XML = REPO / "tests/fixtures/h200/nvidia-smi-q.xml"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "generator"), "MIGBAKE_PACKER": "/nonexistent/packer"}


def piped(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in bash with pipefail, migbake being this checkout's."""
    return subprocess.run(["bash", "-c", migbake_shell(f"set -o pipefail; {command}")], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=120, check=False)


# --- a closed pipe ---------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    "migbake gpus --profiles | head -1",
    "migbake layouts h200 --json | head -c 100",
    "migbake layouts a100-80gb | head -1",
    "migbake generate {profile} -o {stale} --check | head -1",
    "migbake validate --format json {profile} | head -c 1",
    "migbake show {profile} | head -1",
    "migbake export {profile} | head -1",
    "migbake bake {profile} -o {out} --only null.ssh --var ssh_host=192.0.2.1 --dry-run | head -1",
    "migbake --help | head -1",
], ids=["gpus", "layouts-json", "layouts", "generate-check", "validate", "show", "export", "bake", "help"])
def test_a_closed_pipe_ends_quietly(command: str, tmp_path: Path) -> None:
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / OUTPUT_MARKER).write_text("x\n")
    for i in range(3000):  # a long diff: more than a pipe buffer
        (stale / f"extra-{i}.txt").write_text("x\n")
    ran = piped(command.format(profile=PROFILE, stale=stale, out=tmp_path / "o"), tmp_path)
    assert ran.returncode in (0, 141), ran
    assert ran.stderr == "", ran.stderr
    assert ran.stdout.strip() != ""


def test_a_path_that_contains_migbake_stays_as_it_is(tmp_path: Path) -> None:
    # a checkout at ~/src/migbake: replacing the word "migbake" in the command line rewrote its paths too
    folder = tmp_path / "migbake" / "my migbake images"
    folder.mkdir(parents=True)
    profile = folder / "migbake.yaml"
    profile.write_text(PROFILE.read_text())
    ran = piped(f"migbake show '{profile}' | head -1", folder)
    assert ran.returncode in (0, 141) and ran.stderr == "", ran
    assert ran.stdout.startswith("h200-inference: "), ran.stdout


# --- standard input --------------------------------------------------------------------------------

BAD = "version: 1\nname: x\ngpus: []\n"


@pytest.mark.parametrize("args", [
    ["validate", "-"], ["show", "-"], ["export", "-"], ["preflight", "-", "--nvidia-smi-xml", str(XML)],
    ["generate", "-", "-o", "{out}"],
], ids=["validate", "show", "export", "preflight", "generate"])
def test_dash_reads_the_profile_from_stdin(args: list[str], tmp_path: Path) -> None:
    argv = [a.format(out=tmp_path / "out") for a in args]
    code, out, err = cli(*argv, stdin=PROFILE.read_text())
    assert code in (0, 1) and "Traceback" not in out + err, out + err  # preflight: this H200 has MIG off
    if args[0] != "preflight":
        assert code == 0, out + err
    code, out, err = cli(*argv, stdin=BAD)
    assert code == 1
    assert "<stdin>:3:7: error: /gpus: must have at least 1 items" in out + err
    if args[0] == "generate":
        assert "migbake: <stdin>: invalid, nothing written" in err


def test_stdin_once_only() -> None:
    assert cli("validate", "-", "-", stdin="")[0] == 2


# --- one exit-code table ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", sorted(COMMANDS), ids=sorted(COMMANDS))
def test_every_command_prints_the_exit_code_table(command: str) -> None:
    code, out, _ = cli(command, "--help")
    assert code == 0
    for exit_code, meaning in EXIT_CODES:
        assert f"{exit_code:<4} {meaning}" in out, command


def _cases(tmp: Path) -> dict[str, list[tuple[int, list[str]]]]:
    bad = tmp / "bad.yaml"
    bad.write_text(BAD)
    mime_dir = tmp / "notmigbake"
    mime_dir.mkdir()
    (mime_dir / "notes.txt").write_text("mine\n")
    p = str(PROFILE)
    return {
        "validate": [(0, [p]), (1, [str(bad)]), (2, [])],
        "generate": [(0, [p, "-o", str(tmp / "g")]), (1, [str(bad), "-o", str(tmp / "g2")]),
                     (1, [p, "-o", str(tmp / "none"), "--check"]), (2, [p]), (2, [p, "-o", str(mime_dir)])],
        "images": [(0, [str(REPO / "images"), "--check"]), (2, [str(tmp)])],
        "show": [(0, [p]), (1, [str(bad)]), (2, [])],
        "layouts": [(0, ["h200"]), (2, ["no-such-gpu"])],
        "gpus": [(0, []), (2, ["--no-such-option"])],
        "preflight": [(1, [p, "--nvidia-smi-xml", str(XML)]), (1, [str(bad), "--nvidia-smi-xml", str(XML)]),
                      (2, [p])],
        "import": [(0, [str(REPO / "tests/fixtures/h200/mig-parted-export.yaml"), "--model", "h200"]),
                   (1, [str(bad)]), (2, [str(bad), "--model", "no-such-gpu"])],
        "export": [(0, [p]), (1, [str(bad)]), (2, [])],
        "bake": [(0, [p, "-o", str(tmp / "b"), "--only", "null.ssh", "--var", "ssh_host=192.0.2.1", "--dry-run"]),
                 (1, [str(bad), "-o", str(tmp / "b"), "--only", "amazon-ebs.golden", "--dry-run"]),
                 (2, [p, "-o", str(tmp / "b")])],
        "boot-test": [(1, [str(bad)]), (2, [p, "--scenario", "nope"])],
    }


@pytest.mark.parametrize("command", sorted({*COMMANDS, *OPTIONAL}), ids=sorted({*COMMANDS, *OPTIONAL}))
def test_exit_codes_command_by_command(command: str, tmp_path: Path) -> None:
    if command in OPTIONAL:
        import needs_boottest  # noqa: F401 (skips this test where the boot test is not installed)
    cases = _cases(tmp_path)
    assert command in cases, f"add {command}'s exit codes to this table"
    for expected, args in cases[command]:
        code, out, err = cli(command, *args)
        assert code == expected, (command, args, out, err)
        assert "Traceback" not in out + err


# --- bake ------------------------------------------------------------------------------------------

def test_bake_without_only_refuses_and_lists_the_sources(tmp_path: Path) -> None:
    code, _, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"))
    assert code == 2
    for name in SOURCE_NAMES:
        assert name in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("source", "needs"), [
    ("null.ssh", ["ssh_host"]), ("googlecompute.golden", ["gcp_project_id"]),
    ("azure-arm.golden", ["azure_subscription_id", "azure_managed_image_resource_group"]),
    ("qemu.image", ["qemu_base_image", "qemu_base_image_checksum"]),
], ids=["null-ssh", "googlecompute", "azure-arm", "qemu"])
def test_bake_refuses_a_source_without_its_required_variables(source: str, needs: list[str], tmp_path: Path) -> None:
    code, _, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--only", source, "--dry-run")
    assert code == 2
    for v in needs:
        assert f"--var {v}=..." in err
    # a variables file counts too
    varfile = tmp_path / "v.pkrvars.hcl"
    values = {"qemu_base_image": "https://images.example.com/gpu.qcow2", "qemu_base_image_checksum": "none"}
    varfile.write_text("".join(f'{v} = "{values.get(v, "x")}"\n' for v in needs))
    code, _, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--only", source, "--dry-run",
                       "--var-file", str(varfile))
    assert code == 0, err


def test_bake_dry_run_writes_nothing_and_says_where_it_would(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "a.yaml").write_text(PROFILE.read_text())
    (folder / "b.profile.yaml").write_text((IMAGES[0] / "node-profile.yaml").read_text())
    before = sorted(p.name for p in folder.iterdir())
    outs = []
    for name in ("a.yaml", "b.profile.yaml"):
        code, out, err = cli("bake", str(folder / name), "--only", "qemu.image", "--dry-run",
                             "--var", "qemu_base_image=https://images.example.com/gpu.qcow2",
                             "--var", f"qemu_base_image_checksum=sha256:{'0' * 64}")
        assert code == 0, err
        first = out.splitlines()[0]
        assert first.startswith("dry run, nothing written: would write ") and str(folder / name) in first
        outs.append(first.split(" files to ")[1].split(" (profile")[0])
        assert "-var=qemu_seed_dir=<throwaway seed>" in out
    assert outs == [str(folder / "a.generated"), str(folder / "b.generated")]  # one directory per profile
    assert sorted(p.name for p in folder.iterdir()) == before


def test_bake_refuses_a_directory_of_another_profile(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out))[0] == 0
    ami = ("--var", "kubernetes_version=1.35")  # amazon-ebs.golden's EKS base AMI (test_packer_base_ami.py)
    code, _, err = cli("bake", str(PROFILE), "-o", str(out), "--only", "amazon-ebs.golden", "--dry-run", *ami)
    assert code == 2 and "generated from another profile" in err and "--force" in err
    assert cli("bake", str(PROFILE), "-o", str(out), "--only", "amazon-ebs.golden", "--dry-run", "--force",
               *ami)[0] == 0


def test_qemu_seed_authorizes_a_throwaway_key(tmp_path: Path) -> None:
    from migbake.bake.packer import BAKE_KEY_COMMENT, qemu_seed

    assigned = dict(v.split("=", 1) for v in qemu_seed(tmp_path / "seed"))
    key = Path(assigned["qemu_ssh_private_key_file"])
    public = key.with_name(key.name + ".pub").read_text().strip()
    assert public.endswith(BAKE_KEY_COMMENT)
    user_data = (tmp_path / "seed/user-data").read_text()
    assert user_data.startswith("#cloud-config\n") and public in user_data
    assert "instance-id:" in (tmp_path / "seed/meta-data").read_text()


# --- the marker: profile and options ---------------------------------------------------------------

def test_marker_records_profile_and_options_and_check_uses_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    part = tmp_path / "setup.sh"
    part.write_text("#!/bin/sh\necho hi\n")
    code, stdout, err = cli("generate", str(PROFILE), "-o", str(out), "--user-data-gzip", "--user-data-mime", str(part))
    assert code == 0, err
    files = sum(1 for f in out.rglob("*") if f.is_file() and f.name != OUTPUT_MARKER)
    assert stdout.startswith(f"wrote {files} files to {out} (profile h200-inference from {PROFILE})")
    marker = (out / OUTPUT_MARKER).read_text()
    assert f"profile: {os.path.relpath(PROFILE, out)}\n" in marker and "name: h200-inference\n" in marker
    assert "user-data-gzip: yes\n" in marker and "user-data-mime: ../setup.sh\n" in marker
    assert "sha256: " in marker
    code, stdout, err = cli("generate", str(PROFILE), "-o", str(out), "--check")  # the marker names no file to read
    assert code == 2 and "never reads the file its marker names" in err, stdout + err
    again = ("generate", str(PROFILE), "-o", str(out), "--check", "--user-data-gzip", "--user-data-mime", str(part))
    code, stdout, err = cli(*again)
    assert code == 0, stdout + err
    part.write_text("#!/bin/sh\necho changed\n")
    code, stdout, err = cli(*again)
    assert code == 1 and "user-data.mime" in stdout
    assert "--user-data-gzip --user-data-mime" in err  # the fix keeps the variants


def test_generate_refuses_a_directory_of_another_profile(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 0
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out))
    assert code == 2 and "generated from another profile" in err
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--force")[0] == 0
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 2


def test_images_check_keeps_the_recorded_options(tmp_path: Path) -> None:
    images = tmp_path / "images"
    (images / "one").mkdir(parents=True)
    (images / "one/node-profile.yaml").write_text(PROFILE.read_text())
    out = images / "one/generated"
    assert cli("generate", str(images / "one/node-profile.yaml"), "-o", str(out), "--user-data-gzip")[0] == 0
    code, stdout, err = cli("images", str(images), "--check")
    assert code == 0, stdout + err
    assert cli("images", str(images))[0] == 0
    assert (out / "cloud-init/user-data.gz").is_file()
