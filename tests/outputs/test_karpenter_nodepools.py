"""``OUT/karpenter/nodepools.yaml``: one Karpenter NodePool per layout name, each labelling its nodes
``nvidia.com/mig.config=NAME``, judged by the NodePool CRD's own schema (aws/karpenter-provider-aws v1.14.1,
tests/fixtures/crds/nodepool-v1.openapi.json) and its CEL rules (cel-python); and the label followed to the restore:
Karpenter's ``--node-labels`` flag (bootstrap.go ``nodeLabelArg``), merged by AWS's nodeadm with the EC2NodeClass's
userData, written as nodeadm writes kubelet's environment file, read by the generated restore.sh, which applies
that layout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import cel_errors, judge
from realtools import NODECONFIG_CLUSTER, nodeadm, nodeadm_merged
from support import CASES_ROOT, IMAGES, generate
from test_karpenter import karpenter_merge
from test_layout_restore import _applied, _node, _put

from migbake.problems import RenderError
from migbake.render.environment import Templates
from migbake.render.plan import make_plan
from migbake.render.targets.context import shared_variables
from migbake.render.targets.karpenter import nodepool_name, nodepools
from migbake.rules.validate import check_file

CASE = CASES_ROOT / "valid/named-layouts-eks-al2023/node-profile.yaml"
NAMES = ["infer", "train"]
# an object name that is also a label value (karpenter.sh/nodepool=NAME on every node of the pool)
POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")


def _out(tmp_path: Path) -> Path:
    return generate(CASE.read_text(), tmp_path / "out")


def _pools(out: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((out / "karpenter/nodepools.yaml").read_text()) if d]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _out(tmp_path_factory.mktemp("nodepools"))


def test_one_nodepool_per_layout_name_passes_the_crd_schema_and_its_rules(out: Path) -> None:
    pools = _pools(out)
    nodeclass = yaml.safe_load((out / "karpenter/ec2nodeclass.yaml").read_text())
    assert [p["spec"]["template"]["metadata"]["labels"]["nvidia.com/mig.config"] for p in pools] == NAMES
    for pool in pools:
        assert pool["apiVersion"] == "karpenter.sh/v1" and pool["kind"] == "NodePool"
        assert judge(pool, "nodepool-v1") == []
        errors, evaluated = cel_errors(pool, "nodepool-v1")
        assert errors == [] and evaluated >= 10, (errors, evaluated)  # the labels', nodeClassRef's, requirements'
        assert POOL_NAME.fullmatch(pool["metadata"]["name"])
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
        assert ref == {"group": nodeclass["apiVersion"].split("/")[0], "kind": nodeclass["kind"],
                       "name": nodeclass["metadata"]["name"]}
        # the profile's node labels too, so that Karpenter schedules by them (they also reach kubelet by userData)
        assert pool["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.deploy.mig-manager"] == "false"
    assert len({p["metadata"]["name"] for p in pools}) == len(NAMES)


LABELS = ("spec", "template", "metadata", "labels")
REQUIREMENT = ("spec", "template", "spec", "requirements", 0)


def _set(doc: Any, path: tuple[str | int, ...], value: object) -> None:
    """Set (or, for None, remove) the value at ``path`` of ``doc``."""
    for key in path[:-1]:
        doc = doc[key]
    if value is None:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


@pytest.mark.parametrize(("path", "value", "error"), [
    (("spec", "template", "spec", "requirements"), None, "'requirements' is a required property"),
    (("spec", "template", "spec", "nodeClassRef", "group"), None, "'group' is a required property"),
    ((*LABELS, "nvidia.com/mig.config"), "infer/x", "does not match"),
    ((*LABELS, "nvidia.com/mig.config"), "x" * 64, "is too long"),
    (("spec", "template", "labels"), {"a": "b"}, "not a field of the schema"),
    ((*LABELS, "karpenter.sh/nodepool"), "infer", 'label "karpenter.sh/nodepool" is restricted'),
    ((*REQUIREMENT, "values"), [], "requirements with operator 'In' must have a value defined"),
    ((*REQUIREMENT, "key"), "karpenter.sh/mine", 'label domain "karpenter.sh" is restricted'),
], ids=["no-requirements", "no-group", "label-value", "label-length", "misplaced-labels", "cel-nodepool-label",
        "cel-in-without-values", "cel-requirement-domain"])
def test_the_crd_refuses_a_broken_nodepool(out: Path, path: tuple[str | int, ...], value: object,
                                           error: str) -> None:
    pool = _pools(out)[0]
    _set(pool, path, value)
    said = judge(pool, "nodepool-v1") + cel_errors(pool, "nodepool-v1")[0]
    assert any(error in e for e in said), said


def karpenter_flag(labels: dict[str, str]) -> str:
    """Karpenter's kubelet flag for a NodeClaim's labels: sorted keys, ``k=v`` joined by ',', Go's %q
    (aws/karpenter-provider-aws:pkg/providers/amifamily/bootstrap/bootstrap.go@v1.14.1 ``nodeLabelArg``; label
    characters need no escape, so %q is the text in double quotes)."""
    text = ",".join(f"{k}={labels[k]}" for k in sorted(labels))
    assert re.fullmatch(r"[A-Za-z0-9_./=,-]*", text)
    return f'--node-labels="{text}"'


@pytest.mark.realtool
@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_the_nodepool_label_reaches_the_restore_through_karpenter_and_nodeadm(
        out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    pool = _pools(out)[index]
    name = NAMES[index]
    # the NodeClaim's labels: the template's, then karpenter.sh/nodepool (nodeclaimtemplate.go), and the capacity
    # type (launchtemplate.go); the kubernetes.io ones are dropped before the flag (resolver.go RejectForbiddenLabels)
    labels = {**pool["spec"]["template"]["metadata"]["labels"], "karpenter.sh/nodepool": pool["metadata"]["name"],
              "karpenter.sh/capacity-type": "on-demand"}
    part = ("# Karpenter Generated NodeConfig\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
            f"{NODECONFIG_CLUSTER}  kubelet:\n    flags:\n      - {yaml.safe_dump(karpenter_flag(labels)).strip()}\n")
    user_data = yaml.safe_load((out / "karpenter/ec2nodeclass.yaml").read_text())["spec"]["userData"]
    merged = tmp_path / "user-data.mime"
    merged.write_text(karpenter_merge(user_data, part))
    ran = nodeadm("check", merged)
    assert ran.rc == 0, ran.text
    flags = nodeadm_merged(merged)["spec"]["kubelet"]["flags"]
    assert flags[-1] == karpenter_flag(labels)  # Karpenter's NodeConfig comes last: its labels win
    # nodeadm's environment file: its own flags, then spec.kubelet.flags, one line (amazon-eks-ami
    # nodeadm/internal/kubelet/environment.go@v20260724 writeKubeletEnvironment)
    node = _node(tmp_path, monkeypatch, "kubelet-labels")
    _put(node, "/etc/eks/kubelet/environment",
         "NODEADM_KUBELET_ARGS=" + " ".join(["--config=/etc/kubernetes/kubelet/config.json", *flags]))
    _applied(node.run(), node, name, "kubelet-labels")


def test_no_nodepools_without_named_layouts() -> None:
    eks = next(i for i in IMAGES if i.name == "h200-inference")
    assert (eks / "generated/karpenter/ec2nodeclass.yaml").is_file()
    assert not (eks / "generated/karpenter/nodepools.yaml").exists()


@pytest.mark.parametrize(("profile", "layout", "want"), [
    ("gpu", "infer", "gpu-infer"),
    ("gpu", "v1.2", "gpu-v1.2"),
    ("gpu", "Train_A", None),  # upper case and '_': a label value, not an object name
    ("p" * 63, "infer", None),  # too long for a label value
])
def test_a_nodepool_name_is_an_object_name_and_a_label_value(profile: str, layout: str, want: str | None) -> None:
    got = nodepool_name(profile, layout)
    assert POOL_NAME.fullmatch(got), got
    if want is not None:
        assert got == want
    else:
        assert got.endswith("-" + hashlib.sha256(layout.encode()).hexdigest()[:8])
    assert nodepool_name("gpu", "Train_A") != nodepool_name("gpu", "train-a")  # no two layouts on one pool


def test_two_layouts_on_one_nodepool_name_are_refused() -> None:
    checked = check_file(CASE)
    assert checked.profile is not None
    plan = make_plan(checked.profile)
    clash = "x-" + hashlib.sha256(b"X").hexdigest()[:8]  # what layout "X" becomes after the profile's name
    assert nodepool_name("layouts-eks", "X") == nodepool_name("layouts-eks", clash)
    with pytest.raises(RenderError, match="two layout names give one NodePool name"):
        clashing = dataclasses.replace(plan, mig=dataclasses.replace(plan.mig, layout_names=("X", clash)))
        nodepools(clashing, Templates(shared_variables(clashing)))


@pytest.mark.parametrize(("sources", "said"), [
    ("[kubelet-labels, file]", "which the restore reads (kubelet-labels)."),
    ("[file]", "but restore.layout.from lacks kubelet-labels: the restore does not read that label."),
], ids=["read", "not-read"])
def test_show_names_each_layout_s_nodepool(tmp_path: Path, sources: str, said: str) -> None:
    from support import cli

    profile = tmp_path / "node-profile.yaml"
    profile.write_text(CASE.read_text().replace("from: [kubelet-labels, file]", f"from: {sources}"))
    code, text, err = cli("show", str(profile))
    assert code == 0, err
    assert "Karpenter: one NodePool per name in OUT/karpenter/nodepools.yaml, labelling its nodes " \
           f"nvidia.com/mig.config=NAME, {said}" in text
    assert "Karpenter disables them in instance metadata" in text
    pools = [p["metadata"]["name"] for p in _pools(_out(tmp_path))]
    for layout, pool in zip(NAMES, pools):
        assert f"=== layout {layout} (nvidia.com/mig.config={layout}) ===\n  Karpenter NodePool: {pool}\n" in text


def test_show_names_no_nodepool_off_eks(tmp_path: Path) -> None:
    from support import cli

    profile = tmp_path / "node-profile.yaml"
    profile.write_text(CASE.read_text().replace("layout: eks-al2023", "layout: kubeadm"))
    code, text, err = cli("show", str(profile))
    assert code == 0, err
    assert "=== layout infer" in text and "Karpenter" not in text
