"""Instructions one more profile costs in ``bench_cli``'s batch (validate + render in one process), counted by
valgrind: the same number on a busy machine as on a quiet one, so two trees compare in one line.

    python benchmarks/bench_instructions.py [--against REV] [--small 3] [--large 13]

Each tree runs the batch of ``bench_cli.py`` (its ``BATCH``, on images/h200-inference) under
``valgrind --tool=callgrind`` for ``--small`` and ``--large`` profiles with ``PYTHONHASHSEED=0``; a profile
costs the difference over the difference in profiles (start-up cancels out). ``--against REV`` counts a
git worktree of REV beside this checkout (made and removed here). Needs valgrind on PATH (Debian: the
``valgrind`` package); a count under valgrind takes a minute or two. Wall-clock ratios stay
``bench_cli.py``'s: this tells which of two trees does less work, not how long a user waits.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_cli import BATCH, PROFILE, REPO


def collected(tree: Path, profiles: int) -> int:
    """The instructions valgrind counts for the batch of ``profiles`` profiles with ``tree``'s package."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree / "generator")}
    ran = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                          BATCH, str(PROFILE), str(profiles)], capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", ran.stderr)
    if ran.returncode or found is None:
        raise SystemExit(f"valgrind run failed ({ran.returncode}) for {tree}:\n{ran.stderr[-2000:]}")
    return int(found.group(1))


def per_profile(tree: Path, small: int, large: int) -> float:
    """Instructions per profile: the batch of ``large`` less that of ``small``, over ``large - small``."""
    return (collected(tree, large) - collected(tree, small)) / (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REV", help="also count the tree of git revision REV")
    parser.add_argument("--small", type=int, default=3, help="profiles of the smaller batch (default 3)")
    parser.add_argument("--large", type=int, default=13, help="profiles of the larger batch (default 13)")
    args = parser.parse_args(argv)
    if not 0 < args.small < args.large:
        print("bench_instructions: --small must be at least 1 and less than --large", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("bench_instructions: valgrind is not on PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    here = per_profile(REPO, args.small, args.large)
    print(f"this checkout: {here / 1e6:.2f} M instructions per profile")
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            old = Path(tmp) / "tree"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(old), args.against],
                           check=True)
            try:
                then = per_profile(old, args.small, args.large)
            finally:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], check=False)
        print(f"{args.against}: {then / 1e6:.2f} M instructions per profile; this checkout / {args.against}: "
              f"{here / then:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
