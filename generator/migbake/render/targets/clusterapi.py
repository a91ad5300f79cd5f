"""Cluster API (``OUT/cluster-api/``): a KubeadmConfigTemplate: the bake's files, and commands that install them.

Written for ``kubelet.layout: kubeadm`` (the kubelet Cluster API's kubeadm bootstrap provider starts).
Two files, one object each, so that ``kubectl apply -f cluster-api/`` never applies two versions of one
object: ``kubeadm-config-template.yaml`` in ``bootstrap.cluster.x-k8s.io/v1beta2`` (the storage version)
and ``v1beta1/kubeadm-config-template.yaml`` (served, deprecated) for management clusters that still write
v1beta1 (kubernetes-sigs/cluster-api:bootstrap/kubeadm/config/crd/bases/
bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml@v1.14.0).

``files`` are exactly ``OUT/rootfs``: each one's bytes as ``encoding: base64`` (a ``content: |`` block
would change trailing newlines: ``bootstrap/kubeadm/pkg/cloudinit/files.go``), or ``gzip+base64`` where
base64 alone is over the CRD's ``maxLength: 10240``; ``permissions`` the mode, ``owner: root:root``.
``preKubeadmCommands`` (cloud-init runcmd, before ``kubeadm join``) are cloud-init's first-boot commands
of the render plan: daemon-reload, mask (or disable) the packaged MIG manager, enable the restore, then check
the node has the tools and units the profile needs, start the restore and, only after it succeeded, the
held units. The node labels go to kubelet through ``joinConfiguration.nodeRegistration.kubeletExtraArgs``
(v1beta1: a map; v1beta2: a list of name/value). One template (``templates/cluster-api/``) writes both versions
from the values built here.

With named layouts (``mig.layouts``) one template per name instead (both versions), the file and
``metadata.name`` suffixed with the name, whose ``node-labels`` add ``nvidia.com/mig.config=NAME`` (the Node
object's label, which the GPU Operator selects a config by). The restore cannot learn the name from that flag on
the first boot: kubeadm writes ``kubeletExtraArgs`` into ``/var/lib/kubelet/kubeadm-flags.env``
(``KUBELET_KUBEADM_ARGS``, read by kubeadm's 10-kubeadm.conf) during ``kubeadm join``, which Cluster API runs after
``preKubeadmCommands`` (that start the restore; ``bootstrap/kubeadm/internal/cloudinit/node.go``@01154007).
So where ``restore.layout.from`` names ``file``, each template also writes the name to ``/etc/migbake/layout``
(a ``files`` entry: cloud-init writes it before runcmd); without ``file`` validation warns
(``cluster-api-layout-source``).
"""

from __future__ import annotations

import base64
import re

from migbake.problems import RenderError
from migbake.render.artifact import Artifact, Rendered, gzip_bytes
from migbake.render.environment import Templates
from migbake.render.plan import LAYOUT_FILE, MIG_CONFIG_LABEL, RenderPlan, kubeadm_template_name
from migbake.render.quoting import sh_quote
from migbake.render.targets.rootfs import ROOTFS

TEMPLATE_V1BETA2 = "cluster-api/kubeadm-config-template.yaml"
TEMPLATE_V1BETA1 = "cluster-api/v1beta1/kubeadm-config-template.yaml"
VERSIONS = (("v1beta2", TEMPLATE_V1BETA2), ("v1beta1", TEMPLATE_V1BETA1))
TEMPLATE = TEMPLATE_V1BETA2 + ".j2"  # both versions' (the version's fields differ by a condition)
MAX_CONTENT = 10240  # files[].content and preKubeadmCommands[] maxLength in both versions
LABELS_FLAG = "--node-labels="
_PLAIN = re.compile(r"[A-Za-z0-9_./=:@%+-]+")  # a shell word that needs no quotes


