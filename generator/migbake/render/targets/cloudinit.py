"""cloud-init user-data (``OUT/cloud-init/user-data``): the rootfs files, bootcmd's hold and runcmd's restore."""

from __future__ import annotations

import base64

from migbake.render.artifact import Artifact, Rendered, gzip_bytes
from migbake.render.environment import Templates
from migbake.render.plan import RenderPlan
from migbake.render.quoting import indent, yaml_flow_list, yaml_scalar
from migbake.render.targets.rootfs import ROOTFS


def cloud_init(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The user-data: write_files of every rootfs file, and the first boot's commands (``plan.first_boot``)."""
    return [Artifact("cloud-init/user-data", cloud_config(plan, done, templates), 0o644)]


def cloud_config(plan: RenderPlan, done: Rendered, templates: Templates, *, gzipped: bool = False) -> str:
    """The cloud-config; ``gzipped``: each file's content as cloud-init's ``gzip+base64`` (a smaller document,
    for user data that cannot be gzipped as a whole: Karpenter's MIME parts)."""
    files = []
    for rel, a in done.under(ROOTFS):
        f = {"path": yaml_scalar("/" + rel), "mode": yaml_scalar(f"{a.mode:04o}"), "encoding": ""}
        if gzipped:
            packed = base64.b64encode(gzip_bytes(a.data)).decode("ascii")
            f.update(encoding="gzip+base64", content=yaml_scalar(packed))
        else:
            f["content"] = indent(a.text, 6)
        files.append(f)
    return templates.text("cloud-init/user-data.j2", {
        "files": files,
        "bootcmd": [yaml_flow_list(list(c)) for c in plan.first_boot.bootcmd],
        "runcmd": [yaml_flow_list(list(c)) for c in plan.first_boot.runcmd],
    })
