"""What must be true after each boot, checked on evidence read back from the guest.

Claims never look at the generator's output: only at the stub call log, ``systemctl show`` values, the
journal and file modes the guest reported, and at the serial console.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.node import FAILING, FAILURE_MARKERS, MANAGER
from migbake_boottest.scenarios.scenario import NO_GPU, Generation, Scenario
from migbake_boottest.simgpu.node import GpuState

BootPath = Literal["packer", "cloud-init", "ansible"]  # ansible: tests/vm/test_fleet_vm.py, over SSH
RESTORE = "nvidia-mig-restore.service"
KUBELET = "kubelet.service"
EXPECTED_FILES = {
    "/etc/nvidia-mig/config.yaml": ("644", "root:root"),
    "/etc/systemd/system/nvidia-mig-restore.service": ("644", "root:root"),
    "/etc/systemd/system/kubelet.service.d/20-mig-restore.conf": ("644", "root:root"),
}
KUBELET_DROP_IN = "/kubelet.service.d/20-mig-restore.conf"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class Claim:
    """One checked statement about a boot."""

    id: str
    description: str
    passed: bool
    evidence: str


@dataclass(frozen=True)
class BootContext:
    """What was booted, so the right claims are checked."""

    path: BootPath
    scenario: Scenario
    generation: Generation
    boot: int  # 1-based
    console: str  # serial log text
    kubelet: bool = True  # the output orders kubelet after the restore (it has the kubelet drop-in)
    kubelet_requires: bool = True  # on_failure: block-kubelet (Requires=); False for continue (Wants=)
    expected: tuple[GpuState, ...] | None = None  # NVIDIA's mig-parted over simulated GPUs: the profile's
    consumers: tuple[tuple[str, bool], ...] = ()  # the profile's other consumers: (unit, fail_closed)
    metrics_path: str = ""  # restore.metrics_textfile the profile promises ("" none)
    metrics: str | None = None  # that file as read back from the guest disk (None: missing)
    kubelet_fixture: str = "plain"  # the guest's kubelet (boottest.scenarios.kubelet.FIXTURES)
    node_labels: tuple[tuple[str, str], ...] = ()  # kubernetes.node_labels the profile promises
    real_slurmd: bool = False  # the consumer slurmd.service is Debian's own (the rootfs has the package)
    allocation: str = "device-plugin"  # kubernetes.allocation the profile promises (dra_claims for the others)


def evaluate(report: GuestReport | None, ctx: BootContext) -> list[Claim]:
    """All claims for one boot; a missing or cut-off report is itself a failed claim."""
    if report is None or not report.complete:
        what = "no /var/log/test-report.txt" if report is None else "the report has no end marker"
        return [Claim("report-complete", "the guest wrote its full report and powered off", False,
                      f"{what}; console tail: {_tail(ctx.console)}")]
    checks: list[Callable[[GuestReport, BootContext], Claim]] = [_report_complete, _manager_never_ran,
                                                                 _restore_enabled, _files_installed]
    if ctx.scenario == NO_GPU:  # its own claims, per boot (scenarios.presence)
        pass
    elif ctx.scenario not in FAILING:
        checks += [_call_order, _restore_active, _layout_applied]
        if ctx.expected is not None:
            checks += [_gpu_count, _exported_layout]
        for unit, _ in _consumers(ctx):
            checks += [partial(_restore_before, unit=unit), partial(_consumer_active, unit=unit),
                       partial(_started_once, unit=unit)]
        if _consumers(ctx):
            checks.append(_manual_stop_refused)
        if ctx.boot > 1:
            checks.append(_restored_after_reboot)
        if ctx.path == "cloud-init":
            checks.append(_cloud_init_done)
    else:
        checks += [_restore_failed, _failure_visible, _stub_calls_for_fault]
        for unit, closed in _consumers(ctx):
            checks.append(partial(_never_started if closed else _started_anyway, unit=unit))
    return [check(report, ctx) for check in checks]


def _consumers(ctx: BootContext) -> list[tuple[str, bool]]:
    """kubelet (when the output has its drop-in), then the profile's other consumers: (unit, fail_closed)."""
    return ([(KUBELET, ctx.kubelet_requires)] if ctx.kubelet else []) + list(ctx.consumers)


