"""Named layouts in the boot test without a VM: the plan's options, the guest content, the claim.

``report-layout-kubelet-labels.txt`` is the report of a Packer boot of images/h100-h200-inference whose node
said ``training`` in kubelet's labels (NVIDIA's mig-parted over 8 simulated H100s): the claim holds on it,
and fails on doctored copies; the GPUs are judged against the name's layout, not the default's.
"""

from __future__ import annotations

from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import REPO, cli, generate

from migbake.problems import UsageError
from migbake.rules.validate import check_file
from migbake_boottest import session
from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import parse_report
from migbake_boottest.scenarios import kubelet as kubelet_fixtures
from migbake_boottest.scenarios import layouts
from migbake_boottest.scenarios.claims import BootContext, evaluate
from migbake_boottest.scenarios.node import variant
from migbake_boottest.scenarios.scenario import restore_commands_from_script
from migbake_boottest.simgpu.node import node_for_profile

DATA = Path(__file__).parent / "data"
IMAGE = REPO / "images/h100-h200-inference"
REPORT = (DATA / "report-layout-kubelet-labels.txt").read_text()
SAID = "nvidia-mig-restore.service: layout training, from kubelet-labels (sources tried: kubelet-labels)"


def _profile():  # type: ignore[no-untyped-def]
    checked = check_file(IMAGE / "node-profile.yaml")
    assert checked.profile is not None and checked.profile.layout_names == ("inference", "training")
    return checked.profile


def test_the_claim_holds_on_the_recorded_boot_and_fails_on_doctored_ones() -> None:
    choice = layouts.LayoutChoice("kubelet-labels", "training")
    assert SAID in REPORT
    [claim] = layouts.layout_claim(parse_report(REPORT), choice)
    assert claim.id == "layout-chosen" and claim.passed and claim.evidence == SAID
    for doctored in (REPORT.replace(SAID, SAID.replace("training", "inference")),  # another name
                     REPORT.replace(SAID, SAID.replace("from kubelet-labels", "from default")),  # another source
                     REPORT.replace(SAID + "\n", "")):  # nothing said
        [claim] = layouts.layout_claim(parse_report(doctored), choice)
        assert not claim.passed, doctored
    assert layouts.layout_claim(parse_report(REPORT), None) == []  # a boot without a name has no such claim
    [claim] = layouts.layout_claim(None, choice)
    assert not claim.passed


def test_an_unknown_name_is_claimed_as_refused() -> None:
    choice = layouts.LayoutChoice("file", "serving")
    refused = ("nvidia-mig-restore.service: source file gives layout serving, which this image does not have "
               "(it has: inference training); not applying anything else")
    report = parse_report(REPORT.replace(SAID, refused))
    assert layouts.layout_claim(report, choice, "layout-unknown")[0].passed
    assert not layouts.layout_claim(report, choice, "ok")[0].passed
    assert not layouts.layout_claim(parse_report(REPORT), choice, "layout-unknown")[0].passed


def test_the_gpus_are_judged_against_the_said_layout() -> None:
    profile = _profile()
    report = parse_report(REPORT)

    def exported(name: str) -> bool:
        ctx = BootContext("packer", "ok", "hopper", 1, console="", kubelet=True, kubelet_requires=True,
                          expected=node_for_profile(profile.named(name)).gpus)
        return next(c for c in evaluate(report, ctx) if c.id == "exported-layout").passed

    assert exported("training")
    assert not exported("inference")  # the default's layout is not what this node got


def test_the_name_goes_where_each_source_reads_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    layouts.prepare_image(root, layouts.LayoutChoice("file", "training"), "kubeadm-rpm")
    assert (root / "etc/migbake/layout").read_text() == "training\n"
    kubelet_fixtures.install(root, "kubeadm-rpm", lambda line: None)
    layouts.prepare_image(root, layouts.LayoutChoice("kubelet-labels", "training"), "kubeadm-rpm")
    env = (root / "etc/sysconfig/kubelet").read_text()
    assert env == "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=training --node-ip=10.0.2.15 " \
                  "--max-pods=250\n"
    with pytest.raises(BootTestError, match="kubeadm's kubelet"):
        layouts.prepare_image(root, layouts.LayoutChoice("kubelet-labels", "training"), "eks-al2023")
    credential = layouts.LayoutChoice("credential", "training")
    assert credential.kernel_args == " systemd.set_credential=migbake.layout:training"
    assert layouts.LayoutChoice("file", "training").kernel_args == ""
    for bad in ("", "-x", "a b", "x" * 64, "training\nx"):
        with pytest.raises(BootTestError, match="label value"):
            layouts.LayoutChoice("file", bad)



