"""The Kubernetes view of a profile: the extended resources the device plugin advertises, and the layout
as a GPU Operator mig-manager ConfigMap.

Resource names follow the NVIDIA device plugin (``internal/rm/rm.go``): with the ``mixed`` strategy a MIG
device of profile P is ``nvidia.com/mig-P`` with ``+`` written ``.``, and compute-instance forms
(``1c.3g.40gb``) are not advertised; with ``single`` every MIG device is ``nvidia.com/gpu``. A GPU with
MIG off is one ``nvidia.com/gpu``.

Before v0.20.0 the plugin matched a MIG device's profile against each resource's pattern without anchors
(``api/config/v1/resources.go``, ``wildCardToRegexp``), first match wins, in the order NVML lists the GPU
instance profiles (go-nvlib ``VisitMigProfiles``: the plain profiles before their ``+me``, ``-me``,
``+me.all`` and ``+gfx`` forms). So a device of ``1g.10gb+me`` matched ``1g.10gb`` first and was counted as
``nvidia.com/mig-1g.10gb`` (NVIDIA/k8s-device-plugin#1462); v0.20.0 anchors the patterns
(NVIDIA/k8s-device-plugin#1807, commit 0dfdfb9) and each form is a resource of its own.
``kubernetes.device_plugin_version`` says which plugin the cluster runs (unset: the newest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from migbake.document.emitter import flow_scalar
from migbake.document.patterns import RELEASE_VERSION
from migbake.gpu.catalog import PROFILE_NAME_RE
from migbake.kubernetes.labels import MIG_CONFIG_LABEL, OPERATOR_DEFAULT_CONFIG, config_label_problem
from migbake.migparted.config import config_yaml, entry_pci_ids, mig_parted_config, uses_device_filter
from migbake.problems import MigbakeError
from migbake.profile.nodeprofile import GpuGroup, MigStrategy, NodeProfile

WHOLE_GPU = "nvidia.com/gpu"
CONFIG_LABEL = MIG_CONFIG_LABEL


# the first release of NVIDIA's device plugin whose resource patterns are anchored (NVIDIA/k8s-device-plugin#1807)
SEPARATE_SUFFIXES = (0, 20)


def separates_suffixes(plugin_version: str) -> bool:
    """Whether device plugin ``plugin_version`` ("" the newest) advertises ``1g.10gb+me`` apart from ``1g.10gb``."""
    m = RELEASE_VERSION.fullmatch(plugin_version)
    return m is None or (int(m[1]), int(m[2])) >= SEPARATE_SUFFIXES


def resource_name(profile_name: str, strategy: MigStrategy, plugin_version: str = "") -> str | None:
    """The extended resource of one MIG device of ``profile_name``; None if the plugin does not list it."""
    m = PROFILE_NAME_RE.match(profile_name)
    if m is None or (m["c"] is not None and m["c"] != m["g"]):
        return None
    if strategy == "single":
        return WHOLE_GPU
    if m["sign"] is not None and not separates_suffixes(plugin_version):
        profile_name = f"{m['g']}g.{m['gb']}gb"  # the plain profile's pattern matched it first
    return "nvidia.com/mig-" + profile_name.replace("+", ".")


def per_gpu(group: GpuGroup, strategy: MigStrategy, plugin_version: str = "") -> dict[str, int]:
    """The resources one GPU of ``group`` advertises."""
    if not group.mig_enabled:
        return {WHOLE_GPU: 1}
    out: dict[str, int] = {}
    for name, count in group.layout:
        res = resource_name(name, strategy, plugin_version)
        if res is not None:
            out[res] = out.get(res, 0) + count
    return out


def entry_resources(profile: NodeProfile) -> tuple[dict[str, int], ...]:
    """Per ``gpus`` entry, the resources one of its GPUs advertises (``per_gpu`` under the profile's strategy)."""
    strategy, version = profile.kubernetes.mig_strategy, profile.kubernetes.device_plugin_version
    return tuple(per_gpu(g, strategy, version) for g in profile.gpus)


@dataclass(frozen=True)
class NodeKind:
    """One kind of node the image serves: which entries apply, how many GPUs each covers, the totals."""

    label: str
    groups: tuple[int, ...]
    gpus: tuple[int | None, ...]  # per entry of ``groups``; None: unknown (no gpu_count)
    totals: dict[str, int] | None  # None when a GPU count is unknown


def _gpus(profile: NodeProfile, members: list[int]) -> list[int | None]:
    # "all" stands alone in its kind of node (anything beside it would overlap), so it means gpu_count
    return [len(d) if (d := profile.gpus[i].devices) != "all" else profile.gpu_count for i in members]


def node_kinds(profile: NodeProfile, with_filter: bool | None = None,
               resources: Sequence[dict[str, int]] | None = None) -> list[NodeKind]:
    """One kind per GPU model when entries filter by model and there are several, else one kind
    (``with_filter``: ``uses_device_filter(profile)``, ``resources``: ``entry_resources(profile)``, when the caller
    knows them)."""
    per_entry = entry_resources(profile) if resources is None else resources
    models = [m.key for m in profile.models]
    kinds: dict[str, list[int]] = {}
    filtered = uses_device_filter(profile) if with_filter is None else with_filter
    several = filtered and len(set(models)) > 1
    for i, key in enumerate(models):
        kinds.setdefault(key if several else "", []).append(i)
    out = []
    for key, members in kinds.items():
        gpus = _gpus(profile, members)
        totals: dict[str, int] | None = {}
        for i, n in zip(members, gpus):
            if n is None or totals is None:
                totals = None
                continue
            for res, c in per_entry[i].items():
                totals[res] = totals.get(res, 0) + c * n
        label = f"a node whose GPUs are {key}" if key else "the node"
        out.append(NodeKind(label, tuple(members), tuple(gpus), totals))
    return out


def _pairs(resources: dict[str, int]) -> str:
    return ", ".join(f"{r}: {n}" for r, n in resources.items()) or "nothing"


def resource_report(profile: NodeProfile) -> list[str]:
    """Lines for ``migbake show``: what kubelet's allocatable will list, per kind of node."""
    strategy, version = profile.kubernetes.mig_strategy, profile.kubernetes.device_plugin_version
    said = f", device plugin {version}" if version else ""
    lines = [f"Kubernetes extended resources (device plugin MIG strategy: {strategy}{said}):"]
    if not profile.kubelet.present:
        lines.append("  (the profile runs no Kubernetes node: these apply only if the node ever runs the device "
                     "plugin)")
    for kind in node_kinds(profile):
        if kind.totals is not None:
            lines.append(f"  {kind.label} ({sum(x or 0 for x in kind.gpus)} GPUs):")
            lines += [f"    {r}: {c}" for r, c in kind.totals.items()] or ["    nothing"]
            continue
        lines.append(f"  {kind.label}: per GPU (the GPU count is unknown: set gpu_count for totals)")
        for i, n in zip(kind.groups, kind.gpus):
            where = "every other GPU" if n is None else f"{n} GPUs"
            lines.append(f"    /gpus/{i} ({where}): {_pairs(per_gpu(profile.gpus[i], strategy, version))} each")
    hidden = sorted({name for g in profile.gpus if g.mig_enabled for name, _ in g.layout
                     if resource_name(name, strategy, version) is None})
    if hidden:
        lines.append(f"  not advertised: {', '.join(hidden)} (the device plugin lists whole GPU instances "
                     "only)")
    merged = sorted({name for g in profile.gpus if g.mig_enabled for name, _ in g.layout
                     if resource_name(name, strategy, version) not in (None, resource_name(name, strategy))})
    if merged:
        lines.append(f"  counted with their plain profile: {', '.join(merged)} (device plugin {version} matches "
                     "resource patterns unanchored; v0.20.0 and later advertise each form apart: "
                     "NVIDIA/k8s-device-plugin#1807)")
    return lines


def verify_groups(profile: NodeProfile, with_filter: bool | None = None,
                  resources: Sequence[dict[str, int]] | None = None) -> list[dict[str, str]]:
    """Per ``gpus`` entry, what the verify script needs to match GPUs like mig-parted and sum resources
    (``with_filter``: ``uses_device_filter(profile)``, ``resources``: ``entry_resources(profile)``, when the caller
    knows them)."""
    filtered = uses_device_filter(profile) if with_filter is None else with_filter
    per_entry = entry_resources(profile) if resources is None else resources
    return [{"model": m.key, "pci_ids": " ".join(entry_pci_ids(g, m)),
             "devices": "all" if g.devices == "all" else " ".join(map(str, g.devices)),
             "filtered": "yes" if filtered else "no",
             "resources": " ".join(f"{r}={n}" for r, n in res.items())}
            for g, m, res in zip(profile.gpus, profile.models, per_entry)]


def configmap_name(profile: NodeProfile) -> str:
    """The ConfigMap's name: ``<profile>-mig-parted-config``."""
    return f"{profile.name}-mig-parted-config"


def operator_config(profile: NodeProfile) -> dict[str, object]:
    """Our config plus the operator's default ``all-disabled`` (the label value it sets on unlabelled nodes)."""
    config = mig_parted_config(profile)
    configs = config["mig-configs"]
    if OPERATOR_DEFAULT_CONFIG not in configs:
        configs[OPERATOR_DEFAULT_CONFIG] = [{"devices": "all", "mig-enabled": False}]
    return config


def _configmap_body(name: str, config: dict[str, object]) -> list[str]:
    # config.yaml as a literal block: the text is PyYAML's own output, so every line is safe inside it
    return ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {flow_scalar(name, ascii_only=True)}", "data:",
            "  config.yaml: |", *(f"    {line}" if line else "" for line in config_yaml(config).splitlines())]


