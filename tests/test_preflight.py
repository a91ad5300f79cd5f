"""Preflight: the generated script on simulated nodes, `migbake preflight` on the real H200 captures, and
both forms agreeing check by check on the same simulated node."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from realtools import bash_n, run, shellcheck
from support import H200_FIXTURES, cli, generate

from migbake.capture import CaptureError, parse_csv, parse_xml

FIXTURES = H200_FIXTURES
SCRIPT = "scripts/preflight-mig-restore.sh"
QUERY = "--query-gpu=index,name,pci.device_id,mig.mode.current --format=csv,noheader"
HARDWARE_CHECKS_WORDED_ALIKE = ("gpu-count", "coverage")  # and every gpus/N

H200 = ("NVIDIA H200", "0x233510DE")
H100 = ("NVIDIA H100 80GB HBM3", "0x233010DE")
A100 = ("NVIDIA A100-SXM4-80GB", "0x20B210DE")
H200_ENTRY = "  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"


def fixtures() -> Path:
    """The real H200 captures (tests/fixtures/h200)."""
    return FIXTURES


# --- a simulated node --------------------------------------------------------------------------

@dataclass
class SimGpu:
    """One GPU: what nvidia-smi reports about it, and its MIG devices (as nvidia-smi -L names them)."""

    model: tuple[str, str] = H200
    mode: str = "Disabled"
    mig: tuple[str, ...] = ()


@dataclass
class SimNode:
    """A node as the preflight sees it: tools, units (is-enabled, is-active), driver, GPUs."""

    gpus: list[SimGpu] = field(default_factory=lambda: [SimGpu()])
    units: dict[str, tuple[str, str]] = field(default_factory=lambda: {
        "kubelet.service": ("enabled", "active"), "nvidia-mig-manager.service": ("disabled", "inactive")})
    nvidia_smi: bool = True
    mig_parted: bool = True
    driver: Literal["host", "container", "none"] = "host"
    modules: str = ""  # /proc/modules
    processes: tuple[str, ...] = ()  # the comm of each running process (/proc/PID/comm)

    def query_csv(self) -> str:
        return "".join(f"{i}, {g.model[0]}, {g.model[1]}, {g.mode}\n" for i, g in enumerate(self.gpus))

    def listing(self) -> str:
        lines = []
        for i, g in enumerate(self.gpus):
            lines.append(f"GPU {i}: {g.model[0]} (UUID: GPU-00000000-0000-0000-0000-00000000000{i})")
            lines += [f"  MIG {name:<12} Device {j:>2}: (UUID: MIG-{i}-{j})" for j, name in enumerate(g.mig)]
        return "\n".join(lines) + "\n"

    def xml(self) -> str:
        gpus = []
        for i, g in enumerate(self.gpus):
            devices = "".join(f"<mig_device><index>{j}</index><gpu_instance_id>{j + 1}</gpu_instance_id>"
                              "<compute_instance_id>0</compute_instance_id></mig_device>"
                              for j in range(len(g.mig)))
            gpus.append(f'<gpu id="00000000:{i:02x}:00.0"><product_name>{g.model[0]}</product_name>'
                        f"<mig_mode><current_mig>{g.mode}</current_mig><pending_mig>{g.mode}</pending_mig>"
                        f"</mig_mode><mig_devices>{devices or 'None'}</mig_devices>"
                        f"<pci><pci_device_id>{g.model[1][2:]}</pci_device_id></pci></gpu>")
        return ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n'
                f"<nvidia_smi_log><attached_gpus>{len(gpus)}</attached_gpus>{''.join(gpus)}</nvidia_smi_log>\n")


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def install(node: SimNode, root: Path) -> dict[str, str]:
    """Fake nvidia-smi / nvidia-mig-parted at root/usr/bin, fake systemctl first on PATH, /proc and /run
    under root. Every call is logged to root/calls; anything not read-only exits 97. Returns the env."""
    log = root / "calls"
    (root / "query.csv").write_text(node.query_csv())
    (root / "listing.txt").write_text(node.listing())
    if node.nvidia_smi:
        _exe(root / "usr/bin/nvidia-smi", f"""#!/bin/sh
printf 'nvidia-smi %s\\n' "$*" >> '{log}'
case "$*" in
  '{QUERY}') cat '{root}/query.csv' ;;
  -L) cat '{root}/listing.txt' ;;
  *) echo "fake nvidia-smi: refusing $*" >&2; exit 97 ;;
