"""NVIDIA's real nvidia-mig-parted (v0.15.0) against the simulated GPU, on the host (no VM).

For every catalog model with MIG: ``apply`` maximal layouts that together use every profile (one
per GPU, 8 GPUs at a time), then ``export`` must give back exactly what ``apply`` was given, ``assert`` must pass, and
``assert`` of a different layout must fail with exit 1. mig-parted also reads /proc/modules and
/sys/bus/pci/devices: each run gets stand-ins in a private mount namespace (``unshare --mount``), so
the host's own mounts are never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
import yaml
from support import REPO, shared_file

from migbake.gpu.catalog import GpuModel, load_catalog
from migbake.gpu.driverplacement import predict
from migbake.gpu.maximal import maximal_layouts
from migbake_boottest.simgpu import node as simnode
from migbake_boottest.simgpu.build import SimGpuBuild, compile_simgpu

MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
MODELS = load_catalog().models
# Runs "$@" with stand-ins: procfs stays reachable through symlinks under a tmpfs /proc that adds
# `modules` (this host's kernel may have none), and a folder of fake GPUs over the PCI devices.
NAMESPACE = r"""set -e
d=$1; shift
mkdir -p "$d/realproc"
mount --bind /proc "$d/realproc"
mount -t tmpfs -o mode=0555 simgpu-proc /proc
for e in "$d"/realproc/*; do ln -s "$e" "/proc/${e##*/}"; done
cp "$d/modules" /proc/modules
mount --bind "$d/pci" /sys/bus/pci/devices
exec "$@"
"""


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"required in CI (CI=true): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> SimGpuBuild:
    if shutil.which("gcc") is None:
        unavailable("gcc is not installed")
    return compile_simgpu(tmp_path_factory.mktemp("simgpu"))


class Host:
    """A simulated node on this host: its config, state, stand-ins, and mig-parted runs over it."""

    def __init__(self, root: Path, build: SimGpuBuild, node: simnode.SimulatedNode) -> None:
        self.root, self.node = root, node
        (root / "bin").mkdir()
        shutil.copy(build.nvidia_smi, root / "bin" / "nvidia-smi")
        (root / "simgpu.conf").write_text(simnode.render_config(
            node, state_dir=str(root / "run"), persist_dir=str(root / "var"), knobs=str(root / "knobs"),
            call_log=str(root / "calls.log")))
        (root / "knobs").mkdir()
        simnode.write_sysfs(node, root / "pci")
        (root / "modules").write_text(simnode.NVIDIA_MODULES)
        (root / "ns.sh").write_text(NAMESPACE)
        self.env = {**os.environ, "SIMGPU_CONFIG": str(root / "simgpu.conf"),
                    "LD_LIBRARY_PATH": str(build.library.parent),
                    "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '')}"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(self.root / "ns.sh"),
                               str(self.root), *args], env=self.env, capture_output=True, text=True,
                              check=False, timeout=600)

    def mig_parted(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(MIG_PARTED), *args)

    def config(self, name: str, layouts: list[dict[str, int]]) -> Path:
        path = self.root / f"{name}.yaml"
        entries = [{"devices": [i], "mig-enabled": True, "mig-devices": layout} for i, layout in enumerate(layouts)]
        path.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {"current": entries}}))
        return path


NodeFactory = Callable[[str, list[dict[str, int]], GpuModel], Host]


@pytest.fixture
def make_node(tmp_path: Path, build: SimGpuBuild) -> NodeFactory:
    """Makes a fresh simulated node of one model, one GPU per layout (apply not yet run)."""
    shared_file(MIG_PARTED)
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        unavailable("needs root and unshare (a private mount namespace for the stand-ins)")

    def make(name: str, layouts: list[dict[str, int]], model: GpuModel) -> Host:
        root = tmp_path / name
        root.mkdir()
        return Host(root, build, simnode.node_of_model(model, layouts))
    return make


def covering_layouts(model: GpuModel, size: int) -> list[dict[str, int]]:
    """Up to ``size`` maximal layouts of ``model`` that use every profile: the first to cover each, then more."""
    every = maximal_layouts(model)
    chosen: list[dict[str, int]] = []
    for name in model.profile_names:
        if not any(name in layout for layout in chosen):
            chosen.append(next(layout for layout in every if name in layout))
    chosen += [layout for layout in every if layout not in chosen][:max(0, size - len(chosen))]
    return chosen


def per_gpu(exported: str, count: int) -> list[tuple[bool, dict[str, int]]]:
    """The state of each GPU from a mig-parted export (``devices: all`` means every GPU)."""
    spec = yaml.safe_load(exported)
    found: dict[int, tuple[bool, dict[str, int]]] = {}
    for entry in spec["mig-configs"]["current"]:
        devices = range(count) if entry["devices"] == "all" else entry["devices"]
        for i in devices:
            found[i] = (entry["mig-enabled"], dict(entry.get("mig-devices") or {}))
    return [found[i] for i in sorted(found)]


@pytest.mark.parametrize("model", MODELS, ids=[m.key for m in MODELS])
def test_export_gives_back_what_apply_was_given(model: GpuModel, make_node: NodeFactory) -> None:
    """8 GPUs (more if needed), each with another maximal layout; together they use every profile of the model."""
    layouts = covering_layouts(model, 8)
    assert {name for layout in layouts for name in layout} == set(model.profile_names)
    for start in range(0, len(layouts), 8):
        chunk = layouts[start:start + 8]
        node = make_node(f"chunk{start}", chunk, model)
        config = node.config("layouts", chunk)
        applied = node.mig_parted("apply", "-f", str(config), "-c", "current")
        assert applied.returncode == 0, applied.stderr[-3000:]
        exported = node.mig_parted("export")
        assert exported.returncode == 0, exported.stderr[-2000:]
        assert per_gpu(exported.stdout, len(chunk)) == [(True, layout) for layout in chunk]
        asserted = node.mig_parted("assert", "-f", str(config), "-c", "current")
        assert asserted.returncode == 0, asserted.stderr[-2000:]
        other = node.config("other", chunk[1:] + chunk[:1] if len(chunk) > 1 else [{}])
        refused = node.mig_parted("assert", "-f", str(other), "-c", "current")
        assert refused.returncode == 1, refused.stderr[-2000:]
        assert "Assertion failure: selected configuration not currently applied" in refused.stderr


H200 = load_catalog().by_key("h200-141gb")
A100 = load_catalog().by_key("a100-80gb")
SEVEN = {"1g.18gb": 7}


def test_a_layout_the_gpu_cannot_place_fails_with_mig_parteds_own_error(make_node: NodeFactory) -> None:
    node = make_node("h200", [SEVEN], H200)
    applied = node.mig_parted("apply", "-f", str(node.config("wrong", [{"3g.71gb": 3}])), "-c", "current")
    assert applied.returncode == 1
    assert "Error creating GPU instance for '3g.71gb': ERROR_INSUFFICIENT_RESOURCES" in applied.stderr
    assert per_gpu(node.mig_parted("export").stdout, 1) == [(True, {})]  # mig-parted cleaned up


def test_ampere_mode_change_is_pending_until_mig_parted_resets_the_gpu(make_node: NodeFactory) -> None:
    node = make_node("a100", [{"1g.10gb": 7}, {"3g.40gb": 2}], A100)
    config = node.config("layouts", [{"1g.10gb": 7}, {"3g.40gb": 2}])
    applied = node.mig_parted("apply", "-f", str(config), "-c", "current")
    assert applied.returncode == 0, applied.stderr[-2000:]
    calls = (node.root / "calls.log").read_text()
    assert "nvidia-smi -r -i 0000:18:00.0,0000:28:00.0" in calls  # mig-parted's own reset of the GPUs
    assert node.mig_parted("assert", "-f", str(config), "-c", "current").returncode == 0
    # Ampere keeps MIG mode across a reboot (its file is not in the state folder), the instances are lost
    shutil.rmtree(node.root / "run")
    assert per_gpu(node.mig_parted("export").stdout, 2) == [(True, {}), (True, {})]


def test_knob_in_use_makes_apply_fail(make_node: NodeFactory) -> None:
    node = make_node("h200", [SEVEN], H200)
    (node.root / "knobs/in-use").write_text("0\n")
    applied = node.mig_parted("apply", "-f", str(node.config("seven", [SEVEN])), "-c", "current")
    assert applied.returncode == 1
    assert "error setting Mig mode: ERROR_IN_USE" in applied.stderr


def test_knob_driver_delay_fails_nvml_and_nvidia_smi(make_node: NodeFactory) -> None:
    node = make_node("h200", [SEVEN], H200)
    (node.root / "knobs/driver-delay").write_text("never\n")
    exported = node.mig_parted("export")
    assert exported.returncode == 1 and "Driver Not Loaded" in exported.stderr
    smi = node.run("nvidia-smi")
    assert smi.returncode == 9 and "couldn't communicate with the NVIDIA driver" in smi.stdout
    (node.root / "knobs/driver-delay").write_text("1\n")  # loaded one second after boot: long ago
    assert node.run("nvidia-smi").returncode == 0


def test_knob_volatile_instances_makes_the_next_assert_fail(make_node: NodeFactory) -> None:
    node = make_node("h200", [SEVEN], H200)
    (node.root / "knobs/volatile-instances").touch()
    config = node.config("seven", [SEVEN])
    assert node.mig_parted("apply", "-f", str(config), "-c", "current").returncode == 0
    asserted = node.mig_parted("assert", "-f", str(config), "-c", "current")
    assert asserted.returncode == 1
    assert "Assertion failure: selected configuration not currently applied" in asserted.stderr


def test_zero_gpu_trap(make_node: NodeFactory) -> None:
    """/proc/modules right but no GPU in sysfs: export is empty and assert SUCCEEDS. Claims count GPUs."""
    node = make_node("h200", [SEVEN], H200)
    shutil.rmtree(node.root / "pci")
    (node.root / "pci").mkdir()
    assert node.mig_parted("assert", "-f", str(node.config("seven", [SEVEN])), "-c", "current").returncode == 0
    assert per_gpu(node.mig_parted("export").stdout, 1) == []


H100 = load_catalog().by_key("h100-80gb")
PARTIAL = [(H100, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}), (H200, {"3g.71gb": 1, "1g.18gb": 2}),
           (A100, {"2g.20gb": 1, "1g.10gb": 2}), (H200, {"3g.71gb": 2}), (H200, {"4g.71gb": 1, "1g.18gb+me": 1})]


@pytest.mark.parametrize(("model", "layout"), PARTIAL, ids=lambda v: v.key if isinstance(v, GpuModel) else
                         "-".join(f"{n}x{c}" for n, c in v.items()))
def test_real_mig_parted_places_as_the_plan_predicts(model: GpuModel, layout: dict[str, int],
                                                     make_node: NodeFactory) -> None:
    """NVIDIA's mig-parted (creation order, no placement) on the simulated driver (migbake's model of its choice):
    `nvidia-smi mig -lgi` shows every instance where gpu.driverplacement.predict says; the first case is the
    public observation of NVIDIA/DCGM#138 (H100: 3g at 4:4, 2g at 0:2, the 1g's at 2:1 and 3:1)."""
    node = make_node("partial", [layout], model)
    applied = node.mig_parted("apply", "-f", str(node.config("partial", [layout])), "-c", "current")
    assert applied.returncode == 0, applied.stderr[-2000:]
    listed = node.run("nvidia-smi", "mig", "-lgi")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines() if line.startswith("|") and " MIG " in line]
    have = sorted((r[3], int(r[6].split(":")[0])) for r in rows)
    predicted = predict(model, layout)
    assert predicted is not None
    assert have == sorted((p.profile, p.start) for p in predicted)
