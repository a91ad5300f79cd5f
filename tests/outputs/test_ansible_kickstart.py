"""The fleet targets judged by their real tools: the Ansible role and playbooks, the Kickstart %post.

ansible-playbook --syntax-check and ansible-lint (production profile) on every example image's
ansible/ tree; ksvalidator (pykickstart) on a minimal kickstart that %includes the %post; the role's files
(its one group's, files/all/) are the render's own rootfs files and scripts, listed with their modes in its
data (defaults/main.yml). The real runs (chroot, VM) are in tests/vm.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pykickstart.parser import KickstartParser
from pykickstart.version import makeVersion
from realtools import require, run
from support import IMAGES, generate

from migbake.problems import RenderError
from migbake.render.targets.ansible import ROLE
from migbake.render.targets.kickstart import HEREDOC_END, heredoc_body
from migbake.render.tree import render
from migbake.rules.validate import check_file

MINIMAL_KS = """\
text
lang en_US.UTF-8
keyboard us
timezone UTC --utc
rootpw --lock
bootloader --location=mbr
clearpart --all --initlabel
autopart
reboot
%packages
@^minimal-environment
%end
%include {include}
"""


def _ansible_env(tmp_path: Path) -> dict[str, str]:
    return {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"), "NO_COLOR": "1"}


def minimal_kickstart(include: Path, dest: Path) -> Path:
    """A minimal RHEL 9 kickstart that %includes ``include``."""
    dest.write_text(MINIMAL_KS.format(include=include))
    return dest


@pytest.mark.realtool
def test_playbooks_pass_syntax_check(image_dir: Path, tmp_path: Path) -> None:
    ansible = image_dir / "generated/ansible"
    playbooks = ["install.yml", "activate.yml", "uninstall.yml"]
    result = run([require("ansible-playbook"), "--syntax-check", "-i", "localhost,", *playbooks],
                 cwd=ansible, env=_ansible_env(tmp_path))
    assert result.rc == 0, result.text
    for playbook in playbooks:
        assert f"playbook: {playbook}" in result.out, result.out


@pytest.mark.realtool
def test_syntax_check_rejects_a_broken_playbook(tmp_path: Path) -> None:
    ansible = tmp_path / "ansible"
    src = IMAGES[0] / "generated/ansible"
    run(["cp", "-a", str(src), str(ansible)])
    text = (ansible / "activate.yml").read_text()
    (ansible / "activate.yml").write_text(text.replace("  tasks:\n", "  taskz:\n"))
    result = run([require("ansible-playbook"), "--syntax-check", "-i", "localhost,", "activate.yml"],
                 cwd=ansible, env=_ansible_env(tmp_path))
    assert result.rc != 0 and "taskz" in result.text, result.text


@pytest.mark.realtool
def test_ansible_lint_production_profile_is_clean(image_dir: Path, tmp_path: Path) -> None:
    ansible = image_dir / "generated/ansible"
    config = yaml.safe_load((ansible / ".ansible-lint").read_text())
    assert config["profile"] == "production"
    # nothing skipped; excluded: only the node's files, which the role copies as they are (not Ansible's YAML)
    assert config == {"profile": "production", "offline": True, "exclude_paths": ["roles/mig_restore/files/"]}
    for path in ansible.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "noqa" not in text and "skip_ansible_lint" not in text, path
    assert_lint_clean(ansible, tmp_path)


def assert_lint_clean(tree: Path, tmp_path: Path) -> None:
    """ansible-lint's production profile passes on ``tree``, with no failure and no warning."""
    result = run([require("ansible-lint"), "--nocolor", "--offline", "--profile", "production", "."],
                 cwd=tree, env=_ansible_env(tmp_path), timeout=300)
    assert result.rc == 0, result.text
    assert "0 failure(s), 0 warning(s)" in result.text and "Profile 'production' was required, and it passed" \
        in result.text, result.text


@pytest.mark.realtool
def test_ansible_lint_finds_a_planted_mistake(tmp_path: Path) -> None:
    ansible = tmp_path / "ansible"
    run(["cp", "-a", str(IMAGES[0] / "generated/ansible"), str(ansible)])
    tasks = ansible / "roles/mig_restore/tasks/install.yml"
    tasks.write_text(tasks.read_text().replace("ansible.builtin.systemd_service:", "systemd_service:", 1))
    result = run([require("ansible-lint"), "--nocolor", "--offline", "."], cwd=ansible, env=_ansible_env(tmp_path),
                 timeout=300)
    assert result.rc != 0 and "fqcn" in result.text, result.text


