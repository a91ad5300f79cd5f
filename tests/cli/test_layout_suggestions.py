"""Layout errors that say how to fix them, and `migbake layouts` that a person can read.

The property: for many invalid layouts of every catalog GPU, the error reports compute and memory
slices together and offers layouts that, pasted back into the profile, validate.
"""

from __future__ import annotations

import json
import random
from itertools import combinations, product
from pathlib import Path

import pytest
from support import REPO, CliRunner

from migbake.cli.group import main
from migbake.gpu.catalog import GpuModel, load_catalog
from migbake.gpu.placement import is_valid
from migbake.gpu.suggestions import flow, nearest_layouts
from migbake.rules.validate import check_bytes

CATALOG = load_catalog()
PER_GPU = 30
# restore.cdmm stated: a Grace model's profile warns until it says CDMM is off (cdmm-unknown), not a layout problem
PROFILE = ("version: 1\nname: t\ngpu_count: 1\ngpus:\n  - model: {model}\n    mig:\n      layout: {layout}\n"
           "restore: {{cdmm: disabled}}\n")


def invalid_layouts(model: GpuModel) -> list[dict[str, int]]:
    """A deterministic sample of layouts that break only the fit (counts within each profile's maximum)."""
    found = []
    for k in (1, 2, 3):
        for group in combinations(model.profiles, k):
            for counts in product(*(range(1, p.max_count + 1) for p in group)):
                layout = {p.name: n for p, n in zip(group, counts)}
                if not is_valid(model, layout):
                    found.append(layout)
    random.Random(model.key).shuffle(found)
    return found[:PER_GPU]


@pytest.mark.parametrize("key", CATALOG.keys, ids=CATALOG.keys)
def test_every_suggestion_validates_when_pasted_back(key: str) -> None:
    model = CATALOG.by_key(key)
    layouts = invalid_layouts(model)
    assert len(layouts) >= min(PER_GPU, 10), key
    for layout in layouts:
        (problem,) = check_bytes(PROFILE.format(model=key, layout=flow(layout)).encode(), "p.yaml").problems
        assert problem.rule in ("compute-slices", "placement", "media-extension"), problem
        found = nearest_layouts(model, layout)
        nearest = found.layouts
        assert nearest and not found.cut, (key, layout)
        assert f"layouts that fit: {', '.join(flow(n) for n in nearest)}" in problem.message
        for suggestion in nearest:
            pasted = check_bytes(PROFILE.format(model=key, layout=flow(suggestion)).encode(), "p.yaml")
            assert pasted.ok and not pasted.problems, (layout, suggestion, pasted.problems)


def test_the_h200_example_reports_compute_and_memory_and_the_nearest_layouts() -> None:
    text = PROFILE.format(model="NVIDIA H200", layout="{4g.71gb: 1, 3g.71gb: 1, 1g.18gb: 1}")
    (problem,) = check_bytes(text.encode(), "p.yaml").problems
    assert problem.rule == "compute-slices"
    assert "needs 8 compute slices and 9 memory slices; an H200-SXM5-141GB has 7 and 8" in problem.message
    # the same instances with one removed (most compute kept first), then a maximal layout keeping two
    assert ("layouts that fit: {4g.71gb: 1, 3g.71gb: 1}, {4g.71gb: 1, 1g.18gb: 1}, "
            "{4g.71gb: 1, 2g.35gb: 1, 1g.18gb: 1}") in problem.message


def _one(text: str) -> tuple[str, str, str]:
    (p,) = check_bytes(text.encode(), "p.yaml").problems
    return p.rule, p.pointer, p.message


def test_devices_range_and_kubelet_unit_say_what_to_write() -> None:
    base = "version: 1\nname: t\ngpus:\n  - model: h200\n    devices: {devices}\n    mig: {{layout: {{1g.18gb: 7}}}}\n"
    rule, _, message = _one(base.format(devices="0-3"))
    assert rule == "schema-const" and 'expected "all" or a list of GPU indices like [0, 1, 2, 3]' in message
    rule, pointer, message = _one(base.format(devices="all") + "kubelet:\n  unit: kubelet\n")
    assert (rule, pointer) == ("schema-pattern", "/kubelet/unit") and "did you mean 'kubelet.service'?" in message


