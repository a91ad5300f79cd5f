"""How fast migbake is against its budgets, as ratios measured side by side in one run.

    python benchmarks/bench_cli.py [--rounds N] [--smoke] [--source CHECKOUT]

A Python command line cannot start faster than its interpreter plus the imports of its dependencies, so
the budgets are ratios to that floor, D = ``python -c "import click, jinja2, yaml, jsonschema"``, or to
a peer, measured in the same run. Everything runs in clean virtual environments made for the run, as a
user has them: one with a wheel built from a copy of CHECKOUT (default: this one) and its dependencies,
installed by pip (which compiles the bytecode), and one with ``check-jsonschema``; neither has pip,
setuptools or any ``.pth`` file. Every figure is the median of interleaved rounds: the commands take
turns in every round, so a busy moment of the machine hits all of them alike. The spread beside each
median is the interquartile range of its rounds.

Cold commands (a new process each; the first round, not counted, warms the page cache and every cache
migbake keeps): ``migbake generate PROFILE -o DIR``, ``migbake validate PROFILE``, ``check-jsonschema``
on the same profile and schema, ``migbake --version``. In one process: one profile's render (every
output, in memory) against validating it, and validating and rendering 1,000 distinct profiles against one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
# what a clean copy of a checkout leaves out: build outputs, caches, venvs, git
CLEAN_COPY_IGNORES = ("build", "dist", "*.egg-info", "__pycache__", ".venv", ".nox", ".git", ".*_cache",
                      ".hypothesis", "out", "images")

# validate and render N distinct profiles (their names differ) in one process: argv PROFILE N
BATCH = """
import sys
from migbake.render.tree import render
from migbake.rules.validate import check_bytes
text = open(sys.argv[1], encoding="utf-8").read()
for i in range(int(sys.argv[2])):
    checked = check_bytes(text.replace("name: h200-inference", f"name: node-{i}").encode(), f"p{i}.yaml")
    assert checked.profile is not None
    render(checked.profile)
"""

# one process, after a first profile: each later profile's validation and render, timed apart: argv PROFILE N
RENDER_VS_VALIDATE = """
import json, sys, time
from migbake.render.tree import render
from migbake.rules.validate import check_bytes
text = open(sys.argv[1], encoding="utf-8").read()
render(check_bytes(text.encode(), "warm.yaml").profile)
validate, generate = [], []
for i in range(int(sys.argv[2])):
    data = text.replace("name: h200-inference", f"name: node-{i}").encode()
    start = time.perf_counter()
    checked = check_bytes(data, f"p{i}.yaml")
    checked_at = time.perf_counter()
    assert checked.profile is not None
    render(checked.profile)
    validate.append(checked_at - start)
    generate.append(time.perf_counter() - checked_at)
print(json.dumps({"validate": validate, "render": generate}))
"""


class Timing:
    """The rounds of one measurement: median and interquartile spread, in seconds."""

    def __init__(self, samples: list[float]) -> None:
        self.samples = sorted(samples)
        self.median = statistics.median(self.samples)
        quart = statistics.quantiles(self.samples, n=4) if len(self.samples) > 1 else [self.median] * 3
        self.spread = quart[2] - quart[0]


def quiet(argv: list[str]) -> None:
    """Run a set-up command; its output is shown only when it fails."""
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    if ran.returncode:
        raise SystemExit(f"benchmark set-up failed ({ran.returncode}): {' '.join(argv)}\n{ran.stdout}{ran.stderr}")


def clean_venv(where: Path, base: str, *requirements: str) -> Path:
    """A new virtual environment at ``where`` of the interpreter ``base``, with only ``requirements``.

    No pip or setuptools in it (this Python's pip installs into it), so no ``.pth`` file runs at start-up.
    """
    quiet([base, "-m", "venv", "--without-pip", str(where)])
    python = where / "bin" / "python"
    quiet([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--disable-pip-version-check",
           *requirements])
    pth = sorted(p.name for p in where.glob("lib/python*/site-packages/*.pth"))
    if pth:
        raise SystemExit(f"benchmark venv {where} is not clean: {', '.join(pth)}")
    return python


def environments(root: Path, source: Path, base: str) -> tuple[Path, Path]:
    """(migbake's python, check-jsonschema's python): a wheel of a clean copy of ``source``, and the peer."""
    copy, dist = root / "source", root / "dist"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(*CLEAN_COPY_IGNORES))  # the source stays untouched
    quiet([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
           "--disable-pip-version-check", "-w", str(dist), str(copy)])
    wheel = next(dist.glob("migbake-*.whl"))
    return clean_venv(root / "migbake", base, str(wheel)), clean_venv(root / "peer", base, "check-jsonschema>=0.28")


def wall(argv: list[str]) -> float:
    """Seconds one command takes, start to exit; it must succeed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr}")
    return took