class _Unsafe(yaml.SafeLoader):
    """YAML as Ansible reads it: ``!unsafe`` is a string."""


_Unsafe.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def role_data(text: str) -> dict[str, Any]:
    """The variables of a role's defaults/main.yml, ``!unsafe`` read as a string, with its one group's data
    (``mig_restore_groups``) in place of the defaults that read them."""
    data = yaml.load(text, Loader=_Unsafe)
    assert isinstance(data, dict)
    groups = data.get("mig_restore_groups", {})
    return {**data, **(next(iter(groups.values())) if len(groups) == 1 else {})}


def test_role_files_are_the_rootfs_files_with_their_modes(image_dir: Path) -> None:
    checked = check_file(image_dir / "node-profile.yaml")
    assert checked.profile is not None
    artifacts = {a.path: a for a in render(checked.profile)}
    rootfs = {p.removeprefix("rootfs/"): a for p, a in artifacts.items() if p.startswith("rootfs/")}
    files = f"{ROLE}/files/all/"
    shipped = {p.removeprefix(files): a for p, a in artifacts.items() if p.startswith(files)}
    assert {p.removeprefix("rootfs/"): a.data for p, a in shipped.items() if p.startswith("rootfs/")} == \
        {p: a.data for p, a in rootfs.items()}
    for name in ("preflight-mig-restore.sh", "verify-mig-restore.sh", "uninstall-mig-restore.sh"):
        assert shipped[name].data == artifacts[f"scripts/{name}"].data
    assert len(shipped) == len(rootfs) + 3
    data = role_data(artifacts[f"{ROLE}/defaults/main.yml"].text)
    assert [(f["path"], f["mode"]) for f in data["mig_restore_files"]] == \
        [(p, f"{rootfs[p].mode:04o}") for p in rootfs_order(artifacts)]
    # the modes the Packer provisioner sets, from the same list
    packer = artifacts["packer/scripts/install-mig-restore.sh"].content
    assert isinstance(packer, str)
    for p, a in rootfs.items():
        assert f"install_file '{p}' '{a.mode:04o}'" in packer


def test_the_committed_roles_restore_script_is_the_rootfs_one(image_dir: Path) -> None:
    """What a reviewer reads in the role's files/ is what the image gets: the same bytes on disk."""
    generated = image_dir / "generated"
    restore = "etc/nvidia-mig/restore.sh"
    if not (generated / "rootfs" / restore).exists():  # driver: container: the watcher instead
        restore = "etc/nvidia-mig/driver-watch.sh"
    shipped = generated / f"{ROLE}/files/all/rootfs" / restore
    assert shipped.read_bytes() == (generated / "rootfs" / restore).read_bytes()


def rootfs_order(artifacts: dict[str, Any]) -> list[str]:
    """The rootfs files in the order the Packer provisioner installs them."""
    packer = artifacts["packer/scripts/install-mig-restore.sh"].text
    return re.findall(r"^install_file '([^']+)'", packer, re.M)


def test_playbook_defaults(image_dir: Path) -> None:
    activate = yaml.safe_load((image_dir / "generated/ansible/activate.yml").read_text())
    play = activate[0]
    assert play["serial"] == "{{ mig_restore_serial | default(1) }}"
    assert play["max_fail_percentage"] == "{{ mig_restore_max_fail_percentage | default(0) }}"
    assert play["hosts"] == "{{ mig_restore_hosts | default('gpu_nodes') }}"
    profile = yaml.safe_load((image_dir / "node-profile.yaml").read_text())
    defaults = role_data((image_dir / f"generated/{ROLE}/defaults/main.yml").read_text())
    assert defaults["mig_restore_kubernetes"] is profile.get("kubelet", {}).get("present", True)
    slurm = any(c["unit"] == "slurmd.service" for c in profile.get("consumers", []))
    assert defaults["mig_restore_slurm"] is slurm
    specs = yaml.safe_load((image_dir / f"generated/{ROLE}/meta/argument_specs.yml").read_text())["argument_specs"]
    documented = {name for entry in ("main", "activate", "uninstall") for name in specs[entry]["options"]}
    # every default is in meta/argument_specs.yml, and the playbooks' list of the groups (one here, all)
    assert documented == set(defaults) | {"mig_restore_profiles"}
    assert play["vars"] == {"mig_restore_profiles": ["all"]} and list(defaults["mig_restore_groups"]) == ["all"]
    readme = (image_dir / f"generated/{ROLE}/README.md").read_text()
    for name in documented | {"mig_restore_serial", "mig_restore_max_fail_percentage", "mig_restore_hosts"}:
        assert f"`{name}`" in readme, name
    tasks = (image_dir / f"generated/{ROLE}/tasks/install.yml").read_text()
    assert "state: started" not in tasks and "state: restarted" not in tasks, "the restore is never started"


