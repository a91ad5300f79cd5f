"""The fleet targets for real, into copies of the boot test's Debian root filesystem (no VM boot).

install.yml runs over Ansible's chroot connection (community.general.chroot, from the `ansible`
package): --check --diff changes nothing, the first run installs, the second reports changed=0, and
the result is the tree a real `packer build` of the same output gives on the same root. A root
without the tools fails the host before anything is installed. The Kickstart %post, as pykickstart
parses it, run with its interpreter in a chroot, gives that tree too. `migbake export --ansible` of two
profiles, run once over two chroots (one host per profile's group), gives each host exactly its own
profile's rootfs/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
import yaml
from pykickstart.parser import KickstartParser
from pykickstart.version import makeVersion
from vm_support import DRAIN_NODE1, ansible_env, fake_kubectl, require_vm_host

from migbake.profile.nodeprofile import UNIT_DIRS
from migbake_boottest.scenarios import scenario as fixtures
from migbake_boottest.vm.packer_chroot import build_into_rootfs
from migbake_boottest.vm.rootfs import BaseRootfs, ensure_rootfs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/realtools.py, tests/support.py
from realtools import require, run
from support import WORLD, cli, generate

pytestmark = pytest.mark.vm
REPO = Path(__file__).resolve().parents[2]
IMAGES = [REPO / "images/h200-inference", REPO / "images/h100-slurm"]
SKIPPED = ("var/log", "tmp", "root/.ansible", "var/cache/debconf")  # logs, staging, Ansible's remote tmp
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@pytest.fixture(scope="module")
def base() -> BaseRootfs:
    require_vm_host()
    return ensure_rootfs(log=print)


Tree = dict[str, tuple[int, int, int, bytes]]


@pytest.fixture(scope="module")
def baked(base: BaseRootfs) -> Iterator[dict[Path, Tree]]:
    """The tree a real ``packer build`` of an image's output gives on a fresh root, built once per image."""
    folder = Path(tempfile.mkdtemp(prefix="migbake-fleet-bake-", dir="/var/tmp"))

    class Bakes(dict[Path, Tree]):
        def __missing__(self, image: Path) -> Tree:
            out = image / "generated"
            root = _node_root(base, folder / image.name / "root", out)
            build_into_rootfs(out / "packer", root, workdir=folder / image.name / "sshd", log=print)
            self[image] = _tree(root)
            subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)
            return self[image]

    yield Bakes()
    subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="migbake-fleet-", dir="/var/tmp"))
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def _node_root(base: BaseRootfs, dest: Path, out: Path, *, tools: bool = True) -> Path:
    """A fresh root with (or without) the simulated tools, the fake kubelet/consumers and mig-manager."""
    root = base.fresh_copy(dest)
    fixtures.disable_cloud_init(root)
    if tools:
        unit = yaml.safe_load((out.parent / "node-profile.yaml").read_text()).get("restore", {})
        commands = fixtures.restore_commands(  # the simulated tools at the paths restore.sh calls
            out, "rootfs/etc/systemd/system/" + unit.get("unit", "nvidia-mig-restore.service"))
        consumers = tuple(p.parent.name.removesuffix(".d") for p in (out / "rootfs/etc/systemd/system").glob(
            "*.service.d/20-mig-restore.conf") if p.parent.name != "kubelet.service.d")
        fixtures.install_fixtures(root, gpu=fixtures.SIMULATED_GPUS["hopper"], commands=commands,
                                  kubelet=(out / "rootfs/etc/systemd/system/kubelet.service.d").is_dir(),
                                  consumers=consumers)
        # the node's GPU: a simulated PCI bus at /sys of the root, where the scripts as generated read it (in a
        # chroot it is a plain folder: nothing is mounted there); without it the preflight sees no NVIDIA GPU
        # and, rightly, nothing to restore (templates/scripts/_gpu-presence.sh.j2)
        shutil.copytree(WORLD.gpu_sysfs, root / "sys", symlinks=True, dirs_exist_ok=True)
    return root


