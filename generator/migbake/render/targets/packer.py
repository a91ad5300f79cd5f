"""Packer (``OUT/packer/``): the HCL2 templates, one plugin folder per builder, and the provisioner scripts."""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import RenderPlan
from migbake.render.targets.rootfs import ROOTFS

# the Packer plugins of the templates' sources (null is built into Packer); packer.SOURCES names each one's
PACKER_PLUGINS = ("amazon", "qemu", "googlecompute", "azure")
INSTALL_SCRIPT = "packer/scripts/install-mig-restore.sh"
MANAGER_SCRIPT = "packer/scripts/disable-mig-manager.sh"
MIG_PARTED_SCRIPT = "packer/scripts/install-mig-parted.sh"  # with tools.nvidia_mig_parted_url only


def packer(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """variables/sources/build, each plugin's requirements, and the scripts that install the rootfs files (and,
    with ``tools.nvidia_mig_parted_url``, nvidia-mig-parted before them)."""
    # the base AMI follows kubelet.layout: the EKS AMI of the cluster's version, else the user's own
    out = [templates.file(f"packer/{name}.pkr.hcl.j2", f"packer/{name}.pkr.hcl", 0o644,
                          {"ami_family": plan.platforms.eks, "download_mig_parted": plan.platforms.download_mig_parted})
           for name in ("variables", "sources", "build")]
    # one folder each: `packer init` installs only the chosen sources' plugins
    out += [templates.file("packer/plugins/PLUGIN.pkr.hcl.j2", f"packer/plugins/{plugin}/required-plugins.pkr.hcl",
                           0o644, {"plugin": plugin}) for plugin in PACKER_PLUGINS]
    install_files = [{"rel": rel, "mode": f"{a.mode:04o}"} for rel, a in done.under(ROOTFS)]
    out.append(templates.file(f"{INSTALL_SCRIPT}.j2", INSTALL_SCRIPT, 0o755, {"install_files": install_files}))
    out.append(templates.file(f"{MANAGER_SCRIPT}.j2", MANAGER_SCRIPT, 0o755))
    if plan.platforms.download_mig_parted:  # first: install-mig-restore.sh checks that the image holds the binary
        out.append(templates.file(f"{MIG_PARTED_SCRIPT}.j2", MIG_PARTED_SCRIPT, 0o755))
    return out
