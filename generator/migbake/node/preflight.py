"""Preflight: does a node match its profile before anything is enabled? Checked on captured nvidia-smi output.

The generated ``scripts/preflight-mig-restore.sh`` runs the same checks live on the node. Both read what
each ``gpus`` entry asks from ``migbake.node.expectations`` and word their verdicts the same way, so the offline
form (``migbake preflight``) and the script agree check by check. Only the checks that need the node
itself (the tool paths, the driver, the units) are SKIP offline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from migbake.exits import printable
from migbake.gpu.presence import FOREIGN
from migbake.kubernetes.kubelet import unit_checked
from migbake.kubernetes.labels import MIG_CONFIG_LABEL, label_checks
from migbake.migparted.config import entry_pci_ids
from migbake.node import drivergates
from migbake.node.driveroffer import DriverOffers
from migbake.node.expectations import AFTER_RESET, Expectation, expectations, layout_text
from migbake.node.nvidiasmi import Capture, Gpu
from migbake.profile.nodeprofile import NodeProfile

Status = Literal["PASS", "WARN", "NOTE", "FAIL", "SKIP"]

SCRIPT = "scripts/preflight-mig-restore.sh"
OFFLINE = f"not checked offline: run {SCRIPT} on the node"
NO_NODE_JSON = "no --node-json given (kubectl get node NAME -o json)"
NO_CAPTURE = "no nvidia-smi capture given (--nvidia-smi-xml or --nvidia-smi-csv)"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Check:
    """One line of the preflight table."""

    name: str
    status: Status
    detail: str


@dataclass(frozen=True)
class Preflight:
    """The verdict for one profile: every check in table order."""

    profile: str
    source: str
    file: str
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        """No check failed (WARN, NOTE and SKIP do not block)."""
        return not any(c.status == "FAIL" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The machine form, with the keys the script's ``--json`` prints (plus ``file``)."""
        return {"profile": self.profile, "source": self.source, "file": self.file, "ready": self.ready,
                "checks": [{"check": c.name, "status": c.status, "detail": c.detail} for c in self.checks]}


# --- the hardware checks -----------------------------------------------------------------------

def _ids(indices: Iterable[int]) -> str:
    return ",".join(map(str, indices))


def _gpu_count(profile: NodeProfile, gpus: tuple[Gpu, ...]) -> Check:
    n, want = len(gpus), profile.gpu_count
    if n == 0:
        return Check("gpu-count", "FAIL", "nvidia-smi lists no GPUs")
    indices = [g.index for g in gpus]
    if sorted(indices) != list(range(n)):  # nvidia-smi numbers a node's GPUs 0..n-1, each once
        twice = sorted({i for i in indices if indices.count(i) > 1})
        absent = sorted(set(range(n)) - set(indices))
        why = ([f"index {_ids(twice)} more than once"] if twice else []) + (
            [f"no GPU {_ids(absent)}"] if absent else [])
        return Check("gpu-count", "FAIL", f"the capture's GPU indices ({_ids(indices)}) are not 0..{n - 1} once "
                     f"each ({'; '.join(why)}): not one node's nvidia-smi output")
    if want is None:
        return Check("gpu-count", "PASS", f"{n} GPU(s) (the profile sets no gpu_count)")
    if n == want:
        return Check("gpu-count", "PASS", f"{n} GPU(s), as gpu_count says")
    return Check("gpu-count", "FAIL", f"{n} GPU(s) on the node, the profile's gpu_count is {want}")


def _group(e: Expectation, gpus: tuple[Gpu, ...], selected: dict[int, Expectation], own: set[int]) -> Check:
    """Listed GPUs exist and are the entry's model; ``devices: all`` without a filter means every GPU.

    ``selected``: the GPUs mig-parted will apply an entry to; ``own``: those whose entry is of their model.
    """
    by_index = {g.index: g for g in gpus}
    ok: list[int] = []
    wrong: list[str] = []
    missing: list[int] = []
    for i in [g.index for g in gpus] if e.devices == "all" else e.devices:
        g = by_index.get(i)
        if g is None:
            missing.append(i)
        elif g.pci_device_id in e.pci_ids:
            ok.append(i)
            selected[i] = e
            own.add(i)
        else:
            if not e.filtered or e.devices != "all":
                wrong.append(f"GPU {i} is {g.name} ({g.pci_device_id})")
            if not e.filtered:  # mig-parted applies the entry to it anyway, and fails there
                selected[i] = e
    parts = []
    if wrong:
        parts.append(f"{FOREIGN}: {', '.join(wrong)}, not {e.expected}")
    if missing:
        parts.append(f"GPU {_ids(missing)} not found (the node has {len(gpus)} GPU(s))")
    if parts:
        return Check(e.check, "FAIL", "; ".join(parts))
    if not ok:
        return Check(e.check, "FAIL", f"no GPU is {e.expected}")
    return Check(e.check, "PASS", f"GPU {_ids(ok)}: {e.model}")


