"""The network sources of the layout name: ``gce-metadata`` and ``ec2-tag`` against a metadata server.

The generated restore.sh runs for real (simulated nvidia-smi and nvidia-mig-parted, test_restore_script.py) against
a local HTTP server on loopback standing in for GCE's metadata server and EC2's IMDS (a test copy of the
script is rendered with its URL: ``support.NodeWorld``). Answering, 404,
5xx then an answer, too slow, nothing listening, a garbage value, a huge answer: no answer is no name from that
source (the next one is asked), a garbage or unreadable answer fails closed, and the wait is bounded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import WORLD, generate
from test_layout_restore import GPUS, _applied, _chosen, _parted, _put
from test_restore_script import Node, make_node

pytestmark = pytest.mark.realtool

TOKEN = "AQAEAFakeToken_0123456789abcdef=="
KUBE_LABELS = "/computeMetadata/v1/instance/attributes/kube-labels"
TAG = "/latest/meta-data/tags/instance/mig-config"


class Metadata:
    """A metadata server on 127.0.0.1: ``answers[path]`` is a list of (status, body, delay) given in turn (the
    last one again and again); every request is recorded as (method, path, headers)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, str, float]]] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        meta = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                meta.requests.append((self.command, self.path, dict(self.headers)))
                turns = meta.answers.get(f"{self.command} {self.path}", [(404, "not found\n", 0.0)])
                status, body, delay = turns.pop(0) if len(turns) > 1 else turns[0]
                if (self.command == "GET" and self.path.startswith("/latest/meta-data/")
                        and self.headers.get("X-aws-ec2-metadata-token") != TOKEN):
                    status, body = 401, ""  # IMDSv2 only: no token, no metadata
                time.sleep(delay)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def metadata(monkeypatch: pytest.MonkeyPatch) -> Iterator[Metadata]:
    server = Metadata()
    WORLD.network = server.url  # the test copies rendered from now on ask it (support.NodeWorld)
    monkeypatch.delenv("http_proxy", raising=False)
    yield server
    server.close()


def _node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: str, default: str = "", wait: int = 3) -> Node:
    layout = (f"  layout: {{from: [{sources}], network_wait_seconds: {wait}"
              + (", ec2_tag_key: mig-config" if "ec2-tag" in sources else "")
              + (f", default: {default}" if default else "") + "}\n")
    node = make_node(tmp_path, GPUS, restore=layout)
    WORLD.point("root", str(node.root))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    return node


def _token(metadata: Metadata) -> None:
    metadata.answers["PUT /latest/api/token"] = [(200, TOKEN, 0.0)]


# --- gce-metadata: GKE's kube-labels instance attribute ---------------------------------------------

def test_gce_kube_labels_give_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata, file")
    _put(node, "/etc/migbake/layout", "infer\n")  # not asked: gce-metadata comes first and answers
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "cloud.google.com/gke-nodepool=train-pool,"
                                                    "nvidia.com/mig.config=train,team=ml", 0.0)]
    _applied(node.run(), node, "train", "gce-metadata")
    assert [(m, p, h.get("Metadata-Flavor")) for m, p, h in metadata.requests] == [("GET", KUBE_LABELS, "Google")]


def test_gce_404_asks_the_next_source_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata, file")
    _put(node, "/etc/migbake/layout", "infer\n")
    ran = node.run()
    _applied(ran, node, "infer", "file")
    assert ("layout sources that gave no name: gce-metadata (kube-labels): HTTP 404 (no kube-labels attribute on "
            "this instance)") in ran.out


def test_gce_labels_without_the_label_are_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata", default="infer")
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "cloud.google.com/gke-nodepool=p,nvidia.com/mig.configx=train",
                                               0.0)]
    ran = node.run()
    _applied(ran, node, "infer", "default")
    assert "gce-metadata: kube-labels has no nvidia.com/mig.config label" in ran.out


def test_a_5xx_is_retried_within_the_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata", wait=5)
    metadata.answers[f"GET {KUBE_LABELS}"] = [(503, "", 0.0), (200, "nvidia.com/mig.config=train", 0.0)]
    _applied(node.run(), node, "train", "gce-metadata")
    assert len(metadata.requests) == 2


