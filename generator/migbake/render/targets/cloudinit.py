"""cloud-init user-data (``OUT/cloud-init/user-data``): the rootfs files, bootcmd's hold and runcmd's restore.

With ``tools.nvidia_mig_parted_url``, runcmd first downloads nvidia-mig-parted and installs it only when its
sha256 matches (the step of ``packer/scripts/install-mig-parted.sh``), before the restore is enabled; when
it fails, the restore's check of the node finds no binary and the restore does not run.

Per-layout seeds: for named layouts read from the file source, ``OUT/cloud-init/layouts/NAME/user-data`` is the
same user-data with one more ``write_files`` entry, ``/etc/migbake/layout`` holding NAME (``rootfs.with_layout``);
``generate --layout NAME`` writes that seed as ``OUT/cloud-init/user-data``. ``write_files`` runs in cloud-init's
init stage, before ``sysinit.target`` and so before the restore (docs/layouts-at-boot.md, "The first boot").
"""

from __future__ import annotations

import base64

from migbake.render.artifact import Artifact, Rendered, gzip_bytes
from migbake.render.environment import Templates
from migbake.render.plan import LAYOUT_FILE, RenderPlan
from migbake.render.quoting import indent, yaml_flow_list, yaml_scalar
from migbake.render.targets.rootfs import ROOTFS, seed_layouts, with_layout

# with tools.nvidia_mig_parted_url: runcmd's first step, the body of packer/scripts/install-mig-parted.sh
MIG_PARTED_STEP = "scripts/_install-mig-parted.sh.j2"


def cloud_init(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The user-data: write_files of every rootfs file, and the first boot's commands (``plan.first_boot``);
    and a seed per layout name (``layouts/NAME/user-data``)."""
    out = [Artifact("cloud-init/user-data", cloud_config(plan, done, templates, layout=plan.seed_layout), 0o644)]
    out += [Artifact(f"cloud-init/layouts/{name}/user-data", cloud_config(plan, done, templates, layout=name), 0o644)
            for name in seed_layouts(plan)]
    return out


def cloud_config(plan: RenderPlan, done: Rendered, templates: Templates, *, gzipped: bool = False,
                 layout: str = "") -> str:
    """The cloud-config; ``gzipped``: each file's content as cloud-init's ``gzip+base64`` (a smaller document,
    for user data that cannot be gzipped as a whole: Karpenter's MIME parts); ``layout``: the seed of that layout
    name, which also writes it to the layout file."""
    done = with_layout(done, layout)
    files = []
    for rel, a in done.under(ROOTFS):
        f = {"path": yaml_scalar("/" + rel), "mode": yaml_scalar(f"{a.mode:04o}"), "encoding": ""}
        if gzipped:
            packed = base64.b64encode(gzip_bytes(a.data)).decode("ascii")
            f.update(encoding="gzip+base64", content=yaml_scalar(packed))
        else:
            f["content"] = indent(a.text, 6)
        files.append(f)
    runcmd = [list(c) for c in plan.first_boot.runcmd]
    if plan.platforms.download_mig_parted:  # first: before the restore is enabled, and before its check of the node
        runcmd.insert(0, ["sh", "-c", templates.text(MIG_PARTED_STEP), "install-mig-parted"])
    return templates.text("cloud-init/user-data.j2", {
        "files": files,
        "bootcmd": [yaml_flow_list(list(c)) for c in plan.first_boot.bootcmd],
        "runcmd": [yaml_flow_list(c) for c in runcmd],
        "download_mig_parted": plan.platforms.download_mig_parted,
        "layout": layout,
        "layout_file": LAYOUT_FILE,
    })
