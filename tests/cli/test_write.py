"""The output directory: refused when it is not migbake's, never written through a link, replaced at once.

``generate`` builds the tree beside OUT and swaps it in; ``generate --check`` compares without writing.
These tests drive the real CLI (in-process) and ``write_tree`` with failures injected mid-write.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from support import IMAGES, REPO, CliRunner

from migbake.cli.group import main
from migbake.problems import OutputError
from migbake.render import payloads, write
from migbake.render.tree import render
from migbake.render.write import OUTPUT_MARKER, read_origin, write_tree
from migbake.rules.validate import check_file

PROFILE = IMAGES[0] / "node-profile.yaml"


def cli(*args: str) -> Result:
    """Run the migbake CLI in-process."""
    return CliRunner().invoke(main, list(args))


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root`` (not following links): kind and mode, plus content hash or link target."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = (f"dir {stat.S_IMODE(st.st_mode):o}", "")
            else:
                out[rel] = (f"file {stat.S_IMODE(st.st_mode):o}", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def without_marker(tree: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """A snapshot without the marker, which records the profile's path relative to OUT."""
    return {k: v for k, v in tree.items() if k != OUTPUT_MARKER}


def leftovers(parent: Path, out: Path) -> list[str]:
    """Temporary folders write_tree might have left beside ``out``."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    """A fresh OUT written by `migbake generate`."""
    out = tmp_path / "out"
    result = cli("generate", str(PROFILE), "-o", str(out))
    assert result.exit_code == 0, result.output
    yield out


# --- what OUT may be --------------------------------------------------------------------------------


def test_generate_into_a_new_and_into_an_empty_directory(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b" / "out"
    assert cli("generate", str(PROFILE), "-o", str(new)).exit_code == 0
    assert (new / OUTPUT_MARKER).is_file() and (new / "scripts/verify-mig-restore.sh").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("generate", str(PROFILE), "-o", str(empty)).exit_code == 0
    assert without_marker(snapshot(empty)) == without_marker(snapshot(new))  # the marker names the profile's path
    assert leftovers(tmp_path, empty) == [] and leftovers(new.parent, new) == []


def test_refuses_a_non_empty_directory_it_did_not_create(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    before = snapshot(out)
    result = cli("generate", str(PROFILE), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert "is not empty and was not created by migbake; choose an empty or new directory" in result.stderr
    assert "pass --force" not in result.stderr  # --force would not help: it never deletes a user's file
    assert "Traceback" not in result.output
    assert snapshot(out) == before and leftovers(tmp_path, out) == []

    forced = cli("generate", str(PROFILE), "-o", str(out), "--force")  # the user's file stays
    assert forced.exit_code == 2, forced.output
    assert "migbake never deletes files it did not write, --force included" in forced.stderr
    assert snapshot(out) == before and leftovers(tmp_path, out) == []


def test_a_symlink_named_like_the_marker_does_not_make_a_directory_migbakes(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / OUTPUT_MARKER).write_text("x")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    os.symlink(elsewhere / OUTPUT_MARKER, out / OUTPUT_MARKER)
    before = snapshot(out)
    result = cli("generate", str(PROFILE), "-o", str(out))
    assert result.exit_code == 2 and "was not created by migbake" in result.stderr, result.output
    assert snapshot(out) == before


def test_refuses_a_file_as_out(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("data\n")
    result = cli("generate", str(PROFILE), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert out.read_text() == "data\n"


@pytest.mark.parametrize("target_kind", ["empty-dir", "migbake-dir", "dangling"])
@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_refuses_out_that_is_a_symlink(tmp_path: Path, target_kind: str, force: bool) -> None:
    target = tmp_path / "target"
    if target_kind == "empty-dir":
        target.mkdir()
    elif target_kind == "migbake-dir":
        assert cli("generate", str(PROFILE), "-o", str(target)).exit_code == 0
        (target / "scripts/verify-mig-restore.sh").write_text("edited\n")
    link = tmp_path / "out"
    os.symlink(target, link)
    before = snapshot(tmp_path)
    result = cli("generate", str(PROFILE), "-o", str(link), *(["--force"] if force else []))
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.stderr
    assert snapshot(tmp_path) == before


def test_never_writes_through_a_symlink_inside_out(generated: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.sh").write_text("#!/bin/sh\necho precious\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "keep").write_text("keep\n")
    before = snapshot(outside)
    # someone replaced generated files by links to files and folders outside OUT
    script = generated / "scripts/verify-mig-restore.sh"
    script.unlink()
    os.symlink(outside / "precious.sh", script)
    shutil.rmtree(generated / "rootfs/etc/nvidia-mig")
    os.symlink(outside / "dir", generated / "rootfs/etc/nvidia-mig")

    check = cli("generate", str(PROFILE), "-o", str(generated), "--check")
    assert check.exit_code == 1
    assert "not a regular file: scripts/verify-mig-restore.sh" in check.stdout
    assert "not generated (would be removed): rootfs/etc/nvidia-mig\n" in check.stdout  # the link itself
    assert "missing: rootfs/etc/nvidia-mig/config.yaml" in check.stdout  # not read through the link

    result = cli("generate", str(PROFILE), "-o", str(generated))
    assert result.exit_code == 0, result.output
    assert snapshot(outside) == before
    assert not script.is_symlink() and script.read_text().startswith("#!/usr/bin/env bash\n")
    assert not (generated / "rootfs/etc/nvidia-mig").is_symlink()
    assert cli("generate", str(PROFILE), "-o", str(generated), "--check").exit_code == 0


# --- --check ----------------------------------------------------------------------------------------


def test_check_is_quiet_when_up_to_date(generated: Path) -> None:
    before = snapshot(generated)
    result = cli("generate", str(PROFILE), "-o", str(generated), "--check")
    assert result.exit_code == 0, result.output
    assert "up to date" in result.stdout
    assert snapshot(generated) == before


def _edit(out: Path) -> str:
    p = out / "scripts/verify-mig-restore.sh"
    p.write_text(p.read_text().replace("set -uo pipefail", "set -u"))
    return "scripts/verify-mig-restore.sh"


def _chmod(out: Path) -> str:
    (out / "scripts/capture-mig-config.sh").chmod(0o644)
    return "mode of scripts/capture-mig-config.sh: 0644 on disk, 0755 generated"


def _add(out: Path) -> str:
    (out / "scripts/extra.sh").write_text("echo extra\n")
    return "not generated (would be removed): scripts/extra.sh"


def _remove(out: Path) -> str:
    (out / "cloud-init/user-data").unlink()
    return "missing: cloud-init/user-data"


@pytest.mark.parametrize(
    "change", [_edit, _chmod, _add, _remove], ids=["edit", "mode", "extra-file", "removed"]
)
def test_check_fails_with_a_diff_when_out_differs(generated: Path, change: object) -> None:
    said = change(generated)  # type: ignore[operator]
    before = snapshot(generated)
    result = cli("generate", str(PROFILE), "-o", str(generated), "--check")
    assert result.exit_code == 1, result.output
    assert said in result.stdout
    assert "is stale" in result.stderr
    assert snapshot(generated) == before  # --check writes nothing
    if change is _edit:
        assert "-set -u" in result.stdout and "+set -uo pipefail" in result.stdout
    # regenerating repairs it; a file the marker does not list is never deleted, --force included
    if change is _add:
        for force in ([], ["--force"]):
            refused = cli("generate", str(PROFILE), "-o", str(generated), *force)
            assert refused.exit_code == 2 and "scripts/extra.sh" in refused.stderr, refused.output
            assert "pass --force" not in refused.stderr
            assert snapshot(generated) == before
        (generated / "scripts/extra.sh").unlink()  # moved away, as the message says
    assert cli("generate", str(PROFILE), "-o", str(generated)).exit_code == 0
    assert cli("generate", str(PROFILE), "-o", str(generated), "--check").exit_code == 0


def test_check_of_a_missing_out_fails(tmp_path: Path) -> None:
    result = cli("generate", str(PROFILE), "-o", str(tmp_path / "nothing"), "--check")
    assert result.exit_code == 1 and "does not exist" in result.stdout
    assert not (tmp_path / "nothing").exists()


# --- failures mid-write -----------------------------------------------------------------------------


class Boom(OSError):
    """The failure injected into write_tree."""


def _artifacts() -> list[write.Artifact]:
    checked = check_file(PROFILE)
    assert checked.profile is not None
    return render(checked.profile)


def _fail_on_call(monkeypatch: pytest.MonkeyPatch, name: str, n: int) -> None:
    """Make ``write.os.<name>`` raise on its ``n``-th call from ``migbake.render.write`` (reading the profile
    opens a file too, through ``os.open``: those calls are not counted)."""
    real = getattr(os, name)
    calls = {"n": 0}

    def fake(*args: object, **kwargs: object) -> object:
        if sys._getframe(1).f_globals.get("__name__") != write.__name__:
            return real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == n:
            raise Boom(f"injected failure in os.{name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(write.os, name, fake)


@pytest.mark.parametrize(
    ("name", "n"),
    [("open", 1), ("open", 5), ("chmod", 3), ("rename", 1)],
    ids=["first-file", "fifth-file", "chmod", "swap"],
)
@pytest.mark.parametrize("existing", [True, False], ids=["replace", "new"])
def test_a_failure_mid_write_leaves_out_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, n: int, existing: bool
) -> None:
    out = tmp_path / "out"
    if existing:
        write_tree(_artifacts(), out)
        (out / "scripts/verify-mig-restore.sh").write_text("the old tree\n")
    before = snapshot(out) if existing else None
    if name == "rename" and existing:
        monkeypatch.setattr(write, "_exchange", lambda a, b: (_ for _ in ()).throw(Boom("swap failed")))
    else:
        if name == "rename":
            monkeypatch.setattr(write, "_rename_noreplace", lambda a, b: False)  # a system without renameat2
        _fail_on_call(monkeypatch, name, n)
    with pytest.raises(OutputError, match=r"cannot write .*out: ") as raised:  # exit 2, the failure's reason
        write_tree(_artifacts(), out)
    assert isinstance(raised.value.__cause__, Boom)
    assert (snapshot(out) if existing else out.exists()) == (before if existing else False)
    assert leftovers(tmp_path, out) == []


def test_without_rename_exchange_a_failed_swap_puts_the_old_tree_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_tree(_artifacts(), out)
    (out / "scripts/verify-mig-restore.sh").write_text("the old tree\n")
    before = snapshot(out)
    monkeypatch.setattr(write, "_exchange", lambda a, b: False)  # a system without renameat2
    monkeypatch.setattr(write, "_rename_noreplace", lambda a, b: False)
    _fail_on_call(monkeypatch, "rename", 2)  # out -> .old succeeds, tmp -> out fails
    with pytest.raises(OutputError, match="injected failure"):
        write_tree(_artifacts(), out)
    assert snapshot(out) == before
    assert leftovers(tmp_path, out) == []
    monkeypatch.undo()
    monkeypatch.setattr(write, "_exchange", lambda a, b: False)
    monkeypatch.setattr(write, "_rename_noreplace", lambda a, b: False)
    write_tree(_artifacts(), out)  # and the fallback works when nothing fails
    assert (out / "scripts/verify-mig-restore.sh").read_text().startswith("#!/usr/bin/env bash\n")
    assert leftovers(tmp_path, out) == []


def test_cli_reports_a_write_failure_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out)).exit_code == 0
    before = snapshot(out)
    _fail_on_call(monkeypatch, "open", 3)
    result = cli("generate", str(PROFILE), "-o", str(out))
    assert result.exit_code == 2, result.output  # a refused write: one line, the output's name and why
    assert result.stderr == f"migbake: error: cannot write {out}: injected failure in os.open\n"
    assert snapshot(out) == before and leftovers(tmp_path, out) == []


# --- determinism ------------------------------------------------------------------------------------


def test_same_input_gives_byte_identical_output(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli("generate", str(PROFILE), "-o", str(a)).exit_code == 0
    assert cli("generate", str(PROFILE), "-o", str(b)).exit_code == 0
    assert snapshot(a) == snapshot(b)
    assert cli("generate", str(PROFILE), "-o", str(a)).exit_code == 0  # regenerating in place
    assert snapshot(a) == snapshot(b)


def test_output_does_not_depend_on_working_directory_or_profile_location(tmp_path: Path) -> None:
    """Two processes, two working directories, the profile at two paths: the same bytes and modes.

    Only the marker differs: it records the profile's path relative to OUT.
    """
    trees = []
    for i, (umask, rel) in enumerate(((0o022, "deep/er/node-profile.yaml"), (0o077, "p.yaml"))):
        cwd = tmp_path / f"cwd{i}"
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROFILE, cwd / rel)
        code = f"import os; os.umask({umask}); from migbake.cli.group import main; main(prog_name='migbake')"
        ran = subprocess.run(
            [sys.executable, "-c", code, "generate", rel, "-o", "out"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO / "generator")},
        )
        assert ran.returncode == 0, ran.stderr
        trees.append(snapshot(cwd / "out"))
        assert f"profile: ../{rel}\n" in (cwd / "out" / OUTPUT_MARKER).read_text()
    assert without_marker(trees[0]) == without_marker(trees[1])
    assert trees[0]["scripts/verify-mig-restore.sh"][0] == "file 755"


@pytest.mark.parametrize(("paths", "message"), [
    (["a/b", "a/c"], None),
    (["a/b", "a/b"], "two generated files would both be 'a/b'"),
    (["p/q", "r/s/t", "r/s"], "'r/s' would be both a generated file and the folder of 'r/s/t'"),
    (["x/y/z", "x"], "'x' would be both a generated file and the folder of 'x/y/z'"),
    (["a/b/c", "a/b/d", "a-b", "a/bc", "a/b/e/f"], None),  # shared folders; a name that only starts like one
    (["a/b/c", "a/b/e/f", "q", "a/b/e"], "'a/b/e' would be both a generated file and the folder of 'a/b/e/f'"),
])
def test_the_output_plan_refuses_clashing_paths(paths: list[str], message: str | None) -> None:
    from migbake.problems import RenderError
    from migbake.render.artifact import Artifact
    from migbake.render.tree import check_paths

    artifacts = [Artifact(p, "x\n", 0o644) for p in paths]
    if message is None:
        check_paths(artifacts)
        return
    with pytest.raises(RenderError, match=re.escape(message)):
        check_paths(artifacts)


def test_gzip_is_the_same_bytes_on_every_python() -> None:
    # CPython writes the gzip header's OS byte itself, 3 on 3.11 and 3.12 and 255 on 3.9, 3.10 and 3.13: the
    # generated gzip files (user-data.gz, Karpenter's and Cluster API's gzip+base64) would differ by interpreter
    import gzip

    from migbake.render.artifact import gzip_bytes

    packed = gzip_bytes(b"MIG restore\n" * 40)
    assert packed[:10] == bytes.fromhex("1f8b08000000000002ff")  # no name, mtime 0, level 9, OS unknown
    assert gzip.decompress(packed) == b"MIG restore\n" * 40


# --- --force never deletes what migbake did not write; a system directory is never OUT -------------------

SYSTEM = ["/", "/etc", "//etc/", "/usr/", "/var", "/boot", "/home", "~", "link-to-etc"]


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("where", SYSTEM)
def test_a_system_directory_is_never_out_and_never_hints_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              where: str, force: list[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    if where == "link-to-etc":
        (tmp_path / "link-to-etc").symlink_to("/etc")
        out = str(tmp_path / "link-to-etc" / ".")  # through the link: the real folder is /etc
    else:
        out = str(home) if where == "~" else where
    before = sorted(os.listdir(out))
    result = cli("generate", str(PROFILE), "-o", out, *force)
    assert result.exit_code == 2, result.output
    assert "choose an empty or new directory" in result.stderr and "--force" not in result.stderr, result.stderr
    assert sorted(os.listdir(out)) == before  # nothing written, no temporary folder beside it either
    assert not any(n.startswith(".") and "-tmp-" in n for n in os.listdir(os.path.dirname(os.path.realpath(out))))


def test_force_replaces_migbakes_own_output_and_only_then_is_hinted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out)).exit_code == 0
    other = tmp_path / "other.yaml"
    other.write_text(PROFILE.read_text())  # another profile file: another origin
    refused = cli("generate", str(other), "-o", str(out))
    assert refused.exit_code == 2 and "pass --force to replace it" in refused.stderr, refused.output
    (out / "notes.txt").write_text("mine\n")  # the user's file: --force keeps it, the command names it
    kept = cli("generate", str(other), "-o", str(out), "--force")
    assert kept.exit_code == 2 and "(notes.txt)" in kept.stderr and (out / "notes.txt").read_text() == "mine\n"
    (out / "notes.txt").unlink()
    assert cli("generate", str(other), "-o", str(out), "--force").exit_code == 0
    recorded = read_origin(out)
    assert recorded is not None and recorded.profile.endswith("other.yaml")


# --- --check compares payloads decoded ----------------------------------------------------------------

IMAGES_BY_NAME = {i.name: i for i in IMAGES}
GZIP_BASE64 = re.compile(r"H4sI[A-Za-z0-9+/=]+")  # base64 of a gzip stream (1f 8b 08)


def _recompressed(text: str, change: tuple[str, str] | None = None) -> str:
    """``text`` with each gzip+base64 payload compressed again at level 1 (other bytes, as another zlib writes);
    ``change``: (old, new) replaced once, in the first payload that holds ``old``."""
    left = [change] if change else []

    def again(m: re.Match[str]) -> str:
        data = gzip.decompress(base64.b64decode(m.group()))
        if left and left[0][0].encode() in data:
            old, new = left.pop()
            data = data.replace(old.encode(), new.encode(), 1)
        return base64.b64encode(gzip.compress(data, compresslevel=1, mtime=0)).decode()

    return GZIP_BASE64.sub(again, text)


FULL_USER_DATA = "karpenter: {user_data: full}\n"  # the EC2NodeClass carries the restore's files, gzipped
PAYLOADS = [("h200-inference", "karpenter/ec2nodeclass.yaml", (), FULL_USER_DATA),
            ("a100-80gb-mixed", "cluster-api/kubeadm-config-template.yaml", (), ""),
            ("h200-inference", "cloud-init/user-data.gz", ("--user-data-gzip",), "")]


def _profile(tmp_path: Path, image: str, extra: str) -> str:
    """The image's profile, or a copy of it with ``extra`` keys."""
    source = IMAGES_BY_NAME[image] / "node-profile.yaml"
    if not extra:
        return str(source)
    copy = tmp_path / "node-profile.yaml"
    copy.write_text(source.read_text() + extra)
    return str(copy)