def test_a_slow_server_is_given_up_in_time_and_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata, ec2-tag", wait=2)
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "nvidia.com/mig.config=train", 30.0)]
    _token(metadata)
    started = time.monotonic()
    ran = node.run()
    took = time.monotonic() - started
    assert ran.rc == 1, ran.text
    assert took < 12, took  # 2 s in all for both network sources, not 30 s
    assert ("FAILED: no source gave a layout name (tried: gce-metadata, ec2-tag; gce-metadata (kube-labels): no "
            "answer within 2 s (restore.layout.network_wait_seconds); ec2-tag (IMDSv2 token): no answer within 2 s "
            "(restore.layout.network_wait_seconds)) and restore.layout has no default") in ran.err
    assert _parted(node) == []
    assert _chosen(node) == ("|none|missing", 0.0)


def test_nothing_listening_is_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata", default="infer", wait=2)  # WORLD's: nothing answers HTTP
    ran = node.run()
    _applied(ran, node, "infer", "default")
    assert "gce-metadata (kube-labels): no answer within 2 s" in ran.out


@pytest.mark.parametrize("labels,shown", [
    ("nvidia.com/mig.config=$(touch /tmp/x)", "\\$\\(touch\\ /tmp/x\\)"),
    ("a=b,nvidia.com/mig.config=train\nx", "$'train\\nx'"),
    ("nvidia.com/mig.config=-train", "-train"),
], ids=["shell", "newline", "not-a-label-value"])
def test_a_garbage_value_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: Metadata,
                                      labels: str, shown: str) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata, file", default="infer")
    _put(node, "/etc/migbake/layout", "train\n")  # a later source is not asked after a garbage answer
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, labels, 0.0)]
    ran = node.run()
    assert ran.rc == 1, ran.text
    assert (f"FAILED: source gce-metadata gives layout {shown} (not a label value), which this image does not have "
            "(it has: infer train); not applying anything else") in ran.err
    assert _parted(node) == []
    assert _chosen(node) == ("|gce-metadata|unknown", 0.0)


def test_a_huge_answer_is_not_read_and_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "gce-metadata", default="infer")
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "a=" + "b" * 70000 + ",nvidia.com/mig.config=train", 0.0)]
    ran = node.run()
    assert ran.rc == 1 and "source gce-metadata: the kube-labels attribute is larger than 65536 bytes" in ran.err
    assert _parted(node) == []


# --- ec2-tag: an instance tag through IMDSv2 -------------------------------------------------------------

def test_ec2_tag_through_imdsv2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "ec2-tag, file")
    _token(metadata)
    metadata.answers[f"GET {TAG}"] = [(200, "train", 0.0)]
    _applied(node.run(), node, "train", "ec2-tag")
    put, get = metadata.requests
    assert put[:2] == ("PUT", "/latest/api/token") and put[2]["X-aws-ec2-metadata-token-ttl-seconds"] == "60"
    assert get[:2] == ("GET", TAG) and get[2]["X-aws-ec2-metadata-token"] == TOKEN


def test_ec2_tags_off_in_metadata_are_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "ec2-tag", default="infer")
    _token(metadata)  # the tag path answers 404, as IMDS does where tags in metadata are off
    ran = node.run()
    _applied(ran, node, "infer", "default")
    assert ("ec2-tag (tag mig-config): HTTP 404 (no tag mig-config on this instance, or access to tags in instance "
            "metadata is off: the default, and Karpenter turns it off)") in ran.out


def test_ec2_without_a_token_is_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "ec2-tag", default="infer")
    metadata.answers["PUT /latest/api/token"] = [(403, "", 0.0)]
    metadata.answers[f"GET {TAG}"] = [(200, "train", 0.0)]
    ran = node.run()
    _applied(ran, node, "infer", "default")
    assert "ec2-tag (IMDSv2 token): HTTP 403" in ran.out
    assert [r[0] for r in metadata.requests] == ["PUT"]  # no tag asked without a token


def test_ec2_garbage_tag_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: Metadata) -> None:
    node = _node(tmp_path, monkeypatch, "ec2-tag", default="infer")
    _token(metadata)
    metadata.answers[f"GET {TAG}"] = [(200, "train; reboot", 0.0)]
    ran = node.run()
    assert ran.rc == 1 and "source ec2-tag gives layout train\\;\\ reboot (not a label value)" in ran.err, ran.text
    assert _parted(node) == []


# --- the unit, preflight --------------------------------------------------------------------------------

