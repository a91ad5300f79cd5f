"""Whatever ``generate`` refuses, ``validate`` refuses first, located, and only for the outputs the profile asks
for: a profile that validates generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO, cli

KUBEADM = """\
version: 1
name: kadm
gpus:
  - model: h100-80gb
    mig:
      layouts:
        infer: {{1g.10gb: 7}}
        train: {{7g.80gb: 1}}
kubelet:
  layout: kubeadm
restore:
  layout: {{from: {sources}{key}}}
{outputs}"""
SOURCES = {"file": ["file"], "gce-metadata": ["file", "gce-metadata"], "ec2-tag": ["file", "ec2-tag"],
           "credential": ["file", "credential"]}
OUTPUTS = {"all": "", "with-cluster-api": "outputs: [rootfs, cluster-api]\n",
           "without-cluster-api": "outputs: [rootfs, cloud-init, packer]\n"}


@pytest.mark.parametrize("outputs", OUTPUTS, ids=list(OUTPUTS))
@pytest.mark.parametrize("sources", SOURCES, ids=list(SOURCES))
def test_a_kubeadm_profile_validates_only_if_it_generates(tmp_path: Path, sources: str, outputs: str) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(KUBEADM.format(sources=json.dumps(SOURCES[sources]), outputs=OUTPUTS[outputs],
                                      key=", ec2_tag_key: mig-layout" if sources == "ec2-tag" else ""))
    valid, out, err = cli("validate", str(profile))
    generated, _, gen_err = cli("generate", str(profile), "-o", str(tmp_path / "out"))
    assert (valid == 0) == (generated == 0), (out, err, gen_err)
    if valid:  # refused located, at the source that makes restore.sh too large
        assert "/restore/layout/from/1:" in out and "[cluster-api-network-source]" in out, out
        assert "Traceback" not in gen_err and "[cluster-api-network-source]" in gen_err, gen_err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from("\ufeff\ufffe\u2028\u202e\x85\u200b\\'#: ")),
               max_size=30))
def test_a_description_that_validates_generates(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    tmp = tmp_path_factory.mktemp("d")
    base = (REPO / "images/h200-inference/node-profile.yaml").read_text()
    profile = tmp / "p.yaml"
    lines = [ln for ln in base.splitlines() if not ln.startswith("description:")]
    profile.write_text("\n".join([*lines[:1], f"description: {json.dumps(text, ensure_ascii=False)}", *lines[1:]])
                       + "\n")
    valid, out, err = cli("validate", str(profile))
    if valid != 0:
        assert valid == 1 and ":2:" in out, out + err  # refused, located at the description's line
        return
    generated, _, gen_err = cli("generate", str(profile), "-o", str(tmp / "out"), "--outputs", "rootfs")
    assert generated == 0, gen_err


def test_a_byte_order_mark_in_the_description_is_refused_by_validate(tmp_path: Path) -> None:
    base = (REPO / "images/h200-inference/node-profile.yaml").read_text()
    profile = tmp_path / "p.yaml"
    profile.write_text("\n".join('description: "a\\ufeffb"' if ln.startswith("description:") else ln
                                 for ln in base.splitlines()) + "\n")
    code, out, _ = cli("validate", str(profile))
    assert code == 1 and "/description:" in out and "[schema-pattern]" in out, out
