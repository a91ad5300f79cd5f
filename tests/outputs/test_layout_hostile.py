"""Hostile boot-time values for the layout sources: the generated restore.sh applies exactly the name the node's
own software would use (systemd's EnvironmentFile=, kubelet's --node-labels, GKE's kube-labels), or fails closed.

Cut, stalled and padded network answers (a loopback HTTP server that lies about Content-Length, stalls, pads with
NUL bytes or multi-byte characters), NUL bytes in every source, kubelet's environment files with another variable,
an overriding later assignment, a taint, a label past the size limit; a file source line past its limit.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realtools import Ran, run
from support import WORLD
from test_layout_restore import CREDENTIALS, GPUS, KUBELET_DROPIN, _applied, _labelled, _parted, _put
from test_restore_script import Node, make_node

pytestmark = pytest.mark.realtool

KUBE_LABELS = "/computeMetadata/v1/instance/attributes/kube-labels"
DROPIN_TRAIN = '[Service]\nEnvironment="MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train"\n'


class RawServer:
    """A loopback HTTP server that writes ``answer`` (bytes, sent as they are), optionally stalls ``stall`` seconds
    after ``head`` of them, then closes: it can promise more than it sends, or send past any limit."""

    def __init__(self) -> None:
        self.answer = b""
        self.answers: list[bytes] = []  # in turn, before ``answer``
        self.stall = 0.0
        self.head = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + 120  # bounded: it stops by itself
        while not self.stop and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    if self.answers:
                        conn.sendall(self.answers.pop(0))
                    elif self.stall:
                        conn.sendall(self.answer[: self.head])
                        time.sleep(self.stall)
                        conn.sendall(self.answer[self.head :])
                    else:
                        conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def server() -> Iterator[RawServer]:
    s = RawServer()
    WORLD.network = s.url  # the test copies rendered from now on ask it
    yield s
    s.close()


def _answer(body: bytes, length: int | None = None) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/text\r\nContent-Length: "
            + str(len(body) if length is None else length).encode() + b"\r\nConnection: close\r\n\r\n" + body)


def _gce(tmp_path: Path, sources: str = "gce-metadata, file", default: str = "") -> Node:
    layout = (f"  layout: {{from: [{sources}], network_wait_seconds: 2"
              + (", ec2_tag_key: mig-config" if "ec2-tag" in sources else "")
              + (f", default: {default}" if default else "") + "}\n")
    node = make_node(tmp_path, GPUS, restore=layout)
    WORLD.point("root", node.root)
    return node


def _run(node: Node, **env: str) -> Ran:
    WORLD.point("proc", node.proc)
    return run(["bash", str(node.script)], env={"PATH": f"{node.root / 'bin'}:/usr/bin:/bin",
                                                "STATE": str(node.state), **env}, timeout=60)


def _refused(ran: Ran, node: Node, why: str) -> None:
    assert ran.rc == 1, ran.text
    assert why in ran.err, ran.text
    assert _parted(node) == []


# --- network answers: cut, stalled, padded ---------------------------------------------------------------

def test_an_answer_cut_short_is_no_answer(tmp_path: Path, server: RawServer) -> None:
    """Content-Length promises more than comes before the close: not a prefix that names another layout."""
    node = _gce(tmp_path)
    _put(node, "/etc/migbake/layout", "infer\n")
    server.answer = _answer(b"nvidia.com/mig.config=train", length=40)
    ran = node.run()
    _applied(ran, node, "infer", "file")
    assert "gce-metadata (kube-labels): no answer within 2 s" in ran.out


def test_an_answer_that_stalls_past_the_limit_is_no_answer(tmp_path: Path, server: RawServer) -> None:
    node = _gce(tmp_path)
    _put(node, "/etc/migbake/layout", "infer\n")
    body = b"nvidia.com/mig.config=train,team=ml"
    server.answer, server.head, server.stall = _answer(body), len(_answer(body)) - len(b",team=ml"), 4.0
    ran = node.run()
    _applied(ran, node, "infer", "file")


@pytest.mark.parametrize("padding", [b"\0" * 70000, "é".encode() * 40000], ids=["nul-bytes", "multi-byte"])
def test_an_answer_over_the_size_limit_in_bytes_fails_closed(tmp_path: Path, server: RawServer,
                                                             padding: bytes) -> None:
    """65536 bytes, not characters, and counted before anything is stripped."""
    node = _gce(tmp_path)
    server.answer = _answer(b"nvidia.com/mig.config=train," + padding)
    ran = _run(node, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    _refused(ran, node, "the kube-labels attribute is larger than 65536 bytes, not read")


def test_a_nul_in_a_network_answer_fails_closed(tmp_path: Path, server: RawServer) -> None:
    node = _gce(tmp_path)
    server.answer = _answer(b"nvidia.com/mig.config=tra\0in")
    _refused(node.run(), node, "the kube-labels attribute has a NUL byte")


def test_a_nul_in_the_ec2_tag_fails_closed(tmp_path: Path, server: RawServer) -> None:
    node = _gce(tmp_path, "ec2-tag")
    server.answers = [_answer(b"AQAEAFakeToken_0123456789abcdef=="), _answer(b"tra\0in")]  # the token, then the tag
    _refused(node.run(), node, "the tag mig-config has a NUL byte")


def test_gke_s_last_repeated_label_wins(tmp_path: Path, server: RawServer) -> None:
    """kubelet gets kube-labels as --node-labels: its map flag keeps the last value of a key."""
    node = _gce(tmp_path, "gce-metadata")
    server.answer = _answer(b"nvidia.com/mig.config=infer, team=a ,nvidia.com/mig.config = train")
    _applied(node.run(), node, "train", "gce-metadata")


# --- files: NUL bytes, lines past the limit ----------------------------------------------------------------

def test_a_nul_in_the_layout_file_fails_closed(tmp_path: Path) -> None:
    node = _gce(tmp_path, "file", default="infer")
    (node.root / "etc/migbake").mkdir(parents=True)
    (node.root / "etc/migbake/layout").write_bytes(b"tra\0in\n")
    _refused(node.run(), node, "the first line of /etc/migbake/layout has a NUL byte")


def test_a_nul_in_the_credential_fails_closed(tmp_path: Path) -> None:
    node = _gce(tmp_path, "credential", default="infer")
    creds = node.root / CREDENTIALS
    creds.mkdir(parents=True)
    (creds / "migbake.layout").write_bytes(b"tra\0in")
    _refused(node.run(), node, "has a NUL byte")


def test_the_environment_names_no_credential_folder(tmp_path: Path) -> None:
    """A CREDENTIALS_DIRECTORY from the manager's environment (systemd.setenv=) is not where the name is read."""
    node = _gce(tmp_path, "credential", default="infer")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "migbake.layout").write_text("train\n")
    _applied(_run(node, CREDENTIALS_DIRECTORY=str(elsewhere)), node, "infer", "default")