esac
""")
    if node.mig_parted:
        _exe(root / "usr/bin/nvidia-mig-parted", f"""#!/bin/sh
printf 'nvidia-mig-parted %s\\n' "$*" >> '{log}'
case "$*" in
  --version) echo 'nvidia-mig-parted version v0.12.1' ;;
  help) echo 'usage: nvidia-mig-parted' ;;
  *) echo "fake nvidia-mig-parted: refusing $*" >&2; exit 97 ;;
esac
""")
    for unit, (enabled, active) in node.units.items():
        (root / "units").mkdir(exist_ok=True)
        (root / "units" / unit).write_text(f"{enabled}\n{active}\n")
    _exe(root / "sbin/systemctl", f"""#!/bin/sh
printf 'systemctl %s\\n' "$*" >> '{log}'
verb=$1; shift; unit=
for a in "$@"; do case $a in -*) ;; *) unit=$a ;; esac; done
state='{root}/units/'$unit
case $verb in
  cat) if [ -f "$state" ]; then echo "# /usr/lib/systemd/system/$unit"
       else echo "No files found for $unit." >&2; exit 1; fi ;;
  list-unit-files) if [ -f "$state" ]; then echo "$unit $(sed -n 1p "$state") enabled"; else exit 1; fi ;;
  is-enabled) [ -f "$state" ] || exit 1; s=$(sed -n 1p "$state"); echo "$s"; [ "$s" = enabled ] ;;
  is-active) s=inactive; [ ! -f "$state" ] || s=$(sed -n 2p "$state"); echo "$s"; [ "$s" = active ] ;;
  *) echo "fake systemctl: refusing $verb" >&2; exit 97 ;;
esac
""")
    if node.driver != "none":
        version = root / "proc/driver/nvidia/version"
        version.parent.mkdir(parents=True)
        version.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release "
                           "Build  (nixbld@)\nGCC version:  gcc version 15.3.0 (GCC)\n")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/modules").write_text(node.modules)
    for pid, comm in enumerate(node.processes, start=100):
        (root / f"proc/{pid}").mkdir()
        (root / f"proc/{pid}/comm").write_text(comm + "\n")
    (root / "run").mkdir()
    if node.driver == "container":
        (root / "run/nvidia/driver/usr/bin").mkdir(parents=True)
    return {"PATH": f"{root / 'sbin'}:{os.environ['PATH']}", "MIGBAKE_PREFLIGHT_PROC": str(root / "proc"),
            "MIGBAKE_PREFLIGHT_RUN": str(root / "run")}


def profile_yaml(root: Path, gpus: str = H200_ENTRY, gpu_count: int | None = 1, kubelet: bool = True,
                 extra: str = "") -> str:
    """A profile whose tools point into root/usr/bin."""
    count = f"gpu_count: {gpu_count}\n" if gpu_count is not None else ""
    return (f"version: 1\nname: sim\n{count}gpus:\n{gpus}kubelet: {{present: {str(kubelet).lower()}}}\n"
            f"tools: {{nvidia_smi: {root}/usr/bin/nvidia-smi, "
            f"nvidia_mig_parted: {root}/usr/bin/nvidia-mig-parted}}\n{extra}")


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
UNITS_NO_KUBELET = {"nvidia-mig-manager.service": ("disabled", "inactive")}
CASES = {
    "ready": Case(SimNode(), {
        "nvidia-smi": ("PASS", "/usr/bin/nvidia-smi answers"),
        "driver": ("PASS", "host driver 580.159.04"),
        "gpu-count": ("PASS", "1 GPU(s), as gpu_count says"),
        "gpus/0": ("PASS", "GPU 0: h200-141gb"),
        "coverage": ("PASS", "every GPU is in a gpus entry"),
        "mig-state": ("NOTE", "GPU 0: MIG Disabled (profile: MIG Enabled, 7x 1g.18gb); the next boot's "
                              "restore replaces this"),
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
        "gpu-reset": ("PASS", "neither nvidia_drm nor a display server holds the GPU"),
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
    "device-filter-always-other-model": Case(SimNode(gpus=[SimGpu(), SimGpu(H100)]), {
        "gpus/0": ("PASS", "GPU 0: h200-141gb"),
        "coverage": ("FAIL", "GPU 1 in no gpus entry"),
    }, ready=False, profile={"gpu_count": 2, "extra": "device_filter: always\n"}),
    "device-filter-auto-other-model": Case(SimNode(gpus=[SimGpu(), SimGpu(H100)]), {
        "gpus/0": ("FAIL", "GPU 1 is NVIDIA H100 80GB HBM3 (0x233010DE), not h200-141gb"),
        "coverage": ("PASS", "every GPU is in a gpus entry"),
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
    assert lines[-1] == "READY: no check failed."
    script = tmp_path / "out" / SCRIPT
    for bad in (["--bogus"], ["--json", "--json"], ["json"]):
        ran = run([str(script), *bad])
        assert (ran.rc, ran.out) == (2, ""), bad
        assert ran.err.startswith("usage: preflight-mig-restore.sh [--json]")
    assert run([str(script), "--help"]).rc == 0


def test_script_json_escapes_what_nvidia_smi_prints(tmp_path: Path) -> None:
    odd = SimGpu(('NVIDIA "H100" \\ 80GB', "0x233010de"))
    ran = preflight_node(tmp_path, SimNode(gpus=[odd]))
    assert ran.status["gpus/0"] == "FAIL"
    assert ran.detail["gpus/0"].startswith('GPU 0 is NVIDIA "H100" \\ 80GB (0x233010DE), not h200-141gb')


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
    from migbake.preflight import check_capture
    from migbake.validate import check_bytes

    checked = check_bytes(profile_yaml(Path("/opt")).encode(), "p.yaml")
    assert checked.profile is not None
    for capture in (parse_xml(node.xml().encode(), "q.xml"), parse_csv(node.query_csv(), "q.csv")):
        state = {c.name: c for c in check_capture(checked.profile, capture).checks}["mig-state"]
        assert state.status == "SKIP" and "does not name the MIG devices' profiles" in state.detail


# --- migbake preflight on the real H200 captures -----------------------------------------------

REAL_PROFILE = """version: 1
name: real-h200
{count}gpus:
  - model: {model}
    mig: {{layout: {layout}}}
