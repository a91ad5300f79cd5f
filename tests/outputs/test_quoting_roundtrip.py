"""Safe output: the nastiest values the schema allows arrive intact, and alone, in every generated language.

Profiles full of quotes, ``$``, backticks, ``${``/``%{``, ``%`` specifiers, ``#``, Unicode, unit names
with ``@``/``:``/``-`` and paths with ``+``/``-``/``.`` are rendered, and every output is read back by
the program that will read it on a node: bash runs the scripts' assignment lines, systemd loads the
units and prints each command line's argv, PyYAML (cloud-init's loader) reads config.yaml and
user-data, whose shell commands then run against a recording ``systemctl``, and Packer evaluates the
HCL. The quoting functions themselves, with strings the schema would refuse: test_quoting_functions.py.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import (
    SystemdTree,
    bash_n,
    cloud_init_schema,
    hcl_parse,
    packer,
    packer_console,
    packer_validate,
    run,
    shellcheck,
)
from support import command_lines, generate, unit_lines

from migbake import __version__
from migbake.profile.nodefacts import GPU_CLIENTS
from migbake.render.guard import html_comment
from migbake.render.quoting import hcl_string
from migbake.rules.validate import check_bytes

DESCRIPTION = (
    'It\'s "quoted" & <tagged>: $HOME ${var.x} $${x} %{if x}y%{endif} %n %% %i `id` $(reboot) '
    "; | * ? ~ ! # not a comment -- é ✓ 𝄞 ünï"
)
DESCRIPTION_2 = "--- #!/bin/sh *a &b !c @d `e` {f} [g] |h >i 'j' \"k\" ?l :m ,n %o $ ${ %{ ''"

NASTY: dict[str, dict[str, Any]] = {
    "punctuation": {
        "version": 1,
        "name": "0-nasty-9",
        "description": DESCRIPTION,
        "gpu_count": 8,
        "gpus": [
            {"model": "h200-141gb", "devices": [0, 1, 2, 3, 4, 5, 6, 7], "mig": {"layout": {"1g.18gb": 7}}}
        ],
        "kubelet": {"present": True, "unit": "kubelet@gpu:node-1.service"},
        "restore": {
            "unit": "mig_restore@boot:x-1.service",
            "config_path": "/etc/migbake/mig+cfg/-dash.dir/config.v1+x.yaml",
            "config_name": "cfg.v1.2-beta_x",
            "timeout_seconds": 3600,
            "on_failure": "continue",
        },
        "tools": {
            "nvidia_smi": "/opt/nv+tools/-bin/nvidia-smi.v2",
            "nvidia_mig_parted": "/opt/nv+tools/-bin/mig_parted-1.0+x",
        },
        "conflicting_manager": {"unit": "nvidia:mig-manager@x.service", "action": "mask"},
    },
    "yaml-lookalikes": {
        "version": 1,
        "name": "0644",
        "description": DESCRIPTION_2,
        "gpus": [{"model": "a100-80gb", "mig": {"layout": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb+me": 1}}}],
        "kubelet": {"unit": "1.service"},
        "restore": {
            "unit": "yes.service",
            "config_path": "/etc/nvidia-mig/_/+/-/null",
            "config_name": "0644",
            "on_failure": "block-kubelet",
        },
        "tools": {"nvidia_smi": "/-", "nvidia_mig_parted": "/+x"},
        "conflicting_manager": {"unit": "on.service", "action": "disable"},
    },
}
# config names a YAML 1.1 reader would take for another type if they were not quoted
LOOKALIKE_NAMES = (
    "yes",
    "No",
    "on",
    "null",
    "true",
    "0644",
    "0x1F",
    "1e3",
    "1_000",
    "2001-12-14",
    "1.5",
    "NaN",
    "0b101",
    "0o17",
    "1e-3",
)


def _text(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def _settings(data: dict[str, Any]) -> dict[str, Any]:
    """Every value a generated file carries, defaults filled in."""
    kub, res = data.get("kubelet", {}), data.get("restore", {})
    tools, mgr = data.get("tools", {}), data.get("conflicting_manager", {})
    s = {
        "name": data["name"],
        "description": data.get("description", ""),
        "kubelet_present": kub.get("present", True),
        "kubelet": kub.get("unit", "kubelet.service"),
        "restore": res.get("unit", "nvidia-mig-restore.service"),
        "config": res.get("config_path", "/etc/nvidia-mig/config.yaml"),
        "config_name": res.get("config_name", "current"),
        "on_failure": res.get("on_failure", "block-kubelet"),
        "smi": tools.get("nvidia_smi", "/usr/bin/nvidia-smi"),
        "mig": tools.get("nvidia_mig_parted", "/usr/bin/nvidia-mig-parted"),
        "manager": mgr.get("unit", "nvidia-mig-manager.service"),
        "action": mgr.get("action", "mask"),
        "script": "/etc/nvidia-mig/restore.sh",
        "marker": "/var/lib/migbake/reboot-attempted",
    }
    s["dropin"] = f"/etc/systemd/system/{s['kubelet']}.d/20-mig-restore.conf"
    s["unit_file"] = f"/etc/systemd/system/{s['restore']}"
    return s


@pytest.fixture(scope="module", params=sorted(NASTY), ids=sorted(NASTY))
def nasty(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A generated tree for each nasty profile, and the values it must carry."""
    data = NASTY[request.param]
    text = _text(data)
    out = generate(text, tmp_path_factory.mktemp(request.param) / "out")
    yield out, {**_settings(data), "sha256": check_bytes(text.encode(), "p").profile.source_sha256}  # type: ignore[union-attr]


