"""Tools.nvidia_mig_parted_url read as Ignition reads it (``document.goneturl``).

The schema's pattern took URLs that Ignition's ``validateURL`` (Go's ``net/url.Parse``) refuses, so
butane failed on OUT/butane/fcos.bu while migbake exited 0. Every URL below matches the schema's pattern;
the real butane (``--strict``, Ignition's own validation inside) judges the fcos.bu rendered past the rules,
and ``mig-parted-url-invalid`` must refuse exactly what butane refuses (plus the two that only fail at
first boot's fetch: no host, a port above 65535).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from realtools import run
from support import IMAGES, REPO, shared_file

from migbake.document.goneturl import problem
from migbake.document.patterns import matches
from migbake.profile.nodeprofile import build_profile
from migbake.render.tree import render
from migbake.rules.validate import check_bytes

SEED = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
SHA = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
PATTERN = json.loads((REPO / "schemas/node-profile.schema.json").read_text())[
    "properties"]["tools"]["properties"]["nvidia_mig_parted_url"]["pattern"]
BUTANE = REPO.parent / "shared" / "tools" / "butane" / "butane"

REFUSED = ["https://h.example/%zz", "https://h.example/a%4", "https://h.example/a%", "https://a%41.example.com/x",
           "https://h.example:abc/x", "https://h.example:8a/", "https://u@[::1/x", "https://u@[::1]x/",
           "https://a[b@h.example/", "https://u%zz@h.example/", "https://h.example/#%zz", "https://h.example:1:x/",
           "https://u:p]@h.example/", "https://h%2e.example/", "https://h.example/%G0"]
FETCH_FAILS = ["https://u@/nvidia-mig-parted", "https://u@:443/x", "https://h.example:99999/x"]
TAKEN = ["https://h.example/nvidia-mig-parted", "https://h.example:8443/a/b?v=0.15.0&arch=amd64",
         "https://h.example/?%zz", "https://h.example:/x", "https://u@[fe80::1%25en0]:8080/x",
         "https://h.example/%E2%82%AC", "https://h%C3%A9.example/x", "http://10.0.0.1/x#frag",
         "https://u:p@h.example/x", "https://h.example:80:90/x", "https://h.example/a;b=c/(x)*!$~"]


def _data(url: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(SEED))
    data["tools"] = {"nvidia_mig_parted": "/opt/bin/nvidia-mig-parted", "nvidia_mig_parted_url": url,
                     "nvidia_mig_parted_sha256": SHA}
    return data


def _rules(url: str) -> list[str]:
    checked = check_bytes(json.dumps(_data(url)).encode(), "p.yaml")
    return [p.rule for p in checked.problems if p.severity == "error"]


@pytest.mark.parametrize("url", REFUSED + FETCH_FAILS + TAKEN)
def test_every_url_here_passes_the_schemas_pattern(url: str) -> None:
    assert matches(PATTERN, url)


@pytest.mark.parametrize("url", REFUSED + FETCH_FAILS)
def test_a_url_ignition_refuses_or_cannot_fetch_is_refused_located(url: str) -> None:
    checked = check_bytes(yaml.safe_dump(_data(url)).encode(), "p.yaml")
    [bad] = [p for p in checked.problems if p.severity == "error"]
    assert (bad.pointer, bad.rule) == ("/tools/nvidia_mig_parted_url", "mig-parted-url-invalid")
    assert bad.line > 1 and repr(url) in bad.message


@pytest.mark.parametrize("url", TAKEN)
def test_a_url_ignition_takes_is_accepted(url: str) -> None:
    assert _rules(url) == [] and problem(url) is None


def _butane_verdict(url: str, tmp_path: Path) -> tuple[int, str]:
    artifacts = {a.path: a for a in render(build_profile(_data(url)))}
    bu = tmp_path / "fcos.bu"
    bu.write_text(str(artifacts["butane/fcos.bu"].content))
    ran = run([str(shared_file(BUTANE)), "--strict", str(bu)])
    return ran.rc, ran.text


@pytest.mark.realtool
@pytest.mark.parametrize("url", REFUSED + FETCH_FAILS + TAKEN)
def test_butane_agrees(url: str, tmp_path: Path) -> None:
    rc, text = _butane_verdict(url, tmp_path)
    if url in REFUSED:
        assert rc != 0 and ("source" in text.lower() or "url" in text.lower()), text
    else:  # butane takes it; a FETCH_FAILS one fails only when Ignition fetches it at first boot
        assert rc == 0, text
