"""Rules on the ``slurm`` section: a node name slurmd reads as the hostlist it says, and device lines it can list.

``slurm.node_name`` becomes ``NodeName=`` in slurm.conf, which slurmd expands as a hostlist
(SchedMD/slurm:src/common/hostlist.c@slurm-22-05-8-1, ``_hostlist_create_bracketed``, ``_next_tok``,
``_push_range_list``, ``_parse_single_range``; doc/html/slurm.conf.shtml, NodeName: "[1-4,8]"):

- names are separated by commas outside brackets (consecutive commas are skipped);
- a name is text with bracket groups; the last ``]`` must end the name (``gpu[1-2]x`` is refused),
  earlier groups repeat the text around them (``rack[1-2]-gpu[01-04]``); a ``[`` without ``]`` is
  read as a host named after the text before it with a ``]`` added (``gpu-[01-04`` is host ``gpu-]``);
- in brackets: comma-separated decimal numbers or ranges ``low-high`` with low <= high (``x-y``,
  ``09-01`` are refused), at most 65536 hosts a range (``MAX_RANGE``); the low number's digits give
  the width (``01-04``: gpu-01 ... gpu-04);
- every node once: slurmd stops on a name listed twice ("Duplicated NodeName").

migbake accepts the part of this grammar that means what it says: no nested or stray brackets, at
most 65536 nodes in all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import product

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries, join_pointer
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.rules.declare import rule

MAX_HOSTS = 64 * 1024  # hostlist.c MAX_RANGE: "max host range: anything larger will be assumed to be an error"
_ULONG_MAX = 2**64 - 1  # strtoul on a 64-bit slurmd
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z")
_FORM = ("allowed: host names (letters, digits, _ . -) separated by commas, each with bracket groups of "
         "numbers and ranges low-high ending it, such as gpu-[01-16] or gpu-[01-04,08],cpu-01")

Group = tuple[tuple[int, int, int], ...]  # a bracket group: (low, high, width) per range
Name = list[str | Group]  # one name of a hostlist: literal text and bracket groups, in order


class HostlistError(ValueError):
    """Why a text is not a hostlist slurmd reads as it is written."""


def _ranges(text: str) -> Group:
    """``01-04,08`` -> ((1, 4, 2), (8, 8, 2)): low, high, width, as ``_parse_single_range`` reads them."""
    out = []
    for item in text.split(","):
        m = _RANGE.match(item)
        if m is None:
            raise HostlistError(f"[{text}]: {item!r} is not a number or a range low-high of numbers "
                                "(slurmd: 'Invalid range')")
        low, high = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if high > _ULONG_MAX:
            raise HostlistError(f"[{text}]: {item!r} has a number slurmd cannot hold")
        if low > high:
            raise HostlistError(f"[{text}]: {item!r} counts down; slurmd wants low-high "
                                f"({m[2]}-{m[1]}; slurmd: 'Invalid range')")
        if high - low + 1 > MAX_HOSTS:
            raise HostlistError(f"[{text}]: {item!r} has more than {MAX_HOSTS} hosts (slurmd: 'Too many hosts "
                                "in range')")
        out.append((low, high, len(m[1])))
    return tuple(out)


def _name(text: str) -> Name:
    """One name of the list (its brackets already known to pair up)."""
    if not text[0].isalnum():
        raise HostlistError(f"{text!r}: a name starts with a letter or digit")
    if "]" in text and not text.endswith("]"):
        raise HostlistError(f"{text!r}: text after the last ']' ({text.rsplit(']', 1)[1]!r}); the last bracket "
                            "group must end a name (rack[1-2]-gpu[01-04] is fine, gpu[1-2]-a is not)")
    pieces = re.split(r"(\[[^\]]*\])", text)
    return [_ranges(p[1:-1]) if i % 2 else p for i, p in enumerate(pieces) if p]


def _bracket_problem(text: str) -> str | None:
    """A ``[`` inside brackets, a ``]`` without ``[``, or a ``[`` never closed."""
    depth = 0
    for i, c in enumerate(text):
        if c == "[" and depth:
            return f"the '[' at character {i + 1} is inside another bracket group"
        if c == "]" and not depth:
            return f"the ']' at character {i + 1} has no '[' before it"
        depth += (c == "[") - (c == "]")
    if depth:
        open_at = text.rindex("[")
        return (f"the '[' at character {open_at + 1} has no ']' (slurmd reads it as the one host "
                f"{text[:open_at] + ']'!r})")
    return None


def parse_hostlist(text: str) -> list[Name]:
    """The names of a hostlist expression; HostlistError if slurmd would refuse it or read other nodes."""
    why = _bracket_problem(text)
    if why is not None:
        raise HostlistError(why)
    # commas outside brackets separate names; consecutive ones are skipped (_next_tok)
    names = [_name(t) for t in re.split(r",(?![^\[]*\])", text) if t]
    if not names:
        raise HostlistError("no host name")
    total = 0
    for parts in names:
        n = 1
        for part in parts:
            n *= 1 if isinstance(part, str) else sum(high - low + 1 for low, high, _ in part)
        total += n
        if total > MAX_HOSTS:
            raise HostlistError(f"more than {MAX_HOSTS} nodes")
    return names


def expand(names: list[Name]) -> Iterator[str]:
    """Every host of a parsed hostlist, in slurmd's order (``gpu-[01-02]`` -> gpu-01, gpu-02)."""
    for parts in names:
        choices = [[p] if isinstance(p, str) else [f"{n:0{w}d}" for low, high, w in p for n in range(low, high + 1)]
                   for p in parts]
        for pick in product(*choices):
            yield "".join(pick)


def hosts(text: str) -> list[str]:
    """Every node a valid hostlist names (HostlistError if it is not one)."""
    return list(expand(parse_hostlist(text)))


def hostlist_problem(text: str) -> str | None:
    """Why slurmd would refuse ``text`` as NodeName= or read other nodes than it says; None when it is fine."""
    try:
        seen: set[str] = set()
        for host in expand(parse_hostlist(text)):
            if host in seen:
                raise HostlistError(f"{host!r} is listed twice (slurmd: 'Duplicated NodeName')")
            seen.add(host)
    except HostlistError as e:
        return str(e)
    return None


_NAME_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.,\[\]-]*\Z")  # the schema's pattern: it reports the rest


def _layout_names(data: object) -> list[str]:
    """The layout names of the raw profile's entries (mig.layouts), in first-seen order."""
    names: dict[str, None] = {}
    for _, entry in gpu_entries(data):
        layouts = as_mapping(as_mapping(entry.get("mig")).get("layouts"))
        names.update(dict.fromkeys(str(k) for k in layouts))
    return list(names)


def _hostlist_problems(loaded: LoadedProfile, pointer: str, name: object) -> Iterator[Problem]:
    if not isinstance(name, str) or len(name) > 200 or not _NAME_SHAPE.match(name):
        return
    why = hostlist_problem(name)
    if why is not None:
        yield loaded.problem(pointer, f"{name!r} is not a Slurm hostlist slurmd reads as written: "
                             f"{why}; {_FORM} (SchedMD/slurm src/common/hostlist.c)", "slurm-node-name")


@rule("slurm-node-name", "error",
      "slurm.node_name is not a hostlist slurmd reads as written ([01-04, [x-y], [09-01], twice), or a mapping that "
      "does not name the layouts")
def rule_slurm_node_name(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """slurm.node_name is a hostlist slurmd expands to the nodes it says (no stray bracket, no range x-y or 9-1);
    as a mapping, it names each layout of mig.layouts, and only those."""
    name = as_mapping(as_mapping(data).get("slurm")).get("node_name")
    if not isinstance(name, dict):
        yield from _hostlist_problems(loaded, "/slurm/node_name", name)
        return
    layouts = _layout_names(data)
    if not layouts:
        yield loaded.problem("/slurm/node_name", "slurm.node_name is a mapping, but the profile has no named "
                             "layouts (mig.layouts): allowed here is one host name or hostlist, such as "
                             "gpu-[01-16]", "slurm-node-name")
        return
    for key, value in name.items():
        pointer = join_pointer("/slurm/node_name", str(key))
        if key not in layouts:
            yield loaded.problem(pointer, f"{key!r} is not a layout name of mig.layouts; allowed: "
                                 f"{', '.join(layouts)}", "slurm-node-name")
        yield from _hostlist_problems(loaded, pointer, value)
    missing = [n for n in layouts if n not in name]
    if missing:
        yield loaded.problem("/slurm/node_name", f"slurm.node_name gives no node name for layout "
                             f"{', '.join(missing)}: as a mapping it names every layout of mig.layouts "
                             f"({', '.join(layouts)}), each with the hosts of the pool that applies it",
                             "slurm-node-name")


def _writes_slurm(data: dict[str, object]) -> bool:
    """A slurm section, or slurmd among the consumers: generate writes the slurm/ files."""
    consumers = data.get("consumers")
    units = [as_mapping(c).get("unit") for c in consumers] if isinstance(consumers, list) else []
    return "slurm" in data or any(u == "slurmd.service" or (isinstance(u, str) and u.startswith("slurmd@"))
                                  for u in units)


@rule("slurm-gres-untyped", "warning", "slurm.gres_types typed, but a GPU with MIG off makes its node's Gres= untyped")
def rule_slurm_gres_untyped(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """A GPU with MIG off has no type migbake can write: its node's Gres= is untyped although types are asked for."""
    d = as_mapping(data)
    if not _writes_slurm(d) or as_mapping(d.get("slurm")).get("gres_types", "typed") != "typed":
        return
    for pointer, entry in gpu_entries(data):
        if as_mapping(entry.get("mig")).get("enabled") is False:
            # SchedMD/slurm@slurm-25-11-0-1:src/plugins/gpu/nvml/gpu_nvml.c (_get_system_gpu_list_nvml): a GPU with
            # MIG off is typed by its whole NVML name, nvidia_h100_80gb_hbm3 or nvidia_h100_pcie; only MIG devices
            # get the profile name
            yield loaded.problem(f"{pointer}/mig/enabled", f"slurm.gres_types is typed, but this "
                                 f"{entry.get('model')!r} GPU has MIG off: slurmd names a whole GPU after its board "
                                 "(nvidia_h100_80gb_hbm3, nvidia_h100_pcie, ...), which differs between the boards "
                                 "of a model, so slurm.conf.node gives its node untyped counts (gpu:N) and jobs "
                                 "cannot ask for a MIG size there; allowed: MIG on for every GPU of a Slurm node, "
                                 "or slurm.gres_types: untyped to ask for untyped counts", "slurm-gres-untyped")


@rule("slurm-gpu-count", "warning", "slurm.autodetect false without gpu_count: no device lines for 'devices: all'")
def rule_slurm_gpu_count(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """slurm.autodetect false lists every device: without gpu_count a 'devices: all' entry gets no lines."""
    d = as_mapping(data)
    if as_mapping(d.get("slurm")).get("autodetect") is not False or "gpu_count" in d:
        return
    if any(g.get("devices", "all") == "all" for _, g in gpu_entries(data)):
        yield loaded.problem("/slurm/autodetect", "slurm.autodetect is false but gpu_count is not set: migbake "
                             "cannot tell how many GPUs 'devices: all' covers, so slurm/gres.conf lists no "
                             "devices for them and slurm.conf.node has no Gres= (slurmd finds no GPU); set "
                             "gpu_count to the node's number of GPUs, or keep AutoDetect=nvml",
                             "slurm-gpu-count")
