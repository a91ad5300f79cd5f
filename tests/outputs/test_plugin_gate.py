"""OUT/kubernetes/gate/ (target kubernetes-gate): the admission policies that hold the GPU plugins' pods.

kubernetes-validate (strict) accepts the MutatingAdmissionPolicy and its binding under Kubernetes 1.36; the
policy's match conditions, evaluated by cel-python, select the pods of the gated plugins (the GPU Operator's
operands and the pods of NVIDIA's device plugin and DRA driver charts, written below from their templates) and
no other pod; the init container's script passes at once on a node that is not migbake's, and waits for the
ready file on one that is.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO
from test_dra_claims import judge

from migbake.profile.nodeprofile import Gate, build_profile
from migbake.render.environment import Templates
from migbake.render.plan import make_plan
from migbake.render.targets.kubernetes import wait_script
from migbake.render.tree import render_plan

IMAGE = REPO / "images/h200-inference/node-profile.yaml"


def gated_profile(**gate: Any) -> Any:
    """The example profile with a driver container (and ``gate`` settings)."""
    text = IMAGE.read_text()
    profile = build_profile(yaml.safe_load(text), text)
    return replace(profile, driver="container", gate=Gate(**gate))


def gate_files(profile: Any) -> dict[str, str]:
    return {a.path: a.content for a in render_plan(make_plan(profile)) if a.path.startswith("kubernetes/gate/")}


def ds_pod(labels: dict[str, str], containers: list[str], owner: str = "DaemonSet") -> dict[str, Any]:
    """A pod as the API server receives it on creation (no name yet, the controller's reference)."""
    meta: dict[str, Any] = {"generateName": "x-", "namespace": "gpu-operator", "labels": labels}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1" if owner == "DaemonSet" else "batch/v1", "kind": owner,
                                    "name": "x", "uid": "1", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"initContainers": [{"name": "toolkit-validation", "image": "i"}],
                     "containers": [{"name": c, "image": "i"} for c in containers]}}


GO = "NVIDIA/gpu-operator@v26.7.0"
# (id, pod, the gate.plugins entry that holds it, or None). Each pod carries the labels and container names the
# cited template gives its pods.
PODS: list[tuple[str, dict[str, Any], str | None]] = [
    # GO:assets/state-device-plugin/0500_daemonset.yaml
    ("go-device-plugin", ds_pod({"app": "nvidia-device-plugin-daemonset"}, ["nvidia-device-plugin"]), "device-plugin"),
    # GO:assets/gpu-feature-discovery/0500_daemonset.yaml
    ("go-gfd", ds_pod({"app": "gpu-feature-discovery"}, ["gpu-feature-discovery"]), "gpu-feature-discovery"),
    # GO:assets/state-dcgm/0400_dcgm.yml, manifests/state-dcgm/0500_daemonset.yaml
    ("go-dcgm", ds_pod({"app": "nvidia-dcgm"}, ["nvidia-dcgm-ctr"]), "dcgm"),
    ("go-dcgm-dra", ds_pod({"app": "nvidia-dcgm-dra"}, ["nvidia-dcgm-ctr"]), "dcgm"),
    # GO:assets/state-dcgm-exporter/0800_daemonset.yaml
    ("go-dcgm-exporter", ds_pod({"app": "nvidia-dcgm-exporter"}, ["nvidia-dcgm-exporter"]), "dcgm-exporter"),
    # GO:assets/state-mps-control-daemon/0400_daemonset.yaml
    ("go-mps", ds_pod({"app": "nvidia-device-plugin-mps-control-daemon"}, ["mps-control-daemon-ctr"]),
     "mps-control-daemon"),
    # GO:assets/state-operator-validation/0500_daemonset.yaml
    ("go-validator", ds_pod({"app": "nvidia-operator-validator"}, ["nvidia-operator-validator"]), "validator"),
    # GO:manifests/state-dra-driver/0500_daemonset.yaml
    ("go-dra-plugin", ds_pod({"app.kubernetes.io/name": "nvidia-dra-driver",
                              "app.kubernetes.io/component": "nvidia-dra-driver-kubelet-plugin",
                              "app": "nvidia-dra-driver-kubelet-plugin"}, ["gpus"]), "dra-kubelet-plugin"),
    # NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin/templates/daemonset-*.yml (one label
    # for the three DaemonSets, templates/_helpers.tpl templateLabels)
    ("chart-device-plugin", ds_pod({"app.kubernetes.io/name": "nvidia-device-plugin",
                                    "app.kubernetes.io/instance": "nvdp"}, ["nvidia-device-plugin-ctr"]),
     "device-plugin"),
    ("chart-gfd", ds_pod({"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"},
                         ["gpu-feature-discovery-ctr"]), "gpu-feature-discovery"),
    ("chart-mps", ds_pod({"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"},
                         ["mps-control-daemon-ctr"]), "mps-control-daemon"),
    # kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1:deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml
    ("chart-dra-plugin", ds_pod({"app.kubernetes.io/name": "dra-driver-nvidia-gpu",
                                 "dra-driver-nvidia-gpu-component": "kubelet-plugin"}, ["compute-domains", "gpus"]),
     "dra-kubelet-plugin"),
    # ...@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml
    ("chart-dra-plugin-v25", ds_pod({"app.kubernetes.io/name": "nvidia-dra-driver-gpu",
                                     "nvidia-dra-driver-gpu-component": "kubelet-plugin"}, ["gpus"]),
     "dra-kubelet-plugin"),
    # not held: kube-proxy, the driver itself (GO:assets/state-driver/0500_daemonset.yaml), the MIG manager
    # (GO:assets/state-mig-manager/0600_daemonset.yaml), the toolkit, the DRA controller (a Deployment), a
    # user's pods
    ("kube-proxy", ds_pod({"k8s-app": "kube-proxy"}, ["kube-proxy"]), None),
    ("driver", ds_pod({"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
                      ["nvidia-driver-ctr"]), None),
    ("mig-manager", ds_pod({"app": "nvidia-mig-manager"}, ["nvidia-mig-manager"]), None),
    ("toolkit", ds_pod({"app": "nvidia-container-toolkit-daemonset"}, ["nvidia-container-toolkit-ctr"]), None),
    ("dra-controller", ds_pod({"dra-driver-nvidia-gpu-component": "controller"}, ["compute-domain"],
                              owner="ReplicaSet"), None),
    ("user-nvidia-app", ds_pod({"app": "nvidia-smi-job"}, ["cuda"], owner=""), None),
    ("user-copy-of-labels", ds_pod({"app": "nvidia-device-plugin-daemonset"}, ["x"], owner="Job"), None),
    ("chart-label-other-container", ds_pod({"app.kubernetes.io/name": "nvidia-device-plugin"}, ["sidecar"]), None),
    ("no-labels", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}}, None),
]


