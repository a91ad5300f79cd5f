"""``migbake gpus``: the GPU models of the catalog, as a list, JSON or the Markdown table of docs/catalog.md."""

from __future__ import annotations

import json
from typing import Any

import click

from migbake.gpu.catalog import Catalog, CatalogChoice, GpuModel


def _notes(m: GpuModel) -> str:
    return "; ".join(f"{alias}: {note}" for alias, note in m.alias_notes.items())


def origin_note(m: GpuModel) -> str:
    """`` (from FILE)`` for a model a --catalog file added, else nothing."""
    return f" (from {m.origin})" if m.origin else ""


def _markdown(cat: Catalog) -> None:
    click.echo("| id | generation | MIG mode after reboot | names and aliases | nvidia-smi prints | notes "
               "| PCI device ids |")
    click.echo("|---|---|---|---|---|---|---|")
    for m in cat.models:
        click.echo(f"| `{m.key}`{origin_note(m)} | {m.generation} | {'kept' if m.mig_mode_persists else 'lost'} | "
                   f"{', '.join(m.names + m.aliases)} | {', '.join(m.nvidia_smi_names)} | {_notes(m)} | "
                   f"{', '.join(m.pci_device_ids)} |")
    if cat.non_mig_gpus:
        click.echo(f"\nGPUs without MIG (a profile lists one only with `mig: {{enabled: false}}`, `no-mig`): "
                   f"{', '.join(g.short_name for g in cat.non_mig_gpus)}.")


def _json_rows(cat: Catalog) -> list[dict[str, Any]]:
    return [{
        "id": m.key, "names": list(m.names), "aliases": list(m.aliases), "generation": m.generation,
        "pci_device_ids": list(m.pci_device_ids), "mig_mode_persists_across_reboot": m.mig_mode_persists,
        "compute_slices": m.total_compute_slices, "memory_slices": m.total_memory_slices,
        "profiles": [{"name": p.name, "max_count": p.max_count, "memory_slices": p.memory_slices,
                      "compute_slices": p.compute_slices} for p in m.profiles],
        "nvidia_smi_names": list(m.nvidia_smi_names), "alias_notes": dict(m.alias_notes),
        "memory_gb": m.memory_gb, "from_catalog_file": m.origin or None,
    } for m in cat.models]


@click.command()
@click.option("--profiles", "show_profiles", is_flag=True, help="Also list each model's MIG profiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (the one in docs/catalog.md).")
def gpus(show_profiles: bool, as_json: bool, markdown: bool) -> None:
    """List the GPU models migbake knows: ids, names, what nvidia-smi prints, PCI ids, MIG profiles.

    A profile's `model` may be the id or any of the names (any case, with or without `NVIDIA`).
    Models from a --catalog file are marked with it.
    """
    cat = click.get_current_context().ensure_object(CatalogChoice).load()
    if markdown:
        _markdown(cat)
        return
    if as_json:
        click.echo(json.dumps(_json_rows(cat), indent=2))
        return
    for m in cat.models:
        persist = "mode survives reboot" if m.mig_mode_persists else "mode lost at reboot"
        click.echo(f"{m.key:<30} {m.generation:<10} {persist:<22} {', '.join(m.pci_device_ids)}{origin_note(m)}")
        click.echo(f"{'':<30} names: {', '.join(m.names + m.aliases)}")
        if m.nvidia_smi_names:
            click.echo(f"{'':<30} nvidia-smi prints: {', '.join(m.nvidia_smi_names)}")
        if m.alias_notes:
            click.echo(f"{'':<30} notes: {_notes(m)}")
        if show_profiles:
            for p in m.profiles:
                click.echo(f"{'':<30} {p.name:<16} max {p.max_count}  memory slices {p.memory_slices}/"
                           f"{m.total_memory_slices}  compute slices {p.compute_slices}/"
                           f"{m.total_compute_slices}")
    if cat.non_mig_gpus:
        click.echo(f"\nwithout MIG (refused in a profile): {', '.join(g.short_name for g in cat.non_mig_gpus)}")
