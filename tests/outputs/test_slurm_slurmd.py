"""Every Slurm output judged by Debian's real slurmd, per kind of node.

For each example image, for a node of every catalog model with one GPU per profile, and for profiles that
cover two GPU models, compute-instance
layouts, a GPU with MIG off, ``gres_types: untyped`` and a hostlist with two bracket groups, each with
``slurm.autodetect`` on and off: per kind of node, a minimal slurm.conf with ``GresTypes=gpu`` and that
kind's generated ``NodeName=... Gres=...`` line, the kind's generated gres.conf beside it, and
``slurmd -G -f slurm.conf -N <its first node>`` (the device files it names made in a private /dev).
slurmd must exit 0 and say nothing but the devices, and with explicit lines the devices it lists must add up to
``Gres=`` type by type. Debian's slurmd has no ``gpu/nvml`` plugin (the simulated NVML of
``migbake_boottest/simgpu`` cannot stand in for a plugin that is not built): with ``AutoDetect=nvml`` it says
so and parses the rest, and the ``Gres=`` lines must be those its explicit twin was judged on.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from realtools import require
from support import IMAGES, cli, generate

from migbake.gpu.catalog import GpuModel, load_catalog
from migbake.rules.slurm import hosts

_TWO_MODELS = {"gpu_count": 2, "device_filter": "auto", "gpus": [
    {"model": "h100-80gb", "mig": {"layout": {"3g.40gb": 2}}},
    {"model": "a100-80gb", "mig": {"layout": {"3g.40gb": 2}}}]}
_COMPUTE = {"gpu_count": 2, "gpus": [{"model": "h100-80gb", "mig": {"layout": {"1c.3g.40gb": 2, "4g.40gb": 1}}}]}
_COMPUTE_7G = {"gpu_count": 1, "gpus": [{"model": "h200-141gb", "mig": {"layout": {"1c.7g.141gb": 3,
                                                                                   "2c.7g.141gb": 2}}}]}
_MIG_OFF = {"gpu_count": 2, "gpus": [{"model": "h100-80gb", "devices": [0], "mig": {"enabled": False}},
                                     {"model": "h100-80gb", "devices": [1], "mig": {"layout": {"1g.10gb": 7}}}]}
_UNTYPED = {"gpu_count": 2, "gpus": [{"model": "h200-141gb", "mig": {"layout": {"2g.35gb": 3}}}],
            "slurm": {"gres_types": "untyped", "node_name": "rack[1-2]-gpu[01-02]"}}
# a layout whose placements the driver chooses: apply puts 3g.40gb at 4 and 1g.10gb at 0 (gpu.driverplacement)
_PLACED = {"gpu_count": 2, "gpus": [{"model": "h100-80gb", "mig": {"layout": {"3g.40gb": 1, "1g.10gb": 1}}}]}
PROFILES = {"placed": _PLACED, "two-models": _TWO_MODELS, "compute-instances": _COMPUTE,
            "compute-instances-7g": _COMPUTE_7G, "mig-off": _MIG_OFF, "untyped": _UNTYPED}
MODELS = load_catalog().models


def every_profile(model: GpuModel) -> dict[str, object]:
    """A node of ``model`` with one GPU per GPU-instance profile (plain, +me, -me, +gfx), each cut into as many
    instances of it as fit."""
    return {"gpu_count": len(model.profiles), "gpus": [
        {"model": model.key, "devices": [i], "mig": {"layout": {p.name: p.max_count}}}
        for i, p in enumerate(model.profiles)]}


CASES = [*((p.name, None) for p in IMAGES), *((name, data) for name, data in PROFILES.items()),
         *((f"every-profile-{m.key}", every_profile(m)) for m in MODELS)]


def profile_text(name: str, extra: dict[str, object] | None, autodetect: bool) -> str:
    """An example image's profile, or a small Slurm node of ``extra``, with slurm.autodetect set."""
    if extra is None:
        data = yaml.safe_load((IMAGES[[p.name for p in IMAGES].index(name)] / "node-profile.yaml").read_text())
    else:
        data = {"version": 1, "name": name, "kubelet": {"present": False}, **extra}
    slurm = dict(data.get("slurm") or {"node_name": "gpu-[01-04]"})
    slurm["autodetect"] = autodetect
    return yaml.safe_dump({**data, "slurm": slurm}, sort_keys=False)


