"""Import: an nvidia-mig-parted v1 config (e.g. ``nvidia-mig-parted export`` on a known-good node) -> a node
profile, or every reason it cannot become one.

mig-parted accepts things a node profile cannot say, and silently ignores some mistakes (a device-filter
without ``0x`` matches no GPU at all). What is imported is kept exactly: the config's name, each entry's
devices, MIG mode and devices, and its device-filter's PCI ids (``pci_device_ids``); an entry whose filter
names GPUs of several models becomes one profile entry per model. Whatever cannot be represented exactly
is refused, at the config's own line and column; the profile that results is then checked by the
normal validator.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from migbake import __version__
from migbake.document import emitter
from migbake.document.loader import LoadedProfile, join_pointer, load_profile_bytes
from migbake.document.patterns import whole
from migbake.exits import printable
from migbake.gpu.catalog import PACKAGED, PROFILE_NAME_RE, Catalog, CatalogChoice, GpuModel, gpu_instance_name
from migbake.gpu.devicefilter import read_filter_id
from migbake.migparted.yamlnames import go_yaml_reading, unquoted_config_key
from migbake.node.importlayouts import LAYOUT_SOURCE_NOTE, layouts_profile
from migbake.node.nvidiasmi import Capture
from migbake.problems import MigbakeError, Problem, has_errors, sort_problems
from migbake.rules.validate import check_bytes
from migbake.wording import plural

NVIDIA_VENDOR = "10DE"
ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")
_HEX8 = whole(r"^0[xX][0-9A-Fa-f]{8}$")
_CONFIG_NAME = whole(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_LAYOUT_NAME = whole(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")  # mig.layouts' names: label values
_GPUS_PTR = re.compile(r"/gpus/(\d+)")
_MALFORMED = "import-filter-malformed"


class ImportRefused(MigbakeError):
    """The config cannot become a node profile; ``problems`` says why, located in the config."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.problems = sort_problems(problems)
        super().__init__(f"{file}: cannot import ({plural(len(self.problems), 'problem')}), nothing written")

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: {self}"]


@dataclass(frozen=True)
class Imported:
    """The node-profile YAML made from a config, and the validator's warnings about it."""

    text: str
    warnings: list[Problem]


@dataclass(frozen=True)
class _Group:
    origin: str  # JSON Pointer of the config entry it comes from
    model: GpuModel
    devices: str | list[int]
    enabled: bool
    layout: dict[str, int]
    pci_ids: list[str]  # exactly the filter's ids of this model; empty: the entry has no filter


