"""Ansible (``OUT/ansible/``): the one role ``mig_restore`` and its playbooks, with the profile as its one group.

One template set (``templates/ansible/``) is the role of one profile and of several (``migbake export
--ansible``, ``render.fleet``): its tasks name no profile and read the data of the host's group
(``group_data``: the files, modes, scripts, checks, units and timeouts). ``migbake generate`` writes the
role with one group, Ansible's ``all`` (every host the playbooks run on), whose data end the role's
``defaults/main.yml``; ``export --ansible`` writes a group per profile to ``group_vars/<group>.yml``.

Nothing here re-derives what a node gets: the data are the bytes of the rendered rootfs/ tree (with the
modes the Packer provisioner sets), the rendered preflight and verify scripts and the bake's base-image
checks (``plan.consumers.bake_pieces``). Every string of the data is ``!unsafe`` (``ansiblevars.vars_block``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from migbake.problems import RenderError
from migbake.render.ansiblevars import payload, vars_block
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Quoted
from migbake.render.guard import line as guard_line
from migbake.render.plan import LAYOUT_FILE, BasePiece, RenderPlan
from migbake.render.quoting import yaml_scalar
from migbake.render.targets.rootfs import ROOTFS

OUT = "ansible"
ROLE = f"{OUT}/roles/mig_restore"  # the role in OUT (generate); roles/mig_restore in export --ansible's folder
TEMPLATES = "ansible"  # templates/ansible/ mirrors the folder (the role and the playbooks)
ROLE_FILES = ("tasks/main.yml", "tasks/group.yml", "tasks/check.yml", "tasks/install.yml", "tasks/activate.yml",
              "handlers/main.yml", "defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml", "README.md")
PLAYBOOKS = ("install.yml", "activate.yml", ".ansible-lint")
ONE_GROUP = "all"  # the group of the one-profile role: every host its playbooks run on
HOSTS = "gpu_nodes"  # the one-profile playbooks' host group unless -e mig_restore_hosts=GROUP (docs/ansible.md)
SLURM_UNIT = "slurmd.service"
ROLE_SCRIPTS = ("preflight-mig-restore.sh", "verify-mig-restore.sh")
# the role runs a script as one argument of `bash -c`: Linux's MAX_ARG_STRLEN (32 pages of 4 KiB) bounds it
# (torvalds/linux:include/uapi/linux/binfmts.h@v6.6)
MAX_SCRIPT_BYTES = 32 * 4096 - 1


def ansible(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The role with the profile as its one group (``all``), and install.yml / activate.yml / .ansible-lint."""
    rootfs = list(done.under(ROOTFS))
    scripts = [done[f"scripts/{name}"].text for name in ROLE_SCRIPTS]
    data = group_data(plan, [(rel, a.text, a.mode) for rel, a in rootfs], scripts, ONE_GROUP)
    intro = (f"# The data of the role's one group, {ONE_GROUP} (profile "
             f"{guard_line(plan.profile.name, 'the profile name')}): what the role installs and checks.\n"
             "# Every string is !unsafe (Ansible never templates it).\n")
    ctx = {
        "single": True,
        "role_header": plan.header,
        "role": role_facts(plan, [(rel, a.mode) for rel, a in rootfs]),
        "profiles": [yaml_scalar(ONE_GROUP)],
        "hosts_default": Quoted(f"'{HOSTS}'"),
        "data_file": "roles/mig_restore/defaults/main.yml",
        "group_data": vars_block(intro, data),
    }
    return role_tree(templates, ctx, f"{OUT}/")


def role_tree(templates: Templates, ctx: dict[str, Any], root: str) -> list[Artifact]:
    """The role's files and the playbooks under ``root`` (``ansible/`` in OUT, empty in export --ansible's
    folder), from the one template set; ``ctx`` says one group (``single``) or several."""
    role = templates.with_variables(ctx)
    out = [role.file(f"{TEMPLATES}/roles/mig_restore/{name}.j2", f"{root}roles/mig_restore/{name}", 0o644)
           for name in ROLE_FILES]
    out += [role.file(f"{TEMPLATES}/{name}.j2", f"{root}{name}", 0o644) for name in PLAYBOOKS]
    return out


