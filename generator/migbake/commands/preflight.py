"""``migbake preflight``: a node's captured nvidia-smi output and Kubernetes node checked against a profile, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml

from migbake.commands.common import PROFILE_PATH, valid_profile
from migbake.exits import EXIT_INVALID
from migbake.kubernetes.gate import plugins_wait
from migbake.kubernetes.labels import GPU_CLUSTER_NOTE, node_name_of, read_node, read_operator_cr
from migbake.node.draslices import check_node_name, read_resource_slices
from migbake.node.draverdict import layout_slice_checks
from migbake.node.driveroffer import read_generate_config
from migbake.node.gatecheck import NOT_GIVEN, RenderedGate, gate_check, mig_ready_check, read_gate_policies
from migbake.node.nvidiasmi import read_capture
from migbake.node.preflight import NO_NODE_JSON, Status, check_capture, table
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.plan import make_plan
from migbake.render.targets.kubernetes import GATE
from migbake.render.tree import render


def rendered_gate(prof: NodeProfile) -> RenderedGate:
    """The gate's objects as ``migbake generate`` writes them for ``prof`` (OUT/kubernetes/gate/)."""
    files = {a.path: a.text for a in render(prof, outputs=("kubernetes",))}
    policy, binding = yaml.safe_load_all(files[f"{GATE}/mutating-admission-policy.yaml"])
    return RenderedGate(policy, binding, yaml.safe_load(files[f"{GATE}/kyverno-clusterpolicy.yaml"]))


def container_rows(prof: NodeProfile, labels: dict[str, str] | None, gate: list[dict[str, Any]] | None,
                   gate_file: Path | None) -> list[tuple[str, Status, str]]:
    """The rows of a node whose GPU plugins wait (restore.hold gpu-plugins): gate, and with a driver container
    the watcher's labels (mig-ready); SKIP where their input was not given."""
    if not plugins_wait(prof):
        return []
    rows: list[tuple[str, Status, str]] = [("gate", "SKIP", NOT_GIVEN) if gate is None or gate_file is None
                                           else gate_check(prof, gate, rendered_gate(prof), str(gate_file))]
    if prof.watches_driver:
        rows.append(("mig-ready", "SKIP", NO_NODE_JSON) if labels is None else mig_ready_check(prof, labels))
    return rows


@click.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi -q -x` captured on the node.")
@click.option("--nvidia-smi-csv", "csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current "
                   "--format=csv` (with or without the header).")
@click.option("--node-json", "node_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `kubectl get node NAME -o json`: checks the GPU Operator labels "
                   "(nvidia.com/gpu.deploy.mig-manager, nvidia.com/mig.config) and, for a driver container, the "
                   "watcher's migbake.io/mig-state.")
@click.option("--cluster-policy", "policy_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `kubectl get clusterpolicy NAME -o json` (or -o yaml), with --node-json: "
                   "migManager.enabled=false means the GPU Operator runs no mig-manager on any node. A GPUCluster "
                   "(`kubectl get gpucluster gpu-cluster -o json`, the operator's DRA stack) has none: a NOTE.")
