"""Commands that meet a real node: preflight, import, export."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from migbake.commands.base import PROFILE_PATH, GpuModelType, guard, main, plural, valid_profile
from migbake.exits import EXIT_INVALID, EXIT_USAGE

if TYPE_CHECKING:
    from migbake.catalog import GpuModel

# --- preflight ---------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi -q -x` captured on the node.")
@click.option("--nvidia-smi-csv", "csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current "
                   "--format=csv` (with or without the header).")
@click.option("--node-json", "node_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `kubectl get node NAME -o json`: checks the GPU Operator labels "
                   "(nvidia.com/gpu.deploy.mig-manager, nvidia.com/mig.config).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guard
def preflight(profile: Path, xml_file: Path | None, csv_file: Path | None, node_file: Path | None,
              as_json: bool) -> None:
    """Check captured nvidia-smi output and/or the Kubernetes node of a node against PROFILE, offline.

    PROFILE may be `-` (standard input). The GPU checks of scripts/preflight-mig-restore.sh: GPU
    count, models (PCI ids) and indices of every gpus entry, the current MIG state (and, with Ampere
    GPUs, whether a MIG mode change will reboot the node once); with --node-json, whether the GPU
    Operator may deploy its mig-manager on the node and which config nvidia.com/mig.config names.
    Checks that need the node itself are SKIP. Exit 0 when no check failed, 1 when one did (or the
    profile is invalid), 2 for bad usage or an unreadable capture.
    """
    from migbake.capture import CaptureError, read_capture
    from migbake.gpuoperator import NodeJsonError, read_node_labels
    from migbake.preflight import check_capture, table

    capture_file = xml_file or csv_file
    if xml_file is not None and csv_file is not None:
        raise click.UsageError("give one of --nvidia-smi-xml FILE or --nvidia-smi-csv FILE, not both")
    if capture_file is None and node_file is None:
        raise click.UsageError("give --nvidia-smi-xml FILE or --nvidia-smi-csv FILE, and/or --node-json FILE")
    prof = valid_profile(profile, "nothing checked")
    try:
        capture = None if capture_file is None else read_capture(
            capture_file, "nvidia-smi-xml" if xml_file is not None else "nvidia-smi-csv")
        labels = None if node_file is None else read_node_labels(node_file)
    except (CaptureError, NodeJsonError) as e:
        click.echo(f"migbake: error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    result = check_capture(prof, capture, labels=labels, node_file=str(node_file or ""))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in table(result):
            click.echo(line)
    if not result.ready:
        sys.exit(EXIT_INVALID)


# --- import / export ---------------------------------------------------------------------------

def _write_or_print(text: str, output: Path | None, force: bool = True) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    if output.exists() and not force:
        raise click.UsageError(f"{output} exists; pass --force to replace it")
    with click.open_file(str(output), "w", encoding="utf-8", atomic=True) as fh:
        fh.write(text)
    click.echo(f"wrote {output}", err=True)


@main.command("import")
@click.argument("source", metavar="MIG_PARTED_YAML",
                type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--config", "config_name", metavar="NAME", help="The config to import (needed when there are several).")
@click.option("--model", metavar="ID", type=GpuModelType(non_mig=True),
              help="The GPU model of entries without a device-filter (`migbake gpus`).")
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="`nvidia-smi -q -x` of the node: the GPU models and gpu_count; every GPU must be covered.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the profile here (default: standard output).")
@click.option("--name", default="", help="The profile's name (default: imported-<models>).")
@click.option("--force", is_flag=True, help="Replace an existing OUTPUT.")
@guard
def import_(source: Path, config_name: str | None, model: GpuModel | None, xml_file: Path | None,
            output: Path | None, name: str, force: bool) -> None:
    """Turn an nvidia-mig-parted config (e.g. `nvidia-mig-parted export` of a known-good node) into a node profile.

    The GPU model comes from each entry's device-filter, else from --model or --nvidia-smi-xml.
    Kept exactly: the config's name, each entry's devices, MIG mode, MIG devices and device-filter ids.
    Whatever a profile cannot represent exactly is refused with its reason and location (exit 1):
    another version, several configs without --config, a config name a profile cannot carry, malformed
    or unknown device-filter ids, filtered and unfiltered entries mixed, MIG devices with mig-enabled
    false, overlapping entries, ... The result is validated like any profile.
    """
    from migbake.capture import CaptureError, read_capture
    from migbake.importer import ImportRefused, import_config

    if model is not None and xml_file is not None:
        raise click.UsageError("give --model or --nvidia-smi-xml, not both")
    try:
        capture = read_capture(xml_file, "nvidia-smi-xml") if xml_file is not None else None
    except CaptureError as e:
        click.echo(f"migbake: error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    display = "-" if str(source) == "-" else str(source)
    with click.open_file(display, "rb") as fh:
        data = fh.read(1024 * 1024)
    try:
        result = import_config(data, display, config=config_name, model=model, capture=capture, name=name)
    except ImportRefused as e:
        for p in e.problems:
            click.echo(p.format(), err=True)
        click.echo(f"migbake: {display}: cannot import ({plural(len(e.problems), 'problem')}), nothing written",
                   err=True)
        sys.exit(EXIT_INVALID)
    for p in result.warnings:
        click.echo(p.format(), err=True)
    _write_or_print(result.text, output, force)


@main.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("--gpu-operator", is_flag=True,
              help="A GPU Operator mig-manager ConfigMap (custom config) instead of the plain mig-parted config.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (default: standard output).")
@guard
def export(profile: Path, gpu_operator: bool, output: Path | None) -> None:
    """Print PROFILE's layout for use outside the image: the mig-parted config, or (--gpu-operator) a ConfigMap.

    PROFILE may be `-` (standard input).
    The ConfigMap is named <profile>-mig-parted-config with key config.yaml; the operator's mig-manager
    applies it on nodes labelled nvidia.com/mig.config=<restore.config_name>.
    """
    from migbake.catalog import load_catalog
    from migbake.kubernetes import CONFIG_LABEL, configmap_name, gpu_operator_configmap
    from migbake.migconfig import mig_parted_config_text
    from migbake.render import header

    prof, cat = valid_profile(profile, "nothing exported"), load_catalog()
    if not gpu_operator:
        _write_or_print(header(prof) + "\n" + mig_parted_config_text(prof, cat), output)
        return
    _write_or_print(gpu_operator_configmap(prof, header(prof), cat), output)
    click.echo(f"migbake: ConfigMap {configmap_name(prof)}: select it on a node with the label "
               f"{CONFIG_LABEL}={prof.restore.config_name}", err=True)
