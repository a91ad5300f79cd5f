"""kubernetes.allocation: the rules, the dynamic config per architecture, DRA names, placements.

Facts under test come from docs/dra.md (each with its source); the device names are the DRA driver's
``ToCanonicalName`` (kubernetes-sigs/dra-driver-nvidia-gpu:cmd/gpu-kubelet-plugin/mig.go@v25.12.0).
"""

from __future__ import annotations

import pytest
import yaml

from migbake.gpu.catalog import load_catalog
from migbake.gpu.driverplacement import creation_order, predict
from migbake.kubernetes.dra import canonical_profile, claim_templates, dra_entries, placements
from migbake.render.plan import make_plan
from migbake.rules.validate import check_bytes

A100_H200 = """\
version: 1
name: mixed
kubernetes:
  allocation: {allocation}
gpu_count: 4
device_filter: never
gpus:
  - model: A100-SXM4-80GB
    devices: [0, 1]
{a100}
  - model: NVIDIA H200
    devices: [2, 3]
{h200}
"""


def _rules(text: str) -> list[str]:
    return [f"{p.pointer} {p.rule}" for p in check_bytes(text.encode(), "p.yaml").problems]


def _profile(text: str):  # type: ignore[no-untyped-def]
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return checked.profile


LAYOUT = "    mig:\n      layout:\n        {}: 1"
ON_EMPTY = "    mig:\n      enabled: true"
OFF = "    mig:\n      enabled: false"


@pytest.mark.parametrize(("allocation", "a100", "h200", "expected"), [
    ("device-plugin", LAYOUT.format("3g.40gb"), ON_EMPTY, ["/gpus/1/mig empty-layout"]),
    ("dra", LAYOUT.format("3g.40gb"), ON_EMPTY, ["/gpus/1/mig dra-stranded-gpu"]),
    ("dra", LAYOUT.format("3g.40gb"), "", ["/gpus/1 dra-stranded-gpu"]),
    ("dra", LAYOUT.format("3g.40gb"), OFF, []),
    ("dra", LAYOUT.format("3g.40gb"), LAYOUT.format("1g.18gb"), []),
    ("dra-dynamic", "", "", []),
    ("dra-dynamic", ON_EMPTY, OFF, []),
    ("dra-dynamic", LAYOUT.format("3g.40gb"), "", ["/gpus/0/mig/layout dra-dynamic-layout"]),
], ids=["device-plugin-empty-warns", "dra-empty-strands", "dra-no-mig-section-strands", "dra-mig-off-ok",
        "dra-layouts-ok", "dynamic-no-mig-section", "dynamic-explicit-modes", "dynamic-layout-refused"])
def test_allocation_rules(allocation: str, a100: str, h200: str, expected: list[str]) -> None:
    assert _rules(A100_H200.format(allocation=allocation, a100=a100, h200=h200)) == expected


def test_strategy_warns_only_under_dra() -> None:
    text = A100_H200.format(allocation="dra", a100=LAYOUT.format("3g.40gb"), h200=LAYOUT.format("1g.18gb"))
    text = text.replace("  allocation: dra\n", "  allocation: dra\n  mig_strategy: single\n")
    assert _rules(text) == ["/kubernetes/mig_strategy dra-device-plugin-setting"]  # and no mig-strategy-single
    assert "mig-strategy-single" in " ".join(_rules(text.replace("allocation: dra", "allocation: device-plugin")))


def test_dynamic_config_mig_on_for_ampere_off_for_hopper() -> None:
    """dra-dynamic: no instances anywhere; MIG on (reset path) on Ampere, off on Hopper; mig.enabled false wins."""
    plan = make_plan(_profile(A100_H200.format(allocation="dra-dynamic", a100="", h200="")))
    entries = yaml.safe_load(plan.mig.config_text)["mig-configs"]["current"]
    assert [(e["mig-enabled"], e["mig-devices"]) for e in entries] == [(True, {}), (False, {})]
    assert plan.restore.reset_models == ("A100-SXM4-80GB",) and plan.restore.reset_path == "reboot-once"
    assert plan.dra.claim_templates == "" and plan.dra.entries == ()
    off = make_plan(_profile(A100_H200.format(allocation="dra-dynamic", a100=OFF, h200="")))
    assert [e["mig-enabled"] for e in yaml.safe_load(off.mig.config_text)["mig-configs"]["current"]] == [False, False]


@pytest.mark.parametrize(("profile", "name"), [
    ("1g.10gb", "1g10gb"), ("1g.18gb+me", "1g18gb-me"), ("1g.24gb+me.all", "1g24gb-meall"),
    ("1g.24gb-me", "1g24gb-me"), ("1c.2g.20gb", "1c2g20gb"), ("7g.141gb", "7g141gb"),
], ids=lambda v: v)
def test_canonical_profile_as_the_driver_writes_it(profile: str, name: str) -> None:
    # FACTS table, derived from toRFC1123Compliant (mig.go@v25.12.0)
    assert canonical_profile(profile) == name


