"""How ``kubernetes.node_labels`` reach kubelet, per ``kubelet.layout``: the kubelet that starts the node.

- ``generic``: ``Environment=VAR=--node-labels=...`` in our kubelet drop-in, ``VAR`` being
  ``kubernetes.kubelet_args_env``. systemd applies ``EnvironmentFile=`` after ``Environment=``
  (systemd.exec(5)), so a file of kubelet's unit that sets ``VAR`` overrides it: validation warns.
- ``kubeadm``: kubeadm's packaged drop-in (kubernetes/release ``cmd/krel/templates/latest/kubeadm/10-kubeadm.conf``,
  installed in the unit directory's ``kubelet.service.d/``) reads ``EnvironmentFile=-/etc/sysconfig/kubelet``
  (rpm; the deb build rewrites it to ``/etc/default/kubelet``, ``kubeadm.spec``), where admins set their own
  ``KUBELET_EXTRA_ARGS``. Our drop-in (20-, after 10-) resets ``ExecStart=`` and repeats kubeadm's command with
  one more variable that no file of theirs sets, so their variables and ours all reach kubelet.
- ``eks-al2023``: ``nodeadm-run.service`` reads ``--config-source file:///etc/eks/nodeadm.d/`` after user data
  (amazon-eks-ami ``templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service``) and appends
  ``spec.kubelet.flags`` of every source (``nodeadm/internal/api/merge.go``): a NodeConfig drop-in with
  ``--node-labels`` adds to what user data gives.
- ``eks-al2``: ``bootstrap.sh --kubelet-extra-args ARGS`` (amazon-eks-ami, ``templates/al2/runtime/bootstrap.sh``
  before AL2 support was removed) writes them into a drop-in of its own; migbake can only print the argument.

With named layouts (``mig.layouts``) the restore gives kubelet the label ``nvidia.com/mig.config=NAME`` where the
name did not come from kubelet's own labels (``layout_variable``): it writes ``VAR=--node-labels=LABELS,
nvidia.com/mig.config=NAME`` to ``LAYOUT_LABELS_ENV``, which the kubelet drop-in reads with ``EnvironmentFile=-``;
systemd applies an ``EnvironmentFile=`` over ``Environment=`` (systemd.exec(5)), so the file's value, the drop-in's
labels and the name's, replaces the drop-in's line. ``VAR`` is the variable the drop-in already passes labels in:
``MIGBAKE_KUBELET_ARGS`` for kubeadm, ``kubelet_args_env`` for generic; for eks-al2023 the drop-in repeats EKS's
``ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS`` (awslabs/amazon-eks-ami:templates/al2023/runtime/rootfs/etc/
systemd/system/kubelet.service@v20260724) with ``$MIGBAKE_KUBELET_ARGS`` last (the labels of nodeadm's flags stay:
``--node-labels`` given twice merges, docs/kubernetes.md). eks-al2 (bootstrap.sh owns kubelet's unit) and generic
without ``kubelet_args_env`` have no variable: no label.

``kubelet.binary`` is the kubelet the layout starts (``kubelet_binary``): kubeadm's packages install
``/usr/bin/kubelet`` (kubernetes/release:cmd/krel/templates/latest/kubelet/kubelet.spec@v0.21.1, ``%{_bindir}``),
EKS AL2023 starts ``/usr/bin/kubelet $NODEADM_KUBELET_ARGS`` (awslabs/amazon-eks-ami:templates/al2023/runtime/
rootfs/etc/systemd/system/kubelet.service@v20260724); kubespray copies it to ``/usr/local/bin/kubelet``
(kubernetes-sigs/kubespray:roles/kubernetes/node/tasks/install.yml@v2.31.0, ``bin_dir``), which is why the
generated preflight and verify read kubelet's unit on the node before trusting the layout (``unit_checked``).
"""

from __future__ import annotations

from migbake.document.emitter import flow_scalar
from migbake.profile.nodeprofile import NodeProfile

