"""The DRA claims over recorded guest evidence (no VM, no root): the GPUs when kubelet started.

``placements-at-kubelet`` (allocation ``dra``) and ``dynamic-at-kubelet`` (``dra-dynamic``) read the report's
``simgpu-kubelet-state`` section, which the fake kubelet's drop-in writes when it starts. data/dra holds the
reports of tests/vm/test_boot_reset.py's DRA variants (NVIDIA's mig-parted over the simulated GPU, 2026-12-02):
``h200-dra-report-1.txt`` (cdi by Packer, 8x H200 under dra: 3g.71gb@4, 2g.35gb@0, 1g.18gb@2, @3),
``h200-dynamic-*`` (cdi by cloud-init under dra-dynamic: MIG off) and ``a100-dynamic-report-2.txt``
(ampere-pending, 2x A100 under dra-dynamic, the boot after the reboot: MIG on, no instance). The 8x A100
layout of data/ampere-pending (recorded before the section existed) is checked too, with the section made
of its report's ``simgpu-state``: NVIDIA's mig-parted placed 3g.40gb@4, 2g.20gb@0, 1g.10gb@2, @3, the plan's
prediction. Each claim passes on the recording and FAILS on a doctored copy where what it guards went wrong.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from test_boot_reset import dra_variant
from vm_support import REPO

from migbake.rules.validate import check_bytes
from migbake_boottest.guestreport import GuestReport, parse_report
from migbake_boottest.scenarios.claims import BootContext, Claim
from migbake_boottest.scenarios.dra_claims import SECTION, dra_claims, kubelet_gpus
from migbake_boottest.scenarios.node import promises_of
from migbake_boottest.scenarios.reset_claims import Evidence, boot_claims
from migbake_boottest.scenarios.scenario import GPU_STATE_AT_KUBELET, GPU_STATE_DROP_IN_TEXT, GUEST
from migbake_boottest.simgpu.node import node_for_profile

DATA = Path(__file__).parent / "data"


def report(name: str, state_from: str = SECTION, edit: tuple[str, str] = ("", "")) -> GuestReport:
    """A recorded report; its kubelet-state section made of its ``state_from`` section's GPU lines, edited."""
    text = (DATA / name).read_text()
    parsed = parse_report(text)
    lines = "\n".join(line for line in parsed.section(state_from) if line.startswith("gpu "))
    lines = lines.replace(*edit) if edit[0] else lines
    if SECTION in text:
        start = text.index(f"=== {SECTION}\n")
        end = text.index("\n=== ", start + 4)
        return parse_report(f"{text[:start]}=== {SECTION}\n{lines}{text[end:]}")
    return parse_report(text.replace("=== end", f"=== {SECTION}\n{lines}\n=== end"))


def node(image: str, allocation: str, gpus: int | None = None) -> tuple[BootContext, str]:
    """The boot context of ``image``'s variant under ``allocation`` (the profile the VM test boots)."""
    text = dra_variant(image, allocation, gpus)
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


A100_REPORT = "ampere-pending/report-2.txt"  # 8x A100, device-plugin, recorded before the section existed
H200_DRA = "dra/h200-dra-report-1.txt"
H200_DYNAMIC = "dra/h200-dynamic-report-1.txt"
A100_DYNAMIC = "dra/a100-dynamic-report-2.txt"


def test_the_recorded_dra_boot_holds_placements_at_kubelet() -> None:
    ctx, _ = node("h200-inference", "dra")
    assert ctx.expected is not None and ctx.expected[0].placements == (
        "1g.18gb@2", "1g.18gb@3", "2g.35gb@0", "3g.71gb@4")  # gpu.driverplacement's prediction
    recorded = parse_report((DATA / H200_DRA).read_text())
    assert len(kubelet_gpus(recorded)) == 8
    claim = one(dra_claims(recorded, ctx))
    assert (claim.id, claim.passed) == ("placements-at-kubelet", True), claim


def test_the_recorded_a100_layout_is_at_the_plans_placements() -> None:
    ctx, _ = node("a100-80gb-mixed", "dra")
    assert ctx.expected is not None and ctx.expected[0].placements == (
        "1g.10gb@2", "1g.10gb@3", "2g.20gb@0", "3g.40gb@4")
    claim = one(dra_claims(report(A100_REPORT, "simgpu-state"), ctx))
    assert (claim.id, claim.passed) == ("placements-at-kubelet", True), claim


