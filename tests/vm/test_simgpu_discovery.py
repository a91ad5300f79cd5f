"""NVIDIA's own discovery (``nvidia-mig-parted generate-config``, v0.15.0) over the simulated GPU, on the host.

For every catalog model with MIG, one simulated GPU with MIG off (as the real H200 was): generate-config
must succeed; every ``all-<profile>`` count must be the catalog's maximum for that profile, and NVIDIA's
count in its shipped ``config-default.yaml`` where that file names the GPU; ``all-balanced`` must be
NVIDIA's for the GPU's device id; every generated config must then ``apply`` and ``assert`` on the same
simulated GPU. For the H200 the output must be byte for byte what the real driver gave
(tests/fixtures/h200/mig-parted-generate-config.*), and the NVML answers behind it must be the real
driver's (tests/fixtures/h200/nvml-probe.txt).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from typing import Any

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
import test_simgpu
import yaml
from support import H200_FIXTURES, REPO
from test_simgpu import H200, MODELS, Host, NodeFactory

from migbake.gpu.catalog import GpuModel
from migbake_boottest.simgpu.build import SimGpuBuild

build, make_node = test_simgpu.build, test_simgpu.make_node  # the fixtures of the simulated node

CONFIG_DEFAULT = REPO / "tests" / "fixtures" / "nvidia-config-default" / "config-default.yaml"
# config-default.yaml entries without a device-filter apply to every GPU; only the comment above them says
# which GPUs NVIDIA wrote them for. Where such an entry's count differs from ours, the entry is for others:
WRITTEN_FOR_OTHER_GPUS = {
    # "# H100 NVL, H800 NVL, GH200" section: the 1g.24gb of a 94/96 GB Hopper (max 4). A GB200 with
    # 189 GB names its 1-slice profile 1g.24gb too (max 7); NVIDIA's file has no GB200-189GB entry.
    ("gb200-189gb", "1g.24gb"),
}
# Models that share their PCI device id with another board: NVIDIA's all-balanced for that id is the other's.
BALANCED_OF_ANOTHER_BOARD = {
    "gb200-189gb": "0x294110DE is also the production GB200 (gb200-186gb): NVIDIA's entry has its 1g.23gb names",
}


def nvidia_entries(model: GpuModel, config: str) -> list[dict[str, Any]] | None:
    """The entries of NVIDIA's ``config`` that name ``model`` by device id, else those without a filter."""
    entries = yaml.safe_load(CONFIG_DEFAULT.read_text())["mig-configs"].get(config)
    if entries is None:
        return None
    ids = {i.upper() for i in model.pci_device_ids}

    def filters(entry: dict[str, Any]) -> set[str]:
        raw = entry.get("device-filter") or []
        return {f.upper() for f in ([raw] if isinstance(raw, str) else raw)}
    named = [e for e in entries if filters(e) & ids]
    return named or [e for e in entries if not filters(e)]


def generate(node: Host, *args: str) -> str:
    result = node.mig_parted("generate-config", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("model", MODELS, ids=[m.key for m in MODELS])
def test_generate_config_over_every_model(model: GpuModel, make_node: NodeFactory) -> None:
    node = make_node("gpu", [{}], model)
    spec = yaml.safe_load(generate(node))
    configs = spec["mig-configs"]
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False, "mig-devices": {}}]
    # one all-<profile> config per GPU-instance profile, the catalog's maximum count
    per_profile = {n: c for n, c in configs.items() if n not in ("all-disabled", "all-enabled", "all-balanced")}
    assert per_profile == {"all-" + p.name.replace("+", "."): [
        {"devices": "all", "mig-enabled": True, "mig-devices": {p.name: p.max_count}}] for p in model.profiles}
    mismatched = []
    for p in model.profiles:
        entries = nvidia_entries(model, "all-" + p.name.replace("+", "."))
        nvidia = sorted({e["mig-devices"][p.name] for e in entries or []})
        if nvidia and nvidia != [p.max_count] and (model.key, p.name) not in WRITTEN_FOR_OTHER_GPUS:
            mismatched.append(f"{p.name}: ours {p.max_count}, NVIDIA's {nvidia}")
    assert not mismatched, mismatched
    balanced = nvidia_entries(model, "all-balanced")
    if balanced and any(e.get("device-filter") for e in balanced) and model.key not in BALANCED_OF_ANOTHER_BOARD:
        assert [e["mig-devices"] for e in balanced] == [e["mig-devices"] for e in configs.get("all-balanced", [])]
    path = node.root / "generated.yaml"
    path.write_text(yaml.safe_dump(spec))
    for name in configs:
        applied = node.mig_parted("apply", "-f", str(path), "-c", name)
        assert applied.returncode == 0, (name, applied.stderr[-2000:])
        asserted = node.mig_parted("assert", "-f", str(path), "-c", name)
        assert asserted.returncode == 0, (name, asserted.stderr[-2000:])


