"""The consumers' limits that only the rendered files show: EC2's 16 KB of user data, for Karpenter's userData
and for the cloud-init user-data.

``karpenter-user-data-size`` (declared, worded and located in ``rules.consumer_limits``, with its sources): the
EC2NodeClass's userData carries the restore's files gzipped, so its size is known once rendered. ``generate``
asks here after rendering and before writing; each key that grows it is measured by rendering the profile again
without it (only the targets the EC2NodeClass reads), which happens only for a userData near the limit.

``ec2-user-data-size`` (declared in ``rules.consumer_limits``): the cloud-init user-data that would be sent
(``mime_parts.size_warning``) is above EC2's limit, said only when something says the node is an EC2 one
(``ec2_reason``): a PXE, NoCloud or bare-metal node has no such limit, so an on-prem profile gets no warning.
"""

from __future__ import annotations

import email
from collections.abc import Sequence
from typing import Any

import yaml

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.gpu.catalog import Catalog
from migbake.kubernetes.kubelet import NODECONFIG_MEDIA_TYPE
from migbake.problems import MigbakeError, Problem
from migbake.profile.nodeprofile import NodeProfile, build_profile
from migbake.render import mime_parts
from migbake.render.artifact import Artifact
from migbake.render.plan import make_plan
from migbake.render.targets.karpenter import EC2NODECLASS, karpenter_sends
from migbake.render.tree import TARGETS, render_plan
from migbake.rules.consumer_limits import EC2_RULE, USER_DATA_KEYS, karpenter_user_data_problem, without_key

_KARPENTER_TARGETS = tuple(t for t in TARGETS if t.name in ("rootfs", "karpenter"))


def user_data_bytes(artifacts: Sequence[Artifact]) -> int | None:
    """What Karpenter would send EC2 for the EC2NodeClass among ``artifacts`` (less its NodeConfig), None: none."""
    ec2 = next((a for a in artifacts if a.path == EC2NODECLASS), None)
    if ec2 is None:
        return None
    return karpenter_sends(str(yaml.safe_load(ec2.data)["spec"]["userData"]))


def _karpenter_bytes(profile: NodeProfile) -> int | None:
    return user_data_bytes(render_plan(make_plan(profile), _KARPENTER_TARGETS))


def render_problems(loaded: LoadedProfile, catalog: Catalog, artifacts: Sequence[Artifact]) -> list[Problem]:
    """The problems of ``loaded`` (valid, its files ``artifacts``) that only the rendered files show."""
    size = user_data_bytes(artifacts)
    if size is None or karpenter_user_data_problem(loaded, size, {}) is None:
        return []
    data: dict[str, Any] = loaded.data  # type: ignore[assignment]  # valid: a mapping
    grown: dict[str, int] = {}
    for path in USER_DATA_KEYS:
        less = without_key(data, path)
        if less is None:
            continue
        try:
            smaller = _karpenter_bytes(build_profile(less, loaded.text, catalog))
        except MigbakeError:
            continue  # the profile is not whole without it: not measured
        if smaller is not None:
            grown["/" + "/".join(path)] = size - smaller
    problem = karpenter_user_data_problem(loaded, size, grown)
    return [problem] if problem is not None else []


# the kubelet layouts of EKS nodes, which run on EC2 (docs/kubernetes.md)
_EC2_LAYOUTS = ("eks-al2023", "eks-al2")


def _has_nodeconfig(mime: bytes) -> bool:
    """Whether a MIME user-data carries a part for EKS AL2023's nodeadm (``application/node.eks.aws``)."""
    return any(part.get_content_type() == NODECONFIG_MEDIA_TYPE for part in email.message_from_bytes(mime).walk())


def ec2_reason(data: object, artifacts: Sequence[Artifact], *, gzipped: bool,
               outputs_option: Sequence[str]) -> tuple[str, str] | None:
    """What says the user-data goes to EC2 (the profile's pointer, in words), None: nothing does.

    The profile's kubelet.layout (an EKS node), its outputs: naming karpenter (an EC2NodeClass), ``--outputs``
    naming karpenter, ``--user-data-gzip`` (asked for EC2's limit) or a NodeConfig part for nodeadm (EKS) in
    ``--user-data-mime``. A profile that writes every folder (no outputs:) says nothing by that alone.
    """
    d = as_mapping(data)
    layout = as_mapping(d.get("kubelet")).get("layout")
    if layout in _EC2_LAYOUTS:
        return "/kubelet/layout", f"kubelet.layout {layout} is an EKS node on EC2"
    outputs = d.get("outputs")
    if isinstance(outputs, list) and "karpenter" in outputs:
        return f"/outputs/{outputs.index('karpenter')}", "outputs names karpenter, for EC2 nodes"
    if "karpenter" in outputs_option:
        return "", "--outputs names karpenter, for EC2 nodes"
    if gzipped:
        return "", "--user-data-gzip was given, for EC2's limit"
    mime = next((a for a in artifacts if a.path == "cloud-init/user-data.mime"), None)
    if mime is not None and _has_nodeconfig(mime.data):
        return "", f"--user-data-mime carries an {NODECONFIG_MEDIA_TYPE} part, for EKS nodes on EC2"
    return None


def ec2_user_data_problem(loaded: LoadedProfile, artifacts: Sequence[Artifact], *, gzipped: bool,
                          outputs_option: Sequence[str] = ()) -> Problem | None:
    """``ec2-user-data-size`` for the user-data that would be sent (the MIME bundle when there is one, gzipped with
    ``gzipped``) when it is above EC2's limit and something says EC2 (``ec2_reason``); None otherwise."""
    forms = {a.path: a for a in artifacts}
    mime = "cloud-init/user-data.mime" in forms
    sent = forms.get("cloud-init/user-data" + (".mime" if mime else "") + (".gz" if gzipped else ""))
    warning = None if sent is None else mime_parts.size_warning(sent.path, sent.data, gzipped=gzipped)
    reason = None if warning is None else ec2_reason(loaded.data, artifacts, gzipped=gzipped,
                                                         outputs_option=outputs_option)
    if warning is None or reason is None:
        return None
    pointer, why = reason
    line, col = loaded.where(pointer)  # found outside a check: made with the declaration's severity
    return Problem(loaded.file, line, col, pointer, f"{warning} ({why}; a profile whose user-data never reaches "
                   "EC2 sets this aside with validation.ignore)", EC2_RULE.id, EC2_RULE.severity)
