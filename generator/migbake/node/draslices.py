"""What the DRA driver publishes for a node (``kubectl get resourceslices -o json``), checked against a profile.

The capture is untrusted input like ``--node-json``: at most 4 MiB, JSON only, nesting bounded, and a shape
error names where it is (``/items/3/spec/devices/2/attributes/profile``): what resource.k8s.io/v1 requires
of a slice (kubernetes-sigs/dra-driver-nvidia-gpu:vendor/k8s.io/api/resource/v1/types.go@v25.12.0): a
``pool`` with a ``name`` and an integer ``generation`` (l.211-240), devices named by a DNS label (l.259-264),
attributes that each hold exactly one of ``int``, ``bool``, ``string``, ``version`` (l.566-599). Only slices
of driver ``gpu.nvidia.com`` whose ``spec.nodeName`` is the node count (the ComputeDomain driver publishes
slices too; with DynamicMIG one pool is split into several slices: driver.go@main l.490-594), and of each
pool only the slices of its newest generation ("Consumers of ResourceSlices should only consider resources
from the pool with the highest generation number", types.go l.221-229). The verdicts are in ``draverdict``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from migbake.document.files import read_file_or_pipe
from migbake.kubernetes.dra import DNS_LABEL, DRIVER
from migbake.kubernetes.labels import MAX_NODE_JSON_BYTES, NodeJsonError

MAX_DEVICES = 4096
VALUE_KINDS = {"int": int, "bool": bool, "string": str, "version": str}  # DeviceAttribute, types.go l.570-599
NODE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")  # DNS subdomain
_SLICE = re.compile(r"memorySlice(\d{1,2})")


@dataclass(frozen=True)
class Published:
    """One device of the node's slices: its name, ``type``, ``profile`` and ``productName`` attributes, the
    memory slices it holds (``capacity`` ``memorySlice<i>``: its placement), partitionable or not."""

    name: str
    type: str
    profile: str
    dynamic: bool  # consumes shared counters (a DynamicMIG partition)
    product: str = ""
    placement: tuple[int, int] | None = None  # (start, size) from the memorySlice<i> capacities


def check_node_name(node: str) -> str:
    """``node`` if it can name a Node (a DNS subdomain of at most 253 characters), else NodeJsonError."""
    if not (0 < len(node) <= 253 and NODE_NAME.fullmatch(node)):
        raise NodeJsonError(f"{node!r} (--node, or metadata.name of --node-json): not a node name (a DNS subdomain: "
                            "lower-case letters, digits, '-' and '.', 1 to 253 characters)")
    return node


def _attributes(attrs: object, where: str) -> dict[str, object]:
    if not isinstance(attrs, dict):
        raise NodeJsonError(f"{where}: not a map of attribute names to values")
    out: dict[str, object] = {}
    for key, value in attrs.items():
        kinds = [k for k in VALUE_KINDS if isinstance(value, dict) and k in value]
        if not isinstance(value, dict) or len(kinds) != 1 or len(value) != 1 \
                or type(value[kinds[0]]) is not VALUE_KINDS[kinds[0]]:
            raise NodeJsonError(f"{where}/{key}: not a device attribute (an object with exactly one of int, bool, "
                                "string, version, of that kind)")
        out[key] = value[kinds[0]]
    return out


def _placement(capacity: object, where: str) -> tuple[int, int] | None:
    if not isinstance(capacity, dict):
        raise NodeJsonError(f"{where}: not a map of capacity names to values")
    held = sorted(int(m[1]) for key in capacity if (m := _SLICE.fullmatch(str(key))) is not None)
    if not held or held != list(range(held[0], held[0] + len(held))):
        return None
    return held[0], len(held)


def _device(dev: object, where: str) -> Published:
    name = dev.get("name") if isinstance(dev, dict) else None
    if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
        raise NodeJsonError(f"{where}/name: not a device name (a DNS label: lower-case letters, digits and '-', "
                            "1 to 63 characters)")
    assert isinstance(dev, dict)
    attrs = _attributes(dev.get("attributes", {}), f"{where}/attributes")
    counters = dev.get("consumesCounters", [])
    if not isinstance(counters, list):
        raise NodeJsonError(f"{where}/consumesCounters: not a list")

    def text(key: str) -> str:
        value = attrs.get(key)
        return value if isinstance(value, str) else ""

    return Published(name, text("type"), text("profile"), bool(counters), text("productName"),
                     _placement(dev.get("capacity", {}), f"{where}/capacity"))


def _pool(spec: dict[str, object], where: str) -> tuple[str, int]:
    pool = spec.get("pool")
    name = pool.get("name") if isinstance(pool, dict) else None
    generation = pool.get("generation") if isinstance(pool, dict) else None
    if not isinstance(name, str) or type(generation) is not int:
        raise NodeJsonError(f"{where}/spec/pool: not a pool (a name and an integer generation)")
    return name, generation


@dataclass(frozen=True)
class NodeSlices:
    """The node's part of a capture: its devices (newest generation of each pool) and how many slices it has."""

    devices: list[Published]
    slices: int  # slices of driver gpu.nvidia.com for the node, every generation: 0 is "no slices for node X"


def read_resource_slices(path: Path, node: str) -> NodeSlices:
    """The devices driver gpu.nvidia.com publishes for ``node`` in a ``kubectl get resourceslices -o json`` List:
    of each pool, the slices of its newest generation only."""
    check_node_name(node)
    data = read_file_or_pipe(path, MAX_NODE_JSON_BYTES, NodeJsonError)  # <(kubectl get ... -o json) too
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise NodeJsonError(f"{path}: not JSON: {err}") from err
    except RecursionError as err:
        raise NodeJsonError(f"{path}: nested too deep to be a ResourceSlice list") from err
    if not isinstance(doc, dict) or doc.get("kind") not in ("List", "ResourceSliceList") \
            or not isinstance(doc.get("items"), list):
        raise NodeJsonError(f"{path}: not a List of ResourceSlices (kubectl get resourceslices -o json)")
    pools: dict[str, list[tuple[int, list[Published]]]] = {}
    count = slices = 0
    for i, item in enumerate(doc["items"]):
        where = f"{path}: /items/{i}"
        spec = item.get("spec") if isinstance(item, dict) else None
        if not isinstance(item, dict) or item.get("kind", "ResourceSlice") != "ResourceSlice" \
                or not isinstance(spec, dict):
            raise NodeJsonError(f"{where}: not a ResourceSlice with a spec")
        if spec.get("driver") != DRIVER or spec.get("nodeName") != node:
            continue
        pool, generation = _pool(spec, where)
        slices += 1
        devices = spec.get("devices", [])
        if not isinstance(devices, list):
            raise NodeJsonError(f"{where}/spec/devices: not a list")
        count += len(devices)
        if count > MAX_DEVICES:
            raise NodeJsonError(f"{where}: more than {MAX_DEVICES} devices for node {node}")
        pools.setdefault(pool, []).append(
            (generation, [_device(dev, f"{where}/spec/devices/{j}") for j, dev in enumerate(devices)]))
    out: list[Published] = []
    for generations in pools.values():
        newest = max(g for g, _ in generations)
        out += [d for g, devices in generations if g == newest for d in devices]
    return NodeSlices(out, slices)