def test_a_seeded_name_is_left_to_the_output_under_test(tmp_path: Path) -> None:
    """A per-layout seed writes the file itself: the guest gets nothing by hand (else the boot proves nothing)."""
    root = tmp_path / "root"
    layouts.prepare_image(root, layouts.LayoutChoice("file", "training", seeded=True), "kubeadm-rpm")
    assert not (root / "etc/migbake/layout").exists()
    with pytest.raises(BootTestError, match="only the file source"):
        layouts.LayoutChoice("credential", "training", seeded=True)


def test_the_harness_reads_the_default_or_the_first_name_from_the_restore(tmp_path: Path) -> None:
    profile = _profile()
    script = (IMAGE / "generated/rootfs/etc/nvidia-mig/restore.sh").read_text()
    assert restore_commands_from_script(script).config_name == "inference"  # restore.layout.default
    no_default = variant(profile, "layout-missing")
    assert no_default.restore.layout_default == "" and profile.restore.layout_default == "inference"
    out = generate((IMAGE / "node-profile.yaml").read_text().replace("    default: inference\n", ""),
                   tmp_path / "out")
    missing = (out / "rootfs/etc/nvidia-mig/restore.sh").read_text()
    assert "layout_default=''" in missing
    assert restore_commands_from_script(missing).config_name == "inference"  # the first name: no default


@pytest.mark.parametrize(("scenario", "layout", "why"), [
    ("ok", ("file", "serving"), "has the layouts inference, training"),
    ("ok", ("ec2-tag", "training"), "does not read it"),
    ("ok", ("file", "bad name"), "label value"),
    ("layout-unknown", ("file", "training"), "give a name it does not have"),
    ("layout-unknown", None, "needs --layout-source and --layout"),
    ("layout-missing", ("file", "training"), "no --layout-source or --layout"),
])
def test_the_plan_refuses_what_cannot_boot(scenario: str, layout: tuple[str, str] | None, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        session.plan(_profile(), scenario=scenario, layout=layout)


def test_the_plan_boots_the_said_layout() -> None:
    profile = _profile()
    said = session.plan(profile, paths="packer", scenario="ok", layout=("credential", "training"))
    assert said.layout == layouts.LayoutChoice("credential", "training")
    assert said.node == node_for_profile(profile.named("training"))
    assert session.plan(profile, paths="packer", scenario="ok").node == node_for_profile(profile.named("inference"))
    assert session.plan(profile, scenario="layout-missing").scenarios == ("layout-missing",)
    single = check_file(REPO / "images/h200-inference/node-profile.yaml").profile
    assert single is not None
    with pytest.raises(UsageError, match="one unnamed layout"):
        session.plan(single, layout=("file", "training"))


def test_the_cli_takes_both_options_or_neither() -> None:
    rc, _, err = cli("boot-test", str(IMAGE / "node-profile.yaml"), "--layout-source", "file")
    assert rc == 2 and "--layout-source and --layout go together" in err, err
    rc, _, err = cli("boot-test", str(IMAGE / "node-profile.yaml"), "--layout-source", "file", "--layout", "serving")
    assert rc == 2 and "has the layouts inference, training" in err, err
    assert "--layout-source [file|kubelet-labels|credential]" in cli("boot-test", "--help")[1]


def test_the_label_claim_reads_kubelet_s_arguments() -> None:
    choice = layouts.LayoutChoice("credential", "training")
    argv = ("--config=/var/lib/kubelet/config.yaml\n--node-ip=10.0.2.15\n"
            "--node-labels=nvidia.com/gpu.deploy.mig-manager=false,nvidia.com/mig.config=training\n")
    [claim] = layouts.label_claim(argv, choice)
    assert claim.id == "layout-label" and claim.passed, claim
    for doctored in (argv.replace("=training", "=inference"),  # another name
                     argv.replace(",nvidia.com/mig.config=training", ""),  # no label
                     argv.replace("--node-labels=", "--node-ip=")):  # not a label argument
        assert not layouts.label_claim(doctored, choice)[0].passed, doctored
    assert not layouts.label_claim(argv.replace("=training", "=training-x"), choice)[0].passed  # whole value
    assert not layouts.label_claim(None, choice)[0].passed
    assert layouts.label_claim(argv, None) == []
