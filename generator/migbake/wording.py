"""How migbake words counts, index lists and layouts in its messages: one home for each phrase.

Rules, the placement search, the commands and the reports all say "2 problems", "GPU 0-2, 5" or
"1g.18gb x7"; they say it through these functions, so that a phrase reads the same everywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``: every count migbake prints."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def runs(values: Iterable[int]) -> list[tuple[int, int]]:
    """``[0, 1, 2, 5]`` -> ``[(0, 2), (5, 5)]``: the consecutive runs of ascending numbers."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def index_list(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``; two in a row stay apart (``0, 1``): GPU indices in a message."""
    return ", ".join(f"{a}-{b}" if b - a > 1 else ", ".join(map(str, range(a, b + 1))) for a, b in runs(indices))


def either(parts: list[str], word: str = "or") -> str:
    """``["0", "2", "4"]`` -> ``"0, 2 or 4"``."""
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} {word} {parts[-1]}"


def slice_ranges(slices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2 and 5"``: memory slices in a message."""
    return either([str(a) if a == b else f"{a}-{b}" for a, b in runs(slices)], "and")


def instances(layout: Mapping[str, object]) -> str:
    """``{1g.18gb: 7}`` -> ``1g.18gb x7``: a layout's instances, as ``show`` and the rules print them."""
    return ", ".join(f"{name} x{count}" for name, count in layout.items())


def tally(names: Iterable[str]) -> str:
    """``["2g", "2g", "3g"]`` -> ``"2g x2 + 3g"`` (first-seen order): instances one by one, counted."""
    return " + ".join(name if n == 1 else f"{name} x{n}" for name, n in Counter(names).items())
