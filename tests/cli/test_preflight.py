"""Preflight: `migbake preflight` on the real H200 captures and on captures it refuses, and the simulated node
the generated script runs on (test_preflight_script.py, test_gpu_operator.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from support import H200_FIXTURES, REPO, WORLD, cli

from migbake.node.nvidiasmi import CaptureError, parse_csv, parse_xml

FIXTURES = H200_FIXTURES
SCRIPT = "scripts/preflight-mig-restore.sh"
QUERY = "--query-gpu=index,name,pci.device_id,mig.mode.current --format=csv,noheader"

H200 = ("NVIDIA H200", "0x233510DE")
H100 = ("NVIDIA H100 80GB HBM3", "0x233010DE")
A100 = ("NVIDIA A100-SXM4-80GB", "0x20B210DE")
GB200 = ("NVIDIA GB200", "0x294110DE")
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
    driver_version: str = "580.159.04"  # /proc/driver/nvidia/version, and nvidia-smi -q -x's <driver_version>
    params: str = ""  # /proc/driver/nvidia/params ("" none)
    nvswitches: tuple[str, ...] = ()  # /proc/driver/nvidia-nvswitch/devices/<BDF>
    modules: str = ""  # /proc/modules
    processes: tuple[str, ...] = ()  # the comm of each running process (/proc/PID/comm)
    unit_text: dict[str, str] = field(default_factory=dict)  # what `systemctl cat UNIT` prints (else a header)
    files: dict[str, str] = field(default_factory=dict)  # more files under the node's root (executable)

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
        # the script reads the version of a host driver only: the capture says it then too
        driver = f"<driver_version>{self.driver_version}</driver_version>" if self.driver == "host" else ""
        return ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n'
                f"<nvidia_smi_log>{driver}"
                f"<attached_gpus>{len(gpus)}</attached_gpus>{''.join(gpus)}</nvidia_smi_log>\n")


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
    for rel, text in node.files.items():
        _exe(root / rel, text)
    for unit, text in node.unit_text.items():
        (root / "unittext").mkdir(exist_ok=True)
        (root / "unittext" / unit).write_text(text)
    for unit, (enabled, active) in node.units.items():
        (root / "units").mkdir(exist_ok=True)
        (root / "units" / unit).write_text(f"{enabled}\n{active}\n")
    _exe(root / "sbin/systemctl", f"""#!/bin/sh
printf 'systemctl %s\\n' "$*" >> '{log}'
verb=$1; shift; unit=
for a in "$@"; do case $a in -*) ;; *) unit=$a ;; esac; done
state='{root}/units/'$unit
case $verb in
  cat) if [ -f '{root}/unittext/'$unit ]; then cat '{root}/unittext/'$unit
       elif [ -f "$state" ]; then echo "# /usr/lib/systemd/system/$unit"
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
        version.write_text(f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {node.driver_version}  Release "
                           "Build  (nixbld@)\nGCC version:  gcc version 15.3.0 (GCC)\n")
        if node.params:
            (version.parent / "params").write_text(node.params)
    for bdf in node.nvswitches:
        (root / "proc/driver/nvidia-nvswitch/devices" / bdf).mkdir(parents=True)
        (root / "proc/driver/nvidia-nvswitch/devices" / bdf / "information").write_text("Fabric State: Configured\n")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/modules").write_text(node.modules)
    for pid, comm in enumerate(node.processes, start=100):
        (root / f"proc/{pid}").mkdir()
        (root / f"proc/{pid}/comm").write_text(comm + "\n")
    (root / "run").mkdir()
    if node.driver == "container":
        (root / "run/nvidia/driver/usr/bin").mkdir(parents=True)
    WORLD.point("proc", root / "proc")  # the test copy of preflight reads them (support.NodeWorld)
    WORLD.point("run", root / "run")
    return {"PATH": f"{root / 'sbin'}:{os.environ['PATH']}"}


