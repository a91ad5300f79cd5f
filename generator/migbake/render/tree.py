"""Render a validated node profile into the output tree, in memory: one Jinja2 environment, one plan (plan.py).

Templates hold loops and conditionals only; every value they print has been quoted here for its
language (shell, systemd, YAML, HCL) or restricted by the schema. Output is deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import jinja2

from migbake import __version__
from migbake.document.patterns import whole
from migbake.kubernetes.kubelet import NODEADM_DROPIN, OUR_VARIABLE, kubeadm_exec_start, nodeadm_dropin
from migbake.node.expectations import AFTER_RESET
from migbake.problems import RenderError
from migbake.profile.nodeprofile import UNIT_DIRS, NodeProfile
from migbake.profile.units import GPU_CLIENTS, GPU_RESET_TARGET, REBOOT_MARKER, RESTORE_AFTER, RESTORE_SCRIPT
from migbake.render.firstboot import commands as first_boot_commands
from migbake.render.fleet import emit_fleet, wrap_long, yaml_block
from migbake.render.guard import Block, Quoted, guard, html_comment, language
from migbake.render.guard import line as guard_line
from migbake.render.plan import RenderPlan, make_plan
from migbake.render.slurm import GRES_CONF, NODE_CONF, gres_conf, node_conf, slurm_applies
from migbake.resources import templates_dir

# the Packer plugins of the templates' sources (null is built into Packer); packer.SOURCES names each one's
PACKER_PLUGINS = ("amazon", "qemu", "googlecompute", "azure")
STAGING_DEFAULT = "/tmp/migbake-rootfs"
# Packer's execute_command for the provisioner scripts, as an HCL literal (no profile value in it):
# as root directly, else through sudo; the staging directory is the script's first argument
EXECUTE_COMMAND = Quoted('"chmod +x {{ .Path }}; if [ \\"$(id -u)\\" -eq 0 ]; then {{ .Vars }} {{ .Path }} '
                         "'${var.staging_dir}'; else sudo -n env {{ .Vars }} {{ .Path }} '${var.staging_dir}'; fi\"")


@dataclass(frozen=True)
class Artifact:
    """One generated file: its path inside OUT, its text and its mode."""

    path: str
    content: str | bytes
    mode: int

    @property
    def data(self) -> bytes:
        """The file's bytes (text is UTF-8)."""
        return self.content if isinstance(self.content, bytes) else self.content.encode("utf-8")


# --- quoting, one function per target language -------------------------------------------------

