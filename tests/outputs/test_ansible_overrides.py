"""The Ansible role's data are role defaults: a host's or a child group's inventory variables win over them.

Real ``ansible-inventory`` and ``ansible-playbook`` against ``migbake export --ansible`` of two profiles: a
Kubernetes-and-Slurm pool (kubelet and slurmd, two named layouts) and images/h200-inference. A child group of the
pool's group sets ``mig_restore_kubernetes: false`` (in the inventory file, in the inventory's ``group_vars/``,
or as a host variable) and Ansible resolves it to false: before, the data migbake wrote to the playbook's
``group_vars/`` outranked all three (docs/ansible.md, "Overrides").

The layout move of a Slurm node runs for real over the local connection up to its reboot, which Ansible's
reboot refuses there (ansible/ansible@v2.19.14:lib/ansible/plugins/action/reboot.py, "would reboot the control
node"): the node is drained with a fake scontrol, the new layout's gres.conf is installed, the node's own
slurm.conf line gets the new layout's Gres=, scontrol reconfigure runs, all before the reboot; and the node the
child group made Slurm-only is never cordoned through kubectl.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from realtools import ANSIBLE_JSON_RESULTS, ansible_debug_messages, require, run
from support import REPO, cli
from test_slurm_slurmd import gres_counts, slurmd_gres

pytestmark = pytest.mark.realtool

POOL = """version: 1
name: mixed-pool
gpu_count: 2
gpus:
  - model: h100-80gb
    devices: all
    mig:
      layouts:
        infer: {1g.10gb: 7}
        train: {3g.40gb: 2}
kubelet: {layout: kubeadm}
consumers:
  - unit: slurmd.service
slurm: {autodetect: false}
restore:
  layout: {from: [file], default: infer}
