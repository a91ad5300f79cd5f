"""Rules on the node paths a profile names: where each file migbake writes may live, and no two paths clash.

A path in the profile becomes a file root writes on every node (the mig-parted config, the metrics file,
the nvidia-mig-parted binary Ignition downloads) or a program the restore and kubelet run (the tools,
``kubelet.binary``). Each written path has a small allow-list of folders of its own (``ALLOWED``), so that
no profile can aim one at ``/etc/passwd``, ``/etc/sudoers``, ``/etc/ld.so.preload``, an
``authorized_keys``, a systemd/udev/tmpfiles/cloud-init/nodeadm configuration folder, the packaged
mig-manager's scripts or a tool: ``output-path-not-allowed``. Any two paths the profile names (or that
migbake writes beside them: restore.sh, the reboot marker, the unit files) that are one file, or a file
where the other needs a folder, are ``output-path-clash``. Paths are normalised first
(``profile.nodefacts.normal_path``), as the kernel reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.document.patterns import whole
from migbake.gpu.catalog import Catalog
from migbake.kubernetes.kubelet import DEFAULT_BINARY, NODEADM_DROPIN
from migbake.problems import Problem
from migbake.profile.nodefacts import (
    REBOOT_MARKER,
    RESTORE_SCRIPT,
    SYSTEMD_TREES,
    immutable_writable,
    in_systemd_tree,
    normal_path,
)
from migbake.rules.declare import rule

MANAGED_CONFIG = "/etc/nvidia-mig-manager/config.yaml"
DEFAULT_CONFIG = "/etc/nvidia-mig/config.yaml"
# the schema's absolute path (its "pattern"): a path of another shape is the schema's to report
ABSOLUTE = whole(r"^/(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9._+/-]*[A-Za-z0-9._+-]$")
FETCHED_NAME = "nvidia-mig-parted"  # the downloaded binary's file name starts with this
_CHECKED_FOR_SYSTEMD = ("/restore/config_path", "/restore/metrics_textfile")  # config-path-in-systemd says it
# Where each written path may live: folders of migbake's own, or (metrics) the textfile collector's. Not
# /etc/nvidia-mig-manager: the packaged nvidia-mig-manager owns it and runs its service.sh, utils.sh,
# hooks.sh from there as root (NVIDIA/mig-parted:deployments/systemd/nvidia-mig-manager.spec@v0.15.0,
# Source5-Source10). node_exporter has no default textfile folder (--collector.textfile.directory);
# /var/lib/node_exporter/textfile_collector is the one its documentation and most installs use,
# /var/lib/prometheus/node-exporter Debian's prometheus-node-exporter package's.
ALLOWED: dict[str, tuple[str, ...]] = {
    "/restore/config_path": ("/etc/nvidia-mig", "/etc/migbake"),
    "/restore/metrics_textfile": ("/var/lib/node_exporter", "/var/lib/prometheus/node-exporter", "/var/lib/migbake"),
    # Flatcar's place for binaries (/opt/bin), writable on Fedora CoreOS too (profile.nodefacts)
    "/tools/nvidia_mig_parted": ("/opt",),
}
WHAT = {"/restore/config_path": "the mig-parted config", "/restore/metrics_textfile": "the metrics file",
        "/tools/nvidia_mig_parted": "the nvidia-mig-parted binary Ignition downloads (tools.nvidia_mig_parted_url)"}


def inside(path: str, folders: tuple[str, ...]) -> bool:
    """Whether the normalised ``path`` is strictly inside one of ``folders``."""
    return any(path.startswith(folder + "/") for folder in folders)


def allowed_text(pointer: str) -> str:
    """The allow-list of ``pointer``'s path, in words (for messages and docs)."""
    folders = ", ".join(f + "/" for f in ALLOWED[pointer])
    if pointer == "/tools/nvidia_mig_parted":
        return f"a file named {FETCHED_NAME}* inside {folders} (such as /opt/bin/{FETCHED_NAME})"
    return f"a file inside {folders}"


