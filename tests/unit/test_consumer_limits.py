"""Limits of the consumers, checked on the profile before anything is written.

- ``unit-line-too-long``: go-systemd's unit parser (inside Ignition and butane) refuses a unit line of
  2048 bytes or more; the restore unit's consumer comment and kubelet's ``--node-labels`` line grow with
  the profile. The rule's line is the rendered line (same bytes), and the real butane draws the border:
  2047 bytes pass, 2048 fail.
- ``cluster-api-limit``: the v1beta2 KubeadmConfigTemplate CRD's ``kubeletExtraArgs[].value`` maxLength
  1024 (tests/fixtures/crds), judged by the CRD's own schema; and a preKubeadmCommands item's 10240 (v1beta1 and
  v1beta2), reachable within the unit-line limit: the rule measures the items the template holds.
- ``karpenter-user-data-size``: Karpenter's userData as Karpenter sends it to EC2 (its mime.go, less its own
  NodeConfig) from Karpenter's own 90% warning up to and over EC2's 16384 raw bytes (AWS EC2 User Guide, "Work with
  instance user data"): a warning located at the key that grows it the most, found once rendered, before writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import judge
from realtools import run
from support import IMAGES, REPO, cli, shared_file

from migbake.document.loader import LoadedProfile, load_profile_bytes
from migbake.problems import RenderError
from migbake.profile.firstboot import commands
from migbake.profile.nodeprofile import build_profile
from migbake.render.targets.karpenter import karpenter_sends, user_data
from migbake.render.tree import render
from migbake.rules.consumer_limits import (
    CAPI_COMMAND_MAX,
    EC2_USER_DATA_MAX,
    KARPENTER_WARN_BYTES,
    SYSTEMD_LINE_MAX,
    consumer_line,
    karpenter_user_data_problem,
    labels_line,
    longest_pre_kubeadm_command,
    pre_kubeadm_command,
)
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


def _units(count: int, length: int) -> list[dict[str, str]]:
    return [{"unit": f"c{i:02d}-" + "x" * length + ".service"} for i in range(count)]


def _command_profile(total: int) -> dict[str, Any]:
    """A kubeadm profile whose longest preKubeadmCommands item is exactly ``total`` characters: 16 consumers as long
    as that allows, then the profile's name (once in the item, so one character more is one more) for the rest."""
    def size(length: int, name: str) -> int:
        data = _profile(name=name, kubelet={"layout": "kubeadm"}, consumers=_units(16, length))
        return longest_pre_kubeadm_command(build_profile(data))
    length = 1
    while size(length + 1, "n") <= total:
        length += 1
    name = "n" + "x" * (total - size(length, "n"))
    assert len(name) <= 63
    return _profile(name=name, kubelet={"layout": "kubeadm"}, consumers=_units(16, length))


def _pre_kubeadm_commands(data: dict[str, Any], version: str) -> list[str]:
    path = {"v1beta2": "cluster-api/kubeadm-config-template.yaml",
            "v1beta1": "cluster-api/v1beta1/kubeadm-config-template.yaml"}[version]
    doc = yaml.safe_load(str({a.path: a for a in render(build_profile(data))}[path].content))
    return [str(c) for c in doc["spec"]["template"]["spec"]["preKubeadmCommands"]]


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_the_rule_measures_the_pre_kubeadm_commands_cluster_api_gets(version: str) -> None:
    """The rule's items are the template's, and the CRD's own schema takes the longest the rule allows."""
    for data in (_profile(kubelet={"layout": "kubeadm"}), _profile(kubelet={"layout": "kubeadm"}, consumers=_units(
            3, 40), tools={"nvidia_smi": "/opt/nvidia/bin/nvidia-smi"}), _command_profile(CAPI_COMMAND_MAX)):
        items = _pre_kubeadm_commands(data, version)
        assert items == [pre_kubeadm_command(argv) for argv in commands(build_profile(data))[1]]
    data = _command_profile(CAPI_COMMAND_MAX)
    assert max(map(len, _pre_kubeadm_commands(data, version))) == CAPI_COMMAND_MAX
    template = {a.path: a for a in render(build_profile(data))}
    name = "cluster-api/" + ("" if version == "v1beta2" else "v1beta1/") + "kubeadm-config-template.yaml"
    assert judge(yaml.safe_load(str(template[name].content)), f"kubeadmconfigtemplate-{version}") == []
    assert _errors(data) == []