def test_a_line_longer_than_the_limit_is_no_cut_value(tmp_path: Path) -> None:
    node = _gce(tmp_path, "file", default="infer")
    _put(node, "/etc/migbake/layout", "train" + " " * 300 + "x\n")
    _refused(node.run(), node, "the first line of /etc/migbake/layout is longer than 256 bytes, not read")


# --- kubelet's own labels ---------------------------------------------------------------------------------

def _kubelet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | bytes,
             where: str = "/etc/default/kubelet") -> tuple[Node, Ran]:
    node = _labelled(tmp_path, monkeypatch, "kubelet-labels", "infer")
    target = node.root / where.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        target.write_bytes(text)
    else:
        target.write_text(text)
    return node, node.run()


@pytest.mark.parametrize(("text", "name", "source"), [
    # another variable that holds the flag: kubelet's unit never expands it
    ("OTHER_ARGS=--node-labels=nvidia.com/mig.config=train\nKUBELET_EXTRA_ARGS=--v=2\n", "infer", "default"),
    # a later assignment replaces the earlier one (systemd.exec(5): EnvironmentFile=)
    ("KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train\nKUBELET_EXTRA_ARGS=--v=2\n", "infer", "default"),
    ("KUBELET_EXTRA_ARGS=--v=2\nKUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train\n", "train",
     "kubelet-labels"),
    # a taint keyed nvidia.com/mig.config is no label
    ("KUBELET_EXTRA_ARGS=--node-labels=team=a --register-with-taints=nvidia.com/mig.config=train:NoSchedule\n",
     "infer", "default"),
    # the last --node-labels value of the key wins, the flags merge (kubelet's map flag)
    ("KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=infer --node-labels team=a,nvidia.com/mig.config=train\n",
     "train", "kubelet-labels"),
    ('KUBELET_EXTRA_ARGS="--node-labels=nvidia.com/mig.config=train --node-labels=team=a"\n', "train",
     "kubelet-labels"),
    ("  KUBELET_EXTRA_ARGS = --node-labels=team=a,nvidia.com/mig.config=train  \n", "train", "kubelet-labels"),
], ids=["other-variable", "overridden", "later-assignment", "taint", "last-flag-wins", "merged-flags", "blanks"])
def test_kubelet_labels_as_systemd_and_kubelet_read_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         text: str, name: str, source: str) -> None:
    node, ran = _kubelet(tmp_path, monkeypatch, text)
    _applied(ran, node, name, source)


