"""Slurm (``OUT/slurm/``): ``gres.conf`` and the node's ``Gres=`` line for ``slurm.conf``, from ``plan.slurm``.

With ``slurm.autodetect: false`` an image for several GPU models gets one ``gres.conf`` per kind of node,
``slurm/<model>/gres.conf``, each with only that kind's devices: slurmd applies every line of a gres.conf
without ``NodeName=`` to its node, and stops when some lines are typed and others not. With named layouts
(``mig.layouts``) all of it is per name, under ``slurm/NAME/``: the admin deploys ``slurm/NAME/`` to the nodes
of the pool that says NAME (docs/slurm.md).
"""

from __future__ import annotations

from migbake.problems import RenderError
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard
from migbake.render.plan import RenderPlan, SlurmNode, SlurmPlan


def slurm(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """Both files, or both per layout name (declared to apply when the profile has a ``slurm`` section or a
    slurmd consumer)."""
    if plan.slurm is None:  # the declaration's applies says it never is
        raise RenderError("the slurm target ran on a plan without plan.slurm")
    out = []
    for s in plan.slurm.named or (plan.slurm,):
        out += [_file(path, gres_conf(s, node, plan.header)) for path, node in gres_files(s)]
        out.append(_file(f"{s.folder}slurm.conf.node", node_conf(s, plan.header)))
    return out


def _file(path: str, text: str) -> Artifact:
    """A file of lines built here: every value in it passes the guard (no control character but line feeds)."""
    return Artifact(path, guard(Block(text), "slurm", path), 0o644)


def gres_files(s: SlurmPlan) -> list[tuple[str, SlurmNode | None]]:
    """Where each gres.conf goes and whose devices it lists: one for every node (AutoDetect=nvml, or one kind)
    or, with explicit lines for several kinds of node, ``<model>/gres.conf`` per kind (in ``s.folder``)."""
    if s.autodetect:
        return [(f"{s.folder}gres.conf", None)]
    if len(s.nodes) == 1:
        return [(f"{s.folder}gres.conf", s.nodes[0])]
    return [(f"{s.folder}{node.key}/gres.conf", node) for node in s.nodes]


def _layout_lines(s: SlurmPlan) -> list[str]:
    """What a named layout's file says first: which nodes it is for."""
    if not s.layout:
        return []
    return [f"# Layout {s.layout}: for the nodes whose restore applies it (nvidia.com/mig.config={s.layout}); deploy",
            f"# {s.folder} to the node pool that says {s.layout}: each layout name has its own Slurm files."]


def node_conf(s: SlurmPlan, header: str) -> str:
    """``slurm/slurm.conf.node``: the node's ``Gres=`` for slurm.conf, with the GresTypes it needs."""
    lines = [header, *_layout_lines(s),
             "# The node's line for slurm.conf: merge Gres= into your NodeName line (CPUs, RealMemory, ...)",
             "# and keep GresTypes=gpu. slurmctld drains a node that reports fewer GPUs than Gres= says.",
             "GresTypes=gpu"]
    if len(s.nodes) > 1:
        lines.append("# This image serves several GPU models: each kind of node has its own line below, all with")
        lines.append("# slurm.node_name; slurmd stops on a node defined twice, so edit each line's NodeName= to")
        lines.append("# the nodes of its kind.")
    own = dict((node.key, path) for path, node in gres_files(s) if node is not None and len(s.nodes) > 1)
    for node in s.nodes:
        lines.append(f"# {node.label}" + (f" ({node.gpus} GPUs)" if node.gpus is not None else "")
                     + (f"; its gres.conf: {own[node.key]}" if node.key in own else ""))
        if node.gpus is None:
            lines.append("# the GPU count is unknown: set gpu_count in the profile for the Gres= counts")
            continue
        if node.why_untyped and node.total:
            lines.append(f"# untyped: {node.why_untyped}")
        lines.append(f"NodeName={s.node_name} Gres={node.gres()}" if node.total else f"NodeName={s.node_name}")
    return "\n".join(lines) + "\n"


def gres_conf(s: SlurmPlan, node: SlurmNode | None, header: str) -> str:
    """A ``gres.conf``: ``AutoDetect=nvml`` (``node`` None), or with ``slurm.autodetect: false`` the explicit
    lines of one kind of node."""
    lines = [header, *_layout_lines(s)]
    if node is None:
        lines += ["# slurmd reads the MIG devices from NVML when it starts, which is after the MIG restore",
                  "# (its unit is ordered after it). Install as /etc/slurm/gres.conf.", "AutoDetect=nvml"]
        return "\n".join(lines) + "\n"
    if len(s.nodes) > 1:
        lines += [f"# For {node.label} only: install as /etc/slurm/gres.conf on those nodes (each kind of",
                  "# node has its own gres.conf; slurmd applies every line here to its node)."]
    lines += ["# Explicit MIG devices (slurm.autodetect: false): one line per MIG device slurmd counts (one per",
              "# compute instance), its parent GPU's /dev/nvidiaN and the capability files of its GPU and",
              "# compute instance. Computed from where migbake places the instances (GPU instance id from the",
              "# placement, compute instances 0, 1, ... in creation order) and GPU index = device minor: check",
              "# once against nvidia-smi mig -lgi, mig -lci and /proc/driver/nvidia-caps/mig-minors on a node.",
              "# AutoDetect=nvml needs none of this.",
              "AutoDetect=off"]
    if node.gpus is None:
        lines += ["# No device lines: gpu_count is not set, so migbake does not know how many GPUs 'devices: all'",
                  "# covers (rule slurm-gpu-count). Set gpu_count in the profile, or use AutoDetect=nvml."]
    lines += list(node.devices)
    return "\n".join(lines) + "\n"
