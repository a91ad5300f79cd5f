"""Output semantics a hostile neighbour, file or name cannot bend.

OUT is judged at the swap (a folder made while the tree was built is not replaced, --force included); a
file the marker does not list is never deleted, --force included; an empty marker proves nothing;
``--user-data-mime``'s TYPE is a MIME subtype; a capture with duplicate or missing GPU indices is not a
ready node; ``import`` refuses a config name mig-parted's YAML reads as a boolean or number (checked
with NVIDIA's real nvidia-mig-parted); echoed values and file names cannot break a line or the terminal.
"""

from __future__ import annotations

import email
import os
import re
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support import H200_EXPORT, IMAGES, REPO, SHARED, cli, shared_file
from test_write import leftovers, snapshot

from migbake.problems import OutputError
from migbake.render import write
from migbake.render.tree import render
from migbake.render.write import OUTPUT_MARKER, Origin, write_tree
from migbake.rules.validate import check_file

PROFILE = IMAGES[0] / "node-profile.yaml"
MIG_PARTED = SHARED / "tools/nvidia-mig-parted/nvidia-mig-parted"


def _artifacts() -> list[write.Artifact]:
    checked = check_file(PROFILE)
    assert checked.profile is not None
    return render(checked.profile)


# --- OUT is judged at the swap -----------------------------------------------------------------------

def _foreign_folder(out: Path) -> None:
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")


def _empty_marker(out: Path) -> None:
    _foreign_folder(out)
    (out / OUTPUT_MARKER).write_text("")


def _garbage_marker(out: Path) -> None:
    _foreign_folder(out)
    (out / OUTPUT_MARKER).write_text("x\n")


def _ours_plus_a_file(out: Path) -> None:
    write_tree(_artifacts(), out)
    (out / "scripts/mine.sh").write_text("echo mine\n")


def _a_link(out: Path) -> None:
    (out.parent / "elsewhere").mkdir()
    out.symlink_to(out.parent / "elsewhere")


def _a_file(out: Path) -> None:
    out.write_text("a file\n")


