"""What a node's own driver offers: the MIG profiles of a captured ``nvidia-mig-parted generate-config``.

NVIDIA's ``generate-config`` (mig-parted v0.15.0) asks NVML on the node for every GPU-instance profile
and writes one ``all-<profile>`` config per profile with the driver's maximum count (with a
``device-filter`` per GPU type on a node of several types), besides ``all-disabled``, ``all-enabled``
and ``all-balanced``. ``migbake preflight --mig-parted-generate-config FILE`` checks a profile's layouts
against it: a layout naming a profile the driver does not offer, or more instances than its maximum,
is NOT READY. The file is untrusted input: read bounded, parsed safely, every problem located.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migbake.document.files import read_bounded
from migbake.document.loader import LoadedProfile, join_pointer, load_profile_bytes
from migbake.gpu.catalog import PROFILE_NAME_RE, canonical_pci_id
from migbake.node.nvidiasmi import CaptureError
from migbake.problems import MigbakeError, Problem, sort_problems

MAX_GENERATE_CONFIG_BYTES = 256 * 1024  # generate-config writes about 1 KiB per GPU type
BASE_CONFIGS = ("all-disabled", "all-enabled", "all-balanced")
MAX_COUNT = 64  # no GPU offers more instances of one profile (7 today)
PCI_ID_RE = re.compile(r"0x[0-9A-Fa-f]{8}")
WHAT = "nvidia-mig-parted generate-config"


@dataclass(frozen=True)
class Offer:
    """One profile the driver offers, its maximum count, and to which GPUs (none listed: every GPU)."""

    profile: str
    max_count: int
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class DriverOffers:
    """Every ``all-<profile>`` entry of one generate-config capture."""

    file: str
    offers: tuple[Offer, ...]

    def for_ids(self, pci_ids: Iterable[str]) -> dict[str, int]:
        """Profile name -> maximum count the driver offers a GPU with one of ``pci_ids``."""
        ids = {canonical_pci_id(i) for i in pci_ids}
        found: dict[str, int] = {}
        for o in self.offers:
            if not o.device_ids or ids & set(o.device_ids):
                found[o.profile] = max(found.get(o.profile, 0), o.max_count)
        return found


class GenerateConfigError(MigbakeError):
    """The capture is not what generate-config writes: every problem, located (exit 1: invalid input)."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.problems = sort_problems(problems)
        super().__init__(f"{file}: not a usable {WHAT} capture; nothing checked")

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: {self}"]


def _filter(loaded: LoadedProfile, raw: object, at: str, problems: list[Problem]) -> tuple[str, ...]:
    values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
    if values is None or not values:
        problems.append(loaded.problem(at, "device-filter must be a PCI device id or a list of them", "gc-filter"))
        return ()
    ids = []
    for k, v in enumerate(values):
        if not isinstance(v, str) or not PCI_ID_RE.fullmatch(v):
            where = at if isinstance(raw, str) else join_pointer(at, k)
            problems.append(loaded.problem(where, f"{v!r} is not a PCI device id like 0x233510DE", "gc-filter"))
        else:
            ids.append(canonical_pci_id(v))
    return tuple(ids)


def _entry(loaded: LoadedProfile, config: str, entry: object, at: str, problems: list[Problem]) -> Offer | None:
    if not isinstance(entry, dict):
        problems.append(loaded.problem(at, "an entry must be a mapping (devices, mig-enabled, mig-devices)",
                                       "gc-entry"))
        return None
    devices = entry.get("mig-devices")
    if entry.get("mig-enabled") is not True or not isinstance(devices, dict) or len(devices) != 1:
        problems.append(loaded.problem(at, f"{WHAT} writes {config} as mig-enabled: true with one profile "
                                       "in mig-devices", "gc-entry"))
        return None
    (name, count), = devices.items()
    where = join_pointer(join_pointer(at, "mig-devices"), name)
    if not isinstance(name, str) or not PROFILE_NAME_RE.fullmatch(name) or \
            config != "all-" + name.replace("+", "."):
        problems.append(loaded.problem(where, f"{name!r} is not the MIG profile that {config} names", "gc-profile",
                                       key=True))
        return None
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        problems.append(loaded.problem(where, f"the count must be a whole number 1-{MAX_COUNT}", "gc-count"))
        return None
    ids = () if "device-filter" not in entry else _filter(
        loaded, entry["device-filter"], join_pointer(at, "device-filter"), problems)
    return Offer(name, count, ids)


