"""``--user-data-mime`` with an EKS NodeConfig, judged by AWS's own nodeadm (``config check`` and
``config dump``, ../shared/tools/nodeadm/): a NodeConfig part is ``application/node.eks.aws`` (named as a
media type or told by its content), and for ``kubelet.layout: eks-al2023`` migbake's labels travel as a
NodeConfig part too, so the merged config has the user's settings and the profile's labels. Plain and
gzipped (gunzipped first, as the node's IMDS source does).
"""

from __future__ import annotations

import email
import gzip
from pathlib import Path

import pytest
from realtools import NODECONFIG_CLUSTER, nodeadm, nodeadm_merged
from support import IMAGES, cli

EKS = next(i for i in IMAGES if i.name == "h200-inference") / "node-profile.yaml"  # eks-al2023
KUBEADM = next(i for i in IMAGES if i.name == "a100-80gb-mixed") / "node-profile.yaml"
OUR_FLAG = "--node-labels=nvidia.com/gpu.deploy.mig-manager=false"  # h200-inference's kubernetes.node_labels
CLUSTER = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" + NODECONFIG_CLUSTER
USERS = CLUSTER + """  kubelet:
    config:
      maxPods: 17
    flags:
      - --node-labels=team=ml
"""


def _mime(tmp_path: Path, profile: Path, part: str, arg_suffix: str = "", *, gz: bool = False) -> Path:
    src = tmp_path / "part.yaml"
    src.write_text(part)
    out = tmp_path / "out"
    args = ["generate", str(profile), "-o", str(out), "--user-data-mime", f"{src}{arg_suffix}"]
    code, _, err = cli(*args, *(["--user-data-gzip"] if gz else []))
    assert code == 0, err
    if not gz:
        return out / "cloud-init/user-data.mime"
    plain = tmp_path / "gunzipped.mime"  # nodeadm's file:// source reads bytes as they are (README)
    plain.write_bytes(gzip.decompress((out / "cloud-init/user-data.mime.gz").read_bytes()))
    return plain


def _types(path: Path) -> list[str]:
    return [p.get_content_type() for p in email.message_from_string(path.read_text()).get_payload()]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("suffix", ["", ":application/node.eks.aws"], ids=["by-content", "media-type"])
def test_a_users_nodeconfig_and_our_labels_merge_in_nodeadm(tmp_path: Path, suffix: str, gz: bool) -> None:
    mime = _mime(tmp_path, EKS, USERS, suffix, gz=gz)
    assert _types(mime) == ["application/node.eks.aws", "application/node.eks.aws", "text/cloud-config"]
    ran = nodeadm("check", mime)
    assert ran.rc == 0 and "Configuration is valid" in ran.err, ran.text
    spec = nodeadm_merged(mime)["spec"]  # check is lenient: what nodeadm took, field by field
    assert spec["cluster"]["name"] == "my-cluster" and spec["kubelet"]["config"] == {"maxPods": 17}
    assert spec["kubelet"]["flags"] == ["--node-labels=team=ml", OUR_FLAG]  # the user's, then the profile's


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_without_a_users_nodeconfig_the_labels_still_reach_nodeadm(tmp_path: Path, gz: bool) -> None:
    mime = _mime(tmp_path, EKS, "#!/bin/bash\necho hello\n", gz=gz)
    assert _types(mime) == ["text/x-shellscript", "application/node.eks.aws", "text/cloud-config"]
    assert nodeadm_merged(mime)["spec"]["kubelet"] == {"flags": [OUR_FLAG]}
    ran = nodeadm("check", mime)  # the cluster comes from elsewhere (EKS's own part, a drop-in)
    assert ran.rc == 1 and "Name is missing in cluster configuration" in ran.err, ran.text
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    ran = nodeadm("check", mime, cluster)
    assert ran.rc == 0 and "Configuration is valid" in ran.err, ran.text
    assert nodeadm_merged(mime, cluster)["spec"]["kubelet"]["flags"] == [OUR_FLAG]


def test_the_judge_misses_a_nodeconfig_of_another_type(tmp_path: Path) -> None:
    # what `FILE:node.eks.aws` wrote before (text/node.eks.aws): nodeadm skips the part without a word
    mime = _mime(tmp_path, KUBEADM, USERS)
    assert nodeadm("check", mime).rc == 0
    mime.write_text(mime.read_text().replace("Content-Type: application/node.eks.aws",
                                             "Content-Type: text/node.eks.aws"))
    ran = nodeadm("check", mime)
    assert ran.rc == 1 and "could not find NodeConfig within UserData" in ran.err, ran.text


def test_a_kubeadm_profile_adds_no_nodeconfig(tmp_path: Path) -> None:
    mime = _mime(tmp_path, KUBEADM, USERS)
    assert _types(mime) == ["application/node.eks.aws", "text/cloud-config"]
    assert nodeadm_merged(mime)["spec"]["kubelet"]["flags"] == ["--node-labels=team=ml"]


@pytest.mark.parametrize(("part", "suffix", "message"), [
    (USERS, ":node.eks.aws", "nodeadm reads a NodeConfig part only as application/node.eks.aws"),
    (USERS.replace("v1alpha1", "v1beta1"), "", "node.eks.aws/v1beta1 NodeConfig is not a NodeConfig nodeadm reads"),
    ("just: yaml\n", "", "cannot tell its part type from its first line or content"),
    (USERS, ":application/", "is neither a MIME subtype"),
    (USERS, ":application/x;y=z", "is neither a MIME subtype"),
])
def test_parts_nodeadm_would_not_read_are_refused(tmp_path: Path, part: str, suffix: str, message: str) -> None:
    src = tmp_path / "part.yaml"
    src.write_text(part)
    code, _, err = cli("generate", str(EKS), "-o", str(tmp_path / "o"), "--user-data-mime", f"{src}{suffix}")
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_check_with_the_same_part_and_media_type(tmp_path: Path) -> None:
    mime = _mime(tmp_path, EKS, USERS, ":application/node.eks.aws")
    part = f"{tmp_path / 'part.yaml'}:application/node.eks.aws"  # given again: a marker names no file to read
    code, out, err = cli("generate", str(EKS), "-o", str(mime.parents[1]), "--check", "--user-data-mime", part)
    assert code == 0 and "up to date" in out, out + err
