"""What an on-prem fleet (PXE, Slurm, kubeadm) sees: EC2's user-data size warning (``ec2-user-data-size``) only
where the profile or the options say EC2, named, and set aside by ``validation.ignore``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import IMAGES, cli

from migbake.render import mime_parts

ON_PREM = next(p for p in IMAGES if p.name == "a100-80gb-mixed") / "node-profile.yaml"  # kubeadm, no outputs:
SLURM = next(p for p in IMAGES if p.name == "h100-slurm") / "node-profile.yaml"  # generic, kubelet absent
EKS = next(p for p in IMAGES if p.name == "h200-inference") / "node-profile.yaml"  # kubelet.layout eks-al2023
RULE = "[ec2-user-data-size]"


@pytest.mark.parametrize("profile", [ON_PREM, SLURM], ids=["kubeadm", "slurm"])
def test_an_on_prem_profile_gets_no_ec2_warning(profile: Path, tmp_path: Path) -> None:
    code, _, err = cli("generate", str(profile), "-o", str(tmp_path / "out"))
    assert code == 0 and err == "", err
    assert (tmp_path / "out/cloud-init/user-data").stat().st_size > mime_parts.EC2_USER_DATA_LIMIT  # it would be


def test_what_says_ec2_is_named(tmp_path: Path) -> None:
    code, _, err = cli("generate", str(EKS), "-o", str(tmp_path / "a"))
    assert code == 0 and f"{EKS}:17:11: warning: /kubelet/layout: cloud-init/user-data is " in err, err
    assert "(kubelet.layout eks-al2023 is an EKS node on EC2;" in err and err.rstrip().endswith(RULE)

    karpenter = tmp_path / "karpenter.yaml"
    outputs = "outputs: [rootfs, cloud-init, karpenter]\n"
    karpenter.write_text(ON_PREM.read_text().replace("kubelet:\n", f"{outputs}kubelet:\n", 1))
    code, _, err = cli("generate", str(karpenter), "-o", str(tmp_path / "b"))
    assert code == 0 and "warning: /outputs/2: " in err and "(outputs names karpenter, for EC2 nodes;" in err, err

    code, _, err = cli("generate", str(ON_PREM), "-o", str(tmp_path / "c"), "--outputs", "cloud-init,karpenter")
    assert code == 0 and "(--outputs names karpenter, for EC2 nodes;" in err, err


def test_the_gzip_option_says_ec2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mime_parts, "EC2_USER_DATA_LIMIT", 3000)  # gzipped, the user-data is some 6 KB
    code, _, err = cli("generate", str(SLURM), "-o", str(tmp_path / "out"), "--user-data-gzip")
    assert code == 0 and "cloud-init/user-data.gz is " in err and "even gzipped" in err, err
    assert "(--user-data-gzip was given, for EC2's limit;" in err and RULE in err


def test_a_nodeconfig_part_says_ec2(tmp_path: Path) -> None:
    part = tmp_path / "nodeconfig.yaml"
    part.write_text("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n")
    code, _, err = cli("generate", str(ON_PREM), "-o", str(tmp_path / "out"), "--user-data-mime", str(part))
    assert code == 0 and "cloud-init/user-data.mime is " in err and "application/node.eks.aws part" in err, err
    shell = tmp_path / "part.sh"
    shell.write_text("#!/bin/sh\necho hi\n")
    code, _, err = cli("generate", str(ON_PREM), "-o", str(tmp_path / "sh"), "--user-data-mime", str(shell))
    assert code == 0 and err == "", err  # a shell part alone says nothing about EC2


def test_validation_ignore_sets_the_ec2_warning_aside(tmp_path: Path) -> None:
    profile = tmp_path / "node.yaml"
    profile.write_text(EKS.read_text() + "validation:\n  ignore:\n    - {rule: ec2-user-data-size, reason: served by "
                       "PXE}\n")
    code, _, err = cli("generate", str(profile), "-o", str(tmp_path / "out"))
    assert code == 0 and "warning:" not in err, err
    assert f"{profile}:17:11: ignored: /kubelet/layout: cloud-init/user-data is " in err
    assert err.rstrip().endswith(f"{RULE} (validation.ignore: served by PXE)"), err
    code, out, _ = cli("validate", str(profile))  # the entry names a rule migbake reports: no ignore-unknown-rule
    assert code == 0 and "ignore-unknown-rule" not in out and "warning" not in out, out
