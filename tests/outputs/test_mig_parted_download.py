"""nvidia-mig-parted where the base image lacks it: with ``tools.nvidia_mig_parted_url`` and ``_sha256`` the
cloud-init user-data (runcmd's first step), Karpenter's userData (its cloud-config part) and the Packer bake
(``packer/scripts/install-mig-parted.sh``, before install-mig-restore.sh) download it and install it only when
its sha256 matches.

Judges: cloud-init's schema, shellcheck, ``packer validate``, and the generated steps run against a loopback
HTTP server with the right and a wrong sha256 (a wrong one fails and installs nothing).
"""

from __future__ import annotations

import email
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import cloud_init_schema, cloud_init_unknown_keys, packer_validate, run, shellcheck
from support import IMAGES, generate

BINARY = b"#!/bin/sh\necho nvidia-mig-parted stand-in\n"
RIGHT = hashlib.sha256(BINARY).hexdigest()
WRONG = hashlib.sha256(b"another binary").hexdigest()
DEST = "/opt/bin/nvidia-mig-parted"
EKS = next(i for i in IMAGES if i.name == "h200-inference")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No request log on stderr."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loopback HTTP server with the binary at /nvidia-mig-parted; its base URL."""
    root = tmp_path_factory.mktemp("www")
    (root / "nvidia-mig-parted").write_bytes(BINARY)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            lambda *a: _Quiet(*a, directory=str(root)))  # type: ignore[misc]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _profile(url: str, sha256: str) -> str:
    text = (EKS / "node-profile.yaml").read_text()
    tools = f"  nvidia_mig_parted: {DEST}\n  nvidia_mig_parted_url: {url}\n  nvidia_mig_parted_sha256: {sha256}\n"
    assert "  nvidia_mig_parted: /usr/bin/nvidia-mig-parted\n" in text
    # Karpenter's full form: its userData installs the tool at first boot as cloud-init's does
    return text.replace("  nvidia_mig_parted: /usr/bin/nvidia-mig-parted\n", tools) + "karpenter: {user_data: full}\n"


