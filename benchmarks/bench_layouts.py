"""Time maximal_layouts for every GPU in the catalog: python benchmarks/bench_layouts.py [--repeat N]."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from migbake.gpu.catalog import load_catalog
from migbake.gpu.maximal import maximal_layouts


def best_ms(func: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` calls, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main(argv: list[str] | None = None) -> int:
    """Print one row per GPU model: maximal layouts with and without +me, and the time to find them."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="calls per model; the best is reported")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    rows = []
    total = 0.0
    for model in load_catalog().models:
        ms = best_ms(partial(maximal_layouts, model), args.repeat)
        base_ms = best_ms(partial(maximal_layouts, model, include_media=False), args.repeat)
        rows.append((model.key, len(maximal_layouts(model)), f"{ms:.2f}",
                     len(maximal_layouts(model, include_media=False)), f"{base_ms:.2f}"))
        total += ms + base_ms
    header = ("model", "maximal", "ms", "maximal (no +me)", "ms (no +me)")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in
                        enumerate(zip(row, widths))))
    print(f"total {total:.2f} ms (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
