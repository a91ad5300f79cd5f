"""Semantic rules: what the schema cannot say, on the profile's GPU entries as a whole (devices, coverage, strategy).

Each check is a small function that yields problems, its rules declared above it (``@rule``, ``rules.declare``).
Checks read the raw profile data defensively (the schema may have failed elsewhere in the same file), so that one
run reports every problem of a profile, shape and meaning alike. The rules on GPU models and layouts live in
``rules.layouts``; ``rules.registry`` runs every check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.gpu.catalog import Catalog
from migbake.gpu.devicefilter import writes_device_filter
from migbake.problems import Problem
from migbake.rules.allocation import allocation_of
from migbake.rules.declare import rule
from migbake.rules.layoutnames import layout_names, named_mig_problems
from migbake.rules.layouts import layout_entries, model_of
from migbake.wording import article, gpus, index_list, instances


@rule("empty-layout", "warning", "MIG on with no instances: the device plugin fails on such a GPU")
@rule("layout-without-mig", "error", "a layout on an entry with MIG off")
def rule_mig_enabled(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """MIG on needs instances (warning; under a DRA allocation rule_allocation says it), MIG off must have none."""
    device_plugin = allocation_of(data) == "device-plugin"
    for ptr, group in gpu_entries(data):
        mig = group.get("mig")
        if isinstance(mig, dict) and "layouts" in mig:  # named layouts
            yield from named_mig_problems(loaded, ptr, group, catalog)
            continue
        if (model := model_of(group, catalog)) is not None and not model.has_mig:
            continue  # rule_no_mig
        if not isinstance(mig, dict):
            if "mig" not in group and device_plugin:
                yield loaded.problem(ptr, "no mig: section: MIG will be enabled with no instances; the device "
                                     "plugin fails on a MIG GPU without instances", "empty-layout")
            continue
        enabled = mig.get("enabled", True)
        layout = mig.get("layout", {})
        if enabled is True and isinstance(layout, dict) and not layout and device_plugin:
            yield loaded.problem(f"{ptr}/mig", "MIG is enabled with an empty layout: the GPU will have no MIG "
                                 "devices and the device plugin fails on it", "empty-layout")
        if enabled is False and isinstance(layout, dict) and layout:
            yield loaded.problem(f"{ptr}/mig/layout", "a layout is given but mig.enabled is false; mig-parted "
                                 "rejects MIG devices on a GPU with MIG off", "layout-without-mig")


def _devices(group: dict[str, Any]) -> set[int] | None:
    devices = group.get("devices", "all")
    if devices == "all":
        return None
    if isinstance(devices, list):
        return {d for d in devices if isinstance(d, int) and not isinstance(d, bool)}
    return set()


def _model_key(group: dict[str, Any], catalog: Catalog) -> str:
    model = model_of(group, catalog)
    return model.key if model else str(group.get("model"))


def _filtered(data: object, catalog: Catalog) -> bool:
    """Whether the config's entries carry a device-filter (device_filter; auto: several models)."""
    mode = as_mapping(data).get("device_filter", "auto")
    exact = any("pci_device_ids" in g for _, g in gpu_entries(data))
    return writes_device_filter(str(mode), (_model_key(g, catalog) for _, g in gpu_entries(data)), exact)