def test_h200_generate_config_is_the_real_drivers_byte_for_byte(make_node: NodeFactory) -> None:
    node = make_node("h200", [{}], H200)
    assert generate(node) == (H200_FIXTURES / "mig-parted-generate-config.yaml").read_text()
    captured = (H200_FIXTURES / "mig-parted-generate-config.json").read_text()  # taken with 2>&1: log lines first
    assert generate(node, "-o", "json") == "".join(line for line in captured.splitlines(keepends=True)
                                                   if not line.startswith("time="))
    logged = node.mig_parted("generate-config").stderr
    real = (H200_FIXTURES / "mig-parted-generate-config.stderr").read_text()
    assert strip_times(logged) == strip_times(real)  # 24 profiles found, the same CI profiles skipped


def test_h200_answers_the_preflight_query_as_the_real_card(make_node: NodeFactory) -> None:
    """The query of the generated preflight (and capture), as the real H200 answered it."""
    node = make_node("h200", [{}], H200)
    query = node.run("nvidia-smi", "--query-gpu=index,name,pci.device_id,mig.mode.current", "--format=csv,noheader")
    assert query.returncode == 0, query.stdout + query.stderr
    assert query.stdout == (H200_FIXTURES / "nvidia-smi-query-preflight.csv").read_text()


def strip_times(log: str) -> list[str]:
    return [re.sub(r'^time="[^"]*" ', "", line) for line in log.splitlines()]


# The probe of the real H200 (tests/fixtures/h200/nvml-probe.py) over the simulated GPU, through ctypes:
# the same NVML calls, printed the same way, for the answers mig-parted's discovery reads.
PROBE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class Pci(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
NAMES = ("id isP2pSupported sliceCount instanceCount multiprocessorCount copyEngineCount decoderCount "
         "encoderCount jpegCount ofaCount").split()
class Gip(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint) for n in NAMES] + [("memorySizeMB", ctypes.c_ulonglong)]
assert lib.nvmlInit_v2() == 0
h = ctypes.c_void_p()
assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
name = ctypes.create_string_buffer(96)
assert lib.nvmlDeviceGetName(h, name, 96) == 0
print("name =", name.value.decode())
pci, mem, cur, pend = Pci(), Mem(), ctypes.c_uint(), ctypes.c_uint()
assert lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci)) == 0
print("pci_info_v3 =", {"pciDeviceId": pci.pciDeviceId, "pciSubSystemId": pci.pciSubSystemId})
assert lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)) == 0
print("mem =", {"total": mem.total})
assert lib.nvmlDeviceGetMigMode(h, ctypes.byref(cur), ctypes.byref(pend)) == 0
print("migmode =", [cur.value, pend.value])
for i in range(16):
    info = Gip()
    ret = lib.nvmlDeviceGetGpuInstanceProfileInfo(h, i, ctypes.byref(info))
    if ret:
        print(f"gi_profile_info[{i}] ERROR", ret)
    else:
        print(f"gi_profile_info[{i}] =", {n: getattr(info, n) for n, _ in Gip._fields_})
