"""The names of the Kubernetes objects migbake writes per layout name: Karpenter NodePools, Cluster API
KubeadmConfigTemplates. An object name is a DNS subdomain (RFC 1123), which the API server checks
(kubernetes/kubernetes@v1.35.0:staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
``IsDNS1123Subdomain``: labels of ``[a-z0-9]([-a-z0-9]*[a-z0-9])?`` joined by single dots, at most 253); a NodePool's
name is also the value of the label ``karpenter.sh/nodepool`` on its nodes: at most 63 characters."""

from __future__ import annotations

import hashlib
import re

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
MAX_NAME = 63  # a label value's limit: the NodePool's name is one (karpenter.sh/nodepool)


def is_object_name(name: str) -> bool:
    """Whether ``name`` is a DNS subdomain of at most 63 characters (a NodePool's name and its label value)."""
    return len(name) <= MAX_NAME and SUBDOMAIN.fullmatch(name) is not None


def nodepool_name(profile: str, layout: str) -> str:
    """``PROFILE-LAYOUT`` when that is an object name of at most 63 characters; else its lower-cased letters,
    digits, '-' and '.' (a dot beside another dot or a '-' made '-'), cut, then 8 hex digits of the layout name's
    sha256 (a layout name is a label value: it may hold upper case, '_' and '..', which an object name may not)."""
    want = f"{profile}-{layout}"
    if is_object_name(want):
        return want
    stem = re.sub(r"[^a-z0-9.-]+", "-", want.lower())
    stem = re.sub(r"[.-]{2,}", lambda m: "-" if "." in m.group() else m.group(), stem)
    stem = stem[:54].strip("-.")
    return f"{stem}-{hashlib.sha256(layout.encode('utf-8')).hexdigest()[:8]}"


def kubeadm_template_name(profile: str, layout: str) -> str:
    """``migbake-PROFILE-LAYOUT``, the KubeadmConfigTemplate of one layout name, made as a NodePool's name is."""
    return nodepool_name(f"migbake-{profile}", layout)


def collisions(names: dict[str, str]) -> list[tuple[str, str, str]]:
    """Of layout name -> object name, each layout whose object name an earlier layout already has:
    (layout, the earlier layout, the object name)."""
    seen: dict[str, str] = {}
    found = []
    for layout, name in names.items():
        if name in seen:
            found.append((layout, seen[name], name))
        else:
            seen[name] = layout
    return found
