"""Defense in depth: the render guard, and hostile strings judged by the real tools.

Two halves. With the schema bypassed (typed profiles built directly), every string field of the
node profile set to a value with a control character makes ``render`` stop with a RenderError, so
nothing can be written. Through the schema, a seeded and bounded Hypothesis property puts hostile
strings into every free-text and pattern field; whatever validates is rendered and judged by
``bash -n`` (and shellcheck), ``systemd-analyze verify``, python-hcl2 and a YAML parse-back of
user-data and config.yaml. A failure prints the profile as a minimal reproducer (``note``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from profile_inputs import HOSTILE, SEEDS
from realtools import SystemdTree, hcl_parse, run, shellcheck

from migbake.problems import RenderError, UsageError
from migbake.render.artifact import Artifact
from migbake.render.guard import CONTROL, Block, Quoted, guard, mime_header_value
from migbake.render.mime_parts import user_part
from migbake.render.plan import MimePart
from migbake.render.quoting import sh_quote, systemd_word
from migbake.render.targets.userdata import mime_user_data
from migbake.render.tree import render
from migbake.rules.validate import check_bytes

pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")
COUNTS: Counter[str] = Counter()
CONTROLS = ["\n", "\r", "\x00", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\t", "\x0b"]
DEEP = 4  # validated profiles that also get shellcheck and systemd-analyze verify (about 1 s each)


def _base() -> Any:
    checked = check_bytes(json.dumps(SEEDS[0]).encode(), "seed.yaml")
    assert checked.profile is not None
    return checked.profile


def _string_fields(obj: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every string field of the typed profile (dataclasses inside dataclasses), as attribute paths."""
    out = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, str):
            out.append((*path, f.name))
        elif dataclasses.is_dataclass(value):
            out += _string_fields(value, (*path, f.name))
    return out


def _replace(obj: Any, path: tuple[str, ...], value: str) -> Any:
    if len(path) == 1:
        return dataclasses.replace(obj, **{path[0]: value})
    return dataclasses.replace(obj, **{path[0]: _replace(getattr(obj, path[0]), path[1:], value)})


BASE = _base()
PRINTED = [p for p in _string_fields(BASE) if p not in (("source_sha256",),)]


@pytest.mark.parametrize("field", PRINTED, ids=[".".join(p) for p in PRINTED])
def test_a_control_character_in_any_field_stops_rendering(field: tuple[str, ...]) -> None:
    """The schema refuses these; were one to slip through, render refuses it too (nothing to write)."""
    current = getattr(BASE, field[0]) if len(field) == 1 else BASE
    for c in CONTROLS:
        COUNTS["class1-guard"] += 1
        valid = "x" if not isinstance(current, str) or not current else current
        profile = _replace(BASE, field, valid[:1] + c + valid[1:])
        try:
            artifacts = render(profile)
        except RenderError:
            continue
        # a value that no file prints is harmless; a printed one must never arrive raw
        leaked = [a.path for a in artifacts if isinstance(a.content, str) and c not in "\n\t"
                  and c in a.content]
        assert not leaked, f"{'.'.join(field)} with {c!r} reached {leaked}"
        assert c in "\n\t" or not any(c in str(a.content) for a in artifacts)


@pytest.mark.parametrize("lang", ["shell", "systemd", "hcl", "yaml"])
def test_the_guard_of_each_language(lang: str) -> None:
    for c in CONTROLS:
        with pytest.raises(RenderError):
            guard("a" + c, lang, "t")
        with pytest.raises(RenderError):
            guard(Quoted("'a" + c + "'"), lang, "t")
    assert guard(Block("# a\n# b"), lang, "t") == "# a\n# b"
    with pytest.raises(RenderError):
        guard(Block("# a\r\n# b"), lang, "t")
    bare = {"shell": "'", "systemd": "%n", "hcl": "${x}", "yaml": '"'}[lang]
    with pytest.raises(RenderError, match="not quoted"):
        guard("a" + bare, lang, "t")
    assert guard(42, lang, "t") == 42


@pytest.mark.parametrize("lang", ["shell", "systemd", "hcl", "yaml"])
def test_the_finalizer_guards_each_value_by_its_templates_language(lang: str) -> None:
    """The Jinja finalizer hands every printed value to the guard of its template's language: a quoted text
    passes, the same text as a bare value is refused, and a value that failed is refused again."""
    from migbake.render.environment import environment

    bare = {"shell": "'", "systemd": "%n", "hcl": "${x}", "yaml": '"'}[lang]
    text = "a" + bare
    compiled = environment().from_string("{{ v }}")
    compiled.name = {"shell": "x.sh.j2", "systemd": "x.service.j2", "hcl": "x.pkr.hcl.j2", "yaml": "x.yaml.j2"}[lang]
    assert compiled.render(v=Quoted(text)) == compiled.render(v=Quoted(text)) == text
    with pytest.raises(RenderError, match="not quoted"):
        compiled.render(v=text)
    for _ in range(2):
        with pytest.raises(RenderError):
            compiled.render(v=Quoted(text + "\x01"))


