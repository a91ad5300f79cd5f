"""The generated node scripts take no path or host from their environment: a variable set on the unit (a drop-in,
``systemd.setenv=`` on the kernel command line) cannot hide the GPUs, move the files the layout sources read, or
point them at another metadata server. Tests reach the same code through a rendered copy (support.NodeWorld)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from support import REPO, WORLD, generate

# not read from outside: the kubelet drop-in's own variable, which migbake defines in the drop-in and kubelet's
# ExecStart expands (the image-build install scripts take their offline root as --root DIR, docs/baking.md)
ALLOWED = {"MIGBAKE_KUBELET_ARGS"}


def test_no_template_reads_a_migbake_variable() -> None:
    found = subprocess.run(["git", "grep", "-ho", r"\$[{]\?MIGBAKE_[A-Z_]*", "--", "templates"], cwd=REPO,
                           capture_output=True, text=True, check=False).stdout.split()
    names = {re.sub(r"^\$\{?", "", x) for x in found}
    assert names <= ALLOWED, sorted(names - ALLOWED)


def test_the_environment_does_not_hide_the_gpu(tmp_path: Path) -> None:
    """An environment that names an empty sysfs, as the scripts once honoured: the GPU is still found."""
    out = generate("version: 1\nname: env\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
                   "restore: {driver_wait_seconds: 1}\n", tmp_path / "out")
    empty = tmp_path / "empty-sys"
    empty.mkdir()
    ran = subprocess.run(["bash", str(out / "rootfs/etc/nvidia-mig/restore.sh")], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "MIGBAKE_SYSFS": str(empty), "MIGBAKE_ROOT": str(empty),
                              "MIGBAKE_PROC": str(empty)}, timeout=60, check=False)
    assert "1 NVIDIA GPU(s) on the PCI bus" in ran.stdout, ran
    assert "no NVIDIA GPU on this machine" not in ran.stdout
    assert str(WORLD.path("sys")) in (out / "rootfs/etc/nvidia-mig/restore.sh").read_text()


def test_production_renders_the_real_paths(tmp_path: Path) -> None:
    out = generate("version: 1\nname: env\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n",
                   tmp_path / "out", production=True)
    text = (out / "rootfs/etc/nvidia-mig/restore.sh").read_text()
    assert "\nsysfs='/sys'\n" in text and str(WORLD.folder) not in text
