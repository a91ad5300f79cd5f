"""Ansible (``OUT/ansible/``): a role and its playbooks, carrying the render's own files.

Nothing here re-derives what a node gets: the role's ``files/`` are the bytes of the rendered rootfs/
tree (with the modes the Packer provisioner sets), its scripts are the rendered preflight and verify
scripts, and its checks are the bake's base-image checks (``plan.bake_pieces``). The profile reaches the
YAML only through ``yaml_scalar``.
"""

from __future__ import annotations

import posixpath
import textwrap
from collections.abc import Sequence
from typing import Any

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import BasePiece, RenderPlan
from migbake.render.targets.rootfs import ROOTFS

ROLE = "ansible/roles/mig_restore"
SLURM_UNIT = "slurmd.service"
ROLE_SCRIPTS = ("preflight-mig-restore.sh", "verify-mig-restore.sh")


def ansible(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The role (files, tasks, handlers, defaults, meta, README) and install.yml / activate.yml."""
    rootfs = list(done.under(ROOTFS))
    ctx = _role_context(plan, [(rel, a.mode) for rel, a in rootfs])
    out = [Artifact(f"{ROLE}/files/{rel}", a.content, a.mode) for rel, a in rootfs]
    out += [Artifact(f"{ROLE}/files/{name}", done[f"scripts/{name}"].content, 0o755) for name in ROLE_SCRIPTS]
    for name in ("tasks/main.yml", "tasks/check.yml", "tasks/install.yml", "tasks/activate.yml",
                 "handlers/main.yml", "defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml",
                 "README.md"):
        out.append(templates.file(f"{ROLE}/{name}.j2", f"{ROLE}/{name}", 0o644, ctx))
    for name in ("install.yml", "activate.yml", ".ansible-lint"):
        out.append(templates.file(f"ansible/{name}.j2", f"ansible/{name}", 0o644, ctx))
    return out


def _role_context(plan: RenderPlan, rootfs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """What the role's templates print: the render's file list, and the plan's units and tools."""
    return {"role": role_facts(plan, rootfs)}


def role_facts(plan: RenderPlan, rootfs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """What the role does on a node of ``plan`` with the rootfs files ``rootfs`` ((path inside rootfs/, mode)):
    the files and their folders, the base-image checks, the consumers and the activation's defaults
    (also the data of one group of ``export --ansible``, ``render.fleet``)."""
    restore = plan.profile.restore
    files = [{"src": rel, "dest": "/" + rel, "mode": f"{mode:04o}"} for rel, mode in rootfs]
    dirs = sorted({posixpath.dirname(f["dest"]) for f in files})
    # the base-image checks of the bake (its pieces); a running node must also hold those that
    # image.provided_later leaves to a later provisioner of an image build: it boots into the restore now
    unit_wait = restore.timeout_seconds + restore.driver_wait_seconds + 60
    return {
        "files": files, "dirs": dirs, "tools": _tools(plan.bake_pieces), "later_tools": _tools(plan.boot_pieces),
        "units": _units(plan.bake_pieces), "later_units": _units(plan.boot_pieces), "unit_dirs": list(plan.unit_dirs),
        "kubernetes": plan.profile.kubelet.present, "slurm": any(c.unit == SLURM_UNIT for c in plan.consumers),
        "unit_wait": unit_wait, "consumers": [c.unit for c in plan.consumers],
        # what the node advertises, in lines ansible-lint's production profile allows (at most 160 characters)
        "advertises": textwrap.wrap(plan.advertises, 100),
    }


def _tools(pieces: Sequence[BasePiece]) -> list[str]:
    """The tools' paths."""
    return list(dict.fromkeys(x.path for x in pieces if x.kind == "tool"))


def _units(pieces: Sequence[BasePiece]) -> list[list[str]]:
    """Each unit with the file that also provides it (its template), as [unit, file] for the role's check."""
    return [[x.name, x.template] for x in dict.fromkeys(x for x in pieces if x.kind == "unit")]
