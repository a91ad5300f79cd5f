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
IMAGE = REPO / "images/h200-inference/node-profile.yaml"
# fixture -> (gpu-operator, mig-config) for a profile whose config is "current"
VERDICTS = {
    "no-operator": ("PASS", "PASS"),
    "operator-mig-manager-deployed": ("FAIL", "FAIL"),
    "operator-no-mig-manager-label": ("WARN", "PASS"),
    "mig-manager-label-false": ("PASS", "PASS"),
    "mig-config-ours": ("PASS", "PASS"),
    "mig-config-other": ("PASS", "NOTE"),
    "operator-all-disabled-mig-manager-false": ("PASS", "NOTE"),
}
DETAILS = {
    "operator-mig-manager-deployed": ("nvidia.com/gpu.deploy.mig-manager=true: the GPU Operator deploys its "
                                      "mig-manager on this node", "nvidia.com/mig.config=all-disabled names a "
                                      "config other than ours (current)"),
    "mig-manager-label-false": ("nvidia.com/gpu.deploy.mig-manager=false", "no nvidia.com/mig.config label"),
    "mig-config-ours": ("deploys no mig-manager", "nvidia.com/mig.config=current: the config this node restores"),
    "mig-config-other": ("deploys no mig-manager", "nvidia.com/mig.config=all-balanced acts on nothing here"),
    "operator-all-disabled-mig-manager-false": ("nvidia.com/gpu.deploy.mig-manager=false", "nvidia.com/mig.config="
                                                "all-disabled acts on nothing here: no mig-manager of the GPU "
                                                "Operator runs on this node (nvidia.com/gpu.deploy.mig-manager=false)"),
}
VERIFY_STATUS = {"NOTE": "INFO"}  # verify prints a NOTE as INFO (it does not fail the node)


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


def live_checks(tmp_path: Path, node: str, extra: str = "") -> dict[str, tuple[str, str]]:
    """The generated preflight's checks on a simulated node whose kubectl prints the recorded node's labels."""
    root = tmp_path / "node"
    root.mkdir()
    env = install(SimNode(), root)
    fake_kubectl(root / "sbin/kubectl", node)
    out = generate(profile_yaml(root, extra=extra), tmp_path / "out")
    ran = run([str(out / SCRIPT), "--json"], env=env)
    return {c["check"]: (c["status"], c["detail"]) for c in json.loads(ran.out)["checks"]}


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


# a config name with a trailing - . or _ was accepted, though no node label can name it
UNSELECTABLE = "restore: {config_name: inference-}\n"


@pytest.mark.parametrize("name", ["no-operator", "mig-manager-label-false"])
def test_a_config_name_no_label_can_carry_warns_the_same_offline_and_on_the_node(tmp_path: Path, name: str) -> None:
    live = live_checks(tmp_path, name, UNSELECTABLE)
    off = offline(tmp_path, name, extra=UNSELECTABLE)
    assert live["mig-config"] == off["mig-config"]
    assert off["mig-config"][0] == "WARN" and "'inference-' can be no value of the label" in off["mig-config"][1]


@pytest.mark.parametrize("config", ["inference-", "inference.", "inference_", "x" * 62 + "_"])
def test_export_gpu_operator_refuses_a_config_name_no_label_can_carry(tmp_path: Path, config: str) -> None:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path, extra=f"restore: {{config_name: {config}}}\n"))
    out = tmp_path / "configmap.yaml"
    for args in (["export", "--gpu-operator", str(profile)], ["export", "--gpu-operator", str(profile), str(IMAGE)]):
        r = CliRunner().invoke(main, [*args, "-o", str(out)])
        assert r.exit_code == 1 and not out.exists(), r.output
        assert f"{profile}: /restore/config_name: restore.config_name {config!r} can be no value" in r.stderr
        assert "[config-name-label]" in r.stderr  # the validation warning, with its position, came first
    assert CliRunner().invoke(main, ["export", str(profile), "-o", str(out)]).exit_code == 0  # mig-parted's own


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
    owner, config = (VERIFY_STATUS.get(v, v) for v in VERDICTS[name])
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
    ('{"kind": "Node", "metadata": {"labels": {"a": 1}}}', "/metadata/labels/a: a number, not a string"),
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
    config = tmp_path / "config.yaml"
    config.write_text(doc["data"]["config.yaml"])
    names = list(yaml.safe_load(config.read_text())["mig-configs"])
    if image == "h100-h200-inference":  # named layouts: one config per name (restore.layout)
        assert names == ["inference", "training", "all-disabled"]
    else:
        assert "nvidia.com/mig.config=current selects this layout" in r.stdout
        assert names == ["current", "all-disabled"]
    for name in names:
        ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", name])
        assert ran.rc == 0, (name, ran.text)
    ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", "all-balanced"])
    assert ran.rc != 0  # the real parser does refuse a config the file lacks


