"""migbake preflight --resource-slices: what the DRA driver publishes for a node, against the profile.

Fixtures: tests/fixtures/dra/ (README.md there: written from the driver's source). Ready, stranded, partial,
moved placement, dynamic; the node is chosen by --node or --node-json and other nodes' and drivers' slices
are ignored; a broken capture is a located usage error (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO, cli

FIXTURES = REPO / "tests/fixtures/dra"
H200 = """\
version: 1
name: h200-dra
kubernetes: {allocation: dra}
gpu_count: 2
gpus:
  - model: NVIDIA H200
    mig: {layout: {3g.71gb: 1, 1g.18gb: 2}}
"""
V25_8 = H200.replace("{allocation: dra}", "{allocation: dra, dra_driver_version: v25.8.1}")
STRICT_PLACEMENTS = "restore: {placements: strict}\n"
TWO_MODELS = """\
version: 1
name: h200-a100
kubernetes: {allocation: dra}
gpus:
  - model: NVIDIA H200
    mig: {layout: {3g.71gb: 1, 1g.18gb: 2}}
  - model: A100-SXM4-80GB
    mig: {layout: {1g.10gb: 7}}
"""
DYNAMIC = """\
version: 1
name: dyn
kubernetes: {allocation: dra-dynamic}
device_filter: never
gpus:
  - model: NVIDIA H200
