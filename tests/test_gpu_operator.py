"""The GPU Operator beside migbake: who owns MIG on a node, checked on recorded `kubectl get node -o json`.

The same verdicts come from three places: `migbake preflight --node-json` (offline), the generated
preflight script and the generated verify script (both through `kubectl get node`, here a simulated
kubectl that prints the recorded node's labels). And the other supported setup, the operator owning
MIG: `migbake export --gpu-operator` gives a ConfigMap NVIDIA's own parser accepts config by config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from realtools import run
from support import REPO, CliRunner, generate, shared_file
from test_generated_scripts import good_node
from test_preflight import SCRIPT, SimNode, install, profile_yaml

from migbake.cli.group import main

NODES = REPO / "tests/fixtures/kubectl-node"
# fixture -> (gpu-operator, mig-config) for a profile whose config is "current"
VERDICTS = {
    "no-operator": ("PASS", "PASS"),
    "operator-mig-manager-deployed": ("FAIL", "FAIL"),
    "operator-no-mig-manager-label": ("WARN", "PASS"),
    "mig-manager-label-false": ("PASS", "PASS"),
    "mig-config-ours": ("PASS", "PASS"),
    "mig-config-other": ("PASS", "FAIL"),
}
DETAILS = {
    "operator-mig-manager-deployed": ("nvidia.com/gpu.deploy.mig-manager=true: the GPU Operator deploys its "
                                      "mig-manager on this node", "nvidia.com/mig.config=all-disabled names a "
                                      "config other than ours (current)"),
    "mig-manager-label-false": ("nvidia.com/gpu.deploy.mig-manager=false", "no nvidia.com/mig.config label"),
    "mig-config-ours": ("deploys no mig-manager", "nvidia.com/mig.config=current: the config this node restores"),
    "mig-config-other": ("deploys no mig-manager", "nvidia.com/mig.config=all-balanced names a config other"),
}


def labels_of(name: str) -> str:
    """The node's labels as `kubectl get node -o go-template` prints them with the scripts' template."""
    labels = json.loads((NODES / f"{name}.json").read_text())["metadata"]["labels"]
    return "".join(f"{k}={v}\n" for k, v in sorted(labels.items()))


def fake_kubectl(path: Path, name: str) -> None:
    """A kubectl that answers `get node NODE -o go-template=...labels...` with the recorded labels."""
    (path.parent / "labels.txt").write_text(labels_of(name))
    path.write_text(f"""#!/bin/sh
printf 'kubectl %s\\n' "$*" >> '{path.parent}/kubectl.calls'
case "$*" in
  *metadata.labels*) cat '{path.parent}/labels.txt' ;;
  *) exit 1 ;;
