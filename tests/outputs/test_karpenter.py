"""``OUT/karpenter/ec2nodeclass.yaml``, judged by the EC2NodeClass CRD's own schema
(aws/karpenter-provider-aws v1.14.1, tests/fixtures/crds/), by AWS's nodeadm on its userData after the merge
Karpenter does (its parts first, Karpenter's NodeConfig last, boundary ``//``: pkg/providers/amifamily/
bootstrap/nodeadm.go and mime/mime.go), and by cloud-init's schema on the cloud-config part.
"""

from __future__ import annotations

import base64
import email
import gzip
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import judge
from realtools import NODECONFIG_CLUSTER, cloud_init_schema, cloud_init_unknown_keys, nodeadm, nodeadm_merged
from support import IMAGES, REPO, generate

from migbake.problems import RenderError
from migbake.render.targets.karpenter import user_data

EKS = next(i for i in IMAGES if i.name == "h200-inference")
OUR_FLAG = "--node-labels=nvidia.com/gpu.deploy.mig-manager=false"
IMAGES_DIR = REPO / "images"
KARPENTER_FLAG = '--node-labels="karpenter.sh/nodepool=default"'  # bootstrap.go's form (Go %q)
KARPENTER_PART = "# Karpenter Generated NodeConfig\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" + \
    NODECONFIG_CLUSTER + f"""  kubelet:
    config:
      maxPods: 110
    flags:
      - {KARPENTER_FLAG}
"""


def _nodeclass(folder: Path = EKS / "generated") -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((folder / "karpenter/ec2nodeclass.yaml").read_text())
    return doc


def karpenter_merge(user_data: str, karpenter_part: str = KARPENTER_PART) -> str:
    """What Karpenter hands EC2 (before its base64): the user's parts with only their Content-Type and body,
    then its own NodeConfig, with boundary ``//`` and no CR (nodeadm.go Script, mime.go NewArchive/Serialize)."""
    assert user_data.strip().startswith("MIME-Version:")  # parseUserData: read as MIME, not as one NodeConfig
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed"
    parts = [(p["Content-Type"], p.get_payload()) for p in message.get_payload()]
    parts.append(("application/node.eks.aws", karpenter_part))
    out = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n'
    out += "".join(f"--//\nContent-Type: {t}\n\n{body.rstrip(chr(10))}\n" for t, body in parts)
    return out + "--//--\n"


def test_the_ec2nodeclass_passes_its_crd_schema() -> None:
    doc = _nodeclass()
    assert doc["apiVersion"] == "karpenter.k8s.aws/v1" and doc["kind"] == "EC2NodeClass"
    assert judge(doc, "ec2nodeclass-v1") == []
    spec = doc["spec"]
    # the CEL rules on spec that bear on it (CRD x-kubernetes-validations, checked by hand):
    assert ("role" in spec) != ("instanceProfile" in spec)  # exactly one of role, instanceProfile
    assert "amiFamily" in spec or any("alias" in t for t in spec["amiSelectorTerms"])  # amiFamily without alias
    assert all(k and v for t in spec["amiSelectorTerms"] for k, v in t.get("tags", {}).items())  # tags non-empty
    assert spec["amiFamily"] == "AL2023"
    # the newest AMI baked from this profile: by the tag Packer gives it (the sha256 is the marker's alone, so a
    # layout change does not rewrite this file's selector)
    assert spec["amiSelectorTerms"] == [{"tags": {"migbake:profile": "h200-inference"}}]
    sources = (EKS / "generated/packer/sources.pkr.hcl").read_text()
    assert '"migbake:profile" = "h200-inference"' in sources  # the tag Packer writes
    assert spec["role"].startswith("CHANGE-ME") and "CHANGE-ME-tag-key" in spec["subnetSelectorTerms"][0]["tags"]


def test_the_root_volume_is_larger_than_karpenters_al2023_default() -> None:
    """Without blockDeviceMappings an AL2023 node gets Karpenter's 20Gi root (amifamily DefaultEBS): too small for a
    GPU node's images. The same device, type and encryption as Karpenter's default, 100Gi."""
    (root,) = _nodeclass()["spec"]["blockDeviceMappings"]
    assert root == {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True,
                                                      "deleteOnTermination": True}}
    assert "rootVolume" not in root  # kubelet's root dir stays on the root volume; at most one may say so (CEL)


