"""cloud-init user-data (``OUT/cloud-init/user-data``): the rootfs files, bootcmd's hold and runcmd's restore."""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import RenderPlan
from migbake.render.quoting import indent, yaml_flow_list, yaml_scalar
from migbake.render.targets.rootfs import ROOTFS


def cloud_init(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The user-data: write_files of every rootfs file, and the first boot's commands (``plan.first_boot``)."""
    files = [{"path": yaml_scalar("/" + rel), "mode": yaml_scalar(f"{a.mode:04o}"), "content": indent(a.text, 6)}
             for rel, a in done.under(ROOTFS)]
    return [templates.file("cloud-init/user-data.j2", "cloud-init/user-data", 0o644, {
        "files": files,
        "bootcmd": [yaml_flow_list(list(c)) for c in plan.first_boot.bootcmd],
        "runcmd": [yaml_flow_list(list(c)) for c in plan.first_boot.runcmd],
    })]