def node_kinds(out: Path, folder: str = "slurm/") -> list[tuple[str, str]]:
    """Each kind of node in slurm.conf.node: its NodeName line and the gres.conf (path under OUT) it goes with
    (``folder``: ``slurm/NAME/`` for a named layout's files)."""
    kinds, own = [], f"{folder}gres.conf"
    for line in (out / folder / "slurm.conf.node").read_text().splitlines():
        if m := re.search(r"; its gres\.conf: (\S+)$", line):
            own = m[1]
        elif line.startswith("NodeName="):
            kinds.append((line, own))
            own = f"{folder}gres.conf"
    return kinds


def gres_counts(node_line: str) -> dict[str, int]:
    """``NodeName=x Gres=gpu:3g.40gb:4`` -> {'3g.40gb': 4}; untyped counts under ''."""
    m = re.fullmatch(r"NodeName=\S+ Gres=(\S+)", node_line)
    assert m, node_line
    counts: Counter[str] = Counter()
    for item in m[1].split(","):
        parts = item.split(":")
        assert parts[0] == "gpu", node_line
        counts[parts[1] if len(parts) == 3 else ""] += int(parts[-1])
    return dict(counts)


def slurmd_gres(node_line: str, gres: str, tmp_path: Path, node: str = "") -> tuple[int, str]:
    """``slurmd -G`` for ``node`` (default: the first node of ``node_line``) on a minimal slurm.conf with gres.conf
    ``gres`` beside it; the device files it names exist as character devices in a private /dev (a mount
    namespace)."""
    conf, node = tmp_path / "etc", node or hosts(node_line.split()[0].split("=", 1)[1])[0]
    conf.mkdir(parents=True)
    (tmp_path / "spool").mkdir()
    (conf / "slurm.conf").write_text(
        "ClusterName=judge\nSlurmctldHost=localhost\n"
        f"SlurmdSpoolDir={tmp_path}/spool\nSlurmdPidFile={tmp_path}/slurmd.pid\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nGresTypes=gpu\n"
        f"{node_line}\nPartitionName=p Nodes=ALL Default=YES\n")
    (conf / "gres.conf").write_text(gres)
    files = sorted({f for line in gres.splitlines() for f in re.findall(r"/dev/(\S+?)(?:,|$)", line)})
    script = ["set -e", 'nd="$(mktemp -d)"', 'mount -t tmpfs tmpfs "$nd"',
              'for f in null zero urandom random; do touch "$nd/$f"; mount --bind "/dev/$f" "$nd/$f"; done',
              'mkdir -p "$nd/nvidia-caps"']
    script += [f'mknod "$nd/{f}" c 1 3' for f in files]  # any character device: slurmd checks the type only
    script += ['mount --bind "$nd" /dev', f"exec slurmd -G -f {conf}/slurm.conf -N {shlex.quote(node)}"]
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", "\n".join(script)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def _needs_root_and_slurmd() -> None:
    require("slurmd")
    require("unshare")
    if os.geteuid() != 0:
        pytest.skip("slurmd -G in a private /dev needs root (CI runs as root)")


_NO_NVML = "We were configured with nvml functionality, but that lib wasn't found on the system."


def _judge_kinds(out: Path, tmp_path: Path, folder: str = "slurm/") -> list[tuple[str, str]]:
    kinds = node_kinds(out, folder)
    assert kinds, (out / folder / "slurm.conf.node").read_text()
    for n, (line, gres_path) in enumerate(kinds):
        gres = (out / gres_path).read_text()
        rc, text = slurmd_gres(line, gres, tmp_path / f"kind{n}")
        # nothing but the devices (and, without the NVML plugin, that it is missing): no error, no fatal, no
        # "WARNING: A line in gres.conf for GRES gpu:1g.18gb has 1 more configured than expected" (other kinds' lines)
        said = [t for t in text.splitlines() if "Gres Name=gpu " not in t and _NO_NVML not in t]
        assert rc == 0 and not said, (line, gres_path, text)
        seen: Counter[str] = Counter()
        for t, c in re.findall(r"Gres Name=gpu Type=(\S+) Count=(\d+)", text):
            seen["" if t == "(null)" else t] += int(c)
        if "AutoDetect=nvml" in gres.splitlines():
            assert _NO_NVML in text and not seen, text  # Debian's slurmd has no gpu/nvml plugin
        else:
            assert dict(seen) == gres_counts(line), (line, gres, text)
    return kinds