def test_the_unit_waits_for_the_network_only_with_a_network_source(tmp_path: Path) -> None:
    from realtools import SystemdTree

    base = "version: 1\nname: u\ngpus:\n" + GPUS + "restore:\n  layout: {from: [%s], default: infer}\n"
    unit = "rootfs/etc/systemd/system/nvidia-mig-restore.service"
    with_net = generate(base % "gce-metadata, file", tmp_path / "a")
    without = (generate(base % "file", tmp_path / "b") / unit).read_text()
    text = (with_net / unit).read_text()
    assert "\nWants=network-online.target\nAfter=network-online.target\n" in text
    assert "network-online" not in without
    tree = SystemdTree(stubs=("bash",))
    try:
        tree.install_rootfs(with_net / "rootfs")
        ran = tree.verify("nvidia-mig-restore.service")
        assert ran.rc == 0 and ran.err == "", ran.text
    finally:
        tree.cleanup()


def test_the_scripts_with_both_network_sources_pass_shellcheck(tmp_path: Path) -> None:
    from realtools import shellcheck

    out = generate("version: 1\nname: u\ngpus:\n" + GPUS + "restore:\n  layout: {from: [gce-metadata, ec2-tag, "
                   "file], ec2_tag_key: mig-config}\n", tmp_path / "out")
    scripts = [out / "rootfs/etc/nvidia-mig/restore.sh", out / "scripts/preflight-mig-restore.sh",
               out / "scripts/verify-mig-restore.sh"]
    assert all("layout_from_ec2" in p.read_text() and "layout_from_gce" in p.read_text() for p in scripts)
    ran = shellcheck(scripts)
    assert ran.rc == 0, ran.text


def test_preflight_warns_where_the_metadata_server_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   metadata: Metadata) -> None:
    from test_layout_restore import LAYOUTS_MIG
    from test_preflight import SimNode
    from test_preflight_script import preflight_node

    WORLD.point("root", str(tmp_path / "empty-root"))
    gpus = "  - model: h200-141gb\n    mig: {" + LAYOUTS_MIG + "}\n"
    extra = "restore:\n  layout: {from: [file, gce-metadata], network_wait_seconds: 2}\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ran = preflight_node(tmp_path / "a", SimNode(), gpus=gpus, extra=extra)
    assert ran.status["layout"] == "WARN", ran.report
    assert "gce-metadata (kube-labels): HTTP 404" in ran.detail["layout"]
    assert "a network source may still give it at boot" in ran.detail["layout"]
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "nvidia.com/mig.config=train", 0.0)]
    ran = preflight_node(tmp_path / "b", SimNode(), gpus=gpus, extra=extra)
    assert ran.status["layout"] == "PASS", ran.report
    assert ran.detail["layout"].startswith("layout train, from gce-metadata"), ran.detail["layout"]


def test_show_says_what_the_network_sources_need(tmp_path: Path) -> None:
    from support import cli

    profile = tmp_path / "node-profile.yaml"
    base = "version: 1\nname: u\ngpus:\n" + GPUS + "restore:\n  layout: {from: [%s]%s}\n"
    profile.write_text(base % ("ec2-tag, file", ", ec2_tag_key: mig-config, network_wait_seconds: 7"))
    code, out, err = cli("show", str(profile))
    assert code == 0, err
    assert ("ec2-tag reads the instance tag mig-config through IMDSv2, only where access to tags in instance "
            "metadata is allowed on the instance (off by default; Karpenter disables it).") in out
    assert "The network sources need curl on the node and wait at most 7 s in all" in out
    profile.write_text(base % ("file", ""))
    code, out, err = cli("show", str(profile))
    assert code == 0 and "IMDSv2" not in out and "curl" not in out, err


def test_verify_reads_the_network_source_as_the_restore_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             metadata: Metadata) -> None:
    from test_generated_scripts import good_node
    from test_layout_restore import LAYOUTS_MIG

    node, verify = good_node(tmp_path, restore_extra="  layout: {from: [gce-metadata], network_wait_seconds: 2}\n",
                             mig=LAYOUTS_MIG)
    WORLD.point("root", str(node.root))
    metadata.answers[f"GET {KUBE_LABELS}"] = [(200, "nvidia.com/mig.config=train", 0.0)]
    ran = node.run(verify)
    assert "PASS  layout train, from gce-metadata (sources tried: gce-metadata)" in ran.out, ran.text
    metadata.answers[f"GET {KUBE_LABELS}"] = [(404, "", 0.0)]
    ran = node.run(verify)
    assert ran.rc == 1
    assert ("FAIL  layout: no source gave a layout name (tried: gce-metadata; gce-metadata (kube-labels): HTTP 404 "
            "(no kube-labels attribute on this instance)) and restore.layout has no default") in ran.out, ran.text
