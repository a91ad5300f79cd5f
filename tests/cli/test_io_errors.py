"""Every failure is one clear line with the documented exit code, never exit 3 or a traceback.

Hostile inputs against the process itself: its standard streams closed or full, a profile it may not read,
an output directory it cannot write (no permission, a read-only or full filesystem, a name too long),
SIGTERM in the middle of a write, and captures, node JSON and user-data parts that are malformed or
endless. Each runs the real command in a real process (``python -m migbake``, the console path with the
click-free ``validate``); the permission cases drop root's capabilities with ``setpriv`` and the filesystem
cases mount a tmpfs in a private mount namespace (``unshare -m``): as root in CI, both must work, or fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import IMAGES, REPO, migbake_shell

PROFILE = IMAGES[0] / "node-profile.yaml"
NODE_FIXTURE = REPO / "tests/fixtures/kubectl-node/no-operator.json"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "generator"), "NO_COLOR": "1"}
# root without the capabilities that bypass file permissions: a real "user who may not read it"
AS_USER = "setpriv --bounding-set=-dac_override,-dac_read_search --inh-caps=-dac_override,-dac_read_search"


def sh(command: str, cwd: Path, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, ``migbake`` being this checkout's."""
    return subprocess.run(["bash", "-c", migbake_shell(command)], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=timeout, check=False)


def one_line(ran: subprocess.CompletedProcess[str], code: int, *parts: str) -> str:
    """Assert exit ``code`` and exactly one line on stderr that holds every one of ``parts``."""
    assert ran.returncode == code, (ran.returncode, ran.stdout[-500:], ran.stderr)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


# --- the standard streams ----------------------------------------------------------------------------

PRINTERS = {
    "validate": f"validate {PROFILE}",  # the click-free fast path
    "validate-json": f"validate --format json {PROFILE}",
    "gpus": "gpus",
    "layouts": "layouts h200",
    "layouts-json": "layouts h200 --json",
    "show": f"show {PROFILE}",
    "export": f"export {PROFILE}",
}


@pytest.mark.parametrize("args", PRINTERS.values(), ids=PRINTERS.keys())
def test_closed_stdout_is_one_line_and_exit_2(args: str, tmp_path: Path) -> None:
    one_line(sh(f"migbake {args} >&-", tmp_path), 2, "migbake: error: standard output is closed")


@pytest.mark.parametrize("args", PRINTERS.values(), ids=PRINTERS.keys())
def test_full_stdout_is_one_line_and_exit_2(args: str, tmp_path: Path) -> None:
    one_line(sh(f"migbake {args} >/dev/full", tmp_path), 2,
             "migbake: error: cannot write to standard output: No space left on device")


READERS = {
    "validate": "validate -", "show": "show -", "export": "export -", "generate": "generate - -o out",
    "preflight": "preflight - --nvidia-smi-csv /dev/null",
    "import": "import - --model h200",
}


@pytest.mark.parametrize("args", READERS.values(), ids=READERS.keys())
def test_closed_stdin_is_one_line_and_exit_2(args: str, tmp_path: Path) -> None:
    one_line(sh(f"migbake {args} <&-", tmp_path), 2, "standard input is closed")
    assert not (tmp_path / "out").exists()


# --- a profile that cannot be read -----------------------------------------------------------------

def _as_user_works(tmp: Path) -> None:
    """setpriv must really take the permission bypass away (or the test proves nothing): fail, never skip."""
    probe = tmp / "probe"
    probe.mkdir()
    probe.chmod(0)
    ran = subprocess.run(["bash", "-c", f"{AS_USER} ls {probe}"], capture_output=True, text=True, check=False)
    probe.chmod(0o700)
    if ran.returncode == 0:
        pytest.fail("setpriv did not drop CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: the permission cases cannot run")


LOCKED_PROFILE = {
    "validate": ("validate locked/node-profile.yaml", "locked/node-profile.yaml:1:1: error: /: cannot read the "
                 "file: Permission denied [unreadable]"),
    "validate-json": ("validate --format json locked/node-profile.yaml", None),
    "show": ("show locked/node-profile.yaml", "locked/node-profile.yaml:1:1: error: /: cannot read the file: "
             "Permission denied [unreadable]"),
    "generate": ("generate locked/node-profile.yaml -o out", "cannot read the file: Permission denied"),
    "validate-folder": ("validate locked", "locked/node-profile.yaml:1:1: error: /: cannot read the file: "
                        "Permission denied [unreadable]"),
    "validate-unlistable-folder": ("validate locked",
                                   "migbake: error: locked: cannot read this directory: Permission denied"),
}


