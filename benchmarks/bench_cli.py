"""How fast migbake is, as ratios measured side by side in one run (these machines are noisy).

    python benchmarks/bench_cli.py [--rounds N] [--smoke]

1. Cold ``migbake validate`` of one profile (a new process, as CI and pre-commit run it) against
   ``check-jsonschema --schemafile schemas/node-profile.schema.json PROFILE`` (schema only) and
   ``cloud-init schema --config-file`` on the generated user-data. The commands run interleaved,
   round after round, and each figure is the median of its rounds.
2. One process validating and generating (rendering in memory) 1, 100 and 1,000 profiles: how the
   cost grows with the work. Each count is a fresh process; figures are medians.
3. ``migbake layouts`` for every catalog GPU, in one process (maximal-layout enumeration).

Every figure is also given as a ratio to a reference measured in the same run.
"""

from __future__ import annotations

import argparse
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
import sys, time
t0 = time.perf_counter()
from migbake.render import render
from migbake.validate import check_bytes
text = open(sys.argv[1], encoding="utf-8").read()
n = int(sys.argv[2])
files = 0
for i in range(n):
    checked = check_bytes(text.replace("name: h200-inference", f"name: node-{i}").encode(), f"p{i}.yaml")
    assert checked.profile is not None
    files += len(render(checked.profile))
print(files)
"""

LAYOUTS = """
from migbake.catalog import load_catalog
from migbake.layout import maximal_layouts
print(sum(len(maximal_layouts(m)) for m in load_catalog().models))
"""


def wall(argv: list[str]) -> float:
    """Seconds one command takes, start to exit; it must succeed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr}")
    return took


def interleaved(commands: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Median wall time of each command, the commands taking turns in every round."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # warm the page cache once
        wall(argv)
    for _ in range(rounds):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    return {name: statistics.median(t) for name, t in times.items()}


def table(title: str, rows: list[tuple[str, float, float]], unit: str = "ms") -> None:
    """Print rows of (what, seconds, ratio)."""
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    print(f"  {'':<{width}}  {unit:>9}  {'ratio':>7}")
    for what, seconds, ratio in rows:
        print(f"  {what:<{width}}  {seconds * 1000:>9.1f}  {ratio:>6.2f}x")


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="rounds per measurement (median reported)")
    parser.add_argument("--smoke", action="store_true", help="2 rounds and 1/10/100 profiles: check it runs")
    args = parser.parse_args(argv)
    rounds = 2 if args.smoke else max(1, args.rounds)
    counts = (1, 10, 100) if args.smoke else (1, 100, 1000)

    migbake = shutil.which("migbake")
    if not migbake:
        raise SystemExit("migbake is not installed: pip install .")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        subprocess.run([migbake, "generate", str(PROFILE), "-o", str(out)], check=True, stdout=subprocess.DEVNULL)
        commands = {"migbake validate (schema + MIG rules)": [migbake, "validate", str(PROFILE)]}
        peers_missing = []
        cjs = shutil.which("check-jsonschema")
        if cjs:
            commands["check-jsonschema (schema only)"] = [cjs, "--schemafile", str(SCHEMA), str(PROFILE)]
        else:
            peers_missing.append("check-jsonschema")
        ci = shutil.which("cloud-init")
        if ci:
            user_data = str(out / "cloud-init/user-data")
            commands["cloud-init schema (user-data)"] = [ci, "schema", "--config-file", user_data]
        else:
            peers_missing.append("cloud-init")
        cold = interleaved(commands, rounds)
    base = cold["migbake validate (schema + MIG rules)"]
    print(f"migbake benchmarks: {rounds} rounds, median wall time; python {sys.version.split()[0]}")
    table("1. cold validate of one profile (new process each time); ratio to migbake",
          [(k, v, v / base) for k, v in cold.items()])
    if peers_missing:
        print(f"  (not measured, not installed: {', '.join(peers_missing)})")

    batch = interleaved({str(n): [sys.executable, "-c", BATCH, str(PROFILE), str(n)] for n in counts}, rounds)
    one = batch[str(counts[0])]
    table("2. validate + generate N profiles in one process; ratio to N=1",
          [(f"{n:>5} profiles", batch[str(n)], batch[str(n)] / one) for n in counts])

    lay = interleaved({"layouts": [sys.executable, "-c", LAYOUTS]}, rounds)["layouts"]
    start = interleaved({"startup": [sys.executable, "-c", "import migbake.layout"]}, rounds)["startup"]
    table("3. maximal layouts of every catalog GPU (one process); ratio to importing migbake.layout",
          [("all catalog GPUs", lay, lay / start), ("import only", start, 1.0)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
