"""Preflight of a driver container's node: the GPU plugins' gate installed as migbake renders it, the watcher's labels.

Is the gate installed in the cluster as migbake renders it for the profile, and what do the node's labels say of
the watcher's last restore?

The gate is ``OUT/kubernetes/gate/``: a MutatingAdmissionPolicy and its binding (Kubernetes 1.36 or later), or the
same as a Kyverno ClusterPolicy. ``--gate-policies FILE`` is what kubectl lists of them; each object migbake
renders must be there with the fields migbake gives it (the API server and Kyverno add defaults beside them, which
are not compared). A difference is said in the profile's words: which plugins the installed policy holds, which
image its init container runs. The watcher labels its node ``migbake.io/mig-state=ready|failed`` and
``migbake.io/mig-ready=<config hash>`` (templates/rootfs/etc/nvidia-mig/driver-watch.sh.j2).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from migbake.kubernetes.gate import PLUGINS, cel_selects, gate_plugins, kyverno_rules, wait_image
from migbake.kubernetes.labels import NodeJsonError, Verdict, kind_word, read_document
from migbake.profile.nodeprofile import NodeProfile

GATE_POLICIES = "kubectl get mutatingadmissionpolicies,mutatingadmissionpolicybindings -o json"
KYVERNO_POLICIES = "kubectl get clusterpolicies.kyverno.io -o json"
MAP_FILE = "OUT/kubernetes/gate/mutating-admission-policy.yaml"
KYVERNO_FILE = "OUT/kubernetes/gate/kyverno-clusterpolicy.yaml"
NOT_GIVEN = (f"not checked: give --gate-policies FILE (the output of `{GATE_POLICIES}`, or with Kyverno "
             f"`{KYVERNO_POLICIES}`)")
MIG_STATE_LABEL = "migbake.io/mig-state"
MIG_READY_LABEL = "migbake.io/mig-ready"
MAP_GROUP = "admissionregistration.k8s.io/"
KYVERNO_GROUP = "kyverno.io/"


@dataclass(frozen=True)
class RenderedGate:
    """The gate's objects as migbake renders them for the profile (parsed from OUT/kubernetes/gate/)."""

    policy: dict[str, Any]
    binding: dict[str, Any]
    kyverno: dict[str, Any]


def _pointer(*parts: object) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def read_gate_policies(path: Path) -> list[dict[str, Any]]:
    """The objects of ``--gate-policies FILE``: a List (kubectl get ... -o json or -o yaml) or one object."""
    doc = read_document(path, GATE_POLICIES)
    if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
        items, at = doc["items"], "/items"
        if not isinstance(items, list):
            raise NodeJsonError(f"{path}: /items: {kind_word(items)}, not a list")
    elif isinstance(doc, dict) and "kind" in doc:
        items, at = [doc], ""
    else:
        raise NodeJsonError(f"{path}: not a List of Kubernetes objects (the output of `{GATE_POLICIES}`, or "
                            f"`{KYVERNO_POLICIES}`)")
    for i, item in enumerate(items):
        where = f"{at}/{i}" if at else ""
        if not isinstance(item, dict):
            raise NodeJsonError(f"{path}: {where or '/'}: {kind_word(item)}, not an object")
        for key in ("kind", "apiVersion"):
            if not isinstance(item.get(key), str):
                raise NodeJsonError(f"{path}: {where}/{key}: {kind_word(item.get(key))}, not a string")
        meta = item.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise NodeJsonError(f"{path}: {where}/metadata/name: not a string (each object has a name)")
    return items


def _first_difference(live: Any, want: Any, at: tuple[object, ...] = ()) -> tuple[object, ...] | None:
    """Where ``live`` lacks a value of ``want`` (every key ``want`` gives, lists item by item; keys the server
    added are not compared); None when it has them all."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return at
        for key, value in want.items():
            if key not in live:
                return (*at, key)
            found = _first_difference(live[key], value, (*at, key))
            if found is not None:
                return found
        return None
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return at
        for i, (a, b) in enumerate(zip(live, want, strict=True)):
            found = _first_difference(a, b, (*at, i))
            if found is not None:
                return found
        return None
    return None if type(live) is type(want) and live == want else at


def _get(doc: Any, at: tuple[object, ...]) -> Any:
    for key in at:
        if isinstance(doc, dict) and key in doc:
            doc = doc[key]
            continue
        if isinstance(doc, list) and isinstance(key, int) and key < len(doc):
            doc = doc[key]
            continue
        return None
    return doc


def _short(value: Any) -> str:
    text = "absent" if value is None else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


@cache
def _subsets() -> tuple[tuple[str, ...], ...]:
    names = list(PLUGINS)
    return tuple(c for n in range(1, len(names) + 1) for c in itertools.combinations(names, n))


def _list_at(doc: Any, at: tuple[object, ...]) -> list[Any]:
    value = _get(doc, at)
    return value if isinstance(value, list) else []


def _map_plugins(expression: Any) -> tuple[str, ...] | None:
    """The plugins whose pods the policy's ``gpu-plugin`` condition selects, when migbake renders it so."""
    return next((s for s in _subsets() if cel_selects(s) == expression), None)


