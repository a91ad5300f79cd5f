"""GKE and AKS: which layouts their node pools express natively (``migbake show``), per catalog model they support.

The table is package data (gpu/data/managed-mig.json, with its sources); these cases pin what it must say
for each model: GKE's ``gpu-partition-size`` (GoogleCloudPlatform/container-engine-accelerators
pkg/gpu/nvidia/mig/mig.go@992db812) and AKS's ``gpuInstanceProfile`` (AKS docs for A100 40GB; A100 80GB,
H100 80GB, H200 from AgentBaker's mig-partition.sh ids), and that every size is a catalog profile whose
count is the most that fit on the GPU.
"""

from __future__ import annotations

import pytest
from support import cli

from migbake.gpu.catalog import load_catalog
from migbake.kubernetes.managed import Entry, platform_models, verdicts

# (catalog model, GKE accelerator, a size with its count, a size GKE does not offer)
GKE = [
    ("a100-40gb", "nvidia-tesla-a100", ("1g.5gb", 7), "4g.20gb"),
    ("a100-80gb", "nvidia-a100-80gb", ("3g.40gb", 2), "1g.20gb"),
    ("h100-80gb", "nvidia-h100-80gb", ("1g.20gb", 4), "4g.40gb"),
    ("h200-141gb", "nvidia-h200-141gb", ("4g.71gb", 1), "1g.18gb+me"),
    ("b200-180gb", "nvidia-b200", ("2g.45gb", 3), "1g.23gb+me"),
    ("gb200-186gb", "nvidia-gb200", ("1g.47gb", 4), "1g.23gb+me"),
    ("rtx-pro-6000-blackwell-96gb", "nvidia-rtx-pro-6000", ("2g.48gb", 2), None),
]
# (catalog model, MIG1g..MIG7g as the profile each gives)
AKS = [
    ("a100-40gb", ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
    ("a100-80gb", ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("h100-80gb", ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    ("h200-141gb", ("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
]


def _one(platform: str, model: str, layout: dict[str, int], mig: bool = True) -> list[object]:
    return verdicts(platform, [Entry("/gpus/0", model, mig, tuple(layout.items()))])  # type: ignore[arg-type]


def test_the_tables_cover_exactly_these_models() -> None:
    assert sorted(platform_models("gke")) == sorted(m for m, *_ in GKE)
    assert sorted(platform_models("aks")) == sorted(m for m, _ in AKS)


@pytest.mark.parametrize(("model", "accelerator", "size", "other"), GKE, ids=[m for m, *_ in GKE])
def test_gke(model: str, accelerator: str, size: tuple[str, int], other: str | None) -> None:
    [v] = _one("gke", model, {size[0]: size[1]})
    assert (v.native, v.key, v.value, v.count) == (True, accelerator, size[0], size[1])  # type: ignore[attr-defined]
    [v] = _one("gke", model, {size[0]: size[1] - 1} if size[1] > 1 else {size[0]: 1, "x": 1})
    assert not v.native  # type: ignore[attr-defined]
    if other:
        [v] = _one("gke", model, {other: 1})
        assert not v.native and f"{other} is not a size GKE offers" in v.reason  # type: ignore[attr-defined]
    catalog = load_catalog().by_key(model)
    for name, count in platform_models("gke")[model]["sizes"].items():
        p = catalog.profile(name)
        assert p is not None and p.max_count == count, (model, name)


@pytest.mark.parametrize(("model", "sizes"), AKS, ids=[m for m, _ in AKS])
def test_aks(model: str, sizes: tuple[str, ...]) -> None:
    catalog = load_catalog().by_key(model)
    for value, size in zip(("MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"), sizes):
        p = catalog.profile(size)
        assert p is not None
        [v] = _one("aks", model, {size: p.max_count})
        assert (v.native, v.value) == (True, value), v  # type: ignore[attr-defined]
    [v] = _one("aks", model, {sizes[0]: 1, sizes[1]: 1})
    assert not v.native and "one gpuInstanceProfile" in v.reason  # type: ignore[attr-defined]


def test_unsupported_model_and_mig_off() -> None:
    [v] = _one("aks", "b200-180gb", {"1g.23gb": 7})
    assert not v.native and "not a GPU model AKS partitions natively" in v.reason  # type: ignore[attr-defined]
    [v] = _one("gke", "h100-80gb", {}, mig=False)
    assert not v.native and "MIG is off" in v.reason  # type: ignore[attr-defined]
    [v] = _one("aks", "h100-80gb", {"1g.20gb": 4})  # AgentBaker has no id for it
    assert not v.native and "not a size AKS offers" in v.reason  # type: ignore[attr-defined]


def test_show_prints_the_flags_and_why_not(tmp_path: object) -> None:
    rc, out, _ = cli("show", "images/h200-inference/node-profile.yaml")
    assert rc == 0
    assert "GKE, h200-141gb: native: gpu-partition-size=1g.18gb" in out
    assert "--accelerator=type=nvidia-h200-141gb,count=8,gpu-partition-size=1g.18gb" in out
    assert 'gpu_partition_size = "1g.18gb"' in out and "--gpu-instance-profile MIG1g" in out
    assert 'gpu_instance = "MIG1g"' in out
    rc, out, _ = cli("show", "images/a100-80gb-mixed/node-profile.yaml")
    assert rc == 0
    assert "GKE, a100-80gb: not native: /gpus/0/mig/layout: 3g.40gb x1, 2g.20gb x1, 1g.10gb x2" in out
    assert "bottlerocket-os/bottlerocket#4483" in out
