"""The kubelet a node really has, in the guest: kubeadm's (deb, rpm), kubespray's or EKS AL2023's, and its argv.

A boot-test option beside the scenario (it adds no boot): the guest's kubelet is started the way that
layout starts it, and a fake ``/usr/bin/kubelet`` records its argv. The claim ``kubelet-labels``: kubelet
got the profile's ``--node-labels`` and the admin's own flags. The units are written here from what the
packages install (not copies):

- kubeadm (kubernetes/release ``cmd/krel/templates/latest/kubeadm/10-kubeadm.conf``, ``kubeadm.spec``,
  ``kubelet/kubelet.spec``): a drop-in in the unit directory's ``kubelet.service.d/`` with the kubeconfig and
  config Environment=, ``EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env`` and
  ``EnvironmentFile=-/etc/sysconfig/kubelet`` (the deb build: ``/etc/default/kubelet``), and
  ``ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS
  $KUBELET_EXTRA_ARGS``; the admin's ``KUBELET_EXTRA_ARGS=...`` in that file.
- EKS AL2023 (amazon-eks-ami ``templates/al2023/runtime/rootfs/etc/systemd/system/kubelet.service``,
  ``nodeadm-run.service``; nodeadm ``internal/api/merge.go``, ``internal/kubelet/environment.go``): kubelet
  reads ``EnvironmentFile=/etc/eks/kubelet/environment`` and runs ``/usr/bin/kubelet $NODEADM_KUBELET_ARGS``;
  nodeadm-run (after cloud-final) merges the NodeConfig of user data with every file of /etc/eks/nodeadm.d/,
  appending ``spec.kubelet.flags``, and writes them there. The fake nodeadm merges only those flags.
- kubespray (kubernetes-sigs/kubespray:roles/kubernetes/node/templates/kubelet.service.j2@v2.31.0,
  ``kubelet.env.v1beta1.j2``, ``tasks/install.yml``, ``defaults/main/main.yml`` of ``kubespray_defaults``): a
  whole ``/etc/systemd/system/kubelet.service`` of its own, no kubeadm drop-in, whose ExecStart= runs
  ``/usr/local/bin/kubelet`` with eleven variables, five of them set by
  ``EnvironmentFile=-/etc/kubernetes/kubelet.env`` (the admin's flags: ``KUBELET_ADDRESS`` and
  ``kubelet_custom_flags`` at the end of ``KUBELET_ARGS``), the others empty. No ``/usr/bin/kubelet``.
  Any layout may boot on it: generic with ``kubelet_args_env`` naming an unset one of those variables
  fits; kubeadm's drop-in would start the missing ``/usr/bin/kubelet`` (the preflight says so first).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal

from migbake_boottest.hostrun import Log, run
from migbake_boottest.scenarios.claims import Claim
from migbake_boottest.scenarios.scenario import SYSTEM_UNITS
from migbake_boottest.scenarios.scenario import _write as write_guest

KubeletFixture = Literal["plain", "kubeadm-deb", "kubeadm-rpm", "kubespray", "eks-al2023"]
FIXTURES: tuple[KubeletFixture, ...] = ("plain", "kubeadm-deb", "kubeadm-rpm", "kubespray", "eks-al2023")
KubeletPackage = Literal["deb", "rpm", "kubespray"]
PACKAGES: tuple[KubeletPackage, ...] = ("deb", "rpm", "kubespray")  # boot-test --kubeadm-package: whose kubelet
KUBESPRAY_KUBELET = "/usr/local/bin/kubelet"  # kubespray's bin_dir
KUBESPRAY_ENV = "/etc/kubernetes/kubelet.env"  # kubespray's kube_config_dir
ARGV_LOG = "/var/log/kubelet-argv.txt"
ADMIN_FLAGS = ("--node-ip=10.0.2.15", "--max-pods=250")  # the admin's own (kubeadm's file, EKS user data)
ENV_FILE = {"kubeadm-deb": "/etc/default/kubelet", "kubeadm-rpm": "/etc/sysconfig/kubelet"}

_RECORDER = f"""#!/bin/sh
# Test fixture for boot tests ONLY: a fake kubelet that records its argv (one word a line) and idles.
printf '%s\\n' "$@" >{ARGV_LOG}
exec /bin/sleep infinity
"""
_KUBELET_UNIT = """# Test fixture for boot tests ONLY: the packaged kubelet.service of {what}, with a fake kubelet.
[Unit]
Description=Fake kubelet ({what}; boot test fixture)
After=network.target

