"""Claims of a driver-container boot, from what ``guest/driver-scenario`` wrote (``guest.SCENARIO_LOG``).

The log: one ``WORD VALUE`` line per event (``gated-recorded``, ``restart MODE``, ``driver-gone``,
``mig-ready-gone``, ``restored``, ``mig-ready-before``/``-after`` with the ready file's words), then
sections (``=== NAME``): the module, the host's view, the fallback runs, the plugins' records
(``=== plugin NAME TIME``, the ready file, the simulated GPUs as ``gpu N bus B mig M pending P instances
PROFILE@START,...``), the stub kubectl's calls, the watcher's journal and the stub log.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migbake_boottest.drivercontainer import scenarios as sc
from migbake_boottest.drivercontainer.guest import SCENARIO_LOG
from migbake_boottest.scenarios.claims import Claim
from migbake_boottest.simgpu.node import GpuState

__all__ = ["SCENARIO_LOG", "boot_claims", "parse"]
QUICK_S = 6.0  # the watcher polls every 2 s; under TCG a poll and a journal write may take a few more


@dataclass(frozen=True)
class Record:
    """One plugin's record: who, when, the ready file it saw and the simulated GPUs."""

    plugin: str
    at: float
    mig_ready: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class ScenarioLog:
    """The parsed log of one boot."""

    events: tuple[tuple[str, str], ...]
    sections: Mapping[str, tuple[str, ...]]
    records: tuple[Record, ...]

    def section(self, name: str) -> tuple[str, ...]:
        """The lines of section ``name`` (empty when absent)."""
        return self.sections.get(name, ())

    def first(self, word: str) -> str | None:
        """The value of the first event ``word``."""
        return next((v for w, v in self.events if w == word), None)


def parse(text: str) -> ScenarioLog:
    """Split the scenario log into events, sections and plugin records."""
    events: list[tuple[str, str]] = []
    sections: dict[str, list[str]] = {}
    records: list[Record] = []
    current: list[str] | None = None
    for line in text.splitlines():
        plugin = re.fullmatch(r"=== plugin (\w+) ([\d.]+)", line)
        if plugin:
            records.append(Record(plugin[1], float(plugin[2]), "", ()))
            continue
        if line.startswith("=== "):
            current = sections.setdefault(line[4:].strip(), [])
            continue
        if records and current is not None and current is sections.get("plugins"):
            last = records[-1]
            if line.startswith("mig-ready: "):
                records[-1] = Record(last.plugin, last.at, line[11:].strip(), last.gpus)
            elif line.startswith("gpu "):
                records[-1] = Record(last.plugin, last.at, last.mig_ready, (*last.gpus, line))
            continue
        if current is not None:
            current.append(line)
        else:
            word, _, value = line.partition(" ")
            events.append((word, value))
    return ScenarioLog(tuple(events), {k: tuple(v) for k, v in sections.items()}, tuple(records))


def gpu_layout(line: str) -> tuple[bool, dict[str, int]] | None:
    """(MIG on, profile -> count) of a ``gpu N ... mig M pending P instances ...`` line."""
    words = line.split()
    if len(words) != 10 or words[4] != "mig" or words[8] != "instances":
        return None
    instances = [] if words[9] == "-" else [w.split("@")[0] for w in words[9].split(",")]
    return words[5] == "1", dict(Counter(instances))


def has_layout(record: Record, expected: Sequence[GpuState]) -> bool:
    """Whether ``record`` saw every GPU with the profile's MIG mode and instances (and no other GPU)."""
    seen = [gpu_layout(g) for g in record.gpus]
    want = [(g.mig_enabled, dict(g.layout)) for g in expected]
    return bool(want) and seen == want


