"""The base-image check of every bake path: install-mig-restore.sh, cloud-init's first boot, the restore.

install-mig-restore.sh runs for real into a root folder (--root, as root) and must fail
naming each missing piece without changing the folder; with the pieces there it installs. A piece named
by image.provided_later is not checked by the bake but by restore.sh, which fails closed at boot. The
cloud-init form's runcmd check runs under sh with the tools at paths of the test's own.
(tests/vm/test_bake.py does the same with a real Packer build into a bare Debian root.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from realtools import run
from support import generate

from migbake.profile.firstboot import base_image_check
from migbake.rules.validate import check_bytes

needs_root = pytest.mark.skipif(  # in CI (root) these always run; a non-root CI fails them instead
    os.geteuid() != 0 and os.environ.get("CI") != "true", reason="install -o root needs root (the scripts run as root)"
)

PROFILE = """\
version: 1
name: based
gpus:
  - model: h200-141gb
    mig:
      layout: {{1g.18gb: 7}}
consumers:
  - unit: slurmd.service
  - unit: metrics-agent.service
    fail_closed: false
{extra}"""


def _state(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_mode) for p in root.rglob("*"))


def _image(root: Path, *, tools: bool, units: tuple[str, ...]) -> None:
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    if tools:
        (root / "usr/bin").mkdir(parents=True)
        for tool in ("nvidia-mig-parted", "nvidia-smi"):
            (root / "usr/bin" / tool).write_text("#!/bin/sh\nexit 0\n")
            (root / "usr/bin" / tool).chmod(0o755)
    for unit in units:
        (root / "usr/lib/systemd/system" / unit).write_text("[Service]\nExecStart=/bin/true\n")


@needs_root
def test_a_bare_root_fails_naming_every_missing_piece(tmp_path: Path) -> None:
    out = generate(PROFILE.format(extra=""), tmp_path / "out")
    root = tmp_path / "image"
    _image(root, tools=False, units=("metrics-agent.service",))  # not fail closed: never checked
    before = _state(root)
    ran = run(["bash", str(out / "packer/scripts/install-mig-restore.sh"), "--root", str(root), str(out / "rootfs")])
    assert ran.rc == 1 and ran.out == "", ran.text
    assert ran.err.count("\n") == 1, ran.err  # one line
    assert ran.err == (
        "install-mig-restore: error: the base image lacks what profile based needs: nvidia-mig-parted "
        "(no executable /usr/bin/nvidia-mig-parted), nvidia-smi (no executable /usr/bin/nvidia-smi), "
        "kubelet.service (no unit file), slurmd.service (no unit file); install them first, or list them "
        "under image.provided_later if a later provisioner of this build installs them (nothing was installed)\n")
    assert _state(root) == before, "the failed check changed the image"

    # the same root with the pieces there: the install goes through
    _image(tmp_path / "full", tools=True, units=("kubelet.service", "slurmd.service"))
    ran = run(["bash", str(out / "packer/scripts/install-mig-restore.sh"), "--root", str(tmp_path / "full"),
               str(out / "rootfs")])
    assert ran.rc == 0 and "enabled nvidia-mig-restore.service" in ran.out, ran.text


@needs_root
def test_a_template_instance_and_a_symlinked_tool_count(tmp_path: Path) -> None:
    out = generate(PROFILE.replace("slurmd.service", "slurmd@gpu0.service").format(extra=""), tmp_path / "out")
    root = tmp_path / "image"
    _image(root, tools=False, units=("kubelet.service", "slurmd@.service"))
    (root / "usr/bin").mkdir()
    for tool in ("nvidia-mig-parted", "nvidia-smi"):  # absolute links, as packages make them
        (root / "usr/bin" / tool).symlink_to(f"/opt/nvidia/bin/{tool}")
    ran = run(["bash", str(out / "packer/scripts/install-mig-restore.sh"), "--root", str(root), str(out / "rootfs")])
    assert ran.rc == 0, ran.text


@needs_root
def test_provided_later_moves_the_check_to_the_restore(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    extra = (f"tools: {{nvidia_smi: {smi}, nvidia_mig_parted: {tools / 'mig-parted'}}}\n"
             "image:\n  provided_later: [nvidia-mig-parted, kubelet.service, slurmd.service]\n")
    out = generate(PROFILE.format(extra=extra), tmp_path / "out")
    root = tmp_path / "image"
    _image(root, tools=False, units=())
    (root / str(smi.parent).lstrip("/")).mkdir(parents=True)
    (root / str(smi).lstrip("/")).write_bytes(smi.read_bytes())
    (root / str(smi).lstrip("/")).chmod(0o755)
    ran = run(["bash", str(out / "packer/scripts/install-mig-restore.sh"), "--root", str(root), str(out / "rootfs")])
    assert ran.rc == 0, ran.text  # the bake checks nvidia-smi only

    # at boot (here: this host, which has no slurmd or kubelet unit of that name in its folders), the
    # restore fails first, naming each missing piece, before it waits for the driver
    restore = out / "rootfs/etc/nvidia-mig/restore.sh"
    units = [u for u in ("kubelet.service", "slurmd.service")
             if not any((Path(d) / u).exists() for d in ("/etc/systemd/system", "/usr/lib/systemd/system",
                                                            "/lib/systemd/system", "/run/systemd/system"))]
    booted = subprocess.run(["bash", str(restore)], capture_output=True, text=True, check=False, timeout=30)
    assert booted.returncode == 1, booted
    assert booted.stderr.startswith(
        f"nvidia-mig-restore.service: FAILED: the image lacks nvidia-mig-parted (no executable "
        f"{tools / 'mig-parted'})"), booted.stderr
    assert all(f"{u} (no unit file)" in booted.stderr for u in units), booted.stderr
    assert "which image.provided_later says a later provisioner of the build installs" in booted.stderr


def test_cloud_init_checks_the_node_before_the_restore(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "smi").write_text("#!/bin/sh\nexit 0\n")
    (tools / "smi").chmod(0o755)
    text = (PROFILE.format(extra=f"tools: {{nvidia_smi: {tools / 'smi'}, nvidia_mig_parted: {tools / 'mp'}}}\n")
            .replace("consumers:", "kubelet: {present: false}\nconsumers:"))
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None
    script = base_image_check(checked.profile)
    # systemctl answers as it does for a unit without a file: an empty FragmentPath
    (tools / "systemctl").write_text("#!/bin/sh\necho\n")
    (tools / "systemctl").chmod(0o755)
    ran = subprocess.run(["sh", "-c", script + 'printf "%s" "$m"'], capture_output=True, text=True, check=False,
                         env={"PATH": f"{tools}:/usr/bin:/bin"})
    assert ran.stderr == (f"migbake: the node lacks what profile based needs: mp (no executable {tools / 'mp'})"
                          .replace("mp (", "nvidia-mig-parted (") + ", slurmd.service (no unit file); install "
                          "them in the image, or list them under image.provided_later if a later step installs "
                          "them; the restore did not run\n"), ran.stderr
    assert ran.stdout.startswith(", nvidia-mig-parted")
    # and the generated user-data runs exactly this check before it starts the restore
    out = generate(text, tmp_path / "out")
    runcmd = yaml.safe_load((out / "cloud-init/user-data").read_text())["runcmd"]
    assert runcmd[-1][2].startswith(script + 'if [ -n "$m" ]; then ok=no; elif systemctl start ')
