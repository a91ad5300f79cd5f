"""The layout chosen at boot: the generated restore.sh finds its name on a fake node root, then applies it.

Each source (``file``, ``kubelet-labels`` in kubeadm's and nodeadm's files and migbake's drop-in,
``credential``), their order, the default, an unknown name and a missing one, run for real with simulated
nvidia-smi and nvidia-mig-parted (tests/outputs/test_restore_script.py) and the node's files under a test
root (support.WORLD).
An unknown or missing name fails closed: no mig-parted call at all, the reason on stderr (the journal) and in
the metrics file; never all-disabled.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realtools import Ran
from support import WORLD, generate
from test_restore_script import Node, make_node

pytestmark = pytest.mark.realtool

GPUS = ("  - model: h200-141gb\n    mig:\n      layouts:\n        infer: {1g.18gb: 7}\n"
        "        train: {7g.141gb: 1}\n")
KUBELET_DROPIN = "/etc/systemd/system/kubelet.service.d/20-mig-restore.conf"
CREDENTIALS = "run/credentials/nvidia-mig-restore.service"  # where the unit's LoadCredential= puts it


def _node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: str = "file, kubelet-labels, credential",
          default: str = "") -> Node:
    layout = f"  layout: {{from: [{sources}]{', default: ' + default if default else ''}}}\n"
    node = make_node(tmp_path, GPUS, restore=layout)
    WORLD.point("root", str(node.root))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    return node


def _put(node: Node, path: str, text: str) -> None:
    target = node.root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _parted(node: Node) -> list[str]:
    return [" ".join(c.split()[:2] + c.split()[-2:]) for c in node.calls() if c.startswith("nvidia-mig-parted")]


def _chosen(node: Node) -> tuple[str, float]:
    """The layout_chosen sample of the metrics file: its labels (config, source, problem) and its value."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(node.metrics.read_text()):
        for s in family.samples:
            if s.name == "migbake_mig_restore_layout_chosen":
                labels = s.labels
                return f"{labels['config']}|{labels['layout_source']}|{labels['layout_problem']}", s.value
    raise AssertionError(node.metrics.read_text())


def _applied(ran: Ran, node: Node, name: str, source: str) -> None:
    assert ran.rc == 0, ran.text
    assert _parted(node) == [f"nvidia-mig-parted apply -c {name}", f"nvidia-mig-parted assert -c {name}"]
    assert f"layout {name}, from {source} (sources tried: " in ran.out
    assert _chosen(node) == (f"{name}|{source}|", 1.0)


def test_file_source_applies_that_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch)
    _put(node, "/etc/migbake/layout", "  train  \nsecond line is not read\n")
    _applied(node.run(), node, "train", "file")


@pytest.mark.parametrize("where,text", [
    ("/etc/default/kubelet", 'KUBELET_EXTRA_ARGS="--node-labels=team=a,nvidia.com/mig.config=train --v=2"\n'),
    ("/etc/sysconfig/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train\n"),
    ("/etc/eks/kubelet/environment", "NODEADM_KUBELET_ARGS=--config=/etc/kubernetes/kubelet/config.json "
                                     "--node-labels=karpenter.sh/nodepool=train,nvidia.com/mig.config=train\n"),
    # as nodeadm writes it: lines joined by "\n", none after the last (environment.go), Karpenter's flag quoted
    ("/etc/eks/kubelet/environment", 'OTHER=1\nNODEADM_KUBELET_ARGS=--node-labels="karpenter.sh/nodepool=p,'
                                     'nvidia.com/mig.config=train"'),
], ids=["kubeadm-deb", "kubeadm-rpm", "nodeadm", "nodeadm-last-line-without-newline"])
def test_kubelet_labels_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, text: str) -> None:
    node = _node(tmp_path, monkeypatch, "kubelet-labels")
    _put(node, where, text)
    _applied(node.run(), node, "train", "kubelet-labels")


