"""The DRA claims (issue 33) over recorded guest evidence (no VM, no root): the GPUs when kubelet started.

``placements-at-kubelet`` (allocation ``dra``) and ``dynamic-at-kubelet`` (``dra-dynamic``) read the report's
``simgpu-kubelet-state`` section, which the fake kubelet's drop-in writes when it starts. The recordings of
data/ampere-pending and data/cdi (NVIDIA's mig-parted over the simulated GPU) predate that section, so it
is made here from the simulated GPUs those runs recorded when nothing changed any more before kubelet: the
report's ``simgpu-state`` (the layout NVIDIA's mig-parted placed: A100 3g.40gb@4, 2g.20gb@0, 1g.10gb@2, @3) and
``simgpu-boot-state`` (Hopper at boot: MIG off; Ampere after the reboot-once: MIG on, no instance). The
recordings of tests/vm/test_boot_reset.py's DRA variants replace them once a VM run has recorded them.
Each claim passes on that evidence and FAILS on a doctored copy where what it guards went wrong.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from test_boot_reset import dra_variant
from vm_support import REPO

from migbake.boottest.guestreport import GuestReport, parse_report
from migbake.boottest.scenarios.claims import BootContext, Claim
from migbake.boottest.scenarios.dra_claims import SECTION, dra_claims, kubelet_gpus
from migbake.boottest.scenarios.node import promises_of
from migbake.boottest.scenarios.scenario import GPU_STATE_AT_KUBELET, GPU_STATE_DROP_IN_TEXT, GUEST
from migbake.boottest.simgpu.node import node_for_profile
from migbake.rules.validate import check_bytes

DATA = Path(__file__).parent / "data"


def report(name: str, state_from: str, edit: tuple[str, str] = ("", "")) -> GuestReport:
    """A recorded report with a kubelet-state section made of its ``state_from`` section's GPU lines."""
    text = (DATA / name).read_text()
    parsed = parse_report(text)
    lines = "\n".join(line for line in parsed.section(state_from) if line.startswith("gpu "))
    lines = lines.replace(*edit) if edit[0] else lines
    return parse_report(text.replace("=== end", f"=== {SECTION}\n{lines}\n=== end"))


