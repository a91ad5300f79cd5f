"""One Ansible role for many node types (``migbake export --ansible``): a data-driven role, group_vars per profile.

Each profile is planned and rendered exactly as ``generate`` does it (``make_plan``, ``render_plan``); the
data of its inventory group (``group_vars/<group>.yml``, the group the profile's name made a valid Ansible group
name: ``ansible_group``) are that render's ``rootfs/`` files
(content and mode), its preflight and verify scripts, and the facts the per-profile role is rendered from
(``targets.ansible.role_facts``: base-image checks, consumers, timeouts). The role's tasks loop over those
variables and name no profile. A YAML emitter writes every string of the data with Ansible's ``!unsafe``
tag, so Ansible never evaluates a ``{{`` that a profile put into a file (a description in a header); a file
that holds one is base64 as well (``payload``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

import yaml

from migbake import __version__
from migbake.document import emitter
from migbake.document.patterns import CONTROL, whole
from migbake.problems import MigbakeError, RenderError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.artifact import Artifact
from migbake.render.environment import Templates
from migbake.render.guard import Block
from migbake.render.guard import line as guard_line
from migbake.render.plan import make_plan
from migbake.render.quoting import yaml_scalar
from migbake.render.targets.ansible import ROLE_SCRIPTS, role_facts
from migbake.render.targets.rootfs import ROOTFS
from migbake.render.tree import render_plan

ROLE = "roles/mig_restore"
GROUP_VARS = "group_vars"
TEMPLATES = "fleet"  # templates/fleet/ mirrors the exported folder
ROLE_FILES = ("tasks/main.yml", "tasks/group.yml", "tasks/check.yml", "tasks/install.yml", "tasks/activate.yml",
              "handlers/main.yml", "defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml", "README.md")
PLAYBOOKS = ("install.yml", "activate.yml", ".ansible-lint")
# Ansible's implicit groups: every host is in `all` (group_vars/all.yml would reach every node)
ANSIBLE_GROUPS = ("all", "ungrouped")
# the role runs a script as one argument of `bash -c`: Linux's MAX_ARG_STRLEN (32 pages of 4 KiB) bounds it
# (torvalds/linux:include/uapi/linux/binfmts.h@v6.6)
MAX_SCRIPT_BYTES = 32 * 4096 - 1
JINJA_DELIMITERS = ("{{", "{%", "{#")  # Jinja's default start strings (Ansible's too)
WIDTH = 150  # ansible-lint's yamllint allows lines of 160 characters; a literal block is indented by 6
_LITERAL_WIDTH = WIDTH - 10


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
    """The exported folder for ``(file, profile)`` pairs: the role, one group_vars file per profile, the playbooks.

    GroupClashError when two profiles have one name (one group), or a name is one of Ansible's own groups.
    """
    groups = _group_names(profiles)
    shown = ", ".join(prof.name for _, prof in profiles)
    templates = Templates({
        "header": _header(f"from node profiles {shown}", "the profiles"),
        "role_header": _header("for every node profile (each group's data: group_vars/GROUP.yml)", "the profiles"),
        "profiles": [yaml_scalar(g) for g in groups],
        "profiles_text": guard_line(", ".join(groups), "the inventory groups"),
    })
    out = [group_vars(prof) for _, prof in profiles]
    out += [templates.file(f"{TEMPLATES}/{ROLE}/{name}.j2", f"{ROLE}/{name}", 0o644) for name in ROLE_FILES]
    out += [templates.file(f"{TEMPLATES}/{name}.j2", name, 0o644) for name in PLAYBOOKS]
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
                                  f"(group_vars/{group}.yml) as {seen[group]} is: give one profile another name; "
                                  "nothing written")
        seen[group] = f"{file} ({prof.name})"
    return list(seen)


def _header(source: str, what: str) -> Block:
    lines = [f"Generated by migbake {__version__} (`migbake export --ansible`) {source}.",
             f"Do not edit: change {what} and run `migbake export --ansible` again."]
    return Block("\n".join(f"# {guard_line(line, 'the header line')}" for line in lines))


def group_vars(prof: NodeProfile) -> Artifact:
    """``group_vars/<group>.yml``: what the role installs and checks on the hosts of the profile's group."""
    plan = make_plan(prof)
    tree = {a.path: a for a in render_plan(plan)}  # the very files `generate` writes
    rootfs = [(path[len(ROOTFS) + 1:], a) for path, a in tree.items() if path.startswith(ROOTFS + "/")]
    facts = role_facts(plan, [(rel, a.mode) for rel, a in rootfs])
    content = {rel: a.text for rel, a in rootfs}
    preflight, verify = (tree[f"scripts/{name}"].text for name in ROLE_SCRIPTS)
    for name, text in zip(ROLE_SCRIPTS, (preflight, verify)):
        if len(text.encode("utf-8")) > MAX_SCRIPT_BYTES:
            raise RenderError(f"{name} of profile {prof.name} is larger than one argument of bash -c may be "
                              f"({MAX_SCRIPT_BYTES} bytes); export --ansible cannot carry it")
    group = ansible_group(prof.name)
    data = {
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
        "mig_restore_advertises": plan.advertises,
        "mig_restore_slurm": facts["slurm"],
        "mig_restore_slurm_reason": f"migbake: MIG layout change ({prof.name})",
        "mig_restore_unit_wait_seconds": facts["unit_wait"],
        "mig_restore_preflight_script": payload(preflight),
        "mig_restore_verify_script": payload(verify),
    }
    intro = (f"# The data of Ansible role mig_restore for the hosts of inventory group {group} (profile "
             f"{guard_line(prof.name, 'the profile name')}):\n"
             "# every string is !unsafe (Ansible never templates it).\n")
    return Artifact(f"{GROUP_VARS}/{group}.yml", "---\n" + plan.header + "\n" + intro + vars_yaml(data), 0o644)


