""".ci/fetch-tools: builds the real judges (NVIDIA's mig-parted, CoreOS's butane and ignition-validate, AWS's
nodeadm) from their pinned release tags into ../shared/tools. Its pins are those of ../shared/tools/*/README.md,
a tag at another commit is refused, and an installed binary is checked against SHA256SUMS (no network here)."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
import realtools
from realtools import require, run
from support import REPO, TOOLS, shared_file

SCRIPT = REPO / ".ci/fetch-tools"
TEXT = SCRIPT.read_text(encoding="utf-8")
CI_RUN_TEXT = (REPO / ".ci/run").read_text(encoding="utf-8")
PINS = dict(re.findall(r"^([A-Z_]+)=(\S+)$", TEXT, re.M))
# (tool folder under ../shared/tools, the variable prefix of its pins)
PINNED = [("nvidia-mig-parted", "MIG_PARTED"), ("butane", "BUTANE"), ("butane", "IGNITION"), ("nodeadm", "NODEADM")]


@pytest.mark.realtool
def test_fetch_tools_parses_and_is_shellcheck_clean() -> None:
    ran = realtools.bash_n(SCRIPT)
    assert ran.rc == 0, ran.text
    ran = run([require("shellcheck"), str(SCRIPT)])
    assert ran.rc == 0, ran.text


@pytest.mark.parametrize(("folder", "prefix"), PINNED, ids=[p for _, p in PINNED])
def test_each_pin_is_the_tag_and_commit_the_shared_tools_were_built_from(folder: str, prefix: str) -> None:
    readme = shared_file(TOOLS / folder / "README.md").read_text(encoding="utf-8")
    built = {(m.group(2), m.group(1), m.group(3))
             for m in re.finditer(r"tag (v[\w.]+)\s+of\s+([\w.-]+/[\w.-]+)\s+\(commit ([0-9a-f]{40})", readme)}
    assert re.fullmatch(r"[0-9a-f]{40}", PINS[f"{prefix}_COMMIT"])
    assert (PINS[f"{prefix}_REPO"], PINS[f"{prefix}_TAG"], PINS[f"{prefix}_COMMIT"]) in built, built


def test_each_reference_sha256_is_the_one_its_readme_records() -> None:
    refs = dict(re.findall(r"^\s+\[([\w./-]+)\]=([0-9a-f]{64})$", TEXT, re.M))
    assert sorted(refs) == ["butane/butane", "butane/ignition-validate", "nodeadm/nodeadm"]
    for path, sha in refs.items():
        folder, binary = path.split("/")
        readme = shared_file(TOOLS / folder / "README.md").read_text(encoding="utf-8")
        assert re.search(rf"{re.escape(binary)}\s+{sha}|sha256 {sha}", readme), path


def test_the_tests_read_the_judges_where_fetch_tools_puts_them() -> None:
    import test_butane

    assert 'dest:-$repo/../shared/tools' in TEXT
    assert realtools.MIG_PARTED == TOOLS / "nvidia-mig-parted/nvidia-mig-parted"
    assert realtools.NODEADM == TOOLS / "nodeadm/nodeadm"
    assert test_butane.TOOLS == TOOLS / "butane"
    for folder, binaries in (("nvidia-mig-parted", ["nvidia-mig-parted"]), ("butane", ["butane", "ignition-validate"]),
                             ("nodeadm", ["nodeadm"])):
        for binary in binaries:
            assert f'"$out/{binary}"' in TEXT and folder in TEXT


def _script(*args: str, base: str = "file:///nonexistent") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "MIGBAKE_FETCH_GIT_BASE": base, "HOME": "/tmp"})


def test_a_tag_at_another_commit_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "base/NVIDIA/mig-parted.git"
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", "--bare", str(bare)], check=True)
    work = tmp_path / "work"
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "LICENSE").write_text("x\n")
    for argv in (["add", "LICENSE"], ["commit", "-qm", "x"], ["tag", "v0.15.0"], ["push", "-q", str(bare), "HEAD:main",
                                                                                   "v0.15.0"]):
        subprocess.run([*git, "-C", str(work), *argv], check=True)
    ran = _script("--only", "nvidia-mig-parted", str(tmp_path / "dest"), base=f"file://{tmp_path}/base")
    assert ran.returncode == 1, ran
    assert f"not the pinned {PINS['MIG_PARTED_COMMIT']}: refusing to build it" in ran.stderr
    assert not (tmp_path / "dest").exists()


def test_an_installed_judge_is_checked_against_sha256sums(tmp_path: Path) -> None:
    binary = tmp_path / "nodeadm/nodeadm"
    binary.parent.mkdir()
    binary.write_bytes(b"#!/bin/sh\n")
    binary.chmod(0o755)
    (tmp_path / "SHA256SUMS").write_text(f"{hashlib.sha256(binary.read_bytes()).hexdigest()}  nodeadm/nodeadm\n")
    ran = _script("--only", "nodeadm", str(tmp_path))  # nothing to fetch: the base is never used
    assert ran.returncode == 0 and "matches SHA256SUMS" in ran.stderr, ran
    binary.write_bytes(b"#!/bin/sh\nexit 0\n")
    ran = _script("--only", "nodeadm", str(tmp_path))
    assert ran.returncode == 1 and "does not match" in ran.stderr and "--force" in ran.stderr, ran


@pytest.mark.parametrize(("args", "message"), [(["--only", "packer"], "not one of"), (["--bogus"], "unknown option")])
def test_a_usage_mistake_is_exit_2(args: list[str], message: str) -> None:
    ran = _script(*args)
    assert ran.returncode == 2 and message in ran.stderr, ran


@pytest.mark.parametrize(("missing", "names"), [
    (TOOLS / "nvidia-mig-parted/no-such-judge", "NVIDIA's nvidia-mig-parted"),
    (TOOLS / "butane/no-such-judge", "CoreOS's butane and ignition-validate"),
    (TOOLS / "nodeadm/no-such-judge", "AWS's nodeadm"),
], ids=["mig-parted", "butane", "nodeadm"])
def test_a_missing_judge_skips_outside_ci_naming_it_and_fails_in_ci(
        missing: Path, names: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a fresh clone has no ../shared: its tests skip with one line that says what is missing and how to get it
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        shared_file(missing)
    line = str(skipped.value)
    assert "\n" not in line and line.startswith(names) and str(missing) in line and ".ci/fetch-tools" in line, line
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        shared_file(missing)
    assert str(failed.value) == line


def test_contributing_names_each_pinned_tool_and_where_the_tests_read_it() -> None:
    readme = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The real tools the tests use"):]
    section = section[:section.index("\n## ")]
    flat = " ".join(section.split())
    for _, prefix in PINNED:
        assert f"{PINS[prefix + '_TAG']} of {PINS[prefix + '_REPO']}" in flat, prefix
    for folder in ("nvidia-mig-parted", "butane", "nodeadm"):
        assert f"`../shared/tools/{folder}/`" in section
    apt = CI_RUN_TEXT.split("APT_PACKAGES=(")[1].split(")")[0].split()
    for package in ("packer", "shellcheck", "cloud-init", "systemd", "slurmd", "debootstrap", "qemu-system-x86"):
        assert package in apt and f"`{package}`" in section, package