class ConfigLabelError(MigbakeError):
    """A config the operator's mig-manager would select with a label its name cannot be."""


def _selectable(file: str, name: str) -> None:
    """ConfigLabelError unless ``nvidia.com/mig.config=<name>`` is a label Kubernetes accepts."""
    why = config_label_problem(name)
    if why:
        raise ConfigLabelError(f"{file}: /restore/config_name: {why}; nothing exported")


def gpu_operator_configmap(profile: NodeProfile, header: str, file: str = "") -> str:
    """The layout as a GPU Operator mig-manager custom config (a ConfigMap with key ``config.yaml``);
    ConfigLabelError when no node label could select it (``file`` names the profile)."""
    _selectable(file or profile.name, profile.restore.config_name)
    body = _configmap_body(configmap_name(profile), operator_config(profile))
    if profile.layout_names:
        return "\n".join([header, *(f"# {n}" for n in _named_notes(profile)), *body]) + "\n"
    ours = profile.restore.config_name
    label = f"{CONFIG_LABEL}={ours}"
    notes = [
        "GPU Operator mig-manager custom config: the same reviewed layout as the baked restore unit.",
        "Use one or the other on a node, never both (each would apply MIG at boot).",
        f"The label {label} selects this layout ({ours!r}); {OPERATOR_DEFAULT_CONFIG!r} is the operator's",
        "default (migManager.config.default), which it puts on every MIG-capable node without the label;",
        "it is included so that such a node finds it in this ConfigMap.",
        "  kubectl apply -n gpu-operator -f THIS_FILE",
        f"  helm ... --set migManager.config.name={configmap_name(profile)}",
        f"  kubectl label node NODE {label}    # selects config {ours!r}",
    ]
    return "\n".join([header, *(f"# {n}" for n in notes), *body]) + "\n"


