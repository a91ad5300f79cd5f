"""A mistyped key, enum value, command or output folder: "did you mean" the nearest allowed name, when one is near
(difflib.get_close_matches)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import IMAGES, cli

ON_PREM = next(p for p in IMAGES if p.name == "a100-80gb-mixed") / "node-profile.yaml"


PROFILE = "version: 1\nname: x\ngpus:\n  - model: h200-141gb\n    mig:\n      layout: {{1g.18gb: 7}}\n{rest}"
LAYOUTS = ("version: 1\nname: x\ngpus:\n  - model: h200-141gb\n    mig:\n      layouts:\n        a: {{1g.18gb: 7}}\n"
           "{rest}")


@pytest.mark.parametrize(("text", "says"), [
    # enum values
    (PROFILE.format(rest="kubelet: {layout: kubadm}\n"), "/kubelet/layout: 'kubadm' is not allowed here; expected "
     '"generic", "kubeadm", "eks-al2023", "eks-al2"; did you mean \'kubeadm\'? [schema-enum]'),
    (PROFILE.format(rest="kubelet: {layout: EKS-AL2023}\n"), "did you mean 'eks-al2023'? [schema-enum]"),
    (LAYOUTS.format(rest="restore:\n  layout: {from: [kubelet-label]}\n"),
     "/restore/layout/from/0: 'kubelet-label' is not allowed here; expected \"file\", \"kubelet-labels\", "
     "\"credential\", \"gce-metadata\", \"ec2-tag\"; did you mean 'kubelet-labels'? [schema-enum]"),
    (LAYOUTS.format(rest="restore:\n  layout: {from: [credentials]}\n"), "did you mean 'credential'? [schema-enum]"),
    (PROFILE.format(rest="restore: {on_failure: block-kubelets}\n"), "did you mean 'block-kubelet'? [schema-enum]"),
    (PROFILE.format(rest="outputs: [cloudinit]\n"), "/outputs/0: 'cloudinit' is not allowed here; expected "),
    (PROFILE.format(rest="outputs: [cloudinit]\n"), "did you mean 'cloud-init'? [schema-enum]"),
    # keys
    (PROFILE.format(rest="kubelet: {layuot: kubeadm}\n"), "unknown key 'layuot'; did you mean 'layout'?"),
    (PROFILE.format(rest="consumer: []\n"), "unknown key 'consumer'; did you mean 'consumers'?"),
    (PROFILE.format(rest="restore: {timeout_second: 60}\n"), "did you mean 'timeout_seconds'?"),
])
def test_did_you_mean(text: str, says: str) -> None:
    code, out, _ = cli("validate", "-", stdin=text)
    assert code == 1 and says in out, out


def test_nothing_near_suggests_nothing() -> None:
    code, out, _ = cli("validate", "-", stdin=PROFILE.format(rest="kubelet: {layout: systemd}\n"))
    assert code == 1 and "'systemd' is not allowed here" in out and "did you mean" not in out, out


@pytest.mark.parametrize(("typed", "meant"), [("validat", "validate"), ("genrate", "generate"), ("laouts", "layouts"),
                                              ("shwo", "show")])
def test_an_unknown_command_names_the_nearest(typed: str, meant: str) -> None:
    code, _, err = cli(typed, "x")
    assert code == 2 and f"migbake: error: No such command {typed!r}; did you mean {meant!r}?" in err, err


def test_an_unknown_command_far_from_all_is_click_s_message() -> None:
    code, _, err = cli("frobnicate")
    assert code == 2 and "No such command 'frobnicate'." in err and "did you mean" not in err, err


def test_an_unknown_output_folder_names_the_nearest(tmp_path: Path) -> None:
    code, _, err = cli("generate", str(ON_PREM), "-o", str(tmp_path / "o"), "--outputs", "rotfs")
    assert code == 2 and "'rotfs': no such output (did you mean 'rootfs'?); allowed: rootfs," in err, err
