"""Captured nvidia-smi output of a node, read safely: ``nvidia-smi -q -x`` and ``--query-gpu`` CSV.

What ``migbake preflight`` checks a profile against, and what ``migbake import --nvidia-smi-xml``
reads the GPU models from.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from xml.parsers import expat

from migbake.document.files import read_bounded
from migbake.exits import EXIT_USAGE
from migbake.gpu.catalog import canonical_pci_id
from migbake.problems import MigbakeError

CaptureFormat = Literal["nvidia-smi-xml", "nvidia-smi-csv"]
QUERY_FIELDS = ("index", "name", "pci.device_id", "mig.mode.current")
# what a capture may leave out, as the README's own --query-gpu=name,pci.device_id does
OPTIONAL_FIELDS = ("index", "mig.mode.current")
MAX_CAPTURE_BYTES = 16 * 1024 * 1024
_INDEX = re.compile(r"[0-9]{1,6}")  # a GPU index as nvidia-smi prints it: ASCII digits (not "²"), a few


class CaptureError(MigbakeError):
    """Captured nvidia-smi output cannot be read: missing, malformed, unsafe XML or unexpected columns."""

    exit_code = EXIT_USAGE  # like an unreadable option value


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reported it (``pci_device_id`` in mig-parted's ``0xDDDDVVVV`` form)."""

    index: int
    name: str
    pci_device_id: str
    mig_mode: str
    mig_devices: tuple[str, ...] | None = None  # profile names, when the capture has them (nvidia-smi -L)
    mig_device_count: int | None = None  # how many, when only that is known (nvidia-smi -q -x)


@dataclass(frozen=True)
class Capture:
    """GPUs read from one captured nvidia-smi output."""

    source: CaptureFormat
    file: str
    gpus: tuple[Gpu, ...]
    driver_version: str = ""  # "" when the capture does not say (the CSV without a driver_version column)


def _refuse_entity(*_: object) -> None:
    raise CaptureError("the XML declares entities; nvidia-smi -q -x never does (refused: entity expansion)")


def _refuse_internal_subset(_name: str, _sysid: str | None, _pubid: str | None, internal_subset: int) -> None:
    if internal_subset:
        raise CaptureError("the XML's DOCTYPE has an internal subset; nvidia-smi -q -x never writes one "
                           "(refused)")


def _safe_root(data: bytes, file: str) -> ET.Element:
    """Parse XML that declares no entities: expat reports every declaration first, then ElementTree reads it.

    Neither parser fetches the external DTD the real file names (nvsmi_device_v13.dtd).
    """
    scan = expat.ParserCreate()
    scan.StartDoctypeDeclHandler = _refuse_internal_subset
    scan.EntityDeclHandler = _refuse_entity
    scan.UnparsedEntityDeclHandler = _refuse_entity
    try:
        scan.Parse(data, True)
        return ET.fromstring(data)
    except (expat.ExpatError, ET.ParseError) as err:
        raise CaptureError(f"{file}: not well-formed XML: {err}") from err
    except (LookupError, ValueError) as err:  # an encoding the XML declares that Python does not know
        raise CaptureError(f"{file}: cannot read the XML: {err}") from err
    except RecursionError as err:  # pragma: no cover - expat is not recursive; ElementTree neither
        raise CaptureError(f"{file}: the XML is nested too deep") from err
    except CaptureError as err:
        raise CaptureError(f"{file}: {err}") from err


def _text(gpu: ET.Element, path: str) -> str:
    return (gpu.findtext(path) or "").strip()


def parse_xml(data: bytes, file: str) -> Capture:
    """GPUs from ``nvidia-smi -q -x`` (in index order; no MIG profile names, only how many devices)."""
    root = _safe_root(data, file)
    if root.tag != "nvidia_smi_log":
        raise CaptureError(f"{file}: root element is <{root.tag}>, not <nvidia_smi_log> (nvidia-smi -q -x)")
    gpus = []
    for i, gpu in enumerate(root.findall("gpu")):
        pci = _text(gpu, "pci/pci_device_id")
        if not pci:
            raise CaptureError(f"{file}: GPU {i} has no <pci><pci_device_id>")
        mode = _text(gpu, "mig_mode/current_mig") or "N/A"
        gpus.append(Gpu(i, _text(gpu, "product_name"), canonical_pci_id(pci),
                        "[N/A]" if mode == "N/A" else mode,  # as the CSV and the live script print it
                        mig_device_count=len(gpu.findall("mig_devices/mig_device"))))
    return Capture("nvidia-smi-xml", file, tuple(gpus), (root.findtext("driver_version") or "").strip())


def parse_csv(text: str, file: str) -> Capture:
    """GPUs from ``nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current --format=csv[,noheader]``.

    With a header line the columns may come in any order, among others (units like ``[MiB]`` ignored); a
    ``driver_version`` column gives the capture's driver version (the first GPU's: one driver per node).
    """
    rows = [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.strip()]
    if not rows:
        raise CaptureError(f"{file}: empty; expected the CSV of "
                           f"nvidia-smi --query-gpu={','.join(QUERY_FIELDS)}")
    header_line = "index" in rows[0] or ("name" in rows[0] and "pci.device_id" in rows[0])
    if header_line:  # a GPU line never has a field called index (or both name and pci.device_id)
        header = [re.sub(r"\s*\[.*\]$", "", f) for f in rows.pop(0)]
        absent = [f for f in QUERY_FIELDS if f not in header and f not in OPTIONAL_FIELDS]
        if absent:
            raise CaptureError(f"{file}: the header has no column {', '.join(absent)}")
        pos = [header.index(f) if f in header else -1 for f in QUERY_FIELDS]
    else:
        header, pos = list(QUERY_FIELDS), [0, 1, 2, 3]
    gpus = []
    driver = header.index("driver_version") if header_line and "driver_version" in header else -1
    for n, row in enumerate(rows, start=1):
        if len(row) != len(header) or (pos[0] >= 0 and not _INDEX.fullmatch(row[pos[0]])):
            raise CaptureError(f"{file}: GPU line {n} is not 'index, name, pci.device_id, mig.mode.current' "
                               f"({len(row)} fields): {', '.join(row)}")
        # without an index column the lines are in index order (nvidia-smi prints them so); without
        # mig.mode.current the mode is unknown ("")
        idx, name, pci, mode = (row[p] if p >= 0 else "" for p in pos)
        gpus.append(Gpu(int(idx) if idx else n - 1, name, canonical_pci_id(pci), mode))
    return Capture("nvidia-smi-csv", file, tuple(gpus), rows[0][driver] if driver >= 0 and rows else "")


def read_capture(path: Path, source: CaptureFormat) -> Capture:
    """Read and parse a captured file (at most 16 MiB)."""
    data = read_bounded(path, MAX_CAPTURE_BYTES, CaptureError)
    if source == "nvidia-smi-xml":
        return parse_xml(data, str(path))
    try:
        return parse_csv(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as err:
        raise CaptureError(f"{path}: not UTF-8 text: {err}") from err