_SYSTEMD_SAFE = whole(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_word(word: str, *, executable: bool = False) -> str:
    """One word of an Exec= line: specifiers (%) and variables ($) escaped, quoted if needed.

    Control characters become C escapes (a raw newline would end the line). The executable may
    not start with one of systemd's prefix characters (@ - : + !): systemd reads them after
    unquoting, so no quoting can keep them literal, and such a word is refused.
    """
    if "\x00" in word:
        raise RenderError(f"{word!r}: a NUL byte cannot be part of a systemd command line")
    if executable and word.startswith(("@", "-", ":", "+", "!")):
        raise RenderError(f"{word!r}: an executable may not start with one of systemd's prefixes @ - : + !")
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_SAFE.match(escaped):
        return Quoted(escaped)
    inner = escaped.replace("\\", "\\\\").replace('"', '\\"')
    inner = re.sub(r"[\x01-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", inner)
    return Quoted(f'"{inner}"')


def systemd_command(argv: list[str]) -> str:
    """A whole Exec= command line."""
    return Quoted(" ".join(systemd_word(a, executable=(i == 0)) for i, a in enumerate(argv)))


def hcl_string(value: str) -> str:
    """An HCL2 quoted string literal with template sequences escaped."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t").replace("${", "$${").replace("%{", "%%{")
    return Quoted(f'"{out}"')


# characters a YAML 1.1 reader (PyYAML, cloud-init) rejects or reads as a line break inside a quoted
# scalar, although JSON leaves them raw
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


_JSON = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(value, ensure_ascii=False), made once


def yaml_scalar(value: object) -> str:
    """A YAML flow scalar (JSON is a subset of YAML 1.2 and of what cloud-init's loader reads)."""
    text = _JSON(value)
    return Quoted(_YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _YAML_UNSAFE.search(text) else text)


def yaml_flow_list(argv: list[str]) -> str:
    """A YAML flow sequence of strings, for cloud-init's bootcmd/runcmd argv form."""
    return Quoted("[" + ", ".join(yaml_scalar(a) for a in argv) + "]")


def sh_quote(value: object) -> str:
    """POSIX shell quoting, always in single quotes (so ``a-b`` never reads as arithmetic)."""
    text = str(value)
    if "\x00" in text:
        raise RenderError(f"{text!r}: a NUL byte cannot be part of a shell word")
    return Quoted("'" + text.replace("'", "'\\''") + "'")


def comment_text(value: object) -> str:
    """Text for the rest of a comment line, in any language: refused when it holds a control character."""
    return Quoted(guard_line("" if value is None else str(value), "the comment text"))


# --- the environment ---------------------------------------------------------------------------

class _Environment(jinja2.Environment):
    """Templates whose globals are a plain dict: every render copies them into its context.

    Jinja's default, a ChainMap over the environment's globals (so that later changes to those show),
    costs more to copy than rendering most of our templates; ours never change after start-up.
    """

    def make_globals(self, d: MutableMapping[str, Any] | None) -> MutableMapping[str, Any]:
        return {**self.globals, **(d or {})}


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    return guard(value, _language(context.name), context.name)


_language = cache(language)


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # one environment per process: it caches compiled templates, which is most of a render's cost
    env = _Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates do not change while migbake runs: no stat() per render
        finalize=_finalize,  # every printed value passes the guard of its template's language
    )
    env.filters["sh"] = sh_quote
    env.filters["hcl"] = hcl_string
    env.filters["yaml"] = yaml_scalar
    env.filters["comment"] = comment_text
    env.filters["html_comment"] = html_comment
    env.filters["yaml_block"] = yaml_block
    env.filters["wrap_long"] = wrap_long
    # Ansible's own Jinja2 delimiters, for the Ansible templates that name Ansible's variables
    env.globals["ansible_open"] = Quoted("{{")
    env.globals["ansible_close"] = Quoted("}}")
    return env


@cache
def _template(name: str) -> jinja2.Template:
    """A template of the one environment, loaded once (the environment's cache takes a lock per look-up)."""
    return _environment().get_template(name)


def _render(env: jinja2.Environment, template: jinja2.Template, variables: dict[str, Any]) -> str:
    """``template.render(variables)`` for ``variables`` that already hold the globals, without copying them.

    Template.render copies its arguments, then those and the globals into a new context, twice a
    dict of some forty entries for each of the fifteen files of a profile. (Jinja2 3.1 joins the parts
    with ``env.concat``, which 3.0 does not have; for a text environment it is ``"".join``.)
    """
    try:
        return "".join(template.root_render_func(template.new_context(variables, shared=True)))
    except Exception:
        env.handle_exception()


def _and_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + (" and " + names[-1] if names else "")


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return Block("\n".join([(pad + line) if line else "" for line in text.rstrip("\n").split("\n")]))


def _check_paths(artifacts: list[Artifact]) -> None:
    """Two files at one path, or a file where a folder must be (restore.config_path can point there)."""
    files = {a.path for a in artifacts}
    if len(files) < len(artifacts):
        dup = sorted(p for p in files if sum(a.path == p for a in artifacts) > 1)[0]
        raise RenderError(f"two generated files would both be {dup!r}: restore.config_path must not be "
                          "the path of another generated file")
    for a in artifacts:
        i = a.path.find("/")
        while i >= 0:  # each folder of the path, the shortest first
            if a.path[:i] in files:
                raise RenderError(f"{a.path[:i]!r} would be both a generated file and the folder of "
                                  f"{a.path!r}: restore.config_path must not be one of migbake's paths")
            i = a.path.find("/", i + 1)


def render(profile: NodeProfile) -> list[Artifact]:
    """Every file of the output tree for ``profile``, sorted by path."""
    return render_plan(make_plan(profile))


def render_plan(plan: RenderPlan) -> list[Artifact]:
    """Every file of the output tree a plan describes, sorted by path (templates read only the plan)."""
    env = _environment()
    p = plan.profile
    cfg, unit_rel, dropin_rel = plan.config_rel, plan.unit_rel, plan.dropin_rel
    persisting = plan.reset_models
    labels_env = kubeadm_exec = ""
    layout = p.kubelet.layout if plan.node_label_flag else "none"
    if layout == "generic" and p.kubernetes.kubelet_args_env:
        labels_env = systemd_word(f"{p.kubernetes.kubelet_args_env}={plan.node_label_flag}")
    elif layout == "kubeadm":
        labels_env = systemd_word(f"{OUR_VARIABLE}={plan.node_label_flag}")
        kubeadm_exec = kubeadm_exec_start()
    ctx: dict[str, Any] = {
        "plan": plan,
        "profile": p,
        "consumers": plan.consumers,
        "consumers_text": p.consumers_text(),
        "held_text": p.consumers_text(only_fail_closed=True),
        "gpu_clients": GPU_CLIENTS,
        "restore_after": RESTORE_AFTER,
        "reset_target": GPU_RESET_TARGET,
        "restore_script": RESTORE_SCRIPT,
        "restore_cmd": systemd_command(["/bin/bash", RESTORE_SCRIPT]),
        "marker": REBOOT_MARKER,
        "reset_models": ", ".join(persisting),
        "reset_path": p.restore.on_reset_required if persisting else "none",
        "labels_env": labels_env,
        "labels_layout": layout,
        "kubeadm_exec": kubeadm_exec,
        "our_variable": OUR_VARIABLE,
        "nodeadm_path": NODEADM_DROPIN if layout == "eks-al2023" else "",
        "header": plan.header,
        "gpu_notes": list(plan.gpu_notes),
        "config_yaml": Block(plan.config_text.rstrip("\n")),
        "filter_notes": list(plan.filter_notes),
        "verify_groups": list(plan.verify_groups),
        "dropin_path": "/" + dropin_rel,
        "dropin_paths": plan.dropin_paths,
        "unit_path": "/" + unit_rel,
        "expected_per_gpu": plan.per_gpu,
        "manager_verb": p.conflicting_manager.action,
        "profile_name": hcl_string(p.name),
        "profile_sha": hcl_string(p.source_sha256),
        "migbake_version": hcl_string(__version__),
        "ami_name_prefix": hcl_string(f"migbake-{p.name}"),
        "image_name_prefix": hcl_string(f"migbake-{p.name}"),
        "image_description": hcl_string(f"MIG restore of node profile {p.name} (sha256 {p.source_sha256[:16]}), "
                                        f"baked by migbake {__version__}"),
        "execute_command": EXECUTE_COMMAND,
        "unit_dirs": UNIT_DIRS,
        "bake_pieces": plan.bake_pieces,
        "boot_pieces": plan.boot_pieces,
        "bake_pieces_text": _and_list([x.name for x in plan.bake_pieces]) or "nothing",
        "boot_pieces_text": _and_list([x.name for x in plan.boot_pieces]),
    }

    out: list[Artifact] = []
    shared = {**env.globals, **ctx}  # what Template.render would copy into every template's context

    def emit(template: str, path: str, mode: int, extra: dict[str, Any] | None = None) -> str:
        try:
            text = _render(env, _template(template), {**shared, **extra} if extra else shared)
        except jinja2.TemplateError as e:
            raise RenderError(f"template {template}: {e}") from e
        out.append(Artifact(path, text, mode))
        return text

    rootfs: list[tuple[str, str, int]] = []  # (rel path, text, mode)

    def emit_rootfs(template: str, rel: str, extra: dict[str, Any] | None = None) -> None:
        text = emit(template, f"rootfs/{rel}", 0o644, extra)
        rootfs.append((rel, text, 0o644))

    emit_rootfs("rootfs/etc/nvidia-mig/config.yaml.j2", cfg)
    emit_rootfs("rootfs/etc/nvidia-mig/restore.sh.j2", RESTORE_SCRIPT.lstrip("/"))
    emit_rootfs("rootfs/etc/systemd/system/nvidia-mig-restore.service.j2", unit_rel)
    if p.kubelet.present:
        emit_rootfs("rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf.j2", dropin_rel)
    if layout == "eks-al2023":
        emit_rootfs("rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml.j2", NODEADM_DROPIN.lstrip("/"),
                    {"nodeadm_text": Block(nodeadm_dropin(p, plan.header))})  # labels: JSON-quoted
    for c in p.consumers:
        emit_rootfs("rootfs/etc/systemd/system/CONSUMER.service.d/20-mig-restore.conf.j2",
                    plan.consumer_dropin_rel(c.drop_in_dir), {"consumer": c})

    boot, run = first_boot_commands(p)
    bootcmd, runcmd = [yaml_flow_list(c) for c in boot], [yaml_flow_list(c) for c in run]
    files = [{"path": yaml_scalar("/" + rel), "mode": yaml_scalar(f"{mode:04o}"), "content": _indent(text, 6)}
             for rel, text, mode in rootfs]
    emit("cloud-init/user-data.j2", "cloud-init/user-data", 0o644,
         {"files": files, "bootcmd": bootcmd, "runcmd": runcmd})

    install_files = [{"rel": rel, "mode": f"{mode:04o}"} for rel, _, mode in rootfs]
    for name in ("variables", "sources", "build"):
        emit(f"packer/{name}.pkr.hcl.j2", f"packer/{name}.pkr.hcl", 0o644)
    for plugin in PACKER_PLUGINS:  # one folder each: `packer init` installs only the chosen sources' plugins
        emit("packer/plugins/PLUGIN.pkr.hcl.j2", f"packer/plugins/{plugin}/required-plugins.pkr.hcl", 0o644,
             {"plugin": plugin})
    emit("packer/scripts/install-mig-restore.sh.j2", "packer/scripts/install-mig-restore.sh", 0o755,
         {"install_files": install_files})
    emit("packer/scripts/disable-mig-manager.sh.j2", "packer/scripts/disable-mig-manager.sh", 0o755)
    for name in ("verify-mig-restore", "uninstall-mig-restore", "capture-mig-config"):
        emit(f"scripts/{name}.sh.j2", f"scripts/{name}.sh", 0o755)
    emit("scripts/preflight-mig-restore.sh.j2", "scripts/preflight-mig-restore.sh", 0o755,
         _preflight_context(plan))
    if slurm_applies(p):
        out.append(Artifact(GRES_CONF, gres_conf(p, plan.header), 0o644))
        out.append(Artifact(NODE_CONF, node_conf(p, plan.header), 0o644))
    rendered = {a.path: a.content for a in out if isinstance(a.content, str)}
    emit_fleet(emit, lambda path, text, mode: out.append(Artifact(path, text, mode)), plan, rootfs, rendered)
    _check_paths(out)
    return sorted(out, key=lambda a: a.path)


def _preflight_context(plan: RenderPlan) -> dict[str, Any]:
    """The values the preflight template prints (each goes through the ``sh`` filter there)."""
    profile = plan.profile
    groups = [{"check": e.check, "model": e.model, "pci_ids": " ".join(e.pci_ids),
               "devices": "all" if e.devices == "all" else " ".join(map(str, e.devices)),
               "filtered": "yes" if e.filtered else "no", "want": e.want,
               "persists": "yes" if e.mode_persists else "no"}
              for e in plan.expectations]
    count = "" if profile.gpu_count is None else str(profile.gpu_count)
    return {"preflight": {"gpu_count": count, "groups": groups, "reset": any(g["persists"] == "yes" for g in groups),
                          "after_reset": AFTER_RESET[profile.restore.on_reset_required]}}
