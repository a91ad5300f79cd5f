"""Karpenter (``OUT/karpenter/``): an EC2NodeClass whose userData carries the restore, and a NodePool per layout name.

Written for ``kubelet.layout: eks-al2023`` only. Its ``userData`` is a MIME multi-part document, never a
bare ``#cloud-config``: Karpenter reads a document that is YAML but not MIME as a NodeConfig part
(aws/karpenter-provider-aws:pkg/providers/amifamily/bootstrap/nodeadm.go@v1.14.1 ``parseUserData``), and
nodeadm then fails on it. Karpenter keeps of each part only its ``Content-Type`` and body, re-writes the
document with the boundary ``//`` and appends its own NodeConfig last (same file, ``Script``;
``bootstrap/mime/mime.go``), so every part here is plain text with no ``Content-Transfer-Encoding``. The
parts: migbake's cloud-config (the restore's files, each gzip+base64 to stay below EC2's 16 KB of user data,
enabled and run in cloud-final, which nodeadm-run.service
orders after: awslabs/amazon-eks-ami:templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service@v20260724),
then the node labels as a NodeConfig part (``application/node.eks.aws``).

The AMI is the one ``migbake bake --only amazon-ebs.golden`` baked from this very profile, selected by the
tags Packer gives it (``migbake:profile``, ``migbake:profile-sha256``), with ``amiFamily: AL2023`` (the
CRD requires amiFamily when no alias is used). Not the ``al2023@latest`` alias: the stock AL2023 NVIDIA AMI has
no nvidia-mig-parted (amazon-eks-ami ``templates/al2023/provisioners/install-nvidia-driver.sh``), and the
CRD itself says ``latest`` "is not recommended for production". Role, subnets and security groups are
``CHANGE-ME`` values the user fills. The root volume is a documented default (``ROOT_VOLUME_SIZE``) the user may
resize.

Both files are templates (``templates/karpenter/``) of the values built here; the userData's MIME document is written
here by hand (``user_data``), as Karpenter re-reads it.

With named layouts (``mig.layouts``) ``nodepools.yaml`` holds one ``karpenter.sh/v1`` NodePool per name,
its template labelled ``nvidia.com/mig.config=NAME`` (and the profile's node labels). Karpenter gives a NodeClaim
its NodePool's template labels (kubernetes-sigs/karpenter:pkg/controllers/provisioning/scheduling/
nodeclaimtemplate.go@v1.14.1), hands them to the AMI family as the launch's labels
(aws/karpenter-provider-aws:pkg/providers/launchtemplate/launchtemplate.go@v1.14.1 ``CreateAMIOptions``) and
writes them into its NodeConfig as one ``--node-labels="k=v,..."`` kubelet flag
(pkg/providers/amifamily/bootstrap/nodeadm.go and bootstrap.go ``nodeLabelArg``@v1.14.1), which nodeadm puts in
``/etc/eks/kubelet/environment``, where the restore's ``kubelet-labels`` source reads the name before kubelet.
"""

from __future__ import annotations

import email
import hashlib
import re

from migbake.problems import RenderError
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard, mime_header_value
from migbake.render.plan import NODECONFIG_MEDIA_TYPE, RenderPlan
from migbake.render.quoting import yaml_text
from migbake.render.targets.cloudinit import cloud_config

EC2NODECLASS = "karpenter/ec2nodeclass.yaml"
NODEPOOLS = "karpenter/nodepools.yaml"
NODEOVERLAYS = "karpenter/nodeoverlays.yaml"
READINESS_RULE = "karpenter/nodereadinessrule.yaml"
# A NodePool's name is an object name (a DNS subdomain) and also the value of the label karpenter.sh/nodepool
# Karpenter puts on its nodes: lower-case letters, digits, '-' and '.', at most 63 (a label value's limit)
_POOL_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,61}[a-z0-9])?")
KARPENTER_BOUNDARY = "//"  # what Karpenter re-writes the document with (bootstrap/mime/mime.go@v1.14.1)
# The root EBS volume of a GPU node. Without blockDeviceMappings Karpenter gives an AL2023 node /dev/xvda of 20Gi
# gp3, encrypted (aws/karpenter-provider-aws:pkg/providers/amifamily/resolver.go ``DefaultEBS`` and al2023.go
# ``DefaultBlockDeviceMappings``@0546f042): the NVIDIA driver, the toolkit and CUDA images of several GiB each fill
# it, and kubelet's image garbage collection then evicts pods. 100Gi: the same device, type and encryption, larger.
ROOT_VOLUME_SIZE = "100Gi"


