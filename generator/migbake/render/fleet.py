"""The fleet targets: an Ansible role and playbooks, and a Kickstart %post, from the render's own files.

Nothing here re-derives what a node gets: the role's ``files/`` are the bytes of the rendered rootfs/
tree (with the modes the Packer provisioner sets), its scripts are the rendered preflight and verify
scripts, and the Kickstart %post carries the rendered Packer provisioner scripts themselves, so the
base-image checks of the bake run there unchanged. The profile reaches the YAML only through
``yaml_scalar`` or ``yaml_block`` (JSON strings); the %post embeds files as quoted here-documents, guarded
below. Every YAML line stays within ansible-lint's line length (``MAX_LINE``) or is one word that cannot
be broken, which yamllint allows: lists are block lists, one item a line (``yaml_block``), and long
comment and folded-text lines are wrapped at spaces (``wrap_long``).
"""

from __future__ import annotations

import json
import posixpath
import re
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from migbake.problems import RenderError
from migbake.profile.nodeprofile import UNIT_DIRS, BasePiece
from migbake.render.guard import Block
from migbake.render.plan import RenderPlan

ROLE = "ansible/roles/mig_restore"
# ansible-lint's yamllint line-length (ansible/ansible-lint:src/ansiblelint/data/.yamllint@v26.10.1: max 160;
# allow-non-breakable-words, yamllint's default, lets a line of one word after "- " or "# " be longer)
MAX_LINE = 160
_WRAP_AT = 150  # what wrap_long aims for, leaving room for a word that ends a line
SLURM_UNIT = "slurmd.service"
HEREDOC_END = "MIGBAKE_EOF"
KS_STAGING = "/tmp/migbake-kickstart"

Emit = Callable[[str, str, int, "dict[str, Any] | None"], str]
Copy = Callable[[str, str, int], None]
RootfsFile = tuple[str, str, int]  # (path inside rootfs/, text, mode)


def yaml_block(value: object, indent: int) -> Block:
    """``value`` (lists, mappings with plain keys, strings, numbers, booleans) as block-style YAML at ``indent``
    spaces: one list item a line, a mapping value that would make its key's line too long on the next line,
    and a list inside a list after a bare ``-``. Strings are JSON strings (YAML 1.2 double-quoted, non-ASCII
    escaped); the values here match the schema's patterns, so each line holds no space but after ``-`` or
    ``key:``, and one too long for MAX_LINE is a single word."""
    return Block("\n".join(_block_lines(value, indent)))