@pytest.mark.realtool
def test_ksvalidator_accepts_the_post_included(image_dir: Path, tmp_path: Path) -> None:
    ks = minimal_kickstart(image_dir / "generated/kickstart/mig-restore.ks", tmp_path / "node.ks")
    result = run([require("ksvalidator"), "-e", "-i", "-v", "RHEL9", str(ks)])
    assert result.rc == 0 and "error" not in result.text.lower(), result.text


@pytest.mark.realtool
def test_ksvalidator_follows_the_include(tmp_path: Path) -> None:
    post = tmp_path / "mig-restore.ks"
    text = (IMAGES[0] / "generated/kickstart/mig-restore.ks").read_text()
    post.write_text(text.replace("%post --interpreter", "%post --interpretr", 1))
    result = run([require("ksvalidator"), "-e", "-i", "-v", "RHEL9", str(minimal_kickstart(post, tmp_path / "a.ks"))])
    assert result.rc != 0 and "interpretr" in result.text, result.text
    missing = run([require("ksvalidator"), "-i", "-v", "RHEL9",
                   str(minimal_kickstart(tmp_path / "none.ks", tmp_path / "b.ks"))])
    assert missing.rc != 0, missing.text


def test_kickstart_post_runs_the_bakes_own_scripts(image_dir: Path) -> None:
    generated = image_dir / "generated"
    parser = KickstartParser(makeVersion("RHEL9"))
    parser.readKickstart(str(generated / "kickstart/mig-restore.ks"))
    (post,) = parser.handler.scripts
    assert post.errorOnFail and post.interp == "/bin/bash" and post.inChroot
    for name in ("disable-mig-manager.sh", "install-mig-restore.sh"):
        assert (generated / "packer/scripts" / name).read_text() in post.script + "\n", name
    for path in (generated / "rootfs").rglob("*"):
        if path.is_file():
            assert path.read_text() in post.script + "\n", path


@pytest.mark.parametrize("text", ["a\n%end\n", "a\n  %post\n", "MIGBAKE_EOF\n", "no newline"],
                         ids=["end", "indented-section", "delimiter", "no-final-newline"])
def test_heredoc_guard_refuses_what_would_break_the_post(text: str) -> None:
    with pytest.raises(RenderError, match="Kickstart"):
        heredoc_body("x", text)


def test_heredoc_guard_keeps_ordinary_text() -> None:
    assert heredoc_body("x", "echo 100%\n# %s\n") == "echo 100%\n# %s"


def _heredoc_refuses(text: str) -> bool:
    """The rule, a line at a time: a line whose first non-blank character is % (Anaconda's), or the delimiter."""
    return any(line.lstrip().startswith("%") or line == HEREDOC_END for line in text.splitlines())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "%", "x%",
                                 HEREDOC_END, "%end"]), max_size=12).map(lambda parts: "".join(parts) + "\n"))
def test_heredoc_guard_refuses_exactly_the_lines_of_its_rule(text: str) -> None:
    """Its quick look (only where a % or the delimiter is) refuses what the line-at-a-time rule refuses."""
    if _heredoc_refuses(text):
        with pytest.raises(RenderError, match="Kickstart"):
            heredoc_body("x", text)
    else:
        assert heredoc_body("x", text) == text.rstrip("\n")


