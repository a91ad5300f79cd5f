"""A path in the profile may not name any file on the node.

Every path migbake writes (restore.config_path, restore.metrics_textfile, the nvidia-mig-parted binary the
Butane configs download to tools.nvidia_mig_parted) lies in its own folders (``output-path-not-allowed``),
and no path the profile names is a file migbake writes or runs under another name (``output-path-clash``):
a tool at the config, at restore.sh or at a unit file; kubelet.binary at a tool; two tools at one file.
Each is refused located (file:line, the pointer, what is allowed), exit 1, nothing written; and the real
butane shows what today's output of such a profile does (``duplicate entry``), judged with ``--strict``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from realtools import run
from support import IMAGES, REPO, shared_file

from migbake.cli.group import main
from migbake.profile.nodefacts import REBOOT_MARKER, RESTORE_SCRIPT
from migbake.profile.nodeprofile import build_profile
from migbake.render.tree import render
from migbake.rules.nodepaths import _related
from migbake.rules.validate import check_bytes

SEED = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
URL = {"nvidia_mig_parted_url": "https://downloads.example.com/nvidia-mig-parted",
       "nvidia_mig_parted_sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}
OS_FILES = ["/etc/passwd", "/etc/shadow", "/etc/sudoers", "/etc/sudoers.d/migbake", "/etc/default/kubelet",
            "/etc/sysconfig/kubelet", "/etc/ld.so.preload", "/etc/ld.so.conf.d/mig.conf",
            "/root/.ssh/authorized_keys", "/home/core/.ssh/authorized_keys.d/mig", "/etc/udev/rules.d/99-mig.rules",
            "/etc/tmpfiles.d/mig.conf", "/etc/cloud/cloud.cfg.d/99-mig.cfg", "/etc/eks/nodeadm.d/mig.yaml",
            "/etc/modprobe.d/mig.conf", "/etc/profile.d/mig.sh", "/etc/crontab", "/etc/containerd/config.toml",
            "/etc/kubernetes/kubelet.conf", "/etc/nvidia-mig-manager/hooks.sh", "/etc/nvidia-mig-manager/x.yaml",
            "/usr/bin/nvidia-smi", "/bin/bash", "/usr/local/bin/kubelet", "/opt/bin/kubelet",
            "/var/lib/kubelet/config.yaml",
            "/tmp/config.yaml", "/config.yaml", "/etc/nvidia-mig", "/etc/migbake"]


def _data(**sections: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(SEED))
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return data


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    checked = check_bytes(json.dumps(data).encode(), "p.yaml")
    return [(p.pointer, p.rule) for p in checked.problems if p.severity == "error"]


@pytest.mark.parametrize("path", OS_FILES)
def test_the_config_may_not_name_a_file_of_the_os_or_a_tool(path: str) -> None:
    assert ("/restore/config_path", "output-path-not-allowed") in _errors(_data(restore={"config_path": path}))


@pytest.mark.parametrize("path", [p.rsplit(".", 1)[0] + ".prom" if "." in p.rsplit("/", 1)[1] else p + ".prom"
                                  for p in OS_FILES])
def test_the_metrics_file_may_not_name_a_file_of_the_os(path: str) -> None:
    assert ("/restore/metrics_textfile", "output-path-not-allowed") in _errors(
        _data(restore={"metrics_textfile": path}))


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/ld.so.preload", "/root/.ssh/authorized_keys",
                                  "/opt/bin/kubelet", "/opt/bin/containerd", "/etc/nvidia-mig/nvidia-mig-parted",
                                  "/var/lib/nvidia-mig-parted", "/opt/bin/nvidia-smi"])
def test_the_downloaded_binary_goes_only_to_its_own_file(path: str) -> None:
    errors = _errors(_data(tools={"nvidia_mig_parted": path, **URL}))
    assert ("/tools/nvidia_mig_parted", "output-path-not-allowed") in errors, errors


@pytest.mark.parametrize(("sections", "pointer"), [
    ({"tools": {"nvidia_smi": "/etc/nvidia-mig/config.yaml"}}, "/tools/nvidia_smi"),
    ({"tools": {"nvidia_mig_parted": RESTORE_SCRIPT}}, "/tools/nvidia_mig_parted"),
    ({"tools": {"nvidia_smi": REBOOT_MARKER}}, "/tools/nvidia_smi"),
    ({"tools": {"nvidia_smi": "/etc/systemd/system/nvidia-mig-restore.service"}}, "/tools/nvidia_smi"),
    ({"tools": {"nvidia_mig_parted": "/etc/nvidia-mig/config.yaml/x"}}, "/tools/nvidia_mig_parted"),
    ({"tools": {"nvidia_smi": "/usr/bin/nvidia-mig-parted"}}, "/tools/nvidia_smi"),
    ({"kubelet": {"binary": "/usr/bin/nvidia-smi"}}, "/kubelet/binary"),
    ({"kubelet": {"binary": "/etc/nvidia-mig/restore.sh"}}, "/kubelet/binary"),
    ({"restore": {"config_path": "/etc/nvidia-mig/x.yaml"}, "tools": {"nvidia_mig_parted": "/etc/nvidia-mig/x.yaml"}},
     "/restore/config_path"),
    ({"tools": {"nvidia_mig_parted": "/opt/bin/nvidia-mig-parted", "nvidia_smi": "/opt/bin/nvidia-mig-parted", **URL}},
     "/tools/nvidia_smi"),
], ids=["smi-is-config", "mig-parted-is-restore.sh", "smi-is-marker", "smi-is-unit", "mig-parted-in-config",
        "smi-is-mig-parted", "kubelet-is-smi", "kubelet-is-restore.sh", "config-is-mig-parted", "download-over-smi"])
def test_a_tool_at_a_path_migbake_writes_or_runs_is_refused(sections: dict[str, dict[str, str]], pointer: str,
                                                            tmp_path: Path) -> None:
    data = _data(**sections)
    data.setdefault("kubelet", {}).setdefault("layout", "kubeadm")
    assert (pointer, "output-path-clash") in _errors(data)
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["generate", str(profile), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and "[output-path-clash]" in result.stderr, result.output
    assert "p.yaml:" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("restore", [
    {"config_path": "/etc/nvidia-mig/config.yaml"}, {"config_path": "/etc/migbake/layouts/a100+x.yaml"},
    {"metrics_textfile": "/var/lib/node_exporter/textfile_collector/migbake.prom"},
    {"metrics_textfile": "/var/lib/prometheus/node-exporter/migbake.prom"},
    {"metrics_textfile": "/var/lib/migbake/metrics.prom"},
])
def test_paths_in_their_own_folders_are_allowed(restore: dict[str, str]) -> None:
    assert _errors(_data(restore=restore, tools={"nvidia_mig_parted": "/opt/nvidia/bin/nvidia-mig-parted-0.15",
                                                 **URL})) == []


def test_every_example_image_names_allowed_paths() -> None:
    for image in IMAGES:
        checked = check_bytes((image / "node-profile.yaml").read_bytes(), "p.yaml")
        assert not [p for p in checked.problems if p.rule.startswith("output-path")], image


def test_the_message_says_what_is_allowed(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("version: 1\nname: n\ngpus:\n  - model: h200-141gb\n    mig:\n      layout: {1g.18gb: 7}\n"
                       "restore:\n  config_path: //etc//sudoers\n")
    result = CliRunner().invoke(main, ["validate", str(profile)])
    assert result.exit_code == 1
    assert (f"{profile}:8:16: error: /restore/config_path: '//etc//sudoers' (that is '/etc/sudoers'): root writes "
            "the mig-parted config there on every node") in result.output
    assert "allowed: a file inside /etc/nvidia-mig/, /etc/migbake/ [output-path-not-allowed]" in result.output


BUTANE = REPO.parent / "shared" / "tools" / "butane" / "butane"


@pytest.mark.realtool
@pytest.mark.parametrize("path", [RESTORE_SCRIPT, "/etc/nvidia-mig/config.yaml"])
def test_butane_rejects_what_a_clash_would_write_and_migbake_refuses_it(path: str, tmp_path: Path) -> None:
    """Rendered past the rules (as today's main wrote it, exit 0), butane --strict refuses the duplicate file."""
    data = _data(tools={"nvidia_mig_parted": path, **URL})
    artifacts = {a.path: a for a in render(build_profile(data))}
    bu = tmp_path / "fcos.bu"
    bu.write_text(str(artifacts["butane/fcos.bu"].content))
    ran = run([str(shared_file(BUTANE)), "--strict", str(bu)])
    assert ran.rc != 0 and "duplicate entry" in ran.text, ran.text
    assert ("/tools/nvidia_mig_parted", "output-path-clash") in _errors(data)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["", "/", "a", "b", "/a", "ab", "a/"]), max_size=4).map("".join), max_size=8))
def test_the_related_paths_are_every_pair_one_path_or_one_inside_the_other(paths: list[str]) -> None:
    """``output-path-clash`` looks only at the pairs ``_related`` finds, by each path's folders: the pairs that
    comparing every two paths finds, in the same order (``i`` then ``j``)."""
    every = [(i, j) for i in range(len(paths)) for j in range(i + 1, len(paths))
             if paths[i] == paths[j] or paths[i].startswith(paths[j] + "/") or paths[j].startswith(paths[i] + "/")]
    assert _related(paths) == every
