"""Karpenter's userData over EC2's 16 KB: a warning, and an error (nothing written) when the profile asks for the
Karpenter output by name in outputs:, as every launch of that EC2NodeClass would fail."""

from __future__ import annotations

from pathlib import Path

from support import TESTS, cli

BIG = (TESTS / "cases/warning/karpenter-user-data-size/node-profile.yaml").read_text()


def test_asked_for_by_name_it_is_an_error(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(BIG + "outputs: [rootfs, cloud-init, karpenter]\n")
    out = tmp_path / "out"
    code, _, err = cli("generate", str(profile), "-o", str(out))
    assert code == 1 and ": error: /consumers: " in err and "[karpenter-user-data-limit]" in err, err
    assert not out.exists()
    code, report, _ = cli("validate", str(profile))  # validate refuses it first, located
    assert code == 1 and ": error: /consumers: " in report and "[karpenter-user-data-limit]" in report, report


def test_otherwise_a_warning(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(BIG)
    code, _, err = cli("generate", str(profile), "-o", str(tmp_path / "out"))
    assert code == 0 and "[karpenter-user-data-size]" in err and "karpenter-user-data-limit" not in err, err
    assert cli("validate", str(profile))[0] == 0
