"""Butane configs (``OUT/butane/``) for Fedora CoreOS, Flatcar and OpenShift, and the Ignition each one becomes.

Each config carries the bake's own files (the bytes of ``OUT/rootfs/``, ``overwrite: true``): the unit
and its drop-ins as ``systemd.units`` (Ignition writes them to /etc/systemd/system), every other file as
``storage.files``; the restore enabled (Ignition: a preset applied at first boot) and the packaged MIG
manager masked or disabled, as the bake does. Versions (docs/immutable-os.md): fcos 1.6.0 (Ignition
3.5.0), flatcar 1.1.0 (3.4.0), openshift 4.14.0 (3.4.0). Flatcar's restore also waits for
``nvidia.service``; with ``tools.nvidia_mig_parted_url`` Fedora CoreOS and Flatcar download the binary
with Ignition's ``verification.hash``. For a custom OpenShift pool (``openshift.role`` other than worker
and master) the MachineConfigPool that selects the GPU nodes is written beside the MachineConfig. Every
value reaches YAML through a YAML emitter, JSON through ``quoting.json_document`` (json's text).
"""

from __future__ import annotations

from typing import Any

from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard
from migbake.render.guard import line as guard_line
from migbake.render.plan import RenderPlan
from migbake.render.quoting import json_document, yaml_document
from migbake.render.targets.ignition import ROLE_LABEL, ignition, machine_config
from migbake.render.targets.rootfs import ROOTFS

BUTANE = "butane"
SHARED_POOLS = ("worker", "master")  # the cluster's own pools: no pool to write (rule openshift-role-shared)
NODE_ROLE = "node-role.kubernetes.io/"  # the label a node of a custom pool carries (docs/custom-pools.md)
VARIANTS = (("fcos", "1.6.0"), ("flatcar", "1.1.0"))
OPENSHIFT = ("openshift", "4.14.0")
SYSTEM_UNITS = "etc/systemd/system/"
FLATCAR_DROPIN = "10-migbake-flatcar.conf"
# Flatcar's nvidia.service (flatcar/scripts:sdk_container/src/third_party/coreos-overlay/x11-drivers/
# nvidia-drivers-service/files/units/nvidia.service@656022a1) is oneshot with RemainAfterExit, enabled in
# the image, and sets this PATH: its build puts nvidia-smi into /opt/bin, which systemd's PATH lacks
FLATCAR_PATH = "/opt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"


