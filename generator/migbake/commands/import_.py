"""``migbake import``: an nvidia-mig-parted config (e.g. exported from a known-good node) made a node profile."""

from __future__ import annotations

from pathlib import Path

import click

from migbake.commands.common import GpuModelType, NonEmptyPath, write_or_print
from migbake.document.files import read_bounded, read_stdin
from migbake.gpu.catalog import CatalogChoice, GpuModel
from migbake.node.importer import import_config
from migbake.node.nvidiasmi import read_capture
from migbake.problems import STDIN_NAME, UsageError


@click.command("import")
@click.argument("source", metavar="MIG_PARTED_YAML",
                type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--config", "config_name", metavar="NAME",
              help="The config to import; without it, a file with several configs becomes named layouts "
                   "(mig.layouts), one per config.")
@click.option("--model", metavar="ID", type=GpuModelType(non_mig=True),
              help="The GPU model of entries without a device-filter (`migbake gpus`).")
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="`nvidia-smi -q -x` of the node: the GPU models and gpu_count; every GPU must be covered.")
@click.option("-o", "--output", type=NonEmptyPath(dir_okay=False, path_type=Path),
              help="Write the profile here (default: standard output): a new file, a device or a FIFO; an "
                   "existing file only with --force (replaced atomically); a directory, a socket or a link to a "
                   "file is refused.")
@click.option("--name", default="", help="The profile's name (default: imported-<models>).")
@click.option("--force", is_flag=True, help="Replace an existing OUTPUT.")
def import_(source: Path, config_name: str | None, model: GpuModel | None, xml_file: Path | None,
            output: Path | None, name: str, force: bool) -> None:
    """Turn an nvidia-mig-parted config (e.g. `nvidia-mig-parted export` of a known-good node) into a node profile.

    The GPU model comes from each entry's device-filter, else from --model or --nvidia-smi-xml.
    Kept exactly: the config's name, each entry's devices, MIG mode, MIG devices and device-filter ids.
    Whatever a profile cannot represent exactly is refused with its reason and location (exit 1):
    another version, several configs whose GPU entries differ (without --config they become named
    layouts, which share one set of entries), a config name a profile cannot carry, malformed
    or unknown device-filter ids, filtered and unfiltered entries mixed, MIG devices with mig-enabled
    false, overlapping entries, ... The result is validated like any profile.
    """
    if model is not None and xml_file is not None:
        raise click.UsageError("give --model or --nvidia-smi-xml, not both")
    capture = read_capture(xml_file, "nvidia-smi-xml") if xml_file is not None else None
    from_stdin = str(source) == "-"
    limit = 1024 * 1024  # a mig-parted config is a few KiB; a larger input is refused, never cut short
    data = read_stdin(limit) if from_stdin else read_bounded(source, limit, UsageError)
    if len(data) > limit:
        raise UsageError(f"{STDIN_NAME}: larger than 1 MiB")
    display = STDIN_NAME if from_stdin else str(source)
    result = import_config(data, display, config=config_name, model=model, capture=capture, name=name,
                           catalog=click.get_current_context().ensure_object(CatalogChoice))
    for p in result.warnings:
        click.echo(p.format(), err=True)
    write_or_print(result.text, output, force)