[Service]
ExecStartPre=/bin/sh -c 'echo "$(date +%%s.%%N) kubelet ExecStartPre" >>/var/log/mig-stub.log'
{service}{install}"""
_ENABLED = "\n[Install]\nWantedBy=multi-user.target\n"
_KUBEADM_DROPIN = """# Test fixture for boot tests ONLY: kubeadm's packaged kubelet drop-in ({package}), its settings.
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-{env_file}
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
_NODEADM = """#!/bin/sh
# Test fixture for boot tests ONLY: a fake nodeadm init. Merges spec.kubelet.flags of the user data's
# NodeConfig and of every /etc/eks/nodeadm.d/*.yaml (in name order, appended, as nodeadm does) and writes
# NODEADM_KUBELET_ARGS to /etc/eks/kubelet/environment. Reads the flow of a flags list only.
set -eu
flags() {
    awk '/^ *flags:/ {f = 1; next} f && /^ *- / {sub(/^ *- */, ""); gsub(/^"|"$/, ""); print; next}
         f && !/^ *- / {f = 0}' "$1"
}
all=$(for f in /etc/eks/user-data-nodeconfig.yaml /etc/eks/nodeadm.d/*.yaml; do
    [ -f "$f" ] && flags "$f"
done | tr '\\n' ' ')
mkdir -p /etc/eks/kubelet
printf 'NODEADM_KUBELET_ARGS=--config=/etc/kubernetes/kubelet/config.json %s\\n' "$all" >/etc/eks/kubelet/environment
# nodeadm starts kubelet itself (AL2023 does not enable kubelet.service); kubelet waits for the restore
systemctl start kubelet.service
"""
# AL2023's nodeadm-run.service is After=cloud-final.service and WantedBy=multi-user.target. Debian's
# cloud-final is After=multi-user.target, and a target is After= every unit it wants: a cycle in this guest.
# DefaultDependencies=no drops that implied After= (systemd.target(5)), so the fixture keeps AL2023's order
_NODEADM_UNIT = """# Test fixture for boot tests ONLY: nodeadm-run.service of EKS AL2023 (it starts kubelet).
[Unit]
Description=Fake nodeadm run (boot test fixture)
DefaultDependencies=no
After=basic.target network.target cloud-final.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/fake-nodeadm

[Install]
WantedBy=multi-user.target
"""
_USER_DATA = """# Test fixture for boot tests ONLY: the NodeConfig of EC2 user data (its kubelet flags).
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
{flags}
"""