def _block_lines(value: object, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            if isinstance(item, (list, dict)) and item:
                out += [f"{pad}{key}:", *_block_lines(item, indent + 2)]
            elif len(pad) + len(key) + 2 + len(_flow(item)) > MAX_LINE:
                out += [f"{pad}{key}:", f"{pad}  {_flow(item)}"]
            else:
                out.append(f"{pad}{key}: {_flow(item)}")
        return out
    if isinstance(value, list) and value:
        out = []
        for item in value:
            if isinstance(item, list) and item:
                out += [f"{pad}-", *_block_lines(item, indent + 2)]
            elif isinstance(item, dict) and item:
                inner = _block_lines(item, indent + 2)
                out += [f"{pad}- {inner[0][indent + 2:]}", *inner[1:]]
            else:
                out.append(f"{pad}- {_flow(item)}")
        return out
    return [pad + _flow(value)]


def _flow(value: object) -> str:
    """A scalar (or an empty list or mapping) as JSON, which YAML reads as it is."""
    return json.dumps(value)


def wrap_long(text: str) -> Block:
    """Each line longer than MAX_LINE wrapped at spaces, keeping its indentation and its ``#`` (a comment) on
    every piece; a word is never broken. For comments and folded (``>-``) text only, where a line break
    between two words means what the space meant. Shorter lines are kept as they are."""
    out = []
    for row in str(text).split("\n"):
        head = re.match(r" *(?:#+ ?)?", row)
        prefix = head.group() if head else ""
        if len(row) <= MAX_LINE or not row[len(prefix):].strip():
            out.append(row)
            continue
        width = max(_WRAP_AT - len(prefix), 40)
        out += [prefix + piece for piece in textwrap.wrap(row[len(prefix):], width, break_long_words=False,
                                                          break_on_hyphens=False)]
    return Block("\n".join(out))


def _role_context(plan: RenderPlan, rootfs: Sequence[RootfsFile]) -> dict[str, Any]:
    """What the role's templates print: the render's file list, and the plan's units and tools."""
    p = plan.profile
    files = [{"src": rel, "dest": "/" + rel, "mode": f"{mode:04o}"} for rel, _, mode in rootfs]
    dirs = sorted({posixpath.dirname(f["dest"]) for f in files})
    # the base-image checks of the bake (its pieces); a running node must also hold those that
    # image.provided_later leaves to a later provisioner of an image build: it boots into the restore now
    unit_wait = p.restore.timeout_seconds + p.restore.driver_wait_seconds + 60
    return {"role": {
        "files": files, "dirs": dirs, "tools": _tools(plan.bake_pieces), "later_tools": _tools(plan.boot_pieces),
        "units": _units(plan.bake_pieces), "later_units": _units(plan.boot_pieces), "unit_dirs": list(UNIT_DIRS),
        "kubernetes": p.kubelet.present, "slurm": any(c.unit == SLURM_UNIT for c in plan.consumers),
        "unit_wait": unit_wait, "consumers": [c.unit for c in plan.consumers],
    }}


def _tools(pieces: Sequence[BasePiece]) -> list[str]:
    """The tools' paths."""
    return list(dict.fromkeys(x.path for x in pieces if x.kind == "tool"))


def _units(pieces: Sequence[BasePiece]) -> list[list[str]]:
    """Each unit with the file that also provides it (its template), as [unit, file] for the role's check."""
    return [[x.name, x.template] for x in dict.fromkeys(x for x in pieces if x.kind == "unit")]


def emit_fleet(emit: Emit, copy: Copy, plan: RenderPlan, rootfs: Sequence[RootfsFile],
               scripts: dict[str, str]) -> None:
    """Emit OUT/ansible/ and OUT/kickstart/ (``scripts``: the rendered texts by OUT-relative path)."""
    ctx = _role_context(plan, rootfs)
    for rel, text, mode in rootfs:
        copy(f"{ROLE}/files/{rel}", text, mode)
    for name in ("preflight-mig-restore.sh", "verify-mig-restore.sh"):
        copy(f"{ROLE}/files/{name}", scripts[f"scripts/{name}"], 0o755)
    for name in ("tasks/main.yml", "tasks/check.yml", "tasks/install.yml", "tasks/activate.yml",
                 "handlers/main.yml", "defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml",
                 "README.md"):
        emit(f"{ROLE}/{name}.j2", f"{ROLE}/{name}", 0o644, ctx)
    for name in ("install.yml", "activate.yml", ".ansible-lint"):
        emit(f"ansible/{name}.j2", f"ansible/{name}", 0o644, ctx)
    embedded = [{"path": f"rootfs/{rel}", "text": heredoc_body(f"rootfs/{rel}", text)} for rel, text, _ in rootfs]
    embedded += [{"path": f"scripts/{name}", "text": heredoc_body(name, scripts[f"packer/scripts/{name}"])}
                 for name in ("disable-mig-manager.sh", "install-mig-restore.sh")]
    for e in embedded:
        e["dir"] = posixpath.dirname(e["path"])
    emit("kickstart/mig-restore.ks.j2", "kickstart/mig-restore.ks", 0o644,
         {"embedded": embedded, "staging": KS_STAGING, "heredoc_end": HEREDOC_END})


def heredoc_body(name: str, text: str) -> Block:
    """``text`` as the body of a quoted here-document inside a Kickstart %post, or a RenderError.

    Anaconda ends a section at a line starting with ``%`` (``%end``), and the shell at the delimiter;
    the here-document adds the final newline back, so the text must end with one.
    """
    if not text.endswith("\n"):
        raise RenderError(f"{name}: a file embedded in the Kickstart %post must end with a newline")
    for line in text.splitlines():
        if line.lstrip().startswith("%") or line == HEREDOC_END:
            raise RenderError(f"{name}: the line {line!r} would end the Kickstart %post or its here-document")
    return Block(text.rstrip("\n"))  # a file the render wrote itself, every value in it guarded there