MEANWHILE: dict[str, Callable[[Path], None]] = {
    "foreign-folder": _foreign_folder, "empty-marker": _empty_marker, "garbage-marker": _garbage_marker,
    "unlisted-file": _ours_plus_a_file, "symlink": _a_link, "file": _a_file}


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "plain-rename"])
@pytest.mark.parametrize("made", MEANWHILE.values(), ids=MEANWHILE.keys())
def test_a_folder_made_while_the_tree_is_built_is_not_replaced(
        made: Callable[[Path], None], renameat2: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    real_build = write._build

    def build_then_race(tmp: Path, artifacts: list[write.Artifact]) -> None:
        real_build(tmp, artifacts)
        monkeypatch.setattr(write, "_build", real_build)  # the other process writes with migbake, maybe
        made(out)  # another process, between the early check and the swap

    monkeypatch.setattr(write, "_build", build_then_race)
    if not renameat2:
        monkeypatch.setattr(write, "_exchange", lambda a, b: False)
        monkeypatch.setattr(write, "_rename_noreplace", lambda a, b: False)
    with pytest.raises(OutputError) as refused:
        write_tree(_artifacts(), out, origin=Origin.of(str(PROFILE), out, "h200-inference", "x"))
    assert str(out) in str(refused.value)
    monkeypatch.setattr(write, "_build", real_build)
    after = snapshot(out) if out.is_dir() and not out.is_symlink() else None
    assert leftovers(tmp_path, out) == []
    if made is _ours_plus_a_file:
        assert (out / "scripts/mine.sh").read_text() == "echo mine\n" and after is not None
    elif made in (_foreign_folder, _empty_marker, _garbage_marker):
        assert (out / "notes.txt").read_text() == "mine\n"
    elif made is _a_link:
        assert out.is_symlink() and list((tmp_path / "elsewhere").iterdir()) == []
    else:
        assert out.read_text() == "a file\n"


@pytest.mark.parametrize("made", [_foreign_folder, _ours_plus_a_file], ids=["foreign-folder", "unlisted-file"])
def test_force_never_replaces_a_folder_made_meanwhile(made: Callable[[Path], None], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    real_build = write._build

    def build_then_race(tmp: Path, artifacts: list[write.Artifact]) -> None:
        real_build(tmp, artifacts)
        monkeypatch.setattr(write, "_build", real_build)
        made(out)

    monkeypatch.setattr(write, "_build", build_then_race)
    with pytest.raises(OutputError, match="--force included"):
        write_tree(_artifacts(), out, force=True)
    assert (out / "notes.txt").exists() or (out / "scripts/mine.sh").exists()  # put back, untouched
    assert leftovers(tmp_path, out) == []


# --- the marker's list -------------------------------------------------------------------------------

UNLISTED = {"a-file": "scripts/mine.sh", "a-top-file": "README.local", "a-deep-file": "rootfs/etc/x/y.conf",
            "a-link": "cloud-init/link"}


@pytest.mark.parametrize("rel", UNLISTED.values(), ids=UNLISTED.keys())
def test_a_file_the_marker_does_not_list_is_never_deleted(rel: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 0
    extra = out / rel
    extra.parent.mkdir(parents=True, exist_ok=True)
    if rel.endswith("link"):
        extra.symlink_to("/etc/passwd")
    else:
        extra.write_text("mine\n")
    before = snapshot(out)
    code, _, err = cli("generate", str(PROFILE), "-o", str(out))
    assert code == 2 and f"holds files migbake did not write there ({rel})" in err, err
    assert snapshot(out) == before and leftovers(tmp_path, out) == []
    code, _, err = cli("generate", str(PROFILE), "-o", str(out), "--force")  # --force keeps it too
    assert code == 2 and f"({rel})" in err and "pass --force" not in err, err
    assert snapshot(out) == before and leftovers(tmp_path, out) == []


def test_the_marker_lists_every_file_and_an_older_marker_still_lets_migbake_replace_its_own(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 0
    marker = (out / OUTPUT_MARKER).read_text()
    listed = marker.split("\nfiles:\n", 1)[1].splitlines()
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != OUTPUT_MARKER)
    assert [line[2:] for line in listed] == files
    (out / OUTPUT_MARKER).write_text(marker.split("files:\n", 1)[0])  # as migbake before the list wrote it
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 0  # same paths: replaced as before
    (out / OUTPUT_MARKER).write_text(marker.split("files:\n", 1)[0])
    (out / "scripts/mine.sh").write_text("mine\n")  # not a path migbake writes: kept without --force
    assert cli("generate", str(PROFILE), "-o", str(out))[0] == 2 and (out / "scripts/mine.sh").exists()


# --- --user-data-mime FILE:TYPE ----------------------------------------------------------------------

BAD_TYPES = {"crlf-header": "x-shellscript\r\nX-Injected: 1", "lf": "x-shellscript\nX: 1", "space": "x shellscript",
             "parameter": "x-shellscript; charset=evil", "two-slashes": "text/x/shellscript",
             "empty-subtype": "application/", "media-type-parameter": "application/node.eks.aws; x=y",
             "non-ascii": "x-shéll", "bidi": "x-\u202eshell", "too-long": "x" * 128, "starts-with-dash": "-x",
             "quote": 'x"y', "nul": "x\x00y"}


@pytest.mark.parametrize("kind", BAD_TYPES.values(), ids=BAD_TYPES.keys())
def test_user_data_mime_type_must_be_a_mime_subtype(kind: str, tmp_path: Path) -> None:
    part = tmp_path / "part"
    part.write_text("echo mine\n")
    code, out, err = cli("generate", str(PROFILE), "-o", str(tmp_path / "out"), "--user-data-mime", f"{part}:{kind}")
    assert code == 2 and "--user-data-mime" in err and "Traceback" not in out + err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ['my"part.sh', "my\npart.sh", "my\\part.sh", "my\x85part.sh"],
                         ids=["quote", "newline", "backslash", "c1"])
def test_a_part_file_name_cannot_add_a_header(name: str, tmp_path: Path) -> None:
    part = tmp_path / name
    part.write_text("#!/bin/sh\necho mine\n")
    code, _, err = cli("generate", str(PROFILE), "-o", str(tmp_path / "out"), "--user-data-mime", str(part))
    assert code == 2 and ("cannot be a part's filename" in err or "holds a control character" in err), err
    assert not (tmp_path / "out").exists()


def test_a_valid_type_is_the_part_s_content_type(tmp_path: Path) -> None:
    part = tmp_path / "part"
    part.write_text("echo mine\n")
    out = tmp_path / "out"
    assert cli("generate", str(PROFILE), "-o", str(out), "--user-data-mime", f"{part}:x-shellscript")[0] == 0
    message = email.message_from_bytes((out / "cloud-init/user-data.mime").read_bytes())
    parts = message.get_payload()
    assert isinstance(parts, list)
    assert [p.get_content_type() for p in parts] == ["text/x-shellscript", "text/cloud-config"]


# --- preflight: one node's GPU indices ---------------------------------------------------------------

INDICES = {"duplicate": [0, 0], "gap": [0, 2], "not-from-0": [1, 2], "duplicate-of-three": [0, 1, 1],
           "reversed-gap": [3, 0]}


def _csv(indices: list[int]) -> str:
    return "".join(f"{i}, NVIDIA H200, 0x233510DE, Disabled\n" for i in indices)


@pytest.mark.parametrize("indices", INDICES.values(), ids=INDICES.keys())
def test_duplicate_or_missing_gpu_indices_are_not_a_ready_node(indices: list[int], tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("version: 1\nname: p\ngpus:\n  - model: h200\n    mig: {layout: {1g.18gb: 7}}\n")
    capture = tmp_path / "q.csv"
    capture.write_text(_csv(indices))
    code, out, _ = cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))
    assert code == 1, out
    row = next(line for line in out.splitlines() if line.startswith("gpu-count"))
    assert "FAIL" in row and "not 0.." in row and "not one node's nvidia-smi output" in row, row
    capture.write_text(_csv(list(range(len(indices)))))  # the same count, numbered as nvidia-smi does
    assert cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))[0] == 0