@pytest.mark.parametrize(("path", "value", "error"), [
    (("blockDeviceMappings",), [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100GB"}}], "does not match"),
    (("blockDeviceMappings",), [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp4"}}],
     "is not one of"),
    (("amiSelectorTerms",), [], "should be non-empty"),
    (("amiFamily",), "AL2024", "is not one of"),
    (("userData",), {"a": 1}, "is not of type 'string'"),
    (("amiSelectorTerm",), [], "not a field of the schema"),
])
def test_the_crd_schema_refuses_a_broken_nodeclass(path: tuple[str, ...], value: object, error: str) -> None:
    doc = _nodeclass()
    doc["spec"][path[0]] = value
    assert any(error in e for e in judge(doc, "ec2nodeclass-v1")), judge(doc, "ec2nodeclass-v1")


def test_nodeadm_merges_the_userdata_as_karpenter_hands_it_over(tmp_path: Path) -> None:
    user_data = _nodeclass()["spec"]["userData"]
    merged = tmp_path / "karpenter-user-data.mime"
    merged.write_text(karpenter_merge(user_data))
    ran = nodeadm("check", merged)
    assert ran.rc == 0 and "Configuration is valid" in ran.err, ran.text
    spec = nodeadm_merged(merged)["spec"]
    assert spec["kubelet"]["flags"] == [OUR_FLAG, KARPENTER_FLAG]  # ours first, Karpenter's appended last
    assert spec["cluster"]["name"] == "my-cluster"
    # the judge sees a NodeConfig part it would skip: without ours, only Karpenter's labels
    bare = tmp_path / "without-ours.mime"
    bare.write_text(merged.read_text().replace("Content-Type: application/node.eks.aws\n\n# migbake",
                                               "Content-Type: text/plain\n\n# migbake"))
    assert nodeadm_merged(bare)["spec"]["kubelet"]["flags"] == [KARPENTER_FLAG]


def test_a_bare_cloud_config_would_break_on_karpenter(tmp_path: Path) -> None:
    # why the userData is MIME: Karpenter labels a non-MIME YAML document application/node.eks.aws
    bare = tmp_path / "bare.mime"
    text = (EKS / "generated/cloud-init/user-data").read_text()
    bare.write_text(f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
                    f"Content-Type: application/node.eks.aws\n\n{text}--//\nContent-Type: application/node.eks.aws"
                    f"\n\n{KARPENTER_PART}--//--\n")
    ran = nodeadm("check", bare)
    assert ran.rc == 1 and "Object 'Kind' is missing" in ran.err, ran.text


def test_the_cloud_config_part_passes_cloud_init_and_writes_the_rootfs(tmp_path: Path) -> None:
    """The full form (karpenter.user_data: full, no AMI baked from the profile) installs the rootfs at boot."""
    text = (EKS / "node-profile.yaml").read_text() + "karpenter: {user_data: full}\n"
    full = generate(text, tmp_path / "out", production=True)
    message = email.message_from_string(_nodeclass(full)["spec"]["userData"])
    parts = {p.get_content_type(): p.get_payload() for p in message.get_payload()}
    assert list(parts) == ["text/cloud-config", "application/node.eks.aws"]
    assert all("Content-Transfer-Encoding" not in p for p in message.get_payload())  # Karpenter drops it
    config = tmp_path / "cloud-config"
    config.write_text(parts["text/cloud-config"])
    ran = cloud_init_schema(config)
    assert ran.rc == 0, ran.text
    assert cloud_init_unknown_keys(config) == []
    written = {f["path"]: (f["permissions"], gzip.decompress(base64.b64decode(f["content"])))
               for f in yaml.safe_load(parts["text/cloud-config"])["write_files"]}
    rootfs = full / "rootfs"
    assert written == {"/" + str(p.relative_to(rootfs)): (f"{p.stat().st_mode & 0o777:04o}", p.read_bytes())
                       for p in sorted(rootfs.rglob("*")) if p.is_file()}
    commands = yaml.safe_load(parts["text/cloud-config"])["runcmd"]
    assert ["systemctl", "enable", "nvidia-mig-restore.service"] in commands


@pytest.mark.parametrize("layout", ["kubeadm", "eks-al2"])
def test_only_eks_al2023_gets_an_ec2nodeclass(tmp_path: Path, layout: str) -> None:
    text = (EKS / "node-profile.yaml").read_text().replace("layout: eks-al2023", f"layout: {layout}")
    out = generate(text, tmp_path / "o")
    assert not (out / "karpenter").exists()


@pytest.mark.parametrize("text", ["--//\nx: 1\n", "a: 1\n--//\n", "a: 1\n--// trailing\n", "a: 1\r\nb: 2\n"],
                         ids=["first-line", "a-line", "a-line-with-more", "carriage-return"])
def test_a_part_line_that_would_end_it_is_refused(text: str) -> None:
    """A line of a part that Karpenter's boundary (``--//``) starts, or a carriage return (Karpenter removes them),
    would end or change the part in the userData Karpenter writes: a RenderError naming the line."""
    with pytest.raises(RenderError, match="would end it in Karpenter's userData"):
        user_data([("text/cloud-config", text)])


@pytest.mark.parametrize("text", ["a: 1\n- --//\n", "a: '--//'\n", "--\n", "x: 1\n---\ny: 2\n"])
def test_a_part_line_that_does_not_start_with_a_boundary_is_kept(text: str) -> None:
    assert text.rstrip("\n") in user_data([("text/cloud-config", text)])


@pytest.mark.parametrize("part", [("text/cloud-config", "a: 1\x1b\n"), ("application/node.eks.aws", "a: '\x00'\n"),
                                  ('text/cloud-config"; x="y', "a: 1\n")], ids=["escape", "nul", "quote-in-type"])
def test_a_part_the_guard_refuses_stops_the_userdata(part: tuple[str, str]) -> None:
    """The MIME document is written by hand (Karpenter's merge rules): each part's type and text pass the guard."""
    with pytest.raises(RenderError, match=r"cannot be printed in|cannot hold a quote"):
        user_data([part])


def _parts(folder: Path) -> list[str]:
    doc = yaml.safe_load((folder / "karpenter/ec2nodeclass.yaml").read_text())
    return [p.get_content_type() for p in email.message_from_string(doc["spec"]["userData"]).walk()
            if not p.is_multipart()]


@pytest.mark.parametrize("form", ["", "karpenter: {user_data: nodeconfig}\n"], ids=["default", "nodeconfig"])
def test_the_baked_ami_form_carries_only_the_labels_and_fits(tmp_path: Path, form: str) -> None:
    """images/h100-h200-inference as an EKS AL2023 node (two models, two layouts): the EC2NodeClass that launches the
    AMI baked from it needs only the NodeConfig part (the files are in the image), far below EC2's 16 KB."""
    from migbake.render.rendered_limits import user_data_bytes
    from migbake.render.write import Artifact

    text = (IMAGES_DIR / "h100-h200-inference/node-profile.yaml").read_text().replace(
        "layout: kubeadm", "layout: eks-al2023") + form
    out = generate(text, tmp_path / "out")
    assert _parts(out) == ["application/node.eks.aws"]
    data = (out / "karpenter/ec2nodeclass.yaml").read_bytes()
    size = user_data_bytes([Artifact("karpenter/ec2nodeclass.yaml", data, 0o644)])
    assert size is not None and size < 16384 * 9 // 10, size


def test_the_full_form_carries_the_restore_too(tmp_path: Path) -> None:
    text = (IMAGES_DIR / "h200-inference/node-profile.yaml").read_text().replace(
        "layout: kubeadm", "layout: eks-al2023") + "karpenter: {user_data: full}\n"
    out = generate(text, tmp_path / "out")
    assert _parts(out) == ["text/cloud-config", "application/node.eks.aws"]
