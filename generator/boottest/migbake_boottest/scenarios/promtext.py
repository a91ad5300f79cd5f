"""A small reader of the Prometheus text exposition format (what node_exporter's textfile collector reads).

Enough for the restore's metrics file: comments, ``name{label="value",...} value [timestamp]`` samples,
label values with ``\\\\``, ``\\"`` and ``\\n`` escapes. The tests cross-check it with prometheus-client's
parser (a test-only dependency).
"""

from __future__ import annotations

import math
import re

Samples = dict[str, list[tuple[dict[str, str], float]]]

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class PromTextError(ValueError):
    """A line that is not in the Prometheus text format."""


def parse_text(text: str) -> Samples:
    """Every sample of ``text``: metric name -> [(labels, value)], in file order."""
    samples: Samples = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None:
            raise PromTextError(f"line {number}: {line!r}")
        name, body, raw = match.groups()
        samples.setdefault(name, []).append((_labels(body or "", number), _value(raw, number)))
    return samples


def _labels(body: str, number: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    rest = body.strip()
    while rest:
        match = _LABEL.match(rest)
        if match is None:
            raise PromTextError(f"line {number}: bad labels {body!r}")
        labels[match.group(1)] = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], match.group(2))
        rest = rest[match.end():].strip()
    return labels


def _value(raw: str, number: int) -> float:
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    if raw in special:
        return special[raw]
    try:
        return float(raw)
    except ValueError as exc:
        raise PromTextError(f"line {number}: bad value {raw!r}") from exc