def test_a_pre_kubeadm_command_over_the_crds_limit_is_refused_located(tmp_path: Path) -> None:
    """Within the unit-line limit, 16 long consumers make a first-boot command longer than Cluster API takes:
    refused before anything is rendered, at the key that adds the most, exactly past the border (10241)."""
    data = _command_profile(CAPI_COMMAND_MAX + 1)
    assert _errors(data) == [("/consumers", "cluster-api-limit")]
    with pytest.raises(RenderError, match="preKubeadmCommands item of OUT/cluster-api would be 10241"):
        render(build_profile(data))  # the target's own guard, which the rule now reaches first
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    code, _, err = cli("generate", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"))
    assert code == 1 and not (tmp_path / "out").exists()
    assert "p.yaml:" in err and ": error: /consumers: a preKubeadmCommands item of OUT/cluster-api would be 10241 " \
        "characters" in err and "[cluster-api-limit]" in err, err
    generic = {**data, "kubelet": {"layout": "generic"}}  # no OUT/cluster-api: nothing to refuse
    assert _errors(generic) == []


def _eks(**extra: Any) -> dict[str, Any]:
    # the EC2NodeClass's full form (karpenter.user_data full: the restore's files in userData) is the one measured
    return _profile(kubelet={"layout": "eks-al2023"}, karpenter={"user_data": "full"}, **extra)


def _labels_of(count: int) -> dict[str, str]:
    return {f"example.com/{i:02d}-" + "k" * 40: "v" * 63 for i in range(count)}


def test_karpenter_sends_what_its_mime_serialize_writes() -> None:
    """The size is of the document Karpenter gives EC2 (bootstrap/mime/mime.go Serialize@v1.14.1: boundary //, its
    own NodeConfig last, no carriage return), less that NodeConfig's content, not of the userData as written."""
    doc = user_data([("text/cloud-config", "#cloud-config\nruncmd: []\n"), ("application/node.eks.aws", "kind: x\n")])
    sent = ('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
            '--//\nContent-Type: text/cloud-config; charset="us-ascii"\n\n#cloud-config\nruncmd: []\n'
            "--//\nContent-Type: application/node.eks.aws\n\nkind: x\n"
            "--//\nContent-Type: application/node.eks.aws\n\n\n--//--\n")
    assert karpenter_sends(doc) == len(sent.encode()) != len(doc.encode())


def _loaded(data: dict[str, Any]) -> LoadedProfile:
    loaded, problems = load_profile_bytes(yaml.safe_dump(data, sort_keys=False).encode(), "p.yaml")
    assert not problems
    return loaded


@pytest.mark.parametrize(("size", "grown", "said", "pointer"), [
    (KARPENTER_WARN_BYTES - 1, {"/consumers": 900}, None, None),
    (KARPENTER_WARN_BYTES, {"/consumers": 900}, "must fit in the 1639 bytes left of EC2's 16384", "/consumers"),
    (EC2_USER_DATA_MAX, {"/consumers": 900, "/kubernetes/node_labels": 2000}, "the 0 bytes left",
     "/kubernetes/node_labels"),
    (EC2_USER_DATA_MAX + 1, {}, "above EC2's limit of 16384 bytes of user data (raw, before base64)", ""),
    (EC2_USER_DATA_MAX + 1, {"/consumers": -3, "/description": 0}, "UserDataSizeLimitExceeded", ""),
], ids=["below-karpenters-warning", "karpenters-warning", "at-the-limit", "over-at-the-root", "nothing-grows-it"])
def test_the_karpenter_warning_border(size: int, grown: dict[str, int], said: str | None, pointer: str | None) -> None:
    """From Karpenter's own warning (90% of 16384, launchtemplate/metrics.go@v1.14.1) up, located at the key
    that adds the most (the profile's root when none adds anything); over 16384, EC2 refuses the launch template."""
    loaded = _loaded(_eks(consumers=[{"unit": "a.service"}], kubernetes={"node_labels": {"a": "b"}}))
    problem = karpenter_user_data_problem(loaded, size, grown)
    if said is None:
        assert problem is None
        return
    assert problem is not None and problem.severity == "warning" and problem.rule == "karpenter-user-data-size"
    assert problem.pointer == pointer and said in problem.message and f" is {size} bytes " in problem.message
    assert (problem.line, problem.col) == loaded.where(str(pointer))


def _generate(tmp_path: Path, data: dict[str, Any], *args: str) -> tuple[int, str]:
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    code, _, err = cli("generate", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"), *args)
    return code, err


@pytest.mark.parametrize(("data", "pointer", "words"), [
    (_eks(consumers=[{"unit": f"inference-worker-{i:02d}.service"} for i in range(7)]), "/consumers",
     "above EC2's limit of 16384"),
    (_eks(consumers=[{"unit": "a.service"}], kubernetes={"node_labels": _labels_of(24)}), "/kubernetes/node_labels",
     "must fit in the "),
], ids=["consumers", "node-labels"])
def test_karpenter_user_data_is_a_located_warning_before_writing(tmp_path: Path, data: dict[str, Any], pointer: str,
                                                                 words: str) -> None:
    """Generate measures the EC2NodeClass's userData once rendered and, before writing, warns at the
    profile line of the key that grows it the most, with the bytes each key adds; --strict refuses it, nothing
    written; validation.ignore sets it aside."""
    code, err = _generate(tmp_path, data)
    line, col = _loaded(data).where(pointer)
    assert code == 0 and f"p.yaml:{line}:{col}: warning: {pointer}: Karpenter's userData " in err, err
    assert words in err and f"Bytes each key adds: {pointer} " in err and "[karpenter-user-data-size]" in err, err
    shutil.rmtree(tmp_path / "out")
    code, err = _generate(tmp_path, data, "--strict")  # found before anything is written: nothing is
    assert code == 1 and "[karpenter-user-data-size]" in err and not (tmp_path / "out").exists(), err
    ignored = {**data, "validation": {"ignore": [{"rule": "karpenter-user-data-size", "reason": "the AMI has it"}]}}
    code, err = _generate(tmp_path, ignored, "--strict")
    assert code == 0 and "warning: " + pointer not in err and "ignored" in err, err


def test_a_small_profile_or_another_layout_has_no_karpenter_warning(tmp_path: Path) -> None:
    image = next(p for p in IMAGES if p.name == "h200-inference")
    code, _, err = cli("generate", str(image / "node-profile.yaml"), "-o", str(tmp_path / "small"))
    assert code == 0 and "karpenter" not in err and (tmp_path / "small/karpenter/ec2nodeclass.yaml").is_file()
    many = {"consumers": [{"unit": f"inference-worker-{i:02d}.service"} for i in range(7)]}
    code, err = _generate(tmp_path, _profile(kubelet={"layout": "kubeadm"}, **many))  # no OUT/karpenter
    assert code == 0 and "karpenter-user-data-size" not in err, err


def test_images_and_bake_say_it_too(tmp_path: Path) -> None:
    """Every command that writes OUT/karpenter warns the same, located, before it writes."""
    case = REPO / "tests/cases/warning/karpenter-user-data-size"
    image = tmp_path / "images" / "big"
    shutil.copytree(case, image)
    (image / "expected.txt").unlink()
    code, _, err = cli("images", str(tmp_path / "images"))
    assert code == 0 and f"{image / 'node-profile.yaml'}:12:3: warning: /consumers: Karpenter's userData" in err, err
    code, _, err = cli("bake", str(image / "node-profile.yaml"), "--dry-run", "--only", "qemu.image")
    assert f"{image / 'node-profile.yaml'}:12:3: warning: /consumers: Karpenter's userData" in err, (code, err)
