"""``migbake export``: a profile's layout for use outside the image (mig-parted config or GPU Operator ConfigMap)."""

from __future__ import annotations

from pathlib import Path

import click

from migbake.commands.common import PROFILE_PATH, NonEmptyPath, valid_profile, write_or_print
from migbake.kubernetes.resources import CONFIG_LABEL, configmap_name, gpu_operator_configmap
from migbake.migparted.config import mig_parted_config_text
from migbake.render.plan import header


@click.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("--gpu-operator", is_flag=True,
              help="A GPU Operator mig-manager ConfigMap (custom config) instead of the plain mig-parted config.")
@click.option("-o", "--output", type=NonEmptyPath(dir_okay=False, path_type=Path),
              help="Write here (default: standard output).")
def export(profile: Path, gpu_operator: bool, output: Path | None) -> None:
    """Print PROFILE's layout for use outside the image: the mig-parted config, or (--gpu-operator) a ConfigMap.

    PROFILE may be `-` (standard input).
    The ConfigMap is named <profile>-mig-parted-config with key config.yaml; the operator's mig-manager
    applies it on nodes labelled nvidia.com/mig.config=<restore.config_name>.
    """
    prof = valid_profile(profile, "nothing exported")
    if not gpu_operator:
        write_or_print(header(prof) + "\n" + mig_parted_config_text(prof), output)
        return
    write_or_print(gpu_operator_configmap(prof, header(prof)), output)
    click.echo(f"migbake: ConfigMap {configmap_name(prof)}: select it on a node with the label "
               f"{CONFIG_LABEL}={prof.restore.config_name}", err=True)
