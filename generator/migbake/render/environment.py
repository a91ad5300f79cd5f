"""The one Jinja2 environment the targets render with, and ``Templates``: a shared context that renders files.

Templates hold loops and conditionals only; every value they print passes the guard of its template's
language (``guard``) on its way out, through the environment's ``finalize``. Output is deterministic.
Compiled templates are kept between runs in a per-user cache (``bytecode_cache``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from migbake import __version__
from migbake.problems import RenderError
from migbake.render.artifact import Artifact
from migbake.render.guard import Quoted, guard, html_comment, language
from migbake.render.quoting import comment_text, hcl_string, sh_quote, wrap_long, yaml_block, yaml_scalar


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """Every printed value through the guard of its template's language (``{{ x if c }}`` when not c prints
    nothing, as Jinja's plain Undefined does)."""
    if type(value) is jinja2.Undefined:
        return value
    return guard(value, language(context.name), context.name)


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's cache of compiled templates, where a file that cannot be read or written is only a miss: the
    cache saves time, and never fails a render."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # an unreadable or damaged file: compiled again
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):  # a full disk, a folder made read-only since
            super().dump_bytecode(bucket)


def cache_dir() -> Path:
    """Where compiled templates are kept: ``$XDG_CACHE_HOME`` (else ``~/.cache``), then ``migbake/jinja-VERSION``."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"  # the XDG spec ignores a relative path
    return root / "migbake" / f"jinja-{__version__}"


def bytecode_cache() -> jinja2.BytecodeCache | None:
    """The cache of compiled templates, in a folder of this user's alone (mode 0700, as Jinja's own default
    folder: pallets/jinja:src/jinja2/bccache.py@3.1.6 ``_get_default_cache_dir``): what it holds is run as code.
    None, and every template compiled, where that folder cannot be made or is not this user's alone."""
    try:
        folder = cache_dir()
        folder.mkdir(mode=stat.S_IRWXU, parents=True, exist_ok=True)
        found = os.lstat(folder)
        if (not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid()
                or stat.S_IMODE(found.st_mode) != stat.S_IRWXU or not os.access(folder, os.W_OK | os.X_OK)):
            return None
    except (OSError, RuntimeError):  # RuntimeError: no home folder to be found
        return None
    # the Jinja version in each file's name: Jinja's own check of a file (its bc_magic) names the Python version
    return _BytecodeCache(str(folder), f"jinja2-{jinja2.__version__}-%s.cache")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The environment (one per process: it keeps compiled templates, which is most of a render's cost)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("migbake.templates", "."),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates do not change while migbake runs: no stat() per render
        finalize=_finalize,  # every printed value passes the guard of its template's language
        bytecode_cache=bytecode_cache(),
    )
    env.filters["sh"] = sh_quote
    env.filters["hcl"] = hcl_string
    env.filters["yaml"] = yaml_scalar
    env.filters["comment"] = comment_text
    env.filters["html_comment"] = html_comment
    env.filters["yaml_block"] = yaml_block
    env.filters["wrap_long"] = wrap_long
    # Ansible's own Jinja2 delimiters, for the Ansible templates that name Ansible's variables
    env.globals.update(ansible_open=Quoted("{{"), ansible_close=Quoted("}}"))
    return env


class Templates:
    """Renders the templates of one output tree, each with the variables every target shares (and its own)."""

    def __init__(self, variables: dict[str, Any]) -> None:
        self._env = environment()
        self._shared = variables

    def with_variables(self, extra: dict[str, Any]) -> Templates:
        """These templates with ``extra`` beside the shared variables (for several files of one context)."""
        return Templates({**self._shared, **extra})

    def text(self, template: str, extra: dict[str, Any] | None = None) -> str:
        """``template`` rendered (a RenderError names the template when it fails)."""
        try:
            return self._env.get_template(template).render({**self._shared, **(extra or {})})
        except jinja2.TemplateError as e:
            raise RenderError(f"template {template}: {e}") from e

    def file(self, template: str, path: str, mode: int, extra: dict[str, Any] | None = None) -> Artifact:
        """``template`` rendered as the file ``path`` of OUT."""
        return Artifact(path, self.text(template, extra), mode)
