"""A process that renders many profiles keeps the memory one render frees for the next (``tree.keep_freed_heap``):
counted in page faults, which do not depend on how busy the machine is (its time is benchmarks/bench_cli.py's)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

import pytest
from support import REPO

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc: the hint is its heuristic")

# renders 20 profiles to warm up, then counts the minor page faults of the next 20 (``without``: the hint taken away)
FAULTS = """
import json, resource, sys
from migbake.render import tree
from migbake.rules.validate import check_bytes
if sys.argv[2] == "without":
    tree.keep_freed_heap = lambda: None
text = open(sys.argv[1], encoding="utf-8").read()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(40):
    if i == 20:
        start = faults()
    tree.render(check_bytes(text.replace("name: h200-inference", f"name: node-{i}").encode(), "p.yaml").profile)
print(json.dumps((faults() - start) / 20))
"""


def fresh_process(code: str, *args: str) -> Any:
    """What ``code`` prints as JSON in a new Python with this checkout's package and glibc's malloc as it comes
    (no MALLOC_* or GLIBC_TUNABLES setting of the caller)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    env["PYTHONPATH"] = str(REPO / "generator")
    ran = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    return json.loads(ran.stdout)


def faults_per_profile(hint: str) -> float:
    return float(fresh_process(FAULTS, str(REPO / "images" / "h200-inference" / "node-profile.yaml"), hint))


def test_a_render_reuses_the_memory_the_one_before_freed() -> None:
    kept, given_back = faults_per_profile("with"), faults_per_profile("without")
    # without the hint glibc gives some 300 KiB back after every render and faults it in again (about 90 pages
    # on Python 3.11); with it only Python's own arenas come and go
    assert given_back > 40, given_back
    assert kept < given_back / 4, (kept, given_back)


ONCE = """
import json, resource
from migbake.render import tree
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
start = faults()
tree.keep_freed_heap()
tree.keep_freed_heap()
print(json.dumps([faults() - start, tree.keep_freed_heap.cache_info().misses, tree.HEAP_HINT_BYTES]))
"""


def test_the_hint_allocates_without_touching_its_pages_and_runs_once_a_process() -> None:
    """In a fresh process (in a long one malloc may already hold 4 MiB it freed, which calloc then clears)."""
    faults, misses, size = fresh_process(ONCE)
    assert misses == 1
    assert faults < size // 4096 // 8, faults  # its 1,024 pages are never touched
