"""``migbake images``: regenerate (or --check) every images/<name>/generated of a golden-image repository."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from migbake.commands.common import NonEmptyPath, generated_dir, say
from migbake.commands.generate import artifacts_for, mime_refusal, report_diff, warn_rendered, warn_sizes
from migbake.exits import EXIT_INVALID
from migbake.gpu.catalog import CatalogChoice
from migbake.render.tree import in_order
from migbake.render.write import Origin, read_origin, write_tree
from migbake.rules.validate import check_file, profiles_in
from migbake.wording import plural


@click.command()
@click.argument("images_dir", default="images", type=NonEmptyPath(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any generated/ is stale.")
def images(images_dir: Path, check: bool) -> int:
    """Regenerate (or --check) every IMAGES_DIR/*/generated from its node-profile.yaml.

    For a repository of golden images laid out as images/<name>/node-profile.yaml: one command
    keeps every committed output tree up to date, and `--check` fails CI (or a pre-commit hook)
    when one is stale. Profiles are found as `validate IMAGES_DIR` finds them: node-profile.yaml,
    node-profile.yml, *.profile.yaml and *.profile.yml at any depth; each one's tree is generated/
    beside a node-profile.yaml, NAME.generated/ beside a NAME.profile.yaml. Each profile's outputs:
    chooses the folders written (default: all). Exit 1 if any profile is invalid or any tree is stale.
    """
    profiles = profiles_in(images_dir)
    catalog = click.get_current_context().ensure_object(CatalogChoice)
    failed = 0
    for profile in profiles:
        out = generated_dir(profile)
        checked = check_file(profile, catalog=catalog)
        for p in checked.problems:
            click.echo(p.format(), err=True)
        if checked.profile is None:
            failed += 1
            continue
        origin = Origin.of(str(profile), out, checked.profile.name, checked.profile.source_sha256,
                           outputs=in_order(checked.profile.outputs))
        recorded = read_origin(out)
        if recorded is not None and recorded.user_data_mime:
            say(f"migbake: error: {mime_refusal(out, 'images')}", err=True)
            failed += 1
            continue
        if recorded is not None:
            origin = origin.same_options(recorded)  # keep the user-data gzip form it was generated with
        artifacts = artifacts_for(checked.profile, origin, out)
        warn_rendered(profile, checked, artifacts, "")
        if check:
            stale = report_diff(artifacts, out, origin, f"migbake images {images_dir}")
            failed += stale
            if not stale:
                say(f"{out}: up to date")
        else:
            write_tree(artifacts, out, origin=origin)
            warn_sizes(profile, checked, artifacts, origin)
            say(f"wrote {plural(len(artifacts), 'file')} to {out}")
    if failed:
        what = "stale or invalid" if check else "invalid"
        say(f"migbake: {plural(failed, 'image')} {what}; run `migbake images {shlex.quote(str(images_dir))}`", err=True)
        return EXIT_INVALID
    return 0
