"""The generated preflight script (scripts/preflight-mig-restore.sh) on simulated nodes (test_preflight.SimNode),
and it and `migbake preflight` agreeing check by check on the same simulated node."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from realtools import bash_n, run, shellcheck
from support import WORLD, cli, generate
from test_preflight import A100, GB200, H100, H200_ENTRY, QUERY, SCRIPT, SimGpu, SimNode, install, profile_yaml

from migbake.node.nvidiasmi import parse_csv, parse_xml

HARDWARE_CHECKS_WORDED_ALIKE = ("gpu-count", "coverage", "driver-mig")  # and every gpus/N


@dataclass
class Ran:
    """One run of the generated script with --json."""

    rc: int
    report: dict[str, Any]
    calls: list[str]
    stderr: str

    @property
    def status(self) -> dict[str, str]:
        return {c["check"]: c["status"] for c in self.report["checks"]}

    @property
    def detail(self) -> dict[str, str]:
        return {c["check"]: c["detail"] for c in self.report["checks"]}


def run_script(tmp_path: Path, node: SimNode, profile: str, *args: str) -> tuple[int, str, str, list[str]]:
    root = tmp_path / "node"
    root.mkdir()
    env = install(node, root)
    out = generate(profile.replace("@ROOT@", str(root)), tmp_path / "out")
    ran = run([str(out / SCRIPT), *args], env=env)
    calls = (root / "calls").read_text().splitlines() if (root / "calls").exists() else []
    return ran.rc, ran.out, ran.err, calls


def preflight_node(tmp_path: Path, node: SimNode, **profile: Any) -> Ran:
    rc, out, err, calls = run_script(tmp_path, node, profile_yaml(Path("@ROOT@"), **profile), "--json")
    return Ran(rc, json.loads(out), calls, err)


READ_ONLY_CALLS = (f"nvidia-smi {QUERY}", "nvidia-smi -L", "nvidia-mig-parted --version",
                   "nvidia-mig-parted help", "systemctl cat -- ", "systemctl list-unit-files --no-legend -- ",
                   "systemctl is-enabled -- ", "systemctl is-active -- ")


# --- the generated script on simulated nodes ---------------------------------------------------

@dataclass(frozen=True)
class Case:
    """A simulated node, the profile's options, and what the script must say."""

    node: SimNode
    expect: dict[str, tuple[str, str]]  # check -> (status, a piece of the detail)
    ready: bool
    profile: dict[str, Any] = field(default_factory=dict)


TWO_MODELS = ("  - model: h100-80gb\n    mig: {layout: {3g.40gb: 2}}\n"
              "  - model: a100-80gb\n    mig: {layout: {7g.80gb: 1}}\n")
A100_ENTRY = "  - model: a100-80gb\n    mig: {layout: {7g.80gb: 1}}\n"
GB200_ENTRY = "  - model: gb200-186gb\n    mig: {layout: {7g.186gb: 1}}\n"
# /proc/driver/nvidia/params as the real H200 (580.159.04) prints it, with CoherentGPUMemoryMode set to each value
PARAMS = 'EnableUserNUMAManagement: 1\nCoherentGPUMemoryMode: "{}"\n'
MIXED = ("  - model: h200-141gb\n    devices: [0]\n    mig: {layout: {1g.18gb: 7}}\n"
         "  - model: h200-141gb\n    devices: [1]\n    mig: {enabled: false}\n")