@click.option("--mig-parted-generate-config", "gc_file",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-mig-parted generate-config` captured on the node (read-only; YAML or "
                   "-o json): every layout's profiles must be offered by the node's own driver, within its "
                   "maximum counts. See docs/preflight-generate-config.md.")
@click.option("--resource-slices", "slices_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `kubectl get resourceslices -o json` (any number of nodes), with --node NAME or "
                   "--node-json: kubernetes.allocation dra: does the node publish exactly the profile's MIG devices "
                   "(count per profile per GPU, and their names)? dra-dynamic: no static MIG device. No nvidia-smi "
                   "capture needed.")
@click.option("--gate-policies", "gate_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `kubectl get mutatingadmissionpolicies,mutatingadmissionpolicybindings -o json`, or "
                   "with Kyverno `kubectl get clusterpolicies.kyverno.io -o json` (restore.hold gpu-plugins): is "
                   "the gate of OUT/kubernetes/gate/ installed as migbake renders it for PROFILE?")
@click.option("--node", "node_name", metavar="NAME", help="The node whose slices --resource-slices checks "
              "(spec.nodeName); --node-json names it too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def preflight(profile: Path, xml_file: Path | None, csv_file: Path | None, node_file: Path | None,
              policy_file: Path | None, gc_file: Path | None, slices_file: Path | None, gate_file: Path | None,
              node_name: str | None, as_json: bool) -> int:
    """Check captured nvidia-smi output and/or the Kubernetes node of a node against PROFILE, offline.

    PROFILE may be `-` (standard input). The GPU checks of scripts/preflight-mig-restore.sh: GPU
    count, models (PCI ids) and indices of every gpus entry, the current MIG state (and, with Ampere
    GPUs, whether a MIG mode change will reboot the node once); with --node-json, whether the GPU
    Operator may deploy its mig-manager on the node, which config nvidia.com/mig.config names (a NOTE
    where no mig-manager of the operator runs: nvidia.com/gpu.deploy.mig-manager=false, or with
    --cluster-policy a ClusterPolicy whose migManager.enabled is false) and whether the node carries
    kubernetes.node_labels; with --mig-parted-generate-config, whether the node's driver offers every
    profile of the layouts within its maximum counts (driver-offer; when not, it names the profiles the
    driver offers).
    Checks that need the node itself are SKIP. Exit 0 when no check failed, 1 when one did (or the
    profile or the generate-config capture is invalid), 2 for bad usage or an unreadable capture.

    --node-json, --cluster-policy, --resource-slices and --gate-policies take kubectl's output as a file or a
    pipe (`--node-json <(kubectl get node NAME -o json)`): read once, at most 4 MiB and 120 seconds.

    A driver container (restore.hold gpu-plugins) adds two rows. gate: with --gate-policies, whether the
    MutatingAdmissionPolicy and binding, or the Kyverno ClusterPolicy, of OUT/kubernetes/gate/ are installed as
    migbake renders them for PROFILE (its plugins, its init container), and what to kubectl apply when not;
    without it, SKIP. mig-ready: with --node-json, the watcher's labels migbake.io/mig-state and
    migbake.io/mig-ready (failed: the journal of the watcher says why).

    With --resource-slices (a `kubectl get resourceslices -o json` capture) and --node NAME (or --node-json),
    kubernetes.allocation dra is READY when the node publishes exactly the profile's MIG devices (count
    per profile per GPU and the placements, read from names of either DRA driver naming, up to v25.8.1 or
    from v25.12.0, else from the attributes; the newest generation of each pool) and NOT READY for a
    stranded GPU, a partial layout or moved placements; dra-dynamic is READY when no static MIG device
    exists (docs/dra.md). With named layouts the layout is the one the node's nvidia.com/mig.config label
    names (--node-json); with --node alone the check is SKIP: the slices do not say which name the node has.
    """
    capture_file = xml_file or csv_file
    if xml_file is not None and csv_file is not None:
        raise click.UsageError("give one of --nvidia-smi-xml FILE or --nvidia-smi-csv FILE, not both")
    if capture_file is None and node_file is None and gc_file is None and slices_file is None and gate_file is None:
        raise click.UsageError("give --nvidia-smi-xml FILE or --nvidia-smi-csv FILE, and/or --node-json FILE, "
                               "and/or --mig-parted-generate-config FILE, and/or --resource-slices FILE, "
                               "and/or --gate-policies FILE")
    if node_name is not None:
        check_node_name(node_name)  # --node '': a located usage error (exit 2), never a traceback
    if slices_file is not None and node_name is None and node_file is None:
        raise click.UsageError("--resource-slices needs --node NAME or --node-json FILE (which node's slices)")
    if node_name is not None and slices_file is None:
        raise click.UsageError("--node names the node whose --resource-slices are checked: give --resource-slices")
    if policy_file is not None and node_file is None:
        raise click.UsageError("--cluster-policy needs --node-json FILE (it says how to read the node's labels)")
    prof = valid_profile(profile, "nothing checked")
    capture = None if capture_file is None else read_capture(
        capture_file, "nvidia-smi-xml" if xml_file is not None else "nvidia-smi-csv")
    labels, name = (None, "") if node_file is None else read_node(node_file)  # once: it may be <(kubectl ...)
    kind, enabled = (None, None) if policy_file is None else read_operator_cr(policy_file)
    offers = None if gc_file is None else read_generate_config(gc_file)
    if gate_file is not None and not plugins_wait(prof):
        raise click.UsageError("--gate-policies checks the gate that holds the GPU plugins (restore.hold: "
                               f"gpu-plugins); profile {prof.name} holds {prof.restore.hold}")
    gate = None if gate_file is None else read_gate_policies(gate_file)
    slices = None
    if slices_file is not None:
        if not prof.dra:
            raise click.UsageError("--resource-slices checks what NVIDIA's DRA driver publishes: the profile's "
                                   "kubernetes.allocation is device-plugin (use dra or dra-dynamic)")
        node = node_name or node_name_of(node_file, name)  # type: ignore[arg-type]
        dra = make_plan(prof).dra  # the plan's placements, as the generated verify has them (per layout name)
        slices = layout_slice_checks(prof, dra.expected, dra.named_devices, labels,
                                     read_resource_slices(slices_file, node), node)
    if kind == "GPUCluster":
        slices = [*(slices or []), ("gpu-cluster", "NOTE", GPU_CLUSTER_NOTE)]
    result = check_capture(prof, capture, labels=labels, node_file=str(node_file or ""), offers=offers,
                           mig_manager_enabled=enabled, slices=slices, slices_file=str(slices_file or ""),
                           operator_kind=kind or "ClusterPolicy",
                           container=container_rows(prof, labels, gate, gate_file), gate_file=str(gate_file or ""))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in table(result):
            click.echo(line)
    return 0 if result.ready else EXIT_INVALID
