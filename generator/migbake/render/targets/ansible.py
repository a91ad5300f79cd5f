"""Ansible (``OUT/ansible/``): the one role ``mig_restore`` and its playbooks, with the profile as its one group.

One role serves one profile and several (``migbake export --ansible``, ``render.fleet``): its tasks name no
profile. A group's files are the role's ``files/<group>/``: ``rootfs/...`` (the bytes of the rendered rootfs/
tree), the preflight, verify and uninstall scripts and, for a Slurm node with named layouts, each layout's
``slurm/NAME/`` files; its data (``group_data``: the files' paths and modes, the checks, units and timeouts) are
one entry of ``mig_restore_groups`` at the end of the role's ``defaults/main.yml``. ``migbake generate`` writes
the role with one group, Ansible's ``all`` (every host the playbooks run on); ``export --ansible`` a group per
profile. The data are role defaults, the lowest precedence Ansible has, so that a host's or a child group's
inventory variables override them (docs/ansible.md); the static defaults pick the host's group's entry.

The tasks, handlers, meta and defaults are plain files under ``templates/ansible/roles/mig_restore/`` (no
``.j2``), written with the generated header before them; the README and the playbooks are templates.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from functools import cache
from typing import Any

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates, environment
from migbake.render.guard import Quoted, guard
from migbake.render.guard import line as guard_line
from migbake.render.plan import LAYOUT_FILE, BasePiece, RenderPlan
from migbake.render.quoting import vars_yaml, wrap_long, yaml_scalar
from migbake.render.targets.rootfs import ROOTFS, watch_paths
from migbake.render.targets.slurm import gres_files

OUT = "ansible"
ROLE = f"{OUT}/roles/mig_restore"  # the role in OUT (generate); roles/mig_restore in export --ansible's folder
TEMPLATES = "ansible"  # templates/ansible/ mirrors the folder (the role and the playbooks)
# the role's files that are the same for every profile, written as they are below the header
STATIC_FILES = ("tasks/main.yml", "tasks/group.yml", "tasks/check.yml", "tasks/install.yml", "tasks/activate.yml",
                "tasks/ready.yml", "tasks/uninstall.yml", "handlers/main.yml", "defaults/main.yml", "meta/main.yml",
                "meta/argument_specs.yml")
ROLE_FILES = (*STATIC_FILES, "README.md")
DEFAULTS = "defaults/main.yml"
PLAYBOOKS = ("install.yml", "activate.yml", "uninstall.yml", ".ansible-lint")
ONE_GROUP = "all"  # the group of the one-profile role: every host its playbooks run on
HOSTS = "gpu_nodes"  # the one-profile playbooks' host group unless -e mig_restore_hosts=GROUP (docs/ansible.md)
SLURM_UNIT = "slurmd.service"
SLURM = "slurm"  # OUT/slurm/: a group's files/<group>/slurm/ holds its layouts' gres.conf files
ROLE_SCRIPTS = ("preflight-mig-restore.sh", "verify-mig-restore.sh", "uninstall-mig-restore.sh")


def ansible(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The role with the profile as its one group (``all``), and install.yml / activate.yml / uninstall.yml /
    .ansible-lint."""
    rootfs = [(rel, a.mode) for rel, a in done.under(ROOTFS)]
    name = guard_line(plan.profile.name, "the profile name")
    intro = f"# The data of the role's one group, {ONE_GROUP} (profile {name}): what it installs and checks.\n"
    ctx = {
        "single": True,
        "role": role_facts(plan, rootfs),
        "profiles": [yaml_scalar(ONE_GROUP)],
        "hosts_default": Quoted(f"'{HOSTS}'"),
    }
    data = groups_yaml({ONE_GROUP: group_data(plan, rootfs)})
    out = role_tree(templates, ctx, f"{OUT}/", plan.header, "\n" + wrap_long(intro) + data)
    return out + group_files(f"{ROLE}/files/{ONE_GROUP}", done)


