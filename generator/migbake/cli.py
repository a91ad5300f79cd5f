"""The ``migbake`` command line: parse options, call the library, report. Nothing else lives here.

Exit codes: 0 success; 1 invalid input (a profile with errors), stale output (--check) or a failed
step; 2 usage (bad options, an output directory migbake will not replace); 3 an internal error.
Tracebacks only with --debug.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from migbake import __version__

if TYPE_CHECKING:
    from migbake.model import NodeProfile

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3


class _State:
    debug = False


def _guard(fn: F) -> F:
    """Turn migbake's errors into messages and exit codes; tracebacks only with --debug."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from migbake.problems import MigbakeError, OutputError

        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except OutputError as e:
            _debug_traceback()
            click.echo(f"migbake: error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except MigbakeError as e:
            _debug_traceback()
            click.echo(f"migbake: error: {e}", err=True)
            sys.exit(EXIT_INVALID)
        except KeyboardInterrupt:
            click.echo("migbake: interrupted", err=True)
            sys.exit(130)
        except Exception as e:
            _debug_traceback()
            click.echo(f"migbake: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)",
                       err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def _debug_traceback() -> None:
    if _State.debug:
        traceback.print_exc()


def _valid_profile(profile: Path, consequence: str = "") -> NodeProfile:
    """The checked profile at ``profile``; its problems go to stderr, and an invalid one exits 1."""
    from migbake.validate import check_file

    checked = check_file(profile)
    for p in checked.problems:
        click.echo(p.format(), err=True)
    if checked.profile is None:
        click.echo(f"migbake: {profile}: invalid" + (f", {consequence}" if consequence else ""), err=True)
        sys.exit(EXIT_INVALID)
    return checked.profile


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="migbake")
@click.option("--debug", is_flag=True, help="Show a traceback when something fails.")
def main(debug: bool) -> None:
    """Bake NVIDIA MIG layouts into golden images and first-boot user-data.

    A node profile (YAML) says which GPUs a node has and which MIG layout to restore. migbake
    validates it (schema, profile names, counts, exact placement) and generates the
    nvidia-mig-parted config, a oneshot restore unit ordered before kubelet, the kubelet drop-in,
    cloud-init user-data, Packer templates and provisioner scripts, and verify/uninstall/capture
    scripts.

    Exit codes: 0 ok, 1 invalid input or stale output, 2 usage, 3 internal error.
    """
    _State.debug = debug or os.environ.get("MIGBAKE_DEBUG") == "1"


# --- validate ----------------------------------------------------------------------------------

PROFILE_GLOBS = ("node-profile.yaml", "node-profile.yml", "*.profile.yaml", "*.profile.yml")


def _expand(paths: tuple[str, ...]) -> Iterator[Path]:
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted({f for g in PROFILE_GLOBS for f in p.rglob(g) if f.is_file()})
            if not found:
                raise click.UsageError(f"{raw}: no node-profile.yaml or *.profile.yaml below this directory")
            yield from found
        else:
            yield p


@main.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "github", "sarif", "junit"]),
              default="text", show_default=True,
              help="text: one line per problem; json; github: Actions annotations; sarif: SARIF 2.1.0; "
                   "junit: JUnit XML.")
@click.option("-q", "--quiet", is_flag=True, help="Text format: problems only, no summary line.")
@_guard
def validate(profiles: tuple[str, ...], fmt: str, quiet: bool) -> None:
    """Check node profiles: schema, GPU models, MIG profile names, counts and placement.

    PROFILE is a file, or a directory searched for node-profile.yaml and *.profile.yaml. In text
    format every problem is printed as FILE:LINE:COL: error: /json/pointer: message [rule], then a
    count; colour only on a terminal and never with NO_COLOR. Exit 0 when all profiles are valid
    (warnings allowed), 1 when any is invalid.
    """
    from migbake.report import FileResult, render_report, summary
    from migbake.validate import check_file

    results = [FileResult(str(f), check_file(f).problems) for f in _expand(profiles)]
    color = fmt == "text" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    click.echo(render_report(fmt, results, color=color, with_summary=not quiet), nl=False, color=color)
    if fmt == "github" and not quiet:
        click.echo(summary(results), err=True)
    if any(r.errors for r in results):
        sys.exit(EXIT_INVALID)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --- generate ----------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output directory (created, or replaced as a whole if migbake made it).")