def downloads_mig_parted(d: dict[str, Any]) -> bool:
    """Whether the Butane configs write tools.nvidia_mig_parted (a URL, and a path Ignition can write)."""
    tools = as_mapping(d.get("tools"))
    path = tools.get("nvidia_mig_parted", "/usr/bin/nvidia-mig-parted")
    return isinstance(tools.get("nvidia_mig_parted_url"), str) and isinstance(path, str) and immutable_writable(path)


def _given(d: dict[str, Any], pointer: str) -> str | None:
    """The raw string the profile sets at ``/section/key`` (None when absent or not a string)."""
    _, section, key = pointer.split("/")
    value = as_mapping(d.get(section)).get(key)
    return value if isinstance(value, str) and value else None


def _unit_files(d: dict[str, Any]) -> dict[str, str]:
    """The unit files and drop-ins migbake writes, by what they are."""
    restore = as_mapping(d.get("restore")).get("unit", "nvidia-mig-restore.service")
    kubelet = as_mapping(d.get("kubelet"))
    out = {"the restore unit": f"/etc/systemd/system/{restore}"}
    if kubelet.get("present", True) is True:
        out["kubelet's drop-in"] = f"/etc/systemd/system/{kubelet.get('unit', 'kubelet.service')}.d/20-mig-restore.conf"
    if kubelet.get("layout") == "eks-al2023":
        out["nodeadm's drop-in"] = NODEADM_DROPIN
    consumers = d.get("consumers")
    for i, c in enumerate(consumers if isinstance(consumers, list) else []):
        unit = as_mapping(c).get("unit")
        if isinstance(unit, str):
            out[f"consumers/{i}'s drop-in"] = f"/etc/systemd/system/{unit}.d/20-mig-restore.conf"
    return {k: v for k, v in out.items() if isinstance(v, str)}


def named_paths(d: dict[str, Any]) -> list[tuple[str, str, bool, bool]]:
    """Every node path of the profile: (pointer, or a fixed one's name; normal path; written; set by the profile)."""
    restore = as_mapping(d.get("restore"))
    tools = as_mapping(d.get("tools"))
    kubelet = as_mapping(d.get("kubelet"))
    out: list[tuple[str, object, bool]] = [("/restore/config_path", restore.get("config_path", DEFAULT_CONFIG), True)]
    if _given(d, "/restore/metrics_textfile"):
        out.append(("/restore/metrics_textfile", restore["metrics_textfile"], True))
    out += [("restore.sh", RESTORE_SCRIPT, True), ("the reboot marker", REBOOT_MARKER, True)]
    if d.get("driver") == "container":  # the watcher's script and the file that marks the node as migbake's
        out += [("driver-watch.sh", "/etc/nvidia-mig/driver-watch.sh", True), ("the managed file",
                                                                            "/etc/migbake/managed", True)]
    out += [(name, path, True) for name, path in _unit_files(d).items()]
    out += [("/tools/nvidia_smi", tools.get("nvidia_smi", "/usr/bin/nvidia-smi"), False),
            ("/tools/nvidia_mig_parted", tools.get("nvidia_mig_parted", "/usr/bin/nvidia-mig-parted"),
             downloads_mig_parted(d))]
    binary = kubelet.get("binary", DEFAULT_BINARY.get(str(kubelet.get("layout", "generic")), ""))
    if kubelet.get("present", True) is True and binary:
        out.append(("/kubelet/binary", binary, False))
    return [(where, normal_path(path), written, where.startswith("/") and _given(d, where) is not None)
            for where, path, written in out if isinstance(path, str)]


@rule("managed-config-path", "error", "restore.config_path is the GPU Operator's managed config file")
@rule("config-path-in-systemd", "error", "restore.config_path inside a systemd unit directory")
@rule("output-path-clash", "error",
      "two paths of the node at one file (two outputs, or a tool and an output), or a file where another needs a "
      "folder")
