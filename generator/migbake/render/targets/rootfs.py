"""The node's own files (``OUT/rootfs/``): the mig-parted config, restore.sh, the restore unit and every drop-in.

Also the layout seeds' share of them: where ``restore.layout.from`` names ``file``, a PXE seed of one layout name
(cloud-init's ``layouts/NAME/user-data``, Kickstart's ``layouts/NAME.ks``, or the top-level ones with ``generate
--layout NAME``) writes that name to ``/etc/migbake/layout`` (the file source's first line,
templates/scripts/_layout-source.sh.j2) beside these files, so the node's first boot applies that layout.
"""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block
from migbake.render.plan import LAYOUT_FILE, RenderPlan

ROOTFS = "rootfs"
UNITS = "rootfs/etc/systemd/system"
LAYOUT_REL = ROOTFS + LAYOUT_FILE  # the layout file, as the seeds carry it beside the rootfs files


def seed_layouts(plan: RenderPlan) -> tuple[str, ...]:
    """The names that get a seed of their own: every mig.layouts name, where the restore reads the file source."""
    return plan.mig.layout_names if "file" in plan.profile.restore.layout_from else ()


def with_layout(done: Rendered, name: str) -> Rendered:
    """``done`` with the layout file saying ``name`` among the rootfs files (``done`` itself for no name)."""
    if not name:
        return done
    return Rendered([*done.all(), Artifact(LAYOUT_REL, f"{name}\n", 0o644)])


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