def _coverage(gpus: tuple[Gpu, ...], selected: dict[int, Expectation], own: set[int]) -> Check:
    """Every GPU is selected by an entry of its own model: assert fails otherwise, and every boot's restore."""
    uncovered = [g.index for g in gpus if g.index not in selected]
    if uncovered:  # mig-parted assert: every GPU must match an entry, or "not all GPUs match"
        return Check("coverage", "FAIL", f"GPU {_ids(uncovered)} in no gpus entry: nvidia-mig-parted "
                     "assert then fails (not all GPUs match the specified config), and so does the restore "
                     "at every boot")
    foreign = [g.index for g in gpus if g.index not in own]
    if foreign:  # an entry without a device-filter applies to it anyway: its layout is another model's
        return Check("coverage", "FAIL", f"GPU {_ids(foreign)} in no gpus entry of its own model (the entry "
                     "listing it is another model's, see above): the restore applies that layout to it and "
                     "fails at every boot")
    return Check("coverage", "PASS", "every GPU is in a gpus entry of its own model")


def _have(g: Gpu) -> str:
    if not g.mig_mode:
        return "MIG mode not in the capture"
    if g.mig_mode != "Enabled":
        return f"MIG {g.mig_mode}"
    if g.mig_devices is not None:
        return f"MIG Enabled, {layout_text(Counter(g.mig_devices).items())}"
    if g.mig_device_count is not None:
        return f"MIG Enabled, {g.mig_device_count or 'no'} MIG device{'' if g.mig_device_count == 1 else 's'}"
    return "MIG Enabled"


def _same(g: Gpu, e: Expectation) -> bool | None:
    """Whether the GPU already has the entry's MIG state; None when the capture cannot tell."""
    if not g.mig_mode:
        return None
    if g.mig_mode != e.want_mode:
        return False
    if g.mig_mode != "Enabled":
        return True
    if g.mig_devices is not None:
        return _have(g) == e.want or _have(g) in {w for _, w in e.want_named}
    if e.want_named:
        return None  # named layouts: a count alone cannot tell which
    if g.mig_device_count is not None and g.mig_device_count != e.want_count:
        return False
    return None  # MIG is on, but the capture does not name the MIG devices' profiles


def _other_board(g: Gpu, e: Expectation) -> str:
    """The model whose board names the GPU's MIG devices as the capture does, where the profile's model names
    the same instances otherwise (matched by GPU-instance profile id and memory, gpu/boardnames.py); else ""."""
    if g.mig_mode != "Enabled" or g.mig_devices is None:
        return ""
    return next((key for key, want in e.board_wants if _have(g) == want), "")


def _mig_state(gpus: tuple[Gpu, ...], selected: dict[int, Expectation]) -> Check:
    """The MIG state now, against what the restore will set (a NOTE: the next boot replaces it); a FAIL when the
    node names the profile's instances as another board does (mig-parted applies names literally)."""
    if not selected:
        return Check("mig-state", "SKIP", "no GPU of the profile on the node")
    differ: dict[str, list[int]] = {}
    boards: dict[tuple[str, str, str], list[int]] = {}
    unknown: list[int] = []
    for g in gpus:
        e = selected.get(g.index)
        same = None if e is None else _same(g, e)
        other = "" if e is None or same is not False else _other_board(g, e)
        if e is not None and other:
            boards.setdefault((_have(g), e.model, other), []).append(g.index)
        elif e is not None and same is False:
            differ.setdefault(f"{_have(g)} (profile: {e.want})", []).append(g.index)
        elif e is not None and same is None:
            unknown.append(g.index)
    if boards:
        text = "; ".join(f"GPU {_ids(ix)}: {have}, the profile's instances as {other}'s boards name them (matched by "
                         f"GPU-instance profile id and memory, NVIDIA/mig-parted#227): mig-parted applies names "
                         f"literally, so the restore's apply fails with {model}'s names here; write model: {other}"
                         for (have, model, other), ix in boards.items())
        return Check("mig-state", "FAIL", text)
    if differ:
        text = "; ".join(f"GPU {_ids(ix)}: {state}" for state, ix in differ.items())
        return Check("mig-state", "NOTE", f"{text}; the next boot's restore replaces this")
    if unknown:
        if not any(g.mig_mode for g in gpus if g.index in unknown):  # a capture without mig.mode.current
            return Check("mig-state", "SKIP", f"GPU {_ids(unknown)}: the capture has no MIG mode (run {SCRIPT} "
                         "on the node to compare the MIG state)")
        return Check("mig-state", "SKIP", f"GPU {_ids(unknown)}: MIG Enabled, but the capture does not name "
                     f"the MIG devices' profiles (run {SCRIPT} on the node to compare them)")
    return Check("mig-state", "PASS", "every GPU already has the profile's MIG state")


