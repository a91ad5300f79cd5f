"""Slurm: slurm/gres.conf and slurm/slurm.conf.node for every example image, the counts checked against
the mig-parted config migbake writes (read back as YAML, counted here), the type names against a real
H200's NVML profile names; ``test_slurm_slurmd.py`` judges both files with Debian's real slurmd (``slurmd -G``)."""

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


def _h200_nvml_profile_names() -> list[str]:
    """The GPU-instance profile names a real H200's NVML reports (``MIG 1g.18gb``, ...), "MIG " off."""
    names = []
    for line in (H200_FIXTURES / "nvml-gpu-instance-profiles.txt").read_text().splitlines():
        if line.startswith("gip "):
            info = line.split(" ", 2)[2]
            if info.startswith("{"):
                names.append(ast.literal_eval(info)["name"].removeprefix("MIG "))
    return names


def test_h200_types_are_the_profile_names_nvml_reports(tmp_path: Path) -> None:
    """slurmd (23.02.6 and later) types a MIG device by the driver's profile name, not by its memory: the
    H200's 1g.18gb (16384 MiB) is 1g.18gb, where slurmd 22.05 said 1g.16gb."""
    names = [n for n in dict.fromkeys(_h200_nvml_profile_names()) if "+" not in n]
    assert {"1g.18gb", "2g.35gb", "7g.141gb"} <= set(names)
    layout = "".join(f"        {n}: 1\n" for n in ("1g.18gb", "2g.35gb", "3g.71gb"))
    text = (f"version: 1\nname: h200\ngpu_count: 1\ngpus:\n  - model: h200-141gb\n    mig:\n      layout:\n"
            f"{layout}slurm:\n  node_name: gpu-01\n")
    out = generate(text, tmp_path / "out")
    assert _gres_lines(out) == [("gpu-01", {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 1})]


def test_show_prints_the_slurm_view_and_no_kubernetes_for_a_slurm_node() -> None:
    rc, out, _ = cli("show", str(IMAGES[[p.name for p in IMAGES].index("h100-slurm")] / "node-profile.yaml"))
    assert rc == 0
    assert "  the node (4 GPUs): Gres=gpu:3g.40gb:8\n" in out
    assert "Kubernetes" not in out


def test_a100_80gb_counts_are_typed(tmp_path: Path) -> None:
    image = next(p for p in IMAGES if p.name == "a100-80gb-mixed")
    out = generate(_profile_text(image), tmp_path / "out")
    text = (out / "slurm/slurm.conf.node").read_text()
    assert "NodeName=gpu-[01-04] Gres=gpu:3g.40gb:4,gpu:2g.20gb:4,gpu:1g.10gb:36\n" in text
    assert "untyped" not in text
