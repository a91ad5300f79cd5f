"""The CI examples a user copies work: docs/examples/github-actions.yml and gitlab-ci.yml pass the workflow
schemas that check-jsonschema vendors (GitHub's from SchemaStore, GitLab's own), and every step that runs migbake
is executed, as written, on a copy of images/; the pre-commit snippet in docs/validation.md names the hooks of
.pre-commit-hooks.yaml and a ``rev`` a user can resolve."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support import REPO, migbake_shell

EXAMPLES = REPO / "docs/examples"
GITHUB = EXAMPLES / "github-actions.yml"
GITLAB = EXAMPLES / "gitlab-ci.yml"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "generator"), "NO_COLOR": "1"}


def vendored_schema(name: str) -> dict[str, Any]:
    """A schema check-jsonschema vendors (``check_jsonschema/builtin_schemas/vendor/NAME.json``)."""
    from importlib import resources

    text = (resources.files("check_jsonschema") / "builtin_schemas" / "vendor" / f"{name}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(document: object, name: str) -> list[str]:
    schema = vendored_schema(name)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def load(path: Path) -> Any:
    """The file as GitHub and GitLab read it: YAML 1.2 (``on:`` is a key, not YAML 1.1's True), with ruamel.yaml,
    as check-jsonschema reads it."""
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("path", "schema"), [(GITHUB, "github-workflows"), (GITLAB, "gitlab-ci")],
                         ids=["github", "gitlab"])
def test_the_example_passes_its_ci_schema(path: Path, schema: str) -> None:
    assert schema_errors(load(path), schema) == []


@pytest.mark.parametrize(("path", "schema", "break_it"), [
    (GITHUB, "github-workflows", lambda d: d["jobs"]["validate"].pop("runs-on")),
    (GITHUB, "github-workflows", lambda d: d["jobs"]["validate"]["steps"][0].update({"run": "x"})),  # uses + run
    (GITLAB, "gitlab-ci", lambda d: d["migbake"]["artifacts"].update({"when": "sometimes"})),
    (GITLAB, "gitlab-ci", lambda d: d["migbake"].update({"scripts": d["migbake"].pop("script")})),
], ids=["github-no-runs-on", "github-uses-and-run", "gitlab-bad-when", "gitlab-scripts"])
def test_the_schema_rejects_a_broken_example(path: Path, schema: str, break_it: Any) -> None:
    document = load(path)
    break_it(document)
    assert schema_errors(document, schema) != []


def github_scripts(document: dict[str, Any]) -> list[str]:
    """The ``run:`` scripts of every job (GitHub runs each with ``bash -e``)."""
    return [step["run"] for job in document["jobs"].values() for step in job["steps"] if "run" in step]


def gitlab_scripts(document: dict[str, Any]) -> list[str]:
    """The ``script:`` lines of every job (the runner stops at the first that fails)."""
    return [line for key, job in document.items() if isinstance(job, dict) and "script" in job
            for line in job["script"]]


def steps_that_run_migbake(scripts: list[str]) -> list[str]:
    """The scripts that run migbake; installing it is pip's business (this checkout's migbake stands in)."""
    return [s for s in scripts if re.search(r"(^|\s)migbake ", s) and "pip install" not in s]


def run_step(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", migbake_shell(script)], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.parametrize(("path", "scripts", "report"), [(GITHUB, github_scripts, "migbake.sarif"),
                                                         (GITLAB, gitlab_scripts, "migbake-junit.xml")],
                         ids=["github", "gitlab"])
def test_every_step_that_runs_migbake_works_as_written(path: Path, scripts: Any, report: str,
                                                       tmp_path: Path) -> None:
    steps = steps_that_run_migbake(scripts(load(path)))
    assert len(steps) == 2, steps  # validate with a report, then the drift check
    assert any("generate" in s and "--check" in s for s in steps)
    shutil.copytree(REPO / "images", tmp_path / "images")
    for step in steps:
        ran = run_step(step, tmp_path)
        assert ran.returncode == 0, (step, ran.stdout[-2000:], ran.stderr)
    text = (tmp_path / report).read_text(encoding="utf-8")
    if report.endswith(".sarif"):
        assert json.loads(text)["version"] == "2.1.0"
    else:
        assert text.startswith("<?xml") and "<testsuite" in text
    # the same steps on a stale tree and a misspelt option fail
    stale = next((tmp_path / "images").glob("*/generated/rootfs/etc/nvidia-mig/config.yaml"))
    stale.write_text(stale.read_text() + "# edited by hand\n")
    assert run_step(steps[1], tmp_path).returncode == 1
    ran = run_step(steps[0].replace("--format", "--formt"), tmp_path)
    assert ran.returncode == 2 and "No such option" in ran.stderr and "--formt" in ran.stderr, ran


def test_the_github_example_uploads_the_sarif_it_writes() -> None:
    document = load(GITHUB)
    steps = document["jobs"]["validate"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    validate = next(s for s in steps if "--format sarif" in s.get("run", ""))
    assert validate["run"].endswith(f"> {upload['with']['sarif_file']}")
    assert steps.index(validate) < steps.index(upload) and "!cancelled()" in upload["if"]  # also when invalid
    assert document["jobs"]["validate"]["permissions"]["security-events"] == "write"
    assert {"push", "pull_request"} <= set(document["on"])


def uses_lines(text: str) -> list[tuple[str, str, str]]:
    """Every ``uses:`` of a workflow as (action, ref, the comment after it)."""
    return re.findall(r"^\s*(?:-\s+)?uses:\s*([^@\s]+)@(\S+)[ \t]*(?:#[ \t]*(.*))?$", text, re.M)


def test_every_github_action_is_pinned_to_a_commit_with_its_tag_beside_it() -> None:
    text = GITHUB.read_text(encoding="utf-8")
    steps = [s for job in load(GITHUB)["jobs"].values() for s in job["steps"] if "uses" in s]
    found = uses_lines(text)
    assert len(found) == len(steps) > 0, found  # every uses: is on a line of its own
    for action, ref, comment in found:
        # a tag or a branch can be moved to other code; a full commit sha cannot
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{action}@{ref}: pin the full commit sha"
        assert re.fullmatch(r"v\d+\.\d+\.\d+", comment.strip()), f"{action}@{ref}: name its tag in a comment"


# --- pre-commit ------------------------------------------------------------------------------------

def docs_snippet() -> tuple[str, dict[str, Any]]:
    """docs/validation.md's pre-commit paragraph and its .pre-commit-config.yaml snippet, parsed."""
    text = (REPO / "docs/validation.md").read_text(encoding="utf-8")
    part = text[text.index("- pre-commit:"):]
    part = part[:part.index("\n- ", 1)]
    block = re.search(r"```yaml\n(.*?)```", part, re.S)
    assert block is not None
    snippet: dict[str, Any] = yaml.safe_load(re.sub(r"^  ", "", block.group(1), flags=re.M))
    return part, snippet


