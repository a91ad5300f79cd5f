"""Boot-test scenarios with a node's neighbours, and what the profile promises the boot test.

Each scenario runs on NVIDIA's real nvidia-mig-parted over the simulated GPU: its fault is a knob of that
GPU (``simgpu/README.md``) or a test-only unit in the guest, never a change to the shell imitation.

- ``driver-late``: the driver answers only ~15 s after the restore first asks (knob ``driver-delay``:
  ``never`` from early boot, removed by a fixture unit 15 s after the first ``nvidia-smi`` call; under
  TCG the restore starts 10-30 s into a Packer-path boot and 60-80 s into cloud-init's first, from
  runcmd, so a fixed uptime would prove nothing); the restore waits for it and succeeds.
- ``driver-too-late``: the same with the driver 60 s late and the output regenerated with
  ``restore.driver_wait_seconds: 5``: the restore fails closed and says so.
- ``gpu-client``: an enabled fake ``nvidia-dcgm.service`` (no ordering of its own) that holds the GPUs
  while it runs (knob ``in-use``, removed when it stops).
- ``manager-reenabled``: after the image is baked, ``systemctl enable nvidia-mig-manager.service`` as the
  package scriptlet does; the fake manager, if it runs, applies ``all-disabled`` with the real mig-parted.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path

from migbake.profile.nodeprofile import NodeProfile
from migbake_boottest.hostrun import Log, no_log, run
from migbake_boottest.scenarios.scenario import LAYOUT_MISSING, NO_GPU, STUB_LOG, SYSTEM_UNITS, Scenario
from migbake_boottest.scenarios.scenario import _write as write_guest_file
from migbake_boottest.simgpu.guest import KNOB_DIR, SIMGPU, STANDINS_UNIT

NODE_SCENARIOS: tuple[Scenario, ...] = ("driver-late", "driver-too-late", "gpu-client", "manager-reenabled")
FAILING: frozenset[str] = frozenset({"fail-apply", "fail-assert", "driver-too-late",  # the restore must fail
                                     "provided-later-missing", "layout-unknown", "layout-missing"})
DRIVER_LATE_S = 15  # the driver answers this long after the first nvidia-smi call of the boot
DRIVER_TOO_LATE_S = 60
SHORT_WAIT_S = 5  # restore.driver_wait_seconds of the driver-too-late output, well below the delay
GPU_CLIENT = "nvidia-dcgm.service"
MANAGER = "nvidia-mig-manager.service"
UPGRADE_LOG = "/var/log/fake-upgrade.log"
# what the restore's journal says when it fails the way the scenario makes it fail
FAILURE_MARKERS = {"driver-too-late": f"the NVIDIA driver did not answer within {SHORT_WAIT_S} s",
                   "provided-later-missing": "the image lacks nvidia-mig-parted (no executable ",
                   # scripts/_layout-source.sh.j2's find_layout
                   "layout-unknown": "which this image does not have", "layout-missing": "no source gave a layout name"}

_DRIVER_UNIT = """# Test fixture for boot tests ONLY: the NVIDIA driver is not loaded (simgpu knob driver-delay: never)
# until {delay} s after the first nvidia-smi call of this boot, whenever the restore makes it.
[Unit]
Description=Simulated late NVIDIA driver (boot test fixture)
DefaultDependencies=no
After=local-fs.target {standins}
Before=sysinit.target nvidia-mig-restore.service

[Service]
ExecStartPre=/bin/sh -c 'echo never >{knobs}/driver-delay'
ExecStart=/bin/sh -c 'until grep -qs " nvidia-smi" {log}; do sleep 0.2; done; sleep {delay}; rm -f {knobs}/driver-delay'

[Install]
WantedBy=sysinit.target
"""
_CLIENT_UNIT = f"""# Test fixture for boot tests ONLY: a DCGM-like GPU client that holds every GPU while it runs
# (simgpu knob in-use), with no ordering of its own: the restore unit must be Before= it.
[Unit]
Description=Fake NVIDIA DCGM, a GPU client (boot test fixture)

[Service]
ExecStartPre=/bin/sh -c 'echo "$(date +%%s.%%N) nvidia-dcgm ExecStartPre" >>{STUB_LOG}; : >{KNOB_DIR}/in-use'
ExecStart=/bin/sleep infinity
ExecStopPost=/bin/rm -f {KNOB_DIR}/in-use

