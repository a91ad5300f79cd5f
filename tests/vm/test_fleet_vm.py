"""A day-2 rollout for real: install.yml and activate.yml over SSH into the boot-test VM, real reboots.

One VM, five boots, NVIDIA's nvidia-mig-parted over the simulated GPUs of images/a100-80gb-mixed (8x A100,
kubeadm's deb kubelet, and Debian's real slurmd as a second consumer, with explicit gres.conf lines) with two
named layouts (its own as ``mixed``, the default, and ``small``: seven 1g.10gb on every GPU; restore.layout from
``file``), on a node whose GPU reset fails (the ``ampere-pending`` knob, as in a passthrough VM). The node is its
own Slurm controller host for the play: a fake scontrol and squeue on it record their calls:
1. a running node installed before migbake: kubelet and NVIDIA's mig-manager enabled, no restore, sshd
   up. install.yml over SSH runs the preflight (the role's file, copied to a temporary folder), installs the
   restore (a real daemon-reload) and starts nothing (a second run
   changing nothing is test_fleet_chroot.py's). activate.yml cordons and drains the node through a fake kubectl
   on the control host (this machine, which records every call), reboots it with ``ansible.builtin.reboot`` ...
2. ... the restore runs before kubelet, finds the MIG mode change pending (the driver answers 90 s after
   boot, so that the play has connected to that boot first), records its marker and reboots the node
   itself; the play waits through that reboot (a new boot id), takes the second boot's restore result,
   verifies (kubelet-unit: kubeadm's drop-in) and uncordons. Every claim of an ok boot holds on that boot's
   report (read over SSH), as in the Packer boots: the default layout, ``mixed``.
3. The layout move: ``activate.yml -e mig_restore_layout=small`` drains the node (kubectl and scontrol),
   writes the name to /etc/migbake/layout, installs small's gres.conf and gives the node's line in slurm.conf
   small's Gres= (scontrol reconfigure), reboots, verifies that layout, labels the Node, uncordons and resumes;
   every ok claim holds with ``small``'s layout, the restore chose it from the file, kubelet started with its
   label, and the real ``slurmd -G`` lists small's GRES.
4. The simulated GPU is made to refuse the apply (a GPU in use, set over SSH) and activate.yml runs again:
   the restore fails after the reboot, kubelet stays down, the play fails naming the node, and the node
   stays drained: the second cordon and drain are never followed by an uncordon.
One node for every rollout: each task of the role over SSH costs seconds under TCG.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest

from migbake.render.tree import render
from migbake.render.write import Origin, write_tree
from migbake.rules.validate import check_bytes
from migbake_boottest import BootAssets
from migbake_boottest.guestreport import parse_report
from migbake_boottest.run import RESTORE_UNIT, boot_timeout
from migbake_boottest.scenarios import kubelet as kubelet_fixtures
from migbake_boottest.scenarios import layouts as scenarios_layouts
from migbake_boottest.scenarios import reset as scenarios_reset
from migbake_boottest.scenarios import scenario as fixtures
from migbake_boottest.scenarios.claims import BootContext, Claim, evaluate
from migbake_boottest.scenarios.node import promises_of
from migbake_boottest.scenarios.node_claims import node_claims
from migbake_boottest.simgpu import guest as simguest
from migbake_boottest.simgpu.build import compile_simgpu
from migbake_boottest.simgpu.node import SimulatedNode, node_for_profile
from migbake_boottest.vm import image, qemu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support.py, tests/realtools.py
from realtools import require
from support import REPO, shared_file
from test_slurm_slurmd import gres_counts
from vm_support import DRAIN_NODE1, ansible_env, fake_kubectl

pytestmark = pytest.mark.vm
IMAGE = REPO / "images/a100-80gb-mixed"
OUT = IMAGE / "generated"
SMALL = "        1g.10gb: 7\n"
# the guest's fake scontrol and squeue (the node is the play's Slurm controller host): each records its call
FAKE_SLURM = "#!/bin/sh\nprintf '%s %s\\n' \"$(basename \"$0\")\" \"$*\" >>/var/log/fake-slurm.log\n"
SLURM_ARGS = ("-e", "mig_restore_scontrol=/usr/local/sbin/scontrol", "-e", "mig_restore_squeue=/usr/local/sbin/squeue",
              "-e", f"mig_restore_slurm_node_name={fixtures.SLURM_NODE}")
MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
# a boot with 8 simulated GPUs takes 35-80 s under TCG; Ansible's python is slower; $MIGBAKE_BOOT_TIMEOUT raises it
BOOT_TIMEOUT_S = int(max(420.0, boot_timeout(None)))  # ansible.builtin.reboot wants whole seconds


class Node:
    """The running guest: ssh into it, and run the generated playbooks against it."""

    def __init__(self, work: Path, port: int, key: Path, out: Path = OUT) -> None:
        self.work, self.port, self.key, self.out = work, port, key, out
        self.kubectl_log = work / "kubectl.log"
        self.timings: list[str] = []
        self.kubectl = fake_kubectl(work)
        options = "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o IdentitiesOnly=yes"
        self.inventory = work / "inventory.ini"
        self.inventory.write_text(
            f"[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port={port} ansible_user=root "
            f"ansible_ssh_private_key_file={key} ansible_python_interpreter=/usr/bin/python3 "
            # root logs in; become is su (the guest has no sudo), as root needs no password
            f"ansible_become_method=su ansible_ssh_common_args='{options}'\n\n"
            f"[control]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
        self.env = ansible_env(work, KUBECTL_LOG=str(self.kubectl_log))

    def ssh(self, command: str, *, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["ssh", "-q", "-p", str(self.port), "-i", str(self.key), "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=10", "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no",
                "-o", "IdentitiesOnly=yes", "root@127.0.0.1", command]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
        assert not check or proc.returncode == 0, f"ssh {command!r}: rc {proc.returncode}\n{proc.stderr}"
        return proc

    def wait_for_ssh(self, timeout_s: float) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            try:
                if self.ssh("true", timeout=30, check=False).returncode == 0:
                    return time.monotonic() - start
            except subprocess.TimeoutExpired:
                pass
            time.sleep(2)
        pytest.fail(f"the guest's sshd did not answer on 127.0.0.1:{self.port} within {timeout_s:.0f} s")

    def playbook(self, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
        argv = [require("ansible-playbook"), "-i", str(self.inventory), str(self.out / "ansible" / name),
                "-e", f"mig_restore_kubectl={self.kubectl}", *SLURM_ARGS,
                "-e", f"mig_restore_reboot_timeout={BOOT_TIMEOUT_S}", *extra]
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=1500, check=False,
                              stdin=subprocess.DEVNULL)
        took = time.monotonic() - start
        self.timings.append(f"{name} {took:.0f} s (rc {proc.returncode})")
        print(f"ansible-playbook {name} {' '.join(extra)}: rc {proc.returncode} in {took:.1f} s")
        print(proc.stdout[-3000:] + proc.stderr[-2000:])
        return proc

    def fresh_evidence(self, *paths: str) -> None:
        """Each boot's evidence comes from that boot only (as the Packer boots delete it with debugfs)."""
        self.ssh("rm -f -- " + " ".join(shlex.quote(p) for p in paths))

    def report(self) -> str:
        """The report of the current boot, once test-report.service has written all of it."""
        for _ in range(90):
            text = self.ssh(f"cat {fixtures.REPORT} 2>/dev/null", check=False).stdout
            if "\n=== end" in text:
                return text
            time.sleep(2)
        pytest.fail(f"no complete {fixtures.REPORT} on the guest")

    def calls(self) -> list[str]:
        return self.kubectl_log.read_text().splitlines() if self.kubectl_log.exists() else []


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="migbake-fleet-vm-", dir="/var/tmp"))
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_disk(boot_assets: BootAssets, work: Path, out: Path, sim: SimulatedNode, fixture: str,
               mig_parted: Path, *, consumers: tuple[str, ...] = (), knobs: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """The disk of a plain GPU node with sshd (NVIDIA's mig-parted over ``sim``, no restore), and the SSH key."""
    rootfs = boot_assets.rootfs.fresh_copy(work / "rootfs")
    commands = fixtures.restore_commands(out, RESTORE_UNIT)
    config = (out / "rootfs" / commands.config_file.lstrip("/")).read_text()
    generation = "ampere" if sim.model.mig_mode_persists else "hopper"
    gpu = fixtures.simulated_gpu_for_config(config, commands.config_name, generation)
    fixtures.install_fixtures(rootfs, gpu=gpu, commands=commands, kubelet=True, consumers=consumers, log=print,
                              actor=f"NVIDIA nvidia-mig-parted over the simulated GPU ({sim.model.key})")
    simguest.install_simgpu(rootfs, node=sim, build=compile_simgpu(work / "simgpu", log=print),
                            mig_parted=mig_parted, nvidia_smi=commands.nvidia_smi,
                            nvidia_mig_parted=commands.nvidia_mig_parted, log=print)
    fixtures.simulated_pci_bus(rootfs, [sim.model.pci_device_ids[0]] * sim.count)  # the node's GPUs on its PCI bus
    for knob in knobs:
        simguest.set_knob(rootfs, knob)
    kubelet_fixtures.install(rootfs, fixture, print)  # type: ignore[arg-type]
    fixtures.disable_cloud_init(rootfs)
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "migbake-fleet-test", "-f", str(key)],
                   check=True)
    fixtures.enable_ssh(rootfs, (work / "id_ed25519.pub").read_text(), log=print)
    disk = image.make_disk(rootfs, work / "disk.img", log=print)
    subprocess.run(["rm", "-rf", "--one-file-system", str(rootfs)], check=False)
    return disk, key


