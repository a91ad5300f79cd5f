"""The Talos machine-config patches (``OUT/talos/``): one per MIG config name, each a static pod that restores it.

Talos starts kubelet once the container runtime is up and on nothing else (siderolabs/talos@v1.13.9:
internal/app/machined/pkg/system/services/kubelet.go, ``DependsOn``), so the restore cannot come before kubelet:
it is a static pod (``machine.pods``: "run by the kubelet directly bypassing the kube-apiserver", config.schema.json
of v1.13.9), and the GPU plugins wait for its ready file through OUT/kubernetes/gate/.

- The driver is a host driver from Talos's system extensions; its libraries live under /usr/local beside a glibc of
  their own (siderolabs/extensions@v1.14.0-rc.1:misc/glibc/pkg.yaml, ``--prefix=/usr/local``). The pod runs with
  ``runtimeClassName: nvidia``, the handler the nvidia-container-toolkit extension registers with containerd
  (nvidia-gpu/nvidia-container-toolkit/nvidia-container-runtime/10-nvidia-container-runtime.part and its
  README's RuntimeClass), which brings the driver's libraries and devices into the container, rather than
  bind-mounting /usr/local, whose glibc would meet the image's.
- The image is NVIDIA's k8s-mig-manager: busybox sh at /bin/sh, /usr/bin/nvidia-mig-parted, and the environment
  that asks the runtime for every GPU and MIG's config capability (NVIDIA/mig-parted@v0.15.0:
  deployments/container/Dockerfile: NVIDIA_VISIBLE_DEVICES=all, NVIDIA_MIG_CONFIG_DEVICES=all,
  NVIDIA_DRIVER_CAPABILITIES=utility), set again here so that another image works the same.
- Files: ``machine.files`` creates files only under /var ("create operation not allowed outside of /var":
  internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_sequencer_tasks.go, ``WriteUserFiles``), so the config
  and the marker the gate looks for live in /var/lib/migbake. Talos's kubelet runs in a container of its own
  and sees only the host folders it mounts (services/kubelet.go), so ``machine.kubelet.extraMounts`` shows it
  /var/lib/migbake and /run/migbake, whose sources Talos creates before kubelet starts (same file, "Add extra
  mounts"): the hostPath volumes of the static pod and of the gated plugins then name the host's folders.
"""

from __future__ import annotations

from migbake.document.emitter import dump
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block, guard
from migbake.render.plan import RenderPlan

FOLDER = "talos"
VAR_DIR = "/var/lib/migbake"
CONFIG = f"{VAR_DIR}/config.yaml"
MANAGED = f"{VAR_DIR}/managed"  # the gate's Talos marker (kubernetes.gate.TALOS_MANAGED_FILE)
RUN_DIR = "/run/migbake"
READY = f"{RUN_DIR}/mig-ready"
ATTEMPTS = 3  # apply-and-assert rounds before the pod fails (kubelet then restarts it after its back-off)
POD = "migbake-mig-restore"
RUNTIME_CLASS = "nvidia"
# the environment the nvidia runtime reads (NVIDIA/mig-parted@v0.15.0:deployments/container/Dockerfile)
NVIDIA_ENV = (
    ("NVIDIA_VISIBLE_DEVICES", "all"),
    ("NVIDIA_MIG_CONFIG_DEVICES", "all"),
    ("NVIDIA_DRIVER_CAPABILITIES", "utility"),
)


def patch_name(plan: RenderPlan, name: str) -> str:
    """The patch's path in OUT: one file, or one per layout name."""
    return f"{FOLDER}/mig-restore-{name}.yaml" if plan.mig.layout_names else f"{FOLDER}/mig-restore.yaml"


def static_pod(image: str, script: str) -> dict[str, object]:
    """The static pod: privileged (MIG changes need the GPUs' config capability), through the nvidia runtime, run
    to completion (a failure is retried by kubelet)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": "kube-system", "labels": {"app.kubernetes.io/name": POD}},
        "spec": {
            "runtimeClassName": RUNTIME_CLASS,
            "restartPolicy": "OnFailure",
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": "restore",
                    "image": image,
                    "command": ["/bin/sh", "-c", script],
                    "env": [{"name": k, "value": v} for k, v in NVIDIA_ENV],
                    "securityContext": {"privileged": True},
                    "volumeMounts": [
                        {"name": "migbake-var", "mountPath": VAR_DIR, "readOnly": True},
                        {"name": "migbake-run", "mountPath": RUN_DIR},
                    ],
                }
            ],
            "volumes": [
                {"name": "migbake-var", "hostPath": {"path": VAR_DIR, "type": "Directory"}},
                {"name": "migbake-run", "hostPath": {"path": RUN_DIR, "type": "DirectoryOrCreate"}},
            ],
        },
    }


def machine_patch(plan: RenderPlan, name: str, script: str) -> dict[str, object]:
    """The patch's data: the files, kubelet's mounts, the node label (named layouts) and the static pod."""
    talos = plan.profile.talos
    assert talos is not None  # the target applies to Talos profiles only
    machine: dict[str, object] = {
        "files": [
            {"content": plan.mig.config_text, "permissions": 0o644, "path": CONFIG, "op": "create"},
            {"content": f"profile={plan.profile.name}\n", "permissions": 0o644, "path": MANAGED, "op": "create"},
        ],
        "kubelet": {
            "extraMounts": [
                {"destination": d, "type": "bind", "source": d, "options": ["bind", "rshared", "rw"]}
                for d in (VAR_DIR, RUN_DIR)
            ]
        },
    }
    if plan.mig.layout_names:  # the label every other output gives a node of this layout name
        machine["nodeLabels"] = {"nvidia.com/mig.config": name}
    machine["pods"] = [static_pod(talos.restore_image, script)]
    return {"machine": machine}


def talos(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """``talos/``: one machine-config patch per config name (declared to apply to profiles with ``talos:``)."""
    names = plan.mig.layout_names or (plan.profile.restore.config_name,)
    files = []
    for name in names:
        path = patch_name(plan, name)
        script = templates.text(
            f"{FOLDER}/restore.sh.j2", {"config": CONFIG, "name": name, "ready": READY, "attempts": ATTEMPTS}
        )
        body = guard(Block(dump(machine_patch(plan, name, script), literal=True)), "yaml", path)
        files.append(
            templates.file(
                f"{FOLDER}/mig-restore.yaml.j2",
                path,
                0o644,
                {"name": name, "file": path.rsplit("/", 1)[1], "managed": MANAGED, "ready": READY, "body": body},
            )
        )
    return files
