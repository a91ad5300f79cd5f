"""OUT's marker (``.migbake-output``) is output, not input: no command reads a file it names, and an edited marker
never makes ``--check`` call OUT up to date."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO, cli

from migbake.render.tree import OUTPUT_NAMES
from migbake.render.write import OUTPUT_MARKER

PROFILE = REPO / "images/h200-inference/node-profile.yaml"
SECRET = "migbake-marker-secret-4c1f"


def _generated(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "images/one/generated"
    out.parent.mkdir(parents=True)
    shutil.copy(PROFILE, out.parent / "node-profile.yaml")
    code, _, err = cli("generate", str(out.parent / "node-profile.yaml"), "-o", str(out), *extra)
    assert code == 0, err
    return out


def _point_marker_at(out: Path, target: str) -> None:
    marker = out / OUTPUT_MARKER
    text = marker.read_text()
    lines = [f"user-data-mime: {target}" if ln.startswith("user-data-mime: ") else ln for ln in text.splitlines()]
    marker.write_text("\n".join(lines) + "\n")


def _leaks(text: str) -> bool:
    encoded = base64.b64encode(SECRET.encode()).decode()
    return SECRET in text or any(encoded[i:i + 12] in text for i in range(0, 4))


@pytest.mark.parametrize("target", ["/proc/self/environ", "../../../secret.sh", "{secret}"],
                         ids=["proc-environ", "outside-out", "absolute"])
def test_a_file_the_marker_names_is_never_read(tmp_path: Path, target: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.sh"
    secret.write_text(f"#!/bin/sh\necho {SECRET}\n")
    monkeypatch.setenv("MIGBAKE_TEST_SECRET", SECRET)  # what /proc/self/environ would show
    out = _generated(tmp_path)
    _point_marker_at(out, target.format(secret=secret))
    profile = out.parent / "node-profile.yaml"
    bake = ("bake", str(profile), "-o", str(out), "--only", "amazon-ebs.golden", "--dry-run",
            "--var", "kubernetes_version=1.35")
    for args in (("generate", str(profile), "-o", str(out), "--check"), ("images", str(tmp_path / "images"), "--check"),
                 ("images", str(tmp_path / "images")), bake):
        code, stdout, err = cli(*args)
        assert code in (1, 2) and "never reads the file its marker names" in err, (args, stdout, err)
        assert not _leaks(stdout + err), args
    assert not any(_leaks(f.read_text(errors="replace")) for f in out.rglob("*") if f.is_file())


def test_the_part_comes_from_the_command_line(tmp_path: Path) -> None:
    part = tmp_path / "mine.sh"
    part.write_text("#!/bin/sh\necho mine\n")
    out = _generated(tmp_path, "--user-data-mime", str(part))
    profile = out.parent / "node-profile.yaml"
    assert cli("generate", str(profile), "-o", str(out), "--check", "--user-data-mime", str(part))[0] == 0
    other = tmp_path / "other.sh"
    other.write_text(f"#!/bin/sh\necho {SECRET}\n")
    _point_marker_at(out, str(other))  # the marker's path is not what is compared: the command line's is
    code, stdout, _ = cli("generate", str(profile), "-o", str(out), "--check", "--user-data-mime", str(part))
    assert code == 1 and SECRET not in stdout and OUTPUT_MARKER in stdout


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters=",\n\r"), min_size=1, max_size=12)
                .filter(lambda s: s.strip() == s and s not in OUTPUT_NAMES),
                min_size=1, max_size=3))
def test_check_never_calls_an_out_up_to_date_whose_marker_names_an_unknown_output(
        tmp_path_factory: pytest.TempPathFactory, names: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("m")
    out = tmp / "out"
    assert cli("generate", str(PROFILE), "-o", str(out), "--outputs", "cloud-init")[0] == 0
    shutil.rmtree(out / "cloud-init")
    marker = out / OUTPUT_MARKER
    head, _, _ = marker.read_text().partition("files:\n")
    text = "".join(f"outputs: {','.join(names)} (--outputs)\n" if ln.startswith("outputs: ") else ln + "\n"
                   for ln in head.splitlines()) + "files:\n"
    marker.write_text(text)
    code, stdout, err = cli("generate", str(PROFILE), "-o", str(out), "--check")
    assert code == 1 and "up to date" not in stdout, stdout + err
