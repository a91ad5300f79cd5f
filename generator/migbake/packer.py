"""A small typed wrapper around the Packer binary: plan the steps, run them, map failures to errors.

Packer is driven through ``subprocess`` (argv lists, never shell strings) and its output is streamed
line by line to a callback. ``packer init`` runs only where Packer supports it (>= 1.7) and only on
the ``plugins/`` folder, which Packer 1.6 would reject.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from migbake.problems import PackerError

INSTALL_HINT = ("install Packer: `apt-get install packer` (Debian/Ubuntu), or the release for your system "
                "from https://developer.hashicorp.com/packer/install; or point --packer / MIGBAKE_PACKER at it")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*=")


@dataclass(frozen=True, slots=True)
class PackerStep:
    """One Packer invocation of a bake."""

    name: str
    argv: tuple[str, ...]

    def display(self) -> str:
        """The command as a person would type it."""
        import shlex

        return shlex.join(self.argv)


def find_packer(explicit: str | None = None) -> str:
    """The Packer binary to use: ``explicit``, else $MIGBAKE_PACKER, else ``packer`` on PATH."""
    wanted = explicit or os.environ.get("MIGBAKE_PACKER") or "packer"
    found = wanted if os.sep in wanted and os.access(wanted, os.X_OK) else shutil.which(wanted)
    if not found:
        raise PackerError(f"Packer not found ({wanted}); {INSTALL_HINT}", step="find")
    return found


def packer_version(binary: str) -> tuple[int, int, int]:
    """Packer's version, from ``packer version`` (``Packer v1.6.6``)."""
    try:
        out = subprocess.run([binary, "version"], capture_output=True, text=True, check=False, timeout=60,
                             env={**os.environ, "CHECKPOINT_DISABLE": "1"}, stdin=subprocess.DEVNULL).stdout
    except OSError as e:
        raise PackerError(f"cannot run {binary}: {e}", step="version") from e
    m = re.search(r"v?(\d+)\.(\d+)\.(\d+)", out)
    if not m:
        raise PackerError(f"cannot read the version of {binary} from {out.strip()!r}", step="version")
    return (int(m[1]), int(m[2]), int(m[3]))


def check_vars(variables: Sequence[str]) -> None:
    """Every ``--var`` is ``NAME=VALUE``."""
    for v in variables:
        if not _VAR.match(v):
            raise ValueError(f"--var {v!r}: expected NAME=VALUE")


def plan_bake(packer_dir: Path, *, binary: str, version: tuple[int, int, int], only: Sequence[str] = (),
              variables: Sequence[str] = (), var_files: Sequence[Path] = ()) -> list[PackerStep]:
    """The Packer steps of a bake, in order: [init], fmt -check, validate, build."""
    check_vars(variables)
    target = str(packer_dir)
    selection = [f"-only={','.join(only)}"] if only else []
    var_args = [f"-var={v}" for v in variables] + [f"-var-file={f}" for f in var_files]
    steps = []
    if version >= (1, 7, 0):
        steps.append(PackerStep("init", (binary, "init", str(packer_dir / "plugins"))))
    steps.append(PackerStep("fmt", (binary, "fmt", "-check", "-diff", target)))
    steps.append(PackerStep("validate", (binary, "validate", *selection, *var_args, target)))
    steps.append(PackerStep("build", (binary, "build", "-color=false", *selection, *var_args, target)))
    return steps


def run_steps(steps: Sequence[PackerStep], *, on_line: Callable[[str], None],
              cwd: Path | None = None) -> None:
    """Run each step, streaming its output; raise PackerError naming the step that failed."""
    env = {**os.environ, "CHECKPOINT_DISABLE": "1"}
    for step in steps:
        on_line(f"==> migbake: {step.display()}")
        try:
            proc = subprocess.Popen(step.argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise PackerError(f"cannot run {step.argv[0]}: {e}; {INSTALL_HINT}", step=step.name) from e
        assert proc.stdout is not None
        for line in proc.stdout:
            on_line(line.rstrip("\n"))
        rc = proc.wait()
        if rc != 0:
            why = {"fmt": "the templates are not in `packer fmt` form (were they edited by hand?)",
                   "validate": "Packer rejected the templates or variables",
                   "init": "Packer could not install the plugins",
                   "build": "the build failed; Packer's output above says where"}.get(step.name, "")
            raise PackerError(f"packer {step.name} failed with exit code {rc}: {why}", step=step.name,
                              returncode=rc)
