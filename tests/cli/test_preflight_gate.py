"""`migbake preflight --gate-policies FILE` for a node whose driver is a container: is the GPU plugins' gate installed?

The inputs are what kubectl lists, built from migbake's own generated policies (``migbake generate`` of the
example image and of variants with other gate.plugins or another wait image), with fields beside them of the kinds
a stored object gains (metadata, selector and scope defaults, Kyverno's ``admission``, default true per kyverno.io's
"Policy Settings" page), which the check must not count as differences. Cases: installed, a binding missing,
another plugins list, another image, the Kyverno form, none at all, and the GPU Operator's ClusterPolicy given by
mistake; from a pipe too. With --node-json the watcher's labels (migbake.io/mig-state) are read.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO, cli, migbake_shell

IMAGE = REPO / "images/gpu-operator-h100/node-profile.yaml"  # driver: container, the default gate.plugins
HOST = REPO / "images/h200-inference/node-profile.yaml"
GATE = "kubernetes/gate"
ALL = "device-plugin, gpu-feature-discovery, dcgm, dcgm-exporter, mps-control-daemon, validator"
SERVER = {"uid": "6f1c", "resourceVersion": "4711", "generation": 1, "creationTimestamp": "2026-12-07T10:00:00Z",
          "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}]}


def _generated(tmp_path: Path, name: str, extra: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The policy and binding, and the Kyverno policy, that ``migbake generate`` writes for the image (+ ``extra``),
    each with what the API server adds to a stored object."""
    profile = tmp_path / f"{name}.yaml"
    profile.write_text(IMAGE.read_text() + extra)
    code, out, err = cli("generate", str(profile), "-o", str(tmp_path / name))
    assert code == 0, out + err
    policy, binding = yaml.safe_load_all((tmp_path / name / GATE / "mutating-admission-policy.yaml").read_text())
    kyverno = yaml.safe_load((tmp_path / name / GATE / "kyverno-clusterpolicy.yaml").read_text())
    for obj in (policy, binding, kyverno):
        obj["metadata"].update(copy.deepcopy(SERVER))
    constraints = policy["spec"]["matchConstraints"]
    constraints.update({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}})
    constraints["resourceRules"][0]["scope"] = "*"
    binding["spec"]["matchResources"] = {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}}
    kyverno["spec"].update({"admission": True, "emitWarning": False})
    for rule in kyverno["spec"]["rules"]:
        rule["skipBackgroundRequests"] = True
    return [policy, binding], kyverno


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return _generated(tmp_path_factory.mktemp("gate"), "ours")


def _list(tmp_path: Path, items: list[dict[str, Any]], name: str = "gate.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}))
    return path


def _gate(*args: str, profile: Path = IMAGE) -> tuple[int, dict[str, tuple[str, str]], str]:
    code, out, err = cli("preflight", str(profile), *args, "--json")
    rows = {c["check"]: (c["status"], c["detail"]) for c in json.loads(out)["checks"]} if out else {}
    return code, rows, err


def test_the_installed_policy_and_binding_pass(ours: Any, tmp_path: Path) -> None:
    code, rows, err = _gate("--gate-policies", str(_list(tmp_path, ours[0])))
    assert code == 0, err
    assert rows["gate"] == ("PASS", "the MutatingAdmissionPolicy and binding migbake-wait-for-mig are installed as "
                                    f"migbake renders them for this profile (they hold the pods of {ALL})")
    said = json.loads(cli("preflight", str(IMAGE), "--gate-policies", str(tmp_path / "gate.json"), "--json")[1])
    assert said["source"] == "gate-policies" and said["file"].endswith("gate.json")


def test_a_missing_binding_is_named_with_what_to_apply(ours: Any, tmp_path: Path) -> None:
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, ours[0][:1])))
    assert code == 1
    status, detail = rows["gate"]
    assert status == "FAIL"
    assert detail.startswith("no MutatingAdmissionPolicyBinding migbake-wait-for-mig (without it the policy holds no "
                             "pod)"), detail
    assert detail.endswith(": kubectl apply -f OUT/kubernetes/gate/mutating-admission-policy.yaml"), detail


