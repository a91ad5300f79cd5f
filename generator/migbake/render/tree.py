"""Render a validated node profile into the output tree, in memory: the list of targets, and the path checks.

One plan (``plan.make_plan``) is derived from the profile; each target (``targets/``) turns it into its
files, in the order below (a later target may carry what an earlier one wrote: cloud-init, Packer,
Ansible and Kickstart carry the rootfs files, Ansible the scripts, Kickstart the Packer scripts).
"""

from __future__ import annotations

from collections.abc import Callable

from migbake.problems import RenderError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import RenderPlan, make_plan
from migbake.render.targets.ansible import ansible
from migbake.render.targets.bottlerocket import bottlerocket
from migbake.render.targets.butane import butane
from migbake.render.targets.cloudinit import cloud_init
from migbake.render.targets.clusterapi import cluster_api
from migbake.render.targets.context import shared_variables
from migbake.render.targets.karpenter import karpenter
from migbake.render.targets.kickstart import kickstart
from migbake.render.targets.kubernetes import kubernetes
from migbake.render.targets.packer import packer
from migbake.render.targets.rootfs import rootfs
from migbake.render.targets.scripts import scripts
from migbake.render.targets.slurm import slurm

__all__ = ["OUTPUT_NAMES", "TARGETS", "Artifact", "in_order", "only_outputs", "render", "render_plan"]

Target = Callable[[RenderPlan, Rendered, Templates], "list[Artifact]"]

# every output target, in the order they run
TARGETS: tuple[tuple[str, Target], ...] = (
    ("rootfs", rootfs),
    ("cloud-init", cloud_init),
    ("packer", packer),
    ("scripts", scripts),
    ("slurm", slurm),
    ("kubernetes", kubernetes),
    ("ansible", ansible),
    ("kickstart", kickstart),
    ("butane", butane),
    ("bottlerocket", bottlerocket),
    ("karpenter", karpenter),
    ("cluster-api", cluster_api),
)

# the output folders, each named as its target (``outputs:`` and ``generate --outputs`` choose among them)
OUTPUT_NAMES = tuple(name for name, _ in TARGETS)


def in_order(outputs: tuple[str, ...]) -> tuple[str, ...]:
    """The output names of ``outputs`` in TARGETS' order, each once (how the marker records them)."""
    return tuple(n for n in OUTPUT_NAMES if n in outputs)


def only_outputs(artifacts: list[Artifact], outputs: tuple[str, ...]) -> list[Artifact]:
    """The files of ``artifacts`` in the folders ``outputs`` names (empty: all of them).

    Every target is rendered first, so what one folder carries of another (Karpenter's userData the
    cloud-init user-data, Cluster API the rootfs files) is the same whether or not that folder is written.
    """
    if not outputs:
        return artifacts
    keep = set(outputs)
    return [a for a in artifacts if a.path.split("/", 1)[0] in keep]


def render(profile: NodeProfile) -> list[Artifact]:
    """Every file of the output tree for ``profile``, sorted by path."""
    return render_plan(make_plan(profile))


def render_plan(plan: RenderPlan) -> list[Artifact]:
    """Every file of the output tree a plan describes, sorted by path (the targets read only the plan)."""
    templates = Templates(shared_variables(plan))
    done = Rendered()
    for _, target in TARGETS:
        done.add(target(plan, done, templates))
    out = done.all()
    check_paths(out)
    return sorted(out, key=lambda a: a.path)


def check_paths(artifacts: list[Artifact]) -> None:
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