def test_quoting_marks_its_output_and_a_raw_newline_in_a_shell_word_is_refused() -> None:
    assert isinstance(sh_quote("a b"), Quoted) and isinstance(systemd_word("a b"), Quoted)
    with pytest.raises(RenderError):
        guard(sh_quote("a\nb"), "shell", "t")


@pytest.mark.parametrize("name", ['a"b.sh', "a\nb.sh", "a\rb.sh", "a\\b.sh", "a\u2028.sh"])
def test_mime_header_values_are_guarded(name: str) -> None:
    COUNTS["class1-mime"] += 1
    with pytest.raises(UsageError, match=r"MIME|control"):
        user_part("#!/bin/sh\ntrue\n", name)
    with pytest.raises(RenderError):
        mime_header_value(name, "name")
    with pytest.raises(RenderError):  # a part made without user_part meets the target's own guard
        mime_user_data("#cloud-config\n", MimePart("#!/bin/sh\ntrue\n", name, "text/x-shellscript"))


# --- the property: hostile strings through the schema, the real judges on what validates ---------

FIELDS: list[tuple[str, ...]] = [
    ("name",), ("description",), ("kubelet", "unit"), ("restore", "unit"), ("restore", "config_path"),
    ("restore", "config_name"), ("restore", "metrics_textfile"), ("tools", "nvidia_smi"),
    ("tools", "nvidia_mig_parted"), ("conflicting_manager", "unit"), ("kubernetes", "kubelet_args_env"),
    ("kubernetes", "node_labels", "*key"), ("kubernetes", "node_labels", "*value"), ("consumers", "*unit"),
    ("gpus", "*pci_device_ids"),
]
VALID = {"name": "node-1", "description": "GPU node", "kubelet.unit": "kubelet.service",
         "restore.unit": "mig-x.service", "restore.config_path": "/etc/nvidia-mig/c.yaml",
         "restore.config_name": "cfg-1", "restore.metrics_textfile": "/var/lib/node_exporter/mig.prom",
         "tools.nvidia_smi": "/usr/bin/nvidia-smi", "tools.nvidia_mig_parted": "/usr/bin/nvidia-mig-parted",
         "conflicting_manager.unit": "nvidia-mig-manager.service", "kubernetes.kubelet_args_env": "KUBELET_X",
         "kubernetes.node_labels.*key": "example.com/gpu", "kubernetes.node_labels.*value": "mig",
         "consumers.*unit": "slurmd.service", "gpus.*pci_device_ids": "0x233510DE"}
ENDS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x00", "\x1b[2J", "\t", " "]


@st.composite
def hostile_profiles(draw: st.DrawFn) -> tuple[bytes, dict[str, Any]]:
    data = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    data.setdefault("kubernetes", {}).setdefault("kubelet_args_env", "KUBELET_EXTRA_ARGS")
    for field in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)):
        valid = VALID[".".join(field)]
        value = draw(st.one_of(
            st.sampled_from(HOSTILE),
            st.builds(lambda e, at, v=valid: v[:at] + e + v[at:], st.sampled_from(ENDS + HOSTILE),
                      st.integers(0, len(valid))),
            st.text(max_size=12).map(lambda t, v=valid: v + t),
            st.just(valid),
        ))
        _set(data, field, value)
    return json.dumps(data, ensure_ascii=draw(st.booleans())).encode(), data


def _set(data: dict[str, Any], field: tuple[str, ...], value: str) -> None:
    if field[-1] == "*key":
        data["kubernetes"]["node_labels"] = {value: "mig"}
    elif field[-1] == "*value":
        data["kubernetes"]["node_labels"] = {"example.com/gpu": value}
    elif field[0] == "consumers":
        data["consumers"] = [{"unit": value}]
    elif field[0] == "gpus":
        data["gpus"][0]["pci_device_ids"] = [value]
    else:
        target = data
        for key in field[:-1]:
            target = target.setdefault(key, {})
        target[field[-1]] = value