"""


def probe_answers(text: str) -> dict[str, Any]:
    """``label = value`` and ``label ERROR code`` lines of a probe's output, by label."""
    answers: dict[str, Any] = {}
    for line in text.splitlines():
        label, _, value = line.partition(" = ")
        if value:
            try:
                answers[label] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                answers[label] = value  # e.g. "name = NVIDIA H200"
        elif " ERROR " in line:
            label, _, code = line.partition(" ERROR ")
            answers[label] = ("ERROR", int(code.split()[0]))
    ranged = re.search(r"^gi_profile_info\[(\d+)\.\.(\d+)\] ERROR (\d+)", text, re.MULTILINE)
    if ranged:  # "gi_profile_info[10..15] ERROR 3 ..." in the real capture
        for i in range(int(ranged[1]), int(ranged[2]) + 1):
            answers[f"gi_profile_info[{i}]"] = ("ERROR", int(ranged[3]))
    return answers


def test_h200_nvml_answers_are_the_real_drivers(make_node: NodeFactory, build: SimGpuBuild) -> None:
    node = make_node("h200", [{}], H200)
    probed = subprocess.run([sys.executable, "-c", PROBE, str(build.library)], env=node.env, capture_output=True,
                            text=True, check=False, timeout=60)
    assert probed.returncode == 0, probed.stderr
    simulated = probe_answers(probed.stdout)
    real = probe_answers((H200_FIXTURES / "nvml-probe.txt").read_text())
    compared = [label for label in simulated if label.startswith("gi_profile_info")]
    assert len(compared) == 16
    for label in compared:
        want = real[label]
        if isinstance(want, dict):
            want = {k: v for k, v in want.items() if k not in ("version", "name")}  # pynvml's extras
        assert simulated[label] == want, label
    assert simulated["mem"]["total"] == real["mem"]["total"] == 150754820096
    assert simulated["migmode"] == real["migmode"] == [0, 0]
    assert simulated["name"] == real["name"] == "NVIDIA H200"
    for key in ("pciDeviceId", "pciSubSystemId"):
        assert simulated["pci_info_v3"][key] == real["pci_info_v3"][key]


# The nvml symbols the real binary bound over the real driver but never over the simulation: go-nvml's
# init looks up versioned names and optional calls (dlsym) it does not call on these paths. Anything
# else bound over the real driver must be exported by the simulation, or mig-parted takes another path.
LOOKED_UP_ONLY = {
    "nvmlDeviceGetGpuOperationMode", "nvmlDeviceSetGpuOperationMode", "nvmlDeviceGetDisplayActive",
    "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetBoardPartNumber",
    "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetGridLicensableFeatures_v2",
    "nvmlDeviceGetGridLicensableFeatures_v3", "nvmlDeviceGetGridLicensableFeatures_v4", "nvmlEventSetWait_v2",
    "nvmlDeviceGetAttributes_v2", "nvmlComputeInstanceGetInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    "nvmlVgpuInstanceGetLicenseInfo_v2", "nvmlDeviceGetDriverModel_v2", "nvmlInitWithFlags",
}


@pytest.mark.parametrize("path", ["generate-config", "export", "assert"])
def test_every_nvml_call_the_real_driver_answered_is_simulated(path: str, make_node: NodeFactory,
                                                              build: SimGpuBuild) -> None:
    real = (H200_FIXTURES / f"ld-debug-bindings-{path}.txt").read_text()
    bound = set(re.findall(r"symbol `(nvml\w+)'", real))
    exported = set(subprocess.run(["nm", "-D", "--defined-only", str(build.library)], capture_output=True,
                                  text=True, check=True).stdout.split())
    assert bound - exported == LOOKED_UP_ONLY - exported and not LOOKED_UP_ONLY & exported
    node = make_node("h200", [{"1g.18gb": 7}], H200)
    config = node.config("seven", [{"1g.18gb": 7}])
    args = {"generate-config": ["generate-config"], "export": ["export"],
            "assert": ["assert", "-f", str(config), "-c", "current"]}[path]
    node.env["LD_DEBUG"], node.env["LD_DEBUG_OUTPUT"] = "bindings", str(node.root / "ld")
    node.mig_parted(*args)
    log = "".join(p.read_text() for p in node.root.glob("ld.*"))
    simulated = set(re.findall(r"symbol `(nvml\w+)'", log))
    assert simulated == bound - LOOKED_UP_ONLY  # over the simulation, every call the real run bound
