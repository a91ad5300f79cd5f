"""The Butane configs (OUT/butane/) judged by CoreOS's real butane v0.29.0 and ignition-validate v2.26.0.

For every example image and a few variants: each .bu passes ``butane --strict --check``; butane's own
output equals migbake's transpiled form as data (fcos.ign, flatcar.ign, the MachineConfig); every .ign
and the openshift config's ``--raw`` form pass ``ignition-validate`` with no output at all (it only warns
on unknown keys, exit 0); the files inside are the bytes of OUT/rootfs; and the units, installed as
Ignition installs them, pass the same systemd-analyze checks as OUT/rootfs (tests/outputs/test_realtools.py).
Skipped locally without ../shared/tools/butane, a failure in CI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from ignition_tree import as_data, node_files, rootfs_differences
from realtools import SystemdTree, run
from support import IMAGES, REPO, generate, shared_file

pytestmark = pytest.mark.realtool

TOOLS = REPO.parent / "shared" / "tools" / "butane"
SHA = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
H200 = "version: 1\nname: h200-butane\ngpus:\n  - model: h200-141gb\n    mig:\n      layout: {1g.18gb: 7}\n"
VARIANTS = {
    **{p.name: (p / "node-profile.yaml").read_text() for p in IMAGES},
    "fetch-gpu-pool": H200 + f"""\
tools:
  nvidia_mig_parted: /opt/bin/nvidia-mig-parted
  nvidia_mig_parted_url: "https://downloads.example.com/mig-parted?v=0.15.0&arch=amd64"
  nvidia_mig_parted_sha256: {SHA}
openshift: {{role: gpu}}
""",
    "worker-pool": H200 + "openshift: {role: worker}\n",  # the cluster's own pool: no MachineConfigPool written
    "disable-consumers": H200 + """\
conflicting_manager: {action: disable}
consumers:
  - {unit: slurmd.service}
  - {unit: inference@gpu.service, fail_closed: false}
restore: {unit: mig-layout.service}
""",
}


def butane_tool(name: str) -> str:
    return str(shared_file(TOOLS / name))


@pytest.fixture(scope="module", params=sorted(VARIANTS), ids=sorted(VARIANTS))
def out(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield generate(VARIANTS[request.param], tmp_path_factory.mktemp(request.param) / "out")


def _role(out: Path) -> str:
    [bu] = (out / "butane").glob("openshift-*.bu")
    return bu.stem[len("openshift-"):]


def _bu(out: Path) -> list[Path]:
    return [out / "butane/fcos.bu", out / "butane/flatcar.bu", out / f"butane/openshift-{_role(out)}.bu"]


def test_every_butane_config_passes_butane_strict(out: Path) -> None:
    for bu in _bu(out):
        ran = run([butane_tool("butane"), "--strict", "--check", str(bu)])
        assert (ran.rc, ran.text) == (0, ""), f"{bu.name}: {ran.text}"


def test_butane_makes_what_migbake_wrote(out: Path) -> None:
    for variant in ("fcos", "flatcar"):
        ran = run([butane_tool("butane"), "--strict", str(out / f"butane/{variant}.bu")])
        assert ran.rc == 0, ran.text
        ours = json.loads((out / f"butane/{variant}.ign").read_text())
        assert as_data(json.loads(ran.out)) == as_data(ours), variant
    role = _role(out)
    ran = run([butane_tool("butane"), "--strict", str(out / f"butane/openshift-{role}.bu")])
    assert ran.rc == 0, ran.text
    theirs, ours = yaml.safe_load(ran.out), yaml.safe_load((out / f"butane/openshift-{role}.yaml").read_text())
    for mc in (theirs, ours):
        mc["spec"]["config"] = as_data(mc["spec"]["config"])
    assert theirs == ours
    assert ours["metadata"]["labels"] == {"machineconfiguration.openshift.io/role": role}


def test_ignition_validate_accepts_every_config_silently(out: Path, tmp_path: Path) -> None:
    raw = tmp_path / "openshift.raw.ign"
    bu = out / f"butane/openshift-{_role(out)}.bu"
    ran = run([butane_tool("butane"), "--strict", "--raw", "-o", str(raw), str(bu)])
    assert (ran.rc, ran.text) == (0, ""), ran.text
    for ign in (out / "butane/fcos.ign", out / "butane/flatcar.ign", raw):
        ran = run([butane_tool("ignition-validate"), str(ign)])
        assert (ran.rc, ran.text) == (0, ""), f"{ign.name}: {ran.text}"


def _configs(out: Path) -> dict[str, dict[str, object]]:
    mc = yaml.safe_load((out / f"butane/openshift-{_role(out)}.yaml").read_text())
    return {"fcos": json.loads((out / "butane/fcos.ign").read_text()),
            "flatcar": json.loads((out / "butane/flatcar.ign").read_text()), "openshift": mc["spec"]["config"]}


def _extra(out: Path, variant: str, config: dict[str, object]) -> set[str]:
    """What a variant adds to OUT/rootfs: Flatcar's drop-in, the download of nvidia-mig-parted."""
    restore = next(u["name"] for u in config["systemd"]["units"] if u.get("enabled") is True)  # type: ignore[index]
    extra = {f"etc/systemd/system/{restore}.d/10-migbake-flatcar.conf"} if variant == "flatcar" else set()
    return extra | {f["path"].lstrip("/") for f in config["storage"]["files"]  # type: ignore[index]
                    if not f["contents"]["source"].startswith("data:")}