def _mig_mode(profile: NodeProfile, gpus: tuple[Gpu, ...], selected: dict[int, Expectation]) -> Check:
    """Ampere: a GPU whose MIG mode differs from the profile's waits for a GPU reset (a reboot follows)."""
    differ: dict[str, list[int]] = {}
    for g in gpus:
        e = selected.get(g.index)
        if e is None or not e.mode_persists or g.mig_mode not in ("Enabled", "Disabled"):
            continue
        if g.mig_mode != e.want_mode:
            differ.setdefault(f"MIG {g.mig_mode}, the profile wants {e.want_mode}", []).append(g.index)
    if not differ:
        return Check("mig-mode", "PASS", "no Ampere GPU needs a MIG mode change (none waits for a GPU reset)")
    text = "; ".join(f"GPU {_ids(ix)}: {state}" for state, ix in differ.items())
    return Check("mig-mode", "WARN", f"{text}: on Ampere the change waits for a GPU reset, so "
                 f"{AFTER_RESET[profile.restore.on_reset_required]}")


def hardware_checks(profile: NodeProfile, gpus: tuple[Gpu, ...]) -> list[Check]:
    """gpu-count, one check per ``gpus`` entry, coverage, mig-state (and mig-mode with Ampere GPUs)."""
    selected: dict[int, Expectation] = {}
    own: set[int] = set()
    found = expectations(profile)
    groups = [_group(e, gpus, selected, own) for e in found]
    checks = [_gpu_count(profile, gpus), *groups, _coverage(gpus, selected, own), _mig_state(gpus, selected)]
    if any(e.mode_persists for e in found):
        checks.append(_mig_mode(profile, gpus, selected))
    return checks


def driver_check(profile: NodeProfile, offers: DriverOffers) -> Check:
    """driver-offer: every layout's profiles are offered by the node's own driver, within its maximum."""
    failed: list[str] = []
    checked = 0
    for i, g in enumerate(profile.gpus):
        m = g.gpu
        if not g.mig_enabled or not g.layout:
            continue
        checked += 1
        offered = offers.for_ids(entry_pci_ids(g, m))
        menu = ", ".join(f"{name} (at most {n})" for name, n in sorted(offered.items())) or "none"
        absent = [name for name, _ in g.layout if name not in offered]
        over = [f"{n}x {name} (at most {offered[name]})" for name, n in g.layout
                if name in offered and n > offered[name]]
        if absent:
            failed.append(f"gpus/{i}: the node's driver does not offer {', '.join(absent)} to {m.key}; "
                          f"it offers {menu}")
        if over:
            failed.append(f"gpus/{i}: more than the node's driver allows: {', '.join(over)}")
    if failed:
        return Check("driver-offer", "FAIL", "; ".join(failed))
    if not checked:
        return Check("driver-offer", "PASS", "no gpus entry asks for MIG devices")
    return Check("driver-offer", "PASS", f"the node's driver offers every profile of the layouts, "
                 f"within its maximum counts ({offers.file})")


def _driver_version(profile: NodeProfile, capture: Capture) -> Check:
    """driver-mig: the capture's driver against each MIG model's oldest driver, and the 570 mixed-node bug."""
    if not capture.driver_version:
        return Check(drivergates.CHECK, "SKIP", "the capture does not say the driver version (nvidia-smi -q -x does; "
                     "or add driver_version to --query-gpu)")
    status, detail = drivergates.judge(drivergates.driver_gate(profile), capture.driver_version)
    return Check(drivergates.CHECK, status, detail)  # type: ignore[arg-type]


def _our_config(profile: NodeProfile, labels: dict[str, str]) -> str:
    """The config the node's mig.config label should name: restore.config_name, or with named layouts the
    label's own value when it is one of the names (else the names, which no label value equals)."""
    if not profile.layout_names:
        return profile.restore.config_name
    given = labels.get(MIG_CONFIG_LABEL, "")
    return given if given in profile.layout_names else ", ".join(profile.layout_names)


