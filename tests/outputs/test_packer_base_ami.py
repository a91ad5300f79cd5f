"""The Packer base AMI follows ``kubelet.layout``: the EKS AL2023 NVIDIA AMI of the cluster's
Kubernetes version and architecture for eks-al2023 (both Packer variables), the last EKS AL2 GPU AMIs for
eks-al2, the user's own AMI for every other layout; ``migbake bake`` refuses amazon-ebs.golden until the
variable that picks it is given. Packer itself (``packer console``/``validate``) evaluates the templates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realtools import packer, packer_console, require
from support import IMAGES, cli, generate

PROFILE = """version: 1
name: ami-{layout}
gpus:
  - model: h200-141gb
    mig:
      layout:
        1g.18gb: 7
kubelet:
  layout: {layout}
kubernetes:
  node_labels:
    nvidia.com/gpu.deploy.mig-manager: "false"
"""


def _packer_dir(tmp_path: Path, layout: str) -> Path:
    text = PROFILE.format(layout=layout)
    if layout == "generic":
        text += "  kubelet_args_env: MIGBAKE_LABELS\n"
    return generate(text, tmp_path / layout) / "packer"


def _name(pk: Path, *variables: str) -> str:
    """The AMI name filter amazon-ebs.golden uses, as Packer evaluates it with ``variables``."""
    require("packer")
    folder = pk.parent / "console"
    if not folder.exists():
        folder.mkdir()
        for f in ("variables.pkr.hcl", "sources.pkr.hcl"):
            (folder / f).write_text((pk / f).read_text())
    if variables:
        (folder / "given.auto.pkrvars.hcl").write_text("".join(f"{v}\n" for v in variables))
    elif (folder / "given.auto.pkrvars.hcl").exists():
        (folder / "given.auto.pkrvars.hcl").unlink()
    return packer_console(folder, "local.source_ami_name")


def test_eks_al2023_takes_the_al2023_nvidia_ami_of_the_version_and_architecture(tmp_path: Path) -> None:
    pk = _packer_dir(tmp_path, "eks-al2023")
    # awslabs/amazon-eks-ami:CHANGELOG.md@v20260724 names them amazon-eks-node-al2023-<arch>-nvidia-<k8s>-v<date>
    assert _name(pk, 'kubernetes_version = "1.35"') == "amazon-eks-node-al2023-x86_64-nvidia-1.35-v*"
    assert _name(pk, 'kubernetes_version = "1.36"', 'aws_architecture = "arm64"') == \
        "amazon-eks-node-al2023-arm64-nvidia-1.36-v*"
    assert _name(pk, 'kubernetes_version = "1.35"', 'source_ami_name_filter = "my-base-*"') == "my-base-*"
    text = "".join(p.read_text() for p in pk.glob("*.pkr.hcl"))
    assert "amazon-eks-gpu-node" not in text and "1.31" not in text  # the AL2 series, with its pinned version
    assert _name(pk) == "amazon-eks-node-al2023-x86_64-nvidia--v*"  # no version guessed: bake asks for it


def test_an_architecture_the_ami_series_lacks_is_refused_by_packer(tmp_path: Path) -> None:
    pk = _packer_dir(tmp_path, "eks-al2023")
    ran = packer(["validate", "-only=amazon-ebs.golden", "-var=kubernetes_version=1.35", str(pk)])
    assert ran.rc == 0, ran.text
    ran = packer(["validate", "-only=amazon-ebs.golden", "-var=kubernetes_version=1.35",
                  "-var=aws_architecture=i386", str(pk)])
    assert ran.rc == 1 and "must be x86_64 or arm64" in ran.text, ran.text


def test_eks_al2_takes_the_last_al2_gpu_amis(tmp_path: Path) -> None:
    pk = _packer_dir(tmp_path, "eks-al2")
    assert _name(pk, 'kubernetes_version = "1.32"') == "amazon-eks-gpu-node-1.32-v*"
    assert "November 26, 2025" in (pk / "variables.pkr.hcl").read_text()


@pytest.mark.parametrize("layout", ["kubeadm", "generic"])
def test_other_layouts_bake_from_the_users_own_ami(tmp_path: Path, layout: str) -> None:
    pk = _packer_dir(tmp_path, layout)
    assert _name(pk) == ""
    assert _name(pk, 'source_ami_name_filter = "my-gpu-base-*"') == "my-gpu-base-*"
    assert "kubernetes_version" not in (pk / "variables.pkr.hcl").read_text()


@pytest.mark.parametrize(("image", "needs"), [
    ("h200-inference", "--var kubernetes_version=... or --var source_ami_name_filter=..."),  # eks-al2023
    ("a100-80gb-mixed", "--var source_ami_name_filter=..."),  # kubeadm
])
def test_bake_names_the_variable_that_picks_the_base_ami(tmp_path: Path, image: str, needs: str) -> None:
    folder = next(i for i in IMAGES if i.name == image)
    code, out, err = cli("bake", str(folder), "-o", str(tmp_path / "o"), "--only", "amazon-ebs.golden", "--dry-run")
    assert code == 2 and f"amazon-ebs.golden needs {needs}" in err and out == "", out + err
    assert cli("bake", str(folder), "-o", str(tmp_path / "o"), "--only", "null.ssh", "--dry-run",
               "--var", "ssh_host=192.0.2.1")[0] == 0  # the other sources need no AMI
    require("packer")
    given = "kubernetes_version=1.35" if "kubernetes_version" in needs else "source_ami_name_filter=my-base-*"
    code, out, err = cli("bake", str(folder), "-o", str(tmp_path / "o"), "--only", "amazon-ebs.golden",
                         "--dry-run", "--var", given)
    assert code == 0 and out.rstrip().endswith("packer validate passed"), out + err