@pytest.fixture(scope="module")
def outs(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("outs")
    return {name: generate(_profile(f"{server}/nvidia-mig-parted", sha), root / name)
            for name, sha in (("right", RIGHT), ("wrong", WRONG))}


def _runcmd(user_data: str) -> list[Any]:
    commands: list[Any] = yaml.safe_load(user_data)["runcmd"]
    return commands


def _cloud_init_step(out: Path) -> str:
    step = _runcmd((out / "cloud-init/user-data").read_text())[0]
    assert step[:2] == ["sh", "-c"] and step[3:] == ["install-mig-parted"], step
    return str(step[2])


def _karpenter_config(out: Path) -> str:
    user_data = yaml.safe_load((out / "karpenter/ec2nodeclass.yaml").read_text())["spec"]["userData"]
    parts = {p.get_content_type(): p.get_payload() for p in email.message_from_string(user_data).get_payload()}
    return str(parts["text/cloud-config"])


def test_every_output_installs_it_before_the_restore_is_enabled(outs: dict[str, Path]) -> None:
    out = outs["right"]
    for text in ((out / "cloud-init/user-data").read_text(), _karpenter_config(out)):
        commands = _runcmd(text)
        enable = commands.index(["systemctl", "enable", "nvidia-mig-restore.service"])
        assert commands[0][3:] == ["install-mig-parted"] and enable > 0
    build = (out / "packer/build.pkr.hcl").read_text()
    assert build.index("scripts/install-mig-parted.sh") < build.index("scripts/install-mig-restore.sh")
    assert (out / "packer/scripts/install-mig-parted.sh").stat().st_mode & 0o777 == 0o755


def test_without_a_url_nothing_is_downloaded() -> None:
    generated = EKS / "generated"
    assert not (generated / "packer/scripts/install-mig-parted.sh").exists()
    assert "install-mig-parted" not in (generated / "cloud-init/user-data").read_text()
    assert "install-mig-parted" not in (generated / "packer/build.pkr.hcl").read_text()


def test_cloud_init_accepts_both_user_datas(outs: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "karpenter-cloud-config"
    config.write_text(_karpenter_config(outs["right"]))
    for user_data in (outs["right"] / "cloud-init/user-data", config):
        ran = cloud_init_schema(user_data)
        assert ran.rc == 0, ran.text
        assert cloud_init_unknown_keys(user_data) == []


def test_shellcheck_and_packer_accept_the_steps(outs: dict[str, Path], tmp_path: Path) -> None:
    out = outs["right"]
    step = tmp_path / "install-mig-parted.sh"
    step.write_text("#!/bin/sh\n" + _cloud_init_step(out))  # runcmd runs it with sh -c
    ran = shellcheck([step, out / "packer/scripts/install-mig-parted.sh"])
    assert ran.rc == 0, ran.text
    ran = packer_validate(out / "packer", "null.ssh")
    assert ran.rc == 0, ran.text


def test_shellcheck_rejects_a_broken_step(tmp_path: Path) -> None:
    step = tmp_path / "broken.sh"
    step.write_text("#!/bin/sh\ntmp=$(mktemp)\nrm -f $tmp\n")
    assert shellcheck([step]).rc != 0


def _steps(out: Path, tmp_path: Path, *args: str) -> dict[str, list[str]]:
    """Each form of the download, run with ``args`` (cloud-init's runcmd passes none: the root is /)."""
    body = tmp_path / "step.sh"
    body.write_text(_cloud_init_step(out))
    return {"cloud-init": ["sh", "-c", body.read_text(), "install-mig-parted", *args],
            "packer": ["bash", str(out / "packer/scripts/install-mig-parted.sh"), *args]}


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.mark.parametrize("how", ["cloud-init", "packer"])
def test_the_right_sha256_installs_it_once(how: str, outs: dict[str, Path], tmp_path: Path) -> None:
    root = _root(tmp_path)
    decoy = tmp_path / "decoy"  # the variable the install scripts once read: no longer a way to move the install
    decoy.mkdir()
    argv = _steps(outs["right"], tmp_path, "--root", str(root))[how]
    ran = run(argv, env={"MIGBAKE_TARGET_ROOT": str(decoy)}, timeout=120)
    assert ran.rc == 0, ran.text
    assert list(decoy.iterdir()) == []
    installed = root / DEST.lstrip("/")
    assert installed.read_bytes() == BINARY and installed.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in installed.parent.iterdir()) == ["nvidia-mig-parted"]
    again = run(argv, timeout=120)
    assert again.rc == 0 and "already" in again.text, again.text


@pytest.mark.parametrize("how", ["cloud-init", "packer"])
def test_a_wrong_sha256_installs_nothing(how: str, outs: dict[str, Path], tmp_path: Path) -> None:
    root = _root(tmp_path)
    ran = run(_steps(outs["wrong"], tmp_path, "--root", str(root))[how], timeout=120)
    assert ran.rc == 1 and f"has sha256 {RIGHT}, not" in ran.text, ran.text
    folder = root / DEST.lstrip("/").rsplit("/", 1)[0]
    assert not folder.exists() or list(folder.iterdir()) == []


@pytest.mark.parametrize("how", ["cloud-init", "packer"])
def test_a_failed_download_installs_nothing(how: str, server: str, tmp_path: Path) -> None:
    out = generate(_profile(f"{server}/missing", RIGHT), tmp_path / "out")
    root = _root(tmp_path)
    ran = run(_steps(out, tmp_path, "--root", str(root))[how], timeout=120)
    assert ran.rc == 1 and "could not download" in ran.text, ran.text
    folder = root / DEST.lstrip("/").rsplit("/", 1)[0]
    assert not folder.exists() or list(folder.iterdir()) == []