def test_kubelet_labels_the_later_argument_wins_and_comments_do_not_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "kubelet-labels")
    _put(node, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=infer\n")
    _put(node, "/etc/eks/kubelet/environment", "# NODEADM_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=bogus\n"
                                               "NODEADM_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train\n")
    _applied(node.run(), node, "train", "kubelet-labels")


def test_a_label_outside_node_labels_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "kubelet-labels", default="infer")
    _put(node, "/etc/default/kubelet", "# nvidia.com/mig.config=train\nOTHER=nvidia.com/mig.config=train\n")
    _applied(node.run(), node, "infer", "default")


def test_credential_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "credential")
    creds = node.root / CREDENTIALS
    creds.mkdir(parents=True)
    (creds / "migbake.layout").write_text("train")
    _applied(node.run(), node, "train", "credential")


def test_the_unit_loads_the_credential_only_when_it_is_a_source(tmp_path: Path) -> None:
    base = "version: 1\nname: u\ngpus:\n" + GPUS + "restore:\n  layout: {from: [%s], default: infer}\n"
    unit = "rootfs/etc/systemd/system/nvidia-mig-restore.service"
    with_cred = (generate(base % "file, credential", tmp_path / "a") / unit).read_text()
    without = (generate(base % "file", tmp_path / "b") / unit).read_text()
    assert "\nLoadCredential=migbake.layout\n" in with_cred
    assert "LoadCredential" not in without


def test_systemd_verifies_the_unit_with_its_credential(tmp_path: Path) -> None:
    from realtools import SystemdTree

    out = generate("version: 1\nname: u\ngpus:\n" + GPUS + "restore:\n  layout: {from: [credential]}\n",
                   tmp_path / "out")
    tree = SystemdTree(stubs=("bash",))
    try:
        tree.install_rootfs(out / "rootfs")
        ran = tree.verify("nvidia-mig-restore.service")
        assert ran.rc == 0 and ran.err == "", ran.text
        broken = tree.root / "etc/systemd/system/nvidia-mig-restore.service"
        broken.write_text(broken.read_text().replace("LoadCredential=migbake.layout", "LoadCredential=../x"))
        assert tree.verify("nvidia-mig-restore.service").err != ""  # the same judge refuses a bad one
    finally:
        tree.cleanup()


def test_sources_are_tried_in_the_profile_s_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "credential, file")
    _put(node, "/etc/migbake/layout", "infer\n")
    creds = node.root / CREDENTIALS
    creds.mkdir(parents=True)
    (creds / "migbake.layout").write_text("train\n")
    _applied(node.run(), node, "train", "credential")
    (creds / "migbake.layout").write_text("\n")  # an empty credential gives no name: the next source does
    (node.state / "calls").unlink()
    _applied(node.run(), node, "infer", "file")


def test_no_name_takes_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, default="train")
    _applied(node.run(), node, "train", "default")


def test_no_name_without_a_default_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch)
    ran = node.run()
    assert ran.rc == 1, ran.text
    assert ("FAILED: no source gave a layout name (tried: file, kubelet-labels, credential) and restore.layout "
            "has no default") in ran.err
    assert _parted(node) == []  # nothing applied: neither another layout nor all-disabled
    assert _chosen(node) == ("|none|missing", 0.0)


@pytest.mark.parametrize("given", ["bogus", "all-disabled", "train x", "INFER", "$(touch /tmp/x)"])
def test_an_unknown_name_fails_closed_even_with_a_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          given: str) -> None:
    node = _node(tmp_path, monkeypatch, default="infer")
    _put(node, "/etc/migbake/layout", given + "\n")
    creds = node.root / CREDENTIALS
    creds.mkdir(parents=True)
    (creds / "migbake.layout").write_text("train\n")  # a later source is not asked after an unknown name
    ran = node.run()
    assert ran.rc == 1, ran.text
    assert "FAILED: source file gives layout " in ran.err
    assert "which this image does not have (it has: infer train); not applying anything else" in ran.err
    assert _parted(node) == []
    assert _chosen(node) == ("|file|unknown", 0.0)


def test_a_control_character_is_shown_escaped_and_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "file")
    _put(node, "/etc/migbake/layout", "tra\x1bin\n")
    ran = node.run()
    assert ran.rc == 1 and "\x1b" not in ran.err and "$'tra\\Ein'" in ran.err, ran.text
    assert _parted(node) == []


