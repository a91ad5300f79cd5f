"""Claims of the node-neighbour scenarios (``scenarios.node``) and of the metrics file, per boot.

Like ``claims``, they look only at what the guest reported, the console and the metrics file read back
from the disk, never at the output under test.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.claims import RESTORE, BootContext, Claim, _mono
from migbake_boottest.scenarios.node import FAILING, GPU_CLIENT, MANAGER, SHORT_WAIT_S
from migbake_boottest.scenarios.promtext import PromTextError, parse_text
from migbake_boottest.scenarios.scenario import NO_GPU

SUCCESS = "migbake_mig_restore_success"
ALSO_WRITTEN = ("migbake_mig_restore_last_run_timestamp_seconds", "migbake_mig_restore_duration_seconds")
_ANSWERED = re.compile(r"the NVIDIA driver answers after (\d+) s")


def node_claims(report: GuestReport | None, ctx: BootContext) -> list[Claim]:
    """The scenario's own claims and the metrics claim; none when the report is missing (already a claim)."""
    if report is None or not report.complete:
        return []
    checks: list[Callable[[GuestReport, BootContext], Claim]] = []
    if ctx.metrics_path and ctx.scenario != NO_GPU:  # no-gpu's metrics: scenarios.presence
        checks.append(_metrics)
    if ctx.real_slurmd and ctx.scenario not in FAILING:
        checks.append(_slurmd_real)
    checks += {"driver-late": [_driver_waited], "driver-too-late": [_driver_wait_bounded],
               "gpu-client": [_client_after_restore, _client_holds_gpu],
               "manager-reenabled": [_upgrade_ran]}.get(ctx.scenario, [])
    return [check(report, ctx) for check in checks]


def metrics_verdict(text: str | None, want: int) -> tuple[bool, str]:
    """Whether the metrics ``text`` has exactly one ``migbake_mig_restore_success`` sample, equal to ``want``.

    Also: it carries the profile and config labels, and the timestamp and duration gauges are written.
    """
    if text is None:
        return False, "no metrics file on the guest disk"
    try:
        samples = parse_text(text)
    except PromTextError as exc:
        return False, f"not the Prometheus text format: {exc}"
    found = samples.get(SUCCESS, [])
    missing = [name for name in ALSO_WRITTEN if not samples.get(name)]
    if len(found) != 1 or missing:
        return False, f"{len(found)} {SUCCESS} sample(s); missing {missing or 'nothing'}"
    labels, value = found[0]
    ok = value == want and {"profile", "config"} <= set(labels)
    return ok, f"{SUCCESS}{labels} {value:g} (want {want}); also {', '.join(ALSO_WRITTEN)}"


def _metrics(report: GuestReport, ctx: BootContext) -> Claim:
    want = 0 if ctx.scenario in FAILING else 1
    ok, evidence = metrics_verdict(ctx.metrics, want)
    return Claim("metrics-success", f"{ctx.metrics_path} says {SUCCESS} {want} (Prometheus text format)",
                 ok, evidence)


def _slurmd_real(report: GuestReport, ctx: BootContext) -> Claim:
    said = [line for line in report.section("journal slurmd.service") if "slurmd version" in line]
    return Claim("slurmd-real", "the consumer is Debian's own slurmd: its journal says it started",
                 any(line.endswith("started") for line in said), f"{said[:1] or 'no slurmd version line'}")


def _smi_before_apply(report: GuestReport) -> list[float]:
    times = []
    for call in report.calls():
        if call.event == "apply":
            break
        if call.event == "smi":
            times.append(call.time)
    return times


def _driver_waited(report: GuestReport, ctx: BootContext) -> Claim:
    polls = _smi_before_apply(report)
    said = [int(m.group(1)) for line in report.section(f"journal {RESTORE}") for m in [_ANSWERED.search(line)] if m]
    waited = said[0] if said else 0
    return Claim("driver-waited", "the driver answered late and the restore waited for it (nvidia-smi polled)",
                 len(polls) >= 2 and waited >= 1,
                 f"{len(polls)} nvidia-smi call(s) before apply over {polls[-1] - polls[0] if polls else 0:.1f} s; "
                 f"journal: {'the driver answers after ' + str(waited) + ' s' if said else 'no driver line'}")


def _driver_wait_bounded(report: GuestReport, ctx: BootContext) -> Claim:
    polls = _smi_before_apply(report)
    message = f"the NVIDIA driver did not answer within {SHORT_WAIT_S} s"
    said = [line for line in report.section(f"journal {RESTORE}") if message in line]
    applied = [c.text for c in report.calls() if c.event in ("apply", "assert")]
    span = polls[-1] - polls[0] if polls else 0.0
    return Claim("driver-wait-bounded",
                 f"the restore gave up on the driver after restore.driver_wait_seconds ({SHORT_WAIT_S} s) and said so",
                 bool(said) and not applied and SHORT_WAIT_S - 2 <= span <= SHORT_WAIT_S + 5,
                 f"{len(polls)} nvidia-smi calls over {span:.1f} s; mig-parted calls {applied or 'none'}; "
                 f"journal: {said or 'no such line'}")


def _client_after_restore(report: GuestReport, ctx: BootContext) -> Claim:
    restored = _mono(report, RESTORE, "ActiveEnterTimestampMonotonic")
    client = _mono(report, GPU_CLIENT, "InactiveExitTimestampMonotonic")
    calls = report.calls()
    asserted = next((c.time for c in calls if c.event == "assert"), None)
    started = next((c.time for c in calls if c.event == "nvidia-dcgm"), None)
    return Claim("gpu-client-after-restore", f"the GPU client {GPU_CLIENT} started only after the restore",
                 0 < restored <= client and asserted is not None and started is not None and asserted <= started,
                 f"restore ActiveEnterTimestampMonotonic={restored}, client InactiveExitTimestampMonotonic={client}; "
                 f"assert at {asserted}, client start at {started}")


def _client_holds_gpu(report: GuestReport, ctx: BootContext) -> Claim:
    state = report.unit(GPU_CLIENT).get("ActiveState", "?")
    knobs = report.section("simgpu-knobs")
    held = any(line.startswith("in-use=") for line in knobs)
    return Claim("gpu-client-holds-gpu", f"{GPU_CLIENT} runs and holds the GPUs (simgpu in-use) after the restore",
                 state == "active" and held, f"ActiveState={state}; knobs: {list(knobs) or 'none'}")


def _upgrade_ran(report: GuestReport, ctx: BootContext) -> Claim:
    lines = report.section("fake-upgrade")
    return Claim("package-upgrade-ran", f"the simulated package upgrade ran systemctl enable {MANAGER}",
                 any(f"systemctl enable {MANAGER}" in line for line in lines), " | ".join(lines) or "no record")