@pytest.mark.parametrize("form", ["policy", "kyverno"])
def test_another_plugins_list_is_said_in_the_profiles_words(ours: Any, tmp_path: Path, form: str) -> None:
    maps, kyverno = _generated(tmp_path, "fewer", "gate:\n  plugins: [device-plugin, gpu-feature-discovery]\n")
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, maps if form == "policy" else [kyverno])))
    assert code == 1
    what = ("the MutatingAdmissionPolicy migbake-wait-for-mig" if form == "policy"
            else "the Kyverno ClusterPolicy migbake-wait-for-mig")
    fix = "mutating-admission-policy.yaml" if form == "policy" else "kyverno-clusterpolicy.yaml"
    assert rows["gate"] == ("FAIL", f"{what} holds the pods of device-plugin, gpu-feature-discovery; this profile's "
                                    f"gate holds {ALL} (gate.plugins) ({tmp_path / 'gate.json'}): kubectl apply -f "
                                    f"OUT/kubernetes/gate/{fix}")


def test_another_wait_image_is_named(tmp_path: Path) -> None:
    maps, _ = _generated(tmp_path, "mirror", "gate:\n  wait_image: registry.example/busybox:1.37.0\n")
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, maps)))
    assert code == 1
    status, detail = rows["gate"]
    assert status == "FAIL" and "init container runs registry.example/busybox:1.37.0; this profile's is " \
        "docker.io/library/busybox:1.37.0@sha256:" in detail and "(gate.wait_image)" in detail, detail


def test_the_kyverno_form_passes(ours: Any, tmp_path: Path) -> None:
    code, rows, err = _gate("--gate-policies", str(_list(tmp_path, [ours[1]])))
    assert code == 0, err
    assert rows["gate"] == ("PASS", "the Kyverno ClusterPolicy migbake-wait-for-mig is installed as migbake renders "
                                    f"it for this profile (it holds the pods of {ALL})")


def test_an_edited_kyverno_rule_is_found(ours: Any, tmp_path: Path) -> None:
    kyverno = copy.deepcopy(ours[1])
    kyverno["spec"]["rules"].pop()
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, [kyverno])))
    assert code == 1 and rows["gate"][0] == "FAIL"
    assert "selects pods as no gate.plugins of this migbake does" in rows["gate"][1], rows["gate"]


@pytest.mark.parametrize("items", [[], [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                         "metadata": {"name": "cluster-policy"}, "spec": {}}]],
                         ids=["empty", "gpu-operator-clusterpolicy"])
def test_no_gate_says_both_ways_to_install_it(tmp_path: Path, items: list[dict[str, Any]]) -> None:
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, items)))
    assert code == 1
    status, detail = rows["gate"]
    assert status == "FAIL" and detail.startswith(
        f"the gate is not installed: {tmp_path / 'gate.json'} holds neither the MutatingAdmissionPolicy and binding "
        "migbake-wait-for-mig nor the Kyverno ClusterPolicy migbake-wait-for-mig"), detail
    assert "kubectl apply -f OUT/kubernetes/gate/mutating-admission-policy.yaml (Kubernetes 1.36 or later), or " \
        "with Kyverno kubectl apply -f OUT/kubernetes/gate/kyverno-clusterpolicy.yaml" in detail
    assert ("holds the GPU Operator's ClusterPolicy, not Kyverno's" in detail) == bool(items)


def test_without_the_option_the_gate_is_not_checked(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"kind": "Node", "metadata": {"name": "n1", "labels": {}}}))
    code, rows, _ = _gate("--node-json", str(node))
    assert code == 0
    status, detail = rows["gate"]
    assert status == "SKIP" and detail.startswith("not checked: give --gate-policies FILE"), detail
    assert "kubectl get mutatingadmissionpolicies,mutatingadmissionpolicybindings -o json" in detail
    _, host, _ = _gate("--node-json", str(node), profile=HOST)
    assert "gate" not in host and "mig-ready" not in host  # a host driver's node: kubelet waits, no gate


def test_a_host_driver_profile_refuses_the_option(ours: Any, tmp_path: Path) -> None:
    code, out, err = cli("preflight", str(HOST), "--gate-policies", str(_list(tmp_path, ours[0])))
    assert code == 2 and "--gate-policies checks the gate that holds the GPU plugins" in err, out + err


@pytest.mark.parametrize(("doc", "said"), [
    ({"kind": "List", "items": ["x"]}, "/items/0: a string, not an object"),
    ({"kind": "List", "items": [{"kind": "MutatingAdmissionPolicy", "apiVersion": "admissionregistration.k8s.io/v1",
                                 "metadata": {}}]}, "/items/0/metadata/name: not a string"),
    ([1, 2], "not a List of Kubernetes objects"),
], ids=["item-not-object", "no-name", "not-a-list"])
def test_a_malformed_file_is_a_located_usage_error(tmp_path: Path, doc: Any, said: str) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(doc))
    code, out, err = cli("preflight", str(IMAGE), "--gate-policies", str(path))
    assert code == 2 and f"{path}: {said}" in err and "Traceback" not in err, out + err


