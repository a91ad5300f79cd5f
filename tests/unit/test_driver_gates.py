"""The driver gates of preflight (node/drivergates.py): the oldest driver with MIG per model, the 570 mixed-node bug."""

from __future__ import annotations

import pytest
from support import H200_FIXTURES

from migbake.gpu.catalog import load_catalog
from migbake.node.drivergates import DriverGate, judge, version_key
from migbake.node.nvidiasmi import parse_csv, parse_xml

RTX = DriverGate((("rtx-pro-6000-blackwell-96gb", "575.51.03"),), mixed=False)
H200_MIXED = DriverGate((("h200-141gb", "550.90.07"),), mixed=True)


@pytest.mark.parametrize(("gate", "version", "status", "words"), [
    (RTX, "570.133.20", "FAIL", "older than the oldest with MIG on rtx-pro-6000-blackwell-96gb: 575.51.03"),
    (RTX, "575.51.02", "FAIL", "575.51.03"),
    (RTX, "575.51.03", "PASS", "at least 575.51.03 (rtx-pro-6000-blackwell-96gb)"),
    (RTX, "580.159.04", "PASS", "at least 575.51.03"),
    (H200_MIXED, "570.124.06", "WARN", "upgrade to 570.172.08 or later"),
    (H200_MIXED, "570.148.08", "WARN", "NVIDIA/gpu-operator#1361"),
    (H200_MIXED, "570.158.01", "WARN", "570.172.08"),
    (H200_MIXED, "570.172.08", "PASS", "at least 550.90.07"),
    (H200_MIXED, "570.86.15", "PASS", "at least 550.90.07"),
    (DriverGate((("h200-141gb", "550.90.07"),), mixed=False), "570.148.08", "PASS", "at least"),
    (DriverGate((), mixed=False), "535.104.05", "PASS", "no minimum known"),
    (RTX, "575.51.03\n", "SKIP", "not compared"),
    (RTX, "", "SKIP", "not compared"),
    (RTX, "1.2.3.4.5", "SKIP", "not compared"),
])
def test_judge(gate: DriverGate, version: str, status: str, words: str) -> None:
    got, detail = judge(gate, version)
    assert (got, words in detail) == (status, True), detail


def test_version_key_pads_to_four_fields_and_refuses_the_rest() -> None:
    assert version_key("575.51.03") == (575, 51, 3, 0)
    assert version_key("570.169") == (570, 169, 0, 0)
    assert version_key("570.169") < version_key("570.172.08")  # type: ignore[operator]
    bad = ("575", "575.51.03 ", "v575.51", "575.51.03\n", "\u0665\u0667\u0665.51")
    assert [version_key(v) for v in bad] == [None] * len(bad)


def test_captures_say_the_driver_version() -> None:
    xml = parse_xml(H200_FIXTURES.joinpath("nvidia-smi-q.xml").read_bytes(), "q.xml")
    assert xml.driver_version == "580.159.04"
    with_column = parse_csv(H200_FIXTURES.joinpath("nvidia-smi-query-gpu.csv").read_text(), "q.csv")
    assert with_column.driver_version == "580.159.04"
    assert parse_csv("0, NVIDIA H200, 0x233510DE, Disabled\n", "q.csv").driver_version == ""


def test_catalog_minimums_are_the_guides_and_match_the_free_text() -> None:
    """Each structured minimum also appears in the model's min_driver text (one fact, said twice alike)."""
    minimums = {m.key: m.min_driver_version for m in load_catalog().models if m.min_driver_version}
    assert minimums == {
        "a100-40gb": "450.80.02", "a100-80gb": "450.80.02", "a30-24gb": "460.73.01", "h100-80gb": "525.85.12",
        "h100-94gb": "525.85.12", "h100-96gb": "525.85.12", "h200-141gb": "550.90.07",
        "b200-180gb": "570.133.20", "gb200-186gb": "570.133.20", "gb200-189gb": "570.133.20",
        "rtx-pro-6000-blackwell-96gb": "575.51.03", "b300": "580.82.07"}
    for m in load_catalog().models:
        if m.min_driver_version and m.key not in ("a100-80gb", "h100-94gb", "h100-96gb", "gb200-189gb"):
            assert m.min_driver_version in m.min_driver, m.key
    # the guide's GB300 row is the DGX Station's (595.58.03); the catalog's gb300 is HGX GB300 NVL72, whose MIG
    # profiles came with GPU Operator 25.10.0 on driver 580.95.05, so it has no minimum of its own in the guide
    gb300 = load_catalog().find_gpu("gb300")
    assert gb300 is not None and not gb300.min_driver_version and "DGX Station" in gb300.min_driver