def check_names(profile: NodeProfile) -> list[str]:
    """Every check of the table, in order (the generated script prints the same rows)."""
    found = expectations(profile)
    reset = any(e.mode_persists for e in found)
    cdmm = ["cdmm"] if drivergates.driver_gate(profile).grace else []
    nvswitch = ["nvswitch"] if any(g.mig_enabled for g in profile.gpus) else []
    return ["nvidia-smi", "driver", "pci-gpus", drivergates.CHECK, *cdmm, "gpu-count", *(e.check for e in found),
            "coverage", "mig-state",
            *(["mig-mode"] if reset else []), *nvswitch, "mig-parted", *(["gpu-reset"] if reset else []),
            *(["kubelet"] if profile.kubelet.present else []), *(["kubelet-unit"] if unit_checked(profile) else []),
            *(f"consumer/{c.unit}" for c in profile.consumers),
            "mig-manager", *(["gpu-operator", "mig-config"] if profile.kubelet.present else []),
            *(["node-labels"] if profile.kubelet.present and profile.kubernetes.node_labels else [])]


def check_capture(profile: NodeProfile, capture: Capture | None,
                  labels: dict[str, str] | None = None, node_file: str = "",
                  offers: DriverOffers | None = None, mig_manager_enabled: bool | None = None,
                  slices: list[tuple[str, Status, str]] | None = None, slices_file: str = "",
                  operator_kind: str = "ClusterPolicy", container: list[tuple[str, Status, str]] | None = None,
                  gate_file: str = "") -> Preflight:
    """Every preflight check for ``profile`` on captured output; what the captures cannot tell is SKIP.

    With ``offers`` (a generate-config capture) a driver-offer row comes before mig-parted's; ``container``: the
    rows of a driver container's node (the gate, from ``gate_file``, and the watcher's labels) come last.
    """
    found: dict[str, Check] = {}
    if capture is not None:
        found.update((c.name, c) for c in hardware_checks(profile, capture.gpus))
        found[drivergates.CHECK] = _driver_version(profile, capture)
    if labels is not None and profile.kubelet.present:
        found.update((n, Check(n, s, d)) for n, s, d in label_checks(
            labels, _our_config(profile, labels), node_labels=profile.kubernetes.node_labels,
            mig_manager_enabled=mig_manager_enabled, operator_kind=operator_kind))
    hardware = ("gpu-count", "coverage", "mig-state", "mig-mode", drivergates.CHECK)
    checks = []
    for name in check_names(profile):
        why = NO_CAPTURE if name in hardware or name.startswith("gpus/") else OFFLINE
        why = NO_NODE_JSON if name in ("gpu-operator", "mig-config", "node-labels") else why
        checks.append(found.get(name, Check(name, "SKIP", why)))
    if offers is not None:
        checks.insert(next(i for i, c in enumerate(checks) if c.name == "mig-parted"),
                      driver_check(profile, offers))
    checks += [Check(n, s, d) for n, s, d in slices or ()]  # kubernetes.allocation dra, dra-dynamic
    checks += [Check(n, s, d) for n, s, d in container or ()]  # driver: container (node/gatecheck.py)
    clean = tuple(Check(c.name, c.status, _CONTROL.sub(" ", c.detail)) for c in checks)
    if gate_file and capture is None and offers is None and not node_file and slices is None:
        return Preflight(profile.name, "gate-policies", gate_file, clean)
    if slices is not None and capture is None and offers is None and not node_file:
        return Preflight(profile.name, "resource-slices", slices_file, clean)
    if capture is not None:
        return Preflight(profile.name, capture.source, capture.file, clean)
    if offers is not None and not node_file:
        return Preflight(profile.name, "mig-parted-generate-config", offers.file, clean)
    return Preflight(profile.name, "node-json", node_file, clean)


def table(result: Preflight) -> list[str]:
    """The readable form: a CHECK / STATUS / DETAIL table and a verdict line (as the script prints)."""
    width = max([12, *(len(c.name) for c in result.checks)])  # consumer/NAME.service is longer than 12
    lines = [f"migbake preflight: profile {result.profile}, offline from {printable(result.file)} ({result.source})",
             f"{'CHECK':<{width}} {'STATUS':<6} DETAIL"]
    lines += [f"{c.name:<{width}} {c.status:<6} {printable(c.detail)}" for c in result.checks]
    failed = sum(c.status == "FAIL" for c in result.checks)
    skipped = sum(c.status == "SKIP" for c in result.checks)
    verdict = "READY: no check failed" if not failed else f"NOT READY: {failed} check(s) failed"
    lines += ["", f"{verdict} ({skipped} skipped; run {SCRIPT} on the node for the rest)."]
    return lines
