"""The node's own files (``OUT/rootfs/``): the mig-parted config, restore.sh, the restore unit and every drop-in.

Also the layout seeds' share of them: where ``restore.layout.from`` names ``file``, a PXE seed of one layout name
(cloud-init's ``layouts/NAME/user-data``, Kickstart's ``layouts/NAME.ks``, or the top-level ones with ``generate
--layout NAME``) writes that name to ``/etc/migbake/layout`` (the file source's first line,
templates/scripts/_layout-source.sh.j2) beside these files, so the node's first boot applies that layout.

With ``driver: container`` the restore is a watcher instead (``driver-watch.sh`` and its unit, with
``/etc/migbake/managed``): nothing is ordered before kubelet, which starts the driver container.
"""

from __future__ import annotations

from typing import Any

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block
from migbake.render.plan import KUBELET_KUBECONFIGS, LAYOUT_FILE, RenderPlan
from migbake.render.quoting import systemd_command

ROOTFS = "rootfs"
UNITS = "rootfs/etc/systemd/system"
WATCH_SCRIPT = "/etc/nvidia-mig/driver-watch.sh"
MANAGED = "/etc/migbake/managed"
LAYOUT_REL = ROOTFS + LAYOUT_FILE  # the layout file, as the seeds carry it beside the rootfs files


def seed_layouts(plan: RenderPlan) -> tuple[str, ...]:
    """The names that get a seed of their own: every mig.layouts name, where the restore reads the file source."""
    return plan.mig.layout_names if "file" in plan.profile.restore.layout_from else ()


def with_layout(done: Rendered, name: str) -> Rendered:
    """``done`` with the layout file saying ``name`` among the rootfs files (``done`` itself for no name)."""
    if not name:
        return done
    return Rendered([*done.all(), Artifact(LAYOUT_REL, f"{name}\n", 0o644)])


def watch_paths(plan: RenderPlan, root: str = "") -> dict[str, Any]:
    """The node paths the watcher reads and writes; ``root`` puts them under another folder (its tests)."""
    p = plan.profile
    return {
        "script": WATCH_SCRIPT,
        "cmd": systemd_command(["/bin/bash", WATCH_SCRIPT]),
        "driver_root": root + p.restore.driver_root,
        "run_nvidia": root + "/run/nvidia",  # the driver container's hostPath (NVIDIA/gpu-operator@v26.7.0)
        "sys": root + "/sys",
        "proc": root + "/proc",
        "managed": root + MANAGED,
        "ready": root + "/run/migbake/mig-ready",
        "cdi_spec": root + "/var/run/cdi/management.nvidia.com-gpu.yaml",
        "kubeconfigs": [root + k for k in KUBELET_KUBECONFIGS],  # driver-watch.sh says where each is from
        "poll": 2,
        "attempts": 3,
    }


def rootfs(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """Every file the node gets, in the order the installers copy them (config, script, unit, drop-ins)."""
    out: list[Artifact] = []
    watch = watch_paths(plan)

    def put(template: str, rel: str, extra: dict[str, object] | None = None) -> None:
        out.append(templates.file(template, f"{ROOTFS}/{rel}", 0o644, {"watch": watch, **(extra or {})}))

    put("rootfs/etc/nvidia-mig/config.yaml.j2", plan.restore.config_rel)
    if plan.profile.watches_driver:
        put("rootfs/etc/nvidia-mig/driver-watch.sh.j2", WATCH_SCRIPT.lstrip("/"))
        put(f"{UNITS}/migbake-driver-watch.service.j2", plan.restore.unit_rel)
        put("rootfs/etc/migbake/managed.conf.j2", MANAGED.lstrip("/"))
    else:
        put("rootfs/etc/nvidia-mig/restore.sh.j2", plan.restore.script.lstrip("/"))
        put(f"{UNITS}/nvidia-mig-restore.service.j2", plan.restore.unit_rel)
    if plan.profile.kubelet.present and plan.profile.restore.hold == "kubelet":
        put(f"{UNITS}/kubelet.service.d/20-mig-restore.conf.j2", plan.dropin_rel)
    if plan.kubelet.nodeadm_path:  # labels: JSON-quoted in the plan's text
        put("rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml.j2", plan.kubelet.nodeadm_path.lstrip("/"),
            {"nodeadm_text": Block(plan.kubelet.nodeadm_text)})
    for c in plan.profile.consumers:
        put(f"{UNITS}/CONSUMER.service.d/20-mig-restore.conf.j2", plan.consumer_dropin_rel(c.drop_in_dir),
            {"consumer": c})
    return out