def butane(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """fcos.bu/.ign, flatcar.bu/.ign, openshift-<role>.bu and its MachineConfig openshift-<role>.yaml."""
    rootfs = [(rel, a.text, a.mode) for rel, a in done.under(ROOTFS)]
    out = []
    for variant, version in VARIANTS:
        config = butane_config(plan, rootfs, variant, version)
        out.append(_yaml(plan, f"{BUTANE}/{variant}.bu", config, f"butane --strict {variant}.bu"))
        out.append(Artifact(f"{BUTANE}/{variant}.ign", _json(ignition(config)), 0o644))
    role = guard_line(plan.profile.openshift.role, "openshift.role")  # a file name and a comment: one plain line
    config = butane_config(plan, rootfs, *OPENSHIFT)
    out.append(_yaml(plan, f"{BUTANE}/openshift-{role}.bu", config, f"butane --strict openshift-{role}.bu"))
    out.append(_yaml(plan, f"{BUTANE}/openshift-{role}.yaml", machine_config(config),
                     f"butane --strict openshift-{role}.bu (oc apply -f openshift-{role}.yaml)"))
    if role not in SHARED_POOLS:
        out.append(_yaml(plan, f"{BUTANE}/openshift-{role}-pool.yaml", machine_config_pool(role),
                         f"migbake, for openshift.role {role} (oc apply -f openshift-{role}-pool.yaml, then oc "
                         f"label node NODE node-role.kubernetes.io/{role}= for each GPU node)"))
    return out


def machine_config_pool(role: str) -> dict[str, Any]:
    """The custom pool of ``role``: worker's MachineConfigs and the role's own, on the nodes labelled with it.

    As openshift/machine-config-operator:docs/custom-pools.md@1b3632de creates one; the fields are those of
    openshift/api:machineconfiguration/v1 MachineConfigPool (tests/fixtures/crds/ORIGIN.md).
    """
    return {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": role},
            "spec": {"machineConfigSelector": {"matchExpressions": [
                        {"key": ROLE_LABEL, "operator": "In", "values": ["worker", role]}]},
                     "nodeSelector": {"matchLabels": {f"{NODE_ROLE}{role}": ""}}}}


def butane_config(plan: RenderPlan, rootfs: list[tuple[str, str, int]], variant: str,
                  version: str) -> dict[str, Any]:
    """One variant's Butane config, as data (the rootfs files as text with their modes)."""
    p = plan.profile
    config: dict[str, Any] = {"variant": variant, "version": version}
    if variant == "openshift":
        config["metadata"] = {"name": f"99-{p.openshift.role}-migbake-{p.name}",
                              "labels": {ROLE_LABEL: p.openshift.role}}
    files: list[dict[str, Any]] = []
    units: dict[str, dict[str, Any]] = {}
    for rel, text, mode in rootfs:
        unit, _, dropin = rel[len(SYSTEM_UNITS):].partition("/") if rel.startswith(SYSTEM_UNITS) else ("", "", "")
        if unit and not dropin:
            units.setdefault(unit, {"name": unit})["contents"] = text
        elif unit.endswith(".d") and dropin and "/" not in dropin:
            units.setdefault(unit[:-2], {"name": unit[:-2]}).setdefault("dropins", []).append(
                {"name": dropin, "contents": text})
        else:
            files.append({"path": "/" + rel, "mode": mode, "overwrite": True, "contents": {"inline": text}})
    # openshift: data: URLs only (rule openshift-binary-in-image)
    if plan.platforms.ignition_fetch and variant != "openshift":
        files.append({"path": p.tools.nvidia_mig_parted, "mode": 0o755, "overwrite": True,
                      "contents": {"source": p.tools.nvidia_mig_parted_url,
                                   "verification": {"hash": f"sha256-{p.tools.nvidia_mig_parted_sha256}"}}})
    restore = units.setdefault(p.restore.unit, {"name": p.restore.unit})
    restore["enabled"] = True
    if variant == "flatcar" and not p.watches_driver:  # a driver container is no nvidia.service to wait for
        restore.setdefault("dropins", []).append({"name": FLATCAR_DROPIN, "contents": _flatcar_dropin(plan)})
    manager = p.conflicting_manager
    units[manager.unit] = {"name": manager.unit, **({"mask": True} if manager.action == "mask" else {"enabled": False})}
    config["storage"] = {"files": files}
    config["systemd"] = {"units": list(units.values())}
    return config


def _flatcar_dropin(plan: RenderPlan) -> str:
    return (f"{plan.header}\n#\n"
            "# Flatcar: the NVIDIA driver comes from nvidia.service, from its sysext (nvidia-drivers-*) or built\n"
            "# on first boot with its tools in /opt/bin (flatcar/flatcar-website:content/docs/latest/setup/\n"
            "# customization/using-nvidia.md@01cc5f60). The restore starts once it is done; its own driver\n"
            "# wait (restore.driver_wait_seconds) starts then.\n"
            "[Unit]\nWants=nvidia.service\nAfter=nvidia.service\n\n"
            f"[Service]\nEnvironment=PATH={FLATCAR_PATH}\n")


def _yaml(plan: RenderPlan, path: str, data: dict[str, Any], how: str) -> Artifact:
    head = f"{plan.header}\n#\n# Butane/Ignition for immutable node OSes (docs/immutable-os.md); made by: {how}\n"
    return Artifact(path, guard(Block(head), "yaml", path) + yaml_document(data), 0o644)


def _json(data: dict[str, Any]) -> str:
    return json_document(data)