def karpenter(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The EC2NodeClass (declared to apply for a kubelet started by nodeadm: eks-al2023)."""
    # each file gzipped in the cloud-config: Karpenter's parts cannot be compressed as a whole, and EC2 takes
    # at most 16 KB of user data
    parts = [("text/cloud-config", cloud_config(plan, done, templates, gzipped=True))]
    if plan.kubelet.nodeconfig_part:
        parts.append((NODECONFIG_MEDIA_TYPE, plan.kubelet.nodeconfig_part))
    files = [templates.file(EC2NODECLASS + ".j2", EC2NODECLASS, 0o644, {
        "nodeclass_name": nodeclass_name(plan),
        "root_volume_size": ROOT_VOLUME_SIZE,
        "user_data": yaml_text(user_data(parts), 4),
    })]
    if plan.mig.layout_names:
        files.append(Artifact(NODEPOOLS, nodepools(plan, templates), 0o644))
        files.append(Artifact(NODEOVERLAYS, nodeoverlays(plan, templates), 0o644))
        if plan.platforms.startup is not None:
            files.append(templates.file(READINESS_RULE + ".j2", READINESS_RULE, 0o644, {
                "startup": plan.platforms.startup, "pools": pool_names(plan)}))
    return files


def user_data(parts: list[tuple[str, str]]) -> str:
    """A MIME multi-part document of plain-text parts, in order, with a boundary derived from them.

    Written by hand, not by ``email``: Karpenter keeps of each part only its Content-Type and body (module
    docstring), so a part carries no Content-Transfer-Encoding and its body is the text as it is. Each media
    type passes the MIME header guard and each text the guard of a block of YAML lines (both parts are YAML).
    """
    boundary = "migbake-" + hashlib.sha256("\0".join(t for _, t in parts).encode("utf-8")).hexdigest()[:32]
    out = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for media_type, text in parts:
        if "\r" in text or text.startswith("--") or "\n--" in text:  # the lines looked at only where one may end it
            for line in text.split("\n"):
                if line.startswith(("--" + boundary, "--" + KARPENTER_BOUNDARY)) or "\r" in line:
                    raise RenderError(f"a line of the {media_type} part would end it in Karpenter's userData: "
                                      f"{line!r}")
        mime_header_value(media_type, "a userData part's type")
        guard(Block(text), "yaml", f"{EC2NODECLASS} ({media_type} part)")
        charset = "us-ascii" if text.isascii() else "utf-8"
        params = f'; charset="{charset}"' if media_type.startswith("text/") else ""
        out += [f"--{boundary}", f"Content-Type: {media_type}{params}", "", text.rstrip("\n")]
    out.append(f"--{boundary}--")
    return "\n".join(out) + "\n"


def karpenter_sends(data: str) -> int:
    """The bytes of user data Karpenter gives EC2 for the userData ``data``, less its own NodeConfig's content.

    Karpenter reads the MIME document (Go's ``mail.ReadMessage`` and ``multipart.Reader``), keeps of each part its
    Content-Type and body, and writes them again with its NodeConfig last: ``MIME-Version`` and ``Content-Type``
    lines, then per part ``--//``, its Content-Type, an empty line and the body, parts apart by a newline, closed by
    ``--//--``, every carriage return removed (bootstrap/mime/mime.go ``Serialize``@v1.14.1). A part's body ends
    before the newline that precedes the next delimiter (``user_data`` writes each text without its last newline).
    """
    message = email.message_from_string(data)
    parts = [(str(p["Content-Type"]), str(p.get_payload())) for p in message.walk() if p is not message]
    parts.append((NODECONFIG_MEDIA_TYPE, ""))  # Karpenter's own, its content left out
    out = f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{KARPENTER_BOUNDARY}"\n\n'
    out += "\n".join(f"--{KARPENTER_BOUNDARY}\nContent-Type: {kind}\n\n{body}" for kind, body in parts)
    return len((out + f"\n--{KARPENTER_BOUNDARY}--\n").encode("utf-8"))


def nodeclass_name(plan: RenderPlan) -> str:
    """The EC2NodeClass's name (``metadata.name``), which each NodePool's ``nodeClassRef`` names."""
    return "migbake-" + plan.profile.name


def nodepool_name(profile: str, layout: str) -> str:
    """``PROFILE-LAYOUT`` when that is a NodePool name Karpenter can put in its label ``karpenter.sh/nodepool``;
    else its lower-cased letters, digits, '-' and '.', cut, then 8 hex digits of the layout name's sha256 (a
    layout name is a label value: it may hold upper case and '_', which an object name may not)."""
    want = f"{profile}-{layout}"
    if _POOL_NAME.fullmatch(want):
        return want
    stem = re.sub(r"[^a-z0-9.-]+", "-", want.lower())[:54].rstrip("-.")
    return f"{stem}-{hashlib.sha256(layout.encode('utf-8')).hexdigest()[:8]}"


def nodepools(plan: RenderPlan, templates: Templates) -> str:
    """One NodePool (karpenter.sh/v1) per layout name, each labelling its nodes ``nvidia.com/mig.config=NAME``."""
    names = pool_names(plan)
    if len(set(names)) < len(names):
        raise RenderError(f"two layout names give one NodePool name ({', '.join(names)}): rename a layout")
    return templates.text(NODEPOOLS + ".j2", {
        "nodeclass_name": nodeclass_name(plan),
        # never nvidia.com/mig.config beside names (node-label-mig-owner)
        "node_labels": plan.profile.kubernetes.node_labels,
        "pools": [{"name": name, "layout": layout} for layout, name in zip(plan.mig.layout_names, names)],
        "startup": plan.platforms.startup,
    })


def pool_names(plan: RenderPlan) -> list[str]:
    """The NodePools' names, one per layout name, in order."""
    return [nodepool_name(plan.profile.name, n) for n in plan.mig.layout_names]


def nodeoverlays(plan: RenderPlan, templates: Templates) -> str:
    """One NodeOverlay (karpenter.sh/v1alpha1) per layout name and GPU model, with what ``migbake show`` prints
    for it (the plan's ``platforms.node_overlays``), scoped to the layout's NodePool and that model's instance
    types."""
    found = plan.platforms.node_overlays
    kube = plan.profile.kubernetes
    return templates.text(NODEOVERLAYS + ".j2", {
        "strategy": kube.mig_strategy,
        "plugin_version": kube.device_plugin_version,
        "left_out": found.left_out,
        "overlays": [{
            "name": f"{nodepool_name(plan.profile.name, o.layout)}-{o.model}",
            "pool": nodepool_name(plan.profile.name, o.layout),
            "layout": o.layout,
            "instance_labels": o.instance_labels,
            "capacity": o.capacity,
        } for o in found.overlays],
    })