def rule_paths(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The config is outside systemd's unit trees and is not the packaged manager's; no two outputs share a path."""
    d = as_mapping(data)
    raw = as_mapping(d.get("restore")).get("config_path")
    if isinstance(raw, str):
        path = normal_path(raw)
        said = repr(raw) if path == raw else f"{raw!r} (that is {path!r})"
        if in_systemd_tree(path):
            yield loaded.problem("/restore/config_path", f"{said} is inside systemd's unit folders, where the "
                                 "restore unit and the kubelet drop-in go; keep the mig-parted config elsewhere, "
                                 "such as /etc/nvidia-mig/config.yaml", "config-path-in-systemd")
        if path == MANAGED_CONFIG:
            yield loaded.problem("/restore/config_path", f"{said}: {MANAGED_CONFIG} belongs to the packaged "
                                 "nvidia-mig-manager, which regenerates it from the hardware at boot; use another "
                                 "path such as /etc/nvidia-mig/config.yaml", "managed-config-path")
    metrics = as_mapping(d.get("restore")).get("metrics_textfile")
    if isinstance(metrics, str) and metrics and in_systemd_tree(metrics):
        yield loaded.problem("/restore/metrics_textfile", f"{metrics!r} is inside systemd's unit folders "
                             f"({', '.join(SYSTEMD_TREES)}); write the metrics elsewhere", "config-path-in-systemd")
    yield from _clashes(loaded, named_paths(d))


def _related(paths: list[str]) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j`` in that order, of ``paths`` that are one path or one inside the other (the
    other's ``path + "/"`` starts it): each path's folders looked up, not every pair compared."""
    at: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        at.setdefault(path, []).append(i)
    pairs: set[tuple[int, int]] = set()
    for j, path in enumerate(paths):
        heads, k = [path], path.find("/")
        while k >= 0:  # path[:k] + "/" starts path: a folder of it (the empty text for a leading "/")
            heads.append(path[:k])
            k = path.find("/", k + 1)
        pairs.update((min(i, j), max(i, j)) for head in heads for i in at.get(head, ()) if i != j)
    return sorted(pairs)


def _clashes(loaded: LoadedProfile, paths: list[tuple[str, str, bool, bool]]) -> Iterator[Problem]:
    """Two paths that are one file, or a file where the other needs a folder, when at least one is written."""
    for i, j in _related([path for _, path, _, _ in paths]):
        first, first_path, first_written, first_set = paths[i]
        second, second_path, second_written, second_set = paths[j]
        same = first_path == second_path
        if not (same or first_written or second_written) or not (first_set or second_set):
            continue
        pairs = ((first, first_path), (second, second_path))
        if any(in_systemd_tree(p) and w in _CHECKED_FOR_SYSTEMD for w, p in pairs):
            continue  # config-path-in-systemd says it
        where, path, other, other_path = first, first_path, second, second_path
        if not first_set:  # report it where the profile set it
            where, path, other, other_path = second, second_path, first, first_path
        how = "is also" if same else "cannot be both a file and a folder with"
        why = ("migbake writes both" if first_written and second_written else
               "migbake would write over a program it runs" if first_written or second_written else
               "one program would run in place of the other")
        yield loaded.problem(where, f"{path!r} {how} {other} ({other_path!r}): {why}; give each its own path",
                             "output-path-clash")


@rule("output-path-not-allowed", "error",
      "a file migbake writes outside its own folders (restore.config_path: /etc/nvidia-mig/ or /etc/migbake/; "
      "restore.metrics_textfile: the textfile collector's; the downloaded nvidia-mig-parted: /opt/)")
def rule_path_allowed(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each file migbake writes at a path the profile names lies in that path's own folders (``ALLOWED``)."""
    d = as_mapping(data)
    for pointer, folders in ALLOWED.items():
        raw = _given(d, pointer)
        if raw is None or (pointer == "/tools/nvidia_mig_parted" and not downloads_mig_parted(d)):
            continue
        path = normal_path(raw)
        if not ABSOLUTE.fullmatch(raw) or in_systemd_tree(path) or path == MANAGED_CONFIG:
            continue  # schema-pattern, config-path-in-systemd, managed-config-path say it
        if inside(path, folders) and (pointer != "/tools/nvidia_mig_parted"
                                      or path.rsplit("/", 1)[1].startswith(FETCHED_NAME)):
            continue
        said = repr(raw) if path == raw else f"{raw!r} (that is {path!r})"
        yield loaded.problem(pointer, f"{said}: root writes {WHAT[pointer]} there on every node, so it may not "
                             f"name a file of the OS, a tool or another service's configuration; allowed: "
                             f"{allowed_text(pointer)}", "output-path-not-allowed")
