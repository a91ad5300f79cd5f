"""Bottlerocket user data (``OUT/bottlerocket/settings.toml``): MIG for the ``aws-k8s-*-nvidia`` variants.

Bottlerocket's NVIDIA device plugin settings (bottlerocket-os/bottlerocket-settings-sdk:
bottlerocket-settings-models/modeled-types/src/kubernetes.rs@25e4241f) take
``device-partitioning-strategy = "mig"`` and one ``mig.profile."<model>"`` per GPU model; its
nvidia-migmanager fills every GPU of that model with the profile at boot. Written only when
Bottlerocket can say the profile's layout (``plan.platforms.bottlerocket``: uniform per model, models it knows);
otherwise nothing, and ``migbake show`` says why (with ``bottlerocket.required``, a warning too). TOML
values and keys pass through ``toml_string``.
"""

from __future__ import annotations

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard
from migbake.render.plan import RenderPlan
from migbake.render.quoting import toml_string

SETTINGS = "settings.kubelet-device-plugins.nvidia"
SETTINGS_TOML = "bottlerocket/settings.toml"


def bottlerocket(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """settings.toml (declared to apply only when Bottlerocket can say the layout: ``plan.platforms.bottlerocket``)."""
    lines = [
        plan.header,
        "#",
        "# Bottlerocket user data (aws-k8s-*-nvidia variants), docs/immutable-os.md: the NVIDIA device plugin",
        "# partitions with MIG, nvidia-migmanager fills every GPU of a model with its profile at boot (a change",
        "# needs a reboot). Merge these tables into the node's user data.",
    ]
    if len(plan.platforms.bottlerocket) > 1:
        lines.append("# One model per instance: nvidia-migmanager refuses an instance with GPUs of several models.")
    lines += ["", f"[{SETTINGS}]", f"device-partitioning-strategy = {toml_string('mig')}", "",
              f"[{SETTINGS}.mig.profile]"]
    lines += [f"{toml_string(model)} = {toml_string(profile)}" for model, profile in plan.platforms.bottlerocket]
    return [Artifact(SETTINGS_TOML, guard(Block("\n".join(lines) + "\n"), "toml", SETTINGS_TOML), 0o644)]