def test_explicit_devices_without_gpu_count_warn_once() -> None:
    text = ("version: 1\nname: t\ngpus:\n  - {model: h200, devices: [0, 1], mig: {layout: {1g.18gb: 7}}}\n"
            "  - {model: h200, devices: [2, 3], mig: {layout: {7g.141gb: 1}}}\n")
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.ok
    assert [(p.rule, p.pointer, p.severity) for p in checked.problems] == [
        ("devices-without-gpu-count", "/gpus/0/devices", "warning")]
    assert "set gpu_count" in checked.problems[0].message
    assert not check_bytes(text.replace("gpus:", "gpu_count: 4\ngpus:").encode(), "p.yaml").problems


@pytest.mark.parametrize("command", [
    ["generate", "{d}", "-o", "{d}/out"], ["show", "{d}"], ["export", "{d}"],
    ["bake", "{d}", "--dry-run", "--only", "amazon-ebs.golden"],
    ["preflight", "{d}", "--nvidia-smi-csv", "{c}"], ["boot-test", "{d}"],
], ids=lambda c: c[0])
def test_a_directory_instead_of_a_profile_exits_like_a_missing_file(command: list[str], tmp_path: Path) -> None:
    if command[0] == "boot-test":
        import needs_boottest  # noqa: F401 (skips this test where the boot test is not installed)
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "capture.csv").write_text("0, NVIDIA H200, 0x233510DE, Disabled\n")
    capture = tmp_path / "capture.csv"
    result = CliRunner().invoke(main, [c.format(d=folder, c=capture) for c in command])
    assert result.exit_code == 2, result.output  # an unreadable file (the README's exit-code table)
    assert f"{folder}:1:1: error: /: cannot read the file: it is a directory, not a profile file" in result.stderr
    missing = CliRunner().invoke(main, [c.format(d=tmp_path / "missing.yaml", c=capture) for c in command])
    assert missing.exit_code == 2 and "cannot read the file" in missing.stderr, missing.output


def test_layouts_table() -> None:
    out = CliRunner().invoke(main, ["layouts", "NVIDIA H200"]).stdout.splitlines()
    assert out[0].startswith("h200-141gb (H200-SXM5-141GB): 44 maximal layouts; compute = ")
    assert out[1].split() == ["layout", "instances", "compute", "memory", "GB", "+me"]
    rows = out[2:]
    counts = [int(r.split("}")[1].split()[0]) for r in rows]
    assert counts == sorted(counts) and counts[0] == 1
    assert rows[0].split() == ["{7g.141gb:", "1}", "1", "7/7", "8/8", "141", "no"]
    by_compute = CliRunner().invoke(main, ["layouts", "h200", "--sort", "compute"]).stdout.splitlines()[2:]
    used = [int(r.split("}")[1].split()[1].split("/")[0]) for r in by_compute]
    assert used == sorted(used, reverse=True)


def test_layouts_json_keeps_its_shape_and_adds_fields() -> None:
    data = json.loads(CliRunner().invoke(main, ["layouts", "a30", "--json"]).stdout)
    assert list(data) == ["model", "count", "layouts", "complete"] and data["complete"] is True
    first = data["layouts"][0]
    assert list(first)[:2] == ["mig-devices", "placements"]
    assert {"instances", "compute_slices", "memory_slices", "memory_gb", "media_extension"} <= set(first)


def test_layouts_without_a_model_lists_the_models() -> None:
    result = CliRunner().invoke(main, ["layouts"])
    assert result.exit_code == 0
    assert all(f"  {key} " in result.stdout for key in CATALOG.keys)


def test_tutorial_first_profile_walkthrough_is_what_migbake_prints(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    section = (REPO / "docs" / "tutorial.md").read_text().split("# Writing your first profile", 1)[1]
    blocks = section.split("```")[1::2]  # the fenced blocks, in order
    profile_text = next(b for b in blocks if b.startswith("yaml\n"))[len("yaml\n"):]
    monkeypatch.chdir(tmp_path)  # the tutorial shows relative file names
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_text)
    runner = CliRunner()
    out = runner.invoke(main, ["validate", "node-profile.yaml"]).stdout
    assert out.strip() in next(b for b in blocks if "$ migbake validate" in b), out
    layouts = next(b for b in blocks if '$ migbake layouts "NVIDIA H200"' in b)
    shown = runner.invoke(main, ["layouts", "NVIDIA H200"]).stdout.splitlines()
    for line in layouts.splitlines()[2:-2]:
        assert line in shown, line
    profile.write_text(profile_text.replace("3g.71gb: 1, 1g.18gb: 1", "2g.35gb: 1, 1g.18gb: 1"))
    show = next(b for b in blocks if "$ migbake show" in b)
    assert runner.invoke(main, ["show", "node-profile.yaml"]).stdout.strip() in show
