"""Issue 42, class 2: limits of the consumers, checked on the profile before anything is written.

- ``unit-line-too-long``: go-systemd's unit parser (inside Ignition and butane) refuses a unit line of
  2048 bytes or more; the restore unit's consumer comment and kubelet's ``--node-labels`` line grow with
  the profile. The rule's line is the rendered line (same bytes), and the real butane draws the border:
  2047 bytes pass, 2048 fail.
- ``cluster-api-limit``: the v1beta2 KubeadmConfigTemplate CRD's ``kubeletExtraArgs[].value`` maxLength
  1024 (tests/fixtures/crds), judged by the CRD's own schema; a preKubeadmCommands item over its 10240 is a
  render error (unreachable past the unit-line rule, which a long list of units trips first).
- Karpenter's userData above EC2's 16 KB: a warning after the write that says what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import judge
from realtools import run
from support import IMAGES, REPO, cli, shared_file

from migbake.problems import RenderError
from migbake.profile.nodeprofile import build_profile
from migbake.render.tree import render
from migbake.rules.limits import SYSTEMD_LINE_MAX, consumer_line, labels_line
from migbake.rules.validate import check_bytes

BUTANE = REPO.parent / "shared" / "tools" / "butane" / "butane"
H200: dict[str, Any] = {"version": 1, "name": "limits",
                        "gpus": [{"model": "h200-141gb", "mig": {"layout": {"1g.18gb": 7}}}]}


def _profile(**extra: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(H200)), **extra}


def _consumers(total: int) -> list[dict[str, str]]:
    """Consumers whose units make the restore unit's comment line exactly ``total`` bytes long."""
    units: list[str] = []
    while len(consumer_line(_profile(consumers=[{"unit": u} for u in units])).encode()) < total:
        units.append(f"c{len(units):02d}-" + "x" * 100 + ".service")
    over = len(consumer_line(_profile(consumers=[{"unit": u} for u in units])).encode()) - total
    units[-1] = units[-1][:len(units[-1]) - over - len(".service")] + ".service"
    return [{"unit": u} for u in units]


def _labels(total: int, **kubernetes: str) -> dict[str, str]:
    """Node labels whose Environment= line (kubeadm, or generic with ``kubernetes``) is exactly ``total`` bytes."""
    def line(labels: dict[str, str]) -> int:
        layout = {} if kubernetes else {"kubelet": {"layout": "kubeadm"}}
        return len(labels_line(_profile(**layout, kubernetes={"node_labels": labels, **kubernetes})))
    labels: dict[str, str] = {}
    while line(labels) < total:
        labels[f"example.com/{len(labels):02d}" + "k" * 30] = "v" * 63
    over = line(labels) - total
    key, value = labels.popitem()
    cut = min(over, 63)
    labels[key[:len(key) - (over - cut)]] = value[:63 - cut]
    return labels


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    checked = check_bytes(yaml.safe_dump(data).encode(), "p.yaml")
    return [(p.pointer, p.rule) for p in checked.problems if p.severity == "error"]


def _longest_unit_line(data: dict[str, Any], name: str) -> int:
    artifacts = {a.path: a for a in render(build_profile(data))}
    return max(len(line.encode()) for line in str(artifacts[name].content).split("\n"))


CASES = {
    "consumers-2047": (_profile(consumers=_consumers(2047)), "rootfs/etc/systemd/system/nvidia-mig-restore.service",
                       None),
    "consumers-2048": (_profile(consumers=_consumers(2048)), "rootfs/etc/systemd/system/nvidia-mig-restore.service",
                       "/consumers"),
    "labels-2047": (_profile(kubelet={"layout": "kubeadm"}, kubernetes={"node_labels": _labels(2047)}),
                    "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf", None),
    "labels-2048": (_profile(kubelet={"layout": "kubeadm"}, kubernetes={"node_labels": _labels(2048)}),
                    "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf", "/kubernetes/node_labels"),
    "labels-generic-2048": (_profile(kubernetes={"node_labels": _labels(2048, kubelet_args_env="KUBELET_EXTRA_ARGS"),
                                                        "kubelet_args_env": "KUBELET_EXTRA_ARGS"}),
                            "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf",
                            "/kubernetes/node_labels"),
}