def test_a_huge_file_is_read_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch, "file")
    _put(node, "/etc/migbake/layout", "t" * 5_000_000)
    ran = node.run()
    assert ran.rc == 1 and len(ran.err) < 2000, ran.err[:300]
    assert _parted(node) == []


# --- verify and preflight: a layout line naming the layout and its source --------------------------

LAYOUTS_MIG = "layouts: {infer: {1g.18gb: 7}, train: {7g.141gb: 1}}"


def test_verify_names_the_layout_and_asserts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_generated_scripts import good_node

    node, verify = good_node(tmp_path, restore_extra="  layout: {from: [file, credential]}\n", mig=LAYOUTS_MIG)
    WORLD.point("root", str(node.root))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    (node.root / "etc/migbake").mkdir(parents=True)
    (node.root / "etc/migbake/layout").write_text("train\n")
    ran = node.run(verify)
    assert "PASS  layout train, from file (sources tried: file)" in ran.out, ran.text
    assert [c for c in node.calls("mig-parted") if c.startswith("assert")] == [f"assert -f {node.config} -c train"]
    assert "PASS  nvidia-mig-parted assert: the GPUs have config 'train' now" in ran.out
    # the restore unit's credential, read where systemd keeps it for an active unit
    (node.root / "etc/migbake/layout").unlink()
    cred = node.root / "run/credentials/nvidia-mig-restore.service/migbake.layout"
    cred.parent.mkdir(parents=True)
    cred.write_text("infer\n")
    ran = node.run(verify)
    assert "PASS  layout infer, from credential (sources tried: file, credential)" in ran.out, ran.text
    cred.unlink()
    ran = node.run(verify)
    assert ran.rc == 1
    assert ("FAIL  layout: no source gave a layout name (tried: file, credential) and restore.layout has no "
            "default: the restore fails closed and kubelet.service stay(s) down") in ran.out, ran.text
    assert "INFO  nvidia-mig-parted assert not run: no layout name (see the layout line)" in ran.out


@pytest.mark.parametrize("given,status,detail", [
    ("train", "PASS", "layout train, from file (sources tried: file)"),
    ("", "FAIL", "no source gave a layout name (tried: file) and restore.layout has no default: the restore "
                 "fails at every boot and kubelet.service stay(s) down"),
    ("bogus", "FAIL", "source file gives layout bogus, which this image does not have (it has: infer train)"),
], ids=["found", "missing", "unknown"])
def test_preflight_names_the_layout_or_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      given: str, status: str, detail: str) -> None:
    from test_preflight import SimNode
    from test_preflight_script import preflight_node

    layout_root = tmp_path / "layout-root"
    (layout_root / "etc/migbake").mkdir(parents=True)
    if given:
        (layout_root / "etc/migbake/layout").write_text(given + "\n")
    WORLD.point("root", str(layout_root))
    gpus = "  - model: h200-141gb\n    mig: {" + LAYOUTS_MIG + "}\n"
    ran = preflight_node(tmp_path, SimNode(), gpus=gpus, extra="restore:\n  layout: {from: [file]}\n")
    assert ran.status["layout"] == status, ran.report
    assert ran.detail["layout"].startswith(detail), ran.detail["layout"]
    if status == "FAIL":
        assert ran.rc == 1 and ran.report["ready"] is False
    # the MIG state the restore will set: the found layout's, else every name's
    state = ("(profile: MIG Enabled, 1x 7g.141gb)" if given == "train" else
             "(profile: MIG Enabled, 7x 1g.18gb (infer) or MIG Enabled, 1x 7g.141gb (train))")
    assert state in ran.detail["mig-state"], ran.detail["mig-state"]


def test_preflight_cannot_read_the_credential_so_it_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_preflight import SimNode
    from test_preflight_script import preflight_node

    WORLD.point("root", str(tmp_path / "empty-root"))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    gpus = "  - model: h200-141gb\n    mig: {" + LAYOUTS_MIG + "}\n"
    ran = preflight_node(tmp_path, SimNode(), gpus=gpus, extra="restore:\n  layout: {from: [file, credential]}\n")
    assert ran.status["layout"] == "WARN", ran.report
    assert "the credential migbake.layout reaches the restore unit only at boot" in ran.detail["layout"]