esac
""")
    path.chmod(0o755)


def offline(tmp_path: Path, name: str, extra: str = "") -> dict[str, tuple[str, str]]:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path, extra=extra))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--node-json", str(NODES / f"{name}.json"), "--json"])
    report = json.loads(r.stdout)
    assert r.exit_code == (0 if report["ready"] else 1), r.stderr
    return {c["check"]: (c["status"], c["detail"]) for c in report["checks"]}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_offline_preflight_reads_the_recorded_node(tmp_path: Path, name: str) -> None:
    checks = offline(tmp_path, name)
    assert (checks["gpu-operator"][0], checks["mig-config"][0]) == VERDICTS[name]
    for check, want in zip(("gpu-operator", "mig-config"), DETAILS.get(name, ("", ""))):
        assert want in checks[check][1], checks[check]
    # without a capture the GPU checks are SKIP, and say why
    assert checks["gpu-count"] == ("SKIP", "no nvidia-smi capture given (--nvidia-smi-xml or --nvidia-smi-csv)")


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_preflight_script_and_offline_agree_on_the_labels(tmp_path: Path, name: str) -> None:
    root = tmp_path / "node"
    root.mkdir()
    env = install(SimNode(), root)
    fake_kubectl(root / "sbin/kubectl", name)
    out = generate(profile_yaml(root), tmp_path / "out")
    ran = run([str(out / SCRIPT), "--json"], env=env)
    live = {c["check"]: (c["status"], c["detail"]) for c in json.loads(ran.out)["checks"]}
    assert ran.rc == (1 if "FAIL" in VERDICTS[name] else 0), ran.text
    off = offline(tmp_path, name)
    for check in ("gpu-operator", "mig-config"):
        assert live[check] == off[check]
    calls = (root / "sbin/kubectl.calls").read_text().splitlines()
    assert calls == [f"kubectl get node {run(['uname', '-n']).out.strip()} -o go-template="
                     "{{range $k, $v := .metadata.labels}}{{$k}}={{$v}}{{\"\\n\"}}{{end}}"]


def test_preflight_script_skips_the_labels_without_kubectl(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    env = install(SimNode(), root)
    (root / "sbin/kubectl").write_text("#!/bin/sh\nexit 1\n")
    (root / "sbin/kubectl").chmod(0o755)
    out = generate(profile_yaml(root), tmp_path / "out")
    report = json.loads(run([str(out / SCRIPT), "--json"], env=env).out)
    status = {c["check"]: c["status"] for c in report["checks"]}
    assert status["gpu-operator"] == status["mig-config"] == "SKIP"


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_verify_checks_the_labels(tmp_path: Path, name: str) -> None:
    node, script = good_node(tmp_path)
    fake_kubectl(node.bin / "kubectl", name)
    ran = node.run(script)
    owner, config = VERDICTS[name]
    assert any(line.startswith(f"{owner:<4}  gpu-operator: ") for line in ran.out.splitlines()), ran.out
    assert any(line.startswith(f"{config:<4}  mig-config: ") for line in ran.out.splitlines()), ran.out
    assert ran.rc == (1 if "FAIL" in VERDICTS[name] else 0), ran.out


def test_profile_without_kubelet_has_no_label_checks(tmp_path: Path) -> None:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path, kubelet=False))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--node-json", str(NODES / "no-operator.json"),
                                  "--json"])
    checks = [c["check"] for c in json.loads(r.stdout)["checks"]]
    assert "gpu-operator" not in checks and "kubelet" not in checks


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"),
    ('{"kind": "NodeList", "items": []}', "not one Node"),
    ('{"kind": "Node", "metadata": {"labels": {"a": 1}}}', "metadata.labels is not a map of strings"),
], ids=["not-json", "node-list", "label-not-string"])
def test_bad_node_json_is_refused(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "node.json"
    bad.write_text(text)
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--node-json", str(bad)])
    assert r.exit_code == 2 and message in r.stderr, r.stderr


# --- kubernetes.node_labels: registered by kubelet ----------------------------------------------

def test_node_labels_go_into_the_kubelet_drop_in(tmp_path: Path) -> None:
    out = generate(profile_yaml(tmp_path, extra="kubernetes:\n  kubelet_args_env: KUBELET_EXTRA_ARGS\n"
                                "  node_labels: {nvidia.com/gpu.deploy.mig-manager: 'false', "
                                "nvidia.com/mig.config: current}\n"), tmp_path / "out")
    dropin = (out / "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf").read_text()
    assert ("\n[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.deploy.mig-manager=false,"
            "nvidia.com/mig.config=current\n") in dropin


# --- the operator owns MIG: the exported ConfigMap ------------------------------------------------

@pytest.mark.parametrize("image", ["h200-inference", "a100-80gb-mixed", "h100-h200-inference"])
def test_exported_configmap_is_accepted_by_nvidia_mig_parted(tmp_path: Path, image: str) -> None:
    tool = shared_file(REPO.parent / "shared/tools/nvidia-mig-parted/nvidia-mig-parted")
    r = CliRunner().invoke(main, ["export", "--gpu-operator", str(REPO / "images" / image / "node-profile.yaml")])
    assert r.exit_code == 0, r.stderr
    doc = yaml.safe_load(r.stdout)
    assert "nvidia.com/mig.config=current selects this layout" in r.stdout
    config = tmp_path / "config.yaml"
    config.write_text(doc["data"]["config.yaml"])
    names = list(yaml.safe_load(config.read_text())["mig-configs"])
    assert names == ["current", "all-disabled"]
    for name in names:
        ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", name])
        assert ran.rc == 0, (name, ran.text)
    ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", "all-balanced"])
    assert ran.rc != 0  # the real parser does refuse a config the file lacks