# kubeadm's ExecStart (10-kubeadm.conf, deb and rpm alike), and the variable migbake adds to it
KUBEADM_VARIABLES = ("KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS", "KUBELET_KUBEADM_ARGS", "KUBELET_EXTRA_ARGS")
KUBEADM_KUBELET = "/usr/bin/kubelet"  # kubeadm's and EKS's kubelet (kubelet.binary's default for those layouts)
DEFAULT_BINARY = {"kubeadm": KUBEADM_KUBELET, "eks-al2023": KUBEADM_KUBELET, "eks-al2": KUBEADM_KUBELET}
KUBEADM_DROPIN_NAME = "10-kubeadm.conf"  # kubernetes/release:cmd/krel/templates/latest/kubeadm/kubeadm.spec@v0.21.1
NODEADM_VARIABLE = "NODEADM_KUBELET_ARGS"  # what EKS AL2023's kubelet.service expands (nodeadm writes it)
NODEADM_ENV_FILE = "/etc/eks/kubelet/environment"
NODEADM_RUN = "nodeadm-run.service"
OUR_VARIABLE = "MIGBAKE_KUBELET_ARGS"
KUBEADM_ENV_FILES = {"deb": "/etc/default/kubelet", "rpm": "/etc/sysconfig/kubelet"}
NODEADM_DROPIN = "/etc/eks/nodeadm.d/50-migbake-node-labels.yaml"
LAYOUT_LABELS_ENV = "/run/migbake/kubelet-labels.env"  # the restore's label for the layout's name (named layouts)
# nodeadm's one NodeConfig version, and the media type of a NodeConfig part of MIME user data
# (awslabs/amazon-eks-ami:nodeadm/internal/configprovider/userdata.go@v20260724 L18-23, nodeadm/api/core.go L4)
NODECONFIG_API_VERSION = "node.eks.aws/v1alpha1"
NODECONFIG_KIND = "NodeConfig"
NODECONFIG_MEDIA_TYPE = "application/node.eks.aws"


def node_labels_flag(profile: NodeProfile) -> str:
    """``--node-labels=k=v,...`` (the schema keeps keys and values to label characters: no quoting needed)."""
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in profile.kubernetes.node_labels)


def labels_apply(profile: NodeProfile) -> bool:
    """Whether the profile asks kubelet for node labels at all."""
    return bool(profile.kubernetes.node_labels) and profile.kubelet.present


def kubelet_binary(profile: NodeProfile) -> str:
    """``kubelet.binary``, else the layout's kubelet (``""`` for generic: nothing to check or write)."""
    return profile.kubelet.binary or DEFAULT_BINARY.get(profile.kubelet.layout, "")


def kubeadm_command(binary: str) -> str:
    """kubeadm's own ExecStart= (10-kubeadm.conf) with kubelet at ``binary``: what a kubeadm node has."""
    return " ".join([binary, *(f"${v}" for v in KUBEADM_VARIABLES)])


def kubeadm_exec_start(command: str) -> str:
    """Our ExecStart= for kubeadm's kubelet: theirs (``kubeadm_command``), then ``$MIGBAKE_KUBELET_ARGS`` (last:
    its labels win)."""
    return f"{command} ${OUR_VARIABLE}"


def nodeadm_exec_start(binary: str = KUBEADM_KUBELET) -> str:
    """Our ExecStart= for EKS AL2023's kubelet (named layouts): its own, then ``$MIGBAKE_KUBELET_ARGS``."""
    return f"{binary} ${NODEADM_VARIABLE} ${OUR_VARIABLE}"


def layout_variable(profile: NodeProfile) -> str:
    """The variable the restore's ``LAYOUT_LABELS_ENV`` sets for kubelet (named layouts), "" where none can reach it."""
    k = profile.kubelet
    if not profile.layout_names or not k.present:
        return ""
    if k.layout in ("kubeadm", "eks-al2023"):
        return OUR_VARIABLE
    return profile.kubernetes.kubelet_args_env if k.layout == "generic" else ""