@dataclass
class _Reader:
    """Walks one config, collecting problems and the facts the header states."""

    loaded: LoadedProfile
    catalog: Catalog
    node_models: list[GpuModel]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # model key -> how it was found

    def bad(self, pointer: str, message: str, rule: str, *, key: bool = False) -> None:
        self.problems.append(self.loaded.problem(pointer, message, rule, key=key))

    def filter_models(self, value: object, ptr: str,
                      layout: dict[str, int]) -> tuple[list[tuple[GpuModel, list[str]]], set[str]] | None:
        """The models an entry's device-filter names, each with its ids, and all ids; None: no filter."""
        items = [value] if isinstance(value, (str, int)) else value
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            numbers = [s for s in items if isinstance(s, int)] if isinstance(items, list) else []
            hex_id = f"0x{numbers[0]:08X}" if numbers else ""
            hint = f" ({hex_id} unquoted is a YAML number: quote it, '{hex_id}')" if numbers else ""
            self.bad(ptr, f"device-filter must be a string or a list of strings{hint}", _MALFORMED)
            return [], set()
        if items in ([], [""]):
            return None
        models: dict[str, tuple[GpuModel, list[str]]] = {}
        ids: set[str] = set()
        for j, s in enumerate(items):
            here = ptr if isinstance(value, str) else f"{ptr}/{j}"
            pci = self.filter_id(s, here)
            if pci is None:
                continue
            model = self.model_of_id(pci, layout, here)
            if model is not None:
                ids.add(pci)
                self.sources.setdefault(model.key, f"device-filter {pci}")
                found = models.setdefault(model.key, (model, []))[1]
                if pci not in found:
                    found.append(pci)
        return list(models.values()), ids

    def filter_id(self, text: str, here: str) -> str | None:
        """The PCI id a filter string names, as mig-parted reads it; None (and a problem) if it names none."""
        fid = read_filter_id(text)
        if fid.subsystem:
            self.bad(here, f"{text!r} also matches a subsystem id: a node profile filters by device id "
                     "only, so this cannot be represented", "import-filter-subsystem")
        elif fid.pci is None or (text[:2].lower() == "0x" and not _HEX8.match(text)):
            read = (f"mig-parted reads it as {fid.pci}, " if fid.pci
                    else "mig-parted silently ignores a malformed filter, ")
            self.bad(here, f"{text!r} is not a PCI id mig-parted can read: write 0x and the 8 hex digits of "
                     f"device and vendor id (e.g. 0x233510DE); {read}so this entry would match no GPU at all",
                     _MALFORMED)
        elif fid.pci[-4:] != NVIDIA_VENDOR:
            self.bad(here, f"{text!r} is not an NVIDIA PCI id (mig-parted reads {fid.reading}: vendor "
                     f"0x{fid.pci[-4:]}, NVIDIA is 0x10DE)", "import-filter-unknown")
        else:
            if not _HEX8.match(text):
                self.notes.append(f"{here}: {text!r} is read by mig-parted as {fid.reading}; the profile "
                                  f"writes {fid.pci}.")
            return fid.pci
        return None

    def model_of_id(self, pci: str, layout: dict[str, int], here: str) -> GpuModel | None:
        """The catalog GPU with this id; of several (pre-production names), the one that has the layout."""
        found = self.catalog.all_by_pci_id(pci)
        if not found:
            self.bad(here, f"no GPU in migbake's catalog has PCI id {pci}, so its layout cannot be "
                     "checked (`migbake gpus` lists the known ids)", "import-filter-unknown")
            return None
        fits = [m for m in found if all(m.profile(gpu_instance_name(n) or n) for n in layout)]
        return (fits or found)[0]

    def layout(self, e: dict[str, Any], ptr: str, enabled: bool) -> dict[str, int]:
        raw = e.get("mig-devices")
        if raw is None:
            if enabled:
                self.bad(ptr, "mig-enabled is true but mig-devices is missing (mig-parted rejects this; "
                         "write mig-devices: {} for MIG on without instances)", "import-mig")
            return {}
        if not isinstance(raw, dict):
            self.bad(f"{ptr}/mig-devices", "mig-devices must map profile names to counts", "import-mig")
            return {}
        out: dict[str, int] = {}
        zeros = 0
        for name, count in raw.items():
            here = join_pointer(f"{ptr}/mig-devices", name)
            if not PROFILE_NAME_RE.match(name):
                self.bad(here, f"{name!r} is not a MIG profile name (like 1g.18gb)", "import-mig", key=True)
            elif not isinstance(count, int) or isinstance(count, bool) or count < 0:
                self.bad(here, f"count {count!r} of {name!r} must be a whole number >= 0", "import-mig")
            elif count == 0:
                zeros += 1
                self.notes.append(f"{here}: count 0 left out (mig-parted would re-create it at every boot).")
            else:
                out[name] = count
        if raw and zeros == len(raw):
            self.bad(f"{ptr}/mig-devices", "all counts are 0 (mig-parted rejects this)", "import-mig")
        if not enabled and out:
            self.bad(f"{ptr}/mig-devices", "mig-enabled is false but MIG devices are listed (mig-parted "
                     "rejects this entry)", "import-mig")
        return out

    def devices(self, e: dict[str, Any], ptr: str) -> str | list[int]:
        d = e.get("devices")
        if d == "all":
            return "all"
        indices = isinstance(d, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in d)
        if indices and d and min(d) >= 0 and len(set(d)) == len(d):
            return list(d)
        self.bad(f"{ptr}/devices", f"devices {d!r}: expected all, or a list of distinct GPU indices",
                 "import-devices")
        return []

    def entry(self, e: object, ptr: str) -> tuple[list[_Group], set[str] | None]:
        if not isinstance(e, dict):
            self.bad(ptr, "an entry must be a mapping (devices, mig-enabled, ...)", "import-entry")
            return [], set()
        for k in e:
            if k not in ENTRY_KEYS:
                self.bad(join_pointer(ptr, k), f"unexpected key {k!r} (mig-parted allows "
                         f"{', '.join(ENTRY_KEYS)})", "import-entry", key=True)
        for k in ("devices", "mig-enabled"):
            if k not in e:
                self.bad(ptr, f"missing required key {k!r}", "import-entry")
        enabled = e.get("mig-enabled")
        if "mig-enabled" in e and not isinstance(enabled, bool):
            self.bad(f"{ptr}/mig-enabled", f"mig-enabled {enabled!r} must be true or false", "import-entry")
        on = enabled is True
        devices, layout = self.devices(e, ptr), self.layout(e, ptr, on)
        found = None
        if "device-filter" in e:
            found = self.filter_models(e["device-filter"], f"{ptr}/device-filter", layout)
        if found is None:
            if not self.node_models:
                self.bad(ptr, "no device-filter, so the entry applies to any GPU, and nothing says which "
                         "model: pass --model ID or --nvidia-smi-xml FILE", "import-model")
            return [_Group(ptr, m, devices, on, dict(layout), []) for m in self.node_models], None
        # a dict of its own per group: one shared dict would make PyYAML write an anchor and an alias
        return [_Group(ptr, m, devices, on, dict(layout), ids) for m, ids in found[0]], found[1]


