"""`migbake bake` for real: a Packer build over SSH into a debootstrap'ed Debian root filesystem.

Each example image is baked with the real `packer build` (null.ssh source, sftp, a private sshd on
127.0.0.1 chrooted into the rootfs), then checked from outside with `systemctl --root`,
`systemd-analyze verify --root` and `systemd --test`; a second bake must change nothing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
import yaml

from migbake_boottest import BootAssets
from migbake_boottest.scenarios import kubelet as kubelet_fixtures
from migbake_boottest.scenarios import scenario as fixtures
from migbake_boottest.vm.packer_chroot import chroot_sshd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/realtools.py
from realtools import boot_graph, boot_jobs, run, unit_section

pytestmark = pytest.mark.vm
REPO = Path(__file__).resolve().parents[2]
IMAGES = sorted(p.parent for p in (REPO / "images").glob("*/node-profile.yaml"))


@pytest.fixture
def rootfs(boot_assets: BootAssets) -> Iterator[Path]:
    """A fresh copy of the cached Debian rootfs with the fake kubelet and mig-manager enabled."""
    base = Path(tempfile.mkdtemp(prefix="migbake-bake-", dir="/var/tmp"))
    os.chmod(base, 0o755)  # systemd --test reads the tree as nobody
    root = boot_assets.rootfs.fresh_copy(base / "rootfs")
    fixtures.disable_cloud_init(root)
    yield root
    subprocess.run(["rm", "-rf", str(base)], check=False)


def _snapshot(root: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = Path(dirpath) / name
            if p.is_relative_to(root / "var/log") or p.is_relative_to(root / "tmp"):
                continue
            st = p.lstat()
            h.update(f"{p.relative_to(root)} {st.st_mode:o} {st.st_uid}:{st.st_gid}".encode())
            h.update(os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else b"")
    return h.hexdigest()


def _bake(image: Path, out: Path, root: Path, work: Path) -> subprocess.CompletedProcess[str]:
    with chroot_sshd(root, workdir=work) as ep:
        return subprocess.run(
            ["migbake", "bake", str(image), "-o", str(out), "--only", "null.ssh",
             "--var", "ssh_host=127.0.0.1", "--var", f"ssh_port={ep.port}",
             "--var", f"ssh_private_key_file={ep.private_key}",
             "--var", f"manifest_path={work / 'manifest.json'}"],
            capture_output=True, text=True, check=False, timeout=600, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("image", IMAGES, ids=[p.name for p in IMAGES])
def test_bake_into_a_real_rootfs(image: Path, rootfs: Path, tmp_path: Path) -> None:
    profile = yaml.safe_load((image / "node-profile.yaml").read_text())
    tools, restore_section = profile.get("tools", {}), profile.get("restore", {})
    given = {"nvidia_smi": tools.get("nvidia_smi"), "nvidia_mig_parted": tools.get("nvidia_mig_parted"),
             "config_file": restore_section.get("config_path"), "config_name": restore_section.get("config_name")}
    commands = fixtures.RestoreCommands(**{k: v for k, v in given.items() if v})  # simulated tools at its paths
    fixtures.install_fixtures(rootfs, gpu=fixtures.SIMULATED_GPUS["hopper"], commands=commands, kubelet=True)
    # the kubelet the profile's kubelet.layout has (kubeadm's package drop-in, EKS AL2023's unit)
    layout = profile.get("kubelet", {}).get("layout", "generic")
    kubelet_fixtures.install(rootfs, kubelet_fixtures.fixture_for(layout), lambda _: None)
    out = tmp_path / "out"
    baked = _bake(image, out, rootfs, tmp_path / "sshd1")
    assert baked.returncode == 0, baked.stdout + baked.stderr
    assert "packer build -color=false -only=null.ssh" in baked.stdout and "migbake: baked" in baked.stdout
    first = baked.stdout.splitlines()[0]
    said = f" files to {out} (profile {profile['name']} from {image / 'node-profile.yaml'})"
    assert first.startswith("wrote ") and first.endswith(said), first

    manifest = yaml.safe_load((tmp_path / "sshd1/manifest.json").read_text())
    custom = manifest["builds"][-1]["custom_data"]
    assert custom["profile"] == profile["name"] and len(custom["profile_sha256"]) == 64

    default = "migbake-driver-watch.service" if profile.get("driver") == "container" else "nvidia-mig-restore.service"
    restore = profile.get("restore", {}).get("unit", default)
    mgr = profile.get("conflicting_manager", {})
    manager = mgr.get("unit", "nvidia-mig-manager.service")
    state = run(["systemctl", f"--root={rootfs}", "is-enabled", restore, manager])
    assert state.out.split() == ["enabled", "masked" if mgr.get("action", "mask") == "mask" else "disabled"], state.text

    # every file of the generated rootfs/ tree is in the image, root-owned, with its mode and content
    for src in (out / "rootfs").rglob("*"):
        if src.is_file():
            dst = rootfs / src.relative_to(out / "rootfs")
            st = dst.stat()
            assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o644, 0, 0), dst
            assert dst.read_bytes() == src.read_bytes(), dst
    assert not (rootfs / "tmp/migbake-rootfs").exists(), "the staging directory was left behind"

    kubelet = profile.get("kubelet", {}).get("present", True)
    units = [restore] + (["kubelet.service"] if kubelet else [])
    verify = run(["systemd-analyze", "verify", f"--root={rootfs}", "--man=no", *units])
    assert verify.rc == 0 and verify.err == "", verify.text

    empty = rootfs.parent / "empty"
    empty.mkdir(exist_ok=True)
    graph = boot_graph(rootfs, empty)
    assert graph.rc == 0, graph.err
    assert "ordering cycle" not in graph.err
    jobs = boot_jobs(graph.out)
    assert restore in jobs and manager not in jobs
    if kubelet and profile.get("driver") == "container":  # kubelet starts the driver pod: nothing holds it
        assert restore not in unit_section(graph.out, "kubelet.service")
    elif kubelet:
        section = unit_section(graph.out, "kubelet.service")
        assert f"Requires: {restore} (origin-file)" in section, section
        assert f"After: {restore} (origin-file" in section, section

    # a second bake changes nothing in the image
    before = _snapshot(rootfs)
    again = _bake(image, out, rootfs, tmp_path / "sshd2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "unchanged /" in again.stdout
    assert _snapshot(rootfs) == before


def test_bake_dry_run_and_a_failing_bake(tmp_path: Path) -> None:
    image = REPO / "images/h200-inference"
    dry = subprocess.run(["migbake", "bake", str(image), "-o", str(tmp_path / "o"), "--dry-run",
                          "--only", "amazon-ebs.golden", "--var", "aws_region=eu-west-1",
                          "--var", "kubernetes_version=1.35"],
                         capture_output=True, text=True, check=False)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert any(line.startswith("packer validate -only=amazon-ebs.golden -var=aws_region=eu-west-1 ")
               for line in lines), lines
    assert any(line.startswith("packer build -color=false -only=amazon-ebs.golden") for line in lines)
    # nothing listens on this port: the build step fails, and migbake names the step and the code
    failed = subprocess.run(["migbake", "bake", str(image), "-o", str(tmp_path / "o"), "--only", "null.ssh",
                             "--var", "ssh_host=127.0.0.1", "--var", "ssh_port=1",
                             "--var", f"ssh_private_key_file={tmp_path / 'nokey'}"],
                            capture_output=True, text=True, check=False, timeout=300)
    assert failed.returncode == 1
    assert "migbake: error: packer " in failed.stderr and "failed with exit code 1" in failed.stderr
    missing = subprocess.run(["migbake", "bake", str(image), "-o", str(tmp_path / "o2"), "--only", "null.ssh",
                              "--var", "ssh_host=192.0.2.10"],
                             capture_output=True, text=True, check=False,
                             env={**os.environ, "MIGBAKE_PACKER": "/nonexistent/packer"})
    assert missing.returncode == 1 and "install Packer" in missing.stderr
    assert not (tmp_path / "o2").exists()  # nothing written when Packer is missing


def test_a_bare_debian_root_fails_the_bake_naming_every_missing_piece(rootfs: Path, tmp_path: Path) -> None:
    """A real Packer build into a debootstrap'ed Debian with neither the NVIDIA tools nor kubelet nor the
    consumer (the boot test's rootfs has Debian's slurmd, so the consumer here is one no package ships)."""
    image = REPO / "images/h200-inference"
    profile = tmp_path / "node-profile.yaml"
    profile.write_text((image / "node-profile.yaml").read_text() + "consumers:\n  - unit: gpu-inference.service\n")
    before = _snapshot(rootfs)
    baked = _bake(profile, tmp_path / "out", rootfs, tmp_path / "sshd")
    assert baked.returncode == 1, baked.stdout + baked.stderr
    said = [line for line in baked.stdout.splitlines() if "install-mig-restore: error:" in line]
    assert len(said) == 1, baked.stdout
    for piece in ("nvidia-mig-parted (no executable /usr/bin/nvidia-mig-parted)",
                  "nvidia-smi (no executable /usr/bin/nvidia-smi)", "kubelet.service (no unit file)",
                  "gpu-inference.service (no unit file)"):
        assert piece in said[0], said[0]
    assert "migbake: error: packer build failed" in baked.stderr, baked.stderr
    # nothing was installed: the build stopped at the check (Packer's staging upload is removed below)
    subprocess.run(["rm", "-rf", str(rootfs / "tmp/migbake-rootfs")], check=True)
    assert _snapshot(rootfs) == before
    assert not (rootfs / "etc/nvidia-mig").exists()
    manager = run(["systemctl", f"--root={rootfs}", "is-enabled", "nvidia-mig-manager.service"])
    assert "masked" not in manager.out

    # what image.provided_later leaves to a later provisioner is not checked: only the rest is named
    profile.write_text(profile.read_text() + "image:\n  provided_later: [nvidia-mig-parted, gpu-inference.service]\n")
    baked = _bake(profile, tmp_path / "out2", rootfs, tmp_path / "sshd2")
    assert baked.returncode == 1
    said = next(line for line in baked.stdout.splitlines() if "install-mig-restore: error:" in line)
    assert "nvidia-smi (no executable" in said and "kubelet.service (no unit file)" in said, said
    assert "nvidia-mig-parted" not in said and "gpu-inference" not in said, said

    # and with the pieces there (the simulated tools, the fake kubelet and the consumer), the same bake passes
    fixtures.install_fixtures(rootfs, gpu=fixtures.SIMULATED_GPUS["hopper"], kubelet=True,
                              consumers=("gpu-inference.service",))
    baked = _bake(profile, tmp_path / "out3", rootfs, tmp_path / "sshd3")
    assert baked.returncode == 0, baked.stdout + baked.stderr
    assert run(["systemctl", f"--root={rootfs}", "is-enabled", "nvidia-mig-restore.service"]).out.strip() == "enabled"
