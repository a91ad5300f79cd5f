"""The generated verify script reads the node's ResourceSlices live, with preflight's verdicts.

A fake ``kubectl`` prints the fixtures of tests/fixtures/dra/ for ``get resourceslices -o json``; the
verify script's ``dra-devices`` line must say what ``migbake preflight --resource-slices`` says of the same
capture, word for word (one expectation in the plan, ``RenderPlan.dra.expected``), except that moved
placements alone are a WARN there unless ``restore.placements: strict`` (the Ansible activation runs verify,
and a prediction that is off must not keep a node drained). INFO when kubectl is absent or cannot read
the slices. The JSON is read by the script's own awk: run with the system's awk and with BusyBox's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from realtools import Ran, run
from support import REPO, cli, generate
from test_dra_claims import A100_MIXED, WHOLE
from test_dra_preflight import DYNAMIC, H200, TWO_MODELS, V25_8
from test_generated_scripts import FAKE_JOURNALCTL, FAKE_SYSTEMCTL, POISON, _exe

pytestmark = pytest.mark.realtool

FIXTURES = REPO / "tests/fixtures/dra"
BUSYBOX = shutil.which("busybox")
TOOLS = ("bash", "awk", "grep", "sort", "uniq", "cut", "comm", "cat", "tr", "sed", "head", "tail", "wc", "id")


def _kubectl(fixture: Path | None) -> str:
    """A kubectl that prints ``fixture`` for ``get resourceslices -o json`` and knows nothing else."""
    answer = f"cat '{fixture}'" if fixture else "exit 1"
    return f"""#!/bin/sh
printf '%s\\n' "$*" >>"$STATE/kubectl.calls"
case "$*" in
  'get resourceslices -o json') {answer} ;;
  *) exit 1 ;;
esac
"""


def verify(tmp_path: Path, profile: str, fixture: str | None, *args: str, awk: str = "",
           kubectl: bool = True, env: dict[str, str] | None = None) -> tuple[Ran, list[str]]:
    """Run the profile's verify script on a fake node whose kubectl prints ``fixture``; its DRA lines."""
    out = generate(profile, tmp_path / "out")
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    state.mkdir()
    _exe(bin_dir / "systemctl", FAKE_SYSTEMCTL)
    _exe(bin_dir / "journalctl", FAKE_JOURNALCTL)
    _exe(bin_dir / "hostname", "#!/bin/sh\necho h200-node\n")
    for tool in ("nvidia-smi", "nvidia-mig-parted"):
        _exe(bin_dir / tool, POISON)
    path = f"{bin_dir}:/usr/bin:/bin"
    if kubectl:
        _exe(bin_dir / "kubectl", _kubectl(FIXTURES / fixture if fixture else None))
    else:  # this machine may have a real kubectl in /usr/bin: a PATH of the tools the script needs instead
        tools = tmp_path / "tools"
        tools.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool)
            assert found, tool
            (tools / tool).symlink_to(found)
        path = f"{bin_dir}:{tools}"
    if awk:
        (bin_dir / "awk").symlink_to(awk)
    ran = run(["bash", str(out / "scripts/verify-mig-restore.sh"), *args],
              env={"PATH": path, "STATE": str(state), "LC_ALL": "C.UTF-8", **(env or {})},
              timeout=60)
    assert not (state / "poison").exists()
    return ran, [line for line in ran.out.splitlines() if "dra-devices" in line or "DRA devices" in line]


def preflight(tmp_path: Path, profile: str, fixture: str, node: str) -> tuple[str, str]:
    """``migbake preflight --resource-slices``'s dra-devices check: (status, detail)."""
    path = tmp_path / "p.yaml"
    path.write_text(profile)
    rc, out, err = cli("preflight", str(path), "--resource-slices", str(FIXTURES / fixture), "--node", node, "--json")
    assert rc in (0, 1), (out, err)
    check = next(c for c in json.loads(out)["checks"] if c["check"] == "dra-devices")
    return check["status"], check["detail"]


