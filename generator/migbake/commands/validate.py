"""``migbake validate``: check node profiles and report every problem, in the format CI reads."""

from __future__ import annotations

import click

from migbake.commands.common import check_profile, is_stdin, profile_name
from migbake.exits import color_wanted
from migbake.gpu.catalog import CatalogChoice
from migbake.report import FORMATS, FileResult, exit_code, render_report, summary
from migbake.rules.validate import file_problems, profile_files


@click.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: one line per problem; json; github: Actions annotations; sarif: SARIF 2.1.0; "
                   "junit: JUnit XML.")
@click.option("-q", "--quiet", is_flag=True, help="Text format: problems only, no summary line.")
@click.option("--strict", is_flag=True, help="Warnings count as errors: exit 1 when any profile has one.")
def validate(profiles: tuple[str, ...], fmt: str, quiet: bool, strict: bool) -> int:
    """Check node profiles: schema, GPU models, MIG profile names, counts and placement.

    PROFILE is a file, a directory searched for node-profile.yaml and *.profile.yaml, or `-` for
    standard input (named <stdin> in messages). In text
    format every problem is printed as FILE:LINE:COL: error: /json/pointer: message [rule], then a
    count; colour only on a terminal and never with NO_COLOR. Exit 0 when all profiles are valid
    (warnings allowed, unless --strict), 1 when any is invalid, 2 when one cannot be read at all (missing,
    no permission).
    """
    files = list(profile_files(profiles))
    if any(is_stdin(f) for f in files):
        results = [FileResult(profile_name(f), check_profile(f).problems) for f in files]
    else:  # files only: several CPUs may share the work
        catalog = click.get_current_context().ensure_object(CatalogChoice)
        results = [FileResult(profile_name(f), problems)
                   for f, problems in zip(files, file_problems(files, catalog))]
    color = fmt == "text" and color_wanted()
    click.echo(render_report(fmt, results, color=color, with_summary=not quiet, strict=strict), nl=False,
               color=color)
    if fmt == "github" and not quiet:
        click.echo(summary(results, strict=strict), err=True)
    return exit_code(results, strict=strict)
