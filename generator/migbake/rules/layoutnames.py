"""Rules on named layouts: ``mig.layouts`` per entry and ``restore.layout``, the name chosen at boot.

Every entry with MIG on names the same layouts (the coverage matrix of an image serving several GPU models),
the names and the choice come together, the default is one of the names, the ec2-tag source names its tag, and
what does not follow the names yet (Bottlerocket, the single MIG strategy) is refused, located,
instead of silently using one of the layouts. The layouts themselves are judged by ``rules.layouts`` like
``mig.layout``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries, join_pointer
from migbake.gpu.catalog import Catalog
from migbake.kubernetes.objectnames import collisions, kubeadm_template_name, nodepool_name
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.rules.layouts import model_of


def _mig_on(group: dict[str, Any], catalog: Catalog) -> bool:
    """Whether the entry has MIG on (an unknown model counts as on: its own rule speaks)."""
    model = model_of(group, catalog)
    return as_mapping(group.get("mig")).get("enabled", True) is not False and (model is None or model.has_mig)


def layout_names(data: object) -> list[str]:
    """Every name of the profile's ``mig.layouts``, in the order the entries first give them."""
    names: dict[str, None] = {}
    for _, group in gpu_entries(data):
        names.update(dict.fromkeys(str(n) for n in as_mapping(as_mapping(group.get("mig")).get("layouts"))))
    return list(names)


def _label(group: dict[str, Any], ptr: str) -> str:
    return f"{group.get('model')} ({ptr})"