@click.option("--force", is_flag=True, help="Replace OUT even if it is not empty and migbake did not create it.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 and show a diff if OUT differs from what would be generated.")
@click.option("--user-data-gzip", is_flag=True,
              help="Also write cloud-init/user-data.gz (cloud-init inflates it; for EC2's 16 KB limit).")
@click.option("--user-data-mime", "mime_part", metavar="FILE[:TYPE]",
              help="Also write cloud-init/user-data.mime: a multi-part user-data with FILE (your own part, "
                   "e.g. a shell script or cloud-config; TYPE such as x-shellscript if its first line does "
                   "not tell) first, then migbake's cloud-config merged onto it.")
@_guard
def generate(profile: Path, out: Path, force: bool, check: bool, user_data_gzip: bool,
             mime_part: str | None) -> None:
    """Generate the restore artifacts, cloud-init user-data and Packer templates for PROFILE.

    Nothing is written when the profile is invalid (exit 1). The tree is built beside OUT and
    swapped in at once, so OUT is never half-written.
    """
    from migbake.render import render
    from migbake.write import diff_tree, write_tree

    artifacts = render(_valid_profile(profile, "nothing written"))
    artifacts += _user_data_forms(artifacts, user_data_gzip, mime_part)
    if check:
        diff = diff_tree(artifacts, out)
        if diff:
            for line in diff:
                click.echo(line)
            click.echo(f"migbake: {out} is stale: run `migbake generate {profile} -o {out}`", err=True)
            sys.exit(EXIT_INVALID)
        click.echo(f"{out}: up to date ({_plural(len(artifacts), 'file')})")
        return
    write_tree(artifacts, out, force=force)
    click.echo(f"wrote {_plural(len(artifacts), 'file')} to {out}")


def _user_data_forms(artifacts: list[Any], gzipped: bool, mime_part: str | None) -> list[Any]:
    from migbake import userdata
    from migbake.render import Artifact

    text = next(str(a.content) for a in artifacts if a.path == "cloud-init/user-data")
    extra = []
    if gzipped:
        extra.append(Artifact("cloud-init/user-data.gz", userdata.gzip_user_data(text), 0o644))
    if mime_part:
        src, kind = Path(mime_part), ""
        if not src.is_file() and ":" in mime_part:
            path, kind = mime_part.rsplit(":", 1)
            src = Path(path)
        try:
            theirs = src.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise click.BadParameter(f"cannot read {src}: {e}", param_hint="--user-data-mime") from e
        try:
            mime = userdata.mime_user_data(text, theirs, src.name, kind or None)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--user-data-mime") from e
        extra.append(Artifact("cloud-init/user-data.mime", mime, 0o644))
    for name, data in [("cloud-init/user-data", text.encode())] + [(a.path, a.data) for a in extra]:
        if userdata.too_big_for_ec2(data) and not (gzipped and name == "cloud-init/user-data"):
            click.echo(f"migbake: warning: {name} is {len(data)} bytes, above EC2's 16 KB user-data limit "
                       "(use --user-data-gzip)", err=True)
    return extra


# --- images ------------------------------------------------------------------------------------