@pytest.mark.parametrize(("name", "extra"), CASES, ids=[c[0] for c in CASES])
def test_slurmd_reads_every_kind_of_node_as_gres_counts_it(name: str, extra: dict[str, object] | None,
                                                           tmp_path: Path) -> None:
    _needs_root_and_slurmd()
    off = generate(profile_text(name, extra, False), tmp_path / "off")
    on = generate(profile_text(name, extra, True), tmp_path / "on")
    # named layouts: each name's files in slurm/NAME/
    folders = [f"slurm/{p.name}/" for p in sorted((on / "slurm").iterdir()) if p.is_dir()] or ["slurm/"]
    for n, folder in enumerate(folders):
        explicit = _judge_kinds(off, tmp_path / f"j-off{n}", folder)
        nvml = _judge_kinds(on, tmp_path / f"j-on{n}", folder)
        assert [line for line, _ in nvml] == [line for line, _ in explicit]  # the counts slurmd listed above
        assert {path for _, path in nvml} == {f"{folder}gres.conf"}  # AutoDetect=nvml: one file for every node


def test_two_models_get_a_gres_conf_each_with_only_their_devices(tmp_path: Path) -> None:
    out = generate(profile_text("two-models", _TWO_MODELS, False), tmp_path / "out")
    kinds = node_kinds(out)
    assert [path for _, path in kinds] == ["slurm/h100-80gb/gres.conf", "slurm/a100-80gb/gres.conf"]
    assert not (out / "slurm/gres.conf").exists()  # no file that would give a node the other kind's lines
    for line, path in kinds:
        devices = [d for d in (out / path).read_text().splitlines() if d.startswith("Name=")]
        assert len(devices) == sum(gres_counts(line).values())
        typed = {"Type=" in d for d in devices}
        assert typed == {"" not in gres_counts(line)}  # all typed or all untyped, as Gres= is


# named layouts: per name and model (h100-80gb, h200-141gb); train's H100 layout is placed by the driver
_NAMED_LAYOUTS = {"infer": ({"1g.10gb": 7}, {"1g.18gb": 7}), "train": ({"3g.40gb": 1, "1g.10gb": 1}, {"3g.71gb": 2})}


def _named(models: int, layout: str = "") -> dict[str, object]:
    """A node of one or two models with the layouts above by name, or (``layout``) that one alone as mig.layout."""
    gpus = [{"model": model, "mig": {"layout": _NAMED_LAYOUTS[layout][i]} if layout else
             {"layouts": {name: lay[i] for name, lay in _NAMED_LAYOUTS.items()}}}
            for i, model in enumerate(("h100-80gb", "h200-141gb")[:models])]
    extra: dict[str, object] = {"gpu_count": 2, "gpus": gpus, **({"device_filter": "auto"} if models > 1 else {})}
    if not layout:
        extra["restore"] = {"layout": {"from": ["file"], "default": "infer"}}
    return extra


def _files(folder: Path) -> dict[str, list[str]]:
    """Every file under ``folder`` (path relative to it) with its lines that are not comments."""
    return {str(f.relative_to(folder)): [t for t in f.read_text().splitlines() if not t.startswith("#")]
            for f in sorted(folder.rglob("*")) if f.is_file()}


