"""``migbake preflight --mig-parted-generate-config FILE``: layouts against what the node's own driver offers.

The capture is NVIDIA's ``nvidia-mig-parted generate-config`` taken on the real H200
(tests/fixtures/h200/mig-parted-generate-config.yaml); variations of it stand for other drivers (a
profile missing, a lower maximum) and for a node of two GPU types (entries with a device-filter, as
generate-config writes them there). The file is untrusted: invalid ones exit 1 with a located problem,
unreadable ones exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import H200_FIXTURES, cli

REAL = H200_FIXTURES / "mig-parted-generate-config.yaml"
PROFILE = """version: 1
name: gc
gpus:
{gpus}"""
H200 = "  - model: h200-141gb\n    mig: {{layout: {layout}}}\n"
OFFERED = ("1g.18gb (at most 7), 1g.18gb+me (at most 1), 1g.35gb (at most 4), 2g.35gb (at most 3), "
           "3g.71gb (at most 2), 4g.71gb (at most 1), 7g.141gb (at most 1)")


def run(tmp_path: Path, gpus: str, capture: Path | str, *extra: str) -> tuple[int, str, str]:
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(PROFILE.format(gpus=gpus))
    if isinstance(capture, str):
        path = tmp_path / "generate-config.yaml"
        path.write_text(capture)
        capture = path
    return cli("preflight", str(profile), "--mig-parted-generate-config", str(capture), *extra)


def check(out: str, name: str = "driver-offer") -> dict[str, str]:
    found: dict[str, str] = next(c for c in json.loads(out)["checks"] if c["check"] == name)
    return found


def without(config: str) -> str:
    """The real capture with one all-<profile> config left out (a driver that does not offer it)."""
    lines, out, skipping = REAL.read_text().splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith("  ") and not line.startswith(("   ", "  -")):
            skipping = line.strip() == f"{config}:"
        if not skipping:
            out.append(line)
    return "".join(out)


@pytest.mark.parametrize("layout", ["{1g.18gb: 7}", "{1g.35gb: 4}", "{3g.71gb: 1, 2g.35gb: 1, 1g.18gb: 2}",
                                    "{7g.141gb: 1}", "{1g.18gb+me: 1, 1g.18gb: 6}"])
def test_real_h200_driver_offers_the_layout(tmp_path: Path, layout: str) -> None:
    code, out, err = run(tmp_path, H200.format(layout=layout), REAL, "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["ready"] is True and report["source"] == "mig-parted-generate-config"
    assert check(out)["status"] == "PASS"


def test_json_form_of_the_capture_reads_the_same(tmp_path: Path) -> None:
    captured = (H200_FIXTURES / "mig-parted-generate-config.json").read_text()  # taken with 2>&1
    text = "".join(line for line in captured.splitlines(keepends=True) if not line.startswith("time="))
    assert text.startswith("{")
    assert run(tmp_path, H200.format(layout="{1g.18gb: 7}"), text)[0] == 0
    # the capture as taken, mig-parted's logrus lines and all (was a YAML syntax error)
    as_taken = H200_FIXTURES / "mig-parted-generate-config.json"
    code, out, err = run(tmp_path, H200.format(layout="{1g.18gb: 7}"), as_taken, "--json")
    assert code == 0 and check(out)["status"] == "PASS", out + err
    code, out, _ = run(tmp_path, H200.format(layout="{2g.35gb: 3}"), text.replace('"2g.35gb": 3', '"2g.35gb": 1'),
                       "--json")
    assert code == 1
    assert check(out)["detail"] == "gpus/0: more than the node's driver allows: 3x 2g.35gb (at most 1)"


def test_a_profile_the_driver_does_not_offer_is_not_ready(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, H200.format(layout="{1g.35gb: 4}"), without("all-1g.35gb"))
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("driver-offer"))
    assert row.split(None, 2)[1] == "FAIL"
    assert row.endswith("gpus/0: the node's driver does not offer 1g.35gb to h200-141gb; it offers "
                        + OFFERED.replace("1g.35gb (at most 4), ", ""))
    assert out.splitlines()[-1].startswith("NOT READY: 1 check(s) failed")


def test_a_profile_of_another_gpu_is_not_offered(tmp_path: Path) -> None:
    gpus = "  - model: h100-80gb\n    mig: {layout: {3g.40gb: 2}}\n"
    code, out, _ = run(tmp_path, gpus, REAL, "--json")
    assert code == 1
    assert check(out)["detail"] == f"gpus/0: the node's driver does not offer 3g.40gb to h100-80gb; it offers {OFFERED}"


def test_a_lower_maximum_is_not_ready(tmp_path: Path) -> None:
    lower = REAL.read_text().replace("      2g.35gb: 3\n", "      2g.35gb: 2\n")
    assert lower != REAL.read_text()
    code, out, _ = run(tmp_path, H200.format(layout="{2g.35gb: 3}"), lower, "--json")
    assert code == 1
    assert check(out)["detail"] == "gpus/0: more than the node's driver allows: 3x 2g.35gb (at most 2)"


TWO_TYPES = """version: v1
mig-configs:
  all-1g.18gb:
  - devices: all
    device-filter: ["0x233510DE"]
    mig-enabled: true
    mig-devices: {"1g.18gb": 7}
  all-1g.10gb:
  - devices: all
    device-filter: ["0x233010DE", "0x20B210DE"]
    mig-enabled: true
    mig-devices: {"1g.10gb": 7}
  all-disabled:
  - devices: all
    mig-enabled: false
    mig-devices: {}