"""
GROUP = "mixed_pool"
# records each call, in order, in $CALLS ($0's name first); squeue prints no job
FAKE = "#!/bin/sh\nprintf '%s %s\\n' \"$(basename \"$0\")\" \"$*\" >>\"$CALLS\"\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("overrides")
    (work / "pool.yaml").write_text(POOL)
    code, said, err = cli("export", "--ansible", str(work / "pool.yaml"),
                          str(REPO / "images/h200-inference/node-profile.yaml"), "-o", str(work / "fleet"))
    assert code == 0, said + err
    return work / "fleet"


def _env(work: Path) -> dict[str, str]:
    return {"ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1", "ANSIBLE_HOME": str(work / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"), "CALLS": str(work / "calls.log")}


def _inventory(work: Path, where: str) -> Path:
    """node1 (local) in group slurm_only, a child of the pool's group; mig_restore_kubernetes false set ``where``:
    the inventory file's group vars, the inventory's group_vars/, a host variable, or nowhere."""
    folder = work / "inventory"
    (folder / "group_vars").mkdir(parents=True)
    host = f"node1 ansible_connection=local ansible_become=false ansible_python_interpreter={sys.executable}"
    text = f"[{GROUP}:children]\nslurm_only\n\n[slurm_only]\n{host}"
    text += " mig_restore_kubernetes=false\n" if where == "host" else "\n"
    text += "\n[h200_inference]\nnode2 ansible_connection=local\n"
    if where == "inventory-file":
        text += "\n[slurm_only:vars]\nmig_restore_kubernetes=false\n"
    if where == "inventory-group-vars":
        (folder / "group_vars/slurm_only.yml").write_text("---\nmig_restore_kubernetes: false\n")
    (folder / "hosts.ini").write_text(text)
    return folder / "hosts.ini"


WHERE = ["inventory-file", "inventory-group-vars", "host", "nowhere"]


@pytest.mark.parametrize("where", WHERE, ids=WHERE)
def test_a_child_groups_or_hosts_variable_wins_over_the_roles_data(fleet: Path, where: str, tmp_path: Path) -> None:
    """ansible-inventory sees the inventory's value; ansible-playbook resolves the role's variable to it."""
    inventory = _inventory(tmp_path, where)
    shown = run([require("ansible-inventory"), "-i", str(inventory), "--playbook-dir", str(fleet), "--host", "node1"],
                env=_env(tmp_path))
    assert shown.rc == 0, shown.text
    # an INI value is a string; the role reads it with | bool
    value = str(json.loads(shown.out).get("mig_restore_kubernetes")).lower()
    assert value == ("false" if where != "nowhere" else "none")
    play = tmp_path / "show.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n  vars:\n    mig_restore_profiles: [mixed_pool, h200_inference]\n"
        "  tasks:\n    - ansible.builtin.include_role: {name: mig_restore, tasks_from: group, public: true}\n"
        "    - ansible.builtin.debug:\n"
        "        msg: \"{{ [mig_restore_group, mig_restore_profile, mig_restore_kubernetes | bool,\n"
        "               mig_restore_slurm | bool] }}\"\n")
    result = run([require("ansible-playbook"), "-i", str(inventory), str(play)],
                 env={**_env(tmp_path), "ANSIBLE_ROLES_PATH": str(fleet / "roles"), **ANSIBLE_JSON_RESULTS})
    assert result.rc == 0, result.text
    shown_msgs = {host: next(m for m in msgs if isinstance(m, list))
                  for host, msgs in ansible_debug_messages(result.out).items()}
    kubernetes = where == "nowhere"  # the pool's profile has kubelet: its group data say true
    assert shown_msgs["node1"] == [GROUP, "mixed-pool", kubernetes, True], shown_msgs
    assert shown_msgs["node2"] == ["h200_inference", "h200-inference", True, False], shown_msgs


def _fakes(work: Path) -> dict[str, Path]:
    out = {}
    for name in ("kubectl", "scontrol", "squeue"):
        out[name] = work / name
        out[name].write_text(FAKE)
        out[name].chmod(0o755)
    return out


@pytest.mark.parametrize("where", ["inventory-group-vars", "nowhere"])
def test_a_slurm_nodes_move_installs_the_new_gres_before_the_reboot(fleet: Path, where: str, tmp_path: Path) -> None:
    """activate.yml -e mig_restore_layout=train over the local connection: drained, gres.conf and Gres= of train
    in place, scontrol reconfigure run, then the reboot refused; kubectl only where nothing made it Slurm-only."""
    inventory = _inventory(tmp_path, where)
    fakes = _fakes(tmp_path)
    node = tmp_path / "node"
    (node / "etc/slurm").mkdir(parents=True)
    slurm_conf = node / "etc/slurm/slurm.conf"
    slurm_conf.write_text("ClusterName=c\nGresTypes=gpu\nNodeName=node10 CPUs=8 Gres=gpu:1g.10gb:14\n"
                          "nodename=node1 CPUs=8 gres=gpu:1g.10gb:14 RealMemory=1000 # the pool\n")
    (node / "etc/slurm/gres.conf").write_text("AutoDetect=nvml\n# infer's\n")
    result = run([require("ansible-playbook"), "-i", str(inventory), str(fleet / "activate.yml"), "-l", "node1",
                  "-e", f"mig_restore_kubectl={fakes['kubectl']}", "-e", f"mig_restore_scontrol={fakes['scontrol']}",
                  "-e", f"mig_restore_squeue={fakes['squeue']}", "-e", "mig_restore_layout=train",
                  "-e", f"mig_restore_layout_file={node}/etc/migbake/layout",
                  "-e", f"mig_restore_slurm_gres_conf={node}/etc/slurm/gres.conf",
                  "-e", f"mig_restore_slurm_conf={slurm_conf}"], env=_env(tmp_path), timeout=300)
    said = result.text
    assert result.rc == 2 and "would reboot the control node" in said, said
    assert "node1 stays drained (not uncordoned, not resumed): Reboot" in " ".join(said.split()), said
    calls = (tmp_path / "calls.log").read_text().splitlines()
    reason = "reason=migbake: MIG layout change (mixed-pool)"
    slurm = [f"scontrol update nodename=node1 state=drain {reason}", "squeue --noheader --format=%i --nodelist=node1",
             "scontrol reconfigure"]
    kubectl = [] if where != "nowhere" else [
        "kubectl cordon node1", "kubectl drain node1 --ignore-daemonsets --delete-emptydir-data --timeout=900s"]
    assert calls == kubectl + slurm, calls
    assert (node / "etc/migbake/layout").read_text() == "train\n"
    train = fleet / f"roles/mig_restore/files/{GROUP}/slurm/train/gres.conf"
    assert (node / "etc/slurm/gres.conf").read_text() == train.read_text()
    assert "# Layout train:" in train.read_text() and "AutoDetect=off" in train.read_text()
    # the Gres= of train's own slurm.conf.node (generate's slurm/train/), on the node's own line only
    (gres,) = (w for line in train.with_name("slurm.conf.node").read_text().splitlines()
               if line.startswith("NodeName=") for w in line.split() if w.startswith("Gres="))
    assert gres == "Gres=gpu:3g.40gb:4"
    assert slurm_conf.read_text().splitlines() == [
        "ClusterName=c", "GresTypes=gpu", "NodeName=node10 CPUs=8 Gres=gpu:1g.10gb:14",
        f"nodename=node1 CPUs=8 RealMemory=1000 {gres}"]
    # Debian's real slurmd reads the node's new line and gres.conf as train's devices (the device files they
    # name made in a private /dev, as tests/outputs/test_slurm_slurmd.py does)
    require("slurmd")
    if os.geteuid() != 0:
        pytest.skip("slurmd -G in a private /dev needs root (CI runs as root)")
    line = slurm_conf.read_text().splitlines()[-1]
    rc, text = slurmd_gres(line, (node / "etc/slurm/gres.conf").read_text(), tmp_path / "slurmd")
    seen = Counter(t for t, c in re.findall(r"Gres Name=gpu Type=(\S+) Count=(\d+)", text) for _ in range(int(c)))
    assert rc == 0 and dict(seen) == gres_counts(f"NodeName=node1 {gres}") == {"3g.40gb": 4}, text