# kubespray's kubelet.service with its defaults (container_manager containerd, bin_dir /usr/local/bin,
# kube_config_dir /etc/kubernetes), in our words; the boot test's stub log line added as ExecStartPre
KUBESPRAY_UNIT = f"""# Test fixture for boot tests ONLY: a kubelet.service shaped like kubespray's (a unit of its own).
[Unit]
Description=Fake kubelet (kubespray-shaped; boot test fixture)
After=containerd.service
Wants=containerd.service

[Service]
EnvironmentFile=-{KUBESPRAY_ENV}
ExecStartPre=/bin/sh -c 'echo "$(date +%%s.%%N) kubelet ExecStartPre" >>/var/log/mig-stub.log'
ExecStart={KUBESPRAY_KUBELET} \\
\t\t$KUBE_LOGTOSTDERR \\
\t\t$KUBE_LOG_LEVEL \\
\t\t$KUBELET_API_SERVER \\
\t\t$KUBELET_ADDRESS \\
\t\t$KUBELET_PORT \\
\t\t$KUBELET_HOSTNAME \\
\t\t$KUBELET_ARGS \\
\t\t$DOCKER_SOCKET \\
\t\t$KUBELET_NETWORK_PLUGIN \\
\t\t$KUBELET_VOLUME_PLUGIN \\
\t\t$KUBELET_CLOUDPROVIDER
Restart=always
RestartSec=10s

[Install]
WantedBy=multi-user.target
"""
# kubespray's kubelet.env with its defaults (kube_log_level 2, kubelet_runtime_cgroups, cloud_provider unset);
# ADMIN_FLAGS as kubelet_address and kubelet_custom_flags
KUBESPRAY_ENV_TEXT = f"""KUBE_LOG_LEVEL="--v=2"
KUBELET_ADDRESS="{ADMIN_FLAGS[0]}"
KUBELET_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--config=/etc/kubernetes/kubelet-config.yaml \\
--kubeconfig=/etc/kubernetes/kubelet.conf \\
--runtime-cgroups=/system.slice/containerd.service \\
 {ADMIN_FLAGS[1]}"
KUBELET_CLOUDPROVIDER=""

PATH=/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


def fixture_for(layout: str, package: str = "deb") -> KubeletFixture:
    """The guest kubelet for a profile's ``kubelet.layout`` (kubeadm: of ``package``, deb or rpm).

    ``package`` kubespray gives every layout kubespray's kubelet (a mismatch is the profile's to show).
    """
    if package == "kubespray":
        return "kubespray"
    if layout == "kubeadm":
        return "kubeadm-rpm" if package == "rpm" else "kubeadm-deb"
    return "eks-al2023" if layout == "eks-al2023" else "plain"


def install(rootfs: Path, fixture: KubeletFixture, log: Log) -> None:
    """Replace the guest's plain fake kubelet with ``fixture``'s (nothing for ``plain``)."""
    if fixture == "plain":
        return
    log(f"installing the {fixture} kubelet fixture")
    write_guest(rootfs, "/usr/bin/kubelet", _RECORDER, 0o755)
    if fixture == "eks-al2023":
        service = "EnvironmentFile=/etc/eks/kubelet/environment\nExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS\n"
        # not enabled: on AL2023 nodeadm-run starts kubelet (enabled, it would be a cycle with cloud-final)
        run(["systemctl", "--quiet", f"--root={rootfs}", "disable", "kubelet.service"], log=log)
        write_guest(rootfs, f"/{SYSTEM_UNITS}/kubelet.service", _KUBELET_UNIT.format(what="EKS AL2023",
                                                                                     service=service, install=""),
                    0o644)
        write_guest(rootfs, "/usr/local/sbin/fake-nodeadm", _NODEADM, 0o755)
        # the report is taken once nodeadm-run has started kubelet (it is After= kubelet, whose start job
        # only exists from then on)
        write_guest(rootfs, f"/{SYSTEM_UNITS}/test-report.service.d/after-nodeadm.conf",
                    "# Test fixture for boot tests ONLY\n[Unit]\nAfter=nodeadm-run.service\n", 0o644)
        write_guest(rootfs, f"/{SYSTEM_UNITS}/nodeadm-run.service", _NODEADM_UNIT, 0o644)
        write_guest(rootfs, "/etc/eks/user-data-nodeconfig.yaml",
                    _USER_DATA.format(flags="\n".join(f'      - "{f}"' for f in ADMIN_FLAGS)), 0o644)
        (rootfs / "etc/eks/nodeadm.d").mkdir(parents=True, exist_ok=True)  # the AMI build makes it
        run(["systemctl", "--quiet", f"--root={rootfs}", "enable", "nodeadm-run.service"], log=log)
        return
    if fixture == "kubespray":
        write_guest(rootfs, KUBESPRAY_KUBELET, _RECORDER, 0o755)
        (rootfs / "usr/bin/kubelet").unlink(missing_ok=True)  # kubespray installs none there
        write_guest(rootfs, f"/{SYSTEM_UNITS}/kubelet.service", KUBESPRAY_UNIT, 0o600)  # kubespray: mode 0600
        write_guest(rootfs, KUBESPRAY_ENV, KUBESPRAY_ENV_TEXT, 0o600)
        return
    package = fixture.split("-")[1]
    write_guest(rootfs, f"/{SYSTEM_UNITS}/kubelet.service",
                _KUBELET_UNIT.format(what=f"the kubelet {package} package", service="ExecStart=/usr/bin/kubelet\n",
                                     install=_ENABLED),
                0o644)
    write_guest(rootfs, f"/{SYSTEM_UNITS}/kubelet.service.d/10-kubeadm.conf",
                _KUBEADM_DROPIN.format(package=package, env_file=ENV_FILE[fixture]), 0o644)
    write_guest(rootfs, ENV_FILE[fixture], f"KUBELET_EXTRA_ARGS={' '.join(ADMIN_FLAGS)}\n", 0o644)
    write_guest(rootfs, "/var/lib/kubelet/kubeadm-flags.env",
                'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"\n', 0o644)


def node_labels_given(argv: list[str]) -> set[str]:
    """Every ``key=value`` of kubelet's ``--node-labels`` arguments: kubelet merges them (the restore's label file
    may carry the profile's labels and the layout's name in one argument, named layouts)."""
    flag = "--node-labels="
    return {pair for a in argv if a.startswith(flag) for pair in a[len(flag):].split(",")}


def labels_claim(argv_text: str | None, fixture: KubeletFixture, labels: tuple[tuple[str, str], ...]) -> list[Claim]:
    """``kubelet-labels``: the recorded argv has the profile's labels and the admin's own flags."""
    if fixture == "plain":
        return []
    text = f"kubelet got the profile's node labels and the admin's own flags ({fixture})"
    if argv_text is None:
        return [Claim("kubelet-labels", text, False, f"kubelet recorded no argv ({ARGV_LOG} missing)")]
    argv = argv_text.splitlines()
    given = node_labels_given(argv)
    want = [f"{k}={v}" for k, v in labels if f"{k}={v}" not in given]
    missing = [f"--node-labels with {w}" for w in want] + [w for w in ADMIN_FLAGS if w not in argv]
    shown = shlex.join(argv)
    return [Claim("kubelet-labels", text, not missing,
                  f"argv: {shown}" + (f"; missing: {', '.join(missing)}" if missing else ""))]
