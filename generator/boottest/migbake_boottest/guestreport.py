"""Parsing what a booted guest left behind: the test report (with the stub call log inside it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

END = "end"


@dataclass(frozen=True)
class StubCall:
    """One line of /var/log/mig-stub.log: who was called when (guest wall clock)."""

    time: float
    event: str  # smi, apply, assert, export, kubelet, mig-manager, or the raw word
    text: str
    line: int


@dataclass(frozen=True)
class FileStat:
    """``stat`` of a file the output under test must install."""

    mode: str
    owner: str
    path: str


@dataclass(frozen=True)
class GuestReport:
    """/var/log/test-report.txt, split into its ``=== NAME`` sections."""

    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """The report script ran to its end marker."""
        return END in self.sections

    def section(self, name: str) -> tuple[str, ...]:
        return self.sections.get(name, ())

    def unit(self, name: str) -> Mapping[str, str]:
        """``systemctl show`` properties of ``name`` as a dict."""
        pairs = (line.partition("=") for line in self.section(f"show {name}"))
        return {key: value for key, sep, value in pairs if sep}

    def calls(self) -> tuple[StubCall, ...]:
        return tuple(parse_stub_log(self.section("stub-log")))

    def files(self) -> dict[str, FileStat | None]:
        found: dict[str, FileStat | None] = {}
        for line in self.section("files"):
            words = line.split(maxsplit=3)
            if words[:1] == ["file"] and len(words) == 4:
                found[words[3]] = FileStat(words[1], words[2], words[3])
            elif words[:1] == ["missing"] and len(words) == 2:
                found[words[1]] = None
        return found

    def assert_exit_code(self) -> int | None:
        """Exit code of the final ``nvidia-mig-parted assert`` the report ran, if recorded."""
        for line in self.section("mig-assert"):
            if line.startswith("rc=") and line[3:].isdigit():
                return int(line[3:])
        return None


    def walked_gpus(self) -> set[int]:
        """The GPUs ``nvidia-mig-parted -d assert`` walked (its "GPU N: 0x..." debug lines)."""
        return {int(m.group(1)) for line in self.section("mig-assert") for m in [_WALKED.search(line)] if m}

    def exported(self, gpus: int) -> dict[int, tuple[bool, dict[str, int]]] | str:
        """Per GPU, (MIG enabled, instances) from the ``export`` in the report; a string says why not.

        ``devices: all`` stands for ``gpus`` GPUs: export cannot tell how many it saw.
        """
        try:
            spec = yaml.safe_load("\n".join(self.section("mig-state")))
            entries = spec["mig-configs"]["current"] or []
            found: dict[int, tuple[bool, dict[str, int]]] = {}
            for entry in entries:
                devices = range(gpus) if entry["devices"] == "all" else entry["devices"]
                for index in devices:
                    found[int(index)] = (bool(entry["mig-enabled"]), dict(entry.get("mig-devices") or {}))
        except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
            return f"cannot read the export: {exc!r}"
        return found


_WALKED = re.compile(r"msg=\"  GPU (\d+): ")


def parse_report(text: str) -> GuestReport:
    """Split the report text into sections; lines before the first marker are ignored."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("=== "):
            current = sections.setdefault(line[4:].strip(), [])
        elif current is not None:
            current.append(line)
    return GuestReport({name: tuple(lines) for name, lines in sections.items()})


def parse_stub_log(lines: tuple[str, ...] | list[str]) -> list[StubCall]:
    """Parse "EPOCH.NANOS WHO ARGS" lines; unparsable lines are skipped."""
    calls = []
    for number, line in enumerate(lines, start=1):
        stamp, _, rest = line.strip().partition(" ")
        try:
            when = float(stamp)
        except ValueError:
            continue
        calls.append(StubCall(when, _event(rest.split()), rest, number))
    return calls


def _event(words: list[str]) -> str:
    if not words:
        return ""
    if words[0] == "nvidia-smi":
        return "smi"
    if words[0] == "nvidia-mig-parted":
        return next((w for w in words[1:] if w in ("apply", "assert", "export")), "mig-parted")
    if words[:2] == ["kubelet", "ExecStartPre"]:
        return "kubelet"
    if words[:2] == ["nvidia-mig-manager", "RAN"]:
        return "mig-manager"
    return words[0]