[Install]
WantedBy=multi-user.target
"""
_FIGHTING_MANAGER = f"""# Test fixture for boot tests ONLY: a fake nvidia-mig-manager that, when it runs, applies its
# all-disabled default with NVIDIA's real mig-parted after the restore, as the packaged one does.
[Unit]
Description=Fake nvidia-mig-manager (boot test fixture)
After={STANDINS_UNIT} nvidia-mig-restore.service
Before=kubelet.service

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "$(date +%%s.%%N) nvidia-mig-manager RAN" >>{STUB_LOG}'
ExecStart={SIMGPU}/nvidia-mig-parted apply -f {SIMGPU}/all-disabled.yaml -c all-disabled

[Install]
WantedBy=multi-user.target
"""
_ALL_DISABLED = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"
_UPGRADE_SCRIPT = f"""#!/bin/sh
# Test fixture for boot tests ONLY: what the nvidia-mig-manager package's scriptlet does on every
# install and upgrade (systemctl enable, errors ignored), recorded for the claims.
out=$(systemctl enable {MANAGER} 2>&1)
echo "systemctl enable {MANAGER} (package upgrade): rc=$? $out" >{UPGRADE_LOG}
"""
_UPGRADE_UNIT = f"""# Test fixture for boot tests ONLY: a package upgrade late in the first boot (cloud-init path).
[Unit]
Description=Simulated nvidia-mig-manager package upgrade (boot test fixture)
DefaultDependencies=no
After=basic.target cloud-final.service
Before=test-report.service
ConditionPathExists=!{UPGRADE_LOG}

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/fake-upgrade

[Install]
WantedBy=multi-user.target
"""


@dataclass(frozen=True)
class Promises:
    """What the profile promises besides kubelet, so the claims never read it from the output under test."""

    consumers: tuple[tuple[str, bool], ...] = ()  # the other consumer units: (unit, fail_closed)
    metrics_textfile: str = ""  # restore.metrics_textfile; empty: no metrics file
    kubelet_layout: str = "generic"  # kubelet.layout: which kubelet the guest gets (boottest.scenarios.kubelet)
    node_labels: tuple[tuple[str, str], ...] = ()  # kubernetes.node_labels, which kubelet must get
    allocation: str = "device-plugin"  # kubernetes.allocation (an output without its profile: device-plugin)


def promises_of(profile: NodeProfile) -> Promises:
    """The consumers (kubelet aside) and the metrics file of ``profile``."""
    labels = profile.kubernetes.node_labels if profile.kubelet.present else ()
    return Promises(tuple((c.unit, c.fail_closed) for c in profile.consumers if c.unit != "kubelet.service"),
                    profile.restore.metrics_textfile, profile.kubelet.layout, labels, profile.kubernetes.allocation)


def discover_promises(out_dir: Path) -> Promises:
    """For an output without its profile: every consumer drop-in (fail closed) and restore.sh's ``metrics=``."""
    units = out_dir / "rootfs/etc/systemd/system"
    consumers = tuple(sorted((d.parent.name.removesuffix(".d"), True)
                             for d in units.glob("*.service.d/20-mig-restore.conf")
                             if d.parent.name != "kubelet.service.d"))
    script = out_dir / "rootfs/etc/nvidia-mig/restore.sh"
    metrics = ""
    for line in script.read_text().splitlines() if script.is_file() else ():
        if line.startswith("metrics="):
            words = shlex.split(line.partition("=")[2])
            metrics = words[0] if len(words) == 1 else ""
    layout, labels = _discover_layout(out_dir)
    return Promises(consumers, metrics, layout, labels)


def _discover_layout(out_dir: Path) -> tuple[str, tuple[tuple[str, str], ...]]:
    """kubelet.layout and the node labels of an output without its profile (its kubelet drop-in, nodeadm's)."""
    nodeadm = out_dir / "rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml"
    dropin = out_dir / "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf"
    text = nodeadm.read_text() if nodeadm.is_file() else dropin.read_text() if dropin.is_file() else ""
    layout = "eks-al2023" if nodeadm.is_file() else "kubeadm" if "$MIGBAKE_KUBELET_ARGS" in text else "generic"
    flag = next((w for w in text.replace('"', " ").split() if "--node-labels=" in w), "")
    pairs = flag.partition("--node-labels=")[2].split(",") if flag else []
    return layout, tuple((k, v) for k, _, v in (p.partition("=") for p in pairs if p))