def _stamp(log: ScenarioLog, word: str) -> float | None:
    value = log.first(word)
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _calls(log: ScenarioLog, what: str, after: float = 0.0) -> list[float]:
    """Times of stub-log lines ``TIME WHAT ...`` after ``after``."""
    out = []
    for line in log.section("stub-log"):
        stamp, _, rest = line.partition(" ")
        if rest.startswith(what):
            try:
                at = float(stamp)
            except ValueError:
                continue
            if at > after:
                out.append(at)
    return out


def _ready_gen(words: str | None) -> str:
    found = re.search(r"gen=(\S+)", words or "")
    return found[1] if found else ""


def common_claims(log: ScenarioLog) -> list[Claim]:
    """What every driver-container boot shows: kubelet not held, the driver's signals, the /sys fallback."""
    kubelet = _calls(log, "kubelet ExecStartPre")
    driver = _calls(log, "driver-container start")
    view = log.section("host-view")
    fallback = log.section("fallback")
    split = next((i for i, x in enumerate(fallback) if x.startswith("--- chroot with /sys")), len(fallback))
    without, with_sys = fallback[:split], fallback[split:]
    rc_without = next((x for x in without if x.startswith("rc=")), "rc=?")
    rc_with = next((x for x in with_sys if x.startswith("rc=")), "rc=?")
    gpus_without = any("devices:" in x for x in without)  # mig-parted export: "- devices: all" per config entry
    gpus_with = any("devices:" in x for x in with_sys)
    return [
        Claim("kubelet-not-held", "kubelet started before the driver container, which kubelet starts (never held)",
              bool(kubelet) and bool(driver) and kubelet[0] < driver[0],
              f"kubelet at {kubelet[:1] or 'never'}, driver container at {driver[:1] or 'never'}"),
        Claim("driver-simulated", "the driver container's module is live, its userspace only in its root, and its "
              "exposed root has none of /sys's submounts", "initstate=live" in log.section("module")
              and not any(x.startswith("host has ") for x in view)
              and "driver-root-nvml=yes" in view and "driver-root-sys-submounts=0" in view,
              " | ".join((*log.section("module"), *view)) or "nothing recorded"),
        Claim("fallback-binds-sys", "NVIDIA's mig-parted in the driver's exposed root finds no GPU without the host's "
              "/sys bound in (the simulated PCI bus is a submount of /sys) and finds them with it",
              rc_without != "rc=?" and (rc_without != "rc=0" or not gpus_without) and rc_with == "rc=0" and gpus_with,
              f"without /sys: {rc_without}; with /sys: {rc_with}; " + " | ".join(fallback)[:600]),
    ]


def restart_claims(log: ScenarioLog, expected: Sequence[GpuState]) -> list[Claim]:
    """Per restart of the boot: the ready file went quickly, came back with a new generation, applied or not."""
    claims: list[Claim] = []
    events = list(log.events)
    starts = [i for i, (w, _) in enumerate(events) if w == "restart"]
    for n, index in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(events)
        part = dict(events[index + 1:end])
        mode = events[index][1]
        gone = float(part.get("driver-gone", "0") or 0)
        lag = float(part["mig-ready-gone"]) - gone if "mig-ready-gone" in part else None
        claims.append(Claim(f"ready-gone-{mode}", f"after the driver's {mode} restart its ready file went and "
                            f"/run/migbake/mig-ready within {QUICK_S:.0f} s",
                            lag is not None and 0 <= lag <= QUICK_S,
                            f"{lag:.1f} s" if lag is not None else "mig-ready stayed"))
        before, after = _ready_gen(part.get("mig-ready-before")), _ready_gen(part.get("mig-ready-after"))
        later = [r for r in log.records if r.plugin == "gated" and r.at > gone]
        claims.append(Claim(f"restored-{mode}", f"after the {mode} restart the layout is back under a new driver "
                            "generation, and the restarted gated plugin saw it",
                            "restored" in part and bool(before) and bool(after) and before != after
                            and bool(later) and has_layout(later[0], expected),
                            f"generation {before or '-'} -> {after or '-'}; gated plugin saw "
                            f"{' | '.join(later[0].gpus) if later else 'nothing'}"))
        applies = _calls(log, "nvidia-mig-parted apply", gone)
        asserts = _calls(log, "nvidia-mig-parted assert", gone)
        until = float(part.get("restored", "0") or 0) or float("inf")
        applies = [a for a in applies if a <= until]
        if mode == "unload":
            claims.append(Claim("reapplied-unload", "the modules were unloaded (MIG lost): the watcher applied again",
                                bool(applies), f"{len(applies)} apply call(s) after the restart"))
        else:
            claims.append(Claim("asserted-userspace", "userspace only (MIG kept): the watcher asserted and applied "
                                "nothing", not applies and bool(asserts),
                                f"{len(applies)} apply, {len(asserts)} assert call(s) after the restart"))
    return claims