def _select(r: _Reader, doc: dict[str, Any], config: str | None) -> list[tuple[str, list[Any]]] | None:
    """The configs to import: ``config``, the only one, or (several, no ``config``) every one, as named layouts."""
    for k in doc:
        if k not in ("version", "mig-configs"):
            r.bad(join_pointer("", k), f"unexpected key {k!r}: mig-parted allows only version and "
                  "mig-configs", "import-key", key=True)
    if doc.get("version") != "v1":
        what = "missing version" if "version" not in doc else f"unknown version {doc['version']!r}"
        r.bad("/version", f"{what}: nvidia-mig-parted configs are version: v1", "import-version")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        r.bad("/mig-configs", "mig-configs must map config names to lists of entries", "import-config")
        return None
    names = ", ".join(map(str, configs))  # the loader has refused keys that are not strings
    keys = [str(k) for k in configs] if config is None else [config]
    if keys[0] not in configs:
        r.bad("/mig-configs", f"no config {keys[0]!r} here (the file has {names})", "import-config")
        return None
    out = []
    for key in keys:
        here = join_pointer("/mig-configs", key)
        if not _CONFIG_NAME.match(key):
            r.bad(here, f"the config name {key!r} cannot be a profile's restore.config_name (letters, digits and "
                  "_ . -, starting with a letter or digit, at most 63): rename it in the file, then import it; "
                  "migbake never renames a config", "import-config-name", key=True)
            continue
        if len(keys) > 1 and not _LAYOUT_NAME.match(key):
            r.bad(here, f"the config name {key!r} cannot be a mig.layouts name (a Kubernetes label value: it ends "
                  "with a letter or digit): rename it in the file, or import another config alone with "
                  "--config NAME", "import-config-name", key=True)
            continue
        reading = go_yaml_reading(key) if unquoted_config_key(r.loaded.text, key) else None
        if reading:
            r.bad(here, f"mig-parted's YAML (go-yaml v2, YAML 1.1) reads the unquoted config name {key} as "
                  f"{reading}, not as the name {key!r}: nvidia-mig-parted cannot be sure to select it with -c {key}; "
                  f"quote it in the file ('{key}'), then import it", "import-config-name", key=True)
            continue
        entries = configs[key]
        if not isinstance(entries, list) or not entries:
            r.bad(here, "a config must be a non-empty list of entries", "import-config")
            continue
        out.append((key, entries))
    return out if len(out) == len(keys) else None


