"""Consumers: every generated text speaks of the consumers the profile really has.

A Slurm node (kubelet.present: false, consumers: slurmd) gets a slurmd drop-in, a restore unit ordered
before slurmd, a first boot that holds slurmd until the restore succeeded, and not one word about
kubelet anywhere; broken consumer drop-ins are caught by systemd itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from realtools import SystemdTree
from support import CASES_ROOT, generate

from migbake.profile.nodefacts import GPU_CLIENTS

SLURM = (CASES_ROOT / "valid/consumers-slurm-without-kubelet/node-profile.yaml").read_text()


def test_a_node_without_kubelet_never_mentions_it(tmp_path: Path) -> None:
    out = generate(SLURM, tmp_path / "out")
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        assert "kubelet" not in path.read_text().lower(), path
    dropin = (out / "rootfs/etc/systemd/system/slurmd.service.d/20-mig-restore.conf").read_text()
    assert "\nRequires=nvidia-mig-restore.service\nAfter=nvidia-mig-restore.service\n" in dropin
    lax = (out / "rootfs/etc/systemd/system/jupyter.service.d/20-mig-restore.conf").read_text()
    assert "\nWants=nvidia-mig-restore.service\nAfter=nvidia-mig-restore.service\n" in lax
    unit = (out / "rootfs/etc/systemd/system/nvidia-mig-restore.service").read_text()
    assert "\nBefore=slurmd.service jupyter.service\n" in unit


def test_first_boot_holds_every_consumer_and_gpu_client(tmp_path: Path) -> None:
    data = yaml.safe_load((generate(SLURM, tmp_path / "out") / "cloud-init/user-data").read_text())
    hold = data["bootcmd"][0][-1]
    for unit in ("slurmd.service", "jupyter.service", *GPU_CLIENTS, "nvidia-mig-manager.service"):
        assert f" {unit} " in f" {hold.split(';')[0]} ", unit
    start = data["runcmd"][-1][-1]
    closed_part = start.split('if [ "$ok" = yes ]; then ')[1]
    assert "slurmd.service" in closed_part and "jupyter.service" not in closed_part  # gated on success
    assert "jupyter.service" in start.split('if [ "$ok" = yes ]')[0]  # not fail-closed: started anyway
    assert "slurmd.service is not started (fail closed)" in start


@pytest.mark.realtool
def test_systemd_rejects_a_broken_consumer_drop_in(tmp_path: Path) -> None:
    out = generate(SLURM, tmp_path / "out")
    tree = SystemdTree(stubs=("bash",), extra_units=("slurmd.service", "jupyter.service"))
    try:
        tree.install_rootfs(out / "rootfs")
        rel = "etc/systemd/system/slurmd.service.d/20-mig-restore.conf"
        (tree.root / rel).write_text("[Unit]\nRequires=nvidia-mig-restore.service\nBefore=nvidia-mig-restore.service\n")
        tree.systemctl("enable", "nvidia-mig-restore.service")
        verify = tree.verify("slurmd.service", "nvidia-mig-restore.service")
        assert "ordering cycle" in verify.text, verify.text
    finally:
        tree.cleanup()
