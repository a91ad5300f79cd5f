"""The mig-parted ``device-filter``: when migbake writes one, and a string read the way nvidia-mig-parted reads it.

mig-parted (pkg/types/device.go ``NewDeviceIDFromString``) parses each filter at match time with
Go's ``strconv.ParseUint(s, 0, 32)``: ``0x`` hex, a leading ``0`` or ``0o`` octal, ``0b`` binary,
otherwise decimal, ``_`` between digits. A string it cannot parse is skipped silently, so that
entry matches no GPU. The high 16 bits are the device id, the low 16 the vendor id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

CANONICAL = re.compile(r"^0x[0-9A-F]{8}$")
_DIGITS = {2: re.compile(r"^[01]*$"), 8: re.compile(r"^[0-7]*$"), 10: re.compile(r"^[0-9]*$"),
           16: re.compile(r"^[0-9A-Fa-f]*$")}


def writes_device_filter(mode: str, model_keys: Iterable[str], exact_ids: bool = False) -> bool:
    """Whether the config's entries carry a device-filter, by the profile's ``device_filter``: ``always``,
    ``never``, or (``auto``) with several GPU models or when an entry names its exact ``pci_device_ids``."""
    if mode in ("always", "never"):
        return mode == "always"
    return exact_ids or len(set(model_keys)) > 1


def _underscores_ok(s: str) -> bool:
    """Go's strconv.underscoreOK: an ``_`` only between digits, or between a base prefix and a digit."""
    hexa = s[:2].lower() == "0x"
    saw, i = "^", 0
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        saw, i = "0", 2
    for ch in s[i:]:
        if ch.isascii() and (ch.isdigit() or (hexa and ch.lower() in "abcdef")):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_uint32(text: str) -> int | None:
    """``strconv.ParseUint(text, 0, 32)``: the number, or None where Go returns an error."""
    if not text or not _underscores_ok(text):
        return None
    base, body = 10, text
    if text[0] == "0":
        prefix = text[1:2].lower()
        if len(text) >= 3 and prefix in ("b", "o", "x"):
            base, body = {"b": 2, "o": 8, "x": 16}[prefix], text[2:]
        else:
            base, body = 8, text[1:]
    digits = body.replace("_", "")
    if not _DIGITS[base].match(digits) or (base != 8 and not digits) or (base == 8 and body and not digits):
        return None
    value = int(digits, base) if digits else 0
    return value if value <= 0xFFFFFFFF else None


@dataclass(frozen=True)
class FilterId:
    """One device-filter string: what mig-parted makes of it."""

    text: str
    pci: str | None  # 0xDDDDVVVV as mig-parted matches it; None: it cannot parse it and matches nothing
    subsystem: bool  # ``0xDDDDVVVV:0xSSSSssss``: also matches the subsystem id

    @property
    def canonical(self) -> bool:
        """Written exactly as mig-parted's export writes ids (``0x`` and 8 upper-case hex digits)."""
        return self.pci is not None and self.text == self.pci

    @property
    def reading(self) -> str:
        """How mig-parted reads a non-canonical spelling, for a note: ``the number 590352606 = 0x233010DE``."""
        if self.text[:2].lower() == "0x":
            return f"the hex number {self.pci}"
        return f"the number {self.text} (Go strconv.ParseUint, base from the prefix) = {self.pci}"


def read_filter_id(text: str) -> FilterId:
    """``text`` as mig-parted reads it (a ``:`` suffix is a subsystem id; more than one ``:`` is an error)."""
    parts = text.split(":")
    if len(parts) > 2:
        return FilterId(text, None, False)
    value = parse_uint32(parts[0])
    if len(parts) == 2 and parse_uint32(parts[1]) is None:
        value = None
    return FilterId(text, None if value is None else f"0x{value:08X}", len(parts) == 2)
