"""Facts about the node around the restore: what its unit orders after, the node's units, systemd's folders.

One place for them, so that the restore unit's template (through ``render``) and the rules that keep a
profile from making an ordering cycle or shadowing a unit read the same lists; a test parses the
generated unit and checks that its ordering is exactly ``RESTORE_AFTER``. Imports nothing of migbake.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

# what the generated restore unit is After= (besides systemd's DefaultDependencies): a unit ordered
# after the restore (a consumer, kubelet) that is one of these makes an ordering cycle
RESTORE_AFTER = ("systemd-modules-load.service", "nvidia-persistenced.service", "nvidia-fabricmanager.service")

# NVIDIA's known GPU clients: services that hold the GPU, so a MIG mode change or instance creation
# fails while they run. The restore unit is ordered Before= all of them (ordering only: harmless where
# absent). Sources: mig-parted deployments/systemd/hooks.sh (driver_services: nvsm, nvidia-dcgm;
# k8s_services: dcgm-exporter) and the GPU Operator's default-gpu-clients ConfigMap (clients.yaml).
GPU_CLIENTS = ("nvsm.service", "nvsm-mqtt.service", "nvsm-core.service", "nvsm-api-gateway.service",
               "nvsm-notifier.service", "nv_peer_mem.service", "nvidia-dcgm.service", "dcgm.service",
               "dcgm-exporter.service")
# NVIDIA's own unit is Before= and WantedBy= this target; DGX services are ordered after it.
GPU_RESET_TARGET = "nvidia-gpu-reset.target"

# units a node already has (NVIDIA's driver packages, the container runtimes, kubelet, the base
# system): a restore unit of that name would replace the packaged one in /etc/systemd/system
NODE_UNITS = frozenset({
    *RESTORE_AFTER, *GPU_CLIENTS,
    "nvidia-mig-manager.service", "nvidia-powerd.service", "nvidia-suspend.service", "nvidia-resume.service",
    "nvidia-hibernate.service", "nvidia-cdi-refresh.service", "nvidia-dcgm-exporter.service",
    "kubelet.service", "containerd.service", "docker.service", "crio.service", "cri-docker.service",
    "slurmd.service", "slurmctld.service", "munge.service", "dbus.service", "ssh.service", "sshd.service",
    "cron.service", "rsyslog.service", "chronyd.service", "chrony.service", "cloud-init.service",
    "cloud-init-local.service", "cloud-config.service", "cloud-final.service", "getty@.service",
    "serial-getty@.service", "network.service", "networking.service", "NetworkManager.service",
})
# prefixes that belong to systemd and the cloud-init/NVIDIA packages (systemd-journald, nvidia-*, ...)
NODE_UNIT_PREFIXES = ("systemd-", "dbus-", "cloud-init", "nvidia-persistenced", "nvidia-fabricmanager")

# files migbake writes on the node. The restore logic, run by the unit's ExecStart= with /bin/bash (so
# its mode can stay 0644); beside the default config, as NVIDIA keeps service.sh in
# /etc/nvidia-mig-manager (writable on every image)
RESTORE_SCRIPT = "/etc/nvidia-mig/restore.sh"

# /usr is read-only on Flatcar ("The OS partition is read-only and dm-verity protected",
# https://flatcar.org/docs/latest) and on Fedora CoreOS / RHCOS (rpm-ostree); /bin, /sbin and /lib lead
# there. Flatcar places user binaries under /opt/bin (flatcar/flatcar-website:content/docs/latest/
# provisioning/sysext/_index.md@13f623ae); /opt is /var/opt, writable, on rpm-ostree systems.
IMMUTABLE_READ_ONLY = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")


def immutable_writable(path: str) -> bool:
    """Whether Ignition can write ``path`` on Flatcar, Fedora CoreOS and RHCOS (not on their read-only /usr)."""
    return not normal_path(path).startswith(IMMUTABLE_READ_ONLY)
REBOOT_MARKER = "/var/lib/migbake/reboot-attempted"

# every folder systemd (system manager) loads units or drop-ins from (`systemd-analyze unit-paths`,
# systemd.unit(5) "Unit File Load Path"), as the trees that hold them; a test compares it with the tool
SYSTEMD_TREES = ("/etc/systemd", "/run/systemd", "/usr/local/lib/systemd", "/usr/lib/systemd", "/lib/systemd")


@lru_cache(maxsize=4096)  # the same paths in every profile: a rule asks for each several times
def normal_path(path: str) -> str:
    """``path`` as the kernel resolves it without symlinks: ``//``, ``/./`` and a trailing ``/`` removed."""
    return posixpath.normpath(re.sub("/+", "/", path)) if path else path


def in_systemd_tree(path: str) -> bool:
    """Whether the (normalised) absolute ``path`` is one of systemd's unit trees or inside one."""
    p = normal_path(path)
    return any(p == t or p.startswith(t + "/") for t in SYSTEMD_TREES)


def is_node_unit(unit: str) -> bool:
    """Whether ``unit`` names a unit that a GPU node already has (packaged by NVIDIA, systemd, ...)."""
    at = unit.find("@")
    template = unit[:at + 1] + unit[unit.rfind("."):] if at >= 0 else unit  # getty@tty1.service: getty@.service
    return unit in NODE_UNITS or template in NODE_UNITS or unit.startswith(NODE_UNIT_PREFIXES)