@pytest.mark.parametrize(("image", "rel", "options", "extra"), PAYLOADS, ids=[p[1].split("/")[0] for p in PAYLOADS])
def test_check_compares_payloads_decoded(tmp_path: Path, image: str, rel: str, options: tuple[str, ...],
                                         extra: str) -> None:
    """gzip output differs between zlib builds (zlib-ng's is not zlib's): a payload compressed at another level is
    the same file for --check; a changed content inside one is a difference, shown decoded."""
    profile, out = _profile(tmp_path, image, extra), tmp_path / "out"
    assert cli("generate", profile, "-o", str(out), *options).exit_code == 0
    path = out / rel
    before = path.read_bytes()

    def put(change: tuple[str, str] | None) -> None:
        if rel.endswith(".gz"):
            text = gzip.decompress(before).decode()
            data = gzip.compress((text.replace(*change, 1) if change else text).encode(), compresslevel=1, mtime=0)
        else:
            data = _recompressed(before.decode(), change).encode()
        assert data != before
        path.write_bytes(data)

    put(None)
    result = cli("generate", profile, "-o", str(out), "--check", *options)
    assert result.exit_code == 0, result.output

    put(("Do not edit", "Do not change"))
    result = cli("generate", profile, "-o", str(out), "--check", *options)
    assert result.exit_code == 1 and "is stale" in result.stderr, result.output
    removed = [line for line in result.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in result.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(removed) == len(added) == 1, result.stdout  # the one changed line, decoded: no base64 in the diff
    assert "H4sI" not in result.stdout
    assert removed[0].endswith("# Do not change: change the profile and run `migbake generate`.")
    assert added[0].endswith("# Do not edit: change the profile and run `migbake generate`.")


def test_readable_decodes_every_payload_in_place(tmp_path: Path) -> None:
    """Each kind of payload a generated file carries reads decoded; a file without one reads as it is."""
    generated = IMAGES_BY_NAME["h200-inference"] / "generated"
    full = tmp_path / "full"
    assert cli("generate", _profile(tmp_path, "h200-inference", FULL_USER_DATA), "-o", str(full)).exit_code == 0
    nodeclass = (full / "karpenter/ec2nodeclass.yaml").read_bytes()
    karpenter = payloads.readable("karpenter/ec2nodeclass.yaml", nodeclass)
    assert karpenter is not None and "H4sI" not in karpenter and "boundary=(not compared)" in karpenter
    assert "| mig-devices:" in karpenter.replace("|     ", "| ")
    ign = payloads.readable("butane/fcos.ign", (generated / "butane/fcos.ign").read_bytes())
    assert ign is not None and "\"data:" not in ign and "[data: URL, decoded]" in ign
    script = (generated / "scripts/verify-mig-restore.sh").read_bytes()
    assert payloads.readable("scripts/verify-mig-restore.sh", script) == script.decode()
    assert payloads.readable("x.gz", gzip.compress(b"a\n")) == "[gzip, inflated]\na\n"
    assert payloads.readable("x.bin", b"\xff\xfe") is None