@pytest.mark.parametrize(("edit", "words"), [
    (("3g.71gb@4,2g.35gb@0", "3g.71gb@0,2g.35gb@4"), "GPU 0: MIG on, instances 1g.18gb@2,1g.18gb@3,2g.35gb@4,"
                                                      "3g.71gb@0, the plan has MIG on, instances 1g.18gb@2,"),
    (("1g.18gb@2,1g.18gb@3\n", "1g.18gb@2\n"), "GPU 0: MIG on, instances 1g.18gb@2,2g.35gb@0,3g.71gb@4, the plan"),
    (("gpu 7 ", "gpu 9 "), "GPU 7: not recorded"),
], ids=["moved", "partial", "missing-gpu"])
def test_placements_at_kubelet_fails_where_the_gpus_differ(edit: tuple[str, str], words: str) -> None:
    ctx, _ = node("h200-inference", "dra")
    claim = one(dra_claims(report(H200_DRA, edit=edit), ctx))
    assert not claim.passed and words in claim.evidence, claim
    assert "unexpected GPU 9" in claim.evidence or edit[0] != "gpu 7 "


def test_placements_at_kubelet_fails_without_the_record() -> None:
    """No kubelet start recorded (or a guest without the drop-in): the claim fails, it is never skipped."""
    ctx, _ = node("a100-80gb-mixed", "dra")
    claim = one(dra_claims(parse_report((DATA / A100_REPORT).read_text()), ctx))
    assert not claim.passed and "nothing recorded (kubelet did not start?)" in claim.evidence


@pytest.mark.parametrize(("image", "name", "gpus"), [("a100-80gb-mixed", A100_DYNAMIC, 2),
                                                     ("h200-inference", H200_DYNAMIC, None)],
                         ids=["ampere-mig-on", "hopper-mig-off"])
def test_the_recorded_dynamic_boots_hold_dynamic_at_kubelet(image: str, name: str, gpus: int | None) -> None:
    ctx, text = node(image, "dra-dynamic", gpus)
    assert "mig:" not in text and ctx.expected is not None
    assert {g.mig_enabled for g in ctx.expected} == {ctx.generation == "ampere"}  # the mode per architecture
    claim = one(dra_claims(parse_report((DATA / name).read_text()), ctx))
    assert (claim.id, claim.passed) == ("dynamic-at-kubelet", True), claim


@pytest.mark.parametrize(("image", "name", "gpus", "state_from", "edit", "words"), [
    ("a100-80gb-mixed", A100_DYNAMIC, 2, SECTION, (" mig 1 pending 1 ", " mig 0 pending 1 "),
     "GPU 0: MIG off, instances none, want MIG on, instances none"),
    ("a100-80gb-mixed", A100_REPORT, None, "simgpu-state", ("", ""), "GPU 0: MIG on, instances 1g.10gb@2,"),
    ("h200-inference", H200_DRA, None, SECTION, ("", ""), "GPU 0: MIG on, instances 1g.18gb@2,"),
    ("h200-inference", H200_DYNAMIC, None, SECTION, (" mig 0 pending 0 ", " mig 1 pending 1 "),
     "GPU 0: MIG on, instances none, want MIG off, instances none"),
], ids=["ampere-mode-still-pending", "ampere-instances", "hopper-instances", "hopper-mig-on"])
def test_dynamic_at_kubelet_fails_on_instances_or_the_wrong_mode(image: str, name: str, gpus: int | None,
                                                                 state_from: str, edit: tuple[str, str],
                                                                 words: str) -> None:
    ctx, _ = node(image, "dra-dynamic", gpus)
    claim = one(dra_claims(report(name, state_from, edit), ctx))
    assert not claim.passed and words in claim.evidence, claim


def test_the_cdi_spec_of_a_dynamic_boot_lists_no_mig_device() -> None:
    """cdi-spec-current under dra-dynamic: the last spec, written after the assert, lists no MIG device."""
    ctx, _ = node("h200-inference", "dra-dynamic")
    ev = Evidence(boot=1, exit_code=0, timed_out=False, console="", report=report(H200_DYNAMIC), report_path=None,
                  record=None, marker=None, marker_path="/var/lib/migbake/reboot-attempted",
                  cdi_log=(DATA / "dra/h200-dynamic-cdi-refresh-1.log").read_text(),
                  cdi_final=(DATA / "dra/h200-dynamic-cdi-spec-1.yaml").read_text())
    ctx = replace(ctx, path="cloud-init")
    claims = {c.id: c for c in boot_claims(ev, ctx)}
    assert claims["cdi-spec-current"].passed and claims["dynamic-at-kubelet"].passed, claims
    # a device-plugin boot with nothing to list fails it, as before (the claim cannot pass on nothing)
    assert not {c.id: c for c in boot_claims(ev, replace(ctx, allocation="device-plugin"))}[
        "cdi-spec-current"].passed


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