# --- kubelet's label for the name, where it did not come from kubelet's own labels ------------------------
LABEL_ENV = "/run/migbake/kubelet-labels.env"
KUBEADM = "kubelet: {layout: kubeadm}\nkubernetes: {node_labels: {team: a}}\n"


def _labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: str, default: str = "",
              kubelet: str = KUBEADM) -> Node:
    """A node whose profile also says how kubelet is started (after gpus: make_node puts restore: after it)."""
    layout = f"  layout: {{from: [{sources}]{', default: ' + default if default else ''}}}\n"
    node = make_node(tmp_path, GPUS + kubelet, restore=layout)
    WORLD.point("root", str(node.root))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    return node


def _label_env(node: Node) -> str | None:
    path = node.root / LABEL_ENV.lstrip("/")
    return path.read_text() if path.exists() else None


@pytest.mark.parametrize("source", ["file", "credential", "default"])
def test_the_restore_gives_kubelet_the_name_s_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     source: str) -> None:
    node = _labelled(tmp_path, monkeypatch, "kubelet-labels, file, credential", "train" if source == "default" else "")
    if source == "file":
        _put(node, "/etc/migbake/layout", "train\n")
    elif source == "credential":
        creds = node.root / CREDENTIALS
        creds.mkdir(parents=True)
        (creds / "migbake.layout").write_text("train")
    ran = node.run()
    _applied(ran, node, "train", source)
    # the drop-in's own variable, its labels first (EnvironmentFile= replaces the drop-in's Environment= line)
    assert _label_env(node) == "MIGBAKE_KUBELET_ARGS=--node-labels=team=a,nvidia.com/mig.config=train\n"
    assert "kubelet's label: nvidia.com/mig.config=train (in /run/migbake/kubelet-labels.env)" in ran.out


def test_no_label_file_when_kubelet_s_labels_gave_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _labelled(tmp_path, monkeypatch, "kubelet-labels, file")
    _put(node, "/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/mig.config=train\n")
    _put(node, LABEL_ENV, "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=infer\n")  # an earlier run's
    _put(node, "/etc/migbake/layout", "infer\n")
    _applied(node.run(), node, "train", "kubelet-labels")
    assert _label_env(node) is None  # kubelet already has it; the earlier run's file is gone


def test_no_label_file_when_the_restore_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _labelled(tmp_path, monkeypatch, "file", "infer")
    _put(node, LABEL_ENV, "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=infer\n")
    _put(node, "/etc/migbake/layout", "bogus\n")
    ran = node.run()
    assert ran.rc != 0 and _parted(node) == [] and _label_env(node) is None


@pytest.mark.parametrize("kubelet,expected", [
    ("kubelet: {layout: eks-al2023}\n", "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train\n"),
    ("kubelet: {layout: generic}\nkubernetes: {kubelet_args_env: KUBELET_API_SERVER, node_labels: {team: a}}\n",
     "KUBELET_API_SERVER=--node-labels=team=a,nvidia.com/mig.config=train\n"),
    ("kubelet: {layout: generic}\n", None),  # no variable kubelet expands: nothing to write
    ("kubelet: {layout: eks-al2}\n", None),  # bootstrap.sh owns kubelet's unit
], ids=["eks-al2023", "generic-kubespray-variable", "generic-without-variable", "eks-al2"])
def test_the_label_file_per_kubelet_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kubelet: str,
                                           expected: str | None) -> None:
    node = _labelled(tmp_path, monkeypatch, "file", kubelet=kubelet)
    _put(node, "/etc/migbake/layout", "train\n")
    _applied(node.run(), node, "train", "file")
    assert _label_env(node) == expected
    dropin = (tmp_path / "out/rootfs" / KUBELET_DROPIN.lstrip("/")).read_text()
    assert ("\nEnvironmentFile=-/run/migbake/kubelet-labels.env\n" in dropin) == (expected is not None)
