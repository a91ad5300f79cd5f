"""Named layouts under ``kubernetes.allocation: dra``: every output follows the name the node gets.

The claim templates are the union of every name's MIG profiles, each judged as tests/outputs/test_dra_claims.py judges
them (kubernetes-validate for Kubernetes 1.34 and 1.35, cel-python against the devices a node of each name
publishes: tests/fixtures/dra/h200-ready.json and h200-big.json); restore.sh compares the placements of the name
it applied; verify expects the DRA devices of the name its layout line found; ``preflight --resource-slices`` those
of the node's ``nvidia.com/mig.config`` label (--node-json), and says it cannot know the name from slices alone;
``show`` lists each name's DRA device names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realtools import shellcheck
from support import REPO, WORLD, cli, generate
from test_dra_claims import CLASSES, _cel_device, _templates, judge
from test_restore_placements import SMI, TABLE
from test_restore_script import make_node
from test_verify_dra import verify

from migbake.rules.validate import check_bytes

FIXTURES = REPO / "tests/fixtures/dra"
LAYOUTS = ("    mig:\n      layouts:\n        ready: {3g.71gb: 1, 1g.18gb: 2}\n        big: {2g.35gb: 3}\n")
NAMED = f"""\
version: 1
name: h200-named
kubernetes: {{allocation: dra}}
gpu_count: 2
gpus:
  - model: NVIDIA H200
{LAYOUTS}restore:
  layout: {{from: [file], default: ready}}