def test_from_a_pipe(ours: Any, tmp_path: Path) -> None:
    _list(tmp_path, ours[0])
    run = subprocess.run(["bash", "-c", migbake_shell(f"migbake preflight {IMAGE} --gate-policies <(cat gate.json) "
                                                      "--json")], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "generator")}, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    rows = {c["check"]: c["status"] for c in json.loads(run.stdout)["checks"]}
    assert rows["gate"] == "PASS"


@pytest.mark.parametrize(("labels", "status", "words"), [
    ({"migbake.io/mig-state": "ready", "migbake.io/mig-ready": "0123456789abcdef"}, "PASS",
     "migbake.io/mig-state=ready, migbake.io/mig-ready=0123456789abcdef"),
    ({"migbake.io/mig-state": "failed"}, "FAIL", "journalctl -u migbake-driver-watch.service on the node"),
    ({"migbake.io/mig-state": "ready"}, "WARN", "the driver container went away since"),
    ({}, "NOTE", "no migbake.io/mig-state label: the watcher (migbake-driver-watch.service) has not restored"),
    ({"migbake.io/mig-state": "busy"}, "WARN", "not a value the watcher writes"),
], ids=["ready", "failed", "driver-gone", "none-yet", "unknown"])
def test_the_watchers_labels(tmp_path: Path, labels: dict[str, str], status: str, words: str) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"kind": "Node", "metadata": {"name": "n1", "labels": labels}}))
    code, rows, _ = _gate("--node-json", str(node))
    assert rows["mig-ready"][0] == status and words in rows["mig-ready"][1], rows["mig-ready"]
    assert code == (1 if status == "FAIL" else 0)


def test_without_the_node_the_labels_are_not_checked(ours: Any, tmp_path: Path) -> None:
    _, rows, _ = _gate("--gate-policies", str(_list(tmp_path, ours[0])))
    assert rows["mig-ready"] == ("SKIP", "no --node-json given (kubectl get node NAME -o json)")


def test_a_binding_of_another_policy_is_said(ours: Any, tmp_path: Path) -> None:
    policy, binding = copy.deepcopy(ours[0])
    binding["spec"]["policyName"] = "another"
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, [policy, binding])))
    assert code == 1
    assert rows["gate"][1].startswith('the MutatingAdmissionPolicyBinding migbake-wait-for-mig: /spec/policyName is '
                                      '"another", migbake renders "migbake-wait-for-mig"'), rows["gate"]


def test_both_forms_installed_pass_and_say_one_is_enough(ours: Any, tmp_path: Path) -> None:
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, [*ours[0], ours[1]])))
    assert code == 0 and rows["gate"][0] == "PASS"
    assert rows["gate"][1].endswith("; the Kyverno ClusterPolicy too (one of the two is enough)"), rows["gate"]


def test_another_wait_image_in_the_kyverno_form_is_named(tmp_path: Path) -> None:
    _, kyverno = _generated(tmp_path, "mirror", "gate:\n  wait_image: registry.example/busybox:1.37.0\n")
    code, rows, _ = _gate("--gate-policies", str(_list(tmp_path, [kyverno])))
    assert code == 1 and "init container runs registry.example/busybox:1.37.0; this profile's is" in rows["gate"][1]


def test_hostile_shapes_are_differences_not_crashes(ours: Any, tmp_path: Path) -> None:
    """Fields of the wrong type, and a patch string that is a YAML alias bomb, are compared, never parsed."""
    policy, binding = copy.deepcopy(ours[0])
    policy["spec"]["matchConditions"] = 5
    kyverno = copy.deepcopy(ours[1])
    kyverno["spec"]["rules"][0]["match"]["any"] = 5
    kyverno["spec"]["rules"][0]["mutate"]["patchesJson6902"] = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n" * 50
    code, rows, err = _gate("--gate-policies", str(_list(tmp_path, [policy, binding, kyverno])))
    assert code == 1 and rows["gate"][0] == "FAIL" and "Traceback" not in err, err
    assert "the MutatingAdmissionPolicy migbake-wait-for-mig selects pods as no gate.plugins" in rows["gate"][1]
    assert "the Kyverno ClusterPolicy migbake-wait-for-mig selects pods as no gate.plugins" in rows["gate"][1]
