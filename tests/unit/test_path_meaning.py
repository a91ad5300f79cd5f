"""Paths mean what systemd and the kernel make of them.

Every spelling of a path inside systemd's unit trees (``//``, ``/./``-free doubles, each tree that
``systemd-analyze unit-paths`` lists) and of the packaged manager's config is refused by
``config-path-in-systemd`` / ``managed-config-path``; two outputs at one path, or a file where another
output needs a folder, are ``output-path-clash`` (exit 1 with a rule id), never a render error.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from realtools import require, run
from support import IMAGES

from migbake.cli.group import main
from migbake.profile.nodefacts import REBOOT_MARKER, RESTORE_SCRIPT, SYSTEMD_TREES, in_systemd_tree, normal_path
from migbake.rules.validate import check_bytes

SEED = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
COUNTS: Counter[str] = Counter()


def _rules(**restore: str) -> list[str]:
    data = json.loads(json.dumps(SEED))
    data.setdefault("restore", {}).update(restore)
    return [p.rule for p in check_bytes(json.dumps(data).encode(), "p.yaml").problems if p.severity == "error"]


def _spellings(path: str) -> list[str]:
    """``path`` written as the kernel reads it the same: doubled slashes at each separator."""
    parts = path.split("/")
    out = ["/" + path, path.replace("/", "//")]
    out += ["/".join(parts[:i]) + "//" + "/".join(parts[i:]) for i in range(1, len(parts))]
    return sorted(set(out))


@pytest.mark.realtool
def test_every_unit_folder_systemd_reads_is_in_a_tree_the_rule_covers() -> None:
    ran = run([require("systemd-analyze"), "unit-paths"])
    assert ran.rc == 0, ran.text
    folders = [line for line in ran.out.splitlines() if line.startswith("/")]
    assert "/etc/systemd/system" in folders and len(folders) >= 8
    for folder in folders + [f + "/x.service.d" for f in folders]:
        COUNTS["class3-unit-paths"] += 1
        assert in_systemd_tree(folder), f"{folder} (systemd-analyze unit-paths) is outside {SYSTEMD_TREES}"


@pytest.mark.parametrize("tree", SYSTEMD_TREES)
def test_a_config_in_any_systemd_tree_in_any_spelling_is_refused(tree: str) -> None:
    for path in _spellings(f"{tree}/system/kubelet.service.d/mig.yaml") + _spellings(f"{tree}/system/x.yaml"):
        COUNTS["class3-systemd"] += 1
        assert "config-path-in-systemd" in _rules(config_path=path), path


def test_the_packaged_managers_config_in_any_spelling_is_refused() -> None:
    for path in _spellings("/etc/nvidia-mig-manager/config.yaml"):
        COUNTS["class3-managed"] += 1
        assert _rules(config_path=path) == ["managed-config-path"], path


@pytest.mark.parametrize("path", ["/etc/systemd-mig/config.yaml", "/etc/nvidia-mig/config.yaml",
                                  "/opt/systemd/config.yaml", "/etc/nvidia-mig-manager/config.yaml.d/x"])
def test_near_misses_are_not_the_systemd_or_managed_rule(path: str) -> None:
    """Outside /etc/nvidia-mig/ and /etc/migbake/ they are output-path-not-allowed, nothing more."""
    assert set(_rules(config_path=path)) <= {"output-path-not-allowed"}
    assert _rules(config_path=path.replace("/etc/", "/etc/migbake/").replace("/opt/", "/etc/migbake/")) == []


@pytest.mark.parametrize(("raw", "normal"), [
    ("//etc/x", "/etc/x"), ("/etc//x", "/etc/x"), ("///etc///x", "/etc/x"), ("/etc/./x", "/etc/x"),
    ("/etc/x/", "/etc/x"), ("/", "/"), ("", ""),
])
def test_normal_path(raw: str, normal: str) -> None:
    assert normal_path(raw) == normal


@pytest.mark.parametrize(("restore", "pointer"), [
    ({"config_path": RESTORE_SCRIPT}, "/restore/config_path"),
    ({"config_path": "/" + RESTORE_SCRIPT}, "/restore/config_path"),
    ({"config_path": RESTORE_SCRIPT + "/c.yaml"}, "/restore/config_path"),
    ({"config_path": "/etc/nvidia-mig"}, "/restore/config_path"),
    ({"config_path": "/etc/nvidia-mig/m.prom", "metrics_textfile": "/etc/nvidia-mig//m.prom"},
     "/restore/config_path"),
    ({"metrics_textfile": REBOOT_MARKER + "/m.prom"}, "/restore/metrics_textfile"),
], ids=["restore.sh", "restore.sh-double", "restore.sh-folder", "folder-of-restore.sh", "metrics",
        "metrics-in-marker"])
def test_two_outputs_at_one_path_are_refused_with_a_rule(restore: dict[str, str], pointer: str,
                                                         tmp_path: Path) -> None:
    COUNTS["class3-clash"] += 1
    data = json.loads(json.dumps(SEED))
    data.setdefault("restore", {}).update(restore)
    checked = check_bytes(json.dumps(data).encode(), "p.yaml")
    # a metrics file outside the textfile folders is also output-path-not-allowed
    clashes = [(p.pointer, p.rule) for p in checked.problems if p.rule != "output-path-not-allowed"]
    assert clashes == [(pointer, "output-path-clash")], checked.problems
    profile = tmp_path / "p.yaml"
    profile.write_text(json.dumps(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["generate", str(profile), "-o", str(out)])
    assert result.exit_code == 1 and "[output-path-clash]" in result.stderr and not out.exists(), result.output


def test_a_path_spelled_with_doubled_slashes_is_written_where_the_kernel_puts_it(tmp_path: Path) -> None:
    from support import generate

    data = json.loads(json.dumps(SEED))
    data.setdefault("restore", {})["config_path"] = "//etc//nvidia-mig/other.yaml"
    out = generate(json.dumps(data), tmp_path / "out")
    assert (out / "rootfs/etc/nvidia-mig/other.yaml").is_file()
    assert "-f /etc/nvidia-mig/other.yaml" in (out / "rootfs/etc/nvidia-mig/other.yaml").read_text()


def test_report_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """How many hostile inputs this module tried."""
    with capsys.disabled():
        print("\nclass 3 (paths):", dict(COUNTS))
