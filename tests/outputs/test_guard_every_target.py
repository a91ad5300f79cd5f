"""Every output target refuses a value the render guard refuses, and nothing is written.

The schema and the rules refuse a control character in any profile value; here one is smuggled into the
render plan after validation, past them. Whichever way a target prints it (a template, whose finalizer is the
guard, or text the target builds in Python and hands to the guard itself), rendering stops with a RenderError
before ``write_tree`` runs. Only the target under test sees the smuggled value: the targets it reads render the
plan as it was, so each target is shown to refuse it on its own.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest
from support import CASES_ROOT, IMAGES

from migbake.problems import RenderError
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import MimePart, RenderPlan, UserDataForms, make_plan
from migbake.render.targets.context import shared_variables
from migbake.render.tree import TARGETS, Target, render_plan
from migbake.render.write import write_tree
from migbake.rules.validate import check_file

PROFILES = [*(i / "node-profile.yaml" for i in IMAGES), *sorted(CASES_ROOT.glob("valid/*/node-profile.yaml"))]
# the user-data target applies only when generate asks for a form: both forms, with the user's own part
FORMS = UserDataForms(gzip=True, mime=MimePart(text="#!/bin/sh\necho hi\n", name="part.sh",
                                               media_type="text/x-shellscript"))
REFUSED = r"cannot be printed in|holds the control character"
ESC = "\x1b"  # a terminal escape: no language's quoting lets it through raw


@cache
def _plans() -> list[RenderPlan]:
    plans = []
    for path in PROFILES:
        checked = check_file(path)
        assert checked.profile is not None, path
        plans.append(dataclasses.replace(make_plan(checked.profile), user_data=FORMS))
    # a node whose driver is a container (the kubernetes-gate target): the first example's, its driver changed
    # after validation, as long as no valid case has one
    if not any(p.gate_enabled for p in plans):
        plans.append(make_plan(dataclasses.replace(plans[0].profile, driver="container")))
    return plans


def _plan_for(target: Target) -> RenderPlan:
    """The first example profile's plan that ``target`` applies to."""
    plan = next((p for p in _plans() if target.applies(p)), None)
    assert plan is not None, f"no example profile gets the {target.name} target"
    return plan


def _smuggled(plan: RenderPlan, target: Target) -> RenderPlan:
    """``plan`` with a control character in a value ``target`` prints: the header every file starts with, or (the
    user-data forms, which carry the cloud-init target's file and print no header of their own) the user's part's
    file name, which names the part in a MIME header."""
    if target.name == "user-data":
        assert plan.user_data.mime is not None
        part = dataclasses.replace(plan.user_data.mime, name=f"part{ESC}.sh")
        return dataclasses.replace(plan, user_data=dataclasses.replace(plan.user_data, mime=part))
    return dataclasses.replace(plan, header=plan.header.replace("Do not edit", f"Do not{ESC} edit", 1))


def _seeing(target: Target, plan: RenderPlan) -> Target:
    """``target`` rendering ``plan`` instead of the plan the tree is rendered from."""
    def render(_: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
        return target.render(plan, done, Templates(shared_variables(plan)))

    return dataclasses.replace(target, render=render)


def _generate(plan: RenderPlan, target: Target, seen: RenderPlan, out: Path) -> None:
    """Render ``plan``'s tree with ``target`` seeing ``seen``, then write it to ``out`` (as generate does)."""
    targets = tuple(_seeing(t, seen) if t is target else t for t in TARGETS)
    write_tree(render_plan(plan, targets), out)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_a_value_the_guard_refuses_stops_every_target_and_nothing_is_written(target: Target, tmp_path: Path) -> None:
    plan = _plan_for(target)
    # the same route renders and writes the plan as it was (what stops below is the smuggled value)
    _generate(plan, target, plan, tmp_path / "clean")
    assert any(p.is_file() for p in (tmp_path / "clean" / target.folders[0]).rglob("*"))

    out = tmp_path / "out"
    with pytest.raises(RenderError, match=REFUSED):
        _generate(plan, target, _smuggled(plan, target), out)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean"]  # no temporary folder either


def test_every_target_is_tried() -> None:
    """Each declared target has an example profile it applies to (a new target without one fails here)."""
    assert [t.name for t in TARGETS if not any(t.applies(p) for p in _plans())] == []
