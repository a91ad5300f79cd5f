"""`migbake export --ansible`: one Ansible role for several profiles, each profile's data its group's entry in the
role's defaults (mig_restore_groups).

Each group's files in the role (files/<group>/) are the render's own files (what `generate` writes to OUT/rootfs
and OUT/scripts); its data list them with their modes, every string tagged !unsafe, read back by Ansible itself
(ansible-inventory) exactly; the role's tasks name no profile;
ansible-lint's production profile and ansible-playbook --syntax-check judge the tree; a clash of names,
Ansible's own group names and the output rules are refused with nothing written. The chroot run is in
tests/vm/test_fleet_chroot.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import ANSIBLE_JSON_RESULTS, ansible_debug_messages, require, run
from support import IMAGES, cli
from test_ansible_kickstart import assert_lint_clean

from migbake.render.quoting import vars_yaml
from migbake.render.tree import render
from migbake.rules.validate import check_file

NAMES = [yaml.safe_load((p / "node-profile.yaml").read_text())["name"] for p in IMAGES]
# each profile's inventory group: a valid Ansible group name (a `-` made Ansible warn at every run)
GROUPS = [n.replace("-", "_") for n in NAMES]


class _Loader(yaml.SafeLoader):
    """YAML as Ansible reads it: ``!unsafe`` is a string."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _env(tmp_path: Path) -> dict[str, str]:
    return {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"), "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet") / "fleet"
    code, said, err = cli("export", "--ansible", *(str(p / "node-profile.yaml") for p in IMAGES), "-o", str(out))
    assert code == 0, said + err
    shown = ", ".join(f"{g} (profile {n})" for g, n in zip(GROUPS, NAMES))
    assert f"to {out} (one role; inventory groups {shown})" in said
    return out


def _expected(image: Path) -> dict[str, Any]:
    checked = check_file(image / "node-profile.yaml")
    assert checked.profile is not None
    return {a.path: a for a in render(checked.profile)}


def test_each_group_gets_its_profiles_rendered_files(exported: Path) -> None:
    assert not (exported / "group_vars").exists()  # a playbook's group_vars/ would outrank the inventory's
    groups = yaml.load((exported / "roles/mig_restore/defaults/main.yml").read_text(), Loader=_Loader)
    assert sorted(groups["mig_restore_groups"]) == sorted(GROUPS)
    assert sorted(p.name for p in (exported / "roles/mig_restore/files").iterdir()) == sorted(GROUPS)
    for image, name, group in zip(IMAGES, NAMES, GROUPS):
        data = groups["mig_restore_groups"][group]
        artifacts = _expected(image)
        rootfs = {p.removeprefix("rootfs/"): a for p, a in artifacts.items() if p.startswith("rootfs/")}
        files = exported / "roles/mig_restore/files" / group
        assert {p.relative_to(files / "rootfs").as_posix(): p.read_bytes() for p in (files / "rootfs").rglob("*")
                if p.is_file()} == {rel: a.data for rel, a in rootfs.items()}
        assert sorted((f["path"], f["mode"]) for f in data["mig_restore_files"]) == \
            sorted((rel, f"{a.mode:04o}") for rel, a in rootfs.items())
        for script in ("preflight-mig-restore.sh", "verify-mig-restore.sh"):
            assert (files / script).read_bytes() == artifacts[f"scripts/{script}"].data
        # the same data and files as the one-profile role of OUT/ansible (its one group: all)
        defaults = yaml.load(artifacts["ansible/roles/mig_restore/defaults/main.yml"].text, Loader=_Loader)
        assert defaults["mig_restore_groups"] == {"all": data}
        assert data["mig_restore_profile"] == name
        ones = "ansible/roles/mig_restore/files/all/"
        assert {p.removeprefix(ones): a.data for p, a in artifacts.items() if p.startswith(ones)} == \
            {p.relative_to(files).as_posix(): p.read_bytes() for p in files.rglob("*") if p.is_file()}


def test_exactly_the_strings_ansible_would_template_are_unsafe() -> None:
    """A string holding Jinja's {{, {% or {# is !unsafe; any other is a plain YAML string (Ansible reads a tagged
    scalar by its plain form's type: !unsafe '0644' would be the int 420)."""
    data = {"a": "{{ x }}", "b": "x {% if", "c": "{# c", "mode": "0644", "empty": "", "list": ["plain", "y {{"]}
    root = yaml.compose(vars_yaml(data), Loader=_Loader)
    tags = {key.value: value.tag for key, value in root.value if isinstance(value, yaml.ScalarNode)}
    assert tags == {"a": "!unsafe", "b": "!unsafe", "c": "!unsafe", "mode": "tag:yaml.org,2002:str",
                    "empty": "tag:yaml.org,2002:str"}
    assert [n.tag for n in root.value[-1][1].value] == ["tag:yaml.org,2002:str", "!unsafe"]
    assert yaml.load(vars_yaml(data), Loader=_Loader) == data


def test_the_role_names_no_profile(exported: Path) -> None:
    role = [p for p in (exported / "roles/mig_restore").rglob("*") if p.is_file()
            and p.relative_to(exported / "roles/mig_restore").parts[0] != "files"]
    assert len(role) == 12  # tasks/uninstall.yml and tasks/ready.yml among them
    # defaults/main.yml: the tasks' defaults, then each group's data (mig_restore_groups), which names its profile
    defaults = exported / "roles/mig_restore/defaults/main.yml"
    data = yaml.load(defaults.read_text(), Loader=_Loader)
    assert sorted(data.pop("mig_restore_groups")) == sorted(GROUPS)
    assert not [n for n in NAMES + GROUPS if n in json.dumps(data)]
    role.remove(defaults)
    for path in role:
        text = path.read_text()
        assert not [n for n in NAMES + GROUPS if n in text], path
    for playbook in ("install.yml", "activate.yml"):
        (play,) = yaml.safe_load((exported / playbook).read_text())
        assert play["hosts"] == "{{ mig_restore_hosts | default(mig_restore_profiles) }}"
        assert play["vars"] == {"mig_restore_profiles": GROUPS}


@pytest.mark.realtool
def test_ansible_reads_each_hosts_group_data_exactly(exported: Path, tmp_path: Path) -> None:
    """ansible-playbook with the exported role: each host gets its group's data and files, as rendered."""
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("".join(f"[{group}]\nnode-{name} ansible_connection=local\n\n"
                                 for name, group in zip(NAMES, GROUPS)))
    play = tmp_path / "show.yml"
    play.write_text(
        f"- hosts: all\n  gather_facts: false\n  vars:\n    mig_restore_profiles: {json.dumps(GROUPS)}\n"
        "  tasks:\n    - ansible.builtin.include_role: {name: mig_restore, tasks_from: group, public: true}\n"
        "    - ansible.builtin.debug:\n"
        "        msg: \"{{ {'group': mig_restore_group, 'profile': mig_restore_profile,\n"
        "               'files': mig_restore_files} }}\"\n")
    result = run([require("ansible-playbook"), "-i", str(inventory), str(play)],
                 env={**_env(tmp_path), "ANSIBLE_ROLES_PATH": str(exported / "roles"), **ANSIBLE_JSON_RESULTS})
    assert result.rc == 0, result.text
    assert "Invalid characters were found in group names" not in result.text, result.text
    hosts = {host: next(m for m in msgs if isinstance(m, dict))
             for host, msgs in ansible_debug_messages(result.out).items()}
    for image, name in zip(IMAGES, NAMES):
        host = hosts[f"node-{name}"]
        rootfs = {p.removeprefix("rootfs/"): f"{a.mode:04o}" for p, a in _expected(image).items()
                  if p.startswith("rootfs/")}
        assert {f["path"]: f["mode"] for f in host["files"]} == rootfs
        assert host["profile"] == name
        files = exported / "roles/mig_restore/files" / host["group"] / "rootfs"
        assert all((files / path).is_file() for path in rootfs)


@pytest.mark.realtool
def test_ansible_lint_production_profile_and_syntax_check(exported: Path, tmp_path: Path) -> None:
    config = yaml.safe_load((exported / ".ansible-lint").read_text())
    # nothing skipped; excluded: only the node's files, which the role copies as they are (not Ansible's YAML)
    assert config == {"profile": "production", "offline": True, "exclude_paths": ["roles/mig_restore/files/"]}
    for path in exported.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "noqa" not in text and "skip_ansible_lint" not in text, path
    assert_lint_clean(exported, tmp_path)
    syntax = run([require("ansible-playbook"), "--syntax-check", "-i", "localhost,", "install.yml", "activate.yml"],
                 cwd=exported, env=_env(tmp_path))
    assert syntax.rc == 0, syntax.text


@pytest.mark.realtool
def test_ansible_lint_sees_a_planted_mistake(exported: Path, tmp_path: Path) -> None:
    tree = tmp_path / "fleet"
    run(["cp", "-a", str(exported), str(tree)])
    group = tree / "roles/mig_restore/defaults/main.yml"
    group.write_text(group.read_text() + "mig_restore_extra: " + "x" * 170 + "\n")
    result = run([require("ansible-lint"), "--nocolor", "--offline", "--profile", "production", "."],
                 cwd=tree, env=_env(tmp_path), timeout=300)
    assert result.rc != 0 and "yaml[line-length]" in result.text, result.text


def _profile(tmp_path: Path, name: str, source: Path = IMAGES[0]) -> Path:
    data = yaml.safe_load((source / "node-profile.yaml").read_text())
    data["name"] = name
    path = tmp_path / f"{name}-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("first_name", "second", "group"), [
    ("same-name", "same-name", "same_name"), ("same-name", "all", ""), ("same-name", "ungrouped", ""),
    ("9-gpu", "profile-9-gpu", "profile_9_gpu"),  # a leading digit: profile_ before it, which can meet a name
], ids=["same", "all", "ungrouped", "digit"])
def test_a_clash_of_group_names_writes_nothing(first_name: str, second: str, group: str, tmp_path: Path) -> None:
    first = _profile(tmp_path, first_name, IMAGES[1])
    other = _profile(tmp_path, second)
    out = tmp_path / "fleet"
    code, said, err = cli("export", "--ansible", str(first), str(other), "-o", str(out))
    assert code == 1, said + err
    assert f"profile name {second!r}" in err and "nothing written" in err, err
    assert (f"inventory group {group!r}" in err) if group else ("Ansible's own group" in err)
    assert not out.exists()


