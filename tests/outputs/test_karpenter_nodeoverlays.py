"""``OUT/karpenter/nodeoverlays.yaml``: one Karpenter NodeOverlay per layout name and GPU model, judged by the
NodeOverlay CRD's own schema and CEL rules (kubernetes-sigs/karpenter v1.14.1,
tests/fixtures/crds/nodeoverlay-v1alpha1.openapi.json), its capacity compared with what ``migbake show`` prints,
and its requirements with the NodePool of its layout.

The profile is images/h100-h200-inference (two layouts on two GPU models) started as an EKS AL2023 node, the one
kubelet.layout Karpenter targets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import cel_errors, judge
from support import IMAGES, cli, generate

PROFILE = next(i for i in IMAGES if i.name == "h100-h200-inference") / "node-profile.yaml"
# the instance labels of the AWS provider (aws/karpenter-provider-aws@v1.14.1: website/content/en/docs/reference/
# instance-types.md, p5.48xlarge and p5e.48xlarge)
P5 = {"karpenter.k8s.aws/instance-gpu-name": "h100", "karpenter.k8s.aws/instance-gpu-memory": "81920",
      "karpenter.k8s.aws/instance-gpu-count": "8"}
P5E = {"karpenter.k8s.aws/instance-gpu-name": "h200", "karpenter.k8s.aws/instance-gpu-memory": "144384",
       "karpenter.k8s.aws/instance-gpu-count": "8"}


def _eks(text: str) -> str:
    assert "layout: kubeadm" in text
    return text.replace("layout: kubeadm", "layout: eks-al2023")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "node-profile.yaml"
    path.write_text(_eks(PROFILE.read_text()))
    return path


@pytest.fixture(scope="module")
def out(profile: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(profile.read_text(), tmp_path_factory.mktemp("overlays") / "out")


def show_resources(profile: Path) -> dict[tuple[str, str], dict[str, int]]:
    """``migbake show``'s extended resources per (layout name, GPU model), parsed from what it prints."""
    rc, stdout, stderr = cli("show", str(profile))
    assert rc == 0, stderr
    found: dict[tuple[str, str], dict[str, int]] = {}
    layout, model = "", ""
    for line in stdout.splitlines():
        if m := re.fullmatch(r"=== layout (\S+) .*===", line):
            layout, model = m[1], ""
        elif m := re.fullmatch(r"  a node whose GPUs are (\S+) \(\d+ GPUs\):", line):
            model = m[1]
            found[(layout, model)] = {}
        elif model and (m := re.fullmatch(r"    (nvidia\.com/\S+): (\d+)", line)):
            found[(layout, model)][m[1]] = int(m[2])
        elif not line.startswith("    "):
            model = ""
    return found


def _requirements(overlay: dict[str, Any]) -> dict[str, list[str]]:
    assert all(r["operator"] == "In" for r in overlay["spec"]["requirements"])
    return {r["key"]: r["values"] for r in overlay["spec"]["requirements"]}


def test_each_overlay_passes_the_crd_schema_and_its_cel_rules(out: Path) -> None:
    overlays = _docs(out / "karpenter/nodeoverlays.yaml")
    assert len(overlays) == 4  # two layouts x two GPU models
    for overlay in overlays:
        assert overlay["apiVersion"] == "karpenter.sh/v1alpha1" and overlay["kind"] == "NodeOverlay"
        assert judge(overlay, "nodeoverlay-v1alpha1") == []
        errors, evaluated = cel_errors(overlay, "nodeoverlay-v1alpha1")
        # spec's one (price or priceAdjustment), the requirements' three, each key's two, capacity's one
        assert errors == [] and evaluated == 1 + 3 + 2 * 5 + 1, (errors, evaluated)


def test_the_capacity_is_what_show_prints_for_each_layout_and_model(profile: Path, out: Path) -> None:
    shown = show_resources(profile)
    assert set(shown) == {(n, m) for n in ("inference", "training") for m in ("h100-80gb", "h200-141gb")}
    by_model = {"h100": "h100-80gb", "h200": "h200-141gb"}
    got = {(_requirements(o)["nvidia.com/mig.config"][0],
            by_model[_requirements(o)["karpenter.k8s.aws/instance-gpu-name"][0]]): o["spec"]["capacity"]
           for o in _docs(out / "karpenter/nodeoverlays.yaml")}
    assert got == shown
    assert shown[("inference", "h100-80gb")] == {"nvidia.com/mig-1g.10gb": 56}


def test_each_overlay_selects_its_layouts_nodepool_and_its_models_instance_types(out: Path) -> None:
    pools = {p["spec"]["template"]["metadata"]["labels"]["nvidia.com/mig.config"]: p
             for p in _docs(out / "karpenter/nodepools.yaml")}
    for overlay in _docs(out / "karpenter/nodeoverlays.yaml"):
        want = _requirements(overlay)
        (layout,) = want.pop("nvidia.com/mig.config")
        assert want.pop("karpenter.sh/nodepool") == [pools[layout]["metadata"]["name"]]
        labels = {k: v[0] for k, v in want.items()}
        assert labels in (P5, P5E)
        # capacity of one model's resources only: an H100 layout never lands on an H200 instance type
        assert all(("1g.10gb" in r or "3g.40gb" in r) == (labels == P5) for r in overlay["spec"]["capacity"])


def test_a_broken_overlay_is_refused_by_the_crd() -> None:
    """The judge can fail: a restricted capacity key (CEL), an In without values (CEL), a bad operator."""
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "x"},
               "spec": {"requirements": [{"key": "nvidia.com/mig.config", "operator": "In", "values": []}],
                        "capacity": {"cpu": 1}}}
    assert cel_errors(overlay, "nodeoverlay-v1alpha1")[0] == [
        "/spec/requirements: requirements with operator 'In' must have a value defined",
        "/spec/capacity: invalid resource restricted"]
    overlay["spec"]["requirements"][0]["operator"] = "Equals"
    assert any("is not one of" in e for e in judge(overlay, "nodeoverlay-v1alpha1"))


def test_a_model_ec2_does_not_sell_gets_no_overlay_and_a_comment(profile: Path, tmp_path: Path) -> None:
    text = profile.read_text().replace("model: h200-141gb", "model: h100-94gb").replace("1g.18gb", "1g.12gb") \
        .replace("3g.71gb", "3g.47gb")
    out = generate(text, tmp_path / "out")
    written = (out / "karpenter/nodeoverlays.yaml").read_text()
    assert len(_docs(out / "karpenter/nodeoverlays.yaml")) == 2
    assert "# No overlay for layout inference, a node whose GPUs are h100-94gb: migbake knows no EC2 instance " \
           "type with h100-94gb GPUs" in written


def test_without_a_gpu_count_no_overlay_is_written(profile: Path, tmp_path: Path) -> None:
    out = generate(profile.read_text().replace("gpu_count: 8\n", ""), tmp_path / "out")
    assert _docs(out / "karpenter/nodeoverlays.yaml") == []
    assert "the GPU count is unknown (set gpu_count)" in (out / "karpenter/nodeoverlays.yaml").read_text()


def test_under_dra_no_overlay_is_written(profile: Path, tmp_path: Path) -> None:
    """Under DRA pods ask for devices through ResourceClaims, which a NodeOverlay's capacity cannot describe."""
    out = generate(profile.read_text().replace("  mig_strategy: mixed", "  allocation: dra"), tmp_path / "out")
    assert _docs(out / "karpenter/nodeoverlays.yaml") == []
    assert "kubernetes.allocation dra publishes DRA devices" in (out / "karpenter/nodeoverlays.yaml").read_text()