@pytest.mark.parametrize("autodetect", [False, True], ids=["explicit", "nvml"])
@pytest.mark.parametrize("models", [1, 2], ids=["one-model", "two-models"])
def test_named_layouts_get_each_names_slurm_files_in_its_folder(models: int, autodetect: bool,
                                                               tmp_path: Path) -> None:
    """slurm/NAME/ holds what the same profile with NAME's layout alone writes in slurm/ (its counts, its device
    lines from that name's placements), each file saying which pool it is for; nothing is in slurm/ itself."""
    out = generate(profile_text("named", _named(models), autodetect), tmp_path / "named")
    assert sorted(p.name for p in (out / "slurm").iterdir()) == sorted(_NAMED_LAYOUTS)
    seen = []
    for name in _NAMED_LAYOUTS:
        alone = generate(profile_text("named", _named(models, name), autodetect), tmp_path / name)
        assert _files(out / "slurm" / name) == _files(alone / "slurm"), name
        for f in (out / "slurm" / name).rglob("*"):
            if f.is_file():
                assert f"# Layout {name}: for the nodes whose restore applies it" in f.read_text()
        seen.append(_files(alone / "slurm"))
    assert seen[0] != seen[1]  # the names' files differ: not the first name's written twice



@pytest.mark.parametrize("models", [1, 2], ids=["one-model", "two-models"])
def test_slurmd_reads_the_files_of_every_layout_name(models: int, tmp_path: Path) -> None:
    _needs_root_and_slurmd()
    for autodetect in (False, True):
        out = generate(profile_text("named", _named(models), autodetect), tmp_path / f"out-{autodetect}")
        lines = []
        for name in _NAMED_LAYOUTS:
            kinds = _judge_kinds(out, tmp_path / f"judge-{autodetect}-{name}", f"slurm/{name}/")
            assert len(kinds) == models and all(path.startswith(f"slurm/{name}/") for _, path in kinds), kinds
            lines.append([line for line, _ in kinds])
        assert lines[0] != lines[1]