def test_ansible_takes_every_group_name_as_it_is() -> None:
    """Ansible's own rule (INVALID_VARIABLE_NAMES) finds nothing to replace in any group migbake makes."""
    from ansible.constants import INVALID_VARIABLE_NAMES

    from migbake.render.fleet import ansible_group

    for name in ("h200-inference", "9-gpu", "a", "x-" * 30 + "y", *NAMES):
        assert not INVALID_VARIABLE_NAMES.search(ansible_group(name)), name
        assert INVALID_VARIABLE_NAMES.search(name) or "-" not in name, "the check above must be able to fail"


def test_the_output_folder_follows_the_output_rules(tmp_path: Path) -> None:
    profile = str(IMAGES[0] / "node-profile.yaml")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep")
    code, _, err = cli("export", "--ansible", profile, "-o", str(foreign))
    assert code == 2 and "not empty and was not created by migbake" in err, err
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]
    code, _, err = cli("export", "--ansible", profile, "-o", str(foreign), "--force")  # not ours: kept
    assert code == 2 and "--force included" in err and [p.name for p in foreign.iterdir()] == ["mine.txt"]
    (foreign / "mine.txt").unlink()
    assert cli("export", "--ansible", profile, "-o", str(foreign))[0] == 0
    assert (foreign / "roles/mig_restore/tasks/main.yml").is_file()
    # its own folder again, with other profiles: replaced
    assert cli("export", "--ansible", profile, str(IMAGES[1] / "node-profile.yaml"), "-o", str(foreign))[0] == 0
    # a generate OUT is not an export's folder, nor the other way round
    out = tmp_path / "out"
    assert cli("generate", profile, "-o", str(out))[0] == 0
    code, _, err = cli("export", "--ansible", profile, "-o", str(out))
    assert code == 2 and "the output of `migbake generate`" in err and "--force" in err, err
    assert (out / "rootfs").is_dir()
    code, _, err = cli("generate", profile, "-o", str(foreign))
    assert code == 2 and "the output of `migbake export --ansible` (profiles " in err, err


