"""OUT/talos/: each machine-config patch judged by Talos's own config schema (check-jsonschema against
siderolabs/talos@v1.13.9:pkg/machinery/config/schemas/config.schema.json, tests/fixtures/talos/ORIGIN.md), its
static pod by the Kubernetes Pod schema, and its restore script run against a simulated nvidia-mig-parted."""

from __future__ import annotations

import copy
import hashlib
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import require, run
from support import REPO, cli
from test_dra_claims import judge

from migbake.kubernetes.gate import READY_FILE, TALOS_MANAGED_FILE, VOLUMES
from migbake.profile.nodeprofile import Talos, build_profile
from migbake.render.environment import Templates
from migbake.render.plan import make_plan
from migbake.render.tree import render_plan

SCHEMA = REPO / "tests" / "fixtures" / "talos" / "config.schema.json"
NAMED = REPO / "images" / "h100-h200-inference" / "node-profile.yaml"  # two layout names, two GPU models
CASE = REPO / "tests" / "cases" / "valid" / "talos-named-layouts" / "node-profile.yaml"
SINGLE = REPO / "images" / "gpu-operator-h100" / "node-profile.yaml"


def talos_profile(path: Path, **talos: Any) -> Any:
    """An example profile made a Talos one: ``talos:``, a host driver, the GPU plugins held."""
    text = path.read_text()
    profile = build_profile(yaml.safe_load(text), text)
    restore = replace(profile.restore, hold="gpu-plugins")
    return replace(profile, driver="host", talos=Talos(**talos), restore=restore, consumers=())


def rendered(profile: Any) -> dict[str, str]:
    return {a.path: a.content for a in render_plan(make_plan(profile))}


def patches(profile: Any) -> dict[str, dict[str, Any]]:
    return {p: yaml.safe_load(t) for p, t in rendered(profile).items() if p.startswith("talos/")}


def schema_check(tmp_path: Path, docs: dict[str, str]) -> Any:
    paths = []
    for name, text in docs.items():
        path = tmp_path / name.replace("/", "_")
        path.write_text(text)
        paths.append(str(path))
    return run([require("check-jsonschema"), "--schemafile", str(SCHEMA), *paths])


@pytest.mark.parametrize("example", [NAMED, SINGLE], ids=["named-layouts", "one-layout"])
def test_each_patch_passes_talos_schema_and_a_broken_one_does_not(tmp_path: Path, example: Path) -> None:
    files = {p: t for p, t in rendered(talos_profile(example)).items() if p.startswith("talos/")}
    ran = schema_check(tmp_path, files)
    assert ran.rc == 0, ran.text
    broken = copy.deepcopy(yaml.safe_load(next(iter(files.values()))))
    broken["machine"]["files"][0]["op"] = "write"  # create, append or overwrite only
    ran = schema_check(tmp_path / "..", {"broken.yaml": yaml.safe_dump(broken)})
    assert ran.rc != 0 and "broken" in ran.text


def test_one_patch_per_layout_name_with_its_label_and_config_name() -> None:
    profile = talos_profile(NAMED)
    names = make_plan(profile).mig.layout_names
    found = patches(profile)
    assert sorted(found) == sorted(f"talos/mig-restore-{n}.yaml" for n in names) and len(names) == 2
    for name in names:
        machine = found[f"talos/mig-restore-{name}.yaml"]["machine"]
        assert machine["nodeLabels"] == {"nvidia.com/mig.config": name}
        script = machine["pods"][0]["spec"]["containers"][0]["command"][2]
        assert f"name='{name}'" in script.splitlines()


def test_a_talos_profile_chooses_its_layout_by_patch_and_writes_what_talos_needs(tmp_path: Path) -> None:
    # named layouts without restore.layout: each patch names its layout; outputs: the patches and the gate
    code, _, err = cli("generate", str(CASE), "-o", str(tmp_path / "out"))
    assert code == 0, err
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written == [
        ".migbake-output",
        "kubernetes/gate/kyverno-clusterpolicy.yaml",
        "kubernetes/gate/migbake-wait.sh",
        "kubernetes/gate/mutating-admission-policy.yaml",
        "talos/mig-restore-inference.yaml",
        "talos/mig-restore-training.yaml",
    ]
    gate = (tmp_path / "out/kubernetes/gate/migbake-wait.sh").read_text()
    assert TALOS_MANAGED_FILE in gate


def test_no_talos_folder_without_talos() -> None:
    text = NAMED.read_text()
    assert not any(p.startswith("talos/") for p in rendered(build_profile(yaml.safe_load(text), text)))