def test_the_files_inside_are_the_bytes_of_rootfs(out: Path) -> None:
    for variant, config in _configs(out).items():
        assert rootfs_differences(config, out / "rootfs", _extra(out, variant, config)) == [], variant


def test_a_file_that_differs_from_rootfs_is_caught(out: Path) -> None:
    config = _configs(out)["fcos"]
    f = config["storage"]["files"][0]  # type: ignore[index]
    rel = f["path"].lstrip("/")
    extra = _extra(out, "fcos", config)
    f["contents"] = {"compression": "", "source": "data:," + "changed"}
    assert rootfs_differences(config, out / "rootfs", extra) == [f"{rel}: differs from OUT/rootfs"]
    del config["storage"]["files"][0]  # type: ignore[index]
    assert rootfs_differences(config, out / "rootfs", extra) == [f"{rel}: missing"]
    assert rootfs_differences(config, out / "rootfs", set()) == [f"{rel}: missing"] + [
        f"{x}: not in OUT/rootfs" for x in sorted(extra)]


def test_fetch_and_enablement(out: Path) -> None:
    for variant, config in _configs(out).items():
        units = {u["name"]: u for u in config["systemd"]["units"]}  # type: ignore[index]
        enabled = [n for n, u in units.items() if u.get("enabled") is True]
        assert len(enabled) == 1 and "[Install]" in units[enabled[0]]["contents"]
        assert [n for n, u in units.items() if u.get("mask") or u.get("enabled") is False] != []
        remote = [f for f in config["storage"]["files"] if not f["contents"]["source"].startswith("data:")]  # type: ignore[index]
        fetching = "downloads.example.com" in (out / "butane/fcos.bu").read_text()
        assert len(remote) == (1 if fetching and variant != "openshift" else 0), variant
        for f in remote:
            assert f["mode"] == 0o755 and f["overwrite"] is True
            assert re.fullmatch(r"sha256-[0-9a-f]{64}", f["contents"]["verification"]["hash"])
        if variant == "flatcar":
            dropins = {d["name"]: d["contents"] for d in units[enabled[0]].get("dropins", [])}
            if enabled[0] == "migbake-driver-watch.service":  # a driver container: no host nvidia.service
                assert dropins == {}
            else:
                assert "After=nvidia.service" in dropins["10-migbake-flatcar.conf"]