@pytest.mark.parametrize("args, words", [
    (["--ansible"], "give it with -o DIR"),
    (["--ansible", "--gpu-operator", "-o", "x"], "--ansible and --gpu-operator"),
    (["--force", "-o", "x.yaml"], "--force is for --ansible"),
], ids=["no-output", "two-exports", "force-without-ansible"])
def test_usage(args: list[str], words: str, tmp_path: Path) -> None:
    code, _, err = cli("export", *args, str(IMAGES[0] / "node-profile.yaml"))
    assert code == 2 and words in err, err


def test_a_file_export_still_refuses_a_directory(tmp_path: Path) -> None:
    code, _, err = cli("export", str(IMAGES[0] / "node-profile.yaml"), "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err, err


HOSTILE = [
    "x" * 400,  # no space to fold at: a line of its own
    " leading and trailing spaces ",
    "a\n  indented\n\n\ttab\n",
    "quotes ' \" and \\ backslashes\\",
    "line\u2028separator\u2029paragraph\x85next\ufeffbom\x7fdel",
    "{{ lookup('pipe', 'id') }} {% raw %} {# c #}",
    "é ü 😀 " * 40,
    "ends with a space before a break \n" * 20,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("loader", ["python", "libyaml"])
def test_group_data_read_back_exactly_with_short_lines(text: str, loader: str) -> None:
    base: Any = yaml.SafeLoader if loader == "python" else getattr(yaml, "CSafeLoader", None)
    if base is None:
        pytest.skip("PyYAML without libyaml")

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
    data = {"mig_restore_files": [{"dest": "/etc/x", "content": text}], "mig_restore_profile": text}
    written = vars_yaml(data)
    assert yaml.load(written, Loader=Loader) == data
    for row in written.splitlines():  # what yamllint's line-length (160, allow-non-breakable-words) takes
        rest = row.lstrip(" ").removeprefix("- ")
        assert len(row) <= 160 or " " not in rest, row


@pytest.mark.realtool
def test_ansible_never_templates_the_group_data(tmp_path: Path) -> None:
    """The !unsafe tag, judged by Ansible: a lookup in a group's string is printed, never run."""
    planted = tmp_path / "templated"
    hostile = f"{{{{ lookup('pipe', 'touch {planted}') }}}}"
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars/g.yml").write_text("---\n" + vars_yaml({"mig_restore_profile": hostile}))
    (tmp_path / "inventory.ini").write_text("[g]\nnode ansible_connection=local\n")
    (tmp_path / "p.yml").write_text("- hosts: g\n  gather_facts: false\n  tasks:\n"
                                    "    - ansible.builtin.debug:\n        msg: \"{{ mig_restore_profile }}\"\n")
    result = run([require("ansible-playbook"), "-i", str(tmp_path / "inventory.ini"), str(tmp_path / "p.yml")],
                 env=_env(tmp_path))
    assert result.rc == 0, result.text
    assert json.dumps(hostile)[1:-1] in result.out and not planted.exists(), result.text
    # the same text without the tag: Ansible runs the lookup (what the tag prevents)
    (tmp_path / "group_vars/g.yml").write_text(f"---\nmig_restore_profile: {json.dumps(hostile)}\n")
    run([require("ansible-playbook"), "-i", str(tmp_path / "inventory.ini"), str(tmp_path / "p.yml")],
        env=_env(tmp_path))
    assert planted.exists()