def policy_docs(files: dict[str, str]) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files["kubernetes/gate/mutating-admission-policy.yaml"]) if d]


def test_the_policies_pass_the_kubernetes_schemas() -> None:
    kv = judge("kubernetes_validate")
    from kubernetes_validate.utils import ValidationError

    docs = policy_docs(gate_files(gated_profile()))
    assert [d["kind"] for d in docs] == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    for doc in docs:
        kv.validate(doc, "1.36.0", strict=True)
    broken = {**docs[0], "spec": {**docs[0]["spec"], "mutations": [{"applyConfiguration": {"expresion": "x"}}]}}
    with pytest.raises(ValidationError):
        kv.validate(broken, "1.36.0", strict=True)


def _selected(files: dict[str, str], pod: dict[str, Any]) -> bool:
    celpy = judge("celpy")
    env = celpy.Environment()
    activation = {"object": celpy.json_to_cel(pod)}
    for cond in policy_docs(files)[0]["spec"]["matchConditions"]:  # all true, in order; a false one skips
        if not bool(env.program(env.compile(cond["expression"])).evaluate(activation)):
            return False
    return True


@pytest.mark.parametrize(("pod", "plugin"), [(p, g) for _, p, g in PODS], ids=[i for i, _, _ in PODS])
def test_the_policy_selects_exactly_the_gated_plugins_pods(pod: dict[str, Any], plugin: str | None) -> None:
    default = gate_files(gated_profile())
    dra = gate_files(replace(gated_profile(), kubernetes=replace(gated_profile().kubernetes, allocation="dra")))
    assert _selected(dra, pod) is (plugin is not None)
    assert _selected(default, pod) is (plugin is not None and plugin != "dra-kubelet-plugin")
    if plugin is not None:  # gate.plugins narrows it
        others = tuple(p for _, _, p in PODS if p not in (None, plugin))
        assert not _selected(gate_files(gated_profile(plugins=tuple(dict.fromkeys(others)))), pod)
        assert _selected(gate_files(gated_profile(plugins=(plugin,))), pod)
        gated = {**pod, "spec": {**pod["spec"], "initContainers": [{"name": "migbake-wait", "image": "i"}]}}
        assert not _selected(dra, gated)  # once


def test_no_gate_for_a_host_driver() -> None:
    text = IMAGE.read_text()
    assert gate_files(build_profile(yaml.safe_load(text), text)) == {}


def test_the_injected_script_is_the_template_and_the_image_is_set() -> None:
    files = gate_files(gated_profile(wait_image="registry.example/tools/busybox:1.37.0"))
    script = wait_script(Templates({}), "/host/etc/migbake/managed", "/host/run/migbake/mig-ready")
    kyverno = next(d for d in yaml.safe_load_all(files["kubernetes/gate/kyverno-clusterpolicy.yaml"]) if d)
    assert files["kubernetes/gate/migbake-wait.sh"] == script
    for rule in kyverno["spec"]["rules"]:
        (container,) = rule["mutate"]["patchStrategicMerge"]["spec"]["initContainers"]
        assert container["command"] == ["sh", "-c", script]
        assert container["image"] == "registry.example/tools/busybox:1.37.0"
    celpy = judge("celpy")
    expression = policy_docs(files)[0]["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    env = celpy.Environment()
    env.compile(expression)  # CEL that parses
    literal = expression.split('command: ["sh", "-c", ', 1)[1].split("],\n", 1)[0]
    assert env.program(env.compile(literal)).evaluate({}) == script


def _run(script: str, timeout: float) -> subprocess.Popen[str]:
    return subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_the_wait_step_passes_on_a_node_that_is_not_ours_and_waits_on_ours(tmp_path: Path) -> None:
    managed, ready = tmp_path / "etc/managed", tmp_path / "run/mig-ready"
    script = wait_script(Templates({}), str(managed), str(ready)).replace("sleep 5", "sleep 0.2")
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0 and "does not restore MIG on this node" in done.stdout
    managed.parent.mkdir()
    managed.write_text("")
    waiting = _run(script, 10)
    time.sleep(1)
    assert waiting.poll() is None  # held while the layout is not restored
    ready.parent.mkdir()
    ready.write_text("layout=all-1g.18gb\n")
    out, _ = waiting.communicate(timeout=10)
    assert waiting.returncode == 0 and "layout=all-1g.18gb" in out
