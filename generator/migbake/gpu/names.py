"""GPU model names as people and nvidia-smi write them: normal forms for look-up, and "did you mean" ranking.

nvidia-smi prints ``NVIDIA A100-SXM4-40GB`` (older drivers ``A100-SXM4-40GB``), people write ``a100 sxm4
40gb``, ``H100 PCIe`` or ``h200``. A name is compared in two normal forms: the *strict* one (case, the
``NVIDIA``/``Tesla`` brand word and runs of spaces do not matter) and the *loose* one (``-``, ``_``, ``.``
and spaces do not matter either). The loose form is only used when the strict one finds nothing, so
``-`` and space are alike exactly where that is unambiguous.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

_BRANDS = ("nvidia", "tesla")
_SPACES = re.compile(r"\s+")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def strict_key(name: str) -> str:
    """``"  NVIDIA   H100 PCIe "`` -> ``"h100 pcie"`` (case, brand word and runs of spaces ignored)."""
    words = _SPACES.sub(" ", name.strip().lower()).split(" ")
    while len(words) > 1 and words[0] in _BRANDS:
        words = words[1:]
    return " ".join(words)


def loose_key(name: str) -> str:
    """``"NVIDIA A100-SXM4-40GB"`` -> ``"a100sxm440gb"`` (also ``-``, ``_``, ``.`` and spaces ignored)."""
    return _NOT_ALNUM.sub("", strict_key(name))


@dataclass(frozen=True)
class Named:
    """One catalog entry as the ranking sees it: its id, its primary names and every other name."""

    key: str
    primary: tuple[str, ...]
    others: tuple[str, ...]


def _score(query: str, entry: Named) -> tuple[int, int, int, int, float]:
    """How well ``query`` (a loose key) points at ``entry``: higher is better, all zero is no match."""
    names = [loose_key(n) for n in (*entry.primary, *entry.others)]
    key = loose_key(entry.key)
    exact = int(query in names or query == key)
    key_prefix = int(key.startswith(query))
    prefix = int(any(n.startswith(query) for n in names))
    inside = int(any(query in n for n in (*names, key)))
    ratio = max(difflib.SequenceMatcher(None, query, n).ratio() for n in (*names, key))
    return exact, key_prefix, prefix, inside, ratio


def rank(query: str, entries: Sequence[Named], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ids of the entries ``query`` most likely means, best first (at most ``n``).

    An exact name beats the id starting with the query (``GH200`` -> ``gh200-144gb`` before the H100
    on GH200), which beats a name starting with it, a name containing it, then plain similarity.
    """
    q = loose_key(query)
    if not q:
        return []
    scored = [(_score(q, e), i, e.key) for i, e in enumerate(entries)]
    hits = [(s, i, k) for s, i, k in scored if any(s[:4]) or s[4] >= cutoff]
    hits.sort(key=lambda t: (tuple(-x for x in t[0]), t[1]))
    return [k for _, _, k in hits[:n]]