def _claims(node: Node, ctx: BootContext, report_text: str, serial_log: Path) -> list[Claim]:
    """The claims of the Packer boots, on this boot's report, console and files (read over SSH)."""
    report = parse_report(report_text)
    console = serial_log.read_text(errors="replace")
    console = console[console.rfind("Linux version "):]  # this boot's part of the console
    metrics = node.ssh(f"cat {shlex.quote(ctx.metrics_path)}", check=False).stdout if ctx.metrics_path else None
    ctx = replace(ctx, console=console, metrics=metrics or None)
    claims = evaluate(report, ctx) + node_claims(report, ctx)
    if ctx.scenario == "ok":
        argv = node.ssh(f"cat {kubelet_fixtures.ARGV_LOG}", check=False).stdout or None
        claims += kubelet_fixtures.labels_claim(argv, ctx.kubelet_fixture, ctx.node_labels)  # type: ignore[arg-type]
    for claim in claims:
        print(f"boot {ctx.boot}: [{'ok' if claim.passed else 'FAIL'}] {claim.id}: {claim.evidence}")
    return claims


def named_layouts(text: str) -> str:
    """images/a100-80gb-mixed with its layout named ``mixed`` (the default) and a second, ``small``, from the file."""
    text = text.replace("      layout:\n", "      layouts:\n        mixed:\n")
    text = text.replace("        3g.40gb: 1\n        2g.20gb: 1\n        1g.10gb: 2\n",
                        "          3g.40gb: 1\n          2g.20gb: 1\n          1g.10gb: 2\n        small:\n  " + SMALL)
    text = text.replace("      layouts:\n        mixed:\n        1g.10gb: 7\n",
                        "      layouts:\n        mixed:\n  " + SMALL + "        small:\n  " + SMALL)
    # Debian's slurmd as a second consumer, with explicit device lines (it is built without NVML)
    return text + ("restore:\n  layout: {from: [file], default: mixed}\n"
                   "consumers:\n  - unit: slurmd.service\nslurm: {autodetect: false}\n")


