"""What the DRA driver publishes for a node (``kubectl get resourceslices -o json``), checked against a profile.

The capture is untrusted input like ``--node-json``: at most 4 MiB, JSON only, nesting bounded, and a shape
error names where it is (``items/3/spec/devices/2/name``). Only slices of driver ``gpu.nvidia.com`` whose
``spec.nodeName`` is the node count (the ComputeDomain driver publishes slices too; with DynamicMIG one pool
is split into several slices: kubernetes-sigs/dra-driver-nvidia-gpu:cmd/gpu-kubelet-plugin/driver.go@main
l.490-594). Under ``dra`` the node is ready when each GPU publishes exactly its entry's MIG devices, by count
per profile and by name (names encode placements, ``kubernetes.dra``); under ``dra-dynamic`` when no static
MIG device exists (DynamicMIG's partitions consume per-GPU shared counters: a MIG device without
``consumesCounters`` is a static one, which the plugin destroys at start).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from migbake.kubernetes.dra import DRIVER, STRANDED_LOG, dra_expectations
from migbake.kubernetes.labels import MAX_NODE_JSON_BYTES, NodeJsonError
from migbake.node.preflight import Status
from migbake.problems import read_bounded
from migbake.profile.nodeprofile import NodeProfile
from migbake.wording import index_list

MIG_NAME = re.compile(r"gpu-(\d{1,4})-mig-([a-z0-9.-]{1,253})-(\d{1,4})-(\d{1,2})")  # mig.go@v25.12.0
GPU_NAME = re.compile(r"gpu-(\d{1,4})")
MAX_DEVICES = 4096


@dataclass(frozen=True)
class Published:
    """One device of the node's slices: its name, ``type`` and ``profile`` attributes, partitionable or not."""

    name: str
    type: str
    profile: str
    dynamic: bool  # consumes shared counters (a DynamicMIG partition)


def _string(attrs: object, key: str) -> str:
    value = attrs.get(key) if isinstance(attrs, dict) else None
    inner = value.get("string") if isinstance(value, dict) else None
    return inner if isinstance(inner, str) else ""


def read_resource_slices(path: Path, node: str) -> list[Published]:
    """The devices driver gpu.nvidia.com publishes for ``node`` in a ``kubectl get resourceslices -o json`` List."""
    data = read_bounded(path, MAX_NODE_JSON_BYTES, NodeJsonError)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise NodeJsonError(f"{path}: not JSON: {err}") from err
    except RecursionError as err:
        raise NodeJsonError(f"{path}: nested too deep to be a ResourceSlice list") from err
    if not isinstance(doc, dict) or doc.get("kind") not in ("List", "ResourceSliceList") \
            or not isinstance(doc.get("items"), list):
        raise NodeJsonError(f"{path}: not a List of ResourceSlices (kubectl get resourceslices -o json)")
    out: list[Published] = []
    for i, item in enumerate(doc["items"]):
        where = f"{path}: /items/{i}"
        spec = item.get("spec") if isinstance(item, dict) else None
        if not isinstance(item, dict) or item.get("kind", "ResourceSlice") != "ResourceSlice" \
                or not isinstance(spec, dict):
            raise NodeJsonError(f"{where}: not a ResourceSlice with a spec")
        if spec.get("driver") != DRIVER or spec.get("nodeName") != node:
            continue
        devices = spec.get("devices", [])
        if not isinstance(devices, list):
            raise NodeJsonError(f"{where}/spec/devices: not a list")
        for j, dev in enumerate(devices):
            name = dev.get("name") if isinstance(dev, dict) else None
            if not isinstance(name, str) or not 0 < len(name) <= 253:
                raise NodeJsonError(f"{where}/spec/devices/{j}/name: not a device name (1 to 253 characters)")
            attrs = dev.get("attributes", {})
            out.append(Published(name, _string(attrs, "type"), _string(attrs, "profile"),
                                 bool(dev.get("consumesCounters"))))
            if len(out) > MAX_DEVICES:
                raise NodeJsonError(f"{where}: more than {MAX_DEVICES} devices for node {node}")
    return out


def _tally(names: list[str]) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(Counter(names).items())) or "nothing"


def slice_checks(profile: NodeProfile, devices: list[Published], node: str) -> list[tuple[str, Status, str]]:
    """``dra-devices``: does the node publish what the profile's allocation promises?"""
    check = "dra-devices"
    if profile.kubernetes.allocation == "dra-dynamic":
        static = sorted(d.name for d in devices if d.type == "mig" and not d.dynamic)
        if static:
            return [(check, "FAIL", f"node {node} publishes static MIG devices ({', '.join(static)}): under "
                     "dra-dynamic the restore creates none, and the DRA driver's DynamicMIG destroys MIG devices it "
                     "did not create when its plugin starts; is DynamicMIG enabled (featureGates.DynamicMIG=true)?")]
        parts = sum(d.type == "mig" for d in devices)
        return [(check, "PASS", f"node {node}: no static MIG device ({parts} DynamicMIG partition(s) advertised)")]
    per_gpu: dict[int, list[tuple[str, str]]] = {}
    whole: set[int] = set()
    for d in devices:
        m = MIG_NAME.fullmatch(d.name)
        if m is not None and d.type == "mig":
            per_gpu.setdefault(int(m[1]), []).append((d.profile, d.name))
        elif (g := GPU_NAME.fullmatch(d.name)) is not None:
            whole.add(int(g[1]))
    problems: list[str] = []
    checked = 0
    uncounted = False
    for e in dra_expectations(profile):
        if e.gpus is None:
            uncounted = True
        for gpu in sorted(set(per_gpu) | whole) if e.gpus is None else e.gpus:
            checked += 1
            have = per_gpu.get(gpu, [])
            if not e.mig:
                if gpu not in whole:
                    problems.append(f"GPU {gpu}: gpu-{gpu} (MIG off) is not published")
                continue
            want_profiles = [p for p, _ in e.want]
            want_names = sorted(f"gpu-{gpu}-{suffix}" for _, suffix in e.want)
            if not have:
                why = "published whole (MIG off?)" if gpu in whole else (
                    f"stranded: MIG on with no instances ('{STRANDED_LOG}'), or the plugin started before the "
                    "restore")
                problems.append(f"GPU {gpu} publishes no MIG device ({why}); the plan has {_tally(want_profiles)}")
            elif Counter(p for p, _ in have) != Counter(want_profiles):
                problems.append(f"GPU {gpu}: partial layout: publishes {_tally([p for p, _ in have])}, the plan has "
                                f"{_tally(want_profiles)} (MIG devices created after the plugin started are not "
                                "published until it restarts)")
            elif sorted(n for _, n in have) != want_names:
                moved = sorted({n for _, n in have} - set(want_names))
                problems.append(f"GPU {gpu}: moved placements: publishes {', '.join(moved)} where the plan has "
                                f"{', '.join(sorted(set(want_names) - {n for _, n in have}))} (claims that select by "
                                "profile are unaffected; the device names differ from migbake show's)")
    if problems:
        return [(check, "FAIL", f"node {node}: " + "; ".join(problems))]
    covered = sorted(set(per_gpu) | whole)
    text = (f"node {node} publishes exactly the plan's devices on {checked} GPU(s) "
            f"({index_list(covered) if covered else 'none'})")
    if uncounted:  # a stranded GPU publishes nothing: without gpu_count it cannot be missed
        return [(check, "WARN", f"{text}; set gpu_count: a stranded GPU publishes nothing, so without it a "
                 "missing GPU cannot be told")]
    return [(check, "PASS", text)]
