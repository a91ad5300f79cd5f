"""The names of the objects written per layout name (Karpenter NodePools, Cluster API KubeadmConfigTemplates) are
names the API server takes, whatever the layout name: a DNS subdomain (RFC 1123) of at most 63 characters."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st
from support import REPO, generate

from migbake.kubernetes.objectnames import kubeadm_template_name, nodepool_name

# a layout name is a label value: at most 63 of letters, digits, '-', '_', '.', starting and ending alphanumeric
LAYOUT = st.from_regex(r"\A[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
# kubernetes/kubernetes@v1.35.0:staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go dns1123SubdomainFmt
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
PROFILE = st.from_regex(r"\A[a-z0-9](?:[-a-z0-9]{0,40}[a-z0-9])?\Z")


def _takes(name: str) -> bool:
    """What kubernetes/kubernetes@v1.35.0 IsDNS1123Subdomain takes, and the label value limit of 63."""
    return len(name) <= 63 and SUBDOMAIN.fullmatch(name) is not None


@given(PROFILE, LAYOUT)
def test_every_layout_name_gives_an_object_name(profile: str, layout: str) -> None:
    assert _takes(nodepool_name(profile, layout)), nodepool_name(profile, layout)
    assert _takes(kubeadm_template_name(profile, layout)), kubeadm_template_name(profile, layout)


def test_dots_beside_dots_or_dashes_are_not_kept() -> None:
    for layout in ("a..b", "a.-b", "a-.b"):
        assert _takes(nodepool_name("p", layout)) and nodepool_name("p", layout) != f"p-{layout}"


def test_a_name_that_is_one_is_kept() -> None:
    assert nodepool_name("p", "train.v2") == "p-train.v2"
    assert kubeadm_template_name("p", "infer") == "migbake-p-infer"


def test_generated_nodepools_and_templates_are_named_so(tmp_path: Path) -> None:
    profile = (REPO / "tests/cases/valid/named-layouts-eks-al2023/node-profile.yaml").read_text()
    profile = profile.replace("infer:", "in..fer:").replace("train:", "tr.-ain:")
    for layout, folder in (("eks-al2023", "karpenter"), ("kubeadm", "cluster-api")):
        src = tmp_path / f"{layout}.yaml"
        src.write_text(profile.replace("layout: eks-al2023", f"layout: {layout}").replace(
            "from: [kubelet-labels, file]", "from: [file, kubelet-labels]"))
        out = generate(src.read_text(), tmp_path / layout)
        kinds = ("NodePool", "KubeadmConfigTemplate")
        names = [d["metadata"]["name"] for f in (out / folder).glob("*.yaml")
                 for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") in kinds]
        assert len(names) >= 2 and all(_takes(n) for n in names), names
