"""The template variables every target shares, read from the plan (quoted here for the language that prints them)."""

from __future__ import annotations

from typing import Any

from migbake import __version__
from migbake.render.guard import Block, Quoted
from migbake.render.plan import LAYOUT_FILE, RenderPlan
from migbake.render.quoting import and_list, hcl_string, systemd_command, systemd_word

# Packer's execute_command for the provisioner scripts, as an HCL literal (no profile value in it):
# as root directly, else through sudo; the staging directory is the script's first argument
EXECUTE_COMMAND = Quoted('"chmod +x {{ .Path }}; if [ \\"$(id -u)\\" -eq 0 ]; then {{ .Vars }} {{ .Path }} '
                         "'${var.staging_dir}'; else sudo -n env {{ .Vars }} {{ .Path }} '${var.staging_dir}'; fi\"")


def shared_variables(plan: RenderPlan) -> dict[str, Any]:
    """What the templates of every target may print."""
    p = plan.profile
    k = plan.kubelet
    name = p.name
    return {
        "plan": plan,
        "node": plan.node,  # where the node scripts read the machine (parts.NodePaths)
        "profile": p,
        "consumers": plan.consumers.all,
        "consumers_text": plan.consumers.text,
        "held_text": plan.consumers.held_text,
        "gpu_clients": plan.restore.gpu_clients,
        "restore_after": plan.restore.after,
        "reset_target": plan.restore.reset_target,
        "restore_script": plan.restore.script,
        "restore_cmd": systemd_command(["/bin/bash", plan.restore.script]),
        "marker": plan.restore.reboot_marker,
        "reset_models": ", ".join(plan.restore.reset_models),
        "reset_path": plan.restore.reset_path,
        "labels_env": systemd_word(k.labels_assignment) if k.labels_assignment else "",
        "labels_layout": k.layout,
        "kubeadm_exec": k.exec_start,
        "our_variable": k.our_variable,
        "nodeadm_path": k.nodeadm_path,
        "header": plan.header,
        "gpu_notes": list(plan.mig.gpu_notes),
        "config_yaml": Block(plan.mig.config_text.rstrip("\n")),
        "filter_notes": list(plan.mig.filter_notes),
        "verify_groups": list(plan.expect.verify_groups),
        "placement_groups": list(plan.dra.placement_groups),
        "placement_check": plan.dra.placement_check,
        "presence": plan.restore.presence,
        "dropin_path": "/" + plan.dropin_rel,
        "layout_file": LAYOUT_FILE,
        "dropin_paths": plan.dropin_paths,
        "unit_path": "/" + plan.restore.unit_rel,
        "expected_per_gpu": plan.mig.per_gpu,
        "manager_verb": p.conflicting_manager.action,
        "profile_name": hcl_string(name),
        "migbake_version": hcl_string(__version__),
        "ami_name_prefix": hcl_string(f"migbake-{name}"),
        "image_name_prefix": hcl_string(f"migbake-{name}"),
        "execute_command": EXECUTE_COMMAND,
        "unit_dirs": plan.restore.unit_dirs,
        "bake_pieces": plan.consumers.bake_pieces,
        "boot_pieces": plan.consumers.boot_pieces,
        "bake_pieces_text": and_list([x.name for x in plan.consumers.bake_pieces]) or "nothing",
        "boot_pieces_text": and_list([x.name for x in plan.consumers.boot_pieces]),
    }
