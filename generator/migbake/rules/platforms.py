"""Rules on the immutable and managed node OSes: the Butane configs' download of nvidia-mig-parted, and Bottlerocket.

Warnings, but a URL Ignition refuses (``document.goneturl``): the bake, cloud-init and the other outputs are
unaffected. Facts: docs/immutable-os.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from migbake.document.goneturl import problem as url_problem
from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries
from migbake.gpu.catalog import Catalog
from migbake.kubernetes.managed import Entry, verdicts
from migbake.kubernetes.readiness import MIG_READY
from migbake.problems import Problem
from migbake.profile.nodefacts import immutable_writable
from migbake.profile.nodeprofile import OpenShift
from migbake.rules.allocation import allocation_of
from migbake.rules.declare import rule
from migbake.rules.layoutnames import layout_names
from migbake.rules.layouts import model_of


@rule("openshift-binary-in-image", "warning",
      "a download of nvidia-mig-parted: the OpenShift MachineConfig takes data: URLs only")
@rule("mig-parted-url-invalid", "error",
      "tools.nvidia_mig_parted_url that Ignition's URL parser (Go's net/url) refuses, or that it cannot fetch (no "
      "host, a port above 65535)")
@rule("mig-parted-path-read-only", "warning",
      "tools.nvidia_mig_parted_url with tools.nvidia_mig_parted on the read-only /usr")
def rule_mig_parted_url(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """A download of nvidia-mig-parted: a URL Ignition takes, not on OpenShift, not into a read-only /usr."""
    tools = as_mapping(as_mapping(data).get("tools"))
    url = tools.get("nvidia_mig_parted_url")
    if not isinstance(url, str):
        return
    why = url_problem(url)
    if why is not None:
        yield loaded.problem("/tools/nvidia_mig_parted_url", f"{url!r}: {why}; Ignition (and butane, with "
                             "Ignition's own check: Go's net/url.Parse) refuses it or cannot fetch it; write the URL "
                             "with %XX escapes of two hex digits, a numeric port up to 65535 and a host",
                             "mig-parted-url-invalid")
    role = as_mapping(as_mapping(data).get("openshift")).get("role", OpenShift.role)
    # coreos/butane:config/openshift/v4_22/validate.go@v0.29.0: "file contents source must be data URL in
    # this spec version"; a 4.14 config is refused the same way
    yield loaded.problem("/tools/nvidia_mig_parted_url", f"OUT/butane/openshift-{role}.bu cannot download it: "
                         "butane's openshift variant accepts only data: URLs, so the MachineConfig leaves the "
                         "download out and the OpenShift nodes' base image must hold tools.nvidia_mig_parted "
                         "(fcos.bu and flatcar.bu download it)", "openshift-binary-in-image")
    path = tools.get("nvidia_mig_parted", "/usr/bin/nvidia-mig-parted")
    if isinstance(path, str) and not immutable_writable(path):
        where = "/tools/nvidia_mig_parted" if "nvidia_mig_parted" in tools else "/tools/nvidia_mig_parted_url"
        yield loaded.problem(where, f"{path} is on the read-only /usr of Flatcar, Fedora CoreOS and RHCOS: "
                             "Ignition cannot write it there, so the Butane configs leave the download out; set "
                             "tools.nvidia_mig_parted: /opt/bin/nvidia-mig-parted (Flatcar's place for binaries, "
                             "writable on Fedora CoreOS too)", "mig-parted-path-read-only")


# The cluster's own pools: every node of the pool gets a MachineConfig labelled with its role
# (openshift/machine-config-operator:docs/custom-pools.md@1b3632de: a custom pool inherits worker's configs)
SHARED_POOLS = {"worker": "every worker node of the cluster, CPU nodes included",
                "master": "every control-plane node of the cluster"}


@rule("openshift-role-shared", "warning",
      "openshift.role worker or master: the MachineConfig goes to every node of that pool")
def rule_openshift_role(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """openshift.role worker or master: the MachineConfig goes to every node of that pool, not the GPU nodes only."""
    role = as_mapping(as_mapping(data).get("openshift")).get("role")
    if not isinstance(role, str) or role not in SHARED_POOLS:
        return
    yield loaded.problem("/openshift/role", f"openshift.role: {role}: OUT/butane/openshift-{role}.yaml goes to "
                         f"{SHARED_POOLS[role]}: each one gets the restore and is rebooted by the machine-config "
                         f"daemon to take it; leave openshift.role out (a pool of its own, {OpenShift.role}, which "
                         "migbake writes) or name another custom pool",
                         "openshift-role-shared")


@rule("bottlerocket-dra", "error",
      "bottlerocket.required under a DRA allocation: its MIG settings are the device plugin's")
@rule("bottlerocket-inexpressible", "warning",
      "bottlerocket.required: a layout Bottlerocket cannot express (mixed, model)")
def rule_bottlerocket(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """bottlerocket.required: a layout Bottlerocket cannot express (mixed, unknown model) is a warning; under a
    DRA allocation Bottlerocket's MIG settings (the device plugin's) are refused (``bottlerocket-dra``)."""
    if as_mapping(as_mapping(data).get("bottlerocket")).get("required") is not True:
        return
    if (allocation := allocation_of(data)) in ("dra", "dra-dynamic"):
        yield loaded.problem("/bottlerocket/required", f"bottlerocket.required under kubernetes.allocation "
                             f"{allocation}: Bottlerocket partitions MIG only through its NVIDIA device plugin's "
                             "settings (settings.kubelet-device-plugins.nvidia device-partitioning-strategy and "
                             "mig.profile, bottlerocket-os/bottlerocket-settings-sdk:bottlerocket-settings-models/"
                             "modeled-types/src/kubernetes.rs@25e4241f), which configure the device plugin on a node "
                             "whose GPUs the DRA driver allocates; its DRA settings "
                             "(settings.kubelet-dra-drivers.nvidia, settings-extensions/kubelet-dra-drivers/src/"
                             "lib.rs@67ed021c) hold only 'enabled' and create no layout. "
                             "OUT/bottlerocket/settings.toml is not written for a DRA profile: remove "
                             "bottlerocket.required, or use allocation device-plugin", "bottlerocket-dra")
        return
    if layout_names(data):
        return  # named layouts: layouts-not-yet-supported refuses bottlerocket.required with them
    entries = []
    for ptr, group in gpu_entries(data):
        model = model_of(group, catalog)
        mig = as_mapping(group.get("mig"))
        layout = as_mapping(mig.get("layout"))
        entries.append(Entry(ptr, model.key if model else "", mig.get("enabled", True) is not False,
                             tuple((str(k), v) for k, v in layout.items() if isinstance(v, int))))
    for v in verdicts("bottlerocket", entries):
        if not v.native:
            yield loaded.problem(v.pointer, f"{v.reason}; OUT/bottlerocket/settings.toml is not written",
                                 "bottlerocket-inexpressible")


@rule("startup-taint-without-nodepools", "warning",
      "kubernetes.startup_taint where migbake writes no Karpenter NodePool to carry the taint")
def rule_startup_taint(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """kubernetes.startup_taint: only the Karpenter NodePools (eks-al2023, named layouts) carry the taint."""
    doc = as_mapping(data)
    if as_mapping(doc.get("kubernetes")).get("startup_taint") is not True:
        return
    kubelet = as_mapping(doc.get("kubelet"))
    if kubelet.get("present") is False:
        yield loaded.problem("/kubernetes/startup_taint", "kubernetes.startup_taint: true with kubelet.present "
                             "false: no node registers, so nothing is tainted and the restore sets no condition; "
                             "leave it out", "startup-taint-without-nodepools")
    elif kubelet.get("layout") != "eks-al2023" or not layout_names(doc):
        yield loaded.problem("/kubernetes/startup_taint", "kubernetes.startup_taint: true: migbake writes the "
                             "taint into its Karpenter NodePools only (kubelet.layout eks-al2023 with mig.layouts), "
                             f"so no NodePool and no NodeReadinessRule carry it here; the restore still sets the node "
                             f"condition {MIG_READY}: register the nodes with the taint yourself "
                             "(docs/karpenter.md, startup readiness)", "startup-taint-without-nodepools")
