"""How fast migbake is, as ratios measured side by side in one run (these machines are noisy).

    python benchmarks/bench_cli.py [--rounds N] [--smoke]

Everything runs in clean virtual environments made for the run, as a user has them: one with a
non-editable install of a wheel built from this checkout (pip compiles its bytecode) and its
dependencies, one with the peer ``check-jsonschema``; neither has pip, setuptools or any ``.pth`` file,
and the floor runs in migbake's (a test venv's editable-install ``.pth`` files make ``python -c pass``
much slower, and every ratio to it look that much better). Every figure is a median of interleaved
rounds (the commands take turns in every round, so a busy moment of the
machine hits all of them alike), and every target is a ratio to something measured in the same run:
the interpreter's floor (``python -c pass``) or a peer.

1. Cold start (a new process, as pre-commit and CI run it): ``migbake validate`` of one valid
   profile against ``check-jsonschema --schemafile`` on the same file (a peer that checks the schema
   only, while migbake also checks layouts), ``cloud-init schema`` on the generated user-data, and
   the floor; ``migbake --version`` and ``migbake gpus`` against the floor.
2. One process validating and generating (rendering in memory) 1, 100 and 1,000 distinct profiles, and the
   minor page faults one more profile costs (the kernel's count: the same on a busy machine); and, in one
   process, one profile's render (every output, in memory) against validating it.
3. ``migbake validate DIR`` over a directory of 1,000 distinct profiles against one profile, cold.
4. ``migbake layouts`` for every catalog GPU, in one process (maximal-layout enumeration).

The spread printed beside each median is the interquartile range of its rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "images" / "h200-inference" / "node-profile.yaml"
SCHEMA = REPO / "schemas" / "node-profile.schema.json"

BATCH = """
import sys
from migbake.render.tree import render
from migbake.rules.validate import check_bytes
text = open(sys.argv[1], encoding="utf-8").read()
files = 0
for i in range(int(sys.argv[2])):
    checked = check_bytes(text.replace("name: h200-inference", f"name: node-{i}").encode(), f"p{i}.yaml")
    assert checked.profile is not None
    files += len(render(checked.profile))
print(files)
"""

RENDER_VS_VALIDATE = """
import json, sys, time
from migbake.render.tree import render
from migbake.rules.validate import check_bytes
text = open(sys.argv[1], encoding="utf-8").read()
check_bytes(text.encode(), "warm.yaml")
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
print(json.dumps({"validate": validate[1:], "render": generate[1:]}))
"""

LAYOUTS = """
from migbake.gpu.catalog import load_catalog
from migbake.gpu.maximal import maximal_layouts
print(sum(len(maximal_layouts(m)) for m in load_catalog().models))
"""


class Timing:
    """The rounds of one command: median and interquartile spread, in seconds."""

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


def environments(root: Path, base: str) -> tuple[Path, Path]:
    """(migbake's python, check-jsonschema's python): a wheel of this checkout, and the peer, each alone."""
    dist = root / "dist"
    quiet([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
           "--disable-pip-version-check", "-w", str(dist), str(REPO)])
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


def page_faults(argv: list[str]) -> int:
    """The minor page faults of one run of a command (the kernel's count for the process: the same on a busy machine
    as on a quiet one)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"benchmark command failed ({status}): {' '.join(argv)}")
    return usage.ru_minflt