@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_the_rule_measures_the_line_migbake_writes(case: str) -> None:
    data, unit, pointer = CASES[case]
    size = 2048 if pointer else 2047
    assert _longest_unit_line(data, unit) == size
    assert ((pointer, "unit-line-too-long") in _errors(data)) == (pointer is not None)
    if pointer is None:
        assert not [e for e in _errors(data) if e[1] == "unit-line-too-long"]


@pytest.mark.realtool
@pytest.mark.parametrize("case", CASES, ids=CASES)
def test_butane_draws_the_same_border(case: str, tmp_path: Path) -> None:
    data, _, pointer = CASES[case]
    artifacts = {a.path: a for a in render(build_profile(data))}
    bu = tmp_path / "fcos.bu"
    bu.write_text(str(artifacts["butane/fcos.bu"].content))
    ran = run([str(shared_file(BUTANE)), "--strict", str(bu)])
    if pointer is None:
        assert ran.rc == 0, ran.text
    else:
        assert ran.rc != 0 and f"line too long (max {SYSTEMD_LINE_MAX} bytes)" in ran.text, ran.text


@pytest.mark.parametrize("extra", [0, 1])
def test_cluster_api_node_labels_fit_the_crds_value_limit(extra: int) -> None:
    value_len = 1024 + extra
    labels = {"example.com/a": "v" * 63}
    while len(",".join(f"{k}={v}" for k, v in labels.items())) < value_len - 80:
        labels[f"example.com/l{len(labels):02d}"] = "v" * 63
    rest = value_len - len(",".join(f"{k}={v}" for k, v in labels.items())) - 1 - len("example.com/z=")
    labels["example.com/z"] = "v" * rest
    data = _profile(kubelet={"layout": "kubeadm"}, kubernetes={"node_labels": labels})
    template = {a.path: a for a in render(build_profile(data))}["cluster-api/kubeadm-config-template.yaml"]
    doc = yaml.safe_load(str(template.content))
    args = doc["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    assert len(args[0]["value"]) == value_len
    crd = judge(doc, "kubeadmconfigtemplate-v1beta2")
    errors = _errors(data)
    if extra:
        assert crd and ("/kubernetes/node_labels", "cluster-api-limit") in errors, (crd, errors)
    else:
        assert not crd and not [e for e in errors if e[1] == "cluster-api-limit"], (crd, errors)


def test_a_pre_kubeadm_command_over_the_crds_limit_is_a_render_error() -> None:
    data = _profile(kubelet={"layout": "kubeadm"},
                    consumers=[{"unit": f"c{i:02d}-" + "x" * 120 + ".service"} for i in range(30)])
    with pytest.raises(RenderError, match="preKubeadmCommands item of OUT/cluster-api would be"):
        render(build_profile(data))
    assert ("/consumers", "unit-line-too-long") in _errors(data)


def test_karpenter_user_data_over_ec2s_limit_is_a_warning_that_says_what_to_do(tmp_path: Path) -> None:
    data = _profile(kubelet={"layout": "eks-al2023"}, kubernetes={"node_labels": {"a": "b"}},
                    consumers=[{"unit": f"c{i:02d}-" + "x" * 40 + ".service"} for i in range(32)])
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    code, _, err = cli("generate", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"))
    assert code == 0
    assert ("migbake: warning: karpenter/ec2nodeclass.yaml: its userData is " in err
            and "above EC2's 16 KB limit" in err and "keep only the NodeConfig part" in err), err
    image = next(p for p in IMAGES if p.name == "h200-inference")
    code, _, err = cli("generate", str(image / "node-profile.yaml"), "-o", str(tmp_path / "small"))
    assert code == 0 and "karpenter" not in err and (tmp_path / "small/karpenter/ec2nodeclass.yaml").is_file()
