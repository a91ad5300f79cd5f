"""Jinja's bytecode cache of compiled templates (render/environment.py): a fresh process renders the same bytes
with the cache cold, warm, damaged, or where the cache folder cannot be made; a warm cache compiles nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2.bccache
import pytest
from support import IMAGES

from migbake.render.environment import bytecode_cache, cache_dir

# renders an image's profile; prints each file's bytes (as Latin-1 text), the templates compiled and the cache used
SCRIPT = """
import json, sys
import jinja2
from pathlib import Path
compiled = []
compile_template = jinja2.Environment.compile
def counted(self, source, name=None, *args, **kwargs):
    compiled.append(name)
    return compile_template(self, source, name, *args, **kwargs)
jinja2.Environment.compile = counted
from migbake.render.environment import environment
from migbake.render.tree import render
from migbake.rules.validate import check_bytes
path = Path(sys.argv[1])
checked = check_bytes(path.read_bytes(), str(path))
files = {a.path: a.data.decode("latin-1") for a in render(checked.profile)}
print(json.dumps({"files": files, "compiled": len(compiled), "cached": environment().bytecode_cache is not None}))
"""


def _render(cache_home: Path) -> dict[str, Any]:
    """An image's files rendered by a fresh process whose per-user cache folder is ``cache_home``."""
    ran = subprocess.run([sys.executable, "-c", SCRIPT, str(IMAGES[0] / "node-profile.yaml")], capture_output=True,
                         text=True, env={**os.environ, "XDG_CACHE_HOME": str(cache_home)}, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return dict(json.loads(ran.stdout))


def _cache_files(cache_home: Path) -> list[Path]:
    return sorted(cache_home.glob("migbake/jinja-*/*.cache"))


def test_a_warm_cache_compiles_nothing_and_renders_the_same_bytes(tmp_path: Path) -> None:
    cold = _render(tmp_path)
    assert cold["cached"] and cold["compiled"] > 10
    files = _cache_files(tmp_path)
    assert len(files) == cold["compiled"]
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700  # its code is run: this user's alone
    warm = _render(tmp_path)
    assert warm["compiled"] == 0
    assert warm["files"] == cold["files"]


def test_without_a_cache_or_with_a_damaged_one_the_bytes_are_the_same(tmp_path: Path) -> None:
    """A cache folder that cannot be made (its parent is a file) renders without a cache; a damaged cache file
    (the right header, then garbage; cut short) is compiled again."""
    cold = _render(tmp_path / "cache")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    without = _render(blocked)
    assert not without["cached"] and without["files"] == cold["files"]
    files = _cache_files(tmp_path / "cache")
    for i, path in enumerate(files):
        path.write_bytes(jinja2.bccache.bc_magic + b"garbage" if i % 2 else path.read_bytes()[:20])
    damaged = _render(tmp_path / "cache")
    assert damaged["compiled"] == len(files) and damaged["files"] == cold["files"]


def test_a_cache_folder_others_may_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir().parent == tmp_path / "migbake"
    assert bytecode_cache() is not None
    cache_dir().chmod(0o770)
    assert bytecode_cache() is None