def unit_checked(profile: NodeProfile) -> bool:
    """Whether the generated preflight and verify read kubelet's unit: what the layout assumes of it.

    kubeadm and eks-al2023 always (their drop-ins assume the packaged unit); generic when it passes labels
    through kubelet_args_env or names kubelet.binary; eks-al2 never (bootstrap.sh owns kubelet's unit).
    """
    k = profile.kubelet
    if not k.present:
        return False
    if k.layout in ("kubeadm", "eks-al2023"):
        return True
    return k.layout == "generic" and bool(k.binary or (labels_apply(profile) and profile.kubernetes.kubelet_args_env))


def nodeconfig_labels(flag: str) -> str:
    """A partial NodeConfig whose only setting is the ``--node-labels`` kubelet flag ``flag`` (``node_labels_flag``;
    nodeadm appends flags)."""
    return "\n".join([
        f"apiVersion: {NODECONFIG_API_VERSION}",
        f"kind: {NODECONFIG_KIND}",
        "spec:",
        "  kubelet:",
        "    flags:",
        f"      - {flow_scalar(flag, ascii_only=True)}",
    ]) + "\n"


def nodeadm_dropin(nodeconfig: str, header: str) -> str:
    """The NodeConfig drop-in for nodeadm: ``nodeconfig`` (``nodeconfig_labels``), merged over user data."""
    return "\n".join([
        header,
        "#",
        "# kubernetes.node_labels for nodeadm (EKS AL2023): nodeadm-run.service merges every NodeConfig of",
        "# /etc/eks/nodeadm.d/ over the one of user data, appending spec.kubelet.flags, so kubelet gets these",
        "# labels besides the flags user data gives. Labels apply when the node registers.",
        nodeconfig,
    ])


def nodeconfig_part(nodeconfig: str) -> str:
    """The same labels (``nodeconfig``: ``nodeconfig_labels``) as a NodeConfig part of MIME user data (for AMIs
    older than the drop-in folder)."""
    return "\n".join([
        "# migbake: kubernetes.node_labels as a NodeConfig part of user data; nodeadm appends its",
        "# spec.kubelet.flags to those of the other parts (the baked drop-in gives the same labels).",
        nodeconfig,
    ])


def eks_family(profile: NodeProfile) -> str:
    """``eks-al2023`` or ``eks-al2`` when the node's kubelet is started the EKS way, else ``""``."""
    layout = profile.kubelet.layout
    return layout if profile.kubelet.present and layout in ("eks-al2023", "eks-al2") else ""


def eks_al2_argument(profile: NodeProfile) -> str:
    """What to pass to EKS AL2's bootstrap.sh (as a shell word): ``--kubelet-extra-args '--node-labels=...'``."""
    return f"--kubelet-extra-args '{node_labels_flag(profile)}'"


def layout_report(profile: NodeProfile) -> list[str]:
    """Lines for ``migbake show``: how the node labels reach kubelet on this layout."""
    if not labels_apply(profile):
        return []
    layout = profile.kubelet.layout
    lines = [f"Node labels (kubelet.layout: {layout}): {node_labels_flag(profile)}"]
    if layout == "generic":
        lines.append(f"  through {profile.kubernetes.kubelet_args_env}= in the kubelet drop-in (an EnvironmentFile= "
                     "of kubelet's unit that sets it overrides it)")
    elif layout == "kubeadm":
        lines.append(f"  through ${OUR_VARIABLE}, added to kubeadm's ExecStart= by the kubelet drop-in; "
                     f"KUBELET_EXTRA_ARGS of {KUBEADM_ENV_FILES['deb']} or {KUBEADM_ENV_FILES['rpm']} still applies")
    elif layout == "eks-al2023":
        lines.append(f"  through the nodeadm NodeConfig drop-in {NODEADM_DROPIN} (spec.kubelet.flags)")
    else:
        lines.append("  migbake cannot set them on EKS AL2: pass this to /etc/eks/bootstrap.sh in user data:")
        lines.append(f"    /etc/eks/bootstrap.sh CLUSTER {eks_al2_argument(profile)}")
    return lines