@cache
def _kyverno_selections() -> tuple[tuple[tuple[str, ...], list[Any]], ...]:
    """Each plugins list with the names, selectors and preconditions of the Kyverno rules migbake renders for it."""
    return tuple((s, [(r.name, r.selectors, r.preconditions) for r in kyverno_rules(s, "", "")]) for s in _subsets())


def _kyverno_plugins(rules: Any) -> tuple[str, ...] | None:
    live = [(_get(r, ("name",)), [_get(a, ("resources", "selector")) for a in _list_at(r, ("match", "any"))],
             _get(r, ("preconditions", "all"))) for r in (rules if isinstance(rules, list) else [])]
    return next((s for s, selection in _kyverno_selections() if selection == live), None)


# an image in a CEL object (image: "..."), or in a YAML patch (image: NAME, quoted or not)
_IMAGE = re.compile(r"""\bimage:[ \t]*("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,}\]]+)""")


def _unquote(token: str) -> str:
    if token.startswith('"'):
        try:
            value = json.loads(token)
        except ValueError:
            return token
        return value if isinstance(value, str) else token
    return token[1:-1] if token.startswith("'") else token


def _images(value: Any) -> set[str]:
    """The init container images a mutation names (a JSON patch expression, a Kyverno patch or merge); the strings
    are searched, never parsed (a hostile one could be a YAML bomb)."""
    if isinstance(value, str):
        return {_unquote(m) for m in _IMAGE.findall(value)}
    if isinstance(value, dict):
        own = {value["image"]} if isinstance(value.get("image"), str) else set()
        return own.union(*(_images(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_images(v) for v in value))
    return set()


def _explain(what: str, live: dict[str, Any], want: dict[str, Any], at: tuple[object, ...],
             plugins: tuple[str, ...] | None, profile: NodeProfile, *, binding: bool = False) -> str:
    """One difference of an installed object, in the profile's words (``plugins``: those whose pods it selects, None
    when it selects them as no gate.plugins does; a binding selects none)."""
    ours = gate_plugins(profile)
    if plugins is not None and plugins != ours:
        return (f"{what} holds the pods of {', '.join(plugins)}; this profile's gate holds {', '.join(ours)} "
                "(gate.plugins)")
    if plugins is None and not binding:
        return (f"{what} selects pods as no gate.plugins of this migbake does (edited, or another migbake "
                f"version's); this profile's gate holds {', '.join(ours)}")
    if "mutations" in at or "mutate" in at:
        images = _images(_get(live, ("spec",)))
        if images and images != {wait_image(profile)}:
            return (f"{what}'s init container runs {', '.join(sorted(images))}; this profile's is "
                    f"{wait_image(profile)} (gate.wait_image)")
        return f"{what}'s init container differs from this migbake's (its script or volumes: another version's?)"
    return f"{what}: {_pointer(*at)} is {_short(_get(live, at))}, migbake renders {_short(_get(want, at))}"


def _map_problems(maps: Mapping[str, dict[str, Any]], bindings: Mapping[str, dict[str, Any]],
                  want: RenderedGate, profile: NodeProfile) -> list[str]:
    name = want.policy["metadata"]["name"]
    out = []
    policy = maps.get(name)
    if policy is None:
        out.append(f"no MutatingAdmissionPolicy {name}")
    else:
        at = _first_difference(policy, want.policy)
        if at is not None:
            plugins = _map_plugins(next((c.get("expression") for c in _list_at(policy, ("spec", "matchConditions"))
                                         if isinstance(c, dict) and c.get("name") == "gpu-plugin"), None))
            out.append(_explain(f"the MutatingAdmissionPolicy {name}", policy, want.policy, at, plugins, profile))
    binding = bindings.get(name)
    if binding is None:
        out.append(f"no MutatingAdmissionPolicyBinding {name} (without it the policy holds no pod)")
    else:
        at = _first_difference(binding, want.binding)
        if at is not None:
            out.append(_explain(f"the MutatingAdmissionPolicyBinding {name}", binding, want.binding, at, None,
                                profile, binding=True))
    return out


def _kyverno_problems(policy: dict[str, Any] | None, want: RenderedGate, profile: NodeProfile) -> list[str]:
    name = want.kyverno["metadata"]["name"]
    if policy is None:
        return [f"no Kyverno ClusterPolicy {name}"]
    at = _first_difference(policy, want.kyverno)
    if at is None:
        return []
    plugins = _kyverno_plugins(_get(policy, ("spec", "rules")))
    return [_explain(f"the Kyverno ClusterPolicy {name}", policy, want.kyverno, at, plugins, profile)]


def gate_check(profile: NodeProfile, live: list[dict[str, Any]], want: RenderedGate, file: str) -> Verdict:
    """The ``gate`` row: PASS when the MutatingAdmissionPolicy and its binding, or the Kyverno ClusterPolicy, are
    installed as migbake renders them for ``profile``; FAIL saying what is missing or different, and what to apply."""
    def named(kind: str, group: str) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in live if o["kind"] == kind and o["apiVersion"].startswith(group)}

    maps, bindings = named("MutatingAdmissionPolicy", MAP_GROUP), named("MutatingAdmissionPolicyBinding", MAP_GROUP)
    kyvernos = named("ClusterPolicy", KYVERNO_GROUP)
    name = want.policy["metadata"]["name"]
    plugins = ", ".join(gate_plugins(profile))
    map_given, kyverno_given = name in maps or name in bindings, name in kyvernos
    map_problems = _map_problems(maps, bindings, want, profile)
    kyverno_problems = _kyverno_problems(kyvernos.get(name), want, profile)
    if not map_problems:
        also = "; the Kyverno ClusterPolicy too (one of the two is enough)" if kyverno_given else ""
        return ("gate", "PASS", f"the MutatingAdmissionPolicy and binding {name} are installed as migbake renders them "
                f"for this profile (they hold the pods of {plugins}){also}")
    if not kyverno_problems:
        return ("gate", "PASS", f"the Kyverno ClusterPolicy {name} is installed as migbake renders it for this "
                f"profile (it holds the pods of {plugins})")
    apply_map = f"kubectl apply -f {MAP_FILE}"
    apply_kyverno = f"kubectl apply -f {KYVERNO_FILE}"
    if map_given and not kyverno_given:
        return ("gate", "FAIL", f"{'; '.join(map_problems)} ({file}): {apply_map}")
    if kyverno_given and not map_given:
        return ("gate", "FAIL", f"{'; '.join(kyverno_problems)} ({file}): {apply_kyverno}")
    if map_given:
        return ("gate", "FAIL", f"{'; '.join(map_problems + kyverno_problems)} ({file}): {apply_map} "
                f"(or {apply_kyverno}; one of the two)")
    operator = any(o["kind"] == "ClusterPolicy" and o["apiVersion"].startswith("nvidia.com/") for o in live)
    hint = (f" (it holds the GPU Operator's ClusterPolicy, not Kyverno's: `{KYVERNO_POLICIES}` lists "
            "Kyverno's)") if operator else ""
    return ("gate", "FAIL", f"the gate is not installed: {file} holds neither the MutatingAdmissionPolicy and "
            f"binding {name} nor the Kyverno ClusterPolicy {name}{hint}, so the GPU plugins' pods ({plugins}) start "
            f"before the layout is restored: {apply_map} (Kubernetes 1.36 or later), or with Kyverno "
            f"{apply_kyverno}")