def test_the_grace_models_are_gh200_gb200_and_gb300() -> None:
    """grace_system: every model whose GPU sits beside a Grace CPU, GH200's 96 GB H100 included (the cdmm gates)."""
    grace = {m.key for m in load_catalog().models if m.grace_system}
    assert grace == {"h100-96gb", "gh200-144gb", "gb200-186gb", "gb200-189gb", "gb300"}


PROFILE = "version: 1\nname: n\ngpus:\n  - model: {model}\n    mig: {mig}\n{restore}"


@pytest.mark.parametrize(("model", "mig", "restore", "warned"), [
    ("gb200-186gb", "{layout: {3g.93gb: 2}}", "", True),
    ("gb200-186gb", "{layout: {3g.93gb: 2}}", "restore: {cdmm: unknown}\n", True),
    ("gb200-186gb", "{layout: {3g.93gb: 2}}", "restore: {cdmm: disabled}\n", False),
    ("gb200-186gb", "{enabled: false}", "", False),
    ("GH200 480GB", "{layout: {7g.96gb: 1}}", "", True),
    ("gh200-144gb", "{layout: {7g.144gb: 1}}", "", True),
    ("gb300", "{layout: {7g.278gb: 1}}", "", True),
    ("h200-141gb", "{layout: {7g.141gb: 1}}", "", False),
    ("b300", "{layout: {7g.269gb: 1}}", "", False),
], ids=["gb200", "gb200-unknown", "gb200-disabled", "gb200-mig-off", "gh200-96gb", "gh200-144gb", "gb300", "h200",
        "b300"])
def test_cdmm_unknown_warns_on_grace_models_until_the_profile_states_it(model: str, mig: str, restore: str,
                                                                        warned: bool) -> None:
    from migbake.rules.validate import check_bytes

    checked = check_bytes(PROFILE.format(model=model, mig=mig, restore=restore).encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    found = [p for p in checked.problems if p.rule == "cdmm-unknown"]
    assert bool(found) is warned, [p.format() for p in checked.problems]
    if warned:
        assert found[0].pointer == "/gpus/0/model" and "restore.cdmm: disabled" in found[0].message
        assert 'CoherentGPUMemoryMode: "driver"' in found[0].message


def test_the_real_h200_runs_with_persistence_mode_on() -> None:
    """The lent H200 (driver 580.159.04): persistence mode Enabled in both captures that carry it."""
    xml = H200_FIXTURES.joinpath("nvidia-smi-q.xml").read_text()
    assert "<persistence_mode>Enabled</persistence_mode>" in xml
    gates = parse_csv(H200_FIXTURES.joinpath("nvidia-smi-query-gates.csv").read_text(), "gates.csv")
    assert gates.driver_version == "580.159.04" and [g.mig_mode for g in gates.gpus] == ["Disabled"]
    header, row = H200_FIXTURES.joinpath("nvidia-smi-query-gates.csv").read_text().splitlines()
    assert dict(zip(header.split(", "), row.split(", ")))["persistence_mode"] == "Enabled"


def test_the_cdmm_rows_reading_matches_the_real_params_line() -> None:
    """/proc/driver/nvidia/params as the real driver prints the mode (nv-procfs.c: CoherentGPUMemoryMode: "...")."""
    import re

    lines = H200_FIXTURES.joinpath("proc-driver-nvidia-params-lines.txt").read_text().splitlines()
    modes = [m[1] for line in lines if (m := re.fullmatch(r'CoherentGPUMemoryMode: "(.*)"', line))]
    assert modes == [""]  # unset on an x86 H200: the script's sed reads the same form
