"""The dra-dynamic verify: what a DynamicMIG node must hold, never an assert of an empty config.

Under ``kubernetes.allocation: dra-dynamic`` the DRA driver creates MIG instances per claim after the
restore, so ``nvidia-mig-parted assert`` of the config (no MIG devices) would fail on a node in use. The
verify checks instead that the config creates no MIG device and each GPU's MIG mode as its architecture needs
it when the driver starts: on for Ampere (its mode changes only with a GPU reset), off or (turned on by the
driver for a claim) on for Hopper and newer. Simulated nvidia-smi and nvidia-mig-parted as in
test_generated_scripts.py; the real ones are never called.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realtools import Ran
from support import generate
from test_generated_scripts import FAKE_JOURNALCTL, FAKE_SYSTEMCTL, PATH_OK, POISON, _exe

pytestmark = pytest.mark.realtool

# GPU 0 an H200, GPU 1 an A100 80GB; the DRA driver has made MIG instances on both for claims
FAKE_SMI = r"""#!/bin/bash
printf '%s\n' "$*" >>"$STATE/nvidia-smi.calls"
case "$1" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"
      echo "  MIG 3g.71gb     Device  0: (UUID: MIG-0-0)"
      echo "  MIG 1g.18gb     Device  1: (UUID: MIG-0-1)"
      echo "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)"
      echo "  MIG 1g.10gb     Device  0: (UUID: MIG-1-0)" ;;
  --query-gpu=index,pci.device_id) printf '0, 0x233510DE\n1, 0x20B210DE\n' ;;
  --query-gpu=index,pci.device_id,mig.mode.current,mig.mode.pending) cat "$STATE/modes" ;;
  *) ;;
esac
"""
IN_USE = "0, 0x233510DE, Enabled, Enabled\n1, 0x20B210DE, Enabled, Enabled\n"


def _profile(config: Path, tools: Path) -> str:
    return f"""\
version: 1
name: dyn
kubernetes: {{allocation: dra-dynamic}}
gpu_count: 2
gpus:
  - model: NVIDIA H200
  - model: A100-SXM4-80GB
restore:
  config_path: {config}
tools:
  nvidia_smi: {tools}/nvidia-smi
  nvidia_mig_parted: {tools}/nvidia-mig-parted
"""


def verify(tmp_path: Path, modes: str = IN_USE, config_text: str | None = None) -> tuple[Ran, Path]:
    """The dra-dynamic profile's verify on a node whose restore and kubelet went right; ``modes`` the GPUs'."""
    from realtools import run

    root = tmp_path / "node"
    tools, config = root / "opt/nvidia", root / "etc/nvidia-mig/config.yaml"
    state, bin_dir = root / "state", root / "bin"
    assert PATH_OK.match(str(root)), root
    out = generate(_profile(config, tools), tmp_path / "out", node_root=True)
    config.parent.mkdir(parents=True)
    generated = (out / "rootfs" / config.relative_to("/")).read_text()
    config.write_text(generated if config_text is None else config_text)
    state.mkdir(parents=True)
    (state / "modes").write_text(modes)
    _exe(bin_dir / "systemctl", FAKE_SYSTEMCTL)
    _exe(bin_dir / "journalctl", FAKE_JOURNALCTL)
    _exe(bin_dir / "kubectl", "#!/bin/sh\nexit 1\n")
    for real in ("nvidia-smi", "nvidia-mig-parted"):
        _exe(bin_dir / real, POISON)
    _exe(tools / "nvidia-smi", FAKE_SMI)
    _exe(tools / "nvidia-mig-parted", '#!/bin/bash\nprintf "%s\\n" "$*" >>"$STATE/mig-parted.calls"\n'
         'echo "assert: not all GPUs match the specified config" >&2\nexit 1\n')  # as the real one would here
    r, m = "nvidia-mig-restore.service", "nvidia-mig-manager.service"
    etc = root / "etc/systemd/system"
    dropin = etc / "kubelet.service.d/20-mig-restore.conf"
    dropin.parent.mkdir(parents=True)
    dropin.write_bytes((out / "rootfs" / dropin.relative_to(root)).read_bytes())
    for name, value in {f"enabled/{r}": "enabled", f"active/{r}": "active", f"props/{r}.Result": "success",
                        f"props/{r}.ActiveEnterTimestampMonotonic": "1000", f"enabled/{m}": "masked",
                        f"props/{m}.InactiveExitTimestampMonotonic": "0", "active/kubelet.service": "active",
                        "props/kubelet.service.Requires": f"sysinit.target {r}",
                        "props/kubelet.service.After": f"basic.target {r}",
                        "props/kubelet.service.InactiveExitTimestampMonotonic": "2000"}.items():
        (state / name).parent.mkdir(parents=True, exist_ok=True)
        (state / name).write_text(value)
    text = (out / "scripts/verify-mig-restore.sh").read_text()
    text = text.replace("systemd_dir='/etc/systemd/system'", f"systemd_dir='{etc}'")
    script = _exe(root / "verify.sh", text)
    ran = run(["bash", str(script)], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state),
                                          "LC_ALL": "C.UTF-8"}, timeout=60)
    assert not (state / "poison").exists()
    return ran, state


def test_a_node_with_driver_made_instances_passes(tmp_path: Path) -> None:
    ran, state = verify(tmp_path)
    assert ran.rc == 0 and "FAIL" not in ran.out, ran.out
    calls = (state / "mig-parted.calls").read_text().splitlines() if (state / "mig-parted.calls").exists() else []
    assert not any(c.startswith("assert") for c in calls), calls
    assert "INFO  nvidia-mig-parted assert not run: under kubernetes.allocation dra-dynamic" in ran.out
    assert "PASS  config 'current' creates no MIG device" in ran.out
    assert "PASS  GPU 1: MIG on, as DynamicMIG needs it when the DRA driver starts on a100-80gb" in ran.out
    assert "INFO  GPU 0: MIG on: the DRA driver turned it on for a claim" in ran.out


def test_hopper_with_mig_off_passes(tmp_path: Path) -> None:
    ran, _ = verify(tmp_path, "0, 0x233510DE, Disabled, Disabled\n1, 0x20B210DE, Enabled, Enabled\n")
    assert ran.rc == 0 and "PASS  GPU 0: MIG off; the DRA driver turns it on for a claim" in ran.out, ran.out


@pytest.mark.parametrize(("modes", "config", "line"), [
    ("0, 0x233510DE, Disabled, Disabled\n1, 0x20B210DE, Disabled, Enabled\n", None,
     "FAIL  GPU 1: MIG mode Disabled (pending Enabled): on a100-80gb DynamicMIG needs MIG on before"),
    (IN_USE, "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n"
             "      1g.18gb: 7\n", "FAIL  config "),
], ids=["ampere-mig-off", "config-with-instances"])
def test_what_dynamic_mig_cannot_work_with_fails(tmp_path: Path, modes: str, config: str | None, line: str) -> None:
    ran, _ = verify(tmp_path, modes, config)
    assert ran.rc == 1 and line in ran.out, ran.out
