"""A small typed wrapper around the Packer binary: plan the steps, run them, map failures to errors.

Packer is driven through ``subprocess`` (argv lists, never shell strings) and its output is streamed
line by line to a callback. ``packer init`` runs only where Packer supports it (>= 1.7), and only on
the ``plugins/PLUGIN`` folders of the chosen sources (Packer 1.6 would reject them). ``SOURCES`` is the
one list of the generated templates' sources, the variables each needs (no source defaults to the
build machine itself) and its plugin.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
import stat
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from migbake.document.files import read_bounded
from migbake.problems import PackerError, UsageError

INSTALL_HINT = ("install Packer: `apt-get install packer` (Debian/Ubuntu), or the release for your system "
                "from https://developer.hashicorp.com/packer/install; or point --packer / MIGBAKE_PACKER at it")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*=")
_VAR_FILE_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*=", re.M)
MAX_VAR_FILE_BYTES = 1024 * 1024  # a Packer variables file is a few lines
BAKE_KEY_COMMENT = "migbake-bake-key"  # the build removes the authorized key with this comment


class Source(NamedTuple):
    """One source of the generated templates."""

    name: str
    what: str
    required: tuple[str, ...]
    plugin: str  # the folder under packer/plugins/ that `packer init` installs it from ("": built in)


SOURCES = (
    Source("amazon-ebs.golden", "an AMI (AWS credentials from the usual environment)", (), "amazon"),
    Source("null.ssh", "any machine reachable over SSH (a VM from your base image, a bare-metal host)",
           ("ssh_host",), ""),
    Source("qemu.image", "a qcow2 from your GPU base cloud image, for bare metal and on-prem hypervisors",
           ("qemu_base_image", "qemu_base_image_checksum"), "qemu"),
    Source("googlecompute.golden", "a Compute Engine image (gcloud application-default credentials)",
           ("gcp_project_id",), "googlecompute"),
    Source("azure-arm.golden", "an Azure managed image (az login, or a service principal)",
           ("azure_subscription_id", "azure_managed_image_resource_group"), "azure"),
)
SOURCE_NAMES = tuple(s.name for s in SOURCES)


def sources_text() -> str:
    """The sources, one per line, for messages."""
    return "\n".join(f"  {s.name:<21} {s.what}" + (f"; needs {', '.join(f'--var {v}=...' for v in s.required)}"
                                                   if s.required else "") for s in SOURCES)


def missing_vars(only: Sequence[str], variables: Sequence[str], var_files: Sequence[Path] = (),
                 extra: Sequence[str] = ()) -> list[str]:
    """The variables the chosen sources need (and ``extra``) that neither ``--var``, a variables file nor
    PKR_VAR_NAME sets."""
    given = {v.split("=", 1)[0] for v in variables if "=" in v and v.split("=", 1)[1] != ""}
    given |= {k[len("PKR_VAR_"):] for k, v in os.environ.items() if k.startswith("PKR_VAR_") and v != ""}
    for f in var_files:
        given |= set(_VAR_FILE_LINE.findall(read_var_file(f)))
    needed = [v for s in SOURCES if s.name in only for v in s.required] + list(extra)
    return [v for v in dict.fromkeys(needed) if v not in given]


BASE_AMI_SOURCE = "amazon-ebs.golden"


def base_ami_vars(eks: str) -> tuple[str, ...]:
    """The variables of which amazon-ebs.golden needs one to find its base AMI, per kubelet.layout (``eks``:
    eks-al2023, eks-al2 or ""): the EKS AMI of the cluster's Kubernetes version, else the user's own AMI."""
    return ("kubernetes_version", "source_ami_name_filter") if eks else ("source_ami_name_filter",)


def missing_base_ami(only: Sequence[str], variables: Sequence[str], var_files: Sequence[Path], eks: str) -> list[str]:
    """``base_ami_vars(eks)`` when amazon-ebs.golden is chosen and none of them is given, else []."""
    wanted = base_ami_vars(eks)
    if BASE_AMI_SOURCE not in only:
        return []
    missing = [v for v in wanted if v in missing_vars([], variables, var_files, extra=wanted)]
    return missing if len(missing) == len(wanted) else []


def read_var_file(path: Path) -> str:
    """A ``--var-file``'s text, read with a bound (``/dev/zero`` too); UsageError for what Packer cannot read after
    migbake (a FIFO, a device, ``<(...)``: read once, it would be empty to Packer) or that is larger than 1 MiB.
    Text that is not UTF-8 is Packer's to report."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror or err}", option="--var-file") from err
    if not regular:
        raise UsageError(f"{path}: not a regular file; Packer reads a variables file after migbake has read it, so "
                         "give a file (not a pipe or a device)", option="--var-file")
    return read_bounded(path, MAX_VAR_FILE_BYTES, UsageError).decode("utf-8", errors="replace")