RAW = re.compile(CONTROL.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f"))


def _judge(artifacts: list[Artifact], profile: Any, deep: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="migbake-guard-") as tmp:
        root = Path(tmp)
        for a in artifacts:
            (root / a.path).parent.mkdir(parents=True, exist_ok=True)
            (root / a.path).write_bytes(a.data)
            if isinstance(a.content, str):
                assert not RAW.search(a.content), f"{a.path}: a raw control character"
        scripts = sorted(root.rglob("*.sh"))
        ran = run(["bash", "-c", 'for f; do bash -n "$f" || exit 1; done', "_", *map(str, scripts)])
        assert ran.rc == 0, ran.text
        user_data = yaml.safe_load((root / "cloud-init/user-data").read_text(encoding="utf-8"))
        assert set(user_data) == {"bootcmd", "write_files", "runcmd"}
        for w in user_data["write_files"]:  # every file of the image, intact inside user-data
            assert (root / "rootfs" / w["path"].lstrip("/")).read_text(encoding="utf-8").rstrip("\n") == \
                w["content"].rstrip("\n")
        for hcl in sorted((root / "packer").rglob("*.pkr.hcl")):
            hcl_parse(hcl)
        for cfg in (root / "rootfs").rglob("*.yaml"):
            assert "mig-configs" in yaml.safe_load(cfg.read_text(encoding="utf-8"))
        if deep:
            sc = shellcheck(scripts)
            assert sc.rc == 0, sc.text
            _verify_units(root / "rootfs", profile)


def _verify_units(rootfs: Path, profile: Any) -> None:
    """systemd-analyze verify of the restore unit and kubelet with its drop-in (as test_quoting_roundtrip)."""
    tree = SystemdTree(kubelet_unit=profile.kubelet.unit, manager_unit=profile.conflicting_manager.unit,
                       stubs=(profile.tools.nvidia_smi, profile.tools.nvidia_mig_parted, "bash"),
                       extra_units=tuple(c.unit for c in profile.consumers))
    try:
        tree.install_rootfs(rootfs)
        assert tree.systemctl("enable", profile.restore.unit).rc == 0
        names = [u for u in (profile.restore.unit, profile.kubelet.unit) if ":" not in u]
        verify = tree.verify("multi-user.target", *names)
        assert verify.rc == 0 and verify.text == "", verify.text
    finally:
        tree.cleanup()


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=hostile_profiles())
def test_hostile_strings_that_validate_render_to_output_the_real_tools_accept(case: tuple[bytes, Any]) -> None:
    raw, data = case
    COUNTS["class1-property"] += 1
    checked = check_bytes(raw, "hostile.yaml")
    if checked.profile is None:
        return
    COUNTS["class1-property-valid"] += 1
    note("reproducer (a profile that validates):\n" + yaml.safe_dump(data, allow_unicode=True))
    try:
        artifacts = render(checked.profile)
    except RenderError:  # the guard stopped it: the schema let through what no language can print
        pytest.fail("validated, yet the render guard refused it: the schema should have")
    deep = COUNTS["deep"] < DEEP and COUNTS["class1-property-valid"] % 8 == 1
    COUNTS["deep"] += deep
    _judge(artifacts, checked.profile, deep)


def test_report_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """How many hostile inputs this module tried."""
    with capsys.disabled():
        print("\nclass 1 (render guard):", dict(COUNTS))


# --- a pre-built header cannot close the comment it lands in --------------------------------

CLOSERS = "x --> --!> <!-- */ %end ]]> ``` ![i](http://e.example/i.png) [l](http://e.example) end-"


def test_a_block_cannot_end_an_html_comment_or_continue_a_systemd_line() -> None:
    for text in ("# a -->", "# a --!>", "# <!-- a", "# a --"):
        with pytest.raises(RenderError):
            guard(Block(text), "markdown", "README.md.j2")
    with pytest.raises(RenderError):
        guard(Block("# a \\\n# b"), "systemd", "u.service.j2")
    assert guard(Block("# a - -> b"), "markdown", "README.md.j2") == "# a - -> b"


def test_a_description_that_closes_a_comment_stays_inside_every_header() -> None:
    """The role's README starts with the header in an HTML comment: CommonMark ends that block at the first
    line holding "-->", a browser at "-->" or "--!>"; every other file has ``#`` comment lines."""
    base = json.loads(json.dumps(SEEDS[0]))
    base["description"] = CLOSERS
    checked = check_bytes(json.dumps(base).encode(), "closers.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    files = {a.path: a.data.decode("utf-8") for a in render(checked.profile)}
    readme = files["ansible/roles/mig_restore/README.md"].splitlines()
    end = next(i for i, text in enumerate(readme) if "-->" in text)
    assert readme[0] == "<!--" and readme[end] == "-->", readme[:6]
    inside = "\n".join(readme[1:end])
    assert "Node: x" in inside and not re.search("--|<!-", inside), inside
    assert "e.example" not in "\n".join(readme[end:])  # no image or link outside the comment
    for path, text in files.items():
        if path.endswith(".md"):
            continue
        if path.endswith(".ign"):  # Ignition JSON: the units and files it carries, each as its own text
            text = "\n".join(_strings(json.loads(text)))
        for row in text.splitlines():
            if "e.example" in row:
                assert row.lstrip().startswith("#"), (path, row)  # the description only in comment lines


def _strings(value: object) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_numbers_booleans_and_an_inline_if_print_as_jinja_prints_them() -> None:
    """Through the finalizer, numbers, booleans, an inline if without else and None print as Jinja prints them;
    a missing variable stops the render."""
    import jinja2

    from migbake.render.environment import environment

    source = "{{ block }}|{{ n }}|{{ flag }}|{{ 'x' if false }}|{{ none }}\n"
    template = environment().from_string(source)
    template.name = "x.sh.j2"
    assert template.render(block=Block("a\nb"), n=7, flag=True, none=None) == "a\nb|7|True||None\n"
    with pytest.raises(jinja2.UndefinedError):
        environment().get_template("scripts/verify-mig-restore.sh.j2").render()
