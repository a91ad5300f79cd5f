"""``migbake validate``: check node profiles and report every problem, in the format CI reads."""

from __future__ import annotations

from pathlib import Path

import click

from migbake.commands.common import check_profile, is_stdin, profile_name
from migbake.exits import EXIT_INVALID, color_wanted
from migbake.report import FORMATS, FileResult, render_report, summary
from migbake.rules.validate import file_problems, profile_files


def _expand(paths: tuple[str, ...]) -> list[Path]:
    try:
        return list(profile_files(paths))
    except ValueError as e:
        raise click.UsageError(str(e)) from e


@click.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: one line per problem; json; github: Actions annotations; sarif: SARIF 2.1.0; "
                   "junit: JUnit XML.")
@click.option("-q", "--quiet", is_flag=True, help="Text format: problems only, no summary line.")
def validate(profiles: tuple[str, ...], fmt: str, quiet: bool) -> int:
    """Check node profiles: schema, GPU models, MIG profile names, counts and placement.

    PROFILE is a file, a directory searched for node-profile.yaml and *.profile.yaml, or `-` for
    standard input (named <stdin> in messages). In text
    format every problem is printed as FILE:LINE:COL: error: /json/pointer: message [rule], then a
    count; colour only on a terminal and never with NO_COLOR. Exit 0 when all profiles are valid
    (warnings allowed), 1 when any is invalid.
    """
    files = _expand(profiles)
    if any(is_stdin(f) for f in files):
        results = [FileResult(profile_name(f), check_profile(f).problems) for f in files]
    else:  # files only: several CPUs may share the work
        results = [FileResult(profile_name(f), problems)
                   for f, problems in zip(files, file_problems(files))]
    color = fmt == "text" and color_wanted()
    click.echo(render_report(fmt, results, color=color, with_summary=not quiet), nl=False, color=color)
    if fmt == "github" and not quiet:
        click.echo(summary(results), err=True)
    return EXIT_INVALID if any(r.errors for r in results) else 0