def test_mig_parted_creation_order() -> None:
    h200 = load_catalog().find_gpu("h200-141gb")
    assert h200 is not None
    order = creation_order(h200, ["1g.18gb", "1g.18gb+me", "2g.35gb", "7g.141gb", "3g.71gb"])
    assert [p.name for p in order] == ["7g.141gb", "3g.71gb", "2g.35gb", "1g.18gb+me", "1g.18gb"]


def test_prediction_reproduces_the_public_observation() -> None:
    """NVIDIA/DCGM#138: A100 80GB 3g, 2g, 1g, 1g without placement -> 3g 4:4, 2g 0:2, 1g 2:1, 1g 3:1."""
    a100 = load_catalog().find_gpu("a100-80gb")
    assert a100 is not None
    placed = predict(a100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    assert placed is not None
    assert [(p.profile, p.start) for p in placed] == [("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2),
                                                      ("1g.10gb", 3)]


def test_dra_names_per_gpu() -> None:
    prof = _profile(A100_H200.format(allocation="dra", a100=LAYOUT.format("3g.40gb"),
                                     h200="    mig:\n      layout:\n        3g.71gb: 1\n        1g.18gb: 2"))
    entries = dra_entries(prof, placements(prof))
    assert [d.name(2) for d in entries[1].instances] == ["gpu-2-mig-3g71gb-9-4", "gpu-2-mig-1g18gb-19-0",
                                                         "gpu-2-mig-1g18gb-19-1"]
    assert [d.name(0) for d in entries[0].instances] == ["gpu-0-mig-3g40gb-9-4"]
    plan = make_plan(prof)
    assert plan.dra.entries == entries and plan.dra.placement_check == "warn"
    assert [(i.profile, i.start) for i in plan.expect.placements[1].instances] == [("3g.71gb", 4), ("1g.18gb", 0),
                                                                            ("1g.18gb", 1)]
    assert [t["metadata"]["name"] for t in claim_templates(prof)] == ["mig-1g-18gb", "mig-3g-40gb", "mig-3g-71gb"]


def test_show_lists_the_dra_device_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from support import cli

    path = tmp_path / "p.yaml"
    path.write_text(A100_H200.format(allocation="dra", a100=LAYOUT.format("3g.40gb"),
                                     h200="    mig:\n      layout:\n        3g.71gb: 1\n        1g.18gb: 2"))
    rc, out, _ = cli("show", str(path))
    assert rc == 0, out
    assert "  GPU 2 (h200-141gb): gpu-2-mig-3g71gb-9-4, gpu-2-mig-1g18gb-19-0, gpu-2-mig-1g18gb-19-1" in out
    assert "  GPU 1 (a100-80gb): gpu-1-mig-3g40gb-9-4" in out
    assert "nvidia.com/mig-" not in out  # the device plugin's resources do not apply
    dynamic = tmp_path / "d.yaml"
    dynamic.write_text(A100_H200.format(allocation="dra-dynamic", a100="", h200=""))
    rc, out, _ = cli("show", str(dynamic))
    assert "/gpus/1 (h200-141gb): MIG off (the driver turns MIG on per claim)" in out
    assert "/gpus/0 (a100-80gb): MIG on, no instances" in out


@pytest.mark.parametrize(("layout", "names"), [
    ({"4g.96gb": 1}, ["gpu-0-mig-4g96gb-0-0"]),
    ({"4g.96gb+gfx": 1}, ["gpu-0-mig-4g96gb-gfx-32-0"]),
    # the public capture (driver 610.43.02): 2g.48gb at 0:6, the two 1g.24gb at 6:3 and 9:3
    ({"2g.48gb": 1, "1g.24gb": 2}, ["gpu-0-mig-2g48gb-5-0", "gpu-0-mig-1g24gb-14-6", "gpu-0-mig-1g24gb-14-9"]),
], ids=["4g", "4g-gfx", "2g-1g-1g"])
def test_rtx_pro_6000_names_use_the_drivers_ids_and_grid(layout: dict[str, int], names: list[str]) -> None:
    lines = "".join(f"\n        {name}: {n}" for name, n in layout.items())
    prof = _profile(f"version: 1\nname: rtx\nkubernetes:\n  allocation: dra\ngpus:\n"
                    f"  - model: rtx-pro-6000-blackwell-96gb\n    mig:\n      layout:{lines}\n")
    devices = dra_entries(prof, placements(prof))[0].instances
    assert [d.name(0) for d in devices] == names
    assert all("?" not in d.name(0) for d in devices)