@pytest.mark.parametrize(("allocation", "words"), [
    ("device-plugin", "NVIDIA's device plugin advertises the layout as nvidia.com/* extended resources"),
    ("dra", "no device-plugin resources; NVIDIA's DRA driver (gpu.nvidia.com) publishes the layout's MIG devices"),
    ("dra-dynamic", "the restore created no MIG device; NVIDIA's DRA driver (gpu.nvidia.com, DynamicMIG)"),
], ids=["device-plugin", "dra", "dra-dynamic"])
def test_the_activation_says_what_the_node_advertises(tmp_path: Path, allocation: str, words: str) -> None:
    """After the verify, the activation speaks the allocation (and shows verify's lines about it)."""
    from migbake.render.fleet import group_tree
    from migbake.rules.validate import check_bytes

    layout = "" if allocation == "dra-dynamic" else "    mig: {layout: {3g.71gb: 1, 1g.18gb: 2}}\n"
    text = (f"version: 1\nname: adv\nkubernetes: {{allocation: {allocation}}}\ngpu_count: 2\n"
            f"gpus:\n  - model: NVIDIA H200\n{layout}")
    out = generate(text, tmp_path / "out")
    tasks = yaml.safe_load((out / "ansible/roles/mig_restore/tasks/activate.yml").read_text())
    block = next(t["block"] for t in tasks if t["name"] == "Activate the MIG layout on this node")
    names = [t["name"] for t in block]
    say = block[names.index("Say what the node advertises to Kubernetes")]
    assert names.index(say["name"]) == names.index("Verify the restored layout") + 1
    msg = say["ansible.builtin.debug"]["msg"]  # the group's words, then verify's lines about them
    assert msg[0] == "{{ mig_restore_advertises }}" and len(msg) == 2
    assert "select('search', 'allocatable|dra-devices|DRA devices')" in msg[1]
    data = role_data((out / f"{ROLE}/defaults/main.yml").read_text())
    assert words in data["mig_restore_advertises"]
    profile = check_bytes(text.encode(), "p.yaml").profile
    assert profile is not None
    _, data = group_tree(profile)
    assert words in data["mig_restore_advertises"]  # the fleet role's group data says the same


# --- lines ansible-lint's production profile takes (yaml[line-length], 160) ----------------

ORDINARY = """version: 1
name: h200-triton
description: H200 inference node with the DCGM exporter and Triton
gpu_count: 8
gpus:
  - model: h200-141gb
    mig: {layout: {1g.18gb: 7}}
kubelet: {present: true, layout: kubeadm}
consumers:
  - unit: dcgm-exporter.service
  - unit: triton-inference-server.service
  - unit: nvidia-dcgm.service
kubernetes:
  node_labels: {nvidia.com/gpu.deploy.mig-manager: "false"}
"""


LINT_MAX = 160  # ansible-lint's yamllint line-length (src/ansiblelint/data/.yamllint); render.quoting.MAX_LINE


def _longest(prefix: str, length: int = 180) -> str:
    """A unit name of ``length`` characters before .service (the schema allows 200 in all)."""
    return prefix + "x" * (length - len(prefix)) + ".service"


# every name and path at (or near) the schema's longest, a description of 200 characters with spaces
LONGEST = f"""version: 1
name: {"n" * 63}
description: {" ".join(["word"] * 40)}
gpus:
  - model: h200-141gb
    mig: {{layout: {{1g.18gb: 7}}}}
kubelet: {{present: true, unit: {_longest("kubelet-")}, layout: kubeadm}}
consumers:
  - unit: {_longest("dcgm-")}
  - unit: {_longest("triton-")}
  - unit: slurmd.service
restore:
  unit: {_longest("mig-restore-")}
  config_path: /etc/migbake/{"c" * 200}/config.yaml
  config_name: {"k" * 63}
tools: {{nvidia_smi: /usr/{"s" * 200}/nvidia-smi, nvidia_mig_parted: /usr/{"m" * 200}/nvidia-mig-parted}}
conflicting_manager: {{unit: {_longest("nvidia-mig-manager-")}, action: mask}}
kubernetes:
  node_labels: {{nvidia.com/gpu.deploy.mig-manager: "false"}}
"""


# named layouts: the role's layout move (mig_restore_layout)
# a description holding Jinja's delimiters: it heads every generated file, which the role copies as it is
DELIMITERS = ORDINARY.replace("description: H200 inference node with the DCGM exporter and Triton",
                              "description: 'H200 node, {{ not_a_variable }} {% not_a_tag %} {# not a comment #}'")
NAMED = """version: 1
name: moving
gpus:
  - model: h200-141gb
    mig:
      layouts:
        infer: {1g.18gb: 7}
        train: {7g.141gb: 1}
kubelet: {layout: kubeadm}
restore:
  layout: {from: [file, kubelet-labels], default: infer}
"""


@pytest.mark.realtool
@pytest.mark.parametrize("text", [ORDINARY, LONGEST, NAMED, DELIMITERS],
                         ids=["kubelet-and-three-consumers", "longest-names", "named-layouts", "jinja-delimiters"])