UNITS_NO_KUBELET = {"nvidia-mig-manager.service": ("disabled", "inactive")}
CASES = {
    "ready": Case(SimNode(), {
        "nvidia-smi": ("PASS", "/usr/bin/nvidia-smi answers"),
        "driver": ("PASS", "host driver 580.159.04"),
        "driver-mig": ("PASS", "driver 580.159.04, at least 550.90.07 (h200-141gb)"),
        "gpu-count": ("PASS", "1 GPU(s), as gpu_count says"),
        "gpus/0": ("PASS", "GPU 0: h200-141gb"),
        "coverage": ("PASS", "every GPU is in a gpus entry of its own model"),
        "mig-state": ("NOTE", "GPU 0: MIG Disabled (profile: MIG Enabled, 7x 1g.18gb); the next boot's "
                              "restore replaces this"),
        "nvswitch": ("PASS", "no NVSwitch"),
        "mig-parted": ("PASS", "runs: nvidia-mig-parted version v0.12.1"),
        "kubelet": ("PASS", "kubelet.service exists"),
        "mig-manager": ("PASS", "nvidia-mig-manager.service is disabled and inactive"),
    }, ready=True),
    "wrong-model": Case(SimNode(gpus=[SimGpu(H100)]), {
        "gpus/0": ("FAIL", "GPU 0 is NVIDIA H100 80GB HBM3 (0x233010DE), not h200-141gb "
                           "(0x233510DE, 0x233B10DE)"),
    }, ready=False),
    "too-few-gpus": Case(SimNode(), {
        "gpu-count": ("FAIL", "1 GPU(s) on the node, the profile's gpu_count is 2"),
    }, ready=False, profile={"gpu_count": 2}),
    "no-mig-parted": Case(SimNode(mig_parted=False), {
        "mig-parted": ("FAIL", "/usr/bin/nvidia-mig-parted is missing or not executable"),
    }, ready=False),
    "no-kubelet-unit": Case(SimNode(units=UNITS_NO_KUBELET), {
        "kubelet": ("FAIL", "kubelet.service does not exist, but the profile says kubelet.present: true"),
    }, ready=False),
    "manager-active": Case(SimNode(units={"kubelet.service": ("enabled", "active"),
                                          "nvidia-mig-manager.service": ("enabled", "active")}), {
        "mig-manager": ("FAIL", "nvidia-mig-manager.service is enabled and active: it applies its own config "
                                "(all-disabled by default) at boot and fights the restore; exactly one service "
                                "may apply MIG (mask it: the bake does, and a package upgrade re-enables a unit "
                                "that is only disabled)"),
    }, ready=False),
    "manager-masked": Case(SimNode(units={"kubelet.service": ("enabled", "active"),
                                          "nvidia-mig-manager.service": ("masked", "inactive")}), {
        "mig-manager": ("PASS", "nvidia-mig-manager.service is masked and inactive"),
    }, ready=True),
    "driver-container": Case(SimNode(driver="container"), {
        "driver": ("FAIL", "nvidia/driver exists): it needs kubelet running first, so MIG cannot be restored "
                           "before kubelet; do not apply this boot order here"),
    }, ready=False),
    "no-driver": Case(SimNode(driver="none"), {
        "driver": ("FAIL", "no NVIDIA kernel driver on the host"),
    }, ready=False),
    "no-nvidia-smi": Case(SimNode(nvidia_smi=False), {
        "nvidia-smi": ("FAIL", "/usr/bin/nvidia-smi is missing or not executable"),
        "gpu-count": ("SKIP", "nvidia-smi did not answer"),
        "gpus/0": ("SKIP", "nvidia-smi did not answer"),
        "mig-state": ("SKIP", "nvidia-smi did not answer"),
    }, ready=False),
    "slurm-consumer": Case(SimNode(units={**UNITS_NO_KUBELET, "slurmd.service": ("enabled", "active")}), {
        "consumer/slurmd.service": ("PASS", "slurmd.service exists; its drop-in will order it after the restore"),
    }, ready=True, profile={"kubelet": False, "extra": "consumers: [{unit: slurmd.service}]\n"}),
    "consumer-missing": Case(SimNode(units=UNITS_NO_KUBELET), {
        "consumer/slurmd.service": ("WARN", "slurmd.service does not exist (yet?)"),
    }, ready=True, profile={"kubelet": False, "extra": "consumers: [{unit: slurmd.service}]\n"}),
    "ampere-mode-change": Case(SimNode(gpus=[SimGpu(A100)]), {
        "mig-mode": ("WARN", "GPU 0: MIG Disabled, the profile wants Enabled: on Ampere the change waits for a "
                             "GPU reset, so the first restore reboots the node once to complete it "
                             "(restore.on_reset_required: reboot-once)"),
        "gpu-reset": ("PASS", "neither nvidia_drm, a display server, nvidia-persistenced nor the fabric manager holds"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    "ampere-mode-change-fail": Case(SimNode(gpus=[SimGpu(A100)]), {
        "mig-mode": ("WARN", "so the restore fails until the node is rebooted (restore.on_reset_required: fail)"),
    }, ready=True, profile={"gpus": A100_ENTRY, "extra": "restore: {on_reset_required: fail}\n"}),
    "ampere-mode-current": Case(SimNode(gpus=[SimGpu(A100, mode="Enabled", mig=("7g.80gb",))]), {
        "mig-mode": ("PASS", "no Ampere GPU needs a MIG mode change"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    "ampere-reset-blocked": Case(SimNode(gpus=[SimGpu(A100)], modules="nvidia_drm 122880 0 - Live 0x0\n",
                                         processes=("systemd", "Xorg")), {
        "gpu-reset": ("WARN", "the nvidia_drm module is loaded; a display server runs (Xorg, pid 101): it holds "
                              "the GPU, so the GPU reset of an Ampere MIG mode change fails"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    # persistence mode (NVIDIA/gpu-operator#118) and the fabric manager hold the GPU too; comm keeps 15 characters
    "ampere-reset-held-by-daemons": Case(SimNode(gpus=[SimGpu(A100)],
                                                 processes=("systemd", "nvidia-persiste", "nv-fabricmanage")), {
        "gpu-reset": ("WARN", "nvidia-persistenced runs (persistence mode, pid 101); the fabric manager runs "
                              "(nv-fabricmanager, pid 102): it holds the GPU"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    # the holders matter only while a mode change waits for the reset
    "ampere-reset-held-mode-current": Case(SimNode(gpus=[SimGpu(A100, mode="Enabled", mig=("7g.80gb",))],
                                                   processes=("systemd", "nvidia-persiste")), {
        "mig-mode": ("PASS", "no Ampere GPU needs a MIG mode change"),
        "gpu-reset": ("PASS", "no MIG mode change waits for a GPU reset, so what holds the GPU does not matter "
                              "now: nvidia-persistenced runs (persistence mode, pid 101)"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    "ampere-reset-free": Case(SimNode(gpus=[SimGpu(A100)], processes=("systemd", "sshd")), {
        "gpu-reset": ("PASS", "neither nvidia_drm, a display server, nvidia-persistenced nor the fabric manager"),
    }, ready=True, profile={"gpus": A100_ENTRY}),
    "mig-already-restored": Case(SimNode(gpus=[SimGpu(mode="Enabled", mig=("1g.18gb",) * 7)]), {
        "mig-state": ("PASS", "every GPU already has the profile's MIG state"),
    }, ready=True),
    "other-mig-devices": Case(SimNode(gpus=[SimGpu(mode="Enabled", mig=("3g.71gb", "3g.71gb"))]), {
        "mig-state": ("NOTE", "GPU 0: MIG Enabled, 2x 3g.71gb (profile: MIG Enabled, 7x 1g.18gb); the next "
                              "boot's restore replaces this"),
    }, ready=True),
    "eight-gpus": Case(SimNode(gpus=[SimGpu()] * 8), {
        "gpu-count": ("PASS", "8 GPU(s), as gpu_count says"),
        "gpus/0": ("PASS", "GPU 0,1,2,3,4,5,6,7: h200-141gb"),
        "mig-state": ("NOTE", "GPU 0,1,2,3,4,5,6,7: MIG Disabled (profile"),
    }, ready=True, profile={"gpu_count": 8}),
    "one-wrong-gpu-of-four": Case(SimNode(gpus=[SimGpu(), SimGpu(), SimGpu(H100), SimGpu()]), {
        "gpus/0": ("FAIL", "GPU 2 is NVIDIA H100 80GB HBM3 (0x233010DE), not h200-141gb"),
        "coverage": ("FAIL", "GPU 2 in no gpus entry of its own model"),
    }, ready=False, profile={"gpu_count": None}),
    "listed-gpu-missing": Case(SimNode(gpus=[SimGpu(), SimGpu()]), {
        "gpu-count": ("PASS", "2 GPU(s) (the profile sets no gpu_count)"),
        "gpus/0": ("FAIL", "GPU 3 not found (the node has 2 GPU(s))"),
        "coverage": ("FAIL", "GPU 1 in no gpus entry: nvidia-mig-parted assert then fails (not all GPUs "
                             "match the specified config), and so does the restore at every boot"),
    }, ready=False, profile={"gpu_count": None,
                             "gpus": H200_ENTRY.replace("\n    mig", "\n    devices: [0, 3]\n    mig")}),
    "two-models": Case(SimNode(gpus=[SimGpu(H100), SimGpu(A100), SimGpu(H100)]), {
        "gpus/0": ("PASS", "GPU 0,2: h100-80gb"),
        "gpus/1": ("PASS", "GPU 1: a100-80gb"),
        "mig-state": ("NOTE", "GPU 0,2: MIG Disabled (profile: MIG Enabled, 2x 3g.40gb); GPU 1: MIG Disabled "
                              "(profile: MIG Enabled, 1x 7g.80gb); the next boot's restore replaces this"),
    }, ready=True, profile={"gpu_count": 3, "gpus": TWO_MODELS}),
    "two-models-one-absent": Case(SimNode(gpus=[SimGpu(H100)]), {
        "gpus/0": ("PASS", "GPU 0: h100-80gb"),
        "gpus/1": ("FAIL", "no GPU is a100-80gb (0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE)"),
    }, ready=False, profile={"gpus": TWO_MODELS}),
    # the MIG User Guide's minimum (H200: 550.90.07), and the 570 drivers that strand pods on mixed nodes
    "driver-below-minimum": Case(SimNode(driver_version="550.54.14"), {
        "driver-mig": ("FAIL", "driver 550.54.14 is older than the oldest with MIG on h200-141gb: 550.90.07 "
                               "(MIG User Guide, Deployment Considerations)"),
    }, ready=False),
    "driver-570-mixed": Case(SimNode(gpus=[SimGpu(), SimGpu()], driver_version="570.148.08"), {
        "driver-mig": ("WARN", "driver 570.148.08: with MIG GPUs and full GPUs on one node, drivers 570.124.06, "
                               "570.133.20, 570.148.08 and 570.158.01 leave GPU pods Pending "
                               "(NVIDIA/gpu-operator#1361); upgrade to 570.172.08 or later"),
    }, ready=True, profile={"gpu_count": 2, "gpus": MIXED}),
    "driver-570-fixed-mixed": Case(SimNode(gpus=[SimGpu(), SimGpu()], driver_version="570.172.08"), {
        "driver-mig": ("PASS", "driver 570.172.08, at least 550.90.07 (h200-141gb)"),
    }, ready=True, profile={"gpu_count": 2, "gpus": MIXED}),
    "driver-570-not-mixed": Case(SimNode(driver_version="570.148.08"), {
        "driver-mig": ("PASS", "driver 570.148.08, at least 550.90.07 (h200-141gb)"),
    }, ready=True),
    # CDMM on a Grace system (GPU Operator 25.3.2 release notes): /proc/driver/nvidia/params shows it
    "grace-cdmm-on": Case(SimNode(gpus=[SimGpu(GB200)], params=PARAMS.format("driver")), {
        "cdmm": ("FAIL", 'CoherentGPUMemoryMode: "driver"): MIG does not work with CDMM on gb200-186gb'),
    }, ready=False, profile={"gpus": GB200_ENTRY}),
    "grace-cdmm-off": Case(SimNode(gpus=[SimGpu(GB200)], params=PARAMS.format("numa")), {
        "cdmm": ("PASS", 'CDMM is off'),
    }, ready=True, profile={"gpus": GB200_ENTRY}),
    "grace-cdmm-unset": Case(SimNode(gpus=[SimGpu(GB200)], params=PARAMS.format("")), {
        "cdmm": ("WARN", "does not set CoherentGPUMemoryMode: the driver's default decides"),
    }, ready=True, profile={"gpus": GB200_ENTRY}),
    # restore.cdmm: disabled states what the unset parameter cannot show; a node that says "driver" still fails
    "grace-cdmm-unset-stated": Case(SimNode(gpus=[SimGpu(GB200)], params=PARAMS.format("")), {
        "cdmm": ("PASS", "does not set CoherentGPUMemoryMode (the module's default is numa: no CDMM), and the "
                         "profile states restore.cdmm: disabled"),
    }, ready=True, profile={"gpus": GB200_ENTRY, "extra": "restore: {cdmm: disabled}\n"}),
    "grace-cdmm-on-stated": Case(SimNode(gpus=[SimGpu(GB200)], params=PARAMS.format("driver")), {
        "cdmm": ("FAIL", 'CoherentGPUMemoryMode: "driver"): MIG does not work with CDMM on gb200-186gb'),
    }, ready=False, profile={"gpus": GB200_ENTRY, "extra": "restore: {cdmm: disabled}\n"}),
    # GB200 boards of one PCI id name the same instances two ways (NVIDIA/mig-parted#227): by profile id and memory
    "gb200-other-board-names": Case(SimNode(gpus=[SimGpu(GB200, mode="Enabled", mig=("7g.189gb",))]), {
        "mig-state": ("FAIL", "GPU 0: MIG Enabled, 1x 7g.189gb, the profile's instances as gb200-189gb's boards name "
                              "them (matched by GPU-instance profile id and memory, NVIDIA/mig-parted#227): "
                              "mig-parted applies names literally, so the restore's apply fails with gb200-186gb's "
                              "names here; write model: gb200-189gb"),
    }, ready=False, profile={"gpus": GB200_ENTRY}),
    "gb200-own-board-names": Case(SimNode(gpus=[SimGpu(GB200, mode="Enabled", mig=("7g.186gb",))]), {
        "mig-state": ("PASS", "every GPU already has the profile's MIG state"),
    }, ready=True, profile={"gpus": GB200_ENTRY}),
    # an HGX board: the nvswitch driver lists its switches; MIG devices get no NVLink peer access (NVIDIA/nccl#1716)
    "hgx-nvswitch": Case(SimNode(nvswitches=("0000:05:00.0", "0000:06:00.0")), {
        "nvswitch": ("WARN", "2 NVSwitch device(s)"),
    }, ready=True),
    "device-filter-always-other-model": Case(SimNode(gpus=[SimGpu(), SimGpu(H100)]), {
        "gpus/0": ("PASS", "GPU 0: h200-141gb"),
        "coverage": ("FAIL", "GPU 1 in no gpus entry"),
    }, ready=False, profile={"gpu_count": 2, "extra": "device_filter: always\n"}),
    "device-filter-auto-other-model": Case(SimNode(gpus=[SimGpu(), SimGpu(H100)]), {
        "gpus/0": ("FAIL", "GPU 1 is NVIDIA H100 80GB HBM3 (0x233010DE), not h200-141gb"),
        # the same table cannot say PASS here: the entry of the other model is applied to GPU 1 and fails
        "coverage": ("FAIL", "GPU 1 in no gpus entry of its own model (the entry listing it is another "
                             "model's, see above): the restore applies that layout to it and fails at every boot"),
    }, ready=False, profile={"gpu_count": 2}),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_script_on_a_simulated_node(tmp_path: Path, case: Case) -> None:
    ran = preflight_node(tmp_path, case.node, **case.profile)
    assert ran.report["ready"] is case.ready
    assert ran.rc == (0 if case.ready else 1), ran.stderr
    for check, (status, detail) in case.expect.items():
        assert ran.status[check] == status, (check, ran.detail[check])
        assert detail in ran.detail[check], (check, ran.detail[check])
    if case.ready:
        assert "FAIL" not in ran.status.values()
    assert ran.stderr == ""


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_script_only_reads(tmp_path: Path, case: Case) -> None:
    calls = preflight_node(tmp_path, case.node, **case.profile).calls
    assert calls
    for call in calls:
        assert call.startswith(READ_ONLY_CALLS), call


def test_script_table_and_usage(tmp_path: Path) -> None:
    rc, out, err, _ = run_script(tmp_path, SimNode(), profile_yaml(Path("@ROOT@")))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("migbake preflight: profile sim on ")
    assert lines[1].split() == ["CHECK", "STATUS", "DETAIL"]
    assert lines[2].startswith("nvidia-smi   PASS   ")
    assert lines[4].startswith("pci-gpus     PASS   1 NVIDIA GPU(s) on the PCI bus: 0000:18:00.0 (0x2335)")
    assert lines[-1] == "READY: no check failed."
    script = tmp_path / "out" / SCRIPT
    for bad in (["--bogus"], ["--json", "--json"], ["json"]):
        ran = run([str(script), *bad])
        assert (ran.rc, ran.out) == (2, ""), bad
        assert ran.err.startswith("usage: preflight-mig-restore.sh [--json]")
    assert run([str(script), "--help"]).rc == 0


def _status_columns(table: str) -> set[int]:
    """Where the STATUS column starts on the header and on every row of a preflight table."""
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("CHECK "))
    rows = lines[head + 1: lines.index("", head)]
    assert rows, table
    found = {lines[head].index("STATUS")}
    for row in rows:
        name, status = row.split()[:2]
        assert status in ("PASS", "WARN", "NOTE", "FAIL", "SKIP"), row
        found.add(row.index(f" {status} ", len(name)) + 1)
    return found


def test_a_long_check_name_keeps_the_columns(tmp_path: Path) -> None:
    # consumer/slurmd.service is longer than the 12 characters the other names fit in
    profile = profile_yaml(Path("@ROOT@"), kubelet=False, extra="consumers: [{unit: slurmd.service}]\n")
    (tmp_path / "script").mkdir()
    rc, out, err, _ = run_script(tmp_path / "script", SimNode(), profile)
    assert rc == 0 and "consumer/slurmd.service " in out and len(_status_columns(out)) == 1, out
    root = tmp_path / "capture"
    root.mkdir()
    capture = root / "gpus.csv"
    capture.write_text("0, NVIDIA H200, 0x233510DE, Disabled\n")
    (root / "p.yaml").write_text(profile.replace("@ROOT@", str(root)))
    code, out, err = cli("preflight", str(root / "p.yaml"), "--nvidia-smi-csv", str(capture))
    assert code == 0 and "consumer/slurmd.service " in out and len(_status_columns(out)) == 1, out + err


def test_script_json_escapes_what_nvidia_smi_prints(tmp_path: Path) -> None:
    odd = SimGpu(('NVIDIA "H100" \\ 80GB', "0x233010de"))
    ran = preflight_node(tmp_path, SimNode(gpus=[odd]))
    assert ran.status["gpus/0"] == "FAIL"
    assert ran.detail["gpus/0"].startswith("NVIDIA GPU(s) on this machine that are not the profile's models: "
                                         'GPU 0 is NVIDIA "H100" \\ 80GB (0x233010DE), not h200-141gb')


SHELLCHECKED = {
    "one-model": (H200_ENTRY, 1, ""),
    "two-models-filtered": (TWO_MODELS, None, ""),
    "fixed-indices-no-filter": ("  - model: h100-80gb\n    devices: [0, 2]\n    mig: {layout: {3g.40gb: 2}}\n"
                                "  - model: a100-80gb\n    devices: [1]\n    mig: {enabled: false}\n", 3,
                                "device_filter: never\n"),
}


@pytest.mark.realtool
@pytest.mark.parametrize(("gpus", "count", "extra"), list(SHELLCHECKED.values()), ids=list(SHELLCHECKED))
def test_generated_script_passes_shellcheck(tmp_path: Path, gpus: str, count: int | None, extra: str) -> None:
    profile = profile_yaml(tmp_path, gpus=gpus, gpu_count=count, extra=extra)
    script = generate(profile, tmp_path / "out") / SCRIPT
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n# Generated by migbake ")
    assert "\nset -euo pipefail\n" in text
    assert f"\nsmi='{tmp_path}/usr/bin/nvidia-smi'\n" in text
    ran = shellcheck([script])
    assert ran.rc == 0, ran.text
    assert bash_n(script).rc == 0
    assert os.access(script, os.X_OK)


def test_group_lines_carry_python_computed_values(tmp_path: Path) -> None:
    gpus, count, extra = SHELLCHECKED["fixed-indices-no-filter"]
    text = generate(profile_yaml(tmp_path, gpus=gpus, gpu_count=count, extra=extra), tmp_path / "out")
    lines = [line for line in (text / SCRIPT).read_text().splitlines() if line.startswith("check_group '")]
    assert lines == [
        "check_group 'gpus/0' 'h100-80gb' '0x233010DE 0x233110DE 0x232210DE 0x232410DE' '0 2' 'no' "
        "'MIG Enabled, 2x 3g.40gb' 'no'",
        "check_group 'gpus/1' 'a100-80gb' '0x20B210DE 0x20B510DE 0x20F310DE 0x20F510DE' '1' 'no' "
        "'MIG Disabled' 'yes'",
    ]


# --- both forms agree --------------------------------------------------------------------------

AGREE = {k: c for k, c in CASES.items() if c.node.nvidia_smi}


@pytest.mark.parametrize("form", ["csv", "xml"])
@pytest.mark.parametrize("case", list(AGREE.values()), ids=list(AGREE))
def test_script_and_migbake_preflight_agree(tmp_path: Path, case: Case, form: str) -> None:
    live = preflight_node(tmp_path, case.node, **case.profile)
    capture = tmp_path / f"capture.{form}"
    capture.write_text(case.node.xml() if form == "xml" else case.node.query_csv())
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(profile_yaml(tmp_path / "node", **case.profile))
    code, out, err = cli("preflight", str(profile), f"--nvidia-smi-{form}", str(capture), "--json")
    offline = json.loads(out)
    assert [c["check"] for c in offline["checks"]] == [c["check"] for c in live.report["checks"]]
    compared = 0
    for c in offline["checks"]:
        if c["status"] == "SKIP":
            continue
        name = c["check"]
        compared += 1
        assert c["status"] == live.status[name], (name, c["detail"], live.detail[name])
        if name in HARDWARE_CHECKS_WORDED_ALIKE or name.startswith("gpus/"):
            assert c["detail"] == live.detail[name]
    assert compared >= 3
    hardware_ready = not any(c["status"] == "FAIL" for c in offline["checks"])
    assert offline["ready"] is hardware_ready and code == (0 if hardware_ready else 1), err
    if live.report["ready"]:
        assert offline["ready"]


def test_offline_mig_state_is_skip_when_the_capture_cannot_name_the_devices() -> None:
    node = SimNode(gpus=[SimGpu(mode="Enabled", mig=("3g.71gb",) * 7)])  # 7 devices, the wrong ones
    from migbake.node.preflight import check_capture
    from migbake.rules.validate import check_bytes

    checked = check_bytes(profile_yaml(Path("/opt")).encode(), "p.yaml")
    assert checked.profile is not None
    for capture in (parse_xml(node.xml().encode(), "q.xml"), parse_csv(node.query_csv(), "q.csv")):
        state = {c.name: c for c in check_capture(checked.profile, capture).checks}["mig-state"]
        assert state.status == "SKIP" and "does not name the MIG devices' profiles" in state.detail


# --- named layouts: no GPU, and a layout file that kubelet's label disagrees with ------------------

NAMED = "  - model: h200-141gb\n    mig: {layouts: {infer: {1g.18gb: 7}, train: {7g.141gb: 1}}}\n"


def _named(tmp_path: Path, sources: str, kubelet: str = "", extra: str = "") -> Ran:
    profile = profile_yaml(Path("@ROOT@"), gpus=NAMED, extra=f"restore:\n  layout: {{from: [{sources}]}}\n{extra}")
    if kubelet:
        profile = profile.replace("kubelet: {present: true}", f"kubelet: {{present: true, layout: {kubelet}}}")
    rc, out, err, calls = run_script(tmp_path, SimNode(), profile, "--json")
    return Ran(rc, json.loads(out), calls, err)


@pytest.mark.parametrize("no_gpu", ["succeed", "fail"])
def test_without_a_gpu_the_layout_row_agrees_with_the_pci_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              no_gpu: str) -> None:
    from support import fake_sysfs

    WORLD.point("sys", str(fake_sysfs(tmp_path / "sys", [])))
    WORLD.point("root", str(tmp_path / "empty-root"))  # no source gives a name, no default
    ran = preflight_node(tmp_path, SimNode(gpus=[], nvidia_smi=False, mig_parted=False, driver="none"), gpus=NAMED,
                         extra=f"restore:\n  no_gpu: {no_gpu}\n  layout: {{from: [file]}}\n")
    # the restore stops at the PCI bus before it reads a name: it neither fails for want of one nor applies one
    assert ran.status["layout"] == "SKIP", ran.detail["layout"]
    assert "reads no layout name" in ran.detail["layout"]
    failing = [c for c, s in ran.status.items() if s == "FAIL"]
    if no_gpu == "succeed":
        assert ran.rc == 0 and ran.report["ready"] is True and failing == [], ran.report
        assert "the restore succeeds" in ran.detail["pci-gpus"]
        assert not any("fails" in d for d in ran.detail.values()), ran.detail
    else:
        assert ran.rc == 1 and failing == ["pci-gpus"], ran.report


KUBELET_LABEL = "KUBELET_EXTRA_ARGS=--node-labels=team=a,nvidia.com/mig.config=infer\n"


@pytest.mark.parametrize(("sources", "kubelet", "file", "status", "detail"), [
    # the restore gives kubelet the file's name after kubelet's own label: the node says train, as its GPUs
    ("file, kubelet-labels", "kubeadm", "train", "WARN", "the restore uses train (from file, the first source"),
    # kubelet's label comes first: the file (an Ansible move, user data) is never used
    ("kubelet-labels, file", "kubeadm", "train", "WARN", "the restore uses infer (from kubelet-labels"),
    # the profile does not read kubelet's label, and cannot give kubelet its own: the node says infer, has train
    ("file", "generic", "train", "FAIL", "kubelet registers the node with its own label"),
    ("file, kubelet-labels", "kubeadm", "infer", "PASS", "layout infer, from file"),
], ids=["file-first", "label-first", "label-unreachable", "agree"])
def test_a_layout_file_and_kubelets_label_that_disagree_are_flagged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: str, kubelet: str, file: str, status: str,
        detail: str) -> None:
    root = tmp_path / "layout-root"
    (root / "etc/migbake").mkdir(parents=True)
    (root / "etc/migbake/layout").write_text(file + "\n")
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/kubelet").write_text(KUBELET_LABEL)
    WORLD.point("root", str(root))
    ran = _named(tmp_path, sources, kubelet)
    assert ran.status["layout"] == status, ran.detail["layout"]
    assert detail in ran.detail["layout"], ran.detail["layout"]
    if status != "PASS":
        assert "the layout file /etc/migbake/layout says train but kubelet's label says nvidia.com/mig.config=infer" \
            in ran.detail["layout"]
    if status == "FAIL":
        assert ran.rc == 1 and ran.report["ready"] is False


@pytest.mark.parametrize("printed", [b"NVIDIA H100 \xff\xfe 80GB", b"NVIDIA \xc2\x9b31mH100\xc2\x85 80GB",
                                     b"NVIDIA \xe2\x80\xae H100 \xc3"], ids=["not-utf8", "c1-controls", "cut-utf8"])
@pytest.mark.parametrize("fails", [False, True], ids=["answers", "fails"])
def test_script_escapes_bytes_nvidia_smi_prints_that_are_not_text(tmp_path: Path, printed: bytes, fails: bool) -> None:
    root = tmp_path / "node"
    root.mkdir()
    env = install(SimNode(gpus=[SimGpu(("NVIDIA H100 80GB HBM3", "0x233010de"))]), root)
    (root / "query.csv").write_bytes(b"0, " + printed + b", 0x233010de, Disabled\n")  # the stub nvidia-smi prints it
    if fails:  # a driver that cannot answer says why in bytes of its own (its first line is the detail)
        smi = root / "usr/bin/nvidia-smi"
        smi.write_text(f"#!/bin/sh\ncat '{root}/query.csv'\nexit 9\n")
    out = generate(profile_yaml(root), tmp_path / "out")
    for args in (["--json"], []):
        p = subprocess.run([str(out / SCRIPT), *args], env={**os.environ, **env}, capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL, check=False)
        text = p.stdout.decode("utf-8")  # strict: a byte that is not UTF-8 fails here
        assert not any("\x80" <= ch <= "\x9f" for ch in text), text
        if args:
            detail = {c["check"]: c["detail"] for c in json.loads(text)["checks"]}["nvidia-smi" if fails else "gpus/0"]
            assert "\\x" in detail, detail  # what was not text is shown as its bytes
