"""``kubernetes.startup_taint``: the NodePools' startup taint, the NodeReadinessRule that lifts it, and the node
condition the restore sets.

The NodePools are judged by the NodePool CRD (aws/karpenter-provider-aws v1.14.1) and the rule by the
NodeReadinessRule CRD (kubernetes-sigs/node-readiness-controller v0.5.0), schemas and CEL rules
(tests/fixtures/crds/). The restore's condition update runs the real kubectl against an API server on loopback
that records the exchange: the method, path, content type and body of the status patch, on the Node that kubelet's
arguments name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import cel_errors, judge
from realtools import require, shellcheck
from support import IMAGES, WORLD, generate
from test_restore_script import H200, make_node

PROFILE = next(i for i in IMAGES if i.name == "h100-h200-inference") / "node-profile.yaml"
TAINT = {"key": "readiness.k8s.io/mig-not-ready", "value": "pending", "effect": "NoSchedule"}
CONDITION = "migbake.io/MIGReady"
NODE = "ip-10-0-0-1.ec2.internal"
_NODE_OBJECT = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def _eks(startup: bool) -> str:
    text = PROFILE.read_text().replace("layout: kubeadm", "layout: eks-al2023")
    if not startup:
        return text
    return text.replace("  mig_strategy: mixed\n", "  mig_strategy: mixed\n  startup_taint: true\n")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(_eks(True), tmp_path_factory.mktemp("startup") / "out")


def test_the_nodepools_carry_the_startup_taint(out: Path) -> None:
    for pool in _docs(out / "karpenter/nodepools.yaml"):
        assert pool["spec"]["template"]["spec"]["startupTaints"] == [TAINT]
        assert judge(pool, "nodepool-v1") == []
        assert cel_errors(pool, "nodepool-v1")[0] == []


def test_the_restore_with_the_condition_update_passes_shellcheck(out: Path) -> None:
    ran = shellcheck([out / "rootfs/etc/nvidia-mig/restore.sh"])
    assert ran.rc == 0, ran.text


def test_without_the_key_no_taint_and_no_rule(tmp_path: Path) -> None:
    plain = generate(_eks(False), tmp_path / "out")
    assert all("startupTaints" not in p["spec"]["template"]["spec"] for p in _docs(plain / "karpenter/nodepools.yaml"))
    assert not (plain / "karpenter/nodereadinessrule.yaml").exists()
    assert "kubectl" not in (plain / "rootfs/etc/nvidia-mig/restore.sh").read_text()


def test_the_rule_lifts_that_taint_on_that_condition_on_the_pools_nodes(out: Path) -> None:
    (rule,) = _docs(out / "karpenter/nodereadinessrule.yaml")
    assert rule["apiVersion"] == "readiness.node.x-k8s.io/v1alpha1" and rule["kind"] == "NodeReadinessRule"
    assert judge(rule, "nodereadinessrule-v1alpha1") == []
    errors, evaluated = cel_errors(rule, "nodereadinessrule-v1alpha1")
    assert errors == [] and evaluated >= 7, (errors, evaluated)  # the taint's rules (its key, value, effect)
    spec = rule["spec"]
    assert spec["taint"] == TAINT and spec["conditions"] == [{"type": CONDITION, "requiredStatus": "True"}]
    assert spec["enforcementMode"] == "bootstrap-only"
    pools = [p["metadata"]["name"] for p in _docs(out / "karpenter/nodepools.yaml")]
    assert spec["nodeSelector"] == {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "In",
                                                          "values": pools}]}


def test_the_rule_crd_refuses_a_taint_outside_its_prefix(out: Path) -> None:
    (rule,) = _docs(out / "karpenter/nodereadinessrule.yaml")
    rule["spec"]["taint"]["key"] = "nvidia.com/mig-not-ready"
    assert "/spec/taint: taint key must start with 'readiness.k8s.io/'" in \
        cel_errors(rule, "nodereadinessrule-v1alpha1")[0]


class _ApiServer(BaseHTTPRequestHandler):
    """Just enough of an API server for ``kubectl patch node --subresource=status``: legacy discovery of the core
    group, the Node (kubectl reads it first; the Node authorizer lets a node read its own), and the patch, which
    it records."""

    seen: list[dict[str, Any]]

    def _reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/api":
            self._reply({"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        elif path == "/apis":
            self._reply({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        elif path == "/api/v1":
            verbs = ["get", "list", "patch", "update"]
            self._reply({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": verbs},
                {"name": "nodes/status", "singularName": "", "namespaced": False, "kind": "Node", "verbs": verbs}]})
        elif path in (f"/api/v1/nodes/{NODE}", f"/api/v1/nodes/{NODE}/status"):  # kubectl reads it before its patch
            self._reply(_NODE_OBJECT)
        else:
            self.send_error(404)

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append({"method": "PATCH", "path": self.path.split("?")[0],
                          "content_type": self.headers["Content-Type"], "body": json.loads(body)})
        self._reply(_NODE_OBJECT)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Recorder", (_ApiServer,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _ready_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, startup: bool = True) -> Any:
    require("kubectl")
    node = make_node(tmp_path, H200, restore="kubernetes: {startup_taint: true}\n" if startup else "", metrics=False)
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "kubelet",
                  "clusters": [{"name": "c", "cluster": {"server": url}}],
                  "users": [{"name": "kubelet", "user": {}}],
                  "contexts": [{"name": "kubelet", "context": {"cluster": "c", "user": "kubelet"}}]}
    for path, text in (("var/lib/kubelet/kubeconfig", json.dumps(kubeconfig)),
                       ("etc/eks/kubelet/environment",
                        f"NODEADM_KUBELET_ARGS=--node-ip=10.0.0.1 --hostname-override={NODE.upper()} --v=2")):
        (node.root / path).parent.mkdir(parents=True, exist_ok=True)
        (node.root / path).write_text(text)
    WORLD.point("root", node.root)  # the test copy reads the node's files there (support.NodeWorld)
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "kube-cache"))
    return node


def test_after_a_restore_the_node_sets_its_condition_with_kubelets_credentials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = api_server
    node = _ready_node(tmp_path, monkeypatch, url)
    ran = node.run()  # returns when the child that patches has closed its output too
    assert ran.rc == 0, ran.text
    assert f"set the condition {CONDITION}=True on node {NODE}" in ran.out
    (patch,) = seen
    assert (patch["method"], patch["path"]) == ("PATCH", f"/api/v1/nodes/{NODE}/status")
    assert patch["content_type"] == "application/strategic-merge-patch+json"
    (condition,) = patch["body"]["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason")} == {
        "type": CONDITION, "status": "True", "reason": "MIGLayoutApplied"}
    assert condition["lastTransitionTime"].endswith("Z") and list(patch["body"]) == ["status"]  # never spec.taints


def test_a_failed_restore_sets_no_condition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            api_server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = api_server
    node = _ready_node(tmp_path, monkeypatch, url)
    (node.state / "assert").write_text("not all GPUs match\n")
    ran = node.run()
    assert ran.rc != 0 and seen == []


def test_without_startup_taint_the_restore_sets_no_condition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = api_server
    ran = _ready_node(tmp_path, monkeypatch, url, startup=False).run()
    assert ran.rc == 0 and seen == []