def test_nasty_profiles_are_valid() -> None:
    for name, data in NASTY.items():
        checked = check_bytes(_text(data).encode(), name)
        assert checked.ok and checked.problems == [], [p.format() for p in checked.problems]
    for config_name in LOOKALIKE_NAMES:
        data = {**NASTY["punctuation"], "restore": {"config_name": config_name}}
        assert check_bytes(_text(data).encode(), config_name).ok, config_name


def test_every_file_names_the_description_in_a_comment(nasty: tuple[Path, dict[str, Any]]) -> None:
    """In every file; in Markdown inside an HTML comment, where each "--" is written "- -" (no
    description may end the comment)."""
    out, s = nasty
    # Ignition JSON (butane/*.ign) has no comments, and ignition-validate warns on any key it does not know
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != ".migbake-output"
                       and p.suffix != ".ign"):
        lines = path.read_text(encoding="utf-8").split("\n")
        want = f"# Node: {s['description']}"
        assert (html_comment(want) if path.suffix == ".md" else want) in lines, path


# --- shell -----------------------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^([a-z_]+)=('(?:[^']|'\\'')*')$")
SCRIPT_VARS = {
    "scripts/capture-mig-config.sh": {"mig_parted": "mig", "config": "config", "config_name": "config_name"},
    "scripts/uninstall-mig-restore.sh": {
        "restore_unit": "restore",
        "unit_file": "unit_file",
        "script": "script",
        "config": "config",
        "marker": "marker",
    },
    "scripts/verify-mig-restore.sh": {
        "restore_unit": "restore",
        "manager": "manager",
        "manager_action": "action",
        "config": "config",
        "config_name": "config_name",
        "smi": "smi",
        "mig_parted": "mig",
        "marker": "marker",
    },
    "rootfs/etc/nvidia-mig/restore.sh": {
        "unit": "restore",
        "smi": "smi",
        "mig_parted": "mig",
        "config": "config",
        "config_name": "config_name",
        "marker": "marker",
    },
    "packer/scripts/disable-mig-manager.sh": {"manager": "manager", "action": "action"},
    "packer/scripts/install-mig-restore.sh": {"restore_unit": "restore"},
}


def _bash_values(lines: list[str], names: list[str], tmp_path: Path) -> dict[str, str]:
    """Run ``lines`` in a bash with an empty PATH and print ``names``: what bash made of each value."""
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    dump = "".join(f"printf '%s\\0%s\\0' {n} \"${{{n}}}\"\n" for n in names)
    script = "set -eu\n" + "\n".join(lines) + "\n" + dump
    ran = run(["/bin/bash", "--norc", "--noprofile", "-c", script], env={"PATH": str(empty)})
    assert ran.rc == 0 and ran.err == "", ran.text
    parts = ran.out.split("\0")[:-1]
    return dict(zip(parts[::2], parts[1::2]))