def cluster_api(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """Both versions of the KubeadmConfigTemplate (declared to apply for a kubeadm-started kubelet)."""
    files = [file_entry(rel, a.data, a.mode) for rel, a in done.under(ROOTFS)]
    commands = [" ".join(w if _PLAIN.fullmatch(w) else sh_quote(w) for w in argv) for argv in plan.first_boot.runcmd]
    # preKubeadmCommands items: maxLength 10240 in both versions (tests/fixtures/crds). The rule cluster-api-limit
    # (rules.consumer_limits) refuses such a profile, located, before anything is rendered: this stays as a guard
    for command in commands:
        if len(command) > MAX_CONTENT:
            raise RenderError(f"/consumers: a preKubeadmCommands item of OUT/cluster-api would be {len(command)} "
                              f"characters, above the KubeadmConfigTemplate CRD's maxLength {MAX_CONTENT} (the API "
                              "server would refuse it): it names kubelet's unit and every consumer several times; "
                              "use fewer or shorter unit names")
    labels = plan.kubelet.label_flag[len(LABELS_FLAG):] if plan.kubelet.label_flag else ""
    shared = templates.with_variables({"commands": commands})
    if not plan.mig.layout_names:
        one = {"files": files, "labels": labels, "name": "migbake-" + plan.profile.name, "layout": ""}
        return [shared.file(TEMPLATE, path, 0o644, {**one, "version": version}) for version, path in VERSIONS]
    names = [object_name(plan, n) for n in plan.mig.layout_names]
    if len(set(names)) < len(names):
        raise RenderError(f"two layout names give one KubeadmConfigTemplate name ({', '.join(names)}): rename a layout")
    out = []
    for layout, name in zip(plan.mig.layout_names, names):
        layout_file = ([file_entry(LAYOUT_FILE.lstrip("/"), f"{layout}\n".encode(), 0o644)]
                       if "file" in plan.profile.restore.layout_from else [])
        named = ",".join(filter(None, [labels, f"{MIG_CONFIG_LABEL}={layout}"]))
        values: dict[str, object] = {"files": files + layout_file, "labels": named, "name": name, "layout": layout,
                                     "layout_file_entry": bool(layout_file)}
        out += [shared.file(TEMPLATE, path.replace(".yaml", f"-{layout}.yaml"), 0o644, {**values, "version": version})
                for version, path in VERSIONS]
    return out


def object_name(plan: RenderPlan, layout: str) -> str:
    """The template of layout ``layout`` (``object_name_of``)."""
    return object_name_of(plan.profile.name, layout)


def object_name_of(profile: str, layout: str) -> str:
    """``migbake-PROFILE-LAYOUT``, an object name (a layout name may hold upper case and '_', which an object name
    may not: then lower-cased, cut and suffixed with 8 hex digits of the name's sha256, as the Karpenter NodePools
    of the same names are)."""
    return kubeadm_template_name(profile, layout)


def file_entry(rel: str, data: bytes, mode: int) -> dict[str, str]:
    """One ``files`` item: the file's exact bytes (``encoding`` and ``content``), its path and mode.

    A shell script too large even gzipped is carried without its comment lines (``without_comments``): the same
    commands, as bash reads them (tests/outputs/test_cluster_api.py compares bash's own reading of both)."""
    encoding, content = "base64", base64.b64encode(data).decode("ascii")
    if len(content) > MAX_CONTENT:
        encoding = "gzip+base64"
        content = base64.b64encode(gzip_bytes(data)).decode("ascii")
    if len(content) > MAX_CONTENT and data.startswith(b"#!/usr/bin/env bash\n"):
        content = base64.b64encode(gzip_bytes(without_comments(data))).decode("ascii")
    if len(content) > MAX_CONTENT:
        raise RenderError(f"/{rel} is too large for a KubeadmConfigTemplate file even gzipped ({len(content)} "
                          f"characters of base64, at most {MAX_CONTENT})")
    return {"path": "/" + rel, "permissions": f"{mode:04o}", "encoding": encoding, "content": content}


def without_comments(script: bytes) -> bytes:
    """``script`` (bash) less its comment lines, those whose first non-blank character is ``#`` (the first line,
    its ``#!``, stays). Only for scripts migbake renders: none holds a multi-line string or a here-document whose
    lines could start with ``#`` (here-strings only), which the test that compares bash's reading of both keeps
    true."""
    lines = script.split(b"\n")
    return b"\n".join([lines[0], *(line for line in lines[1:] if not line.lstrip().startswith(b"#"))])