# --- the operator as it behaves: a ClusterPolicy, and the labels kubelet registered ----------------

POLICIES = REPO / "tests/fixtures/clusterpolicy"
LABELS = ("kubernetes:\n  kubelet_args_env: KUBELET_EXTRA_ARGS\n"
          "  node_labels: {nvidia.com/gpu.deploy.mig-manager: 'false'}\n")


def offline_with_policy(tmp_path: Path, node: str, policy: str) -> tuple[int, dict[str, tuple[str, str]]]:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--node-json", str(NODES / f"{node}.json"),
                                  "--cluster-policy", str(POLICIES / policy), "--json"])
    return r.exit_code, {c["check"]: (c["status"], c["detail"]) for c in json.loads(r.stdout)["checks"]}


def test_a_cluster_policy_without_mig_manager_makes_the_operator_labels_a_note(tmp_path: Path) -> None:
    code, checks = offline_with_policy(tmp_path, "operator-mig-manager-deployed", "mig-manager-disabled.yaml")
    assert code == 0
    assert checks["gpu-operator"][0] == "PASS" and "migManager.enabled=false" in checks["gpu-operator"][1]
    assert checks["mig-config"][0] == "NOTE"
    assert "(the ClusterPolicy sets migManager.enabled=false)" in checks["mig-config"][1]


def test_a_cluster_policy_with_mig_manager_keeps_the_failures(tmp_path: Path) -> None:
    code, checks = offline_with_policy(tmp_path, "operator-mig-manager-deployed", "mig-manager-default.json")
    assert code == 1
    assert checks["gpu-operator"][0] == checks["mig-config"][0] == "FAIL"
    # the fix offered survives the operator's reconcile: not "remove the label", which it undoes
    detail = checks["mig-config"][1]
    assert "removing the label does not last" in detail
    assert "nvidia.com/gpu.deploy.mig-manager=false" in detail and "migManager.enabled=false" in detail


@pytest.mark.parametrize(("text", "message"), [
    ('{"kind": "Node"}', "not one ClusterPolicy"),
    ("kind: ClusterPolicy\nspec: {migManager: {enabled: 'no'}}\n",
     "/spec/migManager/enabled: a string, not true or false"),
    ("a: &x [1]\nb: *x\n", "YAML aliases are not read"),
    ("kind: [", "not JSON or YAML"),
], ids=["not-a-policy", "enabled-not-bool", "alias", "not-yaml"])
def test_bad_cluster_policy_is_refused(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text(text)
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--node-json", str(NODES / "no-operator.json"),
                                  "--cluster-policy", str(bad)])
    assert r.exit_code == 2 and message in r.stderr, r.stderr


def test_cluster_policy_needs_node_json(tmp_path: Path) -> None:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path))
    r = CliRunner().invoke(main, ["preflight", str(profile), "--nvidia-smi-csv", str(profile),
                                  "--cluster-policy", str(POLICIES / "mig-manager-disabled.yaml")])
    assert r.exit_code == 2 and "--cluster-policy needs --node-json" in r.stderr, r.stderr


@pytest.mark.parametrize(("node", "status"), [("operator-all-disabled-mig-manager-false", "PASS"),
                                              ("operator-mig-manager-deployed", "WARN"), ("no-operator", "WARN")])
def test_node_labels_are_checked_on_the_registered_node(tmp_path: Path, node: str, status: str) -> None:
    checks = offline(tmp_path, node, extra=LABELS)
    assert checks["node-labels"][0] == status, checks["node-labels"]
    if status == "WARN":
        assert "the node lacks nvidia.com/gpu.deploy.mig-manager=false" in checks["node-labels"][1]


@pytest.mark.parametrize("node", ["operator-all-disabled-mig-manager-false", "no-operator"])
def test_scripts_and_offline_agree_on_the_node_labels(tmp_path: Path, node: str) -> None:
    live = live_checks(tmp_path, node, LABELS)
    off = offline(tmp_path, node, extra=LABELS)
    for check in ("gpu-operator", "mig-config", "node-labels"):
        assert live[check] == off[check]
    # verify: a label kubelet did not register fails the node (the restore is baked by then)
    vnode, script = good_node(tmp_path / "verify", LABELS)
    fake_kubectl(vnode.bin / "kubectl", node)
    ran = vnode.run(script)
    want = "PASS" if off["node-labels"][0] == "PASS" else "FAIL"
    assert any(line.startswith(f"{want}  node-labels: ") for line in ran.out.splitlines()), ran.out