def applies(scenario: Scenario, profile: NodeProfile) -> bool:
    """Whether ``all`` runs ``scenario`` for ``profile``."""
    if scenario == "driver-too-late":
        return profile.restore.timeout_seconds > SHORT_WAIT_S
    if scenario == "manager-reenabled":
        return profile.conflicting_manager.unit == MANAGER
    return True


def variant(profile: NodeProfile, scenario: Scenario) -> NodeProfile:
    """The profile the scenario boots: ``driver-too-late`` and ``no-gpu`` wait only SHORT_WAIT_S for the driver;
    ``layout-missing`` has no default layout."""
    if scenario in ("driver-too-late", NO_GPU):
        return dataclasses.replace(profile, restore=dataclasses.replace(
            profile.restore, driver_wait_seconds=SHORT_WAIT_S))
    if scenario == LAYOUT_MISSING:  # a node that says no name, of an image whose restore.layout has no default
        return dataclasses.replace(profile, restore=dataclasses.replace(profile.restore, layout_default=""))
    return profile


def boots_for(scenario: Scenario, path: str, boots: int) -> int:
    """``ok`` boots as asked; on cloud-init the upgrade happens during boot 1, so manager-reenabled boots twice."""
    if scenario == "ok":
        return boots
    if scenario == NO_GPU:  # no GPU, then a GPU without its driver (scenarios.presence)
        return 2
    return 2 if scenario == "manager-reenabled" and path == "cloud-init" else 1


def prepare_guest(rootfs: Path, scenario: Scenario, path: str, *, log: Log = no_log) -> None:
    """Before delivery: the scenario's fixture units in the guest (needs the simulated GPU)."""
    systemctl = ["systemctl", "--quiet", f"--root={rootfs}"]
    if scenario in ("driver-late", "driver-too-late"):
        delay = DRIVER_LATE_S if scenario == "driver-late" else DRIVER_TOO_LATE_S
        write_guest_file(rootfs, f"/{SYSTEM_UNITS}/simgpu-late-driver.service",
                         _DRIVER_UNIT.format(delay=delay, standins=STANDINS_UNIT, knobs=KNOB_DIR, log=STUB_LOG), 0o644)
        run([*systemctl, "enable", "simgpu-late-driver.service"], log=log)
    elif scenario == "gpu-client":
        write_guest_file(rootfs, f"/{SYSTEM_UNITS}/{GPU_CLIENT}", _CLIENT_UNIT, 0o644)
        run([*systemctl, "enable", GPU_CLIENT], log=log)
    elif scenario == "manager-reenabled":
        write_guest_file(rootfs, f"/{SYSTEM_UNITS}/{MANAGER}", _FIGHTING_MANAGER, 0o644)
        write_guest_file(rootfs, f"{SIMGPU}/all-disabled.yaml", _ALL_DISABLED, 0o644)
        if path == "cloud-init":
            write_guest_file(rootfs, "/usr/local/sbin/fake-upgrade", _UPGRADE_SCRIPT, 0o755)
            write_guest_file(rootfs, f"/{SYSTEM_UNITS}/fake-upgrade.service", _UPGRADE_UNIT, 0o644)
            run([*systemctl, "enable", "fake-upgrade.service"], log=log)


def after_delivery(rootfs: Path, scenario: Scenario, path: str, *, log: Log = no_log) -> None:
    """After the Packer build: the package upgrade of manager-reenabled (``systemctl enable``, as the RPM)."""
    if scenario != "manager-reenabled" or path != "packer":
        return
    enabled = run(["systemctl", f"--root={rootfs}", "enable", MANAGER], log=log, check=False)
    said = " ".join((enabled.stdout + enabled.stderr).replace(str(rootfs), "").split())  # guest paths
    record = f"systemctl enable {MANAGER} (package upgrade): rc={enabled.returncode} {said}\n"
    write_guest_file(rootfs, UPGRADE_LOG, record, 0o644)

