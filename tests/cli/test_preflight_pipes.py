"""preflight's kubectl inputs from a pipe: ``--node-json <(kubectl get node ... -o json)``, a FIFO, read once,
bounded in size and in time, each bound said when it is hit."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import REPO, cli, migbake_shell
from test_dra_preflight import H200  # a DRA profile of one H200 layout, as h200-ready.json publishes it

from migbake.document import files

SLICES = REPO / "tests/fixtures/dra/h200-ready.json"
NODE = {"kind": "Node", "metadata": {"name": "h200-node", "labels": {"nvidia.com/mig.config": "all-disabled"}}}
POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
          "spec": {"migManager": {"enabled": False}}}
ENV = {**os.environ, "PYTHONPATH": str(REPO / "generator")}


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", migbake_shell(script)], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=120, check=False)


def test_process_substitution_of_every_kubectl_input(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(H200)
    (tmp_path / "node.json").write_text(json.dumps(NODE))
    (tmp_path / "policy.json").write_text(json.dumps(POLICY))
    piped = _bash(f"migbake preflight p.yaml --node-json <(cat node.json) --cluster-policy <(cat policy.json) "
                  f"--resource-slices <(cat {shlex.quote(str(SLICES))}) --json", tmp_path)
    from_files = _bash(f"migbake preflight p.yaml --node-json node.json --cluster-policy policy.json "
                       f"--resource-slices {shlex.quote(str(SLICES))} --json", tmp_path)
    assert "not a regular file" not in piped.stderr
    assert piped.returncode == from_files.returncode, piped.stderr

    def statuses(run: subprocess.CompletedProcess[str]) -> dict[str, str]:
        return {c["check"]: c["status"] for c in json.loads(run.stdout)["checks"]}

    assert statuses(piped) == statuses(from_files)
    assert {"dra-devices", "gpu-operator"} <= set(statuses(piped))  # each pipe read; the node's once, name too


def test_a_named_fifo_whose_writer_comes_later(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(H200)
    fifo = tmp_path / "node.fifo"
    os.mkfifo(fifo)

    def write_later() -> None:
        time.sleep(0.5)
        for _ in range(100):  # until migbake opens it for reading, as `kubectl ... > FIFO` waits (10 s at most)
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.1)
                continue
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(NODE))
            return

    writer = threading.Thread(target=write_later)
    writer.start()
    code, out, err = cli("preflight", str(tmp_path / "p.yaml"), "--node-json", str(fifo),
                         "--resource-slices", str(SLICES), "--json")
    writer.join()
    assert code in (0, 1) and json.loads(out)["checks"], err


def test_a_pipe_larger_than_the_bound_is_said(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(H200)
    run = _bash("migbake preflight p.yaml --node-json <(head -c 5000000 /dev/zero)", tmp_path)
    assert run.returncode == 2 and "larger than 4 MiB (read from a pipe: stopped there)" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_a_pipe_that_never_ends_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "PIPE_SECONDS", 1.0)
    (tmp_path / "p.yaml").write_text(H200)
    fifo = tmp_path / "slow.fifo"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR)  # a writer that never writes nor closes: kubectl hung
    try:
        os.write(holder, b'{"kind": ')
        started = time.monotonic()
        code, _, err = cli("preflight", str(tmp_path / "p.yaml"), "--node-json", str(fifo))
        assert time.monotonic() - started < 30
    finally:
        os.close(holder)
    assert code == 2 and "the pipe did not end within 1 seconds (9 bytes read)" in err, err


def test_a_device_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(H200)
    code, _, err = cli("preflight", str(tmp_path / "p.yaml"), "--node-json", "/dev/zero")
    assert code == 2 and "not a regular file or a pipe" in err, err