def role_tree(templates: Templates, ctx: dict[str, Any], root: str, header: str,
              defaults_end: str = "") -> list[Artifact]:
    """The role's files and the playbooks under ``root`` (``ansible/`` in OUT, empty in export --ansible's
    folder): the static files with ``header`` before them (``defaults_end`` after the defaults), the README and
    the playbooks from their templates; ``ctx`` says one group (``single``) or several."""
    # the header the static files get in Python is guarded here, as a template's printed value would be
    head = f"---\n{guard(wrap_long(header), 'yaml', f'{TEMPLATES}/roles/mig_restore')}\n"
    out = [Artifact(f"{root}roles/mig_restore/{name}",
                    head + _static(name) + (defaults_end if name == DEFAULTS else ""), 0o644)
           for name in STATIC_FILES]
    role = templates.with_variables({**ctx, "role_header": header})
    out.append(role.file(f"{TEMPLATES}/roles/mig_restore/README.md.j2", f"{root}roles/mig_restore/README.md", 0o644))
    out += [role.file(f"{TEMPLATES}/{name}.j2", f"{root}{name}", 0o644) for name in PLAYBOOKS]
    return out


@cache
def _static(name: str) -> str:
    """A static file of the role, as shipped under templates/ansible/roles/mig_restore/."""
    env = environment()
    assert env.loader is not None
    return env.loader.get_source(env, f"{TEMPLATES}/roles/mig_restore/{name}")[0]


def group_files(folder: str, done: Rendered) -> list[Artifact]:
    """A group's files in the role (``folder``: ``.../files/<group>``): the rendered rootfs/ tree under
    ``rootfs/``, byte for byte and in the order written, the preflight, verify and uninstall scripts, and the
    named layouts' Slurm files under ``slurm/`` (what a layout move installs)."""
    out = [Artifact(f"{folder}/rootfs/{rel}", a.content, a.mode) for rel, a in done.under(ROOTFS)]
    out += [Artifact(f"{folder}/{name}", done[f"scripts/{name}"].content, done[f"scripts/{name}"].mode)
            for name in ROLE_SCRIPTS]
    out += [Artifact(f"{folder}/{SLURM}/{rel}", a.content, a.mode) for rel, a in done.under(SLURM) if "/" in rel]
    return out


def groups_yaml(groups: dict[str, dict[str, Any]]) -> str:
    """The end of the role's ``defaults/main.yml``: each group's data (``group_data``) under its name."""
    return vars_yaml({"mig_restore_groups": groups})


def group_data(plan: RenderPlan, rootfs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The variables of one group of the role: what it installs and checks on the hosts of ``plan``'s profile.

    ``rootfs``: (path inside rootfs/, mode) of the rendered files (the role's ``files/<group>/rootfs/``).
    """
    prof = plan.profile
    facts = role_facts(plan, rootfs)
    return {
        "mig_restore_profile": prof.name,
        "mig_restore_files": [{"path": f["src"], "mode": f["mode"]} for f in facts["files"]],
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
        # driver: container: the restore is the watcher (Type=simple, always active), and the layout is there only
        # once the driver's pod is up and the watcher wrote its ready file; activate waits for that file
        "mig_restore_driver_container": prof.watches_driver,
        "mig_restore_ready_file": watch_paths(plan)["ready"] if prof.watches_driver else "",
        # named layouts: activate's mig_restore_layout moves a node to one of these by writing the file source's
        # file ("" where restore.layout.from does not read it)
        "mig_restore_layout_names": list(plan.mig.layout_names),
        "mig_restore_layout_file": LAYOUT_FILE if "file" in prof.restore.layout_from else "",
        # a Slurm node moved to another layout gets that layout's gres.conf and Gres= (docs/slurm.md)
        "mig_restore_slurm_layouts": slurm_layouts(plan),
    }


def slurm_layouts(plan: RenderPlan) -> dict[str, dict[str, str]]:
    """Each named layout's Slurm files for a move: ``gres_conf`` (its gres.conf under the group's ``files/<group>/``)
    and ``gres`` (its ``Gres=``); each empty where the layout has one per GPU model (slurm.autodetect false with
    several models, or several models' counts), which no one file or line of a node can say."""
    if plan.slurm is None:
        return {}
    out = {}
    for s in plan.slurm.named:
        files = gres_files(s)
        gres = s.nodes[0].gres() if len(s.nodes) == 1 else ""
        out[s.layout] = {"gres_conf": files[0][0] if len(files) == 1 else "", "gres": gres}
    return out


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
        "driver_container": plan.profile.watches_driver,
    }


def _tools(pieces: Sequence[BasePiece]) -> list[str]:
    """The tools' paths."""
    return list(dict.fromkeys(x.path for x in pieces if x.kind == "tool"))


def _units(pieces: Sequence[BasePiece]) -> list[list[str]]:
    """Each unit with the file that also provides it (its template), as [unit, file] for the role's check."""
    return [[x.name, x.template] for x in dict.fromkeys(x for x in pieces if x.kind == "unit")]