"""


def _run(tmp_path: Path, profile: str, fixture: str, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    path = tmp_path / "p.yaml"
    path.write_text(profile)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / fixture), *extra, "--json")
    assert rc in (0, 1), (out, err)
    result = json.loads(out)
    return rc, next(c for c in result["checks"] if c["check"] == "dra-devices")


@pytest.mark.parametrize(("fixture", "rc", "status", "words"), [
    ("h200-ready.json", 0, "PASS", "publishes exactly the plan's devices on 2 GPU(s) (0, 1)"),
    ("h200-stranded.json", 1, "FAIL", "GPU 1 publishes no MIG device (stranded: MIG on with no instances"),
    ("h200-partial.json", 1, "FAIL", "GPU 1: partial layout: publishes 1x 1g.18gb, 1x 3g.71gb, the plan has "
                                     "2x 1g.18gb, 1x 3g.71gb"),
    ("h200-moved.json", 1, "FAIL", "GPU 1: moved placements: publishes gpu-1-mig-1g18gb-19-4, "
                                   "gpu-1-mig-1g18gb-19-5, gpu-1-mig-3g71gb-9-0 where the plan has "
                                   "gpu-1-mig-1g18gb-19-0, gpu-1-mig-1g18gb-19-1, gpu-1-mig-3g71gb-9-4"),
], ids=["ready", "stranded", "partial", "moved"])
def test_static_mig(tmp_path: Path, fixture: str, rc: int, status: str, words: str) -> None:
    got_rc, check = _run(tmp_path, H200, fixture, "--node", "h200-node")
    assert (got_rc, check["status"]) == (rc, status), check
    assert words in check["detail"]


def test_node_json_names_the_node(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"kind": "Node", "metadata": {"name": "other-node", "labels": {}}}))
    rc, check = _run(tmp_path, H200, "h200-ready.json", "--node-json", str(node))
    # other-node publishes one whole-GPU 7g instance only: GPU 0 partial, GPU 1 stranded
    assert rc == 1 and "GPU 0: partial layout: publishes 1x 7g.141gb" in check["detail"]
    assert "GPU 1 publishes no MIG device" in check["detail"]


@pytest.mark.parametrize(("fixture", "rc", "status"), [("dynamic-ready.json", 0, "PASS"),
                                                        ("dynamic-static-left.json", 1, "FAIL")],
                         ids=["dynamic-ready", "dynamic-static-left"])
def test_dynamic(tmp_path: Path, fixture: str, rc: int, status: str) -> None:
    got_rc, check = _run(tmp_path, DYNAMIC, fixture, "--node", "dyn-node")
    assert (got_rc, check["status"]) == (rc, status), check
    if status == "FAIL":
        assert "publishes static MIG devices (gpu-0-mig-1g10gb-19-0)" in check["detail"]


@pytest.mark.parametrize(("content", "message"), [
    ("[1, 2]", "not a List of ResourceSlices"),
    ("[" * 100000, "nested too deep"),
    ('{"kind": "List", "items": [{"kind": "ResourceSlice", "spec": {"driver": "gpu.nvidia.com", "nodeName": "n",'
     ' "pool": {"name": "n", "generation": 1}, "devices": [{"name": 7}]}}]}',
     "/items/0/spec/devices/0/name: not a device name"),
    ('{"kind": "List", "items": [{"kind": "Pod", "spec": {}}]}', "/items/0: not a ResourceSlice"),
], ids=["not-a-list", "too-deep", "bad-name", "not-a-slice"])
def test_untrusted_capture_is_a_located_usage_error(tmp_path: Path, content: str, message: str) -> None:
    path, slices = tmp_path / "p.yaml", tmp_path / "s.json"
    path.write_text(H200)
    slices.write_text(content)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(slices), "--node", "n")
    assert rc == 2 and message in err and "Traceback" not in err, (out, err)


def test_usage(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(H200)
    rc, _, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / "h200-ready.json"))
    assert rc == 2 and "needs --node NAME or --node-json FILE" in err
    path.write_text(H200.replace("kubernetes: {allocation: dra}\n", ""))
    rc, _, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / "h200-ready.json"), "--node", "n")
    assert rc == 2 and "kubernetes.allocation is device-plugin" in err


def test_a_gpu_cluster_is_a_note_no_mig_manager(tmp_path: Path) -> None:
    """NVIDIA/gpu-operator v26.7.0: GPUCluster (nvidia.com/v1alpha1, singleton gpu-cluster) runs no MIG manager."""
    path, node, policy = tmp_path / "p.yaml", tmp_path / "node.json", tmp_path / "gc.json"
    path.write_text(H200)
    node.write_text(json.dumps({"kind": "Node", "metadata": {"name": "h200-node",
                                                             "labels": {"nvidia.com/mig.config": "all-disabled"}}}))
    policy.write_text(json.dumps({"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
                                  "metadata": {"name": "gpu-cluster"}, "spec": {"draDriver": {"version": "v0.4.0"}}}))
    rc, out, err = cli("preflight", str(path), "--node-json", str(node), "--cluster-policy", str(policy), "--json")
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert rc == 0, (out, err)
    assert checks["gpu-cluster"]["status"] == "NOTE" and "runs no MIG manager" in checks["gpu-cluster"]["detail"]
    assert checks["mig-config"]["status"] == "NOTE"  # the operator's label acts on nothing here
    # worded for a GPUCluster, not for a ClusterPolicy's migManager.enabled=false
    for name in ("gpu-operator", "mig-config"):
        assert "the GPU Operator's DRA stack (GPUCluster) runs no MIG manager" in checks[name]["detail"], checks
        assert "ClusterPolicy" not in checks[name]["detail"] and "migManager" not in checks[name]["detail"]
    assert "a GPUCluster reads no nvidia.com/mig.config label" in checks["mig-config"]["detail"]


def test_export_gpu_operator_refuses_dra(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(H200)
    rc, out, err = cli("export", "--gpu-operator", str(path))
    assert rc == 2 and out == "" and "has no MIG manager to feed a ConfigMap to" in err
    rc, out, _ = cli("export", str(path))
    assert rc == 0 and "3g.71gb: 1" in out


V25_8_WORDS = "device names: the form of DRA driver v25.3.0 to v25.8.1"


@pytest.mark.parametrize(("profile", "fixture", "rc", "status", "words", "absent"), [
    (H200, "h200-ready-v25.8.1.json", 0, "PASS", f"on 2 GPU(s) (0, 1); {V25_8_WORDS} (the profile expects the names "
     "of DRA driver v25.12.0 and later: set kubernetes.dra_driver_version", ""),
    (V25_8, "h200-ready-v25.8.1.json", 0, "PASS", f"on 2 GPU(s) (0, 1); {V25_8_WORDS}", "the profile expects"),
    (V25_8, "h200-ready.json", 0, "PASS", "v25.12.0 and later (the profile expects the names of DRA driver v25.3.0 "
     "to v25.8.1", ""),
    (H200, "h200-moved-v25.8.1.json", 1, "FAIL", "moved placements: publishes gpu-1-mig-19-4-1, gpu-1-mig-19-5-1, "
     "gpu-1-mig-9-0-4 where the plan has gpu-1-mig-19-0-1, gpu-1-mig-19-1-1, gpu-1-mig-9-4-4", "GPU 0"),
    (H200, "h200-ready-renamed.json", 0, "PASS", "6 device(s) read by attributes (profile, memory slices)", ""),
    (H200 + STRICT_PLACEMENTS, "h200-ready-v25.8.1.json", 0, "PASS", f"on 2 GPU(s) (0, 1); {V25_8_WORDS}", "moved"),
    (V25_8 + STRICT_PLACEMENTS, "h200-ready-v25.8.1.json", 0, "PASS", f"on 2 GPU(s) (0, 1); {V25_8_WORDS}",
     "the profile expects"),
    (H200 + STRICT_PLACEMENTS, "h200-moved-v25.8.1.json", 1, "FAIL", "moved placements: publishes gpu-1-mig-19-4-1, "
     "gpu-1-mig-19-5-1, gpu-1-mig-9-0-4 where the plan has gpu-1-mig-19-0-1, gpu-1-mig-19-1-1, gpu-1-mig-9-4-4",
     "GPU 0"),
    (V25_8 + STRICT_PLACEMENTS, "h200-moved-v25.8.1.json", 1, "FAIL", "moved placements: publishes "
     "gpu-1-mig-19-4-1, gpu-1-mig-19-5-1, gpu-1-mig-9-0-4 where the plan has gpu-1-mig-19-0-1", "GPU 0"),
], ids=["v25.8.1-default", "v25.8.1-said", "v25.12-on-v25.8.1-profile", "v25.8.1-moved", "attributes",
        "v25.8.1-strict", "v25.8.1-said-strict", "v25.8.1-moved-strict", "v25.8.1-said-moved-strict"])
def test_both_namings(tmp_path: Path, profile: str, fixture: str, rc: int, status: str, words: str,
                      absent: str) -> None:
    """A node of DRA driver v25.8.1 that publishes the plan's placements is READY; the verdict says
    which naming the node publishes, and a name neither form reads is matched by its attributes."""
    got_rc, check = _run(tmp_path, profile, fixture, "--node", "h200-node")
    assert (got_rc, check["status"]) == (rc, status), check
    assert words in check["detail"]
    assert not absent or absent not in check["detail"]


def test_only_the_newest_pool_generation_counts(tmp_path: Path) -> None:
    """Generation 1 (GPU 1 partial) beside generation 2 (ready): only the newest counts (types.go)."""
    rc, check = _run(tmp_path, H200, "h200-generations.json", "--node", "h200-node")
    assert (rc, check["status"]) == (0, "PASS"), check


@pytest.mark.parametrize(("extra", "rc", "status", "words"), [
    ("", 0, "WARN", "exactly the plan's devices on 2 GPU(s) (0, 1)"),
    ("gpu_count: 2\n", 0, "PASS", "exactly the plan's devices on 2 GPU(s) (0, 1)"),
    ("gpu_count: 3\n", 1, "FAIL", "GPU 2 publishes no device (stranded"),
], ids=["uncounted", "counted", "one-missing"])
def test_two_models_each_entry_its_own_gpus(tmp_path: Path, extra: str, rc: int, status: str, words: str) -> None:
    """An H200 entry and an A100 entry, devices all: each entry is compared with its model's GPUs."""
    got_rc, check = _run(tmp_path, TWO_MODELS.replace("gpus:", extra + "gpus:"), "h200-a100.json",
                         "--node", "mixed-node")
    assert (got_rc, check["status"]) == (rc, status), check
    assert words in check["detail"] and "partial layout" not in check["detail"]


