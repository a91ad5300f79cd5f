"""Slurm (``OUT/slurm/``): ``gres.conf`` and the node's ``Gres=`` line for ``slurm.conf``, from ``plan.slurm``."""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import RenderPlan, SlurmPlan

GRES_CONF = "slurm/gres.conf"
NODE_CONF = "slurm/slurm.conf.node"


def slurm(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """Both files, when the profile has a ``slurm`` section or a slurmd consumer."""
    if plan.slurm is None:
        return []
    return [Artifact(GRES_CONF, gres_conf(plan.slurm, plan.header), 0o644),
            Artifact(NODE_CONF, node_conf(plan.slurm, plan.header), 0o644)]


def node_conf(s: SlurmPlan, header: str) -> str:
    """``slurm/slurm.conf.node``: the node's ``Gres=`` for slurm.conf, with the GresTypes it needs."""
    lines = [header,
             "# The node's line for slurm.conf: merge Gres= into your NodeName line (CPUs, RealMemory, ...)",
             "# and keep GresTypes=gpu. slurmctld drains a node that reports fewer GPUs than Gres= says.",
             "GresTypes=gpu"]
    if len(s.nodes) > 1:
        lines.append("# This image serves several GPU models: each kind of node has its own line below; give each")
        lines.append("# its own NodeName (set slurm.node_name, or edit).")
    for node in s.nodes:
        lines.append(f"# {node.label}" + (f" ({node.gpus} GPUs)" if node.gpus is not None else ""))
        if node.gpus is None:
            lines.append("# the GPU count is unknown: set gpu_count in the profile for the Gres= counts")
            continue
        if node.why_untyped and node.total:
            lines.append(f"# untyped: {node.why_untyped}")
        lines.append(f"NodeName={s.node_name} Gres={node.gres()}" if node.total else f"NodeName={s.node_name}")
    return "\n".join(lines) + "\n"


def gres_conf(s: SlurmPlan, header: str) -> str:
    """``slurm/gres.conf``: ``AutoDetect=nvml``, or explicit MIG device lines with ``slurm.autodetect: false``."""
    lines = [header]
    if s.autodetect:
        lines += ["# slurmd reads the MIG devices from NVML when it starts, which is after the MIG restore",
                  "# (its unit is ordered after it). Install as /etc/slurm/gres.conf.", "AutoDetect=nvml"]
        return "\n".join(lines) + "\n"
    lines += ["# Explicit MIG devices (slurm.autodetect: false): one line per MIG device, its parent GPU's",
              "# /dev/nvidiaN and the capability files of its GPU and compute instance. Computed from where",
              "# migbake places the instances (GPU instance id from the placement, compute instance 0) and",
              "# GPU index = device minor: check once against nvidia-smi mig -lgi and",
              "# /proc/driver/nvidia-caps/mig-minors on a node. AutoDetect=nvml needs none of this.",
              "AutoDetect=off"]
    lines += list(s.device_lines)
    return "\n".join(lines) + "\n"