def profile_yaml(root: Path, gpus: str = H200_ENTRY, gpu_count: int | None = 1, kubelet: bool = True,
                 extra: str = "") -> str:
    """A profile whose tools point into root/usr/bin."""
    count = f"gpu_count: {gpu_count}\n" if gpu_count is not None else ""
    return (f"version: 1\nname: sim\n{count}gpus:\n{gpus}kubelet: {{present: {str(kubelet).lower()}}}\n"
            f"tools: {{nvidia_smi: {root}/usr/bin/nvidia-smi, "
            f"nvidia_mig_parted: {root}/usr/bin/nvidia-mig-parted}}\n{extra}")


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
    # nvidia-smi -q -x and the CSV with a driver_version column say the driver: the real H200's 580.159.04
    knows_driver = name in ("nvidia-smi-q.xml", "nvidia-smi-query-gpu.csv")
    if knows_driver:
        assert "driver-mig   PASS   driver 580.159.04, at least 550.90.07 (h200-141gb)" in lines
    assert lines[-1].startswith(f"READY: no check failed ({9 if knows_driver else 10} skipped; ")


@pytest.mark.parametrize(("form", "name"), REAL_CAPTURES, ids=[n for _, n in REAL_CAPTURES])
def test_real_h200_is_not_ready_for_an_h100_profile(tmp_path: Path, form: str, name: str) -> None:
    code, out, _ = _real(tmp_path, form, name, "h100-80gb", "{3g.40gb: 2}", "gpu_count: 1\n", "--json")
    report = json.loads(out)
    assert code == 1 and report["ready"] is False
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert failed == [{"check": "gpus/0", "status": "FAIL",
                       "detail": "NVIDIA GPU(s) on this machine that are not the profile's models: "
                                 "GPU 0 is NVIDIA H200 (0x233510DE), not h100-80gb (0x233010DE, 0x233110DE, "
                                 "0x232210DE, 0x232410DE)"},
                      {"check": "coverage", "status": "FAIL", "detail": "GPU 0 in no gpus entry of its own "
                       "model (the entry listing it is another model's, see above): the restore applies that "
                       "layout to it and fails at every boot"}]  # coverage agrees with gpus/0


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
    # a missing (or directory) profile is an unreadable file, as for every command: exit 2
    assert cli("preflight", str(tmp_path / "missing.yaml"), "--nvidia-smi-csv", str(capture))[0] == 2
    assert cli("preflight", str(tmp_path), "--nvidia-smi-csv", str(capture))[0] == 2
    assert cli("preflight", str(profile), "--nvidia-smi-xml", str(capture))[0] == 2  # CSV is not XML
    assert cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))[0] == 0
    profile.write_text("version: 1\nname: x\ngpus: [{model: h300}]\n")
    code, _, err = cli("preflight", str(profile), "--nvidia-smi-csv", str(capture))
    assert code == 1 and "unknown GPU model" in err


def test_the_tutorials_preflight_pair_is_ready_as_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/examples/preflight-ready: a bundled profile + capture that is READY, as docs/tutorial.md shows."""
    pair = REPO / "docs/examples/preflight-ready"
    tutorial = (REPO / "docs/tutorial.md").read_text()
    block = next(b for b in tutorial.split("```")[1::2] if "$ migbake preflight node-profile.yaml" in b)
    monkeypatch.chdir(pair)  # the tutorial runs it there
    code, out, err = cli("preflight", "node-profile.yaml", "--nvidia-smi-csv", "nvidia-smi.csv")
    assert code == 0 and out.splitlines()[-1].startswith("READY: no check failed"), out + err
    assert block.split("\n", 3)[3] == out, out  # after "text" and the two `$` lines: exactly what migbake prints
    assert (pair / "nvidia-smi.csv").read_bytes() == (fixtures() / "nvidia-smi-query-preflight.csv").read_bytes()
