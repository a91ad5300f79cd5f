"""One Ansible role for many node types (``migbake export --ansible``): ``targets.ansible``'s role, a group per profile.

Each profile is planned and rendered exactly as ``generate`` does it (``make_plan``, ``render_written``). Its
inventory group (``ansible_group``: the profile's name made a valid Ansible group name) gets the role's
``files/<group>/``, that render's ``rootfs/`` files and its preflight and verify scripts (``targets.ansible.
group_files``), and its entry in ``mig_restore_groups`` at the end of the role's ``defaults/main.yml``, the data
``targets.ansible.group_data`` reads from its plan: the very files and data the one-profile role of ``generate``
carries for its one group. Role defaults are the one place every inventory variable outranks (a playbook's
``group_vars/`` would outrank the inventory's own group and child-group variables). The role and the
playbooks are those of ``generate`` (``targets.ansible.role_tree``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from migbake import __version__
from migbake.problems import MigbakeError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, Quoted
from migbake.render.guard import line as guard_line
from migbake.render.plan import make_plan
from migbake.render.quoting import yaml_scalar
from migbake.render.targets.ansible import group_data, group_files, groups_yaml, role_tree
from migbake.render.targets.rootfs import ROOTFS
from migbake.render.tree import render_written

ROLE = "roles/mig_restore"
# Ansible's implicit groups: every host is in `all` (its data would reach every node)
ANSIBLE_GROUPS = ("all", "ungrouped")


def ansible_group(profile_name: str) -> str:
    """The inventory group of a profile: its name with ``-`` as ``_``, and ``profile_`` before a leading digit.

    Ansible accepts only Python identifiers as group names: any other character is "Invalid characters were
    found in group names" at every run (``INVALID_VARIABLE_NAMES = '^[\\d\\W]|[^\\w]'``,
    ansible/ansible:lib/ansible/constants.py@v2.19.0, used by lib/ansible/inventory/group.py). A profile name is
    ``[a-z0-9-]``, so this is one-to-one but for a clash that ``_group_names`` refuses.
    """
    group = profile_name.replace("-", "_")
    return f"profile_{group}" if group[:1].isdigit() else group


class GroupClashError(MigbakeError):
    """Two profiles of one ``export --ansible`` would be one inventory group (or one is Ansible's own group)."""


def fleet_tree(profiles: Sequence[tuple[str, NodeProfile]]) -> list[Artifact]:
    """The exported folder for ``(file, profile)`` pairs: the role (each profile's data in its defaults), the playbooks.

    GroupClashError when two profiles have one name (one group), or a name is one of Ansible's own groups.
    """
    groups = _group_names(profiles)
    shown = ", ".join(prof.name for _, prof in profiles)
    ctx = {
        "single": False,
        "header": _header(f"from node profiles {shown}", "the profiles"),
        "profiles": [yaml_scalar(g) for g in groups],
        "profiles_text": guard_line(", ".join(groups), "the inventory groups"),
        "hosts_default": Quoted("mig_restore_profiles"),
    }
    out: list[Artifact] = []
    data: dict[str, dict[str, object]] = {}
    for group, (_, prof) in zip(groups, profiles):
        files, data[group] = group_tree(prof)
        out += files
    role_header = _header("for every node profile (each group's data: defaults/main.yml; its files: files/GROUP/)",
                          "the profiles")
    intro = ("# The data of each profile's inventory group (its name with - as _): what the role installs and checks\n"
             "# on the hosts of that group. Override a value in your inventory (docs/ansible.md), never here.\n")
    out += role_tree(Templates({}), ctx, "", role_header, "\n" + intro + groups_yaml(data))
    return sorted(out, key=lambda a: a.path)


def fleet_sha256(profiles: Sequence[NodeProfile]) -> str:
    """One sha256 for the exported profiles (their own sha256s, in order): what the output marker records."""
    return hashlib.sha256("\n".join(p.source_sha256 for p in profiles).encode()).hexdigest()


def _group_names(profiles: Sequence[tuple[str, NodeProfile]]) -> list[str]:
    """Each profile's inventory group (``ansible_group``), in order; GroupClashError when two share one."""
    seen: dict[str, str] = {}
    for file, prof in profiles:
        group = ansible_group(prof.name)
        if group in ANSIBLE_GROUPS:
            raise GroupClashError(f"{file}: profile name {prof.name!r} is Ansible's own group (every host is in "
                                  f"'all'); rename the profile for export --ansible; nothing written")
        if group in seen:
            raise GroupClashError(f"{file}: profile name {prof.name!r} would be inventory group {group!r} "
                                  f"as {seen[group]} is: give one profile another name; "
                                  "nothing written")
        seen[group] = f"{file} ({prof.name})"
    return list(seen)


def _header(source: str, what: str) -> Block:
    lines = [f"Generated by migbake {__version__} (`migbake export --ansible`) {source}.",
             f"Do not edit: change {what} and run `migbake export --ansible` again."]
    return Block("\n".join(f"# {guard_line(line, 'the header line')}" for line in lines))


def group_tree(prof: NodeProfile) -> tuple[list[Artifact], dict[str, object]]:
    """What the hosts of the profile's group get: the role's ``files/<group>/`` and the group's data."""
    plan = make_plan(prof)
    done = Rendered(render_written(plan))  # the very files `generate` writes, in the order written
    rootfs = [(rel, a.mode) for rel, a in done.under(ROOTFS)]
    group = ansible_group(prof.name)
    return group_files(f"{ROLE}/files/{group}", done), group_data(plan, rootfs)