# --- import: config names mig-parted's YAML does not read as names -----------------------------------

CONFIG = "version: v1\nmig-configs:\n  {key}:\n    - devices: all\n      mig-enabled: false\n"
NOT_NAMES = ["y", "Y", "n", "N", "yes", "No", "on", "ON", "off", "Off", "False", "null", "1e3", "1E3", "017", "0x1F",
             "0o17", "0b101", "1_000", "00"]


def _mig_parted_selects(config: Path, name: str) -> bool:
    ran = subprocess.run([str(shared_file(MIG_PARTED)), "assert", "--valid-config", "-f", str(config), "-c", name],
                         capture_output=True, text=True, timeout=60, check=False)
    return ran.returncode == 0


@pytest.mark.parametrize("name", NOT_NAMES)
def test_import_refuses_a_config_name_mig_parted_reads_as_no_name(name: str, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG.format(key=name))
    assert not _mig_parted_selects(config, name), f"NVIDIA's mig-parted selects {name!r}: the refusal is wrong"
    code, out, err = cli("import", str(config), "--model", "h200")
    assert code == 1 and out == "", err
    assert re.search(r"\[(import-config-name|yaml-key-type)\]", err) and f"'{name}'" in err, err
    quoted = tmp_path / "q.yaml"
    quoted.write_text(CONFIG.format(key=f"'{name}'"))  # quoted, it is the name, for mig-parted and migbake
    assert _mig_parted_selects(quoted, name)
    code, out, err = cli("import", str(quoted), "--model", "h200")
    assert (code == 0 and f"config_name: '{name}'" in out) or f"config_name: {name}" in out, out + err


def test_import_keeps_plain_names_mig_parted_selects(tmp_path: Path) -> None:
    for name in ("all-1g.18gb", "custom-config", "a100x7", "yes-please", "n1"):
        config = tmp_path / "c.yaml"
        config.write_text(CONFIG.format(key=name))
        assert _mig_parted_selects(config, name), name
        assert cli("import", str(config), "--model", "h200")[0] == 0, name


# --- text output: escaped values, one line per problem -----------------------------------------------

HOSTILE_NAMES = {"newline": "bad\nname.yaml", "carriage-return": "bad\rname.yaml",
                 "bidi-override": "bad\u202eeman.yaml", "bidi-isolate": "bad\u2066x.yaml", "lrm": "bad\u200ex.yaml",
                 "c1-csi": "bad\x9b31mx.yaml",
                 "nel": "bad\x85x.yaml", "escape": "bad\x1b[31mx.yaml"}
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_hostile_file_name_stays_one_escaped_line(name: str, tmp_path: Path) -> None:
    bad = tmp_path / name
    bad.write_text("version: 1\nname: x\ngpus: []\n")
    for command in (["validate", str(bad)], ["show", str(bad)], ["show", str(tmp_path / ("missing-" + name))]):
        code, out, err = cli(*command)
        assert code in (1, 2) and not _RAW.search(out + err), (command, out + err)
        problem_lines = [line for line in (out + err).splitlines() if ":1:1: " in line or ":3:7: " in line]
        assert len(problem_lines) == 1 and problem_lines[0].startswith(str(tmp_path)), out + err