def test_a_node_without_slices_is_named_so(tmp_path: Path) -> None:
    """--node naming a node absent from the capture says so, not 'stranded'."""
    for profile in (H200, DYNAMIC):
        rc, check = _run(tmp_path, profile, "h200-ready.json", "--node", "absent-node")
        assert rc == 1 and check["detail"].startswith("no slices for node absent-node"), check
        assert "stranded" not in check["detail"]


ITEM = '{"kind": "List", "items": [{"kind": "ResourceSlice", "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", ' \
       '"pool": {"name": "n", "generation": 1}, "devices": [{"name": "gpu-0-mig-1g18gb-19-0", "attributes": %s}]}}]}'


@pytest.mark.parametrize(("content", "message"), [
    (ITEM % '[{"type": "mig"}]', "/items/0/spec/devices/0/attributes: not a map of attribute names"),
    (ITEM % '{"type": "mig"}', "/items/0/spec/devices/0/attributes/type: not a device attribute"),
    (ITEM % '{"profile": {"string": 3}}', "/attributes/profile: not a device attribute"),
    (ITEM % '{"type": {"string": "mig", "int": 1}}', "/attributes/type: not a device attribute"),
    (ITEM.replace('"gpu-0-mig-1g18gb-19-0"', '"GPU-0"') % "{}", "/devices/0/name: not a device name (a DNS label"),
    (ITEM.replace('"generation": 1', '"generation": "1"') % "{}", "/items/0/spec/pool: not a pool"),
    (ITEM.replace(', "pool": {"name": "n", "generation": 1}', "") % "{}", "/items/0/spec/pool: not a pool"),
], ids=["attributes-list", "bare-string", "string-of-int", "two-kinds", "name-not-a-label", "generation-string",
        "no-pool"])
def test_attribute_shapes_are_located_usage_errors(tmp_path: Path, content: str, message: str) -> None:
    """Attributes of the wrong shape are a located error (exit 2), not a stranded or partial node."""
    path, slices = tmp_path / "p.yaml", tmp_path / "s.json"
    path.write_text(H200)
    slices.write_text(content)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(slices), "--node", "n")
    assert rc == 2 and message in err and "Traceback" not in err, (out, err)


@pytest.mark.parametrize("node", ["", "Node_1", "a" * 254, "-a", "n\n"])
def test_a_node_name_that_cannot_be_one_is_a_usage_error(tmp_path: Path, node: str) -> None:
    """--node '' or any name no Node can have is a usage error (exit 2), never a traceback."""
    path = tmp_path / "p.yaml"
    path.write_text(H200)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / "h200-ready.json"), "--node", node)
    assert rc == 2 and "not a node name" in err and "Traceback" not in err, (out, err)