UNCOUNTED = H200.replace("gpu_count: 2\n", "")
STRICT = H200 + "restore: {placements: strict}\n"
V25_8_STRICT = V25_8 + "restore: {placements: strict}\n"
CASES = {
    # id: (profile, fixture, node, the verdict verify gives when preflight's differs, or "")
    "ready": (H200, "h200-ready.json", "h200-node", ""),
    "stranded": (H200, "h200-stranded.json", "h200-node", ""),
    "partial": (H200, "h200-partial.json", "h200-node", ""),
    "moved-warn": (H200, "h200-moved.json", "h200-node", "WARN"),
    "moved-strict": (STRICT, "h200-moved.json", "h200-node", ""),
    "other-node": (H200, "h200-ready.json", "other-node", ""),
    "uncounted": (UNCOUNTED, "h200-ready.json", "h200-node", ""),
    "uncounted-stranded": (UNCOUNTED, "h200-stranded.json", "h200-node", ""),
    "a100-mixed": (A100_MIXED, "a100-mixed.json", "a100-node", "WARN"),  # the fixture has +me at 3, the plan at 2
    "a100-on-h200-node": (A100_MIXED, "h200-ready.json", "h200-node", ""),
    "h200-on-a100-node": (UNCOUNTED, "a100-mixed.json", "a100-node", ""),
    "v25.8.1-ready": (H200, "h200-ready-v25.8.1.json", "h200-node", ""),
    "v25.8.1-ready-said": (V25_8, "h200-ready-v25.8.1.json", "h200-node", ""),
    "v25.8.1-profile-on-v25.12-node": (V25_8, "h200-ready.json", "h200-node", ""),
    "v25.8.1-moved": (H200, "h200-moved-v25.8.1.json", "h200-node", "WARN"),
    "v25.8.1-moved-said": (V25_8, "h200-moved-v25.8.1.json", "h200-node", "WARN"),
    "v25.8.1-strict": (STRICT, "h200-ready-v25.8.1.json", "h200-node", ""),
    "v25.8.1-strict-said": (V25_8_STRICT, "h200-ready-v25.8.1.json", "h200-node", ""),
    "v25.8.1-moved-strict": (STRICT, "h200-moved-v25.8.1.json", "h200-node", ""),
    "v25.8.1-moved-strict-said": (V25_8_STRICT, "h200-moved-v25.8.1.json", "h200-node", ""),
    "renamed": (H200, "h200-ready-renamed.json", "h200-node", ""),
    "generations": (H200, "h200-generations.json", "h200-node", ""),
    "two-models": (TWO_MODELS, "h200-a100.json", "mixed-node", ""),
    "two-models-counted": (TWO_MODELS.replace("gpus:", "gpu_count: 3\ngpus:"), "h200-a100.json", "mixed-node", ""),
    "no-slices": (H200, "h200-ready.json", "absent-node", ""),
    "whole-gpu": (WHOLE, "h200-whole.json", "h200-node", ""),
    "whole-gpu-missing": (WHOLE, "h200-ready.json", "h200-node", ""),
    "dynamic-no-slices": (DYNAMIC, "h200-ready.json", "absent-node", ""),
    "dynamic-ready": (DYNAMIC, "dynamic-ready.json", "dyn-node", ""),
    "dynamic-static-left": (DYNAMIC, "dynamic-static-left.json", "dyn-node", ""),
    "dynamic-on-static-node": (DYNAMIC, "h200-ready.json", "h200-node", ""),
}
PRINTED = {"PASS": "PASS", "FAIL": "FAIL", "WARN": "WARN"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verify_says_what_preflight_says(tmp_path: Path, case: str) -> None:
    profile, fixture, node, differs = CASES[case]
    status, detail = preflight(tmp_path, profile, fixture, node)
    ran, lines = verify(tmp_path, profile, fixture, "--node", node)
    assert lines == [f"{PRINTED[differs or status]}  dra-devices: {detail}"], ran.out
    assert (ran.rc == 1) == ("FAIL  " in ran.out)


def test_the_verdicts_differ_between_cases(tmp_path: Path) -> None:
    """The comparison above is not vacuous: the cases cover PASS, FAIL and WARN, and each FAIL's reason."""
    seen = {preflight(tmp_path, p, f, n)[0] for p, f, n, _ in CASES.values()}
    assert seen == {"PASS", "FAIL", "WARN"}
    details = " ".join(preflight(tmp_path, p, f, n)[1] for p, f, n, _ in CASES.values())
    for words in ("stranded: MIG on", "partial layout", "moved placements", "publishes static MIG devices",
                  "(MIG off) is not published", "published whole (MIG off?)", "no slices for node absent-node",
                  "the form of DRA driver v25.3.0 to v25.8.1", "read by attributes", "the profile expects the names",
                  "GPU 2 publishes no device (stranded"):
        assert words in details, words


@pytest.mark.parametrize(("case", "verdict"), [("v25.8.1-strict", "PASS"), ("v25.8.1-strict-said", "PASS"),
                                              ("v25.8.1-moved-strict", "FAIL"), ("v25.8.1-moved-strict-said", "FAIL")])
def test_strict_placements_judge_the_v25_8_1_names(tmp_path: Path, case: str, verdict: str) -> None:
    """Under restore.placements: strict, a node of DRA driver v25.8.1 that publishes the plan's placements
    passes verify's dra-devices check, and one whose placements moved fails it (not the WARN of the default
    placements), whichever naming the profile expects."""
    profile, fixture, node, _ = CASES[case]
    assert preflight(tmp_path, profile, fixture, node)[0] == verdict
    ran, lines = verify(tmp_path, profile, fixture, "--node", node)
    assert len(lines) == 1 and lines[0].startswith(f"{verdict}  dra-devices: "), ran.out


@pytest.mark.skipif(BUSYBOX is None, reason="no busybox here")
@pytest.mark.parametrize("case", ["ready", "moved-strict", "a100-mixed", "dynamic-ready", "v25.8.1-ready",
                                  "generations", "renamed", "two-models"])
def test_busybox_awk_reads_the_slices_too(tmp_path: Path, case: str) -> None:
    profile, fixture, node, differs = CASES[case]
    status, detail = preflight(tmp_path, profile, fixture, node)
    ran, lines = verify(tmp_path, profile, fixture, "--node", node, awk=str(BUSYBOX))
    assert lines == [f"{PRINTED[differs or status]}  dra-devices: {detail}"], ran.out


def test_the_node_name_defaults_to_the_hostname(tmp_path: Path) -> None:
    ran, lines = verify(tmp_path, H200, "h200-ready.json")
    assert lines and lines[0].startswith("PASS  dra-devices: node h200-node publishes exactly"), ran.out
    calls = (tmp_path / "state/kubectl.calls").read_text().splitlines()
    assert "get resourceslices -o json" in calls and "get node h200-node -o go-template=" in " ".join(calls)


def test_the_node_name_given_with_node(tmp_path: Path) -> None:
    ran, lines = verify(tmp_path, H200, "h200-ready.json", "--node", "other-node")
    assert lines and lines[0].startswith("FAIL  dra-devices: node other-node: GPU 0: partial layout"), ran.out


def test_the_environment_names_no_node(tmp_path: Path) -> None:
    """Only --node names another node: verify takes nothing from its environment."""
    ran, lines = verify(tmp_path, H200, "h200-ready.json", env={"MIGBAKE_NODE_NAME": "other-node"})
    assert lines and lines[0].startswith("PASS  dra-devices: node h200-node publishes exactly"), ran.out


@pytest.mark.parametrize(("args", "rc", "words"), [
    (("--node",), 2, "usage:"), (("--bogus",), 2, "unknown argument: --bogus"), (("--help",), 0, "usage:")],
    ids=["no-name", "unknown", "help"])
def test_usage(tmp_path: Path, args: tuple[str, ...], rc: int, words: str) -> None:
    ran, _ = verify(tmp_path, H200, "h200-ready.json", *args)
    assert ran.rc == rc and words in ran.text and "PASS" not in ran.out


@pytest.mark.parametrize(("fixture", "kubectl", "line"), [
    (None, True, "INFO  kubectl cannot read ResourceSlices (no kubeconfig here, or no resource.k8s.io API)"),
    (None, False, "INFO  kubectl is not installed here: the DRA devices this node publishes (ResourceSlices)"),
    ("README.md", True, "INFO  kubectl get resourceslices -o json printed no List of ResourceSlices"),
    ("bad-attributes.json", True, "INFO  kubectl get resourceslices -o json printed no List of ResourceSlices"),
], ids=["cannot-read", "no-kubectl", "not-a-list", "attribute-shapes"])
def test_info_when_the_slices_cannot_be_read(tmp_path: Path, fixture: str | None, kubectl: bool, line: str) -> None:
    """Attributes of the wrong shape are no verdict (stranded, partial): preflight locates them."""
    if fixture == "bad-attributes.json":  # h200-ready.json with one attribute a bare string, one a list
        doc = json.loads((FIXTURES / "h200-ready.json").read_text())
        devices = doc["items"][1]["spec"]["devices"]
        devices[0]["attributes"]["type"] = "mig"
        devices[1]["attributes"] = [devices[1]["attributes"]]
        (tmp_path / fixture).write_text(json.dumps(doc))
        fixture = str(tmp_path / fixture)
    ran, lines = verify(tmp_path, H200, fixture, "--node", "h200-node", kubectl=kubectl)
    assert len(lines) == 1 and lines[0].startswith(line), ran.out


def test_a_device_plugin_profile_reads_no_slices(tmp_path: Path) -> None:
    profile = H200.replace("kubernetes: {allocation: dra}\n", "")
    ran, lines = verify(tmp_path, profile, "h200-ready.json", "--node", "h200-node")
    assert lines == [] and "get resourceslices -o json" not in (tmp_path / "state/kubectl.calls").read_text()
    assert "compare Allocatable" in ran.out