@pytest.mark.parametrize("value", ["\u202e", "\u2067", "\x85", "\x9b", "\u200f"],
                         ids=["rlo", "rli", "nel", "csi", "rlm"])
def test_echoed_values_are_escaped(value: str, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(f'version: 1\nname: "x{value}y"\ngpus: []\n"k{value}": 1\n', encoding="utf-8")
    code, out, err = cli("validate", str(profile))
    assert code == 1 and not _RAW.search(out + err), out + err
    if value not in "\x85\x9b":  # YAML itself refuses those two (a line break, a control character)
        assert repr(value)[1:-1] in out  # said, as its escape
    capture = tmp_path / f"q{value}.csv"
    capture.write_text(_csv([0]))
    code, out, err = cli("preflight", str(PROFILE), "--nvidia-smi-csv", str(capture))
    assert not _RAW.search(out + err), out + err


def test_the_process_reports_the_same_escapes(tmp_path: Path) -> None:
    bad = tmp_path / "a\nb\u202e.yaml"
    ran = subprocess.run([sys.executable, "-m", "migbake", "show", str(bad)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "generator")}, check=False)
    assert ran.returncode == 2 and len(ran.stderr.splitlines()) == 2, ran.stderr  # the problem, then the verdict
    assert "a\\nb\\u202e.yaml:1:1: error: /: cannot read the file" in ran.stderr


# --- one file with -o (export, import --force): a device stays a device, a link is never replaced -------
# both commands renamed a temporary file over the path, so `-o /dev/null` (as root) made the
# host's /dev/null a regular file. The device here is made in tmp_path (mknod, as root), never /dev/null.

def _writers(tmp_path: Path) -> dict[str, list[str]]:
    return {"export": ["export", str(PROFILE)], "export-gpu-operator": ["export", "--gpu-operator", str(PROFILE)],
            "import": ["import", str(H200_EXPORT), "--model", "h200", "--force"]}


def _char_device(path: Path) -> None:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD)")


@pytest.mark.parametrize("command", ["export", "export-gpu-operator", "import"])
@pytest.mark.parametrize("via_link", [False, True], ids=["device", "link-to-device"])
def test_o_writes_into_a_character_device_and_leaves_it_a_device(command: str, via_link: bool,
                                                                   tmp_path: Path) -> None:
    args = _writers(tmp_path)[command]
    device = tmp_path / "null"
    _char_device(device)
    target = device
    if via_link:
        target = tmp_path / "stdout"
        target.symlink_to(device)
    code, _, err = cli(*args, "-o", str(target))
    assert code == 0, err
    assert stat.S_ISCHR(device.lstat().st_mode) and device.lstat().st_rdev == os.makedev(1, 3)
    assert not via_link or target.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name or "atomic" in p.name] == []


@pytest.mark.parametrize("command", ["export", "import"])
def test_o_writes_into_a_fifo_and_the_reader_gets_the_text(command: str, tmp_path: Path) -> None:
    args = _writers(tmp_path)[command]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.link(fifo, tmp_path / "pipe.kept")  # the FIFO itself, should the path be replaced
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = cli(*args, "-o", str(fifo))
    reader.join(10)
    if reader.is_alive():  # a file was renamed over the FIFO (the old code): release the waiting reader
        with open(tmp_path / "pipe.kept", "wb"):
            pass
        reader.join(10)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO was replaced"
    assert got and b" by migbake " in got[0]


def _link_to_file(path: Path) -> Path:
    (path.parent / "real.yaml").write_text("mine\n")
    path.symlink_to(path.parent / "real.yaml")
    return path.parent / "real.yaml"


def _dangling_link(path: Path) -> Path:
    path.symlink_to(path.parent / "nowhere.yaml")
    return path


def _socket(path: Path) -> Path:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()
    return path