_DECLARED = re.compile(r'^variable "([A-Za-z_][A-Za-z0-9_-]*)" \{', re.M)


def unknown_vars(variables: Sequence[str], variables_hcl: str) -> list[str]:
    """A message for each ``--var`` whose name the templates do not declare (Packer refuses those)."""
    declared = _DECLARED.findall(variables_hcl)
    out = []
    for v in variables:
        name = v.split("=", 1)[0]
        if name not in declared:
            near = difflib.get_close_matches(name, declared, n=1)
            out.append(f"{name!r} is not a variable of the templates" + (f" (did you mean {near[0]}?)" if near else ""))
    return out


def qemu_seed(directory: Path, *, username: str = "") -> list[str]:
    """A throwaway SSH key and a NoCloud seed authorizing it, in ``directory``; the ``--var``s that use them.

    The build removes the key from the image again (it carries the comment ``BAKE_KEY_COMMENT``).
    """
    keygen = shutil.which("ssh-keygen")
    if not keygen:
        raise PackerError("ssh-keygen not found: the qemu source needs it for a throwaway build key "
                          "(apt-get install openssh-client), or give --var qemu_seed_dir and "
                          "--var qemu_ssh_private_key_file", step="seed")
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / "build-key"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", BAKE_KEY_COMMENT, "-f", str(key)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    public = (directory / "build-key.pub").read_text(encoding="utf-8").strip()
    (directory / "user-data").write_text(f"#cloud-config\nssh_authorized_keys:\n  - {public}\n", encoding="utf-8")
    (directory / "meta-data").write_text("instance-id: migbake-bake\nlocal-hostname: migbake-bake\n",
                                         encoding="utf-8")
    return [f"qemu_seed_dir={directory}", f"qemu_ssh_private_key_file={key}"]


@dataclass(frozen=True)
class PackerStep:
    """One Packer invocation of a bake."""

    name: str
    argv: tuple[str, ...]

    def display(self) -> str:
        """The command as a person would type it."""
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
    """Every ``--var`` is ``NAME=VALUE`` (else UsageError, a bad value of ``--var``)."""
    for v in variables:
        if not _VAR.match(v):
            raise UsageError(f"--var {v!r}: expected NAME=VALUE", option="--var")


def plan_bake(packer_dir: Path, *, binary: str, version: tuple[int, int, int], only: Sequence[str] = (),
              variables: Sequence[str] = (), var_files: Sequence[Path] = ()) -> list[PackerStep]:
    """The Packer steps of a bake, in order: [init], fmt -check, validate, build."""
    check_vars(variables)
    target = str(packer_dir)
    selection = [f"-only={','.join(only)}"] if only else []
    var_args = [f"-var={v}" for v in variables] + [f"-var-file={f}" for f in var_files]
    steps = []
    if version >= (1, 7, 0):  # the chosen sources' plugins only
        for plugin in dict.fromkeys(s.plugin for s in SOURCES if s.name in only and s.plugin):
            steps.append(PackerStep("init", (binary, "init", str(packer_dir / "plugins" / plugin))))
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
        with proc:  # closes the pipe
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    on_line(line.rstrip("\n"))
            except BaseException:  # the reader went away (a closed pipe, Ctrl-C): do not leave Packer running
                proc.terminate()
                proc.wait()
                raise
            rc = proc.wait()
        if rc != 0:
            why = {"fmt": "the templates are not in `packer fmt` form (were they edited by hand?)",
                   "validate": "Packer rejected the templates or variables",
                   "init": "Packer could not install the plugins",
                   "build": "the build failed; Packer's output above says where"}.get(step.name, "")
            raise PackerError(f"packer {step.name} failed with exit code {rc}: {why}", step=step.name,
                              returncode=rc)
