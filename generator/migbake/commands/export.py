"""``migbake export``: a profile's layout for use outside the image (mig-parted config or GPU Operator ConfigMap), or
one Ansible role for several profiles (--ansible)."""

from __future__ import annotations

from pathlib import Path

import click

from migbake import __version__
from migbake.commands.common import PROFILE_PATH, NonEmptyPath, profile_name, say, valid_profile, write_or_print
from migbake.document.emitter import dump
from migbake.kubernetes.gate import plugins_wait
from migbake.kubernetes.helmvalues import (
    clusterpolicy_patch,
    device_plugin_values,
    dra_driver_values,
    gpu_operator_values,
)
from migbake.kubernetes.resources import (
    CONFIG_LABEL,
    MANY_CONFIGMAP,
    configmap_name,
    gpu_operator_configmap,
    gpu_operator_configmap_many,
)
from migbake.migparted.config import mig_parted_config_text
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.artifact import Artifact
from migbake.render.fleet import ansible_group, fleet_sha256, fleet_tree
from migbake.render.plan import header
from migbake.render.write import EXPORT_ORIGIN, Origin, write_tree
from migbake.wording import plural


def _warn_without_kubelet(profiles: list[NodeProfile]) -> None:
    """A profile without kubelet (a Slurm node) in a GPU Operator ConfigMap: its config reaches no node."""
    for prof in profiles:
        if not prof.kubelet.present:
            click.echo(f"migbake: warning: profile {prof.name} has no kubelet (kubelet.present: false): the GPU "
                       "Operator's mig-manager runs on Kubernetes nodes only, so no node of this profile applies "
                       "its config from the ConfigMap (its image restores the layout itself)", err=True)


@click.command()
@click.argument("profiles", metavar="PROFILE...", nargs=-1, required=True, type=PROFILE_PATH)
@click.option("--gpu-operator", is_flag=True,
              help="A GPU Operator mig-manager ConfigMap (custom config) instead of the plain mig-parted config; "
                   "with several profiles, one ConfigMap holding a config per profile. For a profile whose driver "
                   "is a container (restore.hold gpu-plugins): the Helm values of the GPU Operator (its MIG "
                   "manager off), of the device plugin and DRA driver charts, and the OpenShift ClusterPolicy "
                   "patch, written to -o DIR.")
@click.option("--ansible", is_flag=True,
              help="One Ansible role for all PROFILEs, written to the directory -o DIR: roles/mig_restore (each "
                   "profile's files in roles/mig_restore/files/<profile name>/), group_vars/<profile name>.yml per "
                   "profile, install.yml and activate.yml.")
@click.option("-o", "--output", type=NonEmptyPath(path_type=Path),
              help="Write here (default: standard output): a file (replaced atomically), a character device or a "
                   "FIFO (written into); a socket or a link to a file is refused. With --ansible the directory "
                   "(required).")
@click.option("--force", is_flag=True,
              help="With --ansible: replace DIR even if it holds the output of `migbake generate`. Never a "
                   "folder migbake did not create, one holding files its marker does not list, or a system "
                   "directory.")
def export(profiles: tuple[Path, ...], gpu_operator: bool, ansible: bool, output: Path | None, force: bool) -> None:
    """Print PROFILE's layout for use outside the image: the mig-parted config, or (--gpu-operator) a ConfigMap;
    or (--ansible) write one Ansible role for several node types.

    PROFILE may be `-` (standard input).
    The ConfigMap of one profile is named <profile>-mig-parted-config with key config.yaml; the operator's
    mig-manager applies it on nodes labelled nvidia.com/mig.config=<restore.config_name>. With several
    profiles (--gpu-operator only) the ConfigMap is migbake-mig-parted-config and holds one config per
    profile, named by its restore.config_name, or by its name where that is the default `current`, plus
    all-disabled; two configs of one name are refused (exit 1), and so is a config name no label value can
    carry (restore.config_name ending in -, . or _): nothing is written.

    With --ansible, -o DIR gets one role, roles/mig_restore, whose tasks name no profile: each profile's
    files (the bytes of its OUT/rootfs and its preflight and verify scripts, as `generate` renders them)
    are in roles/mig_restore/files/<profile name>/, and their modes, the checks and the settings are the
    variables of the inventory group named after the profile, group_vars/<profile name>.yml; install.yml
    and activate.yml act on every one of those groups. Two profiles of one name (or one named all or
    ungrouped, Ansible's own groups) are refused (exit 1), and nothing is written. DIR is written as
    `generate` writes OUT: built beside it and swapped in at once, refused (exit 2) when not empty and
    not migbake's, unless --force.
    """
    if ansible:
        _export_ansible(profiles, gpu_operator, output, force)
        return
    if force:
        raise click.UsageError("--force is for --ansible (its output directory); a file -o replaces the file")
    if output is not None and output.is_dir():
        raise click.BadParameter(f"File {str(output)!r} is a directory.", param_hint="'-o' / '--output'")
    if len(profiles) > 1 and not gpu_operator:
        raise click.UsageError("several profiles need --gpu-operator (one ConfigMap for all of them); the plain "
                               "mig-parted config is one profile's")
    if len(profiles) > 1 and sum(str(p) == "-" for p in profiles) > 1:
        raise click.UsageError("standard input (-) can be read once")
    if len(profiles) > 1:
        loaded = [(str(p), valid_profile(p, "nothing exported")) for p in profiles]
        for _, one in loaded:
            _refuse_dra(one)
        top = (f"# Generated by migbake {__version__} from node profiles "
               + ", ".join(f"{prof.name!r} (sha256 {prof.source_sha256[:16]})" for _, prof in loaded)
               + ".\n# Do not edit: change the profiles and run `migbake export --gpu-operator` again.")
        text, named = gpu_operator_configmap_many(loaded, top)
        write_or_print(text, output)
        _warn_without_kubelet([prof for _, prof in loaded])
        say(f"migbake: ConfigMap {MANY_CONFIGMAP}: configs " + ", ".join(f"{key} ({name})" for key, name in named)
            + f"; select one on a node with the label {CONFIG_LABEL}=CONFIG", err=True)
        return
    prof = valid_profile(profiles[0], "nothing exported")
    if gpu_operator and plugins_wait(prof):
        _export_gate_values(prof, output)
        return
    if not gpu_operator:
        write_or_print(header(prof) + "\n" + mig_parted_config_text(prof), output)
        return
    _refuse_dra(prof)
    write_or_print(gpu_operator_configmap(prof, header(prof), profile_name(profiles[0])), output)
    _warn_without_kubelet([prof])
    if prof.layout_names:  # one config per named layout: the label picks one
        say(f"migbake: ConfigMap {configmap_name(prof)}: select a layout on a node with the label "
            + ", ".join(f"{CONFIG_LABEL}={n}" for n in prof.layout_names), err=True)
        return
    say(f"migbake: ConfigMap {configmap_name(prof)}: select it on a node with the label "
        f"{CONFIG_LABEL}={prof.restore.config_name}", err=True)