def test_ansible_lint_production_takes_long_lists_and_long_names(text: str, tmp_path: Path) -> None:
    ansible = generate(text, tmp_path / "out") / "ansible"
    result = run([require("ansible-lint"), "--nocolor", "--offline", "--profile", "production", "."],
                 cwd=ansible, env=_ansible_env(tmp_path), timeout=300)
    assert result.rc == 0 and "0 failure(s), 0 warning(s)" in result.text, result.text


@pytest.mark.parametrize("text", [ORDINARY, LONGEST, NAMED, DELIMITERS],
                         ids=["kubelet-and-three-consumers", "longest-names", "named-layouts", "jinja-delimiters"])
def test_every_role_line_fits_or_is_one_word_and_the_data_is_the_renders(text: str, tmp_path: Path) -> None:
    """What yamllint's line-length (max 160, allow-non-breakable-words) takes, checked without ansible-lint;
    and the wrapped YAML still holds the render's file list, tools and units."""
    ansible = generate(text, tmp_path / "out") / "ansible"
    for path in [*ansible.rglob("*.yml"), ansible / ".ansible-lint"]:
        for row in path.read_text().splitlines():
            rest = row.lstrip(" ")
            rest = rest.lstrip("#")[1:] if rest.startswith("#") else rest[2:] if rest.startswith("-") else rest
            assert len(row) <= LINT_MAX or " " not in rest, (path.name, row)
    data = role_data((ansible / "roles/mig_restore/defaults/main.yml").read_text())
    rootfs = ansible.parent / "rootfs"
    on_disk = sorted(p.relative_to(rootfs).as_posix() for p in rootfs.rglob("*") if p.is_file())
    assert sorted(f["path"] for f in data["mig_restore_files"]) == on_disk
    assert all(f["mode"] == "0644" for f in data["mig_restore_files"])
    for entry in data["mig_restore_files"]:  # the role's copy: the same bytes, a Jinja delimiter and all
        shipped = ansible / "roles/mig_restore/files/all/rootfs" / entry["path"]
        assert shipped.read_bytes() == (rootfs / entry["path"]).read_bytes(), entry["path"]
    assert data["mig_restore_image_units"][0][0].startswith("kubelet")
    assert all(len(pair) == 2 for pair in data["mig_restore_image_units"])


def _activate_tasks(out: Path) -> tuple[list[str], list[dict[str, Any]]]:
    tasks = yaml.safe_load((out / "ansible/roles/mig_restore/tasks/activate.yml").read_text())
    block = next(t["block"] for t in tasks if t["name"] == "Activate the MIG layout on this node")
    return [t["name"] for t in tasks], block


def test_the_layout_move_is_checked_first_written_after_the_drain_and_verified(tmp_path: Path) -> None:
    out = generate(NAMED, tmp_path / "out")
    data = role_data((out / f"{ROLE}/defaults/main.yml").read_text())
    assert data["mig_restore_layout"] == ""  # unset: the node keeps the name its sources give
    assert data["mig_restore_layout_names"] == ["infer", "train"]
    assert data["mig_restore_layout_file"] == "/etc/migbake/layout"
    top, block = _activate_tasks(out)
    # both checks before the block that cordons: a bad name changes nothing on the node
    assert top.index("Check that the node has the layout it is to be moved to") < top.index(
        "Activate the MIG layout on this node")
    assert top.index("Check that the restore reads the layout file") < top.index("Activate the MIG layout on this node")
    names = [t["name"] for t in block]
    write = names.index("Set the layout name the restore applies at the next boot")
    assert names.index("Drain the Kubernetes node") < names.index("Drain the Slurm node") < write
    # then a Slurm node's new gres.conf and Gres= (each when it applies), then the reboot
    slurm = ["Install the new layout's gres.conf, which slurmd reads when it starts after the reboot",
             "Give the node's line in slurm.conf the new layout's Gres=",
             "Make slurmctld read the node's new Gres= from slurm.conf"]
    assert names[write + 1:write + 4] == slurm
    assert write + 4 == names.index("Reboot, so that the restore applies the layout before the GPU consumers start")
    copy = block[write]["block"][1]["ansible.builtin.copy"]
    assert copy["dest"] == "{{ mig_restore_layout_file }}" and copy["content"] == "{{ mig_restore_layout }}\n"
    check = names.index("Check that the node got the layout it was moved to")
    label = "Label the Kubernetes node with its new layout (a registered node is not relabelled at its next start)"
    assert names.index("Say what the node advertises to Kubernetes") < check < names.index(label) < names.index(
        "Uncordon the Kubernetes node")