def interleaved(commands: dict[str, list[str]], rounds: int) -> dict[str, Timing]:
    """Each command's timing, the commands taking turns in every round, after one round not counted."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        wall(argv)
    for _ in range(rounds):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    return {name: Timing(t) for name, t in times.items()}


def budget_table(rows: list[tuple[str, Timing, str, Timing, float]]) -> bool:
    """Print (what, its timing, compared with, that timing, budget ratio) rows; whether every budget is met."""
    width = max(len(r[0]) for r in rows)
    to_width = max(len(r[2]) for r in rows)
    print(f"  {'':<{width}}  {'median ms':>9}  {'spread':>6}  {'':<{to_width}}  {'ms':>7}  {'ratio':>6}  budget")
    met = True
    for what, timing, to, base, budget in rows:
        ratio = timing.median / base.median
        met = met and ratio <= budget
        print(f"  {what:<{width}}  {timing.median * 1000:>9.1f}  {timing.spread * 1000:>6.1f}  {to:<{to_width}}  "
              f"{base.median * 1000:>7.1f}  {ratio:>5.2f}x  <= {budget:g}x {'met' if ratio <= budget else 'NOT MET'}")
    return met


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print the budgets table; exit 0 whether or not every budget is met."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="rounds per measurement (median reported)")
    parser.add_argument("--smoke", action="store_true", help="2 rounds and 10 profiles instead of 1,000: it runs")
    parser.add_argument("--source", type=Path, default=HERE, help="the checkout to build migbake from (default: "
                        "this one); it is copied, never written to")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="the interpreter of the clean environments (default: this one, outside any venv)")
    args = parser.parse_args(argv)
    rounds = 2 if args.smoke else max(2, args.rounds)
    many = 10 if args.smoke else 1000
    source = args.source.resolve()
    profile = source / "images" / "h200-inference" / "node-profile.yaml"
    schema = source / "schemas" / "node-profile.schema.json"

    with tempfile.TemporaryDirectory() as tmp:
        py_path, peer_py = environments(Path(tmp), source, args.python)
        py, migbake = str(py_path), str(py_path.parent / "migbake")
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip() or "?"
        version = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        print(f"migbake benchmarks of {source} ({commit}): {rounds} rounds, median wall time; python {version}, "
              "clean venvs (no .pth), migbake installed from a wheel")

        cold = interleaved({
            "python -c pass": [py, "-c", "pass"],
            "D": [py, "-c", "import click, jinja2, yaml, jsonschema"],
            "generate": [migbake, "generate", str(profile), "-o", str(Path(tmp) / "out")],
            "validate": [migbake, "validate", str(profile)],
            "check-jsonschema": [str(peer_py.parent / "check-jsonschema"), "--schemafile", str(schema), str(profile)],
            "--version": [migbake, "--version"],
        }, rounds)
        inside = json.loads(subprocess.run([py, "-c", RENDER_VS_VALIDATE, str(profile), str(max(rounds, 10) * 3)],
                                           capture_output=True, text=True, check=True).stdout)
        batch = interleaved({str(n): [py, "-c", BATCH, str(profile), str(n)] for n in (1, many)}, rounds)

        d = cold["D"]
        print(f"\n  python -c pass {cold['python -c pass'].median * 1000:.1f} ms; "
              f"D = python -c \"import click, jinja2, yaml, jsonschema\" {d.median * 1000:.1f} ms\n")
        met = budget_table([
            ("cold migbake generate PROFILE -o DIR", cold["generate"], "D", d, 2.0),
            ("cold migbake validate PROFILE", cold["validate"], "D", d, 1.2),
            ("cold migbake validate PROFILE", cold["validate"], "check-jsonschema", cold["check-jsonschema"], 0.6),
            ("migbake --version", cold["--version"], "D", d, 0.5),
            ("render one profile (in process)", Timing(inside["render"]), "validate it", Timing(inside["validate"]),
             15.0),
            (f"validate+render {many:,} profiles (one process)", batch[str(many)], "one profile", batch["1"], 40.0),
        ])
        print(f"\n  {'every budget met' if met else 'some budget NOT MET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