@pytest.mark.parametrize(("args", "said"), LOCKED_PROFILE.values(), ids=LOCKED_PROFILE.keys())
def test_a_profile_in_a_folder_the_user_may_not_search_is_exit_2(args: str, said: str | None,
                                                                 tmp_path: Path) -> None:
    _as_user_works(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "node-profile.yaml").write_text(PROFILE.read_text())
    # listable by its owner, but not searchable: the file inside cannot be opened (or not even listable)
    locked.chmod(0 if said and "this directory" in said else 0o600)
    ran = sh(f"{AS_USER} migbake {args}", tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stdout + ran.stderr, ran
    if said:
        assert said in ran.stdout + ran.stderr, ran
    else:
        assert '"rule": "unreadable"' in ran.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["validate {p}", "show {p}", "export {p}", "generate {p} -o out",
                                     "preflight {p} --nvidia-smi-csv /dev/null"])
def test_a_missing_profile_is_exit_2(command: str, tmp_path: Path) -> None:
    ran = sh("migbake " + command.format(p="missing.yaml"), tmp_path)
    assert ran.returncode == 2 and "missing.yaml:1:1: error: /: cannot read the file: No such file" in ran.stdout + \
        ran.stderr, ran


@pytest.mark.parametrize("command", ["validate ''", "validate --format json ''", "show ''", "export ''",
                                     f"generate {PROFILE} -o ''", "generate '' -o out"])