FAKE_NVIDIA = "[Unit]\nDescription=fake Flatcar nvidia.service\n[Service]\nType=oneshot\nRemainAfterExit=true\n" \
              "ExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"


def _install(tree: SystemdTree, config: dict[str, object]) -> tuple[str, str]:
    """Write what Ignition writes: files, units, drop-ins, masks; enable/disable as its presets would."""
    for rel, data in node_files(config).items():
        path = tree.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data or not path.exists():
            path.write_bytes(data or b"#!/bin/sh\nexit 0\n")
    restore = manager = ""
    for u in config["systemd"]["units"]:  # type: ignore[index]
        if u.get("mask"):
            link = tree.root / "etc/systemd/system" / u["name"]
            link.unlink(missing_ok=True)
            link.symlink_to("/dev/null")
            manager = u["name"]
        elif u.get("enabled") is False:
            assert tree.systemctl("disable", u["name"]).rc == 0
            manager = u["name"]
        elif u.get("enabled") is True:
            assert tree.systemctl("enable", u["name"]).rc == 0
            restore = u["name"]
    return restore, manager


def test_the_units_pass_systemd_analyze(out: Path) -> None:
    configs = _configs(out)
    for variant, config in configs.items():
        units = [u["name"] for u in config["systemd"]["units"]]  # type: ignore[index]
        consumers = [n for n in units if n.endswith(".service") and n != "kubelet.service"
                     and any(d["name"] == "20-mig-restore.conf" for d in next(
                         u for u in config["systemd"]["units"] if u["name"] == n).get("dropins", []))]  # type: ignore[index]
        tree = SystemdTree(stubs=("bash", "kubelet", "/opt/bin/nvidia-mig-parted"), extra_units=tuple(consumers),
                           manager_unit=next(u["name"] for u in config["systemd"]["units"]  # type: ignore[index]
                                             if u.get("mask") or u.get("enabled") is False))
        try:
            if variant == "flatcar":
                (tree.root / "usr/lib/systemd/system/nvidia.service").write_text(FAKE_NVIDIA)
            restore, manager = _install(tree, config)
            state = run(["systemctl", f"--root={tree.root}", "is-enabled", restore, manager])
            assert state.out.split()[0] == "enabled" and state.out.split()[1] in ("masked", "disabled"), state.text
            checked = [restore, *(n for n in units if n not in (restore, manager))]
            verify = tree.verify(*checked)
            assert (verify.rc, verify.text) == (0, ""), f"{variant}: {verify.text}"
            graph = tree.boot_graph()
            assert graph.rc == 0 and "ordering cycle" not in graph.err, graph.err
        finally:
            tree.cleanup()


def test_the_judges_reject_broken_configs(tmp_path: Path) -> None:
    out = generate(H200, tmp_path / "out")
    bu = (out / "butane/fcos.bu").read_text().replace("overwrite: true\n", "overwrite: true\n    owner: root\n", 1)
    (tmp_path / "bad.bu").write_text(bu)
    ran = run([butane_tool("butane"), "--strict", "--check", str(tmp_path / "bad.bu")])
    assert ran.rc != 0 and "unused key owner" in ran.text, ran.text
    ign = json.loads((out / "butane/flatcar.ign").read_text())
    ign["storage"]["files"][0]["owner"] = "root"
    (tmp_path / "bad.ign").write_text(json.dumps(ign))
    ran = run([butane_tool("ignition-validate"), str(tmp_path / "bad.ign")])
    assert "unused key owner" in ran.text, ran.text  # exit 0 with a warning: any output fails the judge above
    ours, theirs = json.loads((out / "butane/fcos.ign").read_text()), json.loads(
        run([butane_tool("butane"), "--strict", str(out / "butane/fcos.bu")]).out)
    assert as_data(ours) == as_data(theirs)
    ours["storage"]["files"][0]["contents"]["source"] = "data:,other%20bytes"
    assert as_data(ours) != as_data(theirs)
