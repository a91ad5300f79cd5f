"""``migbake validate``: check node profiles and report every problem, in the format CI reads."""

from __future__ import annotations

from pathlib import Path

import click

from migbake.commands.common import check_profile, is_stdin, profile_name
from migbake.exits import color_wanted
from migbake.gpu.catalog import CatalogChoice
from migbake.problems import Problem, Suppression, set_aside
from migbake.render.rendered_limits import render_problems
from migbake.render.tree import render
from migbake.report import FORMATS, FileResult, exit_code, render_report, summary
from migbake.rules.registry import RULES, why_not_ignorable
from migbake.rules.validate import ValidationResult, check_file, file_findings, profile_files


def asks_rendered(problems: list[Problem], path: Path) -> bool:
    """Whether a valid profile file may hold an error only rendering shows (``rendered_errors``): it asks for the
    Karpenter output by name (read again only then: validate does not render otherwise)."""
    if any(p.severity == "error" for p in problems):
        return False
    try:
        return "karpenter" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def rendered_errors(checked: ValidationResult, catalog: CatalogChoice) -> list[Problem]:
    """The errors ``generate`` would find once rendered (``render.rendered_limits``), so that validate refuses first
    what generate refuses: Karpenter's userData over EC2's 16 KB when outputs: asks for karpenter. Rendered only
    for such a profile, and only the targets the EC2NodeClass needs."""
    if checked.profile is None or checked.loaded is None or "karpenter" not in checked.profile.outputs:
        return []
    artifacts = render(checked.profile, outputs=("karpenter",))
    return [p for p in render_problems(checked.loaded, catalog.load(), artifacts) if p.severity == "error"]


def _ignored_rules(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """``--ignore ID`` (repeated, or a comma list): each a warning rule id; anything else is a usage error."""
    rules = tuple(dict.fromkeys(r.strip() for v in values for r in v.split(",")))
    for rule in rules:
        why = why_not_ignorable(rule) if rule else "an empty rule id"
        if why:
            raise click.BadParameter(why, ctx, param)
    return rules


@click.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: one line per problem; json; github: Actions annotations; sarif: SARIF 2.1.0; "
                   "junit: JUnit XML.")
@click.option("-q", "--quiet", is_flag=True, help="Text format: problems only, no summary line.")
@click.option("--strict", is_flag=True, help="Warnings count as errors: exit 1 when any profile has one.")
@click.option("--ignore", "ignore", multiple=True, metavar="RULE[,RULE...]", callback=_ignored_rules,
              help="Set aside the warnings of RULE (repeatable, or a comma list): listed as ignored in every "
                   "format, never failing --strict. Errors cannot be ignored. In a profile: validation.ignore, "
                   "with a reason.")
def validate(profiles: tuple[str, ...], fmt: str, quiet: bool, strict: bool, ignore: tuple[str, ...]) -> int:
    """Check node profiles: schema, GPU models, MIG profile names, counts and placement.

    PROFILE is a file, a directory searched for node-profile.yaml and *.profile.yaml, or `-` for
    standard input (named <stdin> in messages). In text
    format every problem is printed as FILE:LINE:COL: error: /json/pointer: message [rule], then a
    count; colour only on a terminal and never with NO_COLOR. Exit 0 when all profiles are valid
    (warnings allowed, unless --strict), 1 when any is invalid, 2 when one cannot be read at all (missing,
    no permission). A warning the profile's validation.ignore or --ignore sets aside is listed as ignored
    and does not fail --strict.
    """
    files = list(profile_files(profiles))
    catalog = click.get_current_context().ensure_object(CatalogChoice)
    if any(is_stdin(f) for f in files):
        checks = list(map(check_profile, files))
        found = [(c.problems + rendered_errors(c, catalog), c.ignored) for c in checks]
    else:  # files only: several CPUs may share the work
        found = file_findings(files, catalog)
        found = [(problems + rendered_errors(check_file(f, catalog=catalog), catalog) if asks_rendered(problems, f)
                  else problems, ignored) for f, (problems, ignored) in zip(files, found)]
    flag = [Suppression(rule, "flag") for rule in ignore]
    results = []
    for f, (problems, ignored) in zip(files, found):
        kept, also = set_aside(problems, flag)
        results.append(FileResult(profile_name(f), kept, sorted([*ignored, *also], key=lambda i: i.problem.sort_key())))
    color = fmt == "text" and color_wanted()
    summaries = {r.id: r.summary for r in RULES.values()}
    click.echo(render_report(fmt, results, color=color, with_summary=not quiet, strict=strict, summaries=summaries),
               nl=False, color=color)
    if fmt == "github" and not quiet:
        click.echo(summary(results, strict=strict), err=True)
    return exit_code(results, strict=strict)