"""


def test_device_filters_of_a_node_of_two_gpu_types(tmp_path: Path) -> None:
    both = ("  - model: h200-141gb\n    devices: [0]\n    mig: {layout: {1g.18gb: 7}}\n"
            "  - model: h100-80gb\n    devices: [1]\n    mig: {layout: {1g.10gb: 7}}\n")
    assert run(tmp_path, both, TWO_TYPES)[0] == 0
    crossed = ("  - model: h200-141gb\n    devices: [0]\n    mig: {layout: {1g.18gb: 7}}\n"
               "  - model: h100-80gb\n    devices: [1]\n    mig: {layout: {1g.20gb: 4}}\n")
    code, out, _ = run(tmp_path, crossed, TWO_TYPES, "--json")
    assert code == 1
    assert check(out)["detail"] == ("gpus/1: the node's driver does not offer 1g.20gb to h100-80gb; "
                                    "it offers 1g.10gb (at most 7)")


@pytest.mark.parametrize(("text", "where", "rule"), [
    ("version: v1\nmig-configs:\n  all-1g.18gb:\n  - devices: all\n    mig-enabled: true\n"
     "    mig-devices: {1g.18gb: '7'}\n", ":6:", "[gc-count]"),
    ("version: v1\nmig-configs:\n  all-1g.18gb:\n  - devices: all\n    mig-enabled: true\n"
     "    mig-devices: {2g.35gb: 3}\n", ":6:", "[gc-profile]"),
    ("version: v1\nmig-configs:\n  all-1g.18gb:\n  - devices: all\n    mig-enabled: true\n"
     "    device-filter: [H200]\n    mig-devices: {1g.18gb: 7}\n", ":6:", "[gc-filter]"),
    ("version: v1\nmig-configs:\n  custom:\n  - devices: all\n", ":3:", "[gc-config]"),
    ("version: v1\nmig-configs:\n  all-1g.18gb:\n  - devices: all\n    mig-enabled: false\n", ":4:", "[gc-entry]"),
    ("version: v1\nmig-configs:\n  all-disabled: []\n", ":3:", "[gc-shape]"),
    ("version: v1\nmig-configs: &a {}\nx: *a\n", ":3:", "[yaml-alias]"),
    ("version: v1\nversion: v1\nmig-configs: {}\n", ":2:", "[duplicate-key]"),
    ("- not a mapping\n", ":1:", "[gc-shape]"),
    ("", ":1:", "[empty-file]"),
    ("version: v1\nmig-configs: {all-1g.18gb: [\n", ":", "[yaml-syntax]"),
])
def test_invalid_captures_exit_1_with_a_located_problem(tmp_path: Path, text: str, where: str, rule: str) -> None:
    code, out, err = run(tmp_path, H200.format(layout="{1g.18gb: 7}"), text)
    assert code == 1 and out == "", err
    first = err.splitlines()[0]
    assert first.startswith(str(tmp_path / "generate-config.yaml") + where) and first.endswith(rule), err
    assert err.splitlines()[-1].endswith("not a usable nvidia-mig-parted generate-config capture; nothing checked")
    assert "Traceback" not in err


def test_unreadable_captures_exit_2(tmp_path: Path) -> None:
    gpus = H200.format(layout="{1g.18gb: 7}")
    assert run(tmp_path, gpus, tmp_path / "missing.yaml")[0] == 2
    assert run(tmp_path, gpus, tmp_path)[0] == 2  # a directory
    big = tmp_path / "big.yaml"
    big.write_text("#" * (256 * 1024 + 1))
    code, _, err = run(tmp_path, gpus, big)
    assert code == 2 and "is at most 262144 bytes" in err


LOG = 'time="2026-12-01T13:45:05Z" level=info msg="Found 24 MIG profile(s) for device 0"\n'


def test_a_yaml_capture_with_the_log_mixed_in_is_read(tmp_path: Path) -> None:
    # `generate-config 2>&1`: the real stderr lines first, and one more in the middle of the YAML
    stderr = (H200_FIXTURES / "mig-parted-generate-config.stderr").read_text()
    lines = REAL.read_text().splitlines(keepends=True)
    mixed = stderr + "".join(lines[:5]) + LOG.replace("info", "warning") + "".join(lines[5:])
    code, out, err = run(tmp_path, H200.format(layout="{3g.71gb: 2}"), mixed, "--json")
    assert code == 0 and check(out)["status"] == "PASS", out + err


@pytest.mark.parametrize("line", [
    'time="2026-12-01T13:45:05Z" level=info msg="Found 24 MIG profile(s)" trailing junk\n',  # not key=value
    'time="2026-12-01T13:45:05Z" level=loud msg=x\n',  # no such level
    'time=2026-12-01 level=info msg=x\n',  # not logrus's RFC 3339 time
    'level=info msg="no time"\n',
    '  time="2026-12-01T13:45:05Z" level=info msg=x\n',  # not the whole line
    '[INFO] Found 24 MIG profile(s)\n',  # another tool's log form
], ids=["junk-after", "level", "time", "no-time", "indented", "other-text"])
def test_only_whole_logrus_lines_are_skipped(tmp_path: Path, line: str) -> None:
    stderr = (H200_FIXTURES / "mig-parted-generate-config.stderr").read_text()
    capture = stderr + line + REAL.read_text()
    code, _, err = run(tmp_path, H200.format(layout="{1g.18gb: 7}"), capture)
    at = len(stderr.splitlines()) + 1  # the line numbers are the file's: the skipped lines still count
    assert code == 1 and "YAML syntax error" in err, err
    assert int(err.split("generate-config.yaml:", 1)[1].split(":")[0]) in (at, at + 1), err  # YAML may see it there


def test_a_capture_of_the_log_alone_says_to_capture_stdout(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, H200.format(layout="{1g.18gb: 7}"), LOG * 3)
    assert code == 1
    assert "the file is empty (only 3 line(s) of mig-parted's log: capture its standard output)" in err, err