def _check_capture(r: _Reader, capture: Capture, matchers: list[tuple[str, str | list[int], set[str] | None]],
                   config: str) -> None:
    """Every GPU of the captured node is matched by exactly one entry, as mig-parted matches them."""
    for gpu in capture.gpus:
        hits = [ptr for ptr, devices, ids in matchers
                if (ids is None or gpu.pci_device_id in ids) and (devices == "all" or gpu.index in devices)]
        what = f"GPU {gpu.index} of {PurePath(capture.file).name} ({gpu.name}, {gpu.pci_device_id})"
        if not hits:
            r.bad(join_pointer("/mig-configs", config), f"{what} matches no entry: on that node assert "
                  "fails ('not all GPUs match the specified config')", "import-gpu-uncovered")
        elif len(hits) > 1:
            r.bad(hits[-1], f"{what} is matched by {' and '.join(hits)}: mig-parted applies both, the "
                  "last one winning", "import-overlap")


def _profile_data(groups: list[_Group], name: str, config: str, gpu_count: int | None,
                  any_filter: bool) -> dict[str, Any]:
    keys = list(dict.fromkeys(g.model.key for g in groups))
    default = re.sub(r"-+$", "", f"imported-{'-'.join(keys)}"[:63])
    data: dict[str, Any] = {"version": 1, "name": name or default}
    if gpu_count is not None:
        data["gpu_count"] = gpu_count
    data["gpus"] = [{"model": g.model.key, "devices": g.devices,
                     **({"pci_device_ids": list(g.pci_ids)} if g.pci_ids else {}),
                     "mig": {"layout": dict(g.layout)} if g.enabled else {"enabled": False}} for g in groups]
    if any_filter:
        data["device_filter"] = "always"  # keep the filter: on other hardware, fail at assert
    if config != "current":
        data["restore"] = {"config_name": config}
    return data


def _relocate(r: _Reader, groups: list[_Group], problems: list[Problem]) -> list[Problem]:
    """The validator's problems about the made profile, told at the config entries they come from."""
    def origin(m: re.Match[str]) -> str:
        i = int(m.group(1))
        return groups[i].origin if i < len(groups) else m.group(0)

    out = []
    for p in problems:
        m = _GPUS_PTR.match(p.pointer)
        ptr = origin(m) if m else ""
        line, col = r.loaded.where(ptr)
        text = f"{_GPUS_PTR.sub(origin, p.message)} (as {p.pointer or '/'} of the imported profile)"
        out.append(Problem(r.loaded.file, line, col, ptr, text, p.rule, p.severity))
    return out