def test_the_static_pod_is_a_valid_pod_through_the_nvidia_runtime_and_sees_the_files() -> None:
    kv = judge("kubernetes_validate")
    profile = talos_profile(SINGLE, restore_image="registry.example/nvidia/k8s-mig-manager:v0.15.0")
    plan = make_plan(profile)
    ((path, patch),) = patches(profile).items()
    assert path == "talos/mig-restore.yaml"
    machine = patch["machine"]
    (pod,) = machine["pods"]
    kv.validate(pod, "1.36.0", strict=True)
    from kubernetes_validate.utils import ValidationError

    typo = copy.deepcopy(pod)
    typo["spec"]["runtimeClass"] = typo["spec"].pop("runtimeClassName")
    with pytest.raises(ValidationError):
        kv.validate(typo, "1.36.0", strict=True)
    spec = pod["spec"]
    (ctr,) = spec["containers"]
    assert spec["runtimeClassName"] == "nvidia" and spec["restartPolicy"] == "OnFailure"
    assert ctr["image"] == "registry.example/nvidia/k8s-mig-manager:v0.15.0"
    assert ctr["securityContext"] == {"privileged": True}
    assert {e["name"]: e["value"] for e in ctr["env"]}["NVIDIA_MIG_CONFIG_DEVICES"] == "all"
    files = {f["path"]: f for f in machine["files"]}
    # the node gets the very config every other output carries, and the marker the gate looks for
    assert files["/var/lib/migbake/config.yaml"]["content"] == plan.mig.config_text
    assert TALOS_MANAGED_FILE in files and all(f["op"] == "create" for f in files.values())
    # every host folder the pod and the gated plugins name is one kubelet sees (extraMounts), except the host's
    # /etc, which kubelet has
    mounts = {m["source"] for m in machine["kubelet"]["extraMounts"]}
    assert {v["hostPath"]["path"] for v in spec["volumes"]} <= mounts
    assert {path for _, path, _ in VOLUMES} - mounts == {"/etc"}
    assert os.path.dirname(READY_FILE) in mounts
    by_name = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert {by_name[m["name"]] for m in ctr["volumeMounts"]} == mounts


# --- the restore script, run against a simulated nvidia-mig-parted ------------------------------------------

FAKE = """#!/bin/sh
echo "$*" >>"$LOG"
case "$1" in
  assert) [ -e "$STATE/applied" ] || [ -e "$STATE/already" ] ;;
  apply) if [ -e "$STATE/apply-fails" ]; then exit 1; fi; touch "$STATE/applied" ;;
esac
"""


def restore_script(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "nvidia-mig-parted"
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    config, ready = tmp_path / "config.yaml", tmp_path / "run" / "mig-ready"
    config.write_text("version: v1\n")
    ready.parent.mkdir()
    text = Templates({}).text(
        "talos/restore.sh.j2", {"config": str(config), "name": "inference", "ready": str(ready), "attempts": 3}
    )
    script = tmp_path / "restore.sh"
    script.write_text(text.replace("sleep 10", "sleep 0"))
    return script, ready, tmp_path / "log"


def run_restore(tmp_path: Path, script: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "LOG": str(tmp_path / "log"),
        "STATE": str(tmp_path),
    }
    return subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env, timeout=30, check=False)


def test_the_restore_script_is_shellcheck_clean_as_busybox_sh(tmp_path: Path) -> None:
    script, _, _ = restore_script(tmp_path)
    ran = run([require("shellcheck"), "-s", "sh", "-f", "gcc", str(script)])
    assert ran.rc == 0, ran.text


def test_a_layout_already_there_is_asserted_and_not_applied(tmp_path: Path) -> None:
    script, ready, log = restore_script(tmp_path)
    (tmp_path / "already").write_text("")
    done = run_restore(tmp_path, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["assert"]
    lines = dict(line.split("=", 1) for line in ready.read_text().splitlines())
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    sha = hashlib.sha256((tmp_path / "config.yaml").read_bytes()).hexdigest()
    assert lines == {"gen": boot_id, "layout": "inference", "config_sha": sha}
    assert oct(ready.stat().st_mode & 0o777) == oct(0o644)
    assert not list(ready.parent.glob(".mig-ready.*"))  # written through a temporary file, renamed


def test_a_missing_layout_is_applied_then_asserted(tmp_path: Path) -> None:
    script, ready, log = restore_script(tmp_path)
    done = run_restore(tmp_path, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["assert", "apply", "assert"]
    assert "-c inference" in log.read_text() and ready.exists()


def test_a_failed_apply_fails_closed_after_three_attempts_and_removes_an_old_ready_file(tmp_path: Path) -> None:
    script, ready, log = restore_script(tmp_path)
    (tmp_path / "apply-fails").write_text("")
    ready.write_text("gen=old\n")  # from an earlier run of this boot
    done = run_restore(tmp_path, script)
    assert done.returncode == 1 and "FAILED" in done.stdout
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["assert", "apply"] * 3
    assert not ready.exists()
