"""Inputs that crashed or hung migbake.

- A FIFO (or any file that is not a regular file) given where migbake reads a file: every such read
  goes through ``document.files.read_regular`` (opened without blocking, checked on the descriptor, bounded,
  read once), so each is refused at once with one line, never waited on.
- ``--user-data-mime`` media types that break the document: ``multipart/*`` and ``message/*`` (a part
  that claims to be a whole MIME document or message), ``application/node.eks.aws`` forced onto a file
  that is not a NodeConfig, and a NodeConfig part that is a YAML alias bomb: exit 2, one located line.
- ``migbake show`` escapes bidirectional control characters of a description as it escapes the rest.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support import REPO
from test_io_errors import NODE_FIXTURE, PROFILE, leftovers, sh

from migbake.exits import printable

DRA_PROFILE = REPO / "tests/cases/valid/allocation-dra/node-profile.yaml"


def refused(ran: subprocess.CompletedProcess[str], *parts: str) -> None:
    """Exit 2 without a traceback, the last line of stderr holding every one of ``parts``."""
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, (ran.returncode, ran.stdout, ran.stderr)
    last = ran.stderr.strip().splitlines()[-1]
    for part in parts:
        assert part in last, (part, last)


FIFO_COMMANDS = {
    "profile": "validate {f}",
    "profile-show": "show {f}",
    "user-data-mime": "generate {p} -o out --user-data-mime {f}",
    "user-data-mime-typed": "generate {p} -o out --user-data-mime {f}:x-shellscript",
    "nvidia-smi-xml": "preflight {p} --nvidia-smi-xml {f}",
    "nvidia-smi-csv": "preflight {p} --nvidia-smi-csv {f}",
    "generate-config": "preflight {p} --mig-parted-generate-config {f}",
    # --node-json, --cluster-policy and --resource-slices read a pipe, bounded in time (test_preflight_pipes.py)
    "import": "import {f} --model h200",
    "import-xml": "import {p} --nvidia-smi-xml {f}",
    "catalog": "--catalog {f} validate {p}",
    "var-file": "bake {p} -o out --only null.ssh --var ssh_host=x --dry-run --packer /nonexistent --var-file {f}",
}


@pytest.mark.parametrize("command", FIFO_COMMANDS.values(), ids=FIFO_COMMANDS.keys())
def test_a_fifo_anywhere_migbake_reads_is_refused_at_once(command: str, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # nobody ever writes: a blocking open() would wait forever
    ran = sh("migbake " + command.format(f="fifo", p=PROFILE, node=NODE_FIXTURE, dra=DRA_PROFILE), tmp_path, timeout=30)
    assert ran.returncode in (1, 2) and "Traceback" not in ran.stderr, (ran.returncode, ran.stdout, ran.stderr)
    assert "not a regular file" in ran.stdout + ran.stderr, (ran.stdout, ran.stderr)
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_not_read(device: str, tmp_path: Path) -> None:
    refused(sh(f"migbake generate {PROFILE} -o out --user-data-mime {device}", tmp_path),
            f"{device}: not a regular file")
    refused(sh(f"migbake preflight {DRA_PROFILE} --resource-slices {device} --node n1", tmp_path),
            f"{device}: not a regular file")


MIME_TYPES = ["multipart/mixed", "multipart/alternative", "Multipart/Mixed", "message/rfc822",
              "message/partial", "MESSAGE/external-body"]


@pytest.mark.parametrize("kind", MIME_TYPES)
def test_a_part_type_that_would_be_a_document_of_its_own_is_refused(kind: str, tmp_path: Path) -> None:
    (tmp_path / "part.sh").write_text("#!/bin/sh\necho hi\n")
    ran = sh(f"migbake generate {PROFILE} -o out --user-data-mime part.sh:{kind}", tmp_path)
    refused(ran, "--user-data-mime", f"{kind!r}", "part.sh")
    assert not (tmp_path / "out").exists()


NOT_NODECONFIG = {
    "shell": "#!/bin/sh\necho hi\n",
    "cloud-config": "#cloud-config\nruncmd: [ls]\n",
    "other-kind": "apiVersion: v1\nkind: ConfigMap\n",
    "not-yaml": "apiVersion: [\n",
    "old-version": "apiVersion: node.eks.aws/v1beta9\nkind: NodeConfig\n",
}


@pytest.mark.parametrize("text", NOT_NODECONFIG.values(), ids=NOT_NODECONFIG.keys())
def test_the_nodeconfig_type_forced_onto_another_file_is_refused(text: str, tmp_path: Path) -> None:
    (tmp_path / "part").write_text(text)
    ran = sh(f"migbake generate {PROFILE} -o out --user-data-mime part:application/node.eks.aws", tmp_path)
    refused(ran, "--user-data-mime", "part", "NodeConfig")
    assert not (tmp_path / "out").exists()


def _bomb() -> str:
    lines = ["apiVersion: node.eks.aws/v1alpha1", "kind: NodeConfig", "x0: &a0 [lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    return "\n".join(lines) + "\nspec: {}\n"


@pytest.mark.parametrize("kind", ["", ":application/node.eks.aws"])
def test_a_nodeconfig_alias_bomb_is_refused_quickly(kind: str, tmp_path: Path) -> None:
    (tmp_path / "nodeconfig.yaml").write_text(_bomb())
    ran = sh(f"ulimit -v $((1024 * 1024)); migbake generate {PROFILE} -o out --user-data-mime nodeconfig.yaml{kind}",
             tmp_path, timeout=30)
    refused(ran, "--user-data-mime", "nodeconfig.yaml", "alias")
    assert not (tmp_path / "out").exists()


def test_a_nodeconfig_part_is_still_accepted(tmp_path: Path) -> None:
    (tmp_path / "nc.yaml").write_text("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
                                      "  cluster: {name: c}\n")
    for kind in ("", ":application/node.eks.aws"):
        ran = sh(f"migbake generate {PROFILE} -o out{kind[1:4]} --user-data-mime nc.yaml{kind}", tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert "application/node.eks.aws" in (tmp_path / f"out{kind[1:4]}/cloud-init/user-data.mime").read_text()


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"


@pytest.mark.parametrize("char", list(BIDI), ids=[f"U+{ord(c):04X}" for c in BIDI])
def test_printable_escapes_every_bidirectional_control(char: str) -> None:
    shown = printable(f"a{char}b")
    assert char not in shown and f"\\u{ord(char):04x}" in shown


def test_show_escapes_a_descriptions_bidirectional_controls(tmp_path: Path) -> None:
    described = 'description: "GPU \u202enruter\u202c node \u2066x\u2069 \u200f"'
    text = re.sub(r"(?m)^description: .*$", lambda _: described, PROFILE.read_text(), count=1)
    assert described in text
    (tmp_path / "p.yaml").write_text(text)
    ran = sh("migbake show p.yaml", tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert not set(BIDI) & set(ran.stdout), [c for c in ran.stdout if c in BIDI]
    assert "\\u202e" in ran.stdout
