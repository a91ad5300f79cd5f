"""The node's scripts (``OUT/scripts/``): verify, uninstall, capture, and preflight with each entry's expectation."""

from __future__ import annotations

from typing import Any

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import DROPIN_NAME, DraDevice, RenderPlan
from migbake.render.targets.rootfs import watch_paths


def scripts(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The four scripts a person runs on a node."""
    unit = {"restore_dropin_name": DROPIN_NAME}  # kubelet's unit is read without the restore's drop-in
    if plan.profile.watches_driver:  # driver: container: the watcher's ready file, asserted in the driver's namespace
        out = [templates.file("scripts/verify-driver-watch.sh.j2", "scripts/verify-mig-restore.sh", 0o755,
                              {"watch": watch_paths(plan)})]
    else:
        out = [templates.file("scripts/verify-mig-restore.sh.j2", "scripts/verify-mig-restore.sh", 0o755,
                              {**_verify(plan), **unit})]
    out += [templates.file(f"scripts/{name}.sh.j2", f"scripts/{name}.sh", 0o755, {**unit, "watch": watch_paths(plan)})
            for name in ("uninstall-mig-restore", "capture-mig-config")]
    out.append(templates.file("scripts/preflight-mig-restore.sh.j2", "scripts/preflight-mig-restore.sh", 0o755,
                              {**_preflight(plan), **unit}))
    return out


def _verify(plan: RenderPlan) -> dict[str, Any]:
    """The DRA devices verify expects: ``plan.dra.expected``, the expectations ``preflight --resource-slices`` uses."""
    count = plan.profile.gpu_count
    return {"dra_checks": [{"gpus": "published" if e.gpus is None else " ".join(map(str, e.gpus)),
                            "mig": "yes" if e.mig else "no", "want": _want(e.want), "products": "|".join(e.products)}
                           for e in plan.dra.expected],
            "dra_named_want": [(name, [_want(w) for w in per_entry]) for name, per_entry in plan.dra.named_devices],
            "dra_gpu_count": "" if count is None else str(count),
            "dra_form": plan.dra.naming}


def _want(devices: tuple[DraDevice, ...]) -> str:
    """One entry's MIG devices as verify's dra_checks reads them: ``PROFILE=START=NAME=OLDNAME`` each."""
    return " ".join(f"{d.profile}={d.start}={d.suffix}={d.legacy_suffix}" for d in devices)


def _preflight(plan: RenderPlan) -> dict[str, Any]:
    """The values the preflight template prints (each goes through the ``sh`` filter there)."""
    groups = [{"check": e.check, "model": e.model, "pci_ids": " ".join(e.pci_ids),
               "devices": "all" if e.devices == "all" else " ".join(map(str, e.devices)),
               "filtered": "yes" if e.filtered else "no", "want": e.want,
               "persists": "yes" if e.mode_persists else "no", "want_named": list(e.want_named),
               "boards": ";".join(f"{key}|{want}" for key, want in e.board_wants)}
              for e in plan.expect.expectations]
    count = "" if plan.profile.gpu_count is None else str(plan.profile.gpu_count)
    gate = plan.restore.driver_gate
    return {"preflight": {"gpu_count": count, "groups": groups, "reset": any(g["persists"] == "yes" for g in groups),
                          "after_reset": plan.restore.after_reset,
                          "minimums": " ".join(f"{key}={low}" for key, low in gate.minimums),
                          "mixed": "yes" if gate.mixed else "no", "grace": " ".join(gate.grace),
                          "cdmm": plan.profile.restore.cdmm, "mig": plan.expect.mig_on}}