def interleaved(commands: dict[str, list[str]], rounds: int) -> dict[str, Timing]:
    """Each command's timing, the commands taking turns in every round."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # warm the page cache once
        wall(argv)
    for _ in range(rounds):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    return {name: Timing(t) for name, t in times.items()}


def table(title: str, rows: list[tuple[str, Timing, str, float, float | None]]) -> None:
    """Print rows of (what, timing, ratio-to name, ratio, target ratio or None)."""
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    print(f"  {'':<{width}}  {'median ms':>9}  {'spread':>7}  {'ratio':>18}  target")
    for what, timing, to, ratio, target in rows:
        verdict = "" if target is None else f"<= {target:g}x {'met' if ratio <= target else 'NOT MET'}"
        print(f"  {what:<{width}}  {timing.median * 1000:>9.1f}  {timing.spread * 1000:>7.1f}  "
              f"{ratio:>6.2f}x {to:<10}  {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="rounds per measurement (median reported)")
    parser.add_argument("--smoke", action="store_true", help="2 rounds and 1/3/10 profiles: check it runs")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="the interpreter of the clean environments (default: this one, outside any venv)")
    args = parser.parse_args(argv)
    rounds = 2 if args.smoke else max(2, args.rounds)
    counts = (1, 3, 10) if args.smoke else (1, 100, 1000)

    with tempfile.TemporaryDirectory() as tmp:
        py_path, peer_py = environments(Path(tmp), args.python)
        py, migbake = str(py_path), str(py_path.parent / "migbake")
        version = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        print(f"migbake benchmarks: {rounds} rounds, median wall time; python {version} in a clean venv "
              "(no .pth), migbake installed from a wheel")
        out = Path(tmp) / "out"
        subprocess.run([migbake, "generate", str(PROFILE), "-o", str(out)], check=True, stdout=subprocess.DEVNULL)
        many = Path(tmp) / "profiles"
        text = PROFILE.read_text(encoding="utf-8")
        for i in range(counts[-1]):
            folder = many / f"node-{i:04d}"
            folder.mkdir(parents=True)
            (folder / "node-profile.yaml").write_text(text.replace("name: h200-inference", f"name: node-{i}"))

        commands = {"python -c pass (floor)": [py, "-c", "pass"],
                    "python -c pass (caller's venv)": [sys.executable, "-c", "pass"],
                    "migbake validate PROFILE": [migbake, "validate", str(PROFILE)],
                    "migbake --version": [migbake, "--version"],
                    "migbake gpus": [migbake, "gpus"]}
        commands["check-jsonschema (schema only)"] = [str(peer_py.parent / "check-jsonschema"), "--schemafile",
                                                      str(SCHEMA), str(PROFILE)]
        cloud_init = shutil.which("cloud-init")  # a system tool, with the system's Python
        if cloud_init:
            commands["cloud-init schema (user-data)"] = [cloud_init, "schema", "--config-file",
                                                         str(out / "cloud-init/user-data")]
        commands[f"migbake validate DIR ({counts[-1]})"] = [migbake, "validate", str(many)]
        cold = interleaved(commands, rounds)
        missing = [] if cloud_init else ["cloud-init"]

        floor = cold["python -c pass (floor)"]
        one = cold["migbake validate PROFILE"]
        peer = cold.get("check-jsonschema (schema only)")
        caller = cold["python -c pass (caller's venv)"]
        rows = [("python -c pass (floor)", floor, "floor", 1.0, None),
                ("python -c pass (caller's venv)", caller, "floor", caller.median / floor.median, None),
                ("migbake validate PROFILE", one, "floor", one.median / floor.median, 5.0)]
        if peer is not None:
            rows += [("migbake validate PROFILE", one, "peer", one.median / peer.median, 0.35),
                     ("check-jsonschema (schema only)", peer, "floor", peer.median / floor.median, None)]
        for name in ("migbake --version", "migbake gpus"):
            rows.append((name, cold[name], "floor", cold[name].median / floor.median, 3.0))
        if "cloud-init schema (user-data)" in cold:
            ci = cold["cloud-init schema (user-data)"]
            rows.append(("cloud-init schema (user-data)", ci, "floor", ci.median / floor.median, None))
        table("1. cold start, a new process each time (floor: python -c pass; peer: check-jsonschema)", rows)
        if missing:
            print(f"  (not measured, not installed: {', '.join(missing)})")

        batch = interleaved({str(n): [py, "-c", BATCH, str(PROFILE), str(n)] for n in counts}, rounds)
        first = batch[str(counts[0])]
        table("2. validate + generate N distinct profiles in one process; ratio to N=1",
              [(f"{n:>5} profiles", batch[str(n)], "N=1", batch[str(n)].median / first.median,
                15.0 if n == counts[-1] else None) for n in counts])
        faults = [page_faults([py, "-c", BATCH, str(PROFILE), str(n)]) for n in (counts[0], counts[-1])]
        print(f"  minor page faults of one more profile: {(faults[1] - faults[0]) / (counts[-1] - counts[0]):.1f}")
        inside = json.loads(subprocess.run([py, "-c", RENDER_VS_VALIDATE, str(PROFILE), str(max(rounds, 10) * 3)],
                                           capture_output=True, text=True, check=True).stdout)
        check, make = Timing(inside["validate"]), Timing(inside["render"])
        table("2b. one profile in one process (after a first, warm): its render against validating it",
              [("validate one profile", check, "validate", 1.0, None),
               ("render one profile", make, "validate", make.median / check.median, 15.0)])

        many_dir = cold[f"migbake validate DIR ({counts[-1]})"]
        table(f"3. migbake validate over a directory of {counts[-1]} profiles; ratio to one profile, cold",
              [(f"validate DIR ({counts[-1]})", many_dir, "1 profile", many_dir.median / one.median, 2.0)])

        lay = interleaved({"layouts": [py, "-c", LAYOUTS]}, rounds)["layouts"]
        start = interleaved({"startup": [py, "-c", "import migbake.gpu.maximal"]}, rounds)["startup"]
        table("4. maximal layouts of every catalog GPU (one process); ratio to importing migbake.gpu.maximal",
              [("all catalog GPUs", lay, "import", lay.median / start.median, None)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