def test_without_the_file_source_the_role_has_no_layout_file(tmp_path: Path) -> None:
    out = generate(NAMED.replace("from: [file, kubelet-labels]", "from: [kubelet-labels]"), tmp_path / "out")
    data = role_data((out / f"{ROLE}/defaults/main.yml").read_text())
    assert data["mig_restore_layout_file"] == "" and data["mig_restore_layout_names"] == ["infer", "train"]


@pytest.mark.realtool
@pytest.mark.parametrize(("text", "layout", "said"), [
    (NAMED, "bogus", "mig_restore_layout bogus is not a layout of profile moving (it has: infer, train); "
                     "nothing was changed on the node"),
    (NAMED.replace("[file, kubelet-labels]", "[kubelet-labels]"), "train",
     "restore.layout.from of profile moving does not name file (/etc/migbake/layout), so mig_restore_layout "
     "cannot set the node's layout; nothing was changed on the node"),
    (NAMED, "", None),  # unset: the checks are skipped, the activation goes on (here: to kubectl cordon)
], ids=["unknown-name", "file-not-read", "unset"])
def test_real_ansible_refuses_a_bad_layout_move_before_touching_the_node(tmp_path: Path, text: str, layout: str,
                                                                          said: str | None) -> None:
    """ansible-playbook on localhost: the checks run for real; a fake kubectl records whether the node was touched."""
    out = generate(text, tmp_path / "out")
    log = tmp_path / "kubectl.log"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >>{log}\nexit 1\n")  # records, then fails the play
    kubectl.chmod(0o755)
    result = run([require("ansible-playbook"), "-i", "localhost,", "-c", "local", "activate.yml",
                  "-e", "mig_restore_hosts=localhost", "-e", "ansible_become=false",
                  "-e", f"mig_restore_kubectl={kubectl}", "-e", f"ansible_python_interpreter={sys.executable}",
                  "-e", f"mig_restore_layout={layout}"],
                 cwd=out / "ansible", env=_ansible_env(tmp_path), timeout=300)
    assert result.rc == 2, result.text
    if said is None:
        assert log.read_text().split() == ["cordon", "localhost"], result.text  # went on to the node
    else:
        assert said in " ".join(result.text.split()), result.text
        assert not log.exists(), "the node was touched"


@pytest.mark.realtool
@pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true",
                    reason="the role copies the script as root:root (it runs as root on a node)")
@pytest.mark.parametrize(("extra", "args"), [([], []), (["-e", "mig_restore_purge=true"], ["--purge"])],
                         ids=["disable", "purge"])
def test_real_ansible_runs_the_uninstall_script_with_purge_when_asked(tmp_path: Path, extra: list[str],
                                                                       args: list[str]) -> None:
    """uninstall.yml on localhost: the group's uninstall script (a stand-in that records its arguments, since the
    real one would act on this machine) runs once, with --purge only when asked; what it says decides changed."""
    out = generate(NAMED, tmp_path / "out")
    shipped = out / f"{ROLE}/files/all/uninstall-mig-restore.sh"
    assert shipped.read_bytes() == (out / "scripts/uninstall-mig-restore.sh").read_bytes()
    log = tmp_path / "uninstall.log"
    shipped.write_text(f"#!/bin/bash\nprintf '%s\\n' \"$*\" >>{log}\n"
                       f"if [ -s {log}.done ]; then echo 'uninstall-mig-restore: already disabled'\n"
                       f"else echo 'uninstall-mig-restore: disabled x' && echo done >{log}.done; fi\n")
    command = [require("ansible-playbook"), "-i", "localhost,", "-c", "local", "uninstall.yml",
               "-e", "mig_restore_hosts=localhost", "-e", "ansible_become=false",
               "-e", f"ansible_python_interpreter={sys.executable}", *extra]
    first = run(command, cwd=out / "ansible", env=_ansible_env(tmp_path), timeout=300)
    assert first.rc == 0 and re.search(r"localhost\s*:.*changed=1 ", first.out), first.text
    second = run(command, cwd=out / "ansible", env=_ansible_env(tmp_path), timeout=300)
    assert second.rc == 0 and re.search(r"localhost\s*:.*changed=0 ", second.out), second.text
    assert log.read_text().splitlines() == [" ".join(args)] * 2