# A line of mig-parted's own log (it logs with sirupsen/logrus; NVIDIA/mig-parted:go.mod), as logrus's
# TextFormatter writes it when stderr is not a terminal (sirupsen/logrus:text_formatter.go@01105720bf74,
# Format and needsQuoting): time=RFC3339, level, msg, then sorted fields; a value is bare when it holds
# only letters, digits and - . _ / @ ^ +, else Go-quoted (%q). Only a whole line of that form is dropped.
_LOG_VALUE = r'(?:"(?:[^"\\\n]|\\[^\n])*"|[A-Za-z0-9._/@^+-]*)'
LOGRUS_LINE = re.compile(
    r'time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"'
    r" level=(?:panic|fatal|error|warning|info|debug|trace)"
    rf"(?: msg={_LOG_VALUE})?(?: [A-Za-z0-9._/@^+-]+={_LOG_VALUE})*\r?")


def without_log_lines(data: bytes) -> tuple[bytes, int]:
    """``data`` with every whole logrus line of mig-parted's (a capture taken with ``2>&1``) made empty,
    so that line numbers stay; and how many there were."""
    lines = data.split(b"\n")
    dropped = 0
    for k, line in enumerate(lines):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the parser says where the file is not UTF-8
        if LOGRUS_LINE.fullmatch(text):
            lines[k] = b""
            dropped += 1
    return b"\n".join(lines), dropped


def parse_generate_config(data: bytes, file: str) -> DriverOffers:
    """The offers of a capture's bytes (YAML, or generate-config's ``-o json``); invalid raises.

    mig-parted's own log lines (``time="..." level=info msg="..."``: a capture taken with ``2>&1``) are
    skipped, whole lines only; anything else that is not the config is reported where it stands.
    """
    data, logged = without_log_lines(data)
    if not data.strip():
        only_log = f" (only {logged} line(s) of mig-parted's log: capture its standard output)" if logged else ""
        raise GenerateConfigError(file, [Problem(file, 1, 1, "", f"the file is empty{only_log}; capture it with "
                                                 f"`{WHAT} > FILE` on the node", "empty-file")])
    loaded, problems = load_profile_bytes(data, file)
    problems = [p for p in problems if p.rule != "not-a-mapping"]
    root: Any = loaded.data
    if not problems and (not isinstance(root, dict) or root.get("version") != "v1"
                         or not isinstance(root.get("mig-configs"), dict)):
        problems.append(loaded.problem("", f"expected {WHAT} output: a mapping with version: v1 and mig-configs",
                                       "gc-shape"))
    if problems:
        raise GenerateConfigError(file, problems)
    offers = []
    for config, entries in root["mig-configs"].items():
        at = join_pointer("/mig-configs", config)
        if config in BASE_CONFIGS:
            continue
        if not isinstance(config, str) or not config.startswith("all-"):
            problems.append(loaded.problem(at, f"{config!r} is not a config {WHAT} writes (all-<profile>)",
                                           "gc-config", key=True))
        elif not isinstance(entries, list) or not entries:
            problems.append(loaded.problem(at, "a config must be a list of entries", "gc-entry"))
        else:
            offers += [o for k, e in enumerate(entries)
                       if (o := _entry(loaded, config, e, join_pointer(at, k), problems)) is not None]
    if not problems and not offers:
        problems.append(loaded.problem("/mig-configs", "no all-<profile> config: the driver offered no MIG "
                                       "profile (or this is not generate-config output)", "gc-shape"))
    if problems:
        raise GenerateConfigError(file, problems)
    return DriverOffers(file, tuple(offers))


def read_generate_config(path: Path) -> DriverOffers:
    """Read (at most 256 KiB; unreadable or larger: exit 2) and parse a generate-config capture."""
    data = read_bounded(path, 1024 * 1024, CaptureError)
    if len(data) > MAX_GENERATE_CONFIG_BYTES:
        raise CaptureError(f"{path}: {len(data)} bytes or more; a {WHAT} capture is at most "
                           f"{MAX_GENERATE_CONFIG_BYTES} bytes")
    return parse_generate_config(data, str(path))