@rule("devices-without-gpu-count", "warning", "explicit devices without gpu_count: coverage cannot be checked")
def rule_devices_need_gpu_count(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Explicit device indices without gpu_count: warn once, a node with more GPUs fails at every boot."""
    if "gpu_count" in as_mapping(data):
        return
    for ptr, group in gpu_entries(data):
        if isinstance(group.get("devices"), list):
            yield loaded.problem(f"{ptr}/devices", "GPU indices are listed but gpu_count is not set: on a node "
                                 "with more GPUs than the entries cover, assert fails at every boot ('not all "
                                 "GPUs match the specified config') and the restore fails closed; set gpu_count "
                                 "to the node's number of GPUs so that validation checks every GPU is covered",
                                 "devices-without-gpu-count")
            return


@rule("device-overlap", "error", "two gpus entries name the same GPU index")
@rule("device-out-of-range", "error", "a GPU index beyond gpu_count")
def rule_devices(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """GPU indices never repeat across entries of the same model and stay below gpu_count."""
    groups = gpu_entries(data)
    gpu_count = as_mapping(data).get("gpu_count")
    filtered = _filtered(data, catalog)  # with a device-filter, entries of different models never meet
    for i, (ptr, group) in enumerate(groups):
        mine = _devices(group)
        if isinstance(gpu_count, int) and not isinstance(gpu_count, bool) and gpu_count >= 1 and mine:
            for idx, d in enumerate(group.get("devices", [])):
                if isinstance(d, int) and d >= gpu_count:
                    yield loaded.problem(f"{ptr}/devices/{idx}", f"GPU index {d} does not exist on a node with "
                                         f"gpu_count {gpu_count} (indices 0-{gpu_count - 1})",
                                         "device-out-of-range")
        for ptr2, other in groups[:i]:
            same_model = model_of(group, catalog) == model_of(other, catalog) or not filtered
            if not same_model:
                continue
            theirs = _devices(other)
            if mine is None or theirs is None:
                shared = "every GPU" if mine is None and theirs is None else "some GPUs"
            else:
                both = sorted(mine & theirs)
                shared = f"GPU {', '.join(map(str, both))}" if both else ""
            if shared:
                yield loaded.problem(f"{ptr}/devices", f"{shared} also covered by {ptr2}: each GPU must be in "
                                     "exactly one entry (mig-parted would apply both, the last one winning)",
                                     "device-overlap")


@rule("unit-name-clash", "error", "two of the restore's units, or a unit and a consumer, share a name")
def rule_units(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The restore unit, kubelet and the conflicting manager are three different units."""
    d = as_mapping(data)
    names = {
        "/restore/unit": as_mapping(d.get("restore")).get("unit", "nvidia-mig-restore.service"),
        "/kubelet/unit": as_mapping(d.get("kubelet")).get("unit", "kubelet.service"),
        "/conflicting_manager/unit": as_mapping(d.get("conflicting_manager")).get(
            "unit", "nvidia-mig-manager.service"),
    }
    seen: dict[object, str] = {}
    for ptr, name in names.items():
        if not isinstance(name, str):
            continue  # the schema reports it (a list here would not even be hashable)
        if name in seen:
            here, there = ptr, seen[name]
            if here not in loaded.key_pos and there in loaded.key_pos:
                here, there = there, f"{here} (its default)"  # point at the name the file wrote
            yield loaded.problem(here, f"{name!r} is also {there}: these must be different units",
                                 "unit-name-clash")
        else:
            seen[name] = ptr


def _covered(groups: list[tuple[str, dict[str, Any]]], every: set[int]) -> set[int]:
    out: set[int] = set()
    for _, g in groups:
        mine = _devices(g)
        out |= every if mine is None else mine
    return out


@rule("device-uncovered", "error", "with gpu_count: a GPU that no entry covers")
@rule("model-uncovered", "error", "with a device-filter: a model whose entries leave GPUs out")
def rule_coverage(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """With gpu_count, every GPU is in an entry; with a device-filter, in an entry of each model."""
    gpu_count = as_mapping(data).get("gpu_count")
    groups = gpu_entries(data)
    if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or not 1 <= gpu_count <= 64 or not groups:
        return  # the schema reports a gpu_count out of range
    every = set(range(gpu_count))
    if any(max(mine, default=0) >= gpu_count for _, g in groups if (mine := _devices(g))):
        return  # rule_devices reports the index out of range; the numbering is off, not the coverage
    fails = ("assert then fails at every boot ('not all GPUs match the specified config') and the restore "
             "fails closed")
    missing = sorted(every - _covered(groups, every))
    if missing:
        yield loaded.problem("/gpus", f"GPU {index_list(missing)} of the {gpu_count} (gpu_count) is in no entry: "
                             f"{fails}", "device-uncovered")
        return
    if not _filtered(data, catalog):
        return
    by_model: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for ptr, g in groups:
        by_model.setdefault(_model_key(g, catalog), []).append((ptr, g))
    for key, members in by_model.items():
        gaps = sorted(every - _covered(members, every))
        if gaps:
            one = len(gaps) == 1
            yield loaded.problem(f"{members[0][0]}/devices", f"the {key} entries leave {gpus(gaps)} "
                                 "uncovered: each entry filters by model, so on a node whose "
                                 f"{gpus(gaps)} {'is ' + article(key) if one else 'are'} {key} no entry matches "
                                 f"{'it' if one else 'them'} and {fails} (a node that "
                                 "mixes models at fixed indices: set device_filter: never and list each "
                                 "entry's devices)", "model-uncovered")


def _strategy_kinds(data: object, catalog: Catalog) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The entries that meet on one node: per model when entries filter by model, else all of them."""
    kinds: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    filtered = _filtered(data, catalog)
    for ptr, g in gpu_entries(data):
        kinds.setdefault(_model_key(g, catalog) if filtered else "", []).append((ptr, g))
    return kinds


_SINGLE = "mig-strategy-single"
_ONE_TYPE = ("with mig_strategy single every MIG device is nvidia.com/gpu, so the device plugin needs "
             "one MIG device type per node ('More than one MIG device type present on node', "
             "NVIDIA/gpu-operator#460); use mig_strategy: mixed")


def _single_problem(ptr: str, group: dict[str, Any], node: str) -> tuple[str, str, bool] | None:
    """Why one entry cannot be on a node whose device plugin uses the single strategy (pointer, text, key)."""
    mig = as_mapping(group.get("mig"))
    layout = as_mapping(mig.get("layout"))
    parts = [e for e in layout_entries(ptr, group) if e.c is not None and e.c != e.g]
    if mig.get("enabled", True) is False:
        return (f"{ptr}/mig/enabled", f"MIG is off here: with mig_strategy single every GPU{node} must have "
                "MIG on (the device plugin: 'all devices on the node must be configured with the same "
                "migEnabled value')", False)
    if not layout:
        return (f"{ptr}/mig", "no MIG devices: with mig_strategy single the device plugin fails on a MIG GPU "
                "without instances ('No MIG devices present on node')", False)
    if parts:
        return (parts[0].pointer, f"{parts[0].name!r} is a compute-instance form: with mig_strategy single "
                "the device plugin accepts only whole GPU instances", True)
    if len(layout) > 1:
        return f"{ptr}/mig/layout", f"{', '.join(layout)}: several profile types; {_ONE_TYPE}", False
    return None


@rule("mig-strategy-single", "error", "kubernetes.mig_strategy single with more than one MIG device type")
def rule_mig_strategy(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """mig_strategy single: per node, MIG on for every GPU, one identical layout of one profile type."""
    if as_mapping(as_mapping(data).get("kubernetes")).get("mig_strategy") != "single":
        return
    if allocation_of(data) != "device-plugin":
        return  # no device plugin: rule_allocation warns that the strategy does not apply
    if layout_names(data):
        return  # named layouts: layouts-not-yet-supported refuses the single strategy with them
    for key, members in _strategy_kinds(data, catalog).items():
        node = f" of {article(key)} {key} node" if key else ""
        first: tuple[str, dict[str, Any]] | None = None
        for ptr, g in members:
            found = _single_problem(ptr, g, node)
            layout = as_mapping(as_mapping(g.get("mig")).get("layout"))
            if found is not None:
                yield loaded.problem(found[0], found[1], _SINGLE, key=found[2])
            elif first is None:
                first = (ptr, layout)
            elif layout != first[1]:
                yield loaded.problem(f"{ptr}/mig/layout", f"{instances(layout)} differs from {first[0]} "
                                     f"({instances(first[1])}): every MIG GPU{node} needs the same layout; "
                                     f"{_ONE_TYPE}", _SINGLE)
