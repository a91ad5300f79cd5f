"""Limits of the consumers of migbake's output, checked on the profile before anything is written.

- Ignition (and butane, which validates with Ignition's code) parses every unit and drop-in with
  go-systemd's ``unit.Deserialize`` (coreos/ignition:config/shared/validations/unit.go@bb6182a3 imports
  github.com/coreos/go-systemd/unit), which refuses a line of ``SYSTEMD_LINE_MAX`` = 2048 bytes or more:
  "line too long (max 2048 bytes)" (coreos/go-systemd:unit/deserialize.go, ``lex``; butane v0.29.0 prints
  "invalid unit content: line too long (max 2048 bytes)" for a 2048-byte line and takes 2047 bytes). The
  profile makes two unit lines long: the restore unit's comment that names every consumer
  (``consumer_line``), and the kubelet drop-in's ``Environment=`` with ``--node-labels`` (``labels_line``):
  ``unit-line-too-long``.
- Cluster API's KubeadmConfigTemplate CRD, v1beta2 (the storage version): a ``kubeletExtraArgs`` item's
  ``value`` (the node labels) at most 1024 characters (``maxLength: 1024``, kubernetes-sigs/cluster-api:
  bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml@v1.14.0, as
  tests/fixtures/crds/kubeadmconfigtemplate-v1beta2.openapi.json holds it; v1beta1's map has no limit):
  ``cluster-api-limit``. Also each ``preKubeadmCommands`` item (``maxLength: 10240`` in v1beta1 and v1beta2, the
  same file): the first boot's runcmd (``profile.firstboot``), whose last command names kubelet's unit and every
  consumer several times, with both tools' paths. It is reachable within the unit-line limit (16 consumers that
  make a 2047-byte comment line make a 10573-character item), so it is measured on the typed profile once the
  profile has no other error, and located at the profile key that adds the most to it
  (``render.targets.clusterapi`` keeps its own check as a guard).
- EC2 takes at most 16 KB of instance user data, "in raw form, before it is base64-encoded" (AWS, Amazon EC2 User
  Guide, "Work with instance user data": https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
  instancedata-add-user-data.html; RequestLaunchTemplateData ``UserData``: "User data is limited to 16 KB").
  Karpenter re-writes an EC2NodeClass's userData (each part's Content-Type and body, boundary ``//``), appends its
  own NodeConfig (cluster name, endpoint, CA bundle, kubelet settings) and gives the whole to
  ``ec2:CreateLaunchTemplate``, which refuses more than 16384 bytes; Karpenter logs from 90% of that and reports the
  size (aws/karpenter-provider-aws: pkg/providers/amifamily/bootstrap/nodeadm.go ``Script``, bootstrap/mime/mime.go
  ``Serialize``, pkg/providers/launchtemplate/launchtemplate.go ``createLaunchTemplate`` and metrics.go
  ``userDataMaxBytes``, ``userDataWarnBytes``, pkg/controllers/nodeclass/validation.go
  ``UserDataSizeLimitExceeded``, all @v1.14.1). The userData is known only once rendered (the restore's files,
  gzipped), so ``karpenter-user-data-size`` is found by ``render.rendered_limits`` after rendering and before anything
  is written, and located here: at the profile key that grows it the most, each one measured by leaving it out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from migbake.document.loader import LoadedProfile, as_mapping
from migbake.gpu.catalog import Catalog
from migbake.problems import Problem, has_errors
from migbake.profile.schema import shape_ok
from migbake.rules.declare import Rule, rule

if TYPE_CHECKING:
    from migbake.profile.nodeprofile import NodeProfile
from migbake.rules.layoutnames import layout_names

SYSTEMD_LINE_MAX = 2048  # go-systemd: a line of this many bytes or more is refused
CAPI_ARG_VALUE_MAX = 1024  # cluster-api v1beta2 KubeadmConfigTemplate: kubeletExtraArgs[].value maxLength
CAPI_COMMAND_MAX = 10240  # cluster-api v1beta1 and v1beta2 KubeadmConfigTemplate: preKubeadmCommands[] maxLength
# render.targets.clusterapi writes a runcmd word bare when it matches this, else in single quotes (render.quoting)
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./=:@%+-]+")
EC2_USER_DATA_MAX = 16384  # bytes of instance user data EC2 takes, raw (before base64)
KARPENTER_WARN_BYTES = EC2_USER_DATA_MAX * 9 // 10  # Karpenter's own warning (launchtemplate/metrics.go@v1.14.1)
# the profile keys Karpenter's userData grows with (render.rendered_limits measures each by leaving it out)
USER_DATA_KEYS = (("consumers",), ("kubernetes", "node_labels"), ("description",), ("tools",))
KARPENTER_RULE = Rule("karpenter-user-data-size", "render", "Karpenter's userData from this profile leaves too little "
                      "of EC2's 16 KB of user data for Karpenter's own NodeConfig, or is over it", "warning")
KARPENTER_LIMIT_RULE = Rule("karpenter-user-data-limit", "render", "Karpenter's userData from this profile is over "
                            "EC2's 16 KB of user data and the profile's outputs: lists karpenter: no node launches",
                            "error")
EC2_RULE = Rule("ec2-user-data-size", "render", "the cloud-init user-data that would be sent is above EC2's 16 KB "
                "of user data, and the profile or the options say EC2 (an EKS kubelet.layout, karpenter in "
                "outputs, --user-data-gzip)", "warning")
# the profile keys a preKubeadmCommands item grows with: each is measured by leaving it out (its default then)
COMMAND_KEYS = (("consumers",), ("tools",), ("kubelet", "unit"), ("restore", "unit"), ("conflicting_manager", "unit"))
OUR_VARIABLE = "MIGBAKE_KUBELET_ARGS"  # kubernetes.kubelet.OUR_VARIABLE (kubeadm's drop-in)


def _units(d: dict[str, Any]) -> list[str]:
    kubelet = as_mapping(d.get("kubelet"))
    units = [str(kubelet.get("unit", "kubelet.service"))] if kubelet.get("present", True) is True else []
    consumers = d.get("consumers")
    units += [str(as_mapping(c).get("unit", "")) for c in (consumers if isinstance(consumers, list) else [])]
    return [u for u in units if u]


def consumer_line(d: dict[str, Any]) -> str:
    """The restore unit's longest profile-made line: its comment naming the profile and every consumer."""
    units = _units(d)
    text = units[0] if len(units) == 1 else ", ".join(units[:-1]) + " and " + units[-1] if units else ""
    return (f"# Restores the MIG layout of node profile {d.get('name', '')} at every boot, before "
            f"{text if units else 'any GPU client'}:")