def _name(unit: str) -> str:
    return unit.removesuffix(".service")


def _report_complete(report: GuestReport, ctx: BootContext) -> Claim:
    uptime = " ".join(report.section("uptime")).split()[:1]
    return Claim("report-complete", "the guest wrote its full report and powered off", True,
                 f"end marker present, guest uptime {uptime[0] if uptime else '?'} s")


def _manager_never_ran(report: GuestReport, ctx: BootContext) -> Claim:
    unit = report.unit(MANAGER)
    ran = [c.text for c in report.calls() if c.event == "mig-manager"]
    # A oneshot without RemainAfterExit never enters "active": its start shows in InactiveExit only.
    started = unit.get("InactiveExitTimestampMonotonic", "0") != "0"
    state = unit.get("UnitFileState", "?")
    return Claim("mig-manager-never-ran",
                 "the conflicting nvidia-mig-manager.service never ran and is not enabled",
                 not ran and not started and state in ("disabled", "masked"),
                 f"stub-log lines {ran or 'none'}; UnitFileState={state}, "
                 f"InactiveExitTimestampMonotonic={unit.get('InactiveExitTimestampMonotonic', '?')}")


def _restore_enabled(report: GuestReport, ctx: BootContext) -> Claim:
    state = report.unit(RESTORE).get("UnitFileState", "?")
    return Claim("restore-enabled", "nvidia-mig-restore.service is enabled", state == "enabled",
                 f"UnitFileState={state}")


def _files_installed(report: GuestReport, ctx: BootContext) -> Claim:
    found = report.files()
    wrong = []
    drop_ins = {f"/etc/systemd/system/{unit}.d/20-mig-restore.conf": ("644", "root:root") for unit, _ in ctx.consumers}
    for path, (mode, owner) in {**EXPECTED_FILES, **drop_ins}.items():
        if path.endswith(KUBELET_DROP_IN) and not ctx.kubelet:
            continue
        stat = found.get(path)
        if stat is None:
            wrong.append(f"{path} missing")
        elif (stat.mode, stat.owner) != (mode, owner):
            wrong.append(f"{path} is {stat.mode} {stat.owner}, want {mode} {owner}")
    return Claim("files-installed", "config, restore unit (and kubelet drop-in) exist as 0644 root:root",
                 not wrong, "; ".join(wrong) or "; ".join(report.section("files")))


def _call_order(report: GuestReport, ctx: BootContext) -> Claim:
    calls = report.calls()
    wanted = ("smi", "apply", "assert", *(_name(unit) for unit, _ in _consumers(ctx)))
    description = " < ".join(wanted) + " (first calls in the stub log)"
    first = {e: next((c for c in calls if c.event == e), None) for e in wanted}
    missing = [e for e, c in first.items() if c is None]
    if missing:
        return Claim("call-order", description, False,
                     f"never called: {', '.join(missing)}; log: {[c.text for c in calls]}")
    seq = [c for c in first.values() if c is not None]
    ordered = all(a.line < b.line and a.time <= b.time for a, b in itertools.pairwise(seq))
    return Claim("call-order", description, ordered,
                 ", ".join(f"{e}@{c.time:.3f}" for e, c in zip(wanted, seq)))


def _restore_before(report: GuestReport, ctx: BootContext, unit: str = KUBELET) -> Claim:
    restored = _mono(report, RESTORE, "ActiveEnterTimestampMonotonic")
    started = _mono(report, unit, "InactiveExitTimestampMonotonic")
    return Claim(f"restore-before-{_name(unit)}", f"systemd finished the restore before it started {_name(unit)}",
                 0 < restored <= started,
                 f"restore ActiveEnterTimestampMonotonic={restored}, "
                 f"{_name(unit)} InactiveExitTimestampMonotonic={started}")


