"""restore.sh under kubernetes.allocation dra: the placements nvidia-smi mig -lgi reports against the plan.

A difference is logged and counted in the metrics file (migbake_mig_restore_placement_mismatches); the
restore fails on it only with restore.placements: strict. The -lgi rows have the columns of the real
table (``|   0  MIG 3g.40gb   9   2   4:4   |``, NVIDIA/DCGM#138); the simulated tools are those of
tests/outputs/test_restore_script.py, with -lgi and the GPUs' PCI ids added.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_restore_script import FAKE_SMI, make_node

pytestmark = pytest.mark.realtool

DRA = ("  - model: h200-141gb\n    mig: {layout: {3g.71gb: 1, 1g.18gb: 2}}\n"
       "kubernetes:\n  allocation: dra\n")
SMI = FAKE_SMI.replace("  *) echo \"fake nvidia-smi: unexpected", """\
  'mig -lgi') cat "$STATE/lgi" ;;
  '--query-gpu=index,pci.device_id --format=csv,noheader') printf '0, 0x233510DE\\n1, 0x233510DE\\n' ;;
  *) echo "fake nvidia-smi: unexpected""", 1)
TABLE = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
{}+-------------------------------------------------------+
"""


def _rows(gpu: int, placed: list[tuple[str, int, int, int]]) -> str:
    return "".join(f"|  {gpu:2d}  MIG {name:<14} {pid:>4} {n:>8}          {start}:{4 if name.startswith('3g') else 1}"
                   "     |\n" for n, (name, pid, start, _) in enumerate(placed, 1))


PLAN = [("3g.71gb", 9, 4, 0), ("1g.18gb", 19, 0, 0), ("1g.18gb", 19, 1, 0)]
MOVED = [("3g.71gb", 9, 0, 0), ("1g.18gb", 19, 4, 0), ("1g.18gb", 19, 5, 0)]


def _node(tmp_path: Path, restore: str, gpu1: list[tuple[str, int, int, int]]):  # type: ignore[no-untyped-def]
    node = make_node(tmp_path, gpus=DRA, restore=restore)
    smi = node.root / "opt/nvidia/nvidia-smi"
    smi.write_text(SMI)
    node.set("lgi", TABLE.format(_rows(0, PLAN) + _rows(1, gpu1)))
    return node


def test_placements_as_planned(tmp_path: Path) -> None:
    node = _node(tmp_path, "", PLAN)
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert "every GPU instance is at the placement the plan predicts" in ran.text
    assert node.metric_values()["migbake_mig_restore_placement_mismatches"] == 0


def test_moved_placement_warns_by_default(tmp_path: Path) -> None:
    node = _node(tmp_path, "", MOVED)
    ran = node.run()
    assert ran.rc == 0, ran.text
    assert ("placement differs on GPU 1: nvidia-smi mig -lgi has 1g.18gb@4 1g.18gb@5 3g.71gb@0, the plan has "
            "1g.18gb@0 1g.18gb@1 3g.71gb@4") in ran.text
    values = node.metric_values()
    assert values["migbake_mig_restore_placement_mismatches"] == 1 and values["migbake_mig_restore_success"] == 1


def test_moved_placement_fails_closed_when_strict(tmp_path: Path) -> None:
    node = _node(tmp_path, "  placements: strict\n", MOVED)
    ran = node.run()
    assert ran.rc == 1, ran.text
    assert "1 GPU(s) have GPU instances at placements other than the plan's (restore.placements: strict)" in ran.text
    values = node.metric_values()
    assert values["migbake_mig_restore_placement_mismatches"] == 1 and values["migbake_mig_restore_success"] == 0


def test_device_plugin_profile_has_no_placement_check(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    ran = node.run()
    assert ran.rc == 0 and "placement" not in ran.text
    assert "migbake_mig_restore_placement_mismatches" not in node.metric_values()