@pytest.mark.realtool
def test_scripts_parse_and_carry_each_value_intact(
    nasty: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, s = nasty
    scripts = sorted(out.glob("**/*.sh"))
    ran = shellcheck(scripts)
    assert ran.rc == 0, ran.text
    for script in scripts:
        assert bash_n(script).rc == 0, script
    for rel, wanted in SCRIPT_VARS.items():
        text = (out / rel).read_text(encoding="utf-8")
        assignments = [line for line in text.split("\n") if _ASSIGNMENT.match(line)]
        names = [m[1] for line in assignments if (m := _ASSIGNMENT.match(line))]
        assert set(wanted) <= set(names), (rel, names)
        got = _bash_values(assignments, names, tmp_path)
        for var, key in wanted.items():
            assert got[var] == s[key], (rel, var, got[var], s[key])


@pytest.mark.realtool
def test_install_script_installs_exactly_the_rootfs_files(
    nasty: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, s = nasty
    lines = [
        line
        for line in (out / "packer/scripts/install-mig-restore.sh").read_text().split("\n")
        if line.startswith("install_file '")
    ]
    stub = 'install_file() { printf \'%s\\0\' "$#" "$@"; }\n'
    ran = run(["/bin/bash", "--norc", "-c", stub + "\n".join(lines)], env={"PATH": str(tmp_path)})
    assert ran.rc == 0 and ran.err == "", ran.text
    parts = ran.out.split("\0")[:-1]
    calls = [(parts[i + 1], parts[i + 2]) for i in range(0, len(parts), 3)]
    assert all(parts[i] == "2" for i in range(0, len(parts), 3)), parts
    rootfs = out / "rootfs"
    want = sorted(
        (p.relative_to(rootfs).as_posix(), f"{stat.S_IMODE(p.stat().st_mode):04o}")
        for p in rootfs.rglob("*")
        if p.is_file()
    )
    assert sorted(calls) == want
    assert (s["config"].lstrip("/"), "0644") in calls


# --- systemd ---------------------------------------------------------------------------------------


@pytest.mark.realtool
def test_systemd_loads_the_units_and_runs_exact_argv(nasty: tuple[Path, dict[str, Any]]) -> None:
    out, s = nasty
    tree = SystemdTree(kubelet_unit=s["kubelet"], manager_unit=s["manager"], stubs=(s["smi"], s["mig"], "bash"))
    try:
        tree.install_rootfs(out / "rootfs")
        assert tree.systemctl("enable", s["restore"]).rc == 0
        # systemd-analyze verify reads NAME:ALIAS from its arguments, so a unit whose name has a colon is
        # verified through multi-user.target, which pulls in both (and reports what it finds in them)
        names = [u for u in (s["restore"], s["kubelet"]) if ":" not in u]
        verify = tree.verify("multi-user.target", *names)
        assert verify.rc == 0 and verify.text == "", verify.text
        graph = tree.boot_graph()
        assert graph.rc == 0, graph.err
        # the values themselves reach restore.sh (test_scripts_parse_and_carry_each_value_intact)
        assert command_lines(graph.out, s["restore"]) == [["/bin/bash", s["script"]]]
        kubelet = unit_lines(graph.out, s["kubelet"])
        dep = "Requires" if s["on_failure"] == "block-kubelet" else "Wants"
        assert f"{dep}: {s['restore']} (origin-file)" in kubelet, kubelet
        assert any(line.startswith(f"After: {s['restore']} (origin-file") for line in kubelet), kubelet
    finally:
        tree.cleanup()


# --- YAML: config.yaml and cloud-init user-data ---------------------------------------------------


def test_config_yaml_reads_back(nasty: tuple[Path, dict[str, Any]]) -> None:
    out, s = nasty
    cfg = yaml.safe_load((out / "rootfs" / s["config"].lstrip("/")).read_text(encoding="utf-8"))
    assert list(cfg) == ["version", "mig-configs"] and cfg["version"] == "v1"
    assert list(cfg["mig-configs"]) == [s["config_name"]]
    assert all(isinstance(k, str) for k in cfg["mig-configs"])


@pytest.mark.parametrize("config_name", LOOKALIKE_NAMES)
def test_config_names_that_look_like_other_types_stay_strings(config_name: str, tmp_path: Path) -> None:
    data = {**NASTY["punctuation"], "restore": {"config_name": config_name}}
    out = generate(_text(data), tmp_path / "out")
    cfg = yaml.safe_load((out / "rootfs/etc/nvidia-mig/config.yaml").read_text(encoding="utf-8"))
    assert list(cfg["mig-configs"]) == [config_name]
    for rel in ("scripts/capture-mig-config.sh", "rootfs/etc/nvidia-mig/restore.sh"):
        got = _bash_values(
            [line for line in (out / rel).read_text().split("\n") if line.startswith("config_name=")],
            ["config_name"],
            tmp_path,
        )
        assert got == {"config_name": config_name}, rel


def _fake_bin(tmp_path: Path) -> tuple[Path, Path]:
    """A PATH folder with a systemctl that records each call (NUL-separated argv, one call a line)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    (bin_dir / "systemctl").write_text(
        '#!/bin/bash\nfor a in "$@"; do printf \'%s\\0\' "$a"; done >>"$LOG"\necho >>"$LOG"\nexit 0\n'
    )
    (bin_dir / "cloud-init-per").write_text('#!/bin/bash\nshift 2\nexec "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir, log


def _calls(log: Path) -> list[list[str]]:
    return [line.split("\0")[:-1] for line in log.read_text(encoding="utf-8").split("\n") if line]


@pytest.mark.realtool
def test_user_data_reads_back_and_its_commands_get_exact_argv(
    nasty: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, s = nasty
    user_data = out / "cloud-init/user-data"
    ran = cloud_init_schema(user_data)
    assert ran.rc == 0, ran.text
    data = yaml.safe_load(user_data.read_text(encoding="utf-8"))
    assert list(data) == ["bootcmd", "write_files", "runcmd"]
    rootfs = out / "rootfs"
    written = {f["path"]: f["content"] for f in data["write_files"]}
    assert written == {
        "/" + p.relative_to(rootfs).as_posix(): p.read_text(encoding="utf-8")
        for p in rootfs.rglob("*")
        if p.is_file()
    }
    assert f"/{s['config'].lstrip('/')}" in written

    bin_dir, log = _fake_bin(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log)}
    # the base-image check first: this host has none of the nasty paths, so it names each, exactly as the
    # profile wrote it (and the unit through `systemctl show`, whose fake answers an empty FragmentPath);
    # the rest of the script then runs as on a node that has them
    script = data["runcmd"][-1][2]
    check, sep, rest = script.partition('if [ -n "$m" ]; then ok=no; elif ')
    assert sep and check.startswith("m=''; "), script
    checked = run(["sh", "-c", check + 'printf "%s" "$m"'], env={**env, "LOG": str(tmp_path / "check.log")})
    assert checked.rc == 0, checked.text
    named = [f"nvidia-mig-parted (no executable {s['mig']})", f"nvidia-smi (no executable {s['smi']})",
             *([f"{s['kubelet']} (no unit file)"] if s["kubelet_present"] else [])]
    assert checked.out == "".join(f", {n}" for n in named), checked.out
    data["runcmd"][-1][2] = "m=''; " + sep + rest
    for argv in data["bootcmd"] + data["runcmd"]:
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), argv
        ran = run(argv, env=env)
        assert ran.rc == 0 and ran.err == "", (argv, ran.text)
    kubelet = [s["kubelet"]] if s["kubelet_present"] else []
    held = [*kubelet, *GPU_CLIENTS, s["manager"]]
    closed = s["on_failure"] == "block-kubelet"
    always = [*([] if closed else kubelet), *GPU_CLIENTS]  # started after the attempt, whatever its result
    gated = kubelet if closed else []  # started only after a successful restore
    verb = "mask" if s["action"] == "mask" else "disable"
    want = [["stop", "--no-block", u] for u in held] + [
        ["daemon-reload"],
        [verb, "--now", s["manager"]],
        ["enable", s["restore"]],
        ["start", s["restore"]],
    ]
    for u in always + gated:
        want += [["is-enabled", "--quiet", u], ["start", "--no-block", u]]
    assert _calls(log) == want


# --- HCL (Packer) ----------------------------------------------------------------------------------


def _hcl_value(raw: object) -> str:
    """A python-hcl2 string attribute as HCL means it (python-hcl2 keeps quotes and escapes)."""
    text = str(raw)
    assert text.startswith('"') and text.endswith('"'), text
    return json.loads(text.replace("$${", "${").replace("%%{", "%{"))  # type: ignore[no-any-return]


@pytest.mark.realtool
def test_packer_templates_carry_name_and_hash(nasty: tuple[Path, dict[str, Any]]) -> None:
    out, s = nasty
    pk = out / "packer"
    build = hcl_parse(pk / "build.pkr.hcl")
    sources = hcl_parse(pk / "sources.pkr.hcl")
    post = build["build"][0]["post-processor"][0]['"manifest"']  # type: ignore[index]
    custom = post["custom_data"]
    assert _hcl_value(custom["profile"]) == s["name"]
    assert '"amazon-ebs"' in repr(sources)
    text = (pk / "sources.pkr.hcl").read_text()  # the tags are merged with var.aws_tags: an expression
    assert f'"migbake:profile"        = {hcl_string(s["name"])}\n' in text
    # the sha256 is no file's text but the marker's: Packer reads it from there (local.profile_sha256)
    assert s["sha256"] not in text and s["sha256"] not in (pk / "build.pkr.hcl").read_text()
    assert str(custom["profile_sha256"]).strip('"${}') == "local.profile_sha256"
    assert '"migbake:profile-sha256" = local.profile_sha256\n' in text
    assert packer(["fmt", "-check", str(pk)]).rc == 0
    val = packer_validate(pk)
    assert val.rc == 0, val.text
    assert json.loads(packer_console(pk, "jsonencode([var.ami_name_prefix])")) == [f"migbake-{s['name']}"]
    described = f"MIG restore of node profile {s['name']} (sha256 {s['sha256'][:16]}), baked by migbake {__version__}"
    said = packer_console(pk, "jsonencode([local.profile_sha256, local.description])")
    assert json.loads(said) == [s["sha256"], described]