def _restore_active(report: GuestReport, ctx: BootContext) -> Claim:
    claim = _state_claim(report, RESTORE, "restore-active", ("active", "success"))
    if claim.passed:
        return claim
    why = [line for line in report.section(f"journal {RESTORE}") if "level=error" in line or "level=fatal" in line]
    return Claim(claim.id, claim.description, False, f"{claim.evidence}; journal: {why or 'no error lines'}")


def _consumer_active(report: GuestReport, ctx: BootContext, unit: str = KUBELET) -> Claim:
    return _state_claim(report, unit, f"{_name(unit)}-active", ("active", "success"))


def _restore_failed(report: GuestReport, ctx: BootContext) -> Claim:
    return _state_claim(report, RESTORE, "restore-failed", ("failed", "exit-code"))


def _started_once(report: GuestReport, ctx: BootContext, unit: str = KUBELET) -> Claim:
    name = _name(unit)
    starts = [c for c in report.calls() if c.event == name]
    restarts = report.unit(unit).get("NRestarts", "?")
    return Claim(f"{name}-started-once", f"{name} started exactly once this boot", len(starts) == 1
                 and restarts == "0", f"{len(starts)} '{name} ExecStartPre' lines, NRestarts={restarts}")


def _never_started(report: GuestReport, ctx: BootContext, unit: str = KUBELET) -> Claim:
    name = _name(unit)
    exit_mono = _mono(report, unit, "InactiveExitTimestampMonotonic")
    starts = [c.text for c in report.calls() if c.event == name]
    return Claim(f"{name}-never-started", f"{name} never started (fail closed)",
                 exit_mono == 0 and not starts,
                 f"{name} InactiveExitTimestampMonotonic={exit_mono}, "
                 f"ExecStartPre lines: {starts or 'none'}")


def _started_anyway(report: GuestReport, ctx: BootContext, unit: str = KUBELET) -> Claim:
    name = _name(unit)
    restore_exit = _mono(report, RESTORE, "InactiveExitTimestampMonotonic")
    started = _mono(report, unit, "InactiveExitTimestampMonotonic")
    state = report.unit(unit).get("ActiveState", "?")
    return Claim(f"{name}-started-anyway",
                 f"{'on_failure: continue' if unit == KUBELET else 'fail_closed: false'}: "
                 f"{name} still started after the failed restore",
                 state == "active" and 0 < restore_exit <= started,
                 f"{name} ActiveState={state}, restore started at {restore_exit}, {name} at {started}")


def _manual_stop_refused(report: GuestReport, ctx: BootContext) -> Claim:
    lines = report.section("manual-stop")
    text = " | ".join(lines)
    refused = [line for line in lines if "refused" in line.lower() or "not allowed" in line.lower()]
    # "restore=active kubelet=active", then one "UNIT=active" line per other consumer
    units = [_name(unit) if unit == KUBELET else unit for unit, _ in _consumers(ctx)]
    states = {key: value for line in lines for key, _, value in (word.partition("=") for word in line.split())
              if key in ("restore", *units)}
    names = " and ".join(_name(unit) for unit, _ in _consumers(ctx))
    return Claim("manual-stop-refused",
                 f"a manual stop/restart of the restore is refused; {names} keep{'s' * (len(units) == 1)} running",
                 "stop-rc=0" not in lines and "restart-rc=0" not in lines and bool(refused)
                 and states.get("restore") == "active" and all(states.get(u) == "active" for u in units),
                 text or "no manual-stop section")


def _layout_applied(report: GuestReport, ctx: BootContext) -> Claim:
    code = report.assert_exit_code()
    return Claim("layout-applied", "at the end of boot the GPU state equals the installed config (assert)",
                 code == 0, f"assert exit {code}; state: {' | '.join(report.section('mig-state')[3:])}")