@pytest.mark.parametrize(("text", "why"), [
    (b"KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=tra\0in\n", "/etc/default/kubelet has a NUL byte"),
    (b"# padding\n" * 7000 + b"KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train\n",
     "/etc/default/kubelet is larger than 65536 bytes, not read"),
    (b"KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=tr\\ain\n", "quoting or escapes"),
    (b"KUBELET_EXTRA_ARGS=--node-labels=team\n", "an item without '='"),
], ids=["nul", "oversized", "backslash", "malformed-pair"])
def test_kubelet_files_that_cannot_be_read_exactly_fail_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               text: bytes, why: str) -> None:
    node, ran = _kubelet(tmp_path, monkeypatch, text)
    _refused(ran, node, why)


def test_migbake_s_drop_in_comes_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubeadm: the drop-in's variable is last in kubelet's command line: its key wins over /etc/default/kubelet's."""
    node = _labelled(tmp_path, monkeypatch, "kubelet-labels")
    _put(node, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=infer\n")
    _put(node, KUBELET_DROPIN, DROPIN_TRAIN)
    _applied(node.run(), node, "train", "kubelet-labels")


def test_a_drop_in_variable_kubelet_does_not_expand_is_not_read(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    node = _labelled(tmp_path, monkeypatch, "kubelet-labels", "infer", kubelet="kubelet: {layout: generic}\n")
    _put(node, KUBELET_DROPIN, DROPIN_TRAIN)
    _applied(node.run(), node, "infer", "default")


# --- a property: the restore reads what systemd and kubelet would --------------------------------------------

NAMES = st.sampled_from(["infer", "train"])
ITEMS = st.one_of(NAMES.map(lambda n: f"nvidia.com/mig.config={n}"), st.sampled_from(["team=a", "x.io/y=z", ""]))
FLAGS = st.one_of(
    st.lists(ITEMS, min_size=1, max_size=3).map(lambda xs: "--node-labels=" + ",".join(xs)),
    NAMES.map(lambda n: f"--register-with-taints=nvidia.com/mig.config={n}:NoSchedule"),
    st.sampled_from(["--v=2", "--max-pods=110"]))
LINES = st.one_of(
    st.tuples(st.sampled_from(["KUBELET_EXTRA_ARGS", "OTHER_ARGS"]), st.lists(FLAGS, max_size=3)),
    st.sampled_from(["# KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train", "", "; comment"]))


def _line(x: object) -> str:
    if isinstance(x, str):
        return x
    var, flags = x  # type: ignore[misc]
    return f"{var}=" + " ".join(flags)


def _expected(lines: list[object]) -> str:
    """What kubelet registers: the last KUBELET_EXTRA_ARGS, its --node-labels merged in order, else the default."""
    value = None
    for x in lines:
        if not isinstance(x, str) and x[0] == "KUBELET_EXTRA_ARGS":  # type: ignore[index]
            value = x[1]  # type: ignore[index]
    name = "infer"  # the profile's default when kubelet has no label
    found = None
    for flag in value or []:
        if flag.startswith("--node-labels="):
            for item in flag.removeprefix("--node-labels=").split(","):
                if item.startswith("nvidia.com/mig.config="):
                    found = item.split("=", 1)[1]
    return found or name


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINES, max_size=5))
def test_the_restore_reads_the_label_kubelet_registers(tmp_path_factory: pytest.TempPathFactory,
                                                       monkeypatch: pytest.MonkeyPatch, lines: list[object]) -> None:
    tmp_path = tmp_path_factory.mktemp("prop")
    node, ran = _kubelet(tmp_path, monkeypatch, "".join(_line(x) + "\n" for x in lines))
    want = _expected(lines)
    assert ran.rc == 0, ran.text
    assert _parted(node)[0] == f"nvidia-mig-parted apply -c {want}", ran.text