def _named_notes(profile: NodeProfile) -> list[str]:
    """The ConfigMap's comment for a profile with named layouts: one config, and one label value, per name."""
    return [
        "GPU Operator mig-manager custom config: the same reviewed layouts as the baked restore unit, one",
        "config per name (mig.layouts). Use one or the other on a node, never both (each would apply MIG at boot).",
        f"{OPERATOR_DEFAULT_CONFIG!r} is the operator's default (migManager.config.default), which it puts on every",
        "MIG-capable node without the label; it is included so that such a node finds it in this ConfigMap.",
        "  kubectl apply -n gpu-operator -f THIS_FILE",
        f"  helm ... --set migManager.config.name={configmap_name(profile)}",
        *(f"  kubectl label node NODE {CONFIG_LABEL}={name}    # selects layout {name!r}"
          for name in profile.layout_names),
    ]


MANY_CONFIGMAP = "migbake-mig-parted-config"
DEFAULT_CONFIG_NAME = "current"  # restore.config_name's default: a profile that keeps it is named by its name


class ConfigClashError(MigbakeError):
    """Two profiles of one ConfigMap whose configs would have one name."""


def operator_config_name(profile: NodeProfile) -> str:
    """A profile's config in a shared ConfigMap: ``restore.config_name``, or the profile's name when it is the
    default ``current`` (which every profile has unless it says otherwise)."""
    ours = profile.restore.config_name
    return profile.name if ours == DEFAULT_CONFIG_NAME else ours


def gpu_operator_configmap_many(profiles: list[tuple[str, NodeProfile]],
                                header: str) -> tuple[str, list[tuple[str, str]]]:
    """One ConfigMap holding one config per profile (``(file, profile)`` pairs) and ``all-disabled``; and the
    (config, profile name) pairs in order. ConfigClashError when two configs (or one and ``all-disabled``)
    share a name."""
    configs: dict[str, object] = {}
    owners: dict[str, str] = {OPERATOR_DEFAULT_CONFIG: "the GPU Operator's default config"}
    named: list[tuple[str, str]] = []
    for file, profile in profiles:
        if profile.layout_names:
            raise ConfigClashError(f"{file}: named layouts (mig.layouts: {', '.join(profile.layout_names)}) are "
                                   "not yet merged with other profiles: export this profile on its own; nothing "
                                   "exported")
        key = operator_config_name(profile)
        _selectable(file, key)
        if key in owners:
            raise ConfigClashError(f"{file}: its config would be named {key!r} (restore.config_name, or the "
                                   f"profile's name), as {owners[key]}: give one profile another "
                                   "restore.config_name; nothing exported")
        owners[key] = f"{file} (profile {profile.name})"
        configs.update(mig_parted_config(profile, key)["mig-configs"])
        named.append((key, profile.name))
    configs[OPERATOR_DEFAULT_CONFIG] = [{"devices": "all", "mig-enabled": False}]
    body = _configmap_body(MANY_CONFIGMAP, {"version": "v1", "mig-configs": configs})
    notes = [
        "GPU Operator mig-manager custom config for several node profiles (the operator owns MIG on these",
        "nodes: bake no restore unit into their image). Label each node with the config of its profile:",
        *(f"  kubectl label node NODE {CONFIG_LABEL}={key}    # profile {name}" for key, name in named),
        f"{OPERATOR_DEFAULT_CONFIG!r} is the operator's default (migManager.config.default), set on every",
        "MIG-capable node without the label.",
        "  kubectl apply -n gpu-operator -f THIS_FILE",
        f"  helm ... --set migManager.config.name={MANY_CONFIGMAP}",
    ]
    return "\n".join([header, *(f"# {n}" for n in notes), *body]) + "\n", named
