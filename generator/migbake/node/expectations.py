"""What each ``gpus`` entry of a profile asks of the node: the facts both preflights evaluate.

``migbake preflight`` (offline, ``preflight.py``) and the generated ``scripts/preflight-mig-restore.sh``
(its values come through the render plan, ``render/plan.py``) read these, so that the two agree check by check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from migbake.gpu.boardnames import twins
from migbake.gpu.catalog import load_catalog
from migbake.migparted.config import entry_pci_ids, uses_device_filter
from migbake.profile.nodeprofile import NodeProfile

AFTER_RESET = {
    "reboot-once": "the first restore reboots the node once to complete it (restore.on_reset_required: reboot-once)",
    "fail": "the restore fails until the node is rebooted (restore.on_reset_required: fail)",
}


@dataclass(frozen=True)
class Expectation:
    """What one ``gpus`` entry asks of the node, in the form both preflights evaluate."""

    check: str
    model: str
    pci_ids: tuple[str, ...]
    devices: Literal["all"] | tuple[int, ...]
    filtered: bool  # mig-parted selects only GPUs of this model (the config has a device-filter)
    want_mode: str
    want_count: int
    want: str  # the MIG state the restore sets, e.g. "MIG Enabled, 7x 1g.18gb"
    mode_persists: bool = False  # Ampere: a MIG mode change waits for a GPU reset
    want_named: tuple[tuple[str, str], ...] = ()  # mig.layouts: (name, want) per layout name
    # boards of the same PCI id that name the same profiles otherwise (gpu/boardnames.py, NVIDIA/mig-parted#227):
    # (that board's model, a want above in its names), for each want whose names differ there
    board_wants: tuple[tuple[str, str], ...] = ()

    @property
    def expected(self) -> str:
        """``h200-141gb (0x233510DE, 0x233B10DE)``."""
        return f"{self.model} ({', '.join(self.pci_ids)})"


def layout_text(counts: Iterable[tuple[str, int]]) -> str:
    """``7x 1g.18gb`` (sorted by name), or ``no MIG devices``."""
    return ", ".join(f"{n}x {name}" for name, n in sorted(counts)) or "no MIG devices"


def expectations(profile: NodeProfile, with_filter: bool | None = None) -> tuple[Expectation, ...]:
    """One expectation per ``gpus`` entry, in profile order (``with_filter``: ``uses_device_filter(profile)``
    when the caller knows it)."""
    filtered = uses_device_filter(profile) if with_filter is None else with_filter
    out = []
    for i, (g, m) in enumerate(zip(profile.gpus, profile.models)):
        # nvidia-smi shows a GPU without MIG (a display GPU, an L40S) as mig.mode.current [N/A]
        mode = "Enabled" if g.mig_enabled else "Disabled" if m.has_mig else "[N/A]"
        want = f"MIG Enabled, {layout_text(g.layout)}" if g.mig_enabled else f"MIG {mode}"
        named = tuple((name, f"MIG Enabled, {layout_text(lay)}") for name, lay in g.layouts) if g.mig_enabled else ()
        if named:  # the node's name is known only on the node: any of them, in words
            want = " or ".join(f"{w} ({name})" for name, w in named)
        layouts = ([lay for _, lay in g.layouts] or [g.layout]) if g.mig_enabled else []
        boards = tuple((other.key, f"MIG Enabled, {layout_text((renamed.get(p, p), n) for p, n in lay)}")
                       for other, renamed in (twins(load_catalog(), m) if layouts else ())
                       for lay in layouts if any(p in renamed for p, _ in lay))
        out.append(Expectation(f"gpus/{i}", m.key, entry_pci_ids(g, m), g.devices, filtered, mode,
                               sum(n for _, n in g.layout) if g.mig_enabled else 0, want, m.mig_mode_persists,
                               named, boards))
    return tuple(out)