def node(image: str, allocation: str) -> tuple[BootContext, str]:
    """The boot context of ``image``'s variant under ``allocation`` (the profile the VM test boots)."""
    text = dra_variant(image, allocation)
    checked = check_bytes(text.encode(), "node-profile.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    sim = node_for_profile(checked.profile)
    generation = "ampere" if sim.model.mig_mode_persists else "hopper"
    ctx = BootContext("packer", "cdi", generation, 1, "", expected=sim.gpus,  # type: ignore[arg-type]
                      allocation=promises_of(checked.profile).allocation)
    return ctx, text


def one(claims: list[Claim]) -> Claim:
    assert len(claims) == 1, claims
    return claims[0]


A100_REPORT = "ampere-pending/report-2.txt"
H200_REPORT = "cdi/report-1.txt"


def test_the_plan_of_a_dra_variant_is_what_nvidias_mig_parted_placed() -> None:
    ctx, _ = node("a100-80gb-mixed", "dra")
    assert ctx.expected is not None and ctx.expected[0].placements == (
        "1g.10gb@2", "1g.10gb@3", "2g.20gb@0", "3g.40gb@4")
    claim = one(dra_claims(report(A100_REPORT, "simgpu-state"), ctx))
    assert (claim.id, claim.passed) == ("placements-at-kubelet", True), claim
    assert len(kubelet_gpus(report(A100_REPORT, "simgpu-state"))) == 8


@pytest.mark.parametrize(("edit", "words"), [
    (("2g.20gb@0,3g.40gb@4", "2g.20gb@4,3g.40gb@0"), "GPU 0: MIG on, instances 1g.10gb@2,1g.10gb@3,2g.20gb@4,"
                                                      "3g.40gb@0, the plan has MIG on, instances 1g.10gb@2,"),
    (("1g.10gb@2,1g.10gb@3\n", "1g.10gb@2\n"), "GPU 0: MIG on, instances 1g.10gb@2,2g.20gb@0,3g.40gb@4, the plan"),
    (("gpu 7 ", "gpu 9 "), "GPU 7: not recorded"),
], ids=["moved", "partial", "missing-gpu"])
def test_placements_at_kubelet_fails_where_the_gpus_differ(edit: tuple[str, str], words: str) -> None:
    ctx, _ = node("a100-80gb-mixed", "dra")
    claim = one(dra_claims(report(A100_REPORT, "simgpu-state", edit), ctx))
    assert not claim.passed and words in claim.evidence, claim
    assert "unexpected GPU 9" in claim.evidence or edit[0] != "gpu 7 "


def test_placements_at_kubelet_fails_without_the_record() -> None:
    """No kubelet start recorded (or a guest without the drop-in): the claim fails, it is never skipped."""
    ctx, _ = node("a100-80gb-mixed", "dra")
    claim = one(dra_claims(parse_report((DATA / A100_REPORT).read_text()), ctx))
    assert not claim.passed and "nothing recorded (kubelet did not start?)" in claim.evidence


@pytest.mark.parametrize(("image", "name", "state_from"), [
    ("a100-80gb-mixed", A100_REPORT, "simgpu-boot-state"), ("h200-inference", H200_REPORT, "simgpu-boot-state")],
    ids=["ampere-mig-on", "hopper-mig-off"])
def test_dynamic_at_kubelet_holds_on_the_recorded_states(image: str, name: str, state_from: str) -> None:
    ctx, text = node(image, "dra-dynamic")
    assert "mig:" not in text and ctx.expected is not None
    assert {g.mig_enabled for g in ctx.expected} == {ctx.generation == "ampere"}  # the mode per architecture
    claim = one(dra_claims(report(name, state_from), ctx))
    assert (claim.id, claim.passed) == ("dynamic-at-kubelet", True), claim


@pytest.mark.parametrize(("image", "name", "state_from", "edit", "words"), [
    ("a100-80gb-mixed", A100_REPORT, "simgpu-boot-state", (" mig 1 pending 1 ", " mig 0 pending 1 "),
     "GPU 0: MIG off, instances none, want MIG on, instances none"),
    ("a100-80gb-mixed", A100_REPORT, "simgpu-state", ("", ""), "GPU 0: MIG on, instances 1g.10gb@2,"),
    ("h200-inference", H200_REPORT, "simgpu-state", ("", ""), "GPU 0: MIG on, instances 1g.18gb@0,"),
], ids=["ampere-mode-still-pending", "ampere-instances", "hopper-instances"])
def test_dynamic_at_kubelet_fails_on_instances_or_the_wrong_mode(image: str, name: str, state_from: str,
                                                                 edit: tuple[str, str], words: str) -> None:
    ctx, _ = node(image, "dra-dynamic")
    claim = one(dra_claims(report(name, state_from, edit), ctx))
    assert not claim.passed and words in claim.evidence, claim


def test_no_dra_claim_for_the_device_plugin_or_a_report_cut_off() -> None:
    ctx, _ = node("a100-80gb-mixed", "dra")
    assert dra_claims(report(A100_REPORT, "simgpu-state"), replace(ctx, allocation="device-plugin")) == []
    assert dra_claims(None, ctx) == [] and dra_claims(parse_report("=== stub-log\n"), ctx) == []
    device_plugin = check_bytes((REPO / "images/a100-80gb-mixed/node-profile.yaml").read_bytes(), "p.yaml").profile
    assert device_plugin is not None
    assert promises_of(device_plugin).allocation == "device-plugin"
    assert all(g.placements == () for g in node_for_profile(device_plugin).gpus)


def test_the_guest_records_the_gpus_at_kubelets_first_start() -> None:
    """The drop-in writes the state once per boot (/run), and the report copies it into its section."""
    assert GPU_STATE_AT_KUBELET.startswith("/run/")
    assert f"[ -e {GPU_STATE_AT_KUBELET} ] ||" in GPU_STATE_DROP_IN_TEXT and "ExecStartPre=-" in GPU_STATE_DROP_IN_TEXT
    test_report = (GUEST / "test-report").read_text()
    assert f'echo "=== {SECTION}"\n    cat {GPU_STATE_AT_KUBELET}' in test_report