def test_show_names_each_layouts_slurm_folder(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(profile_text("named", _named(2), False))
    code, text, err = cli("show", str(profile))
    assert code == 0, err
    for name in _NAMED_LAYOUTS:
        part = text.split(f"=== layout {name} ")[1].split("=== layout")[0]
        assert f"Slurm GRES (slurm/{name}/<model>/gres.conf per kind of node: explicit MIG device lines; " \
               f"slurm/{name}/slurm.conf.node):" in part, part
    assert "Gres=gpu:1g.10gb:14" in text.split("=== layout train")[0]
    assert "Gres=gpu:3g.40gb:2,gpu:1g.10gb:2" in text.split("=== layout train")[1]


def test_device_lines_name_the_gpu_instances_where_the_plan_places_them(tmp_path: Path) -> None:
    """One source of truth for where instances land: the GPU-instance ids (capability files) of the device
    lines come from the placements restore.sh checks and the DRA names carry (gpu.driverplacement), not from
    an exact-fit search: 3g.40gb at memory slice 4 is GPU instance 2, 1g.10gb at 0 is 7 (NVIDIA/DCGM#138 saw
    GI 2 at 4:4 and GI 9, 10 at 2:1, 3:1 on an H100 whose instances mig-parted created without placement)."""
    from migbake.render.plan import make_plan
    from migbake.rules.validate import check_bytes
    from migbake.slurm.gres import gi_id

    text = profile_text("placed", _PLACED, False)
    profile = check_bytes(text.encode(), "p.yaml").profile
    assert profile is not None
    placed = make_plan(profile).expect.placements[0]
    assert sorted((i.profile, i.start) for i in placed.instances) == [("1g.10gb", 0), ("3g.40gb", 4)]
    out = generate(text, tmp_path / "out")
    devices = [d for d in (out / "slurm/gres.conf").read_text().splitlines() if d.startswith("Name=")]
    first, per_gi, gis = 3, 9, 15  # /dev/nvidia-caps: nvidia-cap<3 + (gpu * 15 + gi) * 9> is GPU instance gi
    for gpu in (0, 1):
        caps = {f"Type={i.profile} MultipleFiles=/dev/nvidia{gpu},/dev/nvidia-caps/nvidia-cap"
                f"{first + (gpu * gis + gi_id(i.start, i.size, 8)) * per_gi}," for i in placed.instances}
        mine = [d for d in devices if f"/dev/nvidia{gpu}," in d]
        assert len(mine) == 2 and all(any(c in d for c in caps) for d in mine), (caps, mine)
    assert "nvidia-cap21," in devices[0] + devices[1] and "nvidia-cap66," in devices[0] + devices[1]  # GI 2, 7


def test_compute_instances_get_a_device_line_each(tmp_path: Path) -> None:
    out = generate(profile_text("compute-instances", _COMPUTE, False), tmp_path / "out")
    (line, path), = node_kinds(out)
    devices = [d for d in (out / path).read_text().splitlines() if d.startswith("Name=")]
    assert gres_counts(line) == {"3g.40gb": 4, "4g.40gb": 2}
    assert len(devices) == len(set(devices)) == 6  # one per compute instance, each its own capability file


def test_no_gpu_count_says_why_gres_conf_lists_no_devices(tmp_path: Path) -> None:
    text = profile_text("no-count", {"gpus": [{"model": "h100-80gb", "mig": {"layout": {"3g.40gb": 2}}}]}, False)
    out = generate(text, tmp_path / "out")
    gres = (out / "slurm/gres.conf").read_text()
    assert "gpu_count is not set" in gres and "slurm-gpu-count" in gres
    assert not [d for d in gres.splitlines() if d.startswith("Name=")]


HOSTLISTS = [  # (slurm.node_name, a node it means); migbake's verdict must be slurmd's
    ("gpu-[01-04]", "gpu-04"), ("rack[1-2]-gpu[01-02]", "rack2-gpu01"), ("gpu-[1,3-4],cpu-01", "cpu-01"),
    ("gpu-[9-10]", "gpu-10"), ("gpu-01,,gpu-02", "gpu-02"), ("n.example_1", "n.example_1"),
    ("gpu-[01-04", "gpu-01"), ("gpu-[x-y]", "gpu-x"), ("gpu-[09-01]", "gpu-09"), ("gpu[1-2]x", "gpu1x"),
    ("gpu-[01-02]]", "gpu-01"), ("gpu-[]", "gpu-"), ("gpu-[01-04],gpu-03", "gpu-03"), ("a[[1]]", "a1"),
    ("gpu-[1-70000]", "gpu-1"),
]


@pytest.mark.parametrize(("expression", "node"), HOSTLISTS, ids=[h[0] for h in HOSTLISTS])
def test_slurm_node_name_is_refused_exactly_where_slurmd_fails_or_reads_other_nodes(
        expression: str, node: str, tmp_path: Path) -> None:
    from migbake.rules.slurm import hostlist_problem

    _needs_root_and_slurmd()
    rc, text = slurmd_gres(f"NodeName={expression}", "AutoDetect=off\n", tmp_path, node)
    ours = hostlist_problem(expression)
    assert (rc == 0 and "error" not in text) == (ours is None), (ours, text)
    if ours is None:
        assert node in hosts(expression)


def slurmd_mig_type(board: str, profile: str) -> str:
    """The type slurmd 23.02.6 and later reports for a MIG device of ``profile`` on a GPU NVML names ``board``
    (SchedMD/slurm@slurm-25-11-0-1:src/plugins/gpu/nvml/gpu_nvml.c, ``_get_system_gpu_list_nvml``,
    ``_handle_mig``): both NVML names lowercased with spaces made _ (gpu_common_underscorify_tolower), the
    board's cut at its first '-', then the MIG device's name from its "mig_" on, less "mig". NVML names a MIG
    device "<board> MIG <profile>" (a GPU-instance profile's name is "MIG 1g.18gb" on the real H200,
    tests/fixtures/h200/nvml-gpu-instance-profiles.txt)."""
    def underscorify(text: str) -> str:
        return text.lower().replace(" ", "_")

    name = underscorify(f"{board} MIG {profile}")
    return underscorify(board).split("-")[0] + name[name.index("mig_") + 3:]


def slurmd_types(detected: list[str], configured: dict[str, int]) -> list[str | None]:
    """slurmd's ``_normalize_sys_gres_types`` (src/plugins/gres/gpu/gres_gpu.c@slurm-25-11-0-1): each detected
    device, longest type first, takes the first unused configured unit (longest type first) whose type is a
    substring of its own, case aside, and is then counted as that type; None: no configured type fits."""
    units = sorted((t for t, n in configured.items() for _ in range(n)), key=lambda t: (-len(t), t))
    used = [False] * len(units)
    out: list[str | None] = []
    for sys_type in sorted(detected, key=lambda t: (-len(t), t)):
        i = next((i for i, t in enumerate(units) if not used[i] and t.lower() in sys_type.lower()), None)
        if i is not None:
            used[i] = True
        out.append(None if i is None else units[i])
    return out


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_every_model_is_typed_with_names_slurmd_matches_on_each_board(model: GpuModel, tmp_path: Path) -> None:
    """Typed Gres= for every model with MIG; on every board of the model (its NVML names), the MIG devices
    slurmd detects under AutoDetect=nvml are counted as exactly the configured types, profile by profile:
    a compute instance and a +me instance count as their GPU instance's size."""
    out = generate(profile_text(model.key, every_profile(model), True), tmp_path / "out")
    (line, _), = node_kinds(out)
    configured = gres_counts(line)
    assert "" not in configured, line
    boards = model.nvidia_smi_names or (model.display_name,)
    for board in boards:
        detected = [slurmd_mig_type(board, p.name) for p in model.profiles for _ in range(p.max_count)]
        got = Counter(slurmd_types(detected, configured))
        assert got == Counter(configured), (board, detected, configured)
    for p in model.profiles:  # one profile alone: its devices take its own type, and no other
        own = p.name.split("+")[0].split("-")[0]
        assert slurmd_types([slurmd_mig_type(boards[0], p.name)] * p.max_count, configured) == [own] * p.max_count


def test_a100_80gb_gres_is_typed_per_slice_size(tmp_path: Path) -> None:
    out = generate(profile_text("a100", {"gpu_count": 2, "gpus": [
        {"model": "a100-80gb", "devices": [0], "mig": {"layout": {"3g.40gb": 2}}},
        {"model": "a100-80gb", "devices": [1], "mig": {"layout": {"1g.10gb": 7}}}]}, True), tmp_path / "out")
    (line, _), = node_kinds(out)
    assert line == "NodeName=gpu-[01-04] Gres=gpu:3g.40gb:2,gpu:1g.10gb:7"
    assert slurmd_mig_type("NVIDIA A100-SXM4-80GB", "3g.40gb") == "nvidia_a100_3g.40gb"  # Slurm's gres.html form


def _named_hosts(node_name: object) -> dict[str, object]:
    extra = _named(1)
    extra["slurm"] = {"node_name": node_name}
    return extra


def test_node_name_per_layout_goes_to_each_layouts_files(tmp_path: Path) -> None:
    hosts_of = {"infer": "gpu-[01-12]", "train": "gpu-[13-16]"}
    for given, want in ((hosts_of, hosts_of), ("gpu-[01-16]", dict.fromkeys(hosts_of, "gpu-[01-16]"))):
        text = yaml.safe_dump({"version": 1, "name": "named", "kubelet": {"present": False},
                               **_named_hosts(given)}, sort_keys=False)
        out = generate(text, tmp_path / str(len(str(given))))
        for name, nodes in want.items():
            (line, _), = node_kinds(out, f"slurm/{name}/")
            assert line.startswith(f"NodeName={nodes} Gres="), line


def test_slurmd_reads_the_node_name_of_each_layout(tmp_path: Path) -> None:
    _needs_root_and_slurmd()
    hosts_of = {"infer": "infer-[1-2]", "train": "train-[01-03]"}
    for autodetect in (False, True):
        text = profile_text("named", _named_hosts(hosts_of), autodetect)
        out = generate(text, tmp_path / f"out-{autodetect}")
        for name, nodes in hosts_of.items():
            kinds = _judge_kinds(out, tmp_path / f"judge-{autodetect}-{name}", f"slurm/{name}/")
            assert [line.split()[0] for line, _ in kinds] == [f"NodeName={nodes}"]