def boot_claims(text: str | None, scenario: str, expected: Sequence[GpuState], boot: int) -> list[Claim]:
    """Every claim of one boot of a driver-container ``scenario``."""
    if text is None or "=== end" not in text:
        return [Claim("scenario-log", "the driver-container scenario wrote its log", False,
                      "no log" if text is None else "the log stops early")]
    log = parse(text)
    claims = common_claims(log)
    gated = [r for r in log.records if r.plugin == "gated"]
    control = [r for r in log.records if r.plugin == "control"]
    journal = " | ".join(log.section("watcher-journal"))
    kubectl = log.section("kubectl")
    if scenario == sc.CPU_NODE:
        claims.append(Claim("watcher-idle", "without /etc/migbake/managed the watcher idles and never calls mig-parted",
                            "idle" in journal and not _calls(log, "nvidia-mig-parted"), journal[:300]))
        claims.append(Claim("gate-passes", "the gate let the plugin start at once on a node that is not ours",
                            bool(gated) and gated[0].mig_ready == "absent",
                            f"gated plugin: {'started' if gated else 'never started'}"))
        return claims
    if scenario == sc.FAIL:
        applies = _calls(log, "nvidia-mig-parted apply")
        tries = re.findall(r"attempt \d+ of (\d+) failed", journal)
        claims += [
            Claim("gated-held", "the gated plugin never got past the gate", not gated and
                  _calls(log, "plugin-gated start") != [], f"{len(gated)} record(s)"),
            Claim("failed-labelled", "the node was labelled migbake.io/mig-state=failed (kubelet's credentials)",
                  any("migbake.io/mig-state=failed" in x for x in kubectl), " | ".join(kubectl)[-300:] or "no call"),
            Claim("failure-journal", "the watcher's journal says why (apply failed)",
                  "FAILED:" in journal and "apply" in journal, journal[-400:]),
            Claim("attempts-bounded", "a bounded number of attempts, each one apply",
                  bool(tries) and len(applies) == int(tries[0]) <= 5,
                  f"{len(applies)} apply call(s); the journal counts {tries[:1] or 'none'}"),
        ]
        return claims
    claims.append(Claim("gated-sees-layout", "the gated plugin started only once the layout was restored, and saw it",
                        bool(gated) and gated[0].mig_ready != "absent" and has_layout(gated[0], expected),
                        f"ready file {gated[0].mig_ready}; GPUs {' | '.join(gated[0].gpus)}" if gated else "no record"))
    if scenario == sc.DRIVER_CONTAINER:
        claims.append(Claim("control-sees-unrestored", "the ungated control, started the moment the driver was "
                            "ready, saw the GPU before migbake restored it",
                            bool(control) and control[0].mig_ready == "absent"
                            and not has_layout(control[0], expected) and bool(control[0].gpus),
                            f"GPUs {' | '.join(control[0].gpus)}" if control else "no record"))
    if scenario in (sc.RESTART, sc.RESTART_USERSPACE) or (scenario == sc.DRIVER_CONTAINER and boot == 2):
        claims += restart_claims(log, expected)
    return claims
