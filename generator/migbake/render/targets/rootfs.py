"""The node's own files (``OUT/rootfs/``): the mig-parted config, restore.sh, the restore unit and every drop-in."""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block
from migbake.render.plan import RenderPlan

ROOTFS = "rootfs"
UNITS = "rootfs/etc/systemd/system"


def rootfs(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """Every file the node gets, in the order the installers copy them (config, script, unit, drop-ins)."""
    out: list[Artifact] = []

    def put(template: str, rel: str, extra: dict[str, object] | None = None) -> None:
        out.append(templates.file(template, f"{ROOTFS}/{rel}", 0o644, extra))

    put("rootfs/etc/nvidia-mig/config.yaml.j2", plan.restore.config_rel)
    put("rootfs/etc/nvidia-mig/restore.sh.j2", plan.restore.script.lstrip("/"))
    put(f"{UNITS}/nvidia-mig-restore.service.j2", plan.restore.unit_rel)
    if plan.profile.kubelet.present:
        put(f"{UNITS}/kubelet.service.d/20-mig-restore.conf.j2", plan.dropin_rel)
    if plan.kubelet.nodeadm_path:  # labels: JSON-quoted in the plan's text
        put("rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml.j2", plan.kubelet.nodeadm_path.lstrip("/"),
            {"nodeadm_text": Block(plan.kubelet.nodeadm_text)})
    for c in plan.profile.consumers:
        put(f"{UNITS}/CONSUMER.service.d/20-mig-restore.conf.j2", plan.consumer_dropin_rel(c.drop_in_dir),
            {"consumer": c})
    return out
