"""Semantic rules on what the profile makes of the node: its unit names and kubelet's environment.

The paths a profile names are judged in ``rules.nodepaths``. Like ``rules.general`` these read the raw data
defensively and yield problems with a rule id; ``rules.registry.CHECKS`` runs them with the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migbake.document.loader import LoadedProfile
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem
from migbake.profile.nodefacts import RESTORE_AFTER, is_node_unit
from migbake.rules.declare import rule

# variables the dynamic loader, a shell, an interpreter or systemd's service protocol reads: kubelet's
# drop-in would set one of them to "--node-labels=..." for kubelet and everything it runs
UNSAFE_ENV = frozenset({
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "CDPATH", "GLOBIGNORE", "HOME", "SHELL",
    "TMPDIR", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "RESOLV_HOST_CONF",
    "NLSPATH", "TZ", "TZDIR", "LANG", "LANGUAGE", "LOCPATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
    "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "GODEBUG", "GOGC",
    "GOMAXPROCS", "GOMEMLIMIT", "GOTRACEBACK", "SSL_CERT_FILE", "SSL_CERT_DIR", "KUBECONFIG",
    "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "INVOCATION_ID", "CREDENTIALS_DIRECTORY",
    "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "LOGS_DIRECTORY", "CACHE_DIRECTORY", "CONFIGURATION_DIRECTORY",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "FTP_PROXY", "USER", "LOGNAME", "TERM", "MAIL",
})
UNSAFE_ENV_PREFIXES = ("LD_", "BASH_FUNC_", "MALLOC_", "GLIBC_", "LISTEN_", "SYSTEMD_", "LC_", "DYLD_")


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@rule("restore-ordering-cycle", "error", "a consumer or kubelet that the restore unit is itself ordered after")
def rule_unit_ordering(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Nothing that starts after the restore is a unit the restore itself starts after (an ordering cycle)."""
    d = _mapping(data)
    kubelet = _mapping(d.get("kubelet"))
    units: list[tuple[str, object]] = []
    if kubelet.get("present", True) is True:
        units.append(("/kubelet/unit", kubelet.get("unit", "kubelet.service")))
    consumers = d.get("consumers")
    for i, c in enumerate(consumers if isinstance(consumers, list) else []):
        units.append((f"/consumers/{i}/unit", _mapping(c).get("unit")))
    for ptr, unit in units:
        if isinstance(unit, str) and unit in RESTORE_AFTER:
            yield loaded.problem(ptr, f"{unit!r} starts after the restore (its drop-in), but the restore unit is "
                                 f"After= {unit} ({' '.join(RESTORE_AFTER)}): an ordering cycle, which systemd "
                                 "breaks by dropping a job at boot", "restore-ordering-cycle")


@rule("restore-unit-shadows", "error", "restore.unit named like a unit the node already has (NVIDIA, systemd, kubelet)")
def rule_restore_unit_name(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """The restore unit is a new unit: not named like one the node already has (it would replace it)."""
    d = _mapping(data)
    unit = _mapping(d.get("restore")).get("unit")
    others = [_mapping(d.get("kubelet")).get("unit", "kubelet.service"),
              _mapping(d.get("conflicting_manager")).get("unit", "nvidia-mig-manager.service")]
    if isinstance(unit, str) and unit not in others and is_node_unit(unit):  # those: unit-name-clash
        yield loaded.problem("/restore/unit", f"{unit!r} is the name of a unit the node already has (NVIDIA's "
                             "driver packages, systemd, the container runtime, kubelet): a restore unit of that "
                             "name in /etc/systemd/system would replace it; use a name of its own such as "
                             "nvidia-mig-restore.service", "restore-unit-shadows")


def unsafe_env(name: str) -> bool:
    """Whether a variable is one the loader, a shell, an interpreter or systemd reads (refused as kubelet_args_env)."""
    upper = name.upper()
    return upper in UNSAFE_ENV or upper.startswith(UNSAFE_ENV_PREFIXES)


@rule("kubelet-args-env-unsafe", "error",
      "kubelet_args_env names a variable the loader, a shell or systemd reads (PATH, LD_*)")
def rule_kubelet_args_env(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """kubernetes.kubelet_args_env is not a variable the loader, a shell, an interpreter or systemd reads."""
    name = _mapping(_mapping(data).get("kubernetes")).get("kubelet_args_env")
    if not isinstance(name, str) or not name:
        return
    if unsafe_env(name):
        yield loaded.problem("/kubernetes/kubelet_args_env", f"{name!r} is read by the dynamic loader, a shell, "
                             "an interpreter or systemd, not only by kubelet's ExecStart: setting it to "
                             "--node-labels=... would change how kubelet and everything it starts runs; name the "
                             "variable kubelet's ExecStart expands for extra arguments (KUBELET_EXTRA_ARGS with "
                             "kubeadm)", "kubelet-args-env-unsafe")