"""
# what a node of each name publishes (the plan's placements: ready 3g.71gb@4 1g.18gb@0 @1, big 2g.35gb@0 @2 @4)
PUBLISHED = {"ready": "h200-ready.json", "big": "h200-big.json"}


def _devices(fixture: str, node: str = "h200-node") -> list[dict[str, object]]:
    return [d for item in json.loads((FIXTURES / fixture).read_text())["items"]
            if item["spec"]["driver"] == "gpu.nvidia.com" and item["spec"]["nodeName"] == node
            for d in item["spec"]["devices"]]


def test_named_layouts_under_dra_are_valid_and_each_judged_by_the_dra_rules() -> None:
    assert not check_bytes(NAMED.encode(), "p.yaml").problems
    ci = NAMED.replace("big: {2g.35gb: 3}", "big: {1c.3g.71gb: 2}")
    assert [(p.rule, p.pointer) for p in check_bytes(ci.encode(), "p.yaml").problems if p.severity == "error"] == \
        [("dra-compute-instance", "/gpus/0/mig/layouts/big/1c.3g.71gb")]
    dynamic = NAMED.replace("{allocation: dra}", "{allocation: dra-dynamic}").replace("gpu_count: 2\n", "")
    assert [(p.rule, p.pointer) for p in check_bytes(dynamic.encode(), "p.yaml").problems] == \
        [("dra-dynamic-layout", "/gpus/0/mig/layouts")]


def test_claim_templates_are_the_union_of_every_names_profiles(tmp_path: Path) -> None:
    kv = judge("kubernetes_validate")
    docs = _templates(NAMED, tmp_path)
    assert sorted(d["metadata"]["name"] for d in docs) == ["mig-1g-18gb", "mig-2g-35gb", "mig-3g-71gb"]
    for doc in docs:
        for version in ("1.34.0", "1.35.0"):
            kv.validate(doc, version, strict=True)
    for item in json.loads((FIXTURES / "h200-big.json").read_text())["items"]:
        kv.validate(item, "1.34.0", strict=True)  # the other name's slices are what the API accepts
    text = (tmp_path / "out/kubernetes/resource-claim-templates.yaml").read_text()
    assert "# Named layouts (ready, big): the MIG profiles of every name" in text


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_every_device_a_node_of_each_name_publishes_has_exactly_one_template(name: str, tmp_path: Path) -> None:
    celpy = judge("celpy")
    env = celpy.Environment()
    devices = _devices(PUBLISHED[name])
    taken: dict[str, str] = {}
    for doc in _templates(NAMED, tmp_path):
        exact = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        klass = env.program(env.compile(CLASSES[exact["deviceClassName"]]))
        program = env.program(env.compile(exact["selectors"][0]["cel"]["expression"]))
        for device in devices:
            activation = {"device": celpy.json_to_cel(_cel_device(device))}
            if bool(klass.evaluate(activation)) and bool(program.evaluate(activation)):
                assert device["name"] not in taken, (device["name"], taken)
                taken[str(device["name"])] = doc["metadata"]["name"]
    assert set(taken) == {d["name"] for d in devices}
    profiles = {str(d["name"]): d["attributes"]["profile"]["string"] for d in devices}  # type: ignore[index]
    assert all(t == "mig-" + profiles[n].replace(".", "-") for n, t in taken.items())


def _node_json(tmp_path: Path, labels: dict[str, str]) -> Path:
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h200-node",
                                                                                 "labels": labels}}))
    return path


def _preflight(tmp_path: Path, fixture: str, *node: str) -> dict[str, str]:
    path = tmp_path / "p.yaml"
    path.write_text(NAMED)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / fixture), *node, "--json")
    assert rc in (0, 1), (out, err)
    check: dict[str, str] = next(c for c in json.loads(out)["checks"] if c["check"] == "dra-devices")
    return check


@pytest.mark.parametrize(("label", "fixture", "status"), [
    ("ready", "h200-ready.json", "PASS"), ("big", "h200-big.json", "PASS"),
    ("big", "h200-ready.json", "FAIL"), ("ready", "h200-big.json", "FAIL")])
def test_preflight_expects_the_devices_of_the_nodes_label(label: str, fixture: str, status: str,
                                                          tmp_path: Path) -> None:
    node = _node_json(tmp_path, {"nvidia.com/mig.config": label})
    check = _preflight(tmp_path, fixture, "--node-json", str(node))
    assert check["status"] == status and check["detail"].startswith(f"layout {label} (nvidia.com/mig.config): ")


def test_preflight_says_slices_alone_do_not_tell_the_name(tmp_path: Path) -> None:
    check = _preflight(tmp_path, "h200-ready.json", "--node", "h200-node")
    assert check["status"] == "SKIP" and "which ResourceSlices do not say: give --node-json" in check["detail"]
    check = _preflight(tmp_path, "h200-ready.json", "--node-json", str(_node_json(tmp_path, {})))
    assert check["status"] == "SKIP" and "nvidia.com/mig.config is not set" in check["detail"]


@pytest.mark.parametrize(("name", "fixture", "status"), [
    ("ready", "h200-ready.json", "PASS"), ("big", "h200-big.json", "PASS"), ("big", "h200-ready.json", "FAIL")])
def test_verify_expects_the_devices_of_the_name_the_node_gets(name: str, fixture: str, status: str,
                                                              tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc/migbake").mkdir(parents=True)
    (root / "etc/migbake/layout").write_text(name + "\n")
    WORLD.point("root", root)
    ran, lines = verify(tmp_path, NAMED, fixture, "--node", "h200-node")
    assert len(lines) == 1 and lines[0].startswith(f"{status}  dra-devices: "), ran.out
    if status == "FAIL":
        assert "the plan has" in lines[0] and "2g.35gb" in lines[0], lines


def test_verify_checks_no_dra_device_without_a_layout_name(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc/migbake").mkdir(parents=True)
    (root / "etc/migbake/layout").write_text("unknown\n")
    WORLD.point("root", root)
    ran, lines = verify(tmp_path, NAMED, "h200-ready.json", "--node", "h200-node")
    assert lines == ["INFO  the DRA devices of node h200-node are not checked: no layout name of this image (see the "
                     "layout line)"], ran.out


def _rows(gpu: int, placed: list[tuple[str, int, int, int]]) -> str:
    """-lgi rows: (profile, profile id, start, size) per GPU instance."""
    return "".join(f"|  {gpu:2d}  MIG {p:<14} {pid:>4} {n:>8}          {start}:{size}     |\n"
                   for n, (p, pid, start, size) in enumerate(placed, 1))


BIG = [("2g.35gb", 14, 0, 2), ("2g.35gb", 14, 2, 2), ("2g.35gb", 14, 4, 2)]
READY = [("3g.71gb", 9, 4, 4), ("1g.18gb", 19, 0, 1), ("1g.18gb", 19, 1, 1)]


@pytest.mark.parametrize(("name", "rows", "rc"), [("big", BIG, 0), ("ready", READY, 0), ("ready", BIG, 1)])
def test_restore_compares_the_placements_of_the_name_it_applied(name: str, rows: list[tuple[str, int, int, int]],
                                                                rc: int, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "layout-root"
    (root / "etc/migbake").mkdir(parents=True)
    (root / "etc/migbake/layout").write_text(name + "\n")
    WORLD.point("root", str(root))
    node = make_node(tmp_path, gpus="  - model: h200-141gb\n" + LAYOUTS + "kubernetes:\n  allocation: dra\n",
                     restore="  layout: {from: [file], default: ready}\n  placements: strict\n")
    (node.root / "opt/nvidia/nvidia-smi").write_text(SMI)
    node.set("lgi", TABLE.format(_rows(0, rows) + _rows(1, rows)))
    ran = node.run()
    assert ran.rc == rc, ran.text
    assert f"layout {name}, from file" in ran.text
    if rc == 0:
        assert "every GPU instance is at the placement the plan predicts" in ran.text
    else:
        assert "the plan has 1g.18gb@0 1g.18gb@1 3g.71gb@4" in ran.text


def test_show_lists_each_names_dra_device_names(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(NAMED)
    code, text, err = cli("show", str(path))
    assert code == 0, err
    ready, big = text.split("=== layout ready ")[1].split("=== layout big ")
    assert "GPU 1 (h200-141gb): gpu-1-mig-3g71gb-9-4, gpu-1-mig-1g18gb-19-0, gpu-1-mig-1g18gb-19-1" in ready
    assert "GPU 1 (h200-141gb): gpu-1-mig-2g35gb-14-4, gpu-1-mig-2g35gb-14-0, gpu-1-mig-2g35gb-14-2" in big
    assert "2g35gb" not in ready and "3g71gb" not in big


def test_the_scripts_of_a_named_dra_profile_are_shellcheck_clean(tmp_path: Path) -> None:
    out = generate(NAMED, tmp_path / "out")
    scripts = [out / "rootfs/etc/nvidia-mig/restore.sh", out / "scripts/verify-mig-restore.sh"]
    assert all("case \"$config_name\" in" in f.read_text() for f in scripts)  # the per-name expectations
    ran = shellcheck(scripts)
    assert ran.rc == 0, ran.out