def test_a_rollout_over_ssh_waits_through_the_restores_reboot_moves_the_layout_and_keeps_a_failing_node_drained(
        boot_assets: BootAssets, work: Path) -> None:
    mig_parted = shared_file(MIG_PARTED)
    checked = check_bytes(named_layouts((IMAGE / "node-profile.yaml").read_text()).encode(), "node-profile.yaml")
    assert checked.profile is not None, checked.problems
    profile = checked.profile
    assert profile.layout_names == ("mixed", "small") and profile.restore.layout_default == "mixed"
    out = work / "out"
    write_tree(render(profile), out, origin=Origin.of("-", out, profile.name, profile.source_sha256))
    sim = node_for_profile(profile.named("mixed"))
    assert sim == node_for_profile(check_bytes((IMAGE / "node-profile.yaml").read_bytes(), "p.yaml").profile)  # type: ignore[arg-type]
    assert sim.model.mig_mode_persists  # Ampere: a MIG mode change needs a GPU reset
    promises = promises_of(profile)
    fixture = kubelet_fixtures.fixture_for(promises.kubelet_layout)
    assert fixture == "kubeadm-deb"

    # boot 1's disk: a plain GPU node with sshd (what a fleet's machines are before migbake), whose GPU reset
    # fails (as in a passthrough VM): the MIG mode change waits for a reboot
    consumers = tuple(unit for unit, _ in promises.consumers)
    disk, key = _node_disk(boot_assets, work, out, sim, fixture, mig_parted, consumers=consumers,
                           knobs=scenarios_reset.FAULT_KNOBS["ampere-pending"])

    port = _free_port()
    node = Node(work, port, key, out)
    base = BootContext("ansible", "ok", "ampere", 2, console="", kubelet=True,
                       kubelet_requires=profile.restore.on_failure == "block-kubelet", expected=sim.gpus,
                       consumers=promises.consumers, metrics_path=promises.metrics_textfile,
                       kubelet_fixture=fixture, node_labels=promises.node_labels)
    evidence = (fixtures.STUB_LOG, fixtures.REPORT, kubelet_fixtures.ARGV_LOG, promises.metrics_textfile)
    boot_id = "cat /proc/sys/kernel/random/boot_id"
    with qemu.start(kernel=boot_assets.kernel, disk=disk, serial_log=work / "serial.log", ssh_port=port,
                    log=print) as vm:
        first_ssh = node.wait_for_ssh(BOOT_TIMEOUT_S)
        print(f"sshd answered after {first_ssh:.1f} s")
        assert node.ssh("systemctl is-active nvidia-mig-restore.service", check=False).stdout.strip() != "active"
        # the node as a Slurm admin has it: GresTypes=gpu in slurm.conf, the fake controller commands, and the
        # device files small's gres.conf names, made at every boot as the driver makes them (any character device:
        # slurmd checks the type only)
        small_gres = out / "ansible/roles/mig_restore/files/all/slurm/small/gres.conf"
        devices = sorted(set(re.findall(r"/dev/\S+?(?=,|$)", small_gres.read_text(), re.M)))
        tmpfiles = "d /dev/nvidia-caps 0755 root root -\n" + "".join(f"c {d} 0666 root root - 1:3\n" for d in devices)
        node.ssh(f"echo GresTypes=gpu >>/etc/slurm/slurm.conf && printf %s {shlex.quote(tmpfiles)} "
                 ">/etc/tmpfiles.d/simulated-nvidia.conf && for c in scontrol squeue; do "
                 f"printf %s {shlex.quote(FAKE_SLURM)} >/usr/local/sbin/$c; chmod 755 /usr/local/sbin/$c; done")

        # 1. install: enables, masks, never starts
        install = node.playbook("install.yml")
        assert install.returncode == 0, install.stdout
        # the preflight, the role's files/all/preflight-mig-restore.sh, ran over SSH and its --json was read
        assert "TASK [mig_restore : Run the preflight]" in install.stdout, install.stdout
        assert node.ssh("ls -d /tmp/*.mig-restore", check=False).stdout == "", "the preflight's copy stays behind"
        state = node.ssh("systemctl is-enabled nvidia-mig-restore.service nvidia-mig-manager.service; "
                         "systemctl is-active nvidia-mig-restore.service", check=False).stdout.split()
        assert state == ["enabled", "masked", "inactive"], f"install enables, masks, and never starts: {state}"

        # 2. activate: from now on the driver answers only 90 s after each boot, so the restore's own reboot
        # comes after sshd is up and the play has connected to that boot (a quick one would reboot before the
        # play ever saw it). The play waits through that reboot (a new boot id), takes the second boot's
        # restore result, verifies and uncordons; every claim of an ok boot holds on that boot's report.
        # (at least 90 s, and well past the time sshd took to answer at this boot: on a loaded host the play
        # connects later, and a driver that answers before it lets the restore reboot before the play saw the boot)
        node.ssh(f"echo {max(90, int(2 * first_ssh) + 30)} >{simguest.KNOB_DIR}/driver-delay")
        node.fresh_evidence(*evidence)
        first = node.ssh(boot_id).stdout.strip()
        ok = node.playbook("activate.yml", "-v")  # -v: the verify script's lines are in the output
        said = ok.stdout + ok.stderr
        assert ok.returncode == 0, said
        assert node.calls() == ["cordon node1", DRAIN_NODE1, "uncordon node1"], said
        for task in ("Note the boot after the restore's reboot", "Wait for the second boot's restore",
                     "Take the second boot's result", "Run the verify", "Remove the verify's temporary folder"):
            assert f"TASK [mig_restore : {task}]" in said, task
        assert "skipping: [node1]" not in said.split("Wait for the second boot's restore]")[1].split("TASK")[0]
        state = node.ssh(f"{boot_id}; systemctl is-active nvidia-mig-restore.service kubelet.service; "
                         f"test -e {scenarios_reset.DEFAULT_MARKER} && echo marker || echo no-marker; "
                         f"cat {kubelet_fixtures.ARGV_LOG}", check=False).stdout.split()
        assert state[0] != first and state[1:4] == ["active", "active", "no-marker"], state
        # the profile's label and the default layout's name, as the restore's label file gives them (one argument)
        labels = kubelet_fixtures.node_labels_given(state)
        assert {"nvidia.com/gpu.deploy.mig-manager=false", "nvidia.com/mig.config=mixed"} <= labels, state
        assert "nvidia-mig-parted assert: the GPUs have config" in said
        assert "kubelet-unit: kubeadm's drop-in" in said, said
        # restored-after-reboot reads the simulated GPUs' state as the boot found it, which the driver delay
        # of this test hides (nvidia-smi fails for 90 s after boot: "nothing recorded"); the layout itself is
        # held by layout-applied and exported-layout here, and the reboot claim by the Packer and cloud-init boots
        failed = [c for c in _claims(node, base, node.report(), vm.serial_log)
                  if not c.passed and c.id != "restored-after-reboot"]
        assert failed == [], "\n".join(f"{c.id}: {c.evidence}" for c in failed)

        # 3. the layout move: drain, the name in /etc/migbake/layout, reboot, verify that layout, label, uncordon
        node.ssh(f"rm -f {simguest.KNOB_DIR}/driver-delay")
        # the boot report's own assert (test-report, a fixture) now asks for the layout the node is moved to
        node.ssh("sed -i 's/ -c mixed 2>/ -c small 2>/' /usr/local/sbin/test-report && "
                 "grep -q -- ' -c small 2>' /usr/local/sbin/test-report")
        node.fresh_evidence(*evidence)
        node.ssh("rm -f /var/log/fake-slurm.log")
        moved = node.playbook("activate.yml", "-v", "-e", "mig_restore_layout=small",
                              "-e", "mig_restore_slurm_conf=/etc/slurm/slurm.conf")
        said = moved.stdout + moved.stderr
        assert moved.returncode == 0, said
        label = "label --overwrite node node1 nvidia.com/mig.config=small"
        assert node.calls()[3:] == ["cordon node1", DRAIN_NODE1, label, "uncordon node1"], said
        assert node.ssh("cat /etc/migbake/layout").stdout == "small\n"
        assert "PASS  layout small, from file" in said, said
        # Slurm: drained, small's gres.conf and Gres= before the reboot, resumed; the real slurmd -G lists small's GRES
        reason = f"reason=migbake: MIG layout change ({profile.name})"
        assert node.ssh("cat /var/log/fake-slurm.log").stdout.splitlines() == [
            f"scontrol update nodename={fixtures.SLURM_NODE} state=drain {reason}",
            f"squeue --noheader --format=%i --nodelist={fixtures.SLURM_NODE}", "scontrol reconfigure",
            f"scontrol update nodename={fixtures.SLURM_NODE} state=resume"], said
        assert node.ssh("cat /etc/slurm/gres.conf").stdout == small_gres.read_text()
        (gres,) = (w for line in small_gres.with_name("slurm.conf.node").read_text().splitlines()
                   if line.startswith("NodeName=") for w in line.split() if w.startswith("Gres="))
        line = f"NodeName={fixtures.SLURM_NODE} NodeAddr=127.0.0.1 CPUs=1 {gres}"
        assert line in node.ssh("cat /etc/slurm/slurm.conf").stdout.splitlines()
        listed = node.ssh(f"slurmd -G -N {fixtures.SLURM_NODE} 2>&1", check=False)
        seen: dict[str, int] = {}
        for kind, count in re.findall(r"Gres Name=gpu Type=(\S+) Count=(\d+)", listed.stdout):
            seen[kind] = seen.get(kind, 0) + int(count)
        assert listed.returncode == 0 and seen == gres_counts(f"NodeName=x {gres}") == {"1g.10gb": 56}, listed.stdout
        small = replace(base, boot=3, expected=node_for_profile(profile.named("small")).gpus)
        report = node.report()
        choice = scenarios_layouts.LayoutChoice("file", "small")
        argv = node.ssh(f"cat {kubelet_fixtures.ARGV_LOG}", check=False).stdout or None
        claims = (_claims(node, small, report, vm.serial_log)
                  + scenarios_layouts.layout_claim(parse_report(report), choice)
                  + scenarios_layouts.label_claim(argv, choice))
        assert {"layout-applied", "exported-layout", "layout-chosen", "layout-label"} <= {c.id for c in claims}
        failed = [c for c in claims if not c.passed]
        assert failed == [], "\n".join(f"{c.id}: {c.evidence}" for c in failed)

        # 4. the GPU refuses the apply (in use) and activate runs again: the restore fails after the reboot,
        # kubelet stays down, the play fails naming the node, and the node stays drained (the second cordon
        # and drain are never followed by an uncordon)
        node.ssh(f"touch {simguest.KNOB_DIR}/{simguest.SCENARIO_KNOBS['fail-apply']}")
        node.fresh_evidence(*evidence)
        bad = node.playbook("activate.yml")
        said = bad.stdout + bad.stderr
        assert bad.returncode == 2, said
        assert node.calls()[7:] == ["cordon node1", DRAIN_NODE1], said
        assert "node1 stays drained (not uncordoned, not resumed)" in said, said
        assert "nvidia-mig-restore.service is failed" in said, said
        failing = replace(small, scenario="fail-apply", boot=4)
        failed = [c for c in _claims(node, failing, node.report(), vm.serial_log) if not c.passed]
        assert failed == [], "\n".join(f"{c.id}: {c.evidence}" for c in failed)

        node.ssh("systemctl poweroff", check=False)
        assert vm.wait(BOOT_TIMEOUT_S).exit_code == 0, "the guest did not power off"
    print("fleet rollout over SSH: " + ", ".join(node.timings))