tools: {{nvidia_smi: /usr/local/nvidia/bin/nvidia-smi}}
"""
REAL_CAPTURES = [("xml", "nvidia-smi-q.xml"), ("csv", "nvidia-smi-query-preflight.csv"),
                 ("csv", "nvidia-smi-query-gpu.csv"), ("csv", "nvidia-smi-query-extended.csv")]


def _real(tmp_path: Path, form: str, name: str, model: str = "h200-141gb", layout: str = "{1g.18gb: 7}",
          count: str = "gpu_count: 1\n", *extra: str) -> tuple[int, str, str]:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(REAL_PROFILE.format(model=model, layout=layout, count=count))
    return cli("preflight", str(profile), f"--nvidia-smi-{form}", str(fixtures() / name), *extra)


@pytest.mark.parametrize(("form", "name"), REAL_CAPTURES, ids=[n for _, n in REAL_CAPTURES])
def test_real_h200_is_ready_for_a_one_gpu_h200_profile(tmp_path: Path, form: str, name: str) -> None:
    code, out, err = _real(tmp_path, form, name)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[1].split() == ["CHECK", "STATUS", "DETAIL"]
    assert "gpus/0       PASS   GPU 0: h200-141gb" in lines
    assert "gpu-count    PASS   1 GPU(s), as gpu_count says" in lines
    assert ("mig-state    NOTE   GPU 0: MIG Disabled (profile: MIG Enabled, 7x 1g.18gb); the next boot's "
            "restore replaces this") in lines
    assert lines[-1].startswith("READY: no check failed (7 skipped; ")


@pytest.mark.parametrize(("form", "name"), REAL_CAPTURES, ids=[n for _, n in REAL_CAPTURES])
def test_real_h200_is_not_ready_for_an_h100_profile(tmp_path: Path, form: str, name: str) -> None:
    code, out, _ = _real(tmp_path, form, name, "h100-80gb", "{3g.40gb: 2}", "gpu_count: 1\n", "--json")
    report = json.loads(out)
    assert code == 1 and report["ready"] is False
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert failed == [{"check": "gpus/0", "status": "FAIL", "detail": "GPU 0 is NVIDIA H200 (0x233510DE), "
                       "not h100-80gb (0x233010DE, 0x233110DE, 0x232210DE, 0x232410DE)"}]


@pytest.mark.parametrize(("form", "name"), REAL_CAPTURES, ids=[n for _, n in REAL_CAPTURES])
def test_real_h200_is_not_ready_for_a_two_gpu_profile(tmp_path: Path, form: str, name: str) -> None:
    code, out, _ = _real(tmp_path, form, name, "h200-141gb", "{1g.18gb: 7}", "gpu_count: 2\n")
    assert code == 1
    assert "gpu-count    FAIL   1 GPU(s) on the node, the profile's gpu_count is 2" in out.splitlines()
    assert out.splitlines()[-1].startswith("NOT READY: 1 check(s) failed")


def test_real_captures_parse_alike() -> None:
    xml = parse_xml((fixtures() / "nvidia-smi-q.xml").read_bytes(), "q.xml").gpus
    csvs = [parse_csv((fixtures() / n).read_text(), n).gpus for f, n in REAL_CAPTURES if f == "csv"]
    assert [(g.index, g.name, g.pci_device_id, g.mig_mode) for g in xml] == [(0, "NVIDIA H200", "0x233510DE",
                                                                             "Disabled")]
    assert xml[0].mig_device_count == 0
    for gpus in csvs:
        assert [(g.index, g.name, g.pci_device_id, g.mig_mode) for g in gpus] == [
            (g.index, g.name, g.pci_device_id, g.mig_mode) for g in xml]


# --- captures that are refused -----------------------------------------------------------------

def test_xml_with_entities_is_refused_before_expansion(tmp_path: Path) -> None:
    real = (fixtures() / "nvidia-smi-q.xml").read_text()
    laughs = real.replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
                          '<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa">'
                          '<!ENTITY b "&a;&a;&a;&a;&a;&a;">]>')
    laughs = laughs.replace("<product_name>NVIDIA H200</product_name>", "<product_name>&b;</product_name>")
    assert laughs != real
    bad = tmp_path / "laughs.xml"
    bad.write_text(laughs)
    profile = tmp_path / "p.yaml"
    profile.write_text(REAL_PROFILE.format(model="h200", layout="{1g.18gb: 7}", count=""))
    code, out, err = cli("preflight", str(profile), "--nvidia-smi-xml", str(bad))
    assert (code, out) == (2, "")
    assert "internal subset" in err and "refused" in err
    external = tmp_path / "evil.dtd"
    external.write_text('<!ENTITY xxe "EXPANDED">\n')
    xxe = real.replace("nvsmi_device_v13.dtd", external.as_uri()).replace("NVIDIA H200<", "&xxe;<")
    with pytest.raises(CaptureError, match="undefined entity"):  # the external DTD is never read
        parse_xml(xxe.encode(), "xxe.xml")


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    ("0, NVIDIA H200, 0x233510DE\n", "3 fields"),
    ("GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "1 fields"),
    ("index, name, mig.mode.current\n0, NVIDIA H200, Disabled\n", "no column pci.device_id"),
], ids=["empty", "missing-column", "nvidia-smi-L", "header-without-pci-id"])
def test_bad_csv_is_refused(text: str, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        parse_csv(text, "q.csv")


def test_csv_with_and_without_header_and_any_case_pci_ids() -> None:
    plain = parse_csv("0, NVIDIA H200, 0x233510de, Enabled\n1, NVIDIA H200, 0X233510DE, Disabled\n", "a")
    header = parse_csv("pci.device_id, mig.mode.current, index, name\n233510de, Enabled, 0, NVIDIA H200\n"
                       "0x233510DE, Disabled, 1, NVIDIA H200\n", "b")
    assert plain.gpus == header.gpus
    assert [g.pci_device_id for g in plain.gpus] == ["0x233510DE", "0x233510DE"]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(REAL_PROFILE.format(model="h200", layout="{1g.18gb: 7}", count=""))
    capture = tmp_path / "q.csv"
    capture.write_text("0, NVIDIA H200, 0x233510DE, Disabled\n")
    assert cli("preflight", str(profile))[0] == 2
    both = ("--nvidia-smi-csv", str(capture), "--nvidia-smi-xml", str(capture))
    assert cli("preflight", str(profile), *both)[0] == 2
    assert cli("preflight", str(profile), "--nvidia-smi-csv", str(tmp_path / "missing.csv"))[0] == 2
    # a missing (or directory) profile is invalid input, as for every command: exit 1
    assert cli("preflight", str(tmp_path / "missing.yaml"), "--nvidia-smi-csv", str(capture))[0] == 1
    assert cli("preflight", str(tmp_path), "--nvidia-smi-csv", str(capture))[0] == 1
    assert cli("preflight", str(profile), "--nvidia-smi-xml", str(capture))[0] == 2  # CSV is not XML
    assert cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))[0] == 0
    profile.write_text("version: 1\nname: x\ngpus: [{model: h300}]\n")
    code, _, err = cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))
    assert code == 1 and "unknown GPU model" in err