def _restored_after_reboot(report: GuestReport, ctx: BootContext) -> Claim:
    if ctx.expected is not None:
        return _simgpu_restored_after_reboot(report, ctx)
    lines = [line for line in report.section(f"journal {RESTORE}") if re.match(r"GPU \d+: MIG mode", line)]
    # The simulated GPU lost its instances (Hopper: its mode too) at reboot; apply must bring them back.
    kept_mode = "1 -> 1" if ctx.generation == "ampere" else "0 -> 1"
    lost = bool(lines) and all(", instances - -> " in line and f"mode {kept_mode}" in line for line in lines)
    events = [c.event for c in report.calls()]
    return Claim("restored-after-reboot",
                 f"after reboot {ctx.boot - 1} the layout was gone ({ctx.generation}) and was restored again",
                 lost and "apply" in events and "assert" in events and report.assert_exit_code() == 0,
                 f"apply said: {lines or 'nothing'}; stub calls this boot: {events}")


def _failure_visible(report: GuestReport, ctx: BootContext) -> Claim:
    console = _ANSI.sub("", ctx.console)
    # systemd's own status lines (not the report echoing the journal); on the 80-column serial console
    # systemd 252 cuts unit names: "Failed to start nvidia-mig… MIG configuration before kubelet."
    failed = re.search(r"^\[FAILED\] Failed to start nvidia-mig(-restore\.service|…).*$", console, re.M)
    marker = "injected failure" if ctx.expected is None else "level=fatal"  # mig-parted's own error
    marker = FAILURE_MARKERS.get(ctx.scenario, marker)
    reason = [line for line in report.section(f"journal {RESTORE}") if marker in line]
    held = [unit for unit, closed in _consumers(ctx) if closed]
    names = " and ".join(_name(unit) for unit in held)
    if ctx.path == "cloud-init" and held and ctx.boot == 1:
        # first boot: the consumers' start jobs were held; runcmd does not start them after the failed
        # restore and says so (no [DEPEND] line: nothing asked systemd to start them)
        said = re.search(r"migbake: \S+ failed, so \S+ is not started \(fail closed\).*$", console, re.M)
        return Claim("failure-visible", f"console and journal say why {names} did not start",
                     bool(failed and reason and said),
                     f"console: {failed.group(0) if failed else 'no [FAILED] line'!r}, "
                     f"{said.group(0) if said else 'no migbake runcmd line'!r}; journal: {reason or 'no reason'}")
    if not held:  # nothing is blocked: only the restore's own failure
        return Claim("failure-visible", "console and journal say why the restore failed",
                     bool(failed and reason),
                     f"console: {failed.group(0) if failed else 'no [FAILED] line'!r}; "
                     f"journal: {reason or 'no reason'}")
    depend = {unit: re.search(rf"^\[DEPEND\] Dependency failed for {re.escape(unit[:4])}.*$", console, re.M)
              for unit in held}
    blocked = {unit: [line for line in report.section(f"journal {unit}") if "Dependency failed" in line]
               for unit in held}
    return Claim("failure-visible", f"console and journal say why {names} did not start",
                 bool(failed and reason) and all(depend.values()) and all(blocked.values()),
                 f"console: {failed.group(0) if failed else 'no [FAILED] line'!r}, "
                 f"{[m.group(0) if m else f'no [DEPEND] line for {u}' for u, m in depend.items()]!r}; "
                 f"journal: {reason + [line for lines in blocked.values() for line in lines] or 'no reason'}")


def _stub_calls_for_fault(report: GuestReport, ctx: BootContext) -> Claim:
    # mig-parted's own `nvidia-smi -r` (a pending mode change) is not a step of the restore unit, nor is
    # restore.sh's check for a pending mode (`nvidia-smi --query-gpu=...`, Ampere profiles)
    events = [c.event for c in report.calls() if c.event in ("smi", "apply", "assert") and " -r" not in c.text
              and "--query-gpu" not in c.text]
    events = [e for i, e in enumerate(events) if i == 0 or events[i - 1] != e]  # the driver wait polls smi
    want = {"fail-apply": ["smi", "apply"], "driver-too-late": ["smi"], "provided-later-missing": [],
            "layout-unknown": [], "layout-missing": []}.get(ctx.scenario, ["smi", "apply", "assert"])
    return Claim("stub-calls", f"with {ctx.scenario} the restore stopped at the failing step",
                 events == want, f"calls {events}, want {want}")


