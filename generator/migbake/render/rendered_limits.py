"""The consumers' limits that only the rendered files show: Karpenter's userData against EC2's 16 KB.

``karpenter-user-data-size`` (declared, worded and located in ``rules.limits``, with its sources): the
EC2NodeClass's userData carries the restore's files gzipped, so its size is known once rendered. ``generate``
asks here after rendering and before writing; each key that grows it is measured by rendering the profile again
without it (only the targets the EC2NodeClass reads), which happens only for a userData near the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from migbake.document.loader import LoadedProfile
from migbake.gpu.catalog import Catalog
from migbake.problems import MigbakeError, Problem
from migbake.profile.nodeprofile import NodeProfile, build_profile
from migbake.render.artifact import Artifact
from migbake.render.plan import make_plan
from migbake.render.targets.karpenter import EC2NODECLASS, karpenter_sends
from migbake.render.tree import TARGETS, render_plan
from migbake.rules.consumer_limits import USER_DATA_KEYS, karpenter_user_data_problem, without_key

_KARPENTER_TARGETS = tuple(t for t in TARGETS if t.name in ("rootfs", "karpenter"))


def user_data_bytes(artifacts: Sequence[Artifact]) -> int | None:
    """What Karpenter would send EC2 for the EC2NodeClass among ``artifacts`` (less its NodeConfig), None: none."""
    ec2 = next((a for a in artifacts if a.path == EC2NODECLASS), None)
    if ec2 is None:
        return None
    return karpenter_sends(str(yaml.safe_load(ec2.data)["spec"]["userData"]))


def _karpenter_bytes(profile: NodeProfile) -> int | None:
    return user_data_bytes(render_plan(make_plan(profile), _KARPENTER_TARGETS))


def render_problems(loaded: LoadedProfile, catalog: Catalog, artifacts: Sequence[Artifact]) -> list[Problem]:
    """The problems of ``loaded`` (valid, its files ``artifacts``) that only the rendered files show."""
    size = user_data_bytes(artifacts)
    if size is None or karpenter_user_data_problem(loaded, size, {}) is None:
        return []
    data: dict[str, Any] = loaded.data  # type: ignore[assignment]  # valid: a mapping
    grown: dict[str, int] = {}
    for path in USER_DATA_KEYS:
        less = without_key(data, path)
        if less is None:
            continue
        try:
            smaller = _karpenter_bytes(build_profile(less, loaded.text, catalog))
        except MigbakeError:
            continue  # the profile is not whole without it: not measured
        if smaller is not None:
            grown["/" + "/".join(path)] = size - smaller
    problem = karpenter_user_data_problem(loaded, size, grown)
    return [problem] if problem is not None else []