def import_config(data: bytes, file: str, *, config: str | None = None, model: GpuModel | None = None,
                  capture: Capture | None = None, name: str = "", catalog: CatalogChoice = PACKAGED) -> Imported:
    """The node profile (YAML text) for one config of the mig-parted file ``data`` (``file`` names it).

    ``model`` or ``capture`` (``nvidia-smi -q -x`` of the node) say which GPU model entries without a
    device-filter are for; a capture also gives gpu_count and must be covered entry by entry. GPU models
    are looked up in ``catalog``, and the imported profile is validated with it.
    """
    cat = catalog.load()
    loaded, problems = load_profile_bytes(data, file)
    if has_errors(problems) and not any(p.rule in ("empty-file", "not-a-mapping") for p in problems):
        raise ImportRefused(file, problems)
    if not isinstance(loaded.data, dict):
        raise ImportRefused(file, [Problem(file, 1, 1, "", "not an nvidia-mig-parted config: expected a YAML "
                                     "mapping with version: v1 and mig-configs", "import-config")])
    node_models: list[GpuModel] = [model] if model else []
    r = _Reader(loaded, cat, node_models)
    if model:
        r.sources[model.key] = "--model"
    for gpu in capture.gpus if capture else ():
        found = cat.by_pci_id(gpu.pci_device_id)
        if found is None:
            where = PurePath(capture.file).name if capture else ""
            r.bad("", f"GPU {gpu.index} of {where} ({gpu.name}, {gpu.pci_device_id}) is no model in "
                  "migbake's catalog", "import-model")
        elif found not in node_models:
            node_models.append(found)
            r.sources.setdefault(found.key, f"nvidia-smi -q -x: {gpu.name}, {gpu.pci_device_id}")
    selected = _select(r, loaded.data, config)
    if selected is None:
        raise ImportRefused(file, r.problems)
    read = [(cfg, *_read_config(r, cfg, entries, model)) for cfg, entries in selected]
    if capture and not r.problems:
        for cfg, _, matchers in read:
            _check_capture(r, capture, matchers, cfg)
    if r.problems:
        raise ImportRefused(file, r.problems)
    cfg, groups, matchers = read[0]
    any_filter = any(ids is not None for _, _, ids in matchers)
    gpu_count = len(capture.gpus) if capture else None
    if len(read) == 1:
        profile = _profile_data(groups, name, cfg, gpu_count, any_filter)
    else:
        profile = layouts_profile(r.loaded, [(c, g) for c, g, _ in read], name, gpu_count, any_filter, r.problems)
        if r.problems:
            raise ImportRefused(file, r.problems)
    text = _text(profile, r, file, data, [c for c, _, _ in read])
    checked = check_bytes(text.encode("utf-8"), "<imported profile>", catalog)
    if has_errors(checked.problems):
        raise ImportRefused(file, _relocate(r, groups, checked.problems))
    return Imported(text, _relocate(r, groups, checked.problems))


def _read_config(r: _Reader, cfg: str, entries: list[Any], model: GpuModel | None
                 ) -> tuple[list[_Group], list[tuple[str, str | list[int], set[str] | None]]]:
    """One config's profile entries, and what each of its entries matches (for the capture)."""
    groups: list[_Group] = []
    matchers: list[tuple[str, str | list[int], set[str] | None]] = []
    for i, e in enumerate(entries):
        ptr = f"{join_pointer('/mig-configs', cfg)}/{i}"
        made, ids = r.entry(e, ptr)
        groups += made
        if made:
            matchers.append((ptr, made[0].devices, ids))
    filtered = [ptr for ptr, _, ids in matchers if ids is not None]
    if filtered and len(filtered) < len(matchers):
        unfiltered = next(ptr for ptr, _, ids in matchers if ids is None)
        r.bad(unfiltered, f"this entry has no device-filter but {filtered[0]} has one: a profile writes a "
              "device-filter on every entry or on none, so this cannot be represented exactly",
              "import-filter-mixed")
    if model and all(ids is not None for _, _, ids in matchers) and model not in [g.model for g in groups]:
        r.bad("", f"--model {model.key}: every entry has a device-filter, none for {model.key}",
              "import-model")
    return groups, matchers


def _text(profile: dict[str, Any], r: _Reader, file: str, data: bytes, configs: list[str]) -> str:
    source = "standard input" if file in ("-", "<stdin>") else PurePath(file).name
    sha = hashlib.sha256(data).hexdigest()[:16]
    which = (f"config {configs[0]!r}" if len(configs) == 1 else
             f"configs {', '.join(map(repr, configs))} as named layouts (mig.layouts)")
    lines = [f"Imported by migbake {__version__} from {source} (sha256 {sha}), {which}.",
             *([LAYOUT_SOURCE_NOTE] if len(configs) > 1 else []),
             *(f"GPU model {k}: from {how}." for k, how in r.sources.items() if k in
               {g["model"] for g in profile["gpus"]}),
             *r.notes,
             "Review it, then: migbake validate PROFILE && migbake generate PROFILE -o OUT"]
    body = emitter.dump(profile, flow=None, width=100)  # never an alias: a node profile refuses them
    # each header line stays one comment line: a file name with a line break cannot add a key to the profile
    return "".join(f"# {printable(line)}\n" for line in lines) + str(body)
