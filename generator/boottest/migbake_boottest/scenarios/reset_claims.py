"""Claims of the scenarios ``ampere-pending``, ``ampere-pending-stuck`` and ``cdi`` (``scenarios.reset``).

Evidence only from the guest: its report (when the boot ended through it), its boot record (written at
every orderly shutdown: the queued shutdown job, unit states, the restore's journal), the reboot marker
and the fake CDI refresh's log, all read back from the disk after each boot. A boot that ended by the
guest's own reboot has no report; the boot after it has one. The ordinary claims of a boot (call order,
layout, export, kubelet) come from ``claims.evaluate``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.claims import KUBELET, RESTORE, BootContext, Claim, evaluate
from migbake_boottest.scenarios.dra_claims import dra_claims

_WRITE = re.compile(r"^=== write (\d+\.\d+) uptime (\S+)$", re.M)
_MARK = re.compile(r"^=== ", re.M)  # a write, or a failed run of the fake refresh
# claims.evaluate's claims about an injected fault that do not fit a pending mode change
_FAULT_ONLY = {"stub-calls"}


@dataclass(frozen=True)
class Evidence:
    """What one boot of a scenario left on the disk."""

    boot: int
    exit_code: int
    timed_out: bool
    console: str
    report: GuestReport | None  # the test report: only a boot that powered off through it has one
    report_path: Path | None
    record: GuestReport | None  # /var/log/boot-record-N.txt (reboot scenarios)
    marker: str | None  # the reboot marker's text after the boot; None: absent
    marker_path: str
    cdi_log: str | None = None  # every write of the fake nvidia-cdi-refresh this boot
    cdi_final: str | None = None  # /var/run/cdi/nvidia.yaml when the report ran

    @property
    def jobs(self) -> tuple[str, ...]:
        return self.record.section("jobs") if self.record is not None else ()

    @property
    def rebooted(self) -> bool:
        """The boot ended in an orderly shutdown with reboot.target queued."""
        return any(line.split()[1:2] == ["reboot.target"] for line in self.jobs)

    @property
    def powered_off(self) -> bool:
        return any(line.split()[1:2] == ["poweroff.target"] for line in self.jobs)


def boot_claims(ev: Evidence, ctx: BootContext) -> list[Claim]:
    """The claims of one boot of ``ctx.scenario``."""
    claims = []
    if ev.exit_code != 0:
        why = f"killed after the timeout (exit {ev.exit_code})" if ev.timed_out else f"QEMU exited {ev.exit_code}"
        claims.append(Claim("powered-off", "the guest shut down (reboot or power-off) before the timeout", False, why))
    ctx = replace(ctx, console=ev.console)
    if ctx.scenario == "cdi":
        return claims + evaluate(ev.report, replace(ctx, scenario="ok")) + _cdi_claims(ev, ctx) + dra_claims(
            ev.report, ctx)
    if ev.boot == 1:
        return [*claims, _rebooted_cleanly(ev), _marker_set(ev), _reboot_reason_logged(ev),
                _kubelet_down_before_reboot(ev), _mode_pending_at_reboot(ev, ctx)]
    if ctx.scenario == "ampere-pending":
        return claims + evaluate(ev.report, replace(ctx, scenario="ok")) + [_marker_cleared(ev)] + dra_claims(
            ev.report, ctx)
    base = evaluate(ev.report, replace(ctx, scenario="fail-apply"))
    return claims + [c for c in base if c.id not in _FAULT_ONLY] + [_reboot_not_repeated(ev), _marker_kept(ev)]


def run_claims(boots: list[Evidence], ctx: BootContext) -> list[Claim]:
    """Claims about the whole run of a reboot scenario (on its last boot)."""
    last = boots[-1]
    ended = [("reboot" if b.rebooted else "power-off" if b.powered_off else "no record") for b in boots]
    return [Claim("boot-count", "exactly one reboot by the restore: boot 1 rebooted, boot 2 powered off "
                  "through the test report (no reboot loop)",
                  len(boots) == 2 and boots[0].rebooted and last.powered_off and not last.rebooted
                  and last.report is not None and last.report.complete,
                  f"{len(boots)} boot(s), ended by: {', '.join(ended)}; "
                  f"report on the last boot: {'complete' if last.report and last.report.complete else 'missing'}")]


# --- a boot that rebooted ---------------------------------------------------------------------------

def _rebooted_cleanly(ev: Evidence) -> Claim:
    return Claim("rebooted-cleanly", "the restore rebooted the node with a clean systemctl reboot (orderly "
                 "shutdown, reboot.target queued; the test report did not run)",
                 ev.exit_code == 0 and ev.rebooted and ev.report is None,
                 f"shutdown jobs: {' | '.join(ev.jobs) or 'no boot record (no orderly shutdown)'}; "
                 f"report: {'present' if ev.report is not None else 'none'}")


def _marker_set(ev: Evidence) -> Claim:
    text = (ev.marker or "").strip()
    return Claim("reboot-marker-set", f"{ev.marker_path} records the reboot and the pending GPUs",
                 ev.marker is not None and "->" in text, text or "absent after the boot")


def _reboot_reason_logged(ev: Evidence) -> Claim:
    journal = _journal(ev.record)
    rebooting = [line for line in journal if "rebooting once to complete it" in line]
    reset = [line for line in journal if "could not be reset" in line or "error resetting" in line]
    return Claim("reboot-reason-logged", "the journal says why: mig-parted's GPU reset failed and the "
                 "mode change is pending, so the restore reboots once", bool(rebooting and reset),
                 " | ".join(reset[-1:] + rebooting) or f"journal: {' | '.join(journal[-5:]) or 'empty'}")


def _kubelet_down_before_reboot(ev: Evidence) -> Claim:
    record = ev.record or GuestReport()
    started = record.unit(KUBELET).get("InactiveExitTimestampMonotonic", "?")
    restore = record.unit(RESTORE)
    calls = [c.text for c in record.calls() if c.event == "kubelet"]
    # the restore's Result is exit-code, or signal when the reboot stopped it before its own exit 1
    return Claim("kubelet-down-before-reboot", "kubelet never started on the boot that rebooted (the restore failed)",
                 ev.record is not None and started == "0" and not calls and restore.get("ActiveState") == "failed",
                 f"kubelet InactiveExitTimestampMonotonic={started}, ExecStartPre lines: {calls or 'none'}; "
                 f"restore ActiveState={restore.get('ActiveState', '?')} Result={restore.get('Result', '?')}")


def _mode_pending_at_reboot(ev: Evidence, ctx: BootContext) -> Claim:
    state = [line for line in (ev.record or GuestReport()).section("simgpu-state") if line.startswith("gpu ")]
    want = len(ctx.expected or ())
    pending = [line for line in state if " mig 0 pending 1 " in line]
    return Claim("mode-pending-at-reboot", f"at the reboot all {want} GPU(s) had MIG mode Disabled, Enabled pending",
                 bool(state) and len(pending) == len(state) == want, " | ".join(state) or "no GPU state recorded")


# --- the boot after the reboot -----------------------------------------------------------------------

def _marker_cleared(ev: Evidence) -> Claim:
    removed = [line for line in _journal(ev.report) if f"removed {ev.marker_path}" in line]
    return Claim("reboot-marker-cleared",
                 f"the boot after the reboot completed the change and removed {ev.marker_path}",
                 ev.marker is None and bool(removed),
                 f"marker {'absent' if ev.marker is None else 'still there: ' + ev.marker.strip()}; "
                 f"journal: {removed or 'no removal line'}")


def _reboot_not_repeated(ev: Evidence) -> Claim:
    said = [line for line in _journal(ev.report) if "not rebooting again" in line]
    return Claim("reboot-not-repeated", "still pending after the reboot: the restore failed closed with its "
                 "message and did not reboot again", bool(said) and not ev.rebooted,
                 f"journal: {said or 'no such line'}; shutdown jobs: {' | '.join(ev.jobs) or 'none recorded'}")


def _marker_kept(ev: Evidence) -> Claim:
    return Claim("reboot-marker-kept", f"{ev.marker_path} stays, so no later boot reboots either",
                 ev.marker is not None, (ev.marker or "absent").strip())


# --- cdi --------------------------------------------------------------------------------------------

def cdi_writes(log: str | None) -> list[tuple[float, str]]:
    """(wall-clock time, spec text) of every write in the fake CDI refresh's log, in order."""
    if not log:
        return []
    marks = list(_WRITE.finditer(log))
    ends = [m.start() for m in _MARK.finditer(log)] + [len(log)]  # a write's text ends at the next === line
    return [(float(m.group(1)), log[m.end() + 1:next(e for e in ends if e > m.start())]) for m in marks]