def test_an_empty_path_is_a_usage_error_not_the_current_folder(command: str, tmp_path: Path) -> None:
    (tmp_path / "node-profile.yaml").write_text("version: 1\nname: x\ngpus: []\n")  # invalid: exit 1 if read
    ran = sh("migbake " + command, tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran
    assert "empty" in ran.stderr and "node-profile.yaml" not in ran.stdout, ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node-profile.yaml"]


# --- an output directory that cannot be written ----------------------------------------------------

def _in_tmpfs(tmp: Path, options: str, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a private mount namespace where ``tmp/mnt`` is a fresh tmpfs mounted with ``options``."""
    (tmp / "mnt").mkdir()
    inner = migbake_shell(f"mount -t tmpfs -o {options} tmpfs mnt && {script}")
    ran = subprocess.run(["unshare", "-m", "bash", "-c", inner], cwd=tmp, env=ENV, capture_output=True, text=True,
                         timeout=120, check=False)
    if "mount:" in ran.stderr or "unshare:" in ran.stderr:
        pytest.fail(f"cannot mount a tmpfs in a private namespace (run the tests as root): {ran.stderr}")
    return ran


def _report(out: str) -> str:
    """Shell lines that print the state of OUT after a run: its files' checksum and what is beside it."""
    return (f"; echo rc=$?; (cd {out} && find . -type f | sort | xargs md5sum | md5sum); ls -a $(dirname {out})")


def test_a_read_only_filesystem_is_exit_2_and_the_old_output_intact(tmp_path: Path) -> None:
    changed = tmp_path / "changed.yaml"
    changed.write_text(PROFILE.read_text())  # another path: another marker, so another tree
    ran = _in_tmpfs(tmp_path, "size=4m", f"migbake generate {PROFILE} -o mnt/out >/dev/null; "
                    f"(cd mnt/out && find . -type f | sort | xargs md5sum | md5sum); mount -o remount,ro mnt; "
                    f"migbake generate {changed} -o mnt/out --force" + _report("mnt/out"))
    before, *rest = ran.stdout.splitlines()
    assert "rc=2" in rest and rest[1] == before, ran.stdout  # exit 2, the old tree byte for byte
    assert ran.stderr.strip().endswith("cannot write " + str(tmp_path / "mnt/out") + ": Read-only file system"), ran
    assert ".out.tmp-" not in ran.stdout


def test_a_full_filesystem_is_exit_2_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    changed = tmp_path / "changed.yaml"
    changed.write_text(PROFILE.read_text())  # another path: another marker, so another tree
    # room for one tree on tmpfs (whole 4 KiB pages per file) but not for a second one beside it
    probe = tmp_path / "probe"
    sh(f"migbake generate {PROFILE} -o {probe} >/dev/null", tmp_path)
    pages = sum(-(-p.stat().st_size // 4096) or 1 for p in probe.rglob("*") if p.is_file())
    size = f"size={pages * 4 * 7 // 5}k"
    ran = _in_tmpfs(tmp_path, size, f"migbake generate {PROFILE} -o mnt/out >/dev/null; "
                    f"(cd mnt/out && find . -type f | sort | xargs md5sum | md5sum); "
                    f"migbake generate {changed} -o mnt/out --force" + _report("mnt/out"))
    before, *rest = ran.stdout.splitlines()
    assert "rc=2" in rest and rest[1] == before, ran.stdout
    assert ran.stderr.strip().endswith(": No space left on device"), ran.stderr
    assert "migbake: error: cannot write " in ran.stderr and "Traceback" not in ran.stderr
    assert [line for line in rest[2:] if ".tmp-" in line or ".old-" in line] == [], ran.stdout


def test_an_output_folder_the_user_may_not_write_is_exit_2(tmp_path: Path) -> None:
    _as_user_works(tmp_path)
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    line = one_line(sh(f"{AS_USER} migbake generate {PROFILE} -o ro/out", tmp_path), 2,
                    f"migbake: error: cannot write {parent / 'out'}: Permission denied")
    assert line
    assert list(parent.iterdir()) == []


def test_a_long_output_name_gets_a_temporary_name_that_fits(tmp_path: Path) -> None:
    ran = sh(f"migbake generate {PROFILE} -o {'o' * 250}", tmp_path)  # its temporary name would be 266 bytes
    assert ran.returncode == 0, ran.stderr
    assert leftovers(tmp_path) == [] and (tmp_path / ("o" * 250) / "cloud-init/user-data").is_file()
    one_line(sh(f"migbake generate {PROFILE} -o {'o' * 256}", tmp_path), 2, "File name too long")
    assert leftovers(tmp_path) == []


SIGTERM_HARNESS = """
import os, signal, sys
from migbake.render import write
real, calls = os.chmod, [0]
def chmod(*args, **kwargs):  # the fifth file of the tree: SIGTERM arrives from outside, mid-write
    calls[0] += 1
    if calls[0] == 5:
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
write.os.chmod = chmod
from migbake.cli.group import main
main(sys.argv[1:], prog_name="migbake")
"""


@pytest.mark.parametrize("existing", [True, False], ids=["replace", "new"])
def test_sigterm_mid_write_leaves_the_old_output_and_no_temporary_folder(existing: bool, tmp_path: Path) -> None:
    out = tmp_path / "out"
    if existing:
        assert sh(f"migbake generate {PROFILE} -o out", tmp_path).returncode == 0
        (out / "cloud-init/user-data").write_text("the old tree\n")
    ran = subprocess.run([sys.executable, "-c", SIGTERM_HARNESS, "generate", str(PROFILE), "-o", str(out),
                          "--force"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == -15, ran  # killed by SIGTERM, as its default would, after the cleanup
    assert ran.stderr == "migbake: terminated (SIGTERM)\n"
    assert leftovers(tmp_path) == []
    if existing:
        assert (out / "cloud-init/user-data").read_text() == "the old tree\n"
    else:
        assert not out.exists()


# --- captures, node JSON, user files ---------------------------------------------------------------

CSV_INDICES = {"superscript": "²", "arabic-indic": "٣", "5000-digits": "9" * 5000, "negative": "-1", "hex": "0x1",
               "fullwidth": "\uff11"}


@pytest.mark.parametrize("index", CSV_INDICES.values(), ids=CSV_INDICES.keys())
def test_a_capture_with_an_odd_gpu_index_is_one_line_and_exit_2(index: str, tmp_path: Path) -> None:
    (tmp_path / "q.csv").write_text(f"{index}, NVIDIA H200, 0x233510DE, Disabled\n")
    one_line(sh(f"migbake preflight {PROFILE} --nvidia-smi-csv q.csv", tmp_path), 2, "migbake: error: q.csv: ")


@pytest.mark.parametrize("encoding", ["x-unknown", "utf-13", "ebcdic-nonsense"])
def test_an_unknown_xml_encoding_is_one_line_and_exit_2(encoding: str, tmp_path: Path) -> None:
    (tmp_path / "q.xml").write_text(f'<?xml version="1.0" encoding="{encoding}"?>\n<nvidia_smi_log/>\n')
    for command in (f"preflight {PROFILE} --nvidia-smi-xml q.xml",
                    f"import {REPO / 'tests/fixtures/h200/mig-parted-export.yaml'} --nvidia-smi-xml q.xml"):
        one_line(sh(f"migbake {command}", tmp_path), 2, "q.xml: ", encoding)


NODE_JSON = {"arrays-100000-deep": "[" * 100_000 + "]" * 100_000,
             "objects-100000-deep": '{"a":' * 100_000 + "1" + "}" * 100_000,
             "5000-digit-number": '{"kind": "Node", "n": ' + "9" * 5000 + "}"}


@pytest.mark.parametrize("text", NODE_JSON.values(), ids=NODE_JSON.keys())
def test_a_hostile_node_json_is_one_line_and_exit_2(text: str, tmp_path: Path) -> None:
    (tmp_path / "node.json").write_text(text)
    one_line(sh(f"migbake preflight {PROFILE} --node-json node.json", tmp_path), 2, "migbake: error: node.json: ")


# a Node whose metadata (or labels, or a label) has another type was exit 3 (AttributeError)
NODE_SHAPES = {"metadata-null": ("null", "/metadata: null, not an object"),
               "metadata-list": ("[]", "/metadata: a list, not an object"),
               "metadata-string": ('"x"', "/metadata: a string, not an object"),
               "labels-list": ('{"labels": ["a"]}', "/metadata/labels: a list, not an object"),
               "label-number": ('{"labels": {"a/b": 1}}', "/metadata/labels/a~1b: a number, not a string")}


@pytest.mark.parametrize("case", NODE_SHAPES, ids=NODE_SHAPES)
def test_a_node_of_the_wrong_shape_names_the_pointer_and_is_exit_2(case: str, tmp_path: Path) -> None:
    metadata, said = NODE_SHAPES[case]
    (tmp_path / "node.json").write_text(f'{{"kind": "Node", "metadata": {metadata}}}')
    one_line(sh(f"migbake preflight {PROFILE} --node-json node.json", tmp_path), 2, f"node.json: {said}")


# --cluster-policy had no depth bound (RecursionError, exit 3) and was read by PyYAML's pure-Python
# parser (a 200 KB flow sequence took minutes of CPU); it has --node-json's bounds now
POLICIES = {"json-100000-deep": ('{"kind": "ClusterPolicy", "spec": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                 "nested deeper than 64 levels"),
            "yaml-flow-100000-deep": ("kind: ClusterPolicy\nspec: " + "[" * 100_000 + "]" * 100_000 + "\n",
                                      "nested deeper than 64 levels"),
            "yaml-block-70-deep": ("kind: ClusterPolicy\nspec:\n" + "".join(" " * i + "a:\n" for i in range(1, 71)),
                                   "line 66, column 65: nested deeper than 64 levels"),
            "yaml-5000-digits": ("kind: ClusterPolicy\nspec: {n: " + "9" * 5000 + "}\n", "a number of 5000 characters"),
            "spec-null": ('{"kind": "ClusterPolicy", "spec": null}', "/spec: null, not an object"),
            "mig-manager-list": ("kind: ClusterPolicy\nspec: {migManager: []}\n", "/spec/migManager: a list")}


@pytest.mark.parametrize("case", POLICIES, ids=POLICIES)
def test_a_hostile_cluster_policy_is_one_quick_line_and_exit_2(case: str, tmp_path: Path) -> None:
    text, said = POLICIES[case]
    (tmp_path / "node.json").write_text('{"kind": "Node", "metadata": {"labels": {}}}')
    (tmp_path / "policy").write_text(text)
    ran = sh(f"migbake preflight {PROFILE} --node-json node.json --cluster-policy policy", tmp_path, timeout=30)
    one_line(ran, 2, "migbake: error: policy: ", said)


def test_a_var_file_packer_could_not_read_again_is_refused_and_a_huge_one_is_bounded(tmp_path: Path) -> None:
    bake = f"migbake bake {PROFILE} -o out --only null.ssh --var ssh_host=x --dry-run --packer /nonexistent"
    os.mkfifo(tmp_path / "fifo")
    for path in ("/dev/zero", "fifo"):  # read once by migbake, Packer would find it empty
        ran = sh(f"ulimit -v $((1024 * 1024)); {bake} --var-file {path}", tmp_path, timeout=60)
        assert ran.returncode == 2 and f"{path}: not a regular file" in ran.stderr, ran.stderr
    (tmp_path / "big.pkrvars.hcl").write_bytes(b"# x\n" * (300 * 1024))
    ran = sh(f"ulimit -v $((1024 * 1024)); {bake} --var-file big.pkrvars.hcl", tmp_path, timeout=60)
    assert ran.returncode == 2 and "big.pkrvars.hcl: larger than 1 MiB" in ran.stderr, ran.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [f"generate {PROFILE} -o out --user-data-mime /dev/zero",
                                     f"generate {PROFILE} -o out --user-data-mime /dev/zero:x-shellscript",
                                     "import /dev/zero --model h200",
                                     f"preflight {PROFILE} --node-json /dev/zero",
                                     f"preflight {PROFILE} --node-json {NODE_FIXTURE} --cluster-policy /dev/zero",
                                     f"preflight {PROFILE} --nvidia-smi-xml /dev/zero"])
def test_an_endless_file_is_refused_and_a_huge_one_read_with_a_bound(command: str, tmp_path: Path) -> None:
    # /dev/zero is no regular file: refused before any read. A sparse regular file of 2 GiB stands
    # for the endless one: 256 MiB of address space beyond the interpreter's, an unbounded read dies
    ran = sh(f"ulimit -v $((1024 * 1024)); migbake {command}", tmp_path, timeout=60)
    one_line(ran, 2, "/dev/zero: not a regular file")
    (tmp_path / "huge").touch()
    os.truncate(tmp_path / "huge", 2 * 1024 * 1024 * 1024)
    ran = sh(f"ulimit -v $((1024 * 1024)); migbake {command.replace('/dev/zero', 'huge')}", tmp_path, timeout=60)
    one_line(ran, 2, "huge: larger than ")
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


# --- what --check reads in OUT ---------------------------------------------------------------------

@pytest.mark.parametrize("command", [f"generate {PROFILE} -o out --check", "images images --check"],
                         ids=["generate", "images"])
@pytest.mark.parametrize("odd", ["fifo", "fifo-as-marker", "huge", "huge-unlisted", "unreadable"])
def test_check_reads_what_is_in_out_with_a_bound_and_never_waits(command: str, odd: str, tmp_path: Path) -> None:
    """``--check`` compares OUT with what would be written: a FIFO there (also where a generated file or
    the marker is) is a difference, never waited on; a 2 GiB sparse file is read no further than the generated
    file it stands for (one more byte says it differs), or not at all where nothing is generated; a file that
    cannot be read is one located line, exit 2."""
    if command.startswith("images"):
        shutil.copytree(IMAGES[0], tmp_path / "images" / IMAGES[0].name,
                        ignore=shutil.ignore_patterns("generated"))
        out = tmp_path / "images" / IMAGES[0].name / "generated"
        assert sh(f"migbake {command.replace(' --check', '')}", tmp_path).returncode == 0
    else:
        out = tmp_path / "out"
        assert sh(f"migbake {command.replace(' --check', '')}", tmp_path).returncode == 0
    target = {"fifo": out / "cloud-init/user-data", "fifo-as-marker": out / ".migbake-output",
              "huge": out / "cloud-init/user-data", "huge-unlisted": out / "cloud-init/huge.bin",
              "unreadable": out / "cloud-init/user-data"}[odd]
    if target.exists():
        target.unlink()
    if odd.startswith("fifo"):
        os.mkfifo(target)
    else:
        target.touch()
        os.truncate(target, 2 * 1024 * 1024 * 1024 if odd.startswith("huge") else 0)
    prefix = AS_USER + " " if odd == "unreadable" else ""
    if odd == "unreadable":
        _as_user_works(tmp_path)
        target.write_text("x")
        target.chmod(0)
    ran = sh(f"ulimit -v $((1024 * 1024)); {prefix}migbake {command}", tmp_path, timeout=60)
    assert "Traceback" not in ran.stderr and "MemoryError" not in ran.stderr, ran.stderr
    rel = target.relative_to(out).as_posix()
    if odd == "unreadable":
        one_line(ran, 2, f"{rel}: cannot read it", "Permission denied")
        return
    assert ran.returncode == 1, (ran.returncode, ran.stdout[-2000:], ran.stderr)
    said = {"fifo": f"not a regular file: {rel}", "fifo-as-marker": f"not a regular file: {rel}",
            "huge": f"{rel}: 2147483648 bytes on disk, ", "huge-unlisted": f"not generated (would be removed): {rel}"}
    assert said[odd] in ran.stdout, ran.stdout[-2000:]