def _gpu_count(report: GuestReport, ctx: BootContext) -> Claim:
    want = len(ctx.expected or ())
    walked = report.walked_gpus()
    state = [line for line in report.section("simgpu-state") if line.startswith("gpu ")]
    return Claim("gpu-count", f"NVIDIA's mig-parted saw the profile's {want} GPU(s), not zero (assert -d)",
                 walked == set(range(want)) and len(state) == want,
                 f"assert walked GPUs {sorted(walked) or 'none'}; the simulated node has {len(state)}")


def _exported_layout(report: GuestReport, ctx: BootContext) -> Claim:
    expected = ctx.expected or ()
    found = report.exported(len(report.walked_gpus()))
    if isinstance(found, str):
        return Claim("exported-layout", "NVIDIA's mig-parted export equals the profile's layout on every GPU",
                     False, found)
    want = {i: (g.mig_enabled, dict(g.layout)) for i, g in enumerate(expected)}
    wrong = [f"GPU {i}: {found.get(i, 'missing')} != {w}" for i, w in want.items() if found.get(i) != w]
    extra = sorted(set(found) - set(want))
    return Claim("exported-layout", "NVIDIA's mig-parted export equals the profile's layout on every GPU",
                 bool(want) and not wrong and not extra,
                 "; ".join(wrong + [f"unexpected GPUs {extra}"] * bool(extra))
                 or f"{len(want)} GPU(s) as in the profile: {' | '.join(report.section('mig-state')[3:])}")


def _simgpu_restored_after_reboot(report: GuestReport, ctx: BootContext) -> Claim:
    at_boot = [line for line in report.section("simgpu-boot-state") if line.startswith("gpu ")]
    kept_mode = "mig 1" if ctx.generation == "ampere" else "mig 0"  # Ampere keeps MIG mode, Hopper not
    lost = bool(at_boot) and all(f" {kept_mode} " in line and line.endswith(" instances -") for line in at_boot)
    return Claim("restored-after-reboot",
                 f"after reboot {ctx.boot - 1} the layout was gone ({ctx.generation}) and was restored again",
                 lost and report.assert_exit_code() == 0,
                 f"simulated GPUs at boot: {' | '.join(at_boot) or 'nothing recorded'}; "
                 f"assert exit {report.assert_exit_code()}")


def _cloud_init_done(report: GuestReport, ctx: BootContext) -> Claim:
    lines = report.section("cloud-init")
    status = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("status:")), "?")
    invalid = [line for line in lines if "Invalid cloud-config" in line]
    return Claim("cloud-init-done", "cloud-init finished without errors or invalid config",
                 status == "done" and not invalid, f"status: {status}; invalid: {invalid or 'none'}")


def _state_claim(report: GuestReport, unit: str, claim_id: str, want: tuple[str, str]) -> Claim:
    props = report.unit(unit)
    got = (props.get("ActiveState", "?"), props.get("Result", "?"))
    return Claim(claim_id, f"{unit} is {want[0]} with result {want[1]}", got == want,
                 f"ActiveState={got[0]} SubState={props.get('SubState', '?')} Result={got[1]} "
                 f"ExecMainStatus={props.get('ExecMainStatus', '?')}")


def _mono(report: GuestReport, unit: str, key: str) -> int:
    value = report.unit(unit).get(key, "0")
    return int(value) if value.isdigit() else 0


def _tail(text: str, lines: int = 8) -> str:
    return " | ".join(_ANSI.sub("", text).strip().splitlines()[-lines:])

