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


_AN_LETTERS = frozenset("aefhilmnorsx")  # letters whose names start with a vowel sound: "an H", "an L"


def article(word: str) -> str:
    """``a B200``, ``an A100``, ``an H200``, ``an h100-80gb``: the article as the word is read aloud.

    A model name's leading letter is read by its name (H100: "aitch"); other words by their first vowel.
    """
    w = word.strip()
    if not w:
        return "a"
    first = w[0].lower()
    if w[0].isdigit():
        return "an" if w.startswith(("8", "11", "18")) else "a"
    if len(w) > 1 and (w[1].isdigit() or w[:2].isupper()):  # a model name or acronym: letter by letter
        return "an" if first in _AN_LETTERS else "a"
    return "an" if first in "aeiou" else "a"


def gpus(indices: Iterable[int]) -> str:
    """``GPU 4`` or ``GPUs 4-7``: GPU indices with the noun in the right number."""
    ix = list(indices)
    return f"GPU{'' if len(ix) == 1 else 's'} {index_list(ix)}"