def labels_flag(d: dict[str, Any]) -> str:
    """kubelet's ``--node-labels=k=v,...`` (kubernetes.kubelet.node_labels_flag), "" without labels."""
    labels = as_mapping(as_mapping(d.get("kubernetes")).get("node_labels"))
    if not labels or as_mapping(d.get("kubelet")).get("present", True) is not True:
        return ""
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items())


def labels_line(d: dict[str, Any]) -> str:
    """The kubelet drop-in's ``Environment=`` line that carries the labels ("" when the layout has none)."""
    flag = labels_flag(d)
    layout = as_mapping(d.get("kubelet")).get("layout", "generic")
    env = as_mapping(d.get("kubernetes")).get("kubelet_args_env", "")
    var = OUR_VARIABLE if layout == "kubeadm" else env if layout == "generic" and env else ""
    return f"Environment={var}={flag}" if flag and var else ""


@rule("unit-line-too-long", "error",
      "consumers or node labels that make a unit line of 2048 bytes or more (Ignition, butane: go-systemd's unit "
      "parser refuses it)")
def rule_unit_lines(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """No line of a unit or drop-in migbake writes reaches Ignition's 2048-byte limit (go-systemd)."""
    d = as_mapping(data)
    for pointer, line, what in (("/consumers", consumer_line(d), "the consumers (kubelet's unit and consumers)"),
                                ("/kubernetes/node_labels", labels_line(d), "kubelet's --node-labels")):
        size = len(line.encode("utf-8"))
        if size >= SYSTEMD_LINE_MAX:
            yield loaded.problem(pointer, f"{what} make a line of {size} bytes in a systemd unit migbake writes; "
                                 f"Ignition and butane refuse a unit line of {SYSTEMD_LINE_MAX} bytes or more "
                                 "(go-systemd's unit parser: line too long), so OUT/butane would not build; "
                                 "use fewer or shorter names", "unit-line-too-long")


def pre_kubeadm_command(argv: Sequence[str]) -> str:
    """One runcmd argv as a ``preKubeadmCommands`` item of render.targets.clusterapi: each word bare or quoted."""
    return " ".join(w if _PLAIN_WORD.fullmatch(w) else "'" + w.replace("'", "'\\''") + "'" for w in argv)


def longest_pre_kubeadm_command(profile: NodeProfile) -> int:
    """The length of the longest ``preKubeadmCommands`` item OUT/cluster-api would hold for ``profile``."""
    from migbake.profile.firstboot import commands

    return max(len(pre_kubeadm_command(argv)) for argv in commands(profile)[1])


def without_key(d: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """``d`` without the key at ``path`` (None: it has none there)."""
    if len(path) == 1:
        return {k: v for k, v in d.items() if k != path[0]} if path[0] in d else None
    inner = d.get(path[0])
    if not isinstance(inner, dict) or path[1] not in inner:
        return None
    return {**d, path[0]: {k: v for k, v in inner.items() if k != path[1]}}


def _command_problem(loaded: LoadedProfile, d: dict[str, Any], catalog: Catalog) -> Problem | None:
    from migbake.profile.nodeprofile import build_profile  # only for a kubeadm profile without errors

    size = longest_pre_kubeadm_command(build_profile(d, loaded.text, catalog))
    if size <= CAPI_COMMAND_MAX:
        return None
    grown = {}
    for path in COMMAND_KEYS:
        less = without_key(d, path)
        if less is not None:
            grown["/" + "/".join(path)] = size - longest_pre_kubeadm_command(build_profile(less, loaded.text, catalog))
    pointer, named = _grown_by(grown)
    return loaded.problem(pointer, f"a preKubeadmCommands item of OUT/cluster-api would be {size} "
                          f"characters; Cluster API's KubeadmConfigTemplate (v1beta1 and v1beta2) takes at most "
                          f"{CAPI_COMMAND_MAX} (its CRD's maxLength), so the API server would refuse it. The first "
                          "boot's last command names kubelet's unit and every consumer several times, and both "
                          f"tools' paths{f' (characters each key adds: {named})' if named else ''}: use fewer or "
                          "shorter unit names, or shorter tool paths", "cluster-api-limit")


@rule("cluster-api-limit", "error",
      "node labels or a first-boot command longer than Cluster API's KubeadmConfigTemplate takes (kubeletExtraArgs "
      "value 1024, preKubeadmCommands item 10240)", late=True)
def rule_cluster_api_limits(loaded: LoadedProfile, data: object, catalog: Catalog,
                            earlier: Sequence[Problem]) -> Iterator[Problem]:
    """The node labels fit Cluster API's kubeletExtraArgs value limit (1024 characters, v1beta2), and each first-boot
    command its preKubeadmCommands item limit (10240, v1beta1 and v1beta2; measured once nothing else is wrong)."""
    d = as_mapping(data)
    if as_mapping(d.get("kubelet")).get("layout") != "kubeadm":
        return  # OUT/cluster-api is written for kubelet.layout kubeadm only
    if shape_ok(d) and not has_errors(earlier):  # the typed profile is built from a valid one only
        command = _command_problem(loaded, d, catalog)
        if command is not None:
            yield command
    flag = labels_flag(d)
    names = layout_names(data)  # a template per name adds nvidia.com/mig.config=NAME (render.targets.clusterapi)
    longest = max(names, key=len) if names else ""
    value = ",".join(filter(None, [flag[len("--node-labels="):], f"nvidia.com/mig.config={longest}" if names else ""]))
    if len(value) > CAPI_ARG_VALUE_MAX:
        yield loaded.problem("/kubernetes/node_labels", f"the node-labels value is {len(value)} characters; Cluster "
                             f"API's KubeadmConfigTemplate (v1beta2) takes a kubeletExtraArgs value of at "
                             f"most {CAPI_ARG_VALUE_MAX} (its CRD's maxLength), so the API server would refuse "
                             "OUT/cluster-api; use fewer or shorter labels", "cluster-api-limit")


def _grown_by(grown: dict[str, int]) -> tuple[str, str]:
    """The pointer of the key that adds the most ("": the profile's root) and the keys named with their bytes."""
    most = sorted((-n, p) for p, n in grown.items() if n > 0)
    return (most[0][1] if most else ""), ", ".join(f"{p} {-n}" for n, p in most)


def karpenter_user_data_problem(loaded: LoadedProfile, size: int, grown: dict[str, int]) -> Problem | None:
    """``karpenter-user-data-size`` for a userData of ``size`` bytes as Karpenter sends it (less its own NodeConfig's
    content), at the key of ``grown`` (pointer -> bytes it adds) that adds the most; None below Karpenter's warning."""
    if size < KARPENTER_WARN_BYTES:
        return None
    pointer, named = _grown_by(grown)
    what = (f"Karpenter's userData (OUT/karpenter/ec2nodeclass.yaml) is {size} bytes as Karpenter sends it to EC2, "
            "before its own NodeConfig part: ")
    if size > EC2_USER_DATA_MAX:
        what += (f"above EC2's limit of {EC2_USER_DATA_MAX} bytes of user data (raw, before base64), so "
                 "ec2:CreateLaunchTemplate refuses it and no node of this EC2NodeClass launches (its condition "
                 "ValidationSucceeded: False, reason UserDataSizeLimitExceeded)")
    else:
        what += (f"Karpenter's NodeConfig (the cluster's name, endpoint and CA bundle, kubelet settings) must fit in "
                 f"the {EC2_USER_DATA_MAX - size} bytes left of EC2's {EC2_USER_DATA_MAX} (raw, before base64), or "
                 f"EC2 refuses the launch; Karpenter warns from {KARPENTER_WARN_BYTES} and reports the size as "
                 "karpenter_ec2nodeclasses_userdata_bytes")
    grows = f". Bytes each key adds: {named}" if named else ""
    outputs = as_mapping(loaded.data).get("outputs")
    # asked for by name, the EC2NodeClass is meant to be applied: one over EC2's limit launches nothing, an error
    declared = KARPENTER_LIMIT_RULE if size > EC2_USER_DATA_MAX and isinstance(outputs, list) and \
        "karpenter" in outputs else KARPENTER_RULE
    line, col = loaded.where(pointer)  # found outside a check: made with the declaration's severity
    return Problem(loaded.file, line, col, pointer, f"{what}{grows}. The AMI baked from this profile already holds the "
                   "restore's files: keep only the NodeConfig part in userData, or use fewer or shorter consumers "
                   "and node labels", declared.id, declared.severity)