def payload(text: str) -> dict[str, str]:
    """A file's text as group data: ``content``, or ``content_base64`` when it holds Jinja's delimiters.

    Ansible never templates an ``!unsafe`` string, but ansible-lint's jinja rule still parses one
    (ansible/ansible-lint#4647, open in 26.10): base64 keeps such a file (a shell script's ``${#x}``, a
    go-template, a description with ``{{``) out of its sight, and from Ansible's templating twice over.
    """
    if any(d in text for d in JINJA_DELIMITERS):
        return {"content_base64": base64.b64encode(text.encode("utf-8")).decode("ascii")}
    return {"content": text}


class _Unsafe(str):
    """A string of a group's data: written with Ansible's ``!unsafe`` tag."""

    __slots__ = ()


# what a double-quoted scalar may hold as it is (printable, and not one of YAML's escapes or line breaks)
_AS_IS = whole(r"^[\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]$")
_ESCAPES = {"\x00": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
            "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P"}


def _escaped(ch: str) -> str:
    """One character as a YAML double-quoted scalar writes it."""
    if _AS_IS.match(ch):
        return ch
    if ch in _ESCAPES:
        return "\\" + _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


class _VarsDumper(emitter.SafeDumper):
    """The one emitter's pure-Python safe dumper (``document.emitter``), sequences indented under their key
    (yamllint's and ansible-lint's style), and double-quoted scalars folded so that no line is longer than
    the width (PyYAML folds only at a space or after an escape, and only once past the width)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """``text`` in double quotes, broken by escaped line breaks (which add nothing to the value) where a
        line would pass the width; a space that starts a line is escaped (``\\ ``), as a line's leading
        white space is not part of the value."""
        self.write_indicator('"', True)
        for i, ch in enumerate(text):
            piece = _escaped(ch)
            if split and i and self.column + len(piece) + 1 > self.best_width:
                self.stream.write("\\")
                self.write_indent()
                self.whitespace = self.indention = False
                piece = "\\ " if ch == " " else piece
            self.stream.write(piece)
            self.column += len(piece)
        self.write_indicator('"', False)


def _represent_unsafe(dumper: yaml.SafeDumper, data: _Unsafe) -> yaml.ScalarNode:
    """A file as a literal block when every line fits and holds no control character, else double-quoted
    (escapes, long lines folded); a one-line string double-quoted."""
    text = str(data)
    lines = text.split("\n")
    literal = len(lines) > 1 and not CONTROL.search(text.replace("\n", "")) and max(map(len, lines)) <= _LITERAL_WIDTH
    return dumper.represent_scalar("!unsafe", text, style="|" if literal else '"')


_VarsDumper.add_representer(_Unsafe, _represent_unsafe)


def _tagged(value: Any) -> Any:
    if isinstance(value, str):
        return _Unsafe(value)
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items()}
    return value


def vars_yaml(data: dict[str, Any]) -> str:
    """Ansible variables as YAML: every string ``!unsafe``, keys in order, lines of at most ``WIDTH``."""
    return str(yaml.dump(_tagged(data), Dumper=_VarsDumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=WIDTH))