def group_data(plan: RenderPlan, rootfs: Sequence[tuple[str, str, int]], scripts: Sequence[str],
               group: str) -> dict[str, Any]:
    """The variables of one group of the role: what it installs and checks on the hosts of ``plan``'s profile.

    ``rootfs``: (path inside rootfs/, text, mode) of the rendered files; ``scripts``: the rendered preflight
    and verify scripts. RenderError when a script is longer than one argument of ``bash -c`` may be.
    """
    prof = plan.profile
    for name, text in zip(ROLE_SCRIPTS, scripts):
        if len(text.encode("utf-8")) > MAX_SCRIPT_BYTES:
            raise RenderError(f"{name} of profile {prof.name} is larger than one argument of bash -c may be "
                              f"({MAX_SCRIPT_BYTES} bytes); the Ansible role cannot carry it")
    facts = role_facts(plan, [(rel, mode) for rel, _, mode in rootfs])
    content = {rel: text for rel, text, _ in rootfs}
    preflight, verify = scripts
    return {
        "mig_restore_profile": prof.name,
        "mig_restore_group": group,
        "mig_restore_files": [{"dest": f["dest"], "mode": f["mode"], **payload(content[f["src"]])}
                              for f in facts["files"]],
        "mig_restore_dirs": facts["dirs"],
        "mig_restore_image_tools": facts["tools"],
        "mig_restore_image_units": facts["units"],
        "mig_restore_later_tools": facts["later_tools"],
        "mig_restore_later_units": facts["later_units"],
        "mig_restore_unit_dirs": facts["unit_dirs"],
        "mig_restore_unit": prof.restore.unit,
        "mig_restore_manager_unit": prof.conflicting_manager.unit,
        "mig_restore_manager_action": prof.conflicting_manager.action,
        "mig_restore_consumers": facts["consumers"],
        "mig_restore_kubernetes": facts["kubernetes"],
        "mig_restore_advertises": plan.dra.advertises,
        "mig_restore_slurm": facts["slurm"],
        "mig_restore_slurm_reason": f"migbake: MIG layout change ({prof.name})",
        "mig_restore_unit_wait_seconds": facts["unit_wait"],
        # Ampere: the restore reboots the node once for a MIG mode change (restore.on_reset_required), and
        # records that reboot in its marker; activate waits through that reboot
        "mig_restore_reboot_once": plan.restore.reset_path == "reboot-once",
        "mig_restore_reset_marker": plan.restore.reboot_marker,
        "mig_restore_preflight_script": payload(preflight),
        "mig_restore_verify_script": payload(verify),
        # named layouts: activate's mig_restore_layout moves a node to one of these by writing the file source's
        # file ("" where restore.layout.from does not read it)
        "mig_restore_layout_names": list(plan.mig.layout_names),
        "mig_restore_layout_file": LAYOUT_FILE if "file" in prof.restore.layout_from else "",
    }


def role_facts(plan: RenderPlan, rootfs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """What the role does on a node of ``plan`` with the rootfs files ``rootfs`` ((path inside rootfs/, mode)):
    the files and their folders, the base-image checks, the consumers and the activation's defaults."""
    restore = plan.profile.restore
    files = [{"src": rel, "dest": "/" + rel, "mode": f"{mode:04o}"} for rel, mode in rootfs]
    dirs = sorted({posixpath.dirname(f["dest"]) for f in files})
    # the base-image checks of the bake (its pieces); a running node must also hold those that
    # image.provided_later leaves to a later provisioner of an image build: it boots into the restore now
    unit_wait = restore.timeout_seconds + restore.driver_wait_seconds + 60
    c = plan.consumers
    return {
        "files": files, "dirs": dirs, "tools": _tools(c.bake_pieces), "later_tools": _tools(c.boot_pieces),
        "units": _units(c.bake_pieces), "later_units": _units(c.boot_pieces), "unit_dirs": list(plan.restore.unit_dirs),
        "kubernetes": plan.profile.kubelet.present, "slurm": any(u.unit == SLURM_UNIT for u in c.all),
        "unit_wait": unit_wait, "consumers": [u.unit for u in c.all],
    }


def _tools(pieces: Sequence[BasePiece]) -> list[str]:
    """The tools' paths."""
    return list(dict.fromkeys(x.path for x in pieces if x.kind == "tool"))


def _units(pieces: Sequence[BasePiece]) -> list[list[str]]:
    """Each unit with the file that also provides it (its template), as [unit, file] for the role's check."""
    return [[x.name, x.template] for x in dict.fromkeys(x for x in pieces if x.kind == "unit")]