def mig_ready_check(profile: NodeProfile, labels: Mapping[str, str]) -> Verdict:
    """The ``mig-ready`` row: what the watcher's labels on the node say of its last restore."""
    state, ready = labels.get(MIG_STATE_LABEL), labels.get(MIG_READY_LABEL)
    unit = profile.restore.unit
    if state == "ready" and ready is not None:
        return ("mig-ready", "PASS", f"{MIG_STATE_LABEL}=ready, {MIG_READY_LABEL}={ready}: the watcher restored "
                "the layout through the driver container")
    if state == "ready":
        return ("mig-ready", "WARN", f"{MIG_STATE_LABEL}=ready but no {MIG_READY_LABEL}: the driver container went "
                "away since (the watcher removes the label and /run/migbake/mig-ready with it); the GPU plugins "
                "wait until it is back and the layout is restored again")
    if state == "failed":
        return ("mig-ready", "FAIL", f"{MIG_STATE_LABEL}=failed: the watcher could not restore the layout through "
                "the driver container (its attempts are used up); /run/migbake/mig-ready is absent, so the GPU "
                "plugins' pods stay in Init (kubectl logs POD -c migbake-wait) and the node advertises no GPU. Why: "
                f"journalctl -u {unit} on the node; it tries again when the driver container restarts")
    if state is None:
        return ("mig-ready", "NOTE", f"no {MIG_STATE_LABEL} label: the watcher ({unit}) has not restored a layout "
                "on this node yet (not installed, waiting for the driver container, or no kubectl/oc on the node "
                "to label it)")
    return ("mig-ready", "WARN", f"{MIG_STATE_LABEL}={state}: not a value the watcher writes (ready, failed)")
