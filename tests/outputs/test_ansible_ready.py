"""activate.yml on a node whose NVIDIA driver is a container: after the reboot it waits for the watcher's ready file.

The restore unit of such a node is the watcher (Type=simple, Restart=always), active at once; the layout exists
only once the driver's pod is up and the watcher wrote ``/run/migbake/mig-ready``. The role's group data say
which profile is which (``mig_restore_driver_container``, ``mig_restore_ready_file``), and ``tasks/ready.yml``
waits for the file (``mig_restore_ready_wait_seconds``) before verify. Real ``ansible-playbook`` over the local
connection: the wait passes once the file is there, fails on timeout with the watcher's journal (a stand-in
journalctl), and a host-driver profile never waits; the whole activate.yml of the example image runs up to its
reboot (refused there, as test_ansible_overrides.py shows); ansible-lint's production profile takes the tree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import require, run
from support import REPO, generate
from test_ansible_kickstart import role_data

from migbake.render.targets.ansible import ROLE

CONTAINER = (REPO / "images/gpu-operator-h100/node-profile.yaml").read_text()  # driver: container
HOST = (REPO / "images/h200-inference/node-profile.yaml").read_text()  # a host driver


def _env(tmp_path: Path) -> dict[str, str]:
    return {"ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home")}


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("ready")
    return {"container": generate(CONTAINER, work / "container", production=True),
            "host": generate(HOST, work / "host", production=True)}


def test_the_group_data_say_which_profile_waits(trees: dict[str, Path]) -> None:
    container = role_data((trees["container"] / f"{ROLE}/defaults/main.yml").read_text())
    host = role_data((trees["host"] / f"{ROLE}/defaults/main.yml").read_text())
    assert container["mig_restore_driver_container"] is True
    assert container["mig_restore_ready_file"] == "/run/migbake/mig-ready"
    assert container["mig_restore_unit"] == "migbake-driver-watch.service"
    assert host["mig_restore_driver_container"] is False and host["mig_restore_ready_file"] == ""
    assert container["mig_restore_ready_wait_seconds"] == host["mig_restore_ready_wait_seconds"] == 900


def test_the_wait_comes_after_the_units_result_and_before_verify(trees: dict[str, Path]) -> None:
    tasks: list[dict[str, Any]] = yaml.safe_load((trees["container"] / f"{ROLE}/tasks/activate.yml").read_text())
    block = next(t["block"] for t in tasks if t["name"] == "Activate the MIG layout on this node")
    names = [t["name"] for t in block]
    wait = names.index("Wait for the driver container and the layout restored through it")
    assert names.index("Fail when the restore did not succeed") < wait < names.index("Verify the restored layout")
    assert block[wait]["ansible.builtin.include_tasks"] == "ready.yml"


def _wait(tree: Path, tmp_path: Path, *extra: str) -> tuple[int, str, list[str]]:
    """The role's ready.yml on localhost (a stand-in journalctl records its calls): rc, output, journalctl calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "journalctl.log"
    journalctl = bin_dir / "journalctl"
    journalctl.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >>{calls}\n"
                          "echo 'driver-watch.sh[812]: attempt 3 of 3 failed: nvidia-mig-parted apply failed'\n")
    journalctl.chmod(0o755)
    play = tmp_path / "wait.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.include_role: {name: mig_restore, tasks_from: ready}\n")
    result = run([require("ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
                  "-e", "ansible_become=false", "-e", f"ansible_python_interpreter={sys.executable}", *extra],
                 env={**_env(tmp_path), "ANSIBLE_ROLES_PATH": str(tree / "ansible/roles"),
                      "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}, timeout=300)
    return result.rc, " ".join(result.text.split()), calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.realtool
def test_a_container_node_waits_for_the_ready_file(trees: dict[str, Path], tmp_path: Path) -> None:
    ready = tmp_path / "mig-ready"
    ready.write_text("gen=1\nlayout=all-3g.40gb-2g.20gb\n")
    rc, said, calls = _wait(trees["container"], tmp_path, "-e", f"mig_restore_ready_file={ready}")
    assert rc == 0 and "Wait for the watcher's ready file" in said, said
    assert "ok: [localhost]" in said and "failed=0" in said, said
    assert calls == []


@pytest.mark.realtool
def test_a_container_node_fails_with_the_watchers_journal_on_timeout(trees: dict[str, Path], tmp_path: Path) -> None:
    absent = tmp_path / "mig-ready"
    rc, said, calls = _wait(trees["container"], tmp_path, "-e", f"mig_restore_ready_file={absent}",
                            "-e", "mig_restore_ready_wait_seconds=2")
    assert rc == 2, said
    assert f"{absent} did not appear within 2 s of the reboot" in said, said
    assert "attempt 3 of 3 failed: nvidia-mig-parted apply failed" in said, said
    assert calls == ["--no-pager --boot --unit migbake-driver-watch.service --lines 20"]


@pytest.mark.realtool
def test_a_host_driver_node_never_waits(trees: dict[str, Path], tmp_path: Path) -> None:
    rc, said, calls = _wait(trees["host"], tmp_path, "-e", "mig_restore_ready_wait_seconds=2")
    assert rc == 0 and "skipping: [localhost]" in said and "did not appear" not in said, said
    assert calls == []


@pytest.mark.realtool
def test_the_container_profiles_activation_runs_up_to_its_reboot(trees: dict[str, Path], tmp_path: Path) -> None:
    log = tmp_path / "kubectl.log"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >>{log}\n")
    kubectl.chmod(0o755)
    result = run([require("ansible-playbook"), "-i", "localhost,", "-c", "local", "activate.yml",
                  "-e", "mig_restore_hosts=localhost", "-e", "ansible_become=false",
                  "-e", f"mig_restore_kubectl={kubectl}", "-e", f"ansible_python_interpreter={sys.executable}"],
                 cwd=trees["container"] / "ansible", env=_env(tmp_path), timeout=300)
    said = " ".join(result.text.split())
    assert result.rc == 2 and "would reboot the control node" in said, said
    assert "localhost stays drained (not uncordoned, not resumed): Reboot" in said, said
    assert log.read_text().splitlines() == [
        "cordon localhost", "drain localhost --ignore-daemonsets --delete-emptydir-data --timeout=900s"]


@pytest.mark.realtool
def test_ansible_lint_production_takes_the_container_profiles_role(trees: dict[str, Path], tmp_path: Path) -> None:
    result = run([require("ansible-lint"), "--nocolor", "--offline", "--profile", "production", "."],
                 cwd=trees["container"] / "ansible", env=_env(tmp_path), timeout=600)
    assert result.rc == 0, result.text
    assert "0 failure(s), 0 warning(s)" in result.text, result.text