# --- one ConfigMap for many profiles ---------------------------------------------------------------

NAMED = REPO / "images/h100-h200-inference/node-profile.yaml"  # named layouts: exported on its own (above)
IMAGES = sorted(p for p in (REPO / "images").glob("*/node-profile.yaml") if p != NAMED)


def test_the_images_export_into_one_configmap_nvidia_accepts(tmp_path: Path) -> None:
    tool = shared_file(REPO.parent / "shared/tools/nvidia-mig-parted/nvidia-mig-parted")
    out = tmp_path / "configmap.yaml"
    r = CliRunner().invoke(main, ["export", "--gpu-operator", *map(str, IMAGES), str(NAMED), "-o", str(out)])
    assert r.exit_code == 1 and "named layouts (mig.layouts: inference, training) are not yet merged" in r.stderr
    assert not out.exists()  # nothing half-written
    r = CliRunner().invoke(main, ["export", "--gpu-operator", *map(str, IMAGES), "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert len(IMAGES) == 4
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "migbake-mig-parted-config"
    config = tmp_path / "config.yaml"
    config.write_text(doc["data"]["config.yaml"])
    names = list(yaml.safe_load(config.read_text())["mig-configs"])
    # named by restore.config_name, or by the profile's name where that is the default "current"
    assert names == [p.parent.name for p in IMAGES] + ["all-disabled"]
    for name in names:
        ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", name])
        assert ran.rc == 0, (name, ran.text)
    # each config is the profile's own, as its single export has it under restore.config_name
    for image in IMAGES:
        one = CliRunner().invoke(main, ["export", str(image)])
        own = yaml.safe_load(one.stdout)["mig-configs"]["current"]
        assert yaml.safe_load(config.read_text())["mig-configs"][image.parent.name] == own


@pytest.mark.parametrize(("second", "message"), [
    ("name: other\nrestore: {config_name: a}\n", "its config would be named 'a'"),
    ("name: a\n", "its config would be named 'a'"),
    ("name: b\nrestore: {config_name: all-disabled}\n", "as the GPU Operator's default config"),
], ids=["config-name-clash", "name-clash", "all-disabled"])
def test_a_clash_in_the_shared_configmap_is_refused(tmp_path: Path, second: str, message: str) -> None:
    base = "version: 1\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
    (tmp_path / "one.yaml").write_text(base + "name: a\n")
    (tmp_path / "two.yaml").write_text(base + second)
    out = tmp_path / "configmap.yaml"
    r = CliRunner().invoke(main, ["export", "--gpu-operator", str(tmp_path / "one.yaml"), str(tmp_path / "two.yaml"),
                                  "-o", str(out)])
    assert r.exit_code == 1 and message in r.stderr and "nothing exported" in r.stderr, r.stderr
    assert not out.exists()


def test_several_profiles_need_gpu_operator(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["export", *map(str, IMAGES[:2])])
    assert r.exit_code == 2 and "several profiles need --gpu-operator" in r.stderr, r.stderr


def test_export_warns_about_a_profile_without_kubelet(tmp_path: Path) -> None:
    # a Slurm node (kubelet.present: false): the operator's mig-manager never runs there
    slurm, k8s = REPO / "images/h100-slurm/node-profile.yaml", REPO / "images/h200-inference/node-profile.yaml"
    warning = ("migbake: warning: profile h100-slurm has no kubelet (kubelet.present: false): the GPU Operator's "
               "mig-manager runs on Kubernetes nodes only")
    for profiles in ([slurm], [slurm, k8s]):
        result = CliRunner().invoke(main, ["export", "--gpu-operator", *map(str, profiles), "-o",
                                           str(tmp_path / "cm.yaml")])
        assert result.exit_code == 0, result.stderr
        assert result.stderr.count(warning) == 1, result.stderr
    result = CliRunner().invoke(main, ["export", "--gpu-operator", str(k8s)])
    assert result.exit_code == 0 and "warning" not in result.stderr, result.stderr
    result = CliRunner().invoke(main, ["export", str(slurm)])  # the plain mig-parted config: any node may use it
    assert result.exit_code == 0 and "warning" not in result.stderr, result.stderr