def _tree(root: Path) -> Tree:
    """Every path under ``root`` (but logs and temporary files): mode, owner, group, content or link."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d)) not in SKIPPED]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath) / name
            st = p.lstat()
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else b""
            found[str(p.relative_to(root))] = (st.st_mode, st.st_uid, st.st_gid, data)
    return found


def _differences(a: Tree, b: Tree) -> list[str]:
    return sorted([f"only in the bake: {p}" for p in a.keys() - b.keys()]
                  + [f"only here: {p}" for p in b.keys() - a.keys()]
                  + [f"differs: {p} {a[p][:3]} {b[p][:3]}" for p in a.keys() & b.keys() if a[p] != b[p]])


def _playbook(out: Path, root: Path, work: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = ansible_env(work, ANSIBLE_HOST_KEY_CHECKING="False")
    argv = [require("ansible-playbook"), "-i", f"{root},", "-c", "community.general.chroot",
            "-e", "mig_restore_hosts=all", "-e", "ansible_python_interpreter=/usr/bin/python3",
            str(out / "ansible/install.yml"), *extra]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - start


def _recap(output: str) -> dict[str, int]:
    m = RECAP.search(output)
    assert m, output
    return {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}


@pytest.mark.parametrize("image", IMAGES, ids=[p.name for p in IMAGES])
def test_install_over_the_chroot_connection_is_the_bake(image: Path, base: BaseRootfs, work: Path,
                                                        baked: dict[Path, Tree]) -> None:
    out = image / "generated"
    root = _node_root(base, work / "ansible", out)
    before = _tree(root)

    check, took = _playbook(out, root, work, "--check", "--diff")
    assert check.returncode == 0, check.stdout + check.stderr
    assert _recap(check.stdout)["changed"] > 0 and _tree(root) == before, "--check changed the root"
    assert "+++ after: " in check.stdout and "/etc/nvidia-mig/config.yaml" in check.stdout, check.stdout

    first, took = _playbook(out, root, work)
    print(f"install.yml over the chroot connection, first run: {took:.1f} s")
    assert first.returncode == 0, first.stdout + first.stderr
    assert _recap(first.stdout)["changed"] > 0 and _recap(first.stdout)["failed"] == 0
    # files changed, so the handler ran, and skipped daemon-reload: the target is a chroot
    assert re.search(r"RUNNING HANDLER \[mig_restore : Reload systemd\] \**\nskipping: ", first.stdout), first.stdout
    second, took = _playbook(out, root, work)
    print(f"install.yml over the chroot connection, second run: {took:.1f} s")
    assert second.returncode == 0, second.stdout + second.stderr
    assert _recap(second.stdout) == {**_recap(second.stdout), "changed": 0, "failed": 0}, second.stdout

    assert _differences(baked[image], _tree(root)) == []
    profile = yaml.safe_load((image / "node-profile.yaml").read_text())
    restore = profile.get("restore", {}).get("unit", "nvidia-mig-restore.service")
    manager = profile.get("conflicting_manager", {}).get("unit", "nvidia-mig-manager.service")
    state = run(["systemctl", f"--root={root}", "is-enabled", restore, manager])
    assert state.out.split() == ["enabled", "masked"], state.text


def test_a_node_without_the_tools_fails_before_anything_is_installed(base: BaseRootfs, work: Path) -> None:
    out = IMAGES[0] / "generated"
    root = _node_root(base, work / "bare", out, tools=False)
    before = _tree(root)
    failed, _ = _playbook(out, root, work)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert _recap(failed.stdout)["failed"] == 1
    said = failed.stdout
    assert "missing on" in said and "/usr/bin/nvidia-smi" in said and "/usr/bin/nvidia-mig-parted" in said, said
    assert "kubelet.service" in said, said
    assert _differences(before, _tree(root)) == [], "a failed check installed something"


def test_kickstart_post_in_a_chroot_is_the_bake(base: BaseRootfs, work: Path, baked: dict[Path, Tree]) -> None:
    out = IMAGES[0] / "generated"
    root = _node_root(base, work / "kickstart", out)
    parser = KickstartParser(makeVersion("RHEL9"))
    parser.readKickstart(str(out / "kickstart/mig-restore.ks"))
    (post,) = parser.handler.scripts
    assert post.errorOnFail and post.inChroot
    script = root / "tmp/ks-script-migbake"  # where Anaconda writes a %post before it runs it in the chroot
    script.write_text(post.script)
    ran = run(["chroot", str(root), post.interp, "/tmp/ks-script-migbake"], timeout=300)
    assert ran.rc == 0, ran.text
    assert "enabled nvidia-mig-restore.service for the next boot" in ran.out and "masked" in ran.out, ran.text
    assert not (root / "tmp/migbake-kickstart").exists(), "the staging folder was left behind"
    assert _differences(baked[IMAGES[0]], _tree(root)) == []


def test_activate_keeps_a_failing_node_drained_and_stops_the_rollout(base: BaseRootfs, work: Path) -> None:
    """activate.yml over the chroot connection: the reboot cannot happen in a chroot, so node1 fails there.

    Real Ansible, real delegation to the control host, a fake kubectl that records its calls: node1 is
    cordoned and drained, never uncordoned, the play fails naming it, and node2 (serial 1,
    max_fail_percentage 0) is never touched. The passing path needs the VM (not in this file).
    """
    out = IMAGES[0] / "generated"
    root = _node_root(base, work / "node", out)
    install, _ = _playbook(out, root, work)
    assert install.returncode == 0, install.stdout
    kubectl = fake_kubectl(work)
    log = work / "kubectl.log"
    inventory = work / "inventory.ini"
    inventory.write_text(
        f"[gpu_nodes]\nnode1 ansible_host={root}\nnode2 ansible_host={root}\n\n"
        "[gpu_nodes:vars]\nansible_connection=community.general.chroot\nansible_python_interpreter=/usr/bin/python3\n\n"
        f"[control]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    env = ansible_env(work, KUBECTL_LOG=str(log))
    proc = subprocess.run([require("ansible-playbook"), "-i", str(inventory), str(out / "ansible/activate.yml"),
                           "-e", f"mig_restore_kubectl={kubectl}", "-e", "mig_restore_reboot_timeout=60"],
                          capture_output=True, text=True, env=env, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)
    said = proc.stdout + proc.stderr
    print(said[-4000:])
    assert proc.returncode == 2, said
    assert log.read_text().splitlines() == [
        "cordon node1", DRAIN_NODE1], said
    assert "node1 stays drained (not uncordoned, not resumed)" in said, said
    assert "node2" not in said, "the rollout went on after a failing node"
    assert re.search(r"^node1\s*:.*failed=1", said, re.M), said


def test_activate_moves_the_layout_name_only_after_the_drain(base: BaseRootfs, work: Path) -> None:
    """A layout move: activate.yml -e mig_restore_layout=train over the chroot connection writes the name
    where restore.layout's file source reads it after cordon and drain, then fails at the reboot (no reboot in a
    chroot: the VM test boots it); an unknown name fails before anything: no kubectl call, no file."""
    from test_ansible_kickstart import NAMED

    (work / "img").mkdir()
    (work / "img/node-profile.yaml").write_text(NAMED)
    out = generate(NAMED, work / "img/generated", production=True)
    root = _node_root(base, work / "node", out)
    install, _ = _playbook(out, root, work)
    assert install.returncode == 0, install.stdout
    kubectl = fake_kubectl(work)
    log = work / "kubectl.log"
    inventory = work / "inventory.ini"
    inventory.write_text(
        f"[gpu_nodes]\nnode1 ansible_host={root}\n\n"
        "[gpu_nodes:vars]\nansible_connection=community.general.chroot\nansible_python_interpreter=/usr/bin/python3\n\n"
        f"[control]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    layout_file = root / "etc/migbake/layout"
    for name in ("bogus", "train"):
        proc = subprocess.run([require("ansible-playbook"), "-i", str(inventory), str(out / "ansible/activate.yml"),
                               "-e", f"mig_restore_kubectl={kubectl}", "-e", "mig_restore_reboot_timeout=60",
                               "-e", f"mig_restore_layout={name}"],
                              capture_output=True, text=True, env=ansible_env(work, KUBECTL_LOG=str(log)),
                              timeout=600, check=False, stdin=subprocess.DEVNULL)
        said = proc.stdout + proc.stderr
        print(said[-4000:])
        assert proc.returncode == 2, said
        if name == "bogus":
            assert "is not a layout of profile moving (it has: infer, train)" in " ".join(said.split()), said
            assert not log.exists() and not layout_file.exists(), "the node was touched"
        else:
            assert log.read_text().splitlines() == ["cordon node1", DRAIN_NODE1], said
            assert layout_file.read_text() == "train\n" and layout_file.stat().st_mode & 0o777 == 0o644
            assert "node1 stays drained (not uncordoned, not resumed): Reboot" in said, said


def test_a_failed_preflight_fails_the_host_before_anything_is_installed(base: BaseRootfs, work: Path) -> None:
    """As a running node (mig_restore_offline=false) the generated preflight runs: no host driver, a FAIL."""
    out = IMAGES[0] / "generated"
    root = _node_root(base, work / "node", out)
    before = _tree(root)
    failed, _ = _playbook(out, root, work, "-e", "mig_restore_offline=false")
    said = failed.stdout
    assert failed.returncode == 2 and _recap(said)["failed"] == 1, said
    assert "preflight of profile h200-inference failed on" in said, said
    assert "driver: no NVIDIA kernel driver on the host" in said, said
    assert "mig-manager:" not in said, "the role masks the manager itself: that FAIL is ignored"
    assert _differences(before, _tree(root)) == [], "a failed preflight installed something"


def test_the_role_leaves_what_image_provided_later_names_to_the_boot(base: BaseRootfs, work: Path) -> None:
    """As the bake: in an image, a piece image.provided_later names is not checked; on a running node it is.

    The base image lacks nvidia-mig-parted and kubelet's unit, which a later provisioner installs: the
    role installs into it over the chroot connection; as a running node it fails naming both.
    """
    profile = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
    profile["image"] = {"provided_later": ["nvidia-mig-parted", "kubelet.service"]}
    out = generate(yaml.safe_dump(profile), work / "generated", production=True)
    root = _node_root(base, work / "later", IMAGES[0] / "generated")
    (root / "usr/bin/nvidia-mig-parted").unlink()
    for folder in UNIT_DIRS:
        (root / folder.lstrip("/") / "kubelet.service").unlink(missing_ok=True)
    assert not any((root / folder.lstrip("/") / "kubelet.service").exists() for folder in UNIT_DIRS)
    before = _tree(root)

    running, _ = _playbook(out, root, work, "-e", "mig_restore_offline=false", "-e", "mig_restore_preflight=false")
    said = running.stdout
    assert running.returncode == 2 and _recap(said)["failed"] == 1, said
    assert re.search(r"missing on \S+: /usr/bin/nvidia-mig-parted, kubelet\.service \(", said), said
    assert _differences(before, _tree(root)) == [], "a failed check installed something"

    image, _ = _playbook(out, root, work)
    assert image.returncode == 0 and _recap(image.stdout)["failed"] == 0, image.stdout
    assert (root / "etc/systemd/system/nvidia-mig-restore.service").is_file()


def _changes(before: Tree, after: Tree) -> Tree:
    return {p: v for p, v in after.items() if before.get(p) != v}


def test_export_ansible_gives_each_group_its_own_profile(base: BaseRootfs, work: Path) -> None:
    """One role for two node types: one install.yml run over both chroots, one host in each profile's group.

    The second profile's description holds a Jinja expression that would create a file on the control
    host if Ansible ever templated a file of the role's files/ (it is in the header of every file of that
    profile) or the group data.
    """
    pwned = work / "templated"
    slurm = yaml.safe_load((IMAGES[1] / "node-profile.yaml").read_text())
    slurm["description"] = f"{{{{ lookup('pipe', 'touch {pwned}') }}}} {{% raw %}} ${{#x}}"
    (work / "slurm").mkdir()
    (work / "slurm/node-profile.yaml").write_text(yaml.safe_dump(slurm))
    outs = {"h200-inference": IMAGES[0] / "generated",
            "h100-slurm": generate(yaml.safe_dump(slurm), work / "slurm/generated", production=True)}
    code, said, err = cli("export", "--ansible", str(IMAGES[0] / "node-profile.yaml"),
                          str(work / "slurm/node-profile.yaml"), "-o", str(work / "fleet"))
    assert code == 0, said + err
    roots = {name: _node_root(base, work / name, out) for name, out in outs.items()}
    before = {name: _tree(root) for name, root in roots.items()}
    inventory = work / "inventory.ini"
    # each profile's inventory group: its name with - as _ (a valid Ansible group name, render.fleet.ansible_group)
    inventory.write_text("".join(f"[{name.replace('-', '_')}]\nnode-{name} ansible_host={root}\n\n"
                                 for name, root in roots.items())
                         + "[all:vars]\nansible_connection=community.general.chroot\n"
                         "ansible_python_interpreter=/usr/bin/python3\n")
    start = time.monotonic()
    proc = subprocess.run([require("ansible-playbook"), "-i", str(inventory), str(work / "fleet/install.yml")],
                          capture_output=True, text=True, env=ansible_env(work), timeout=600, check=False,
                          stdin=subprocess.DEVNULL)
    print(f"export --ansible: install.yml over two chroots at once: {time.monotonic() - start:.1f} s")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    for name in roots:
        m = re.search(rf"^node-{name}\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", said, re.M)
        assert m and int(m[1]) > 0, said
    assert not pwned.exists(), "Ansible templated a profile's file content"
    for name, root in roots.items():
        rootfs = outs[name] / "rootfs"
        want = {str(p.relative_to(rootfs)): p for p in rootfs.rglob("*") if p.is_file()}
        changed = _changes(before[name], _tree(root))
        files = {p: v for p, v in changed.items() if not os.path.islink(root / p)}
        assert sorted(files) == sorted(want), f"{name}: installed files other than its rootfs/"
        for rel, src in want.items():
            mode, uid, gid, data = files[rel]
            assert data == src.read_bytes() and (uid, gid) == (0, 0), rel
            assert mode & 0o7777 == src.stat().st_mode & 0o7777, rel
        links = sorted(p for p in changed if p not in files)
        assert all(p.startswith("etc/systemd/system/") for p in links), links
        profile = yaml.safe_load((outs[name].parent / "node-profile.yaml").read_text())
        restore = profile.get("restore", {}).get("unit", "nvidia-mig-restore.service")
        manager = profile.get("conflicting_manager", {}).get("unit", "nvidia-mig-manager.service")
        state = run(["systemctl", f"--root={root}", "is-enabled", restore, manager])
        assert state.out.split() == ["enabled", "masked"], state.text