@main.command()
@click.argument("images_dir", default="images", type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any generated/ is stale.")
@_guard
def images(images_dir: Path, check: bool) -> None:
    """Regenerate (or --check) every IMAGES_DIR/*/generated from its node-profile.yaml.

    For a repository of golden images laid out as images/<name>/node-profile.yaml: one command
    keeps every committed output tree up to date, and `--check` fails CI (or a pre-commit hook)
    when one is stale. Exit 1 if any profile is invalid or any tree is stale.
    """
    from migbake.render import render
    from migbake.validate import check_file
    from migbake.write import diff_tree, write_tree

    profiles = sorted(images_dir.glob("*/node-profile.yaml"))
    if not profiles:
        raise click.UsageError(f"{images_dir}: no */node-profile.yaml found")
    failed = 0
    for profile in profiles:
        out = profile.parent / "generated"
        checked = check_file(profile)
        for p in checked.problems:
            click.echo(p.format(), err=True)
        if checked.profile is None:
            failed += 1
            continue
        artifacts = render(checked.profile)
        if check:
            diff = diff_tree(artifacts, out)
            for line in diff:
                click.echo(line)
            failed += bool(diff)
            click.echo(f"{out}: {'stale' if diff else 'up to date'}", err=bool(diff))
        else:
            write_tree(artifacts, out)
            click.echo(f"wrote {out}")
    if failed:
        what = "stale or invalid" if check else "invalid"
        click.echo(f"migbake: {_plural(failed, 'image')} {what}; run `migbake images {images_dir}`", err=True)
        sys.exit(EXIT_INVALID)


# --- gpus --------------------------------------------------------------------------------------

@main.command()
@click.option("--profiles", "show_profiles", is_flag=True, help="Also list each model's MIG profiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_guard
def gpus(show_profiles: bool, as_json: bool) -> None:
    """List the GPU models migbake knows: ids, names, aliases, PCI ids, MIG profiles."""
    from migbake.catalog import load_catalog

    cat = load_catalog()
    if as_json:
        rows = [{
            "id": m.key, "names": list(m.names), "aliases": list(m.aliases), "generation": m.generation,
            "pci_device_ids": list(m.pci_device_ids), "mig_mode_persists_across_reboot": m.mig_mode_persists,
            "compute_slices": m.total_compute_slices, "memory_slices": m.total_memory_slices,
            "profiles": [{"name": p.name, "max_count": p.max_count, "memory_slices": p.memory_slices,
                          "compute_slices": p.compute_slices} for p in m.profiles],
        } for m in cat.models]
        click.echo(json.dumps(rows, indent=2))
        return
    for m in cat.models:
        persist = "mode survives reboot" if m.mig_mode_persists else "mode lost at reboot"
        click.echo(f"{m.key:<30} {m.generation:<10} {persist:<22} {', '.join(m.pci_device_ids)}")
        click.echo(f"{'':<30} names: {', '.join(m.names + m.aliases)}")
        if show_profiles:
            for p in m.profiles:
                click.echo(f"{'':<30} {p.name:<16} max {p.max_count}  memory slices {p.memory_slices}/"
                           f"{m.total_memory_slices}  compute slices {p.compute_slices}/"
                           f"{m.total_compute_slices}")


# --- bake --------------------------------------------------------------------------------------

def _profile_and_out(target: Path, out: Path | None) -> tuple[Path, Path]:
    if target.is_dir():
        profile = target / "node-profile.yaml"
        if not profile.is_file():
            raise click.BadParameter(f"{target} has no node-profile.yaml", param_hint="PROFILE|IMAGE_DIR")
        return profile, out or target / "generated"
    if not target.is_file():
        raise click.BadParameter(f"{target} does not exist", param_hint="PROFILE|IMAGE_DIR")
    return target, out or target.parent / "generated"


@main.command()
@click.argument("target", metavar="PROFILE|IMAGE_DIR", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Where to generate (default: IMAGE_DIR/generated, or `generated` beside PROFILE).")
@click.option("--only", multiple=True, metavar="SOURCE",
              help="Build only this source: amazon-ebs.golden or null.ssh (repeatable).")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="A Packer variable (repeatable).")
@click.option("--var-file", "var_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A Packer variables file (repeatable).")
@click.option("--packer", "packer_bin", metavar="PATH", help="The Packer binary (default: $MIGBAKE_PACKER or packer).")
@click.option("--dry-run", is_flag=True, help="Generate, then print the Packer commands instead of running them.")
@_guard
def bake(target: Path, out: Path | None, only: tuple[str, ...], variables: tuple[str, ...],
         var_files: tuple[Path, ...], packer_bin: str | None, dry_run: bool) -> None:
    """Generate, then bake an image with Packer: [init], fmt -check, validate, build.

    Packer's output is streamed. If a step fails, migbake names the step and Packer's exit code and
    exits 1; if Packer is missing it says how to install it.
    """
    from migbake import packer
    from migbake.problems import PackerError
    from migbake.render import render
    from migbake.write import write_tree

    profile, out_dir = _profile_and_out(target, out)
    for s in only:
        if s not in ("amazon-ebs.golden", "null.ssh"):
            raise click.BadParameter(f"{s!r}: the sources are amazon-ebs.golden and null.ssh", param_hint="--only")
    try:
        packer.check_vars(variables)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--var") from e
    prof = _valid_profile(profile, "nothing baked")
    write_tree(render(prof), out_dir)
    click.echo(f"generated {out_dir}")
    if dry_run:
        binary = packer_bin or os.environ.get("MIGBAKE_PACKER") or "packer"
        try:
            version = packer.packer_version(packer.find_packer(packer_bin))
        except PackerError:
            version = (1, 7, 0)  # not installed: show what a current Packer would run
        steps = packer.plan_bake(out_dir / "packer", binary=binary, version=version, only=only,
                                 variables=variables, var_files=var_files)
        for step in steps:
            click.echo(step.display())
        return
    binary = packer.find_packer(packer_bin)
    steps = packer.plan_bake(out_dir / "packer", binary=binary, version=packer.packer_version(binary),
                             only=only, variables=variables, var_files=var_files)
    packer.run_steps(steps, on_line=click.echo)
    click.echo(f"migbake: baked {prof.name} ({', '.join(only) or 'all sources'})")


# --- boot-test ---------------------------------------------------------------------------------

@main.command("boot-test")
@click.argument("profile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--path", "paths", type=click.Choice(["packer", "cloud-init", "both"]), default="both",
              show_default=True, help="Deliver the artifacts with a real Packer build, a NoCloud seed, or both.")
@click.option("--scenario", type=click.Choice(["ok", "fail-apply", "fail-assert", "all"]), default="all",
              show_default=True, help="ok, or a simulated mig-parted whose apply/assert fails.")
@click.option("--boots", type=click.IntRange(1, 5), default=2, show_default=True,
              help="Boots per ok run (faults boot once).")
@click.option("--keep", is_flag=True, help="Keep the disk images of every run (default: only of failing runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path),
              help="Where the Debian rootfs and kernel are cached (default: $MIGBAKE_CACHE or /var/cache/migbake).")
@_guard
def boot_test(profile: Path, paths: str, scenario: str, boots: int, keep: bool, as_json: bool,
              cache: Path | None) -> None:
    """Boot PROFILE's artifacts in a throwaway VM (QEMU, systemd as PID 1) and check the boot order.

    Builds (and caches) a minimal Debian rootfs with systemd and cloud-init and a kernel, installs a
    simulated nvidia-smi / nvidia-mig-parted and a fake kubelet, delivers the generated files through
    the Packer provisioner or the cloud-init user-data, boots, and reads the results back from the disk.
    Claims, on every boot: nvidia-smi < apply < assert < kubelet; a failing apply or assert keeps kubelet
    down (unless on_failure: continue) and the console says why; the packaged manager never runs; the
    layout comes back after a reboot; a manual stop of the restore is refused. Needs root. Exit 0 only
    if every claim holds.
    """
    import tempfile

    from migbake.boottest import BootTestError, prepare_assets, run_boot_test
    from migbake.migconfig import group_models
    from migbake.render import render
    from migbake.write import write_tree

    prof = _valid_profile(profile)
    generation: Literal["hopper", "ampere"] = (
        "ampere" if all(m.mig_mode_persists for m in group_models(prof)) else "hopper")
    all_paths: list[Literal["packer", "cloud-init"]] = ["packer", "cloud-init"]
    chosen_paths = [p for p in all_paths if paths in (p, "both")]
    all_scenarios: list[Literal["ok", "fail-apply", "fail-assert"]] = ["ok", "fail-apply", "fail-assert"]
    scenarios = [s for s in all_scenarios if scenario in (s, "all")]
    log = (lambda line: click.echo(line, err=True)) if not as_json else (lambda line: None)
    results = []
    with tempfile.TemporaryDirectory(prefix="migbake-boottest-") as tmp:
        out = Path(tmp) / "out"
        write_tree(render(prof), out)
        try:
            assets = prepare_assets(cache_root=cache, log=log)
            for path in chosen_paths:
                for sc in scenarios:
                    results.append(run_boot_test(
                        out, path=path, scenario=sc, boots=boots if sc == "ok" else 1, gpu_generation=generation,
                        on_failure="keep", assets=assets, cache_root=cache, log=log,
                        expect=prof.restore.on_failure))
        except BootTestError as e:
            raise click.ClickException(f"boot test could not run: {e}") from e
    if not keep:
        for r in results:
            if r.passed:
                import shutil

                shutil.rmtree(r.work_dir, ignore_errors=True)
    ok = all(r.passed for r in results)
    if as_json:
        click.echo(json.dumps({"profile": prof.name, "generation": generation, "passed": ok, "runs": [{
            "path": r.path, "scenario": r.scenario, "passed": r.passed, "work_dir": str(r.work_dir),
            "timings_s": {k: round(v, 1) for k, v in r.timings.items()},
            "boots": [{"boot": b.index, "passed": b.passed, "seconds": round(b.duration_s, 1),
                       "claims": [{"id": c.id, "passed": c.passed, "claim": c.description,
                                   "evidence": c.evidence} for c in b.claims]} for b in r.boots],
        } for r in results]}, indent=2))
    else:
        click.echo(f"{'PATH':<11}{'SCENARIO':<12}{'BOOT':<5}{'RESULT':<7}CLAIM")
        for r in results:
            for b in r.boots:
                for c in b.claims:
                    click.echo(f"{r.path:<11}{r.scenario:<12}{b.index:<5}{'pass' if c.passed else 'FAIL':<7}"
                               f"{c.id}: {c.description}" + ("" if c.passed else f"\n{'':<35}{c.evidence}"))
        times = ", ".join(f"{r.path}/{r.scenario} {sum(b.duration_s for b in r.boots):.0f} s" for r in results)
        click.echo(f"\n{'all claims hold' if ok else 'SOME CLAIMS FAILED'} ({times} of boots)")
    if not ok:
        sys.exit(EXIT_INVALID)


# --- layouts -----------------------------------------------------------------------------------

@main.command()
@click.argument("model")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--no-media", is_flag=True, help="Leave out media-extension (+me) profiles.")
@_guard
def layouts(model: str, as_json: bool, no_media: bool) -> None:
    """List every maximal MIG layout of MODEL (no further instance can be added).

    MODEL is a catalog id, name or alias (see `migbake gpus`). Each layout was found by an exact
    placement search over the model's profiles, counts and placements.
    """
    from migbake.catalog import load_catalog
    from migbake.layout import fit, maximal_layouts

    cat = load_catalog()
    m = cat.find(model)
    if m is None:
        close = cat.close_matches(model)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise click.BadParameter(f"unknown GPU model {model!r}.{hint}", param_hint="MODEL")
    found = maximal_layouts(m, include_media=not no_media)
    if as_json:
        click.echo(json.dumps({"model": m.key, "count": len(found), "layouts": [
            {"mig-devices": lay, "placements": [
                {"profile": p.profile, "start": p.start, "size": p.size} for p in fit(m, lay).placements]}
            for lay in found]}, indent=2))
        return
    click.echo(f"{m.key} ({m.display_name}): {_plural(len(found), 'maximal layout')}")
    for lay in found:
        click.echo("  " + ", ".join(f"{n} x{c}" for n, c in lay.items()))


# --- show --------------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=click.Path(dir_okay=False, path_type=Path))
@_guard
def show(profile: Path) -> None:
    """Draw each GPU's memory slices with the profile's MIG instances placed on them."""
    from migbake.layout import fit
    from migbake.migconfig import group_models
    from migbake.render import gpu_notes
    from migbake.slicemap import render_slice_map

    prof = _valid_profile(profile)
    click.echo(f"{prof.name}: {prof.description}" if prof.description else prof.name)
    from migbake.catalog import load_catalog

    cat = load_catalog()
    for note in gpu_notes(prof, cat):
        click.echo(f"  {note}")
    for i, (group, m) in enumerate(zip(prof.gpus, group_models(prof, cat))):
        devices = "all GPUs" if group.devices == "all" else "GPUs " + ", ".join(map(str, group.devices))
        click.echo(f"\n/gpus/{i}: {m.key}, {devices}")
        if not group.mig_enabled:
            click.echo("  MIG disabled: the whole GPU is one device")
            continue
        layout = group.layout_dict
        if not layout:
            click.echo("  MIG enabled, no instances")
            continue
        click.echo("  " + ", ".join(f"{n} x{c}" for n, c in layout.items()))
        click.echo(render_slice_map(m, fit(m, layout).placements))
    from migbake.kubernetes import resource_report

    for line in resource_report(prof, cat):
        click.echo(line)


# --- preflight ---------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi -q -x` captured on the node.")
@click.option("--nvidia-smi-csv", "csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Output of `nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current "
                   "--format=csv` (with or without the header).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_guard
def preflight(profile: Path, xml_file: Path | None, csv_file: Path | None, as_json: bool) -> None:
    """Check captured nvidia-smi output of a node against PROFILE, offline (for CI and support tickets).

    The GPU checks of scripts/preflight-mig-restore.sh: GPU count, models (PCI ids) and indices of
    every gpus entry, and the current MIG state. Checks that need the node itself are SKIP. Exit 0
    when no check failed, 1 when one did (or the profile is invalid), 2 for bad usage or an
    unreadable capture.
    """
    from migbake.preflight import CaptureError, check_capture, read_capture, table

    capture_file = xml_file or csv_file
    if capture_file is None or (xml_file is not None and csv_file is not None):
        raise click.UsageError("give exactly one of --nvidia-smi-xml FILE or --nvidia-smi-csv FILE")
    prof = _valid_profile(profile, "nothing checked")
    try:
        capture = read_capture(capture_file, "nvidia-smi-xml" if xml_file is not None else "nvidia-smi-csv")
    except CaptureError as e:
        click.echo(f"migbake: error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    result = check_capture(prof, capture)
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
@click.option("--model", metavar="ID", help="The GPU model of entries without a device-filter (`migbake gpus`).")
@click.option("--nvidia-smi-xml", "xml_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="`nvidia-smi -q -x` of the node: the GPU models and gpu_count; every GPU must be covered.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the profile here (default: standard output).")
@click.option("--name", default="", help="The profile's name (default: imported-<models>).")
@click.option("--force", is_flag=True, help="Replace an existing OUTPUT.")
@_guard
def import_(source: Path, config_name: str | None, model: str | None, xml_file: Path | None,
            output: Path | None, name: str, force: bool) -> None:
    """Turn an nvidia-mig-parted config (e.g. `nvidia-mig-parted export` of a known-good node) into a node profile.

    The GPU model comes from each entry's device-filter, else from --model or --nvidia-smi-xml.
    Whatever a profile cannot represent exactly is refused with its reason and location (exit 1):
    another version, several configs without --config, malformed or unknown device-filter ids, MIG
    devices with mig-enabled false, overlapping entries, ... The result is validated like any profile.
    """
    from migbake.catalog import load_catalog
    from migbake.importer import ImportRefused, import_config
    from migbake.preflight import CaptureError, read_capture

    if model is not None and xml_file is not None:
        raise click.UsageError("give --model or --nvidia-smi-xml, not both")
    cat = load_catalog()
    gpu = cat.find(model) if model is not None else None
    if model is not None and gpu is None:
        close = cat.close_matches(model)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise click.BadParameter(f"unknown GPU model {model!r}.{hint}", param_hint="--model")
    try:
        capture = read_capture(xml_file, "nvidia-smi-xml") if xml_file is not None else None
    except CaptureError as e:
        click.echo(f"migbake: error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    display = "-" if str(source) == "-" else str(source)
    with click.open_file(display, "rb") as fh:
        data = fh.read(1024 * 1024)
    try:
        result = import_config(data, display, config=config_name, model=gpu, capture=capture, name=name)
    except ImportRefused as e:
        for p in e.problems:
            click.echo(p.format(), err=True)
        click.echo(f"migbake: {display}: cannot import ({_plural(len(e.problems), 'problem')}), nothing written",
                   err=True)
        sys.exit(EXIT_INVALID)
    for p in result.warnings:
        click.echo(p.format(), err=True)
    _write_or_print(result.text, output, force)


@main.command()
@click.argument("profile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--gpu-operator", is_flag=True,
              help="A GPU Operator mig-manager ConfigMap (custom config) instead of the plain mig-parted config.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (default: standard output).")
@_guard
def export(profile: Path, gpu_operator: bool, output: Path | None) -> None:
    """Print PROFILE's layout for use outside the image: the mig-parted config, or (--gpu-operator) a ConfigMap.

    The ConfigMap is named <profile>-mig-parted-config with key config.yaml; the operator's mig-manager
    applies it on nodes labelled nvidia.com/mig.config=<restore.config_name>.
    """
    from migbake.catalog import load_catalog
    from migbake.kubernetes import CONFIG_LABEL, configmap_name, gpu_operator_configmap
    from migbake.migconfig import mig_parted_config_text
    from migbake.render import header

    prof, cat = _valid_profile(profile, "nothing exported"), load_catalog()
    if not gpu_operator:
        _write_or_print(header(prof) + "\n" + mig_parted_config_text(prof, cat), output)
        return
    _write_or_print(gpu_operator_configmap(prof, header(prof), cat), output)
    click.echo(f"migbake: ConfigMap {configmap_name(prof)}: select it on a node with the label "
               f"{CONFIG_LABEL}={prof.restore.config_name}", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