def _export_gate_values(prof: NodeProfile, output: Path | None) -> None:
    """``export --gpu-operator`` of a profile whose GPU plugins wait (a driver container): the Helm values and the
    OpenShift ClusterPolicy patch that turn the operator's MIG manager off, written to the directory -o DIR."""
    if output is None:
        raise click.UsageError(f"profile {prof.name!r} holds the GPU plugins (a driver container): --gpu-operator "
                               "writes its Helm values to a directory: give it with -o DIR")
    top = header(prof) + "\n"
    files = [
        ("gpu-operator-values.yaml", "helm upgrade --install gpu-operator nvidia/gpu-operator -f THIS_FILE",
         gpu_operator_values(prof)),
        ("openshift-clusterpolicy-patch.yaml", "oc patch clusterpolicy NAME --type merge --patch-file THIS_FILE",
         clusterpolicy_patch(prof)),
        ("nvidia-device-plugin-values.yaml", "helm upgrade --install nvdp nvdp/nvidia-device-plugin -f THIS_FILE",
         device_plugin_values(prof)),
        ("dra-driver-values.yaml", "helm upgrade --install nvidia-dra-driver-gpu CHART -f THIS_FILE",
         dra_driver_values(prof)),
    ]
    artifacts = [Artifact(name, top + f"# {use}\n" + dump(data), 0o644) for name, use, data in files]
    write_tree(artifacts, output, origin=Origin(EXPORT_ORIGIN, prof.name, prof.source_sha256))
    say(f"wrote {plural(len(artifacts), 'file')} to {output}: the GPU Operator's MIG manager off, the charts' "
        "node affinity on migbake.io/mig-ready (docs/driver-containers.md)")


def _refuse_dra(prof: NodeProfile) -> None:
    """A DRA profile has no mig-manager to feed: the GPU Operator's DRA stack (GPUCluster) runs none."""
    if prof.dra:
        raise click.UsageError(
            f"profile {prof.name!r} has kubernetes.allocation {prof.kubernetes.allocation}: the GPU Operator's DRA "
            "stack (GPUCluster, nvidia.com/v1alpha1) has no MIG manager to feed a ConfigMap to, and a ClusterPolicy's "
            "mig-manager would apply the layout after kubelet, after the DRA plugin discovered the devices; the "
            "restore unit migbake generates creates the layout before kubelet (docs/dra.md). Plain `migbake "
            "export PROFILE` prints the mig-parted config.")


def _export_ansible(profiles: tuple[Path, ...], gpu_operator: bool, output: Path | None, force: bool) -> None:
    """``export --ansible``: one role, a group_vars file per profile, the playbooks, written to ``output``."""
    if gpu_operator:
        raise click.UsageError("--ansible and --gpu-operator are two exports: give one of them")
    if output is None:
        raise click.UsageError("--ansible writes a directory: give it with -o DIR")
    if sum(str(p) == "-" for p in profiles) > 1:
        raise click.UsageError("standard input (-) can be read once")
    loaded = [(profile_name(p), valid_profile(p, "nothing written")) for p in profiles]
    artifacts = fleet_tree(loaded)
    names = [prof.name for _, prof in loaded]
    origin = Origin(EXPORT_ORIGIN, ", ".join(names), fleet_sha256([prof for _, prof in loaded]))
    write_tree(artifacts, output, force=force, origin=origin)
    groups = ", ".join(g if g == n else f"{g} (profile {n})" for g, n in zip(map(ansible_group, names), names))
    say(f"wrote {plural(len(artifacts), 'file')} to {output} (one role; inventory groups {groups})")