def published_tags() -> list[str]:
    ran = subprocess.run(["git", "-C", str(REPO), "tag", "-l"], capture_output=True, text=True, check=False)
    return ran.stdout.split() if ran.returncode == 0 else []


def test_the_pre_commit_snippet_names_the_hooks_and_their_entries() -> None:
    part, snippet = docs_snippet()
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    (repo,) = snippet["repos"]
    assert [h["id"] for h in repo["hooks"]] == [h["id"] for h in hooks]
    for hook in hooks:
        flat = " ".join(part.split())
        assert f"`{hook['id']}`" in flat and f"`{hook['entry']}`" in flat, hook


def test_the_pre_commit_rev_is_one_a_user_can_resolve() -> None:
    part, snippet = docs_snippet()
    version = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    released = re.findall(r"^## (\d+\.\d+\.\d+)$", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert version is not None and released and released[0] == version.group(1)  # the newest release is pyproject's
    rev = str(snippet["repos"][0]["rev"])
    if f"v{version.group(1)}" in published_tags():
        assert rev == f"v{version.group(1)}"
    else:  # no tag to resolve: the docs say to pin a commit, and show where a tag will go once there is one
        assert rev == "COMMIT-SHA" or re.fullmatch(r"[0-9a-f]{40}", rev), rev
        assert "pin the full sha of the commit" in part and f"v{version.group(1)}" in part
    for example in (GITHUB, GITLAB):
        assert "@COMMIT-SHA" in example.read_text(encoding="utf-8")
