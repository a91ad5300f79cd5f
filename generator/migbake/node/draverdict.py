"""``dra-devices``: does a node publish what the profile's allocation promises (``preflight --resource-slices``)?

Under ``dra`` the node is ready when each GPU publishes exactly its entry's MIG devices, by count per profile
and by placement. A MIG device's GPU and placement are read from its name in either of the driver's namings
(kubernetes-sigs/dra-driver-nvidia-gpu: ``gpu-<minor>-mig-<giProfileId>-<start>-<size>`` from v25.3.0 to
v25.8.1, cmd/gpu-kubelet-plugin/deviceinfo.go@v25.8.1 l.77-79; ``gpu-<minor>-mig-<profile>-<giProfileId>-<start>``
from v25.12.0, mig.go@v25.12.0 l.104-107), and where a name reads as neither, from its attributes: the
``profile`` attribute and the ``memorySlice<i>`` capacities every MIG device holds (deviceinfo.go@v25.8.1
l.175-180, @v25.12.0 ``GetDevice``). The verdict says which naming the node publishes. In a profile of several
models, an entry for ``devices: all`` covers the GPUs whose ``productName`` is its model's (NVML's device
name, nvlib.go@v25.12.0 l.445). Under ``dra-dynamic`` the node is ready when no static MIG device exists
(DynamicMIG's partitions consume per-GPU shared counters: a MIG device without ``consumesCounters`` is a
static one, which the plugin destroys at start). The generated verify script says the same words
(templates/scripts/_dra-slices.sh.j2).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from migbake.kubernetes.dra import DRIVER, STRANDED_LOG, DraExpectation, NamedDevices, naming
from migbake.kubernetes.labels import MIG_CONFIG_LABEL
from migbake.node.draslices import NodeSlices, Published
from migbake.node.preflight import Status
from migbake.profile.nodeprofile import NodeProfile
from migbake.wording import index_list

LEGACY_NAME = re.compile(r"gpu-(\d{1,4})-mig-(\d{1,3})-(\d{1,2})-(\d{1,2})")  # deviceinfo.go@v25.8.1 l.77-79
MIG_NAME = re.compile(r"gpu-(\d{1,4})-mig-([a-z0-9-]*[a-z][a-z0-9-]*)-(\d{1,3})-(\d{1,2})")  # mig.go@v25.12.0
MIG_PREFIX = re.compile(r"gpu-(\d{1,4})-mig-[a-z0-9-]+")
GPU_NAME = re.compile(r"gpu-(\d{1,4})")
DRIVERS = {"v25.12": "DRA driver v25.12.0 and later", "v25.8": "DRA driver v25.3.0 to v25.8.1"}
CHECK = "dra-devices"


@dataclass(frozen=True)
class Seen:
    """One published MIG device, read: its GPU, profile, first memory slice (None: not known) and name form."""

    gpu: int
    profile: str
    start: int | None
    name: str
    form: str  # v25.12, v25.8, or attributes


def read_mig(d: Published) -> Seen | None:
    """The GPU and placement of a MIG device from its name, else from its attributes; None: no GPU to tell."""
    if (m := LEGACY_NAME.fullmatch(d.name)) is not None:
        return Seen(int(m[1]), d.profile, int(m[3]), d.name, "v25.8")
    if (m := MIG_NAME.fullmatch(d.name)) is not None:
        return Seen(int(m[1]), d.profile, int(m[4]), d.name, "v25.12")
    if (m := MIG_PREFIX.fullmatch(d.name)) is not None:
        return Seen(int(m[1]), d.profile, d.placement[0] if d.placement else None, d.name, "attributes")
    return None


def _tally(names: list[str]) -> str:
    return ", ".join(f"{n}x {p}" for p, n in sorted(Counter(names).items())) or "nothing"


def naming_words(seen: list[Seen], profile: NodeProfile) -> str:
    """``; device names: the form of ...``: which naming the node publishes (and whether the profile says another)."""
    forms = {s.form for s in seen}
    named = sorted(forms & set(DRIVERS))
    if not forms:
        return ""
    words = " and ".join(f"the form of {DRIVERS[f]}" for f in named) if named else "none of the driver's forms"
    if "attributes" in forms:
        n = sum(s.form == "attributes" for s in seen)
        words += f"; {n} device(s) read by attributes (profile, memory slices): a name neither form reads"
    said = naming(profile.kubernetes.dra_driver_version) or "v25.12"
    if named and said not in named:
        words += (f" (the profile expects the names of {DRIVERS[said]}: set kubernetes.dra_driver_version to the "
                  "driver the cluster runs; migbake show prints the profile's form)")
    return f"; device names: {words}"


def _gpu_problems(gpu: int, e: DraExpectation, have: list[Seen], whole: set[int], form: str) -> str:
    """What differs on one GPU of a MIG entry ("" when it publishes exactly the plan's devices)."""
    want_profiles = [d.profile for d in e.want]
    if not have:
        why = "published whole (MIG off?)" if gpu in whole else (
            f"stranded: MIG on with no instances ('{STRANDED_LOG}'), or the plugin started before the restore")
        return f"GPU {gpu} publishes no MIG device ({why}); the plan has {_tally(want_profiles)}"
    if Counter(s.profile for s in have) != Counter(want_profiles):
        return (f"GPU {gpu}: partial layout: publishes {_tally([s.profile for s in have])}, the plan has "
                f"{_tally(want_profiles)} (MIG devices created after the plugin started are not published until "
                "it restarts)")
    planned: Counter[tuple[str, int | None]] = Counter((d.profile, d.start) for d in e.want)
    published = Counter((s.profile, s.start) for s in have)
    if planned == published:
        return ""
    extra, missing = published - planned, planned - published
    moved = sorted({s.name for s in have if (s.profile, s.start) in extra})
    plan = sorted({d.name(gpu, "v25.8" if form == "v25.8" else "v25.12") for d in e.want
                   if (d.profile, d.start) in missing})
    return (f"GPU {gpu}: moved placements: publishes {', '.join(moved)} where the plan has {', '.join(plan)} "
            "(claims that select by profile are unaffected; the device names differ from migbake show's)")


def _dynamic(devices: list[Published], node: str) -> list[tuple[str, Status, str]]:
    static = sorted(d.name for d in devices if d.type == "mig" and not d.dynamic)
    if static:
        return [(CHECK, "FAIL", f"node {node} publishes static MIG devices ({', '.join(static)}): under "
                 "dra-dynamic the restore creates none, and the DRA driver's DynamicMIG destroys MIG devices it "
                 "did not create when its plugin starts; is DynamicMIG enabled (featureGates.DynamicMIG=true)?")]
    parts = sum(d.type == "mig" for d in devices)
    return [(CHECK, "PASS", f"node {node}: no static MIG device ({parts} DynamicMIG partition(s) advertised)")]


def slice_checks(profile: NodeProfile, expected: tuple[DraExpectation, ...], capture: NodeSlices, node: str
                 ) -> list[tuple[str, Status, str]]:
    """``dra-devices``: does the node publish what the profile's allocation promises (``expected``: the render
    plan's, ``RenderPlan.dra.expected``: its placements, predicted once)?"""
    if capture.slices == 0:
        return [(CHECK, "FAIL", f"no slices for node {node}: the capture has no ResourceSlice of driver {DRIVER} "
                 f"with nodeName {node} (is the DRA driver's kubelet plugin running there, and is {node} the "
                 "node's name?)")]
    devices = capture.devices
    if profile.kubernetes.allocation == "dra-dynamic":
        return _dynamic(devices, node)
    per_gpu: dict[int, list[Seen]] = {}
    whole: set[int] = set()
    product: dict[int, str] = {}
    unread: list[str] = []
    for d in devices:
        if d.type == "mig":
            if (s := read_mig(d)) is None:
                unread.append(d.name)
                continue
            per_gpu.setdefault(s.gpu, []).append(s)
            gpu = s.gpu
        elif (g := GPU_NAME.fullmatch(d.name)) is not None:
            whole.add(gpu := int(g[1]))
        else:
            continue
        if d.product:
            product.setdefault(gpu, d.product)
    seen = [s for have in per_gpu.values() for s in have]
    forms = {s.form for s in seen} & {"v25.8", "v25.12"}
    form = next(iter(forms)) if len(forms) == 1 else "v25.12"
    problems = [f"MIG devices on no GPU migbake can tell ({', '.join(sorted(unread))}): their names start with "
                "neither gpu-<minor>-mig-"] if unread else []
    published = sorted(set(per_gpu) | whole)
    checked, claimed, uncounted = 0, set(), False
    for e in expected:
        uncounted = uncounted or e.gpus is None
        gpus = published if e.gpus is None else list(e.gpus)
        if e.products:  # devices: all in a profile of several models: the GPUs of this model
            gpus = [g for g in gpus if product.get(g) in e.products]
        for gpu in gpus:
            checked += 1
            claimed.add(gpu)
            if not e.mig:
                if gpu not in whole:
                    problems.append(f"GPU {gpu}: gpu-{gpu} (MIG off) is not published")
                continue
            if text := _gpu_problems(gpu, e, per_gpu.get(gpu, []), whole, form):
                problems.append(text)
    everyone = range(profile.gpu_count) if profile.gpu_count is not None else published
    for gpu in sorted(set(everyone) - claimed):
        problems.append(f"GPU {gpu} publishes no device (stranded: MIG on with no instances ('{STRANDED_LOG}'), or "
                        "the plugin started before the restore)" if gpu not in published else
                        f"GPU {gpu} ({product.get(gpu) or 'no productName'}) is covered by no gpus entry")
    names = naming_words(seen, profile)
    if problems:
        return [(CHECK, "FAIL", f"node {node}: " + "; ".join(problems) + names)]
    text = (f"node {node} publishes exactly the plan's devices on {checked} GPU(s) "
            f"({index_list(published) if published else 'none'}){names}")
    if uncounted:  # a stranded GPU publishes nothing: without gpu_count it cannot be missed
        return [(CHECK, "WARN", f"{text}; set gpu_count: a stranded GPU publishes nothing, so without it a "
                 "missing GPU cannot be told")]
    return [(CHECK, "PASS", text)]



def layout_slice_checks(profile: NodeProfile, expected: tuple[DraExpectation, ...], named: NamedDevices,
                        labels: dict[str, str] | None, capture: NodeSlices, node: str) -> list[tuple[str, Status, str]]:
    """``slice_checks`` for the layout the node got: with named layouts (``named``: the render plan's
    ``RenderPlan.dra.named_devices``), the one its ``nvidia.com/mig.config`` label names (the restore gives kubelet
    that label; ``labels``: the node's, from ``--node-json``, None without it). A capture of ResourceSlices alone
    cannot tell which name a node has: then SKIP, saying so."""
    if not named:
        return slice_checks(profile, expected, capture, node)
    names = ", ".join(n for n, _ in named)
    if labels is None:
        return [(CHECK, "SKIP", f"named layouts ({names}): which one node {node} has is its {MIG_CONFIG_LABEL} label, "
                 "which ResourceSlices do not say: give --node-json (kubectl get node NAME -o json) with them")]
    given = labels.get(MIG_CONFIG_LABEL)
    devices = dict(named).get(given or "")
    if devices is None:
        said = f"is {given!r}, not a layout name of this image" if given is not None else "is not set"
        return [(CHECK, "SKIP", f"named layouts ({names}): node {node}'s label {MIG_CONFIG_LABEL} {said}, so its "
                 "layout is not known here (the mig-config row says more)")]
    checks = slice_checks(profile, tuple(replace(e, want=w) for e, w in zip(expected, devices)), capture, node)
    return [(c, status, f"layout {given} ({MIG_CONFIG_LABEL}): {detail}") for c, status, detail in checks]