def cdi_devices(spec: str) -> dict[int, Counter[str]] | str:
    """Per GPU, the MIG profiles of the spec's "GPU:MIG" devices; a string says why not."""
    try:
        devices = (yaml.safe_load(spec) or {}).get("devices") or []
        found: dict[int, Counter[str]] = {}
        for device in devices:
            gpu, sep, _ = str(device["name"]).partition(":")
            if sep:
                found.setdefault(int(gpu), Counter())[str(device["annotations"]["mig.profile"])] += 1
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as exc:
        return f"cannot read the CDI spec: {exc!r}"
    return found


def _cdi_claims(ev: Evidence, ctx: BootContext) -> list[Claim]:
    writes = cdi_writes(ev.cdi_log)
    calls = ev.report.calls() if ev.report is not None else ()
    apply = next((c.time for c in calls if c.event == "apply"), None)
    asserted = next((c.time for c in calls if c.event == "assert"), None)
    first = writes[0] if writes else None
    early_devices = cdi_devices(first[1]) if first else "no write"
    if ctx.path == "cloud-init" and ctx.boot == 1:  # the restore unit arrives with cloud-init, after the refresh
        early = Claim("cdi-written-early", "the fake toolkit wrote the CDI spec before the restore applied the "
                      "layout, without MIG devices (cloud-init installs the restore after the boot's refresh ran)",
                      first is not None and apply is not None and first[0] < apply and early_devices == {},
                      f"first write at {first[0] if first else '-'}, apply at {apply}; its MIG devices: "
                      f"{early_devices}")
    else:  # Before=nvidia-cdi-refresh.service: the boot's first refresh waits for the restore
        early = Claim("cdi-after-restore", "the boot's first CDI spec was written after the restore's assert "
                      "(the restore unit is ordered before nvidia-cdi-refresh.service)",
                      first is not None and asserted is not None and first[0] > asserted,
                      f"first write at {first[0] if first else '-'}, assert at {asserted}; {len(writes)} write(s)")
    want = {i: Counter(dict(g.layout)) for i, g in enumerate(ctx.expected or ()) if g.mig_enabled and g.layout}
    last = writes[-1] if writes else None
    listed = cdi_devices(last[1]) if last else "no write"
    same = last is not None and ev.cdi_final is not None and ev.cdi_final.strip() == last[1].strip()
    wrong = ([f"GPU {i}: {dict(listed.get(i, Counter()))} != {dict(w)}" for i, w in want.items()
              if listed.get(i) != w] + [f"unexpected GPU {i}" for i in sorted(set(listed) - set(want))]
             if isinstance(listed, dict) else [listed])
    after = last is not None and asserted is not None and last[0] > asserted
    devices = sum(sum(c.values()) for c in want.values())  # Counter.total() is Python 3.10's
    dynamic = ctx.allocation == "dra-dynamic"  # the restore creates no instance: the spec lists no MIG device
    current = Claim("cdi-spec-current", "the CDI spec written last (the one on disk at the end of the boot) lists "
                    "every restored MIG device" + (" (none: dra-dynamic)" if dynamic else "") + ", and was "
                    "written after the restore's assert",
                    (bool(want) or dynamic) and same and after and not wrong,
                    f"{len(writes)} write(s); last at {last[0] if last else '-'}, assert at {asserted}; "
                    f"spec at report time {'is' if same else 'is NOT'} the last write; "
                    + ("; ".join(wrong) or f"{devices} MIG devices as in the profile"))
    return [early, current]


def _journal(report: GuestReport | None) -> tuple[str, ...]:
    return report.section(f"journal {RESTORE}") if report is not None else ()
