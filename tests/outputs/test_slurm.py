"""Slurm: slurm/gres.conf and slurm/slurm.conf.node for every example image, the counts checked against
the mig-parted config migbake writes (read back as YAML, counted here), the type names against a real
H200's NVML memory sizes; ``test_slurm_slurmd.py`` judges both files with Debian's real slurmd (``slurmd -G``)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from support import H200_FIXTURES, IMAGES, cli, generate

SLURM_SECTION = "slurm:\n  node_name: gpu-[01-04]\n"


def _profile_text(image: Path, extra: str = "") -> str:
    text = (image / "node-profile.yaml").read_text()
    if "\nslurm:" not in text:
        text += SLURM_SECTION  # the Kubernetes images: the same layout seen by slurmd
    return text + extra


def _gres_lines(out: Path, folder: str = "slurm/") -> list[tuple[str, dict[str, int]]]:
    """Each NodeName line of slurm.conf.node (in ``folder``: ``slurm/NAME/`` for a named layout): (name,
    {type or '': count})."""
    found = []
    for line in (out / folder / "slurm.conf.node").read_text().splitlines():
        m = re.fullmatch(r"NodeName=(\S+) Gres=(\S+)", line)
        if m:
            counts: dict[str, int] = {}
            for item in m[2].split(","):
                parts = item.split(":")
                assert parts[0] == "gpu", line
                counts[parts[1] if len(parts) == 3 else ""] = int(parts[-1])
            found.append((m[1], counts))
    return found


def _expected_from_mig_parted(out: Path, gpu_count: int, name: str = "current") -> list[Counter[str]]:
    """Per kind of node (one per device-filter), MIG devices per GPU-instance slice count, from config.yaml's
    config ``name`` (a layout name with named layouts)."""
    config = yaml.safe_load((out / "rootfs/etc/nvidia-mig/config.yaml").read_text())
    kinds: dict[str, Counter[str]] = {}
    for entry in config["mig-configs"][name]:
        n = gpu_count if entry["devices"] == "all" else len(entry["devices"])
        key = str(entry.get("device-filter", ""))
        kind = kinds.setdefault(key, Counter())
        for name, count in entry.get("mig-devices", {}).items():
            g = re.match(r"(?:\d+c\.)?(\d+)g\.", name)
            assert g, name
            kind[f"{g[1]}g"] += count * n
    return list(kinds.values())


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_gres_counts_match_the_mig_parted_layout(image: Path, tmp_path: Path) -> None:
    text = _profile_text(image)
    out = generate(text, tmp_path / "out")
    data = yaml.safe_load(text)
    names = list(dict.fromkeys(n for g in data["gpus"] for n in g.get("mig", {}).get("layouts", {})))
    # named layouts: each name's files in slurm/NAME/, against that name's config
    for folder, config in [(f"slurm/{n}/", n) for n in names] or [("slurm/", "current")]:
        lines = _gres_lines(out, folder)
        expected = _expected_from_mig_parted(out, data["gpu_count"], config)
        assert len(lines) == len(expected) >= 1
        for (_, counts), want in zip(lines, expected):
            assert sum(counts.values()) == sum(want.values())
            if "" not in counts:  # typed: each type's slice count agrees with the layout's
                by_slices: Counter[str] = Counter()
                for t, c in counts.items():
                    by_slices[t.split(".")[0]] += c
                assert by_slices == want
        assert (out / folder / "gres.conf").read_text().splitlines()[-1] == "AutoDetect=nvml"


def _h200_nvml_types() -> dict[str, str]:
    """profile name -> the <slices>g.<GiB>gb that slurmd computes from the real H200's memorySizeMB."""
    types = {}
    for line in (H200_FIXTURES / "nvml-gpu-instance-profiles.txt").read_text().splitlines():
        if line.startswith("gip "):
            info = line.split(" ", 2)[2]
            if info.startswith("{"):
                d = ast.literal_eval(info)
                gib = int(d["memorySizeMB"] / 1024 + 0.5)  # C roundl: half away from zero
                types[d["name"].removeprefix("MIG ")] = f"{d['sliceCount']}g.{gib}gb"
    return types


def test_h200_type_names_are_what_slurmd_computes_from_nvml() -> None:
    real = _h200_nvml_types()
    assert real["1g.18gb"] == "1g.16gb" and real["2g.35gb"] == "2g.33gb"  # the driver's memory, not the name
    from migbake.gpu.catalog import load_catalog
    from migbake.slurm.gres import mig_type

    h200 = load_catalog().by_key("h200-141gb")
    assert {name: mig_type(h200, name) for name in real} == real


def test_show_prints_the_slurm_view_and_no_kubernetes_for_a_slurm_node() -> None:
    rc, out, _ = cli("show", str(IMAGES[[p.name for p in IMAGES].index("h100-slurm")] / "node-profile.yaml"))
    assert rc == 0
    assert "  the node (4 GPUs): Gres=gpu:3g.40gb:8\n" in out
    assert "Kubernetes" not in out


def test_unknown_memory_gives_untyped_counts_and_says_why(tmp_path: Path) -> None:
    image = next(p for p in IMAGES if p.name == "a100-80gb-mixed")
    out = generate(_profile_text(image), tmp_path / "out")
    text = (out / "slurm/slurm.conf.node").read_text()
    assert "NodeName=gpu-[01-04] Gres=gpu:44\n" in text
    assert "# untyped: migbake does not know the memory NVML reports for a100-80gb 1g.10gb" in text