REFUSED = {"link-to-file": (_link_to_file, "is a symbolic link to a regular file"),
           "dangling-link": (_dangling_link, "is a symbolic link to nothing that exists"),
           "socket": (_socket, "is a socket")}


@pytest.mark.parametrize("command", ["export", "import"])
@pytest.mark.parametrize("case", REFUSED, ids=REFUSED)
def test_o_refuses_a_link_to_a_file_a_dangling_link_and_a_socket(command: str, case: str, tmp_path: Path) -> None:
    args = _writers(tmp_path)[command]
    make, said = REFUSED[case]
    path = tmp_path / "out.yaml"
    kept = make(path)
    before = sorted((p.name, p.lstat().st_mode) for p in tmp_path.iterdir())
    code, _, err = cli(*args, "-o", str(path))
    assert code == 2 and said in err and len(err.splitlines()) == 1, err
    assert sorted((p.name, p.lstat().st_mode) for p in tmp_path.iterdir()) == before  # nothing replaced or left
    if kept.name == "real.yaml":
        assert kept.read_text() == "mine\n"


def test_o_replaces_a_regular_file_atomically_and_keeps_its_mode(tmp_path: Path) -> None:
    args = _writers(tmp_path)["import"]
    out = tmp_path / "profile.yaml"
    out.write_text("old\n")
    out.chmod(0o640)
    assert cli(*args[:-1], "-o", str(out))[0] == 2 and out.read_text() == "old\n"  # without --force
    code, _, err = cli(*args, "-o", str(out))
    assert code == 0 and err.endswith(f"wrote {out}\n"), err
    assert out.read_text().startswith("# ") and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]


def test_an_imported_file_s_name_stays_in_its_comment_line(tmp_path: Path) -> None:
    """A header assembled from pieces: `import`'s first comment line names the source file; a name
    with a line break added `kubelet: {present: false}` to the imported profile."""
    source = tmp_path / "x\nkubelet: {present: false}\n#.yaml"
    source.write_bytes(H200_EXPORT.read_bytes())
    code, out, err = cli("import", str(source), "--model", "h200")
    assert code == 0, err
    comments = [row for row in out.splitlines() if row.startswith("#")]
    assert comments[0].startswith("# Imported by migbake") and "x\\nkubelet: {present: false}\\n#.yaml" in comments[0]
    assert "kubelet" not in yaml.safe_load(out)


# a folder name with a line break forged a "wrote N files to ..." line; every path echoed by a
# command's own words goes through one escaping helper (commands.common.say -> exits.printable)
FORGED = "x\nwrote 99 files to etc (profile p from q)"


def _no_forged_line(out: str) -> None:
    assert not any(row.startswith("wrote 99 files") for row in out.splitlines()), out
    assert "x\\nwrote 99 files" in out, out


def test_a_path_with_a_line_break_cannot_forge_a_line_of_output(tmp_path: Path) -> None:
    image = tmp_path / "images" / FORGED
    image.mkdir(parents=True)
    (image / "node-profile.yaml").write_bytes(PROFILE.read_bytes())
    code, out, err = cli("images", str(tmp_path / "images"))
    assert code == 0, err
    _no_forged_line(out)
    code, out, err = cli("images", "--check", str(tmp_path / "images"))
    assert code == 0, err
    _no_forged_line(out)
    (image / "generated" / "scripts" / "preflight-mig-restore.sh").unlink()
    (image / "generated" / "scripts" / FORGED).write_text("x\n")
    code, out, err = cli("images", "--check", str(tmp_path / "images"))
    assert code == 1
    _no_forged_line(out + err)
    code, out, err = cli("generate", str(PROFILE), "-o", str(tmp_path / FORGED))
    assert code == 0, err
    _no_forged_line(out)
    code, out, err = cli("generate", str(PROFILE), "-o", str(tmp_path / FORGED), "--check")
    assert code == 0, err
    _no_forged_line(out)
    code, out, err = cli("export", str(PROFILE), "-o", str(tmp_path / (FORGED + ".yaml")))
    assert code == 0, err
    assert err == f"wrote {tmp_path}/x\\nwrote 99 files to etc (profile p from q).yaml\n"
    code, out, err = cli("bake", str(PROFILE), "-o", str(tmp_path / FORGED), "--only", "null.ssh", "--var",
                         "ssh_host=x", "--dry-run", "--force", "--packer", "/nonexistent")
    assert code == 0, err
    _no_forged_line(out)