@rule("layouts-with-layout", "error", "mig.layout and mig.layouts in one gpus entry")
def rule_layouts_with_layout(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """An entry gives mig.layout or mig.layouts, never both (MIG off or empty: ``named_mig_problems``)."""
    for ptr, group in gpu_entries(data):
        mig = as_mapping(group.get("mig"))
        if "layouts" in mig and "layout" in mig:
            yield loaded.problem(f"{ptr}/mig/layouts", "mig.layout and mig.layouts together: give one unnamed "
                                 "layout (layout) or several named ones (layouts), not both", "layouts-with-layout",
                                 key=True)


def named_mig_problems(loaded: LoadedProfile, ptr: str, group: dict[str, Any], catalog: Catalog) -> Iterator[Problem]:
    """The MIG-on/off problems of an entry with named layouts, for ``rules.general.rule_mig_enabled`` (which
    declares them): layouts with MIG off, and a named layout with no instances."""
    mig = as_mapping(group.get("mig"))
    if "layout" in mig:
        return  # rule_layouts_with_layout
    if mig.get("enabled", True) is False:
        yield loaded.problem(f"{ptr}/mig/layouts", "named layouts are given but mig.enabled is false; "
                             "mig-parted rejects MIG devices on a GPU with MIG off", "layout-without-mig",
                             key=True)
    elif _mig_on(group, catalog):
        for name, layout in as_mapping(mig.get("layouts")).items():
            if isinstance(layout, dict) and not layout:
                yield loaded.problem(join_pointer(f"{ptr}/mig/layouts", name), f"layout {name!r} has no "
                                     "instances: MIG is enabled with none, and the device plugin fails on "
                                     "such a GPU", "empty-layout")


@rule("layout-name-missing", "error", "mig.layouts: an entry with MIG on that lacks a name another entry gives "
      "(coverage)")
def rule_layout_coverage(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Every entry with MIG on names every layout name of the profile (the coverage matrix)."""
    names = layout_names(data)
    if not names:
        return
    first: dict[str, str] = {}  # name -> the entry that gives it first
    for ptr, group in gpu_entries(data):
        for n in as_mapping(as_mapping(group.get("mig")).get("layouts")):
            first.setdefault(str(n), _label(group, ptr))
    for ptr, group in gpu_entries(data):
        mig = as_mapping(group.get("mig"))
        if not _mig_on(group, catalog):
            continue  # MIG off: the same entry in every named config
        if "layouts" not in mig:
            yield loaded.problem(f"{ptr}/mig" if "mig" in group else ptr, f"{_label(group, ptr)} has no named "
                                 f"layouts while the profile names {', '.join(names)}: every entry with MIG on "
                                 "needs mig.layouts with every name (a node of any name has these GPUs too)",
                                 "layout-name-missing")
            continue
        have = {str(n) for n in as_mapping(mig.get("layouts"))}
        for name in (n for n in names if n not in have):
            yield loaded.problem(f"{ptr}/mig/layouts", f"{_label(group, ptr)} lacks layout {name!r}, which "
                                 f"{first[name]} names: every name needs a layout for every GPU model of the "
                                 "image, or a node of that name fails at apply", "layout-name-missing", key=True)


@rule("layouts-without-source", "error", "mig.layouts without restore.layout: the node cannot tell which name to "
      "apply")
@rule("layout-source-without-layouts", "error", "restore.layout without mig.layouts: there is no name to choose")
@rule("layout-name-reserved", "error", "a mig.layouts name that is the GPU Operator's default config (all-disabled)")
@rule("layout-default-unknown", "error", "restore.layout.default is not one of the mig.layouts names")
@rule("layouts-config-name", "error", "restore.config_name with mig.layouts: the config names are the layout names")
def rule_layout_choice(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Named layouts and restore.layout come together; the default is one of the names; config_name is theirs."""
    d = as_mapping(data)
    restore = as_mapping(d.get("restore"))
    choice = restore.get("layout")
    names = layout_names(data)
    # on Talos each layout name has a machine-config patch of its own (OUT/talos/): the patch chooses
    if names and choice is None and "talos" not in d:
        ptr = next(f"{p}/mig/layouts" for p, g in gpu_entries(data) if "layouts" in as_mapping(g.get("mig")))
        yield loaded.problem(ptr, "named layouts without restore.layout: the node cannot tell which to apply; "
                             "add restore: {layout: {from: [file], default: NAME}} (docs/layouts-at-boot.md)",
                             "layouts-without-source", key=True)
    if isinstance(choice, dict) and not names:
        yield loaded.problem("/restore/layout", "restore.layout without mig.layouts: there is no name to choose; "
                             "name the layouts (gpus[].mig.layouts) or remove restore.layout",
                             "layout-source-without-layouts", key=True)
    if "all-disabled" in names:
        ptr = next(f"{p}/mig/layouts" for p, g in gpu_entries(data)
                   if "all-disabled" in as_mapping(as_mapping(g.get("mig")).get("layouts")))
        yield loaded.problem(join_pointer(ptr, "all-disabled"), "the layout name 'all-disabled' is the GPU "
                             "Operator's default config (MIG off on every GPU, the label it puts on unlabelled "
                             "nodes); name this layout otherwise", "layout-name-reserved", key=True)
    default = as_mapping(choice).get("default")
    if names and isinstance(default, str) and default not in names:
        yield loaded.problem("/restore/layout/default", f"default {default!r} is not a layout name; allowed: "
                             f"{', '.join(names)}", "layout-default-unknown")
    if names and "config_name" in restore:
        yield loaded.problem("/restore/config_name", "restore.config_name with named layouts: the config names "
                             f"are the layout names ({', '.join(names)}); remove config_name",
                             "layouts-config-name", key=True)


@rule("layout-ec2-tag-key", "error", "restore.layout: the ec2-tag source without ec2_tag_key, or ec2_tag_key without "
      "the ec2-tag source")
def rule_layout_ec2_tag_key(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The ec2-tag source names its tag key (ec2_tag_key), and ec2_tag_key is given only with that source."""
    choice = as_mapping(as_mapping(as_mapping(data).get("restore")).get("layout"))
    sources = choice.get("from")
    sources = sources if isinstance(sources, list) else []
    if "ec2-tag" in sources and "ec2_tag_key" not in choice:
        yield loaded.problem(join_pointer("/restore/layout/from", sources.index("ec2-tag")), "source 'ec2-tag' "
                             "needs restore.layout.ec2_tag_key, the instance tag that holds the layout name: "
                             "instance metadata serves no tag key with '/', so nvidia.com/mig.config cannot be "
                             "it; name one such as mig-config (docs/layouts-at-boot.md)", "layout-ec2-tag-key")
    if "ec2_tag_key" in choice and isinstance(choice.get("from"), list) and "ec2-tag" not in sources:
        yield loaded.problem("/restore/layout/ec2_tag_key", "ec2_tag_key without the source 'ec2-tag' in "
                             "restore.layout.from: no source reads that tag; add ec2-tag or remove ec2_tag_key",
                             "layout-ec2-tag-key", key=True)


@rule("layouts-not-yet-supported", "error", "mig.layouts with an output that does not follow the names yet "
      "(Bottlerocket, mig_strategy single)")
def rule_layouts_outputs(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Named layouts only with the outputs that follow every name (not yet: Bottlerocket, single)."""
    if not layout_names(data):
        return
    d = as_mapping(data)
    k8s = as_mapping(d.get("kubernetes"))
    found = []
    if k8s.get("mig_strategy") == "single":
        found.append(("/kubernetes/mig_strategy", "kubernetes.mig_strategy single"))
    if as_mapping(d.get("bottlerocket")).get("required") is True:
        found.append(("/bottlerocket/required", "bottlerocket.required"))
    for ptr, what in found:
        yield loaded.problem(ptr, f"{what} with named layouts: its output does not follow the layout names yet "
                             "(one layout per image there); use mig.layout, or leave this out",
                             "layouts-not-yet-supported")


@rule("cluster-api-layout-source", "warning", "kubelet.layout kubeadm with mig.layouts whose restore.layout.from lacks "
      "file: a Cluster API node learns no name at its first boot")
def rule_cluster_api_source(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """OUT/cluster-api gives each pool its layout name through /etc/migbake/layout: the file source must be read."""
    d = as_mapping(data)
    kubelet = as_mapping(d.get("kubelet"))
    if not layout_names(data) or kubelet.get("layout") != "kubeadm" or kubelet.get("present", True) is not True:
        return
    sources = as_mapping(as_mapping(as_mapping(d.get("restore")).get("layout"))).get("from")
    if isinstance(sources, list) and "file" not in sources:
        yield loaded.problem("/restore/layout/from", "OUT/cluster-api's template of each layout name gives kubelet "
                             "the label nvidia.com/mig.config=NAME through kubeletExtraArgs, which kubeadm join writes "
                             "to /var/lib/kubelet/kubeadm-flags.env only after preKubeadmCommands started the restore, "
                             "so a Cluster API node learns its name only from /etc/migbake/layout, which each template "
                             "writes when the sources name file; add file to restore.layout.from "
                             "(docs/cluster-api.md)", "cluster-api-layout-source")


def asked_outputs(data: object) -> set[str] | None:
    """The output folders the profile's ``outputs:`` asks for (None: all of them)."""
    outputs = as_mapping(data).get("outputs")
    return {str(o) for o in outputs} if isinstance(outputs, list) else None


def _object_kinds(data: object) -> list[tuple[str, Callable[[str, str], str]]]:
    """The objects written per layout name for this profile, among the outputs it asks for: (kind, naming)."""
    d = as_mapping(data)
    kubelet = as_mapping(d.get("kubelet"))
    asked = asked_outputs(data)
    present = kubelet.get("present", True) is True
    kinds: list[tuple[str, Callable[[str, str], str]]] = []
    if present and kubelet.get("layout") == "eks-al2023" and (asked is None or "karpenter" in asked):
        kinds.append(("Karpenter NodePool", nodepool_name))
    if present and kubelet.get("layout") == "kubeadm" and (asked is None or "cluster-api" in asked):
        kinds.append(("Cluster API KubeadmConfigTemplate", kubeadm_template_name))
    return kinds


@rule("layout-object-name", "error", "two layout names give one Karpenter NodePool or Cluster API "
      "KubeadmConfigTemplate name")
def rule_layout_object_name(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each layout name's object has a name of its own (``kubernetes.objectnames`` makes each one a name the API
    server takes), for the outputs the profile asks for; located at the later layout's name in its first entry."""
    names = layout_names(data)
    profile = str(as_mapping(data).get("name", ""))
    if not names or not profile:
        return
    where: dict[str, str] = {}
    for ptr, group in gpu_entries(data):
        for n in as_mapping(as_mapping(group.get("mig")).get("layouts")):
            where.setdefault(str(n), join_pointer(f"{ptr}/mig/layouts", str(n)))
    for kind, naming in _object_kinds(data):
        made = {n: naming(profile, n) for n in names}  # each one a DNS subdomain of at most 63 characters
        for layout, earlier, name in collisions(made):
            yield loaded.problem(where[layout], f"layout names {earlier!r} and {layout!r} give one {kind} name "
                                 f"{name!r} (an object name is lower case, without '_'): rename one of them",
                                 "layout-object-name", key=True)


# the layout sources that read the network at boot: their code in restore.sh makes it larger than a Cluster API
# KubeadmConfigTemplate file takes even gzipped (files[].content maxLength 10240, tests/fixtures/crds; render.targets
# .clusterapi keeps the measure as a guard)
NETWORK_SOURCES = ("gce-metadata", "ec2-tag")


@rule("cluster-api-network-source", "error", "a network layout source with Cluster API among the outputs: restore.sh "
      "no longer fits a KubeadmConfigTemplate file")
def rule_cluster_api_network_source(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """OUT/cluster-api carries restore.sh as a KubeadmConfigTemplate file; with a network source it is too large."""
    d = as_mapping(data)
    kubelet = as_mapping(d.get("kubelet"))
    asked = asked_outputs(data)
    if kubelet.get("layout") != "kubeadm" or kubelet.get("present", True) is not True or (
            asked is not None and "cluster-api" not in asked):
        return
    sources = as_mapping(as_mapping(as_mapping(d.get("restore")).get("layout"))).get("from")
    for i, source in enumerate(sources if isinstance(sources, list) else []):
        if source in NETWORK_SOURCES:
            yield loaded.problem(f"/restore/layout/from/{i}", f"{source} reads the network at boot, and its code makes "
                                 "restore.sh larger than a Cluster API KubeadmConfigTemplate file takes even gzipped "
                                 "(10240 characters of base64), so OUT/cluster-api cannot carry it: read the layout "
                                 "name from file, kubelet-labels or credential, or leave cluster-api out of outputs:",
                                 "cluster-api-network-source")
