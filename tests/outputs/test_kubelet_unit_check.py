"""The generated preflight and verify read kubelet's unit on the node (check ``kubelet-unit``).

kubelet.layout kubeadm replaces kubelet's ExecStart= with kubeadm's command: on a node whose kubelet is
not kubeadm's (kubespray's /usr/local/bin/kubelet with its own unit and env file) that boots without
kubelet. The scripts read the unit as `systemctl cat` prints it (a fake systemctl here; the real one and
the unit-folder fallback in tests/vm/test_kubelet_units_chroot.py) and FAIL naming the layout that fits.
"""

from __future__ import annotations

import json
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from test_generated_scripts import good_node
from test_preflight import SimNode, profile_yaml
from test_preflight_script import Ran, run_script

from migbake_boottest.scenarios.kubelet import KUBESPRAY_ENV, KUBESPRAY_ENV_TEXT, KUBESPRAY_UNIT

pytestmark = pytest.mark.realtool
OURS = "# /etc/systemd/system/kubelet.service.d/20-mig-restore.conf\n"
KUBEADM_ARGS = "$KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"
LABELS = 'kubernetes: {node_labels: {nvidia.com/gpu.deploy.mig-manager: "false"}'


def kubeadm_unit(binary: str) -> str:
    """`systemctl cat kubelet` on a kubeadm node (the kubelet package's unit, kubeadm's drop-in)."""
    return (f"# /usr/lib/systemd/system/kubelet.service\n[Unit]\nDescription=kubelet\n\n[Service]\n"
            f"ExecStart={binary}\nRestart=always\n\n"
            "# /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf\n[Service]\n"
            'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf '
            '--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
            "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\nEnvironmentFile=-/etc/default/kubelet\n"
            f"ExecStart=\nExecStart={binary} {KUBEADM_ARGS}\n")


def al2023_unit(binary: str) -> str:
    """`systemctl cat kubelet` on EKS AL2023."""
    return ("# /etc/systemd/system/kubelet.service\n[Service]\nEnvironmentFile=/etc/eks/kubelet/environment\n"
            f"ExecStart={binary} $NODEADM_KUBELET_ARGS\n")


def kubespray_unit(root: Path) -> str:
    """`systemctl cat kubelet` on a kubespray node (its env file under ``root``, which the script reads)."""
    return "# /etc/systemd/system/kubelet.service\n" + KUBESPRAY_UNIT.replace(KUBESPRAY_ENV, f"{root}{KUBESPRAY_ENV}")


def preflight(tmp_path: Path, unit: str, kubelet: str, extra: str = "", files: dict[str, str] | None = None,
              units: tuple[str, ...] = ()) -> Ran:
    """The generated preflight (--json) on a node whose kubelet unit is ``unit``, for a profile whose
    ``kubelet:`` mapping holds ``kubelet``."""
    tmp_path.mkdir(exist_ok=True)
    states = {u: ("enabled", "active") for u in ("kubelet.service", *units)}
    states["nvidia-mig-manager.service"] = ("disabled", "inactive")
    node = SimNode(units=states, unit_text={"kubelet.service": unit}, files=files or {})
    text = profile_yaml(Path("@ROOT@"), extra=extra).replace("kubelet: {present: true}", f"kubelet: {{{kubelet}}}")
    rc, out, err, calls = run_script(tmp_path, node, text, "--json")
    return Ran(rc, json.loads(out), calls, err)


def root_of(tmp_path: Path) -> Path:
    return tmp_path / "node"  # where run_script puts the simulated node


def test_kubeadm_layout_on_a_kubeadm_node_passes(tmp_path: Path) -> None:
    binary = f"{root_of(tmp_path)}/usr/bin/kubelet"
    ran = preflight(tmp_path, kubeadm_unit(binary), f"layout: kubeadm, binary: {binary}", LABELS + "}\n",
                    files={"usr/bin/kubelet": "#!/bin/sh\n"})
    assert ran.status["kubelet-unit"] == "PASS", ran.detail["kubelet-unit"]
    assert ran.detail["kubelet-unit"] == (
        "kubeadm's drop-in /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf starts "
        f"{binary} {KUBEADM_ARGS} (kubelet.layout kubeadm): the kubelet drop-in repeats it with $MIGBAKE_KUBELET_ARGS")
    assert ran.report["ready"] is True


def test_kubeadm_layout_on_a_kubespray_node_fails_naming_generic(tmp_path: Path) -> None:
    root = root_of(tmp_path)
    env = {KUBESPRAY_ENV.lstrip("/"): KUBESPRAY_ENV_TEXT}
    ran = preflight(tmp_path, kubespray_unit(root), "layout: kubeadm", LABELS + "}\n", files=env)
    assert ran.status["kubelet-unit"] == "FAIL" and ran.report["ready"] is False
    detail = ran.detail["kubelet-unit"]
    assert detail.startswith("this is not kubeadm's kubelet, which kubelet.layout kubeadm assumes: no kubeadm "
                             "drop-in (kubelet.service.d/10-kubeadm.conf in /etc/systemd/system "), detail
    assert "ExecStart=/usr/local/bin/kubelet $KUBE_LOGTOSTDERR $KUBE_LOG_LEVEL" in detail
    assert f"the kubelet drop-in would start /usr/bin/kubelet {KUBEADM_ARGS} $MIGBAKE_KUBELET_ARGS instead" in detail
    # the variables the unit expands that its env file does not set (KUBELET_ARGS, ... are set there)
    assert ("kubelet.layout generic fits, with kubernetes.kubelet_args_env one of KUBE_LOGTOSTDERR "
            "KUBELET_API_SERVER KUBELET_PORT KUBELET_HOSTNAME DOCKER_SOCKET KUBELET_NETWORK_PLUGIN "
            "KUBELET_VOLUME_PLUGIN (") in detail
    assert "this is kubespray's unit" in detail and "kubectl label" in detail


def test_generic_layout_fits_a_kubespray_node_through_a_variable_no_file_sets(tmp_path: Path) -> None:
    root = root_of(tmp_path)
    env = {KUBESPRAY_ENV.lstrip("/"): KUBESPRAY_ENV_TEXT}
    labels = LABELS + ", kubelet_args_env: KUBELET_API_SERVER}\n"
    ran = preflight(tmp_path, kubespray_unit(root), "layout: generic", labels, files=env)
    assert ran.status["kubelet-unit"] == "PASS", ran.detail["kubelet-unit"]
    assert "expands $KUBELET_API_SERVER, which no file of the unit sets" in ran.detail["kubelet-unit"]


def test_generic_layout_through_a_variable_the_env_file_sets_fails(tmp_path: Path) -> None:
    root = root_of(tmp_path)
    env = {KUBESPRAY_ENV.lstrip("/"): KUBESPRAY_ENV_TEXT}
    ran = preflight(tmp_path, kubespray_unit(root), "layout: generic", LABELS + ", kubelet_args_env: KUBELET_ARGS}\n",
                    files=env)
    assert ran.status["kubelet-unit"] == "FAIL"
    assert ran.detail["kubelet-unit"].startswith("the unit itself sets KUBELET_ARGS (kubernetes.kubelet_args_env; "
                                                 f"EnvironmentFile= {root}{KUBESPRAY_ENV}), which overrides")


def test_generic_layout_without_labels_or_binary_reads_no_unit(tmp_path: Path) -> None:
    ran = preflight(tmp_path, kubespray_unit(root_of(tmp_path)), "layout: generic")
    assert "kubelet" in ran.status and "kubelet-unit" not in ran.status


def test_kubeadm_drop_in_with_another_binary_fits_kubeadm_with_that_binary(tmp_path: Path) -> None:
    ran = preflight(tmp_path, kubeadm_unit("/opt/bin/kubelet"), "layout: kubeadm")
    assert ran.status["kubelet-unit"] == "FAIL"
    assert ran.detail["kubelet-unit"].startswith(
        f"kubeadm's drop-in /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf starts /opt/bin/kubelet "
        f"{KUBEADM_ARGS}, not /usr/bin/kubelet {KUBEADM_ARGS} "
        "(kubelet.layout kubeadm, kubelet.binary /usr/bin/kubelet)")
    assert ran.detail["kubelet-unit"].endswith("kubelet.layout kubeadm fits (kubeadm's drop-in "
                                               "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf) with "
                                               "kubelet.binary /opt/bin/kubelet")


def test_eks_al2023_layout(tmp_path: Path) -> None:
    ok = preflight(tmp_path / "a", al2023_unit("/usr/bin/kubelet"), "layout: eks-al2023",
                   units=("nodeadm-run.service",))
    assert ok.status["kubelet-unit"] == "PASS", ok.detail["kubelet-unit"]
    no_nodeadm = preflight(tmp_path / "b", al2023_unit("/usr/bin/kubelet"), "layout: eks-al2023")
    assert no_nodeadm.status["kubelet-unit"] == "FAIL"
    assert "there is no nodeadm-run.service" in no_nodeadm.detail["kubelet-unit"]
    on_kubeadm = preflight(tmp_path / "c", kubeadm_unit("/usr/bin/kubelet"), "layout: eks-al2023")
    assert on_kubeadm.status["kubelet-unit"] == "FAIL"
    assert on_kubeadm.detail["kubelet-unit"].startswith("this is not EKS AL2023's kubelet")
    assert "kubelet.layout kubeadm fits" in on_kubeadm.detail["kubelet-unit"]
    kubeadm_on_eks = preflight(tmp_path / "d", al2023_unit("/usr/bin/kubelet"), "layout: kubeadm")
    assert kubeadm_on_eks.detail["kubelet-unit"].endswith(
        "kubelet.layout eks-al2023 fits (its ExecStart= expands $NODEADM_KUBELET_ARGS, which nodeadm writes)")


@pytest.mark.parametrize(("node_unit", "line"), [
    ("kubeadm", "PASS  kubelet-unit: kubeadm's drop-in /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"),
    ("kubespray", "FAIL  kubelet-unit: this is not kubeadm's kubelet, which kubelet.layout kubeadm assumes"),
], ids=["kubeadm-node", "kubespray-node"])
def test_verify_reads_the_unit_without_the_restore_drop_in(tmp_path: Path, node_unit: str, line: str) -> None:
    binary = tmp_path / "kubelet"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    node, script = good_node(tmp_path, LABELS + "}\n", kubelet_keys=f", layout: kubeadm, binary: {binary}")
    ours = (node.out / "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf").read_text()
    assert f"ExecStart={binary} {KUBEADM_ARGS} $MIGBAKE_KUBELET_ARGS" in ours  # kubelet.binary reaches the drop-in
    base = kubeadm_unit(str(binary)) if node_unit == "kubeadm" else kubespray_unit(tmp_path)
    node.set("cat/kubelet.service", base + "\n" + OURS + ours)  # ours comes last and resets ExecStart=
    ran = node.run(script)
    assert line in ran.out, ran.out
    assert ran.rc == (0 if node_unit == "kubeadm" else 1), ran.out


def test_the_offline_preflight_lists_the_check(tmp_path: Path) -> None:
    from migbake.node.preflight import check_names
    from migbake.rules.validate import check_bytes

    text = profile_yaml(tmp_path).replace("kubelet: {present: true}", "kubelet: {layout: kubeadm}")
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None
    names = check_names(checked.profile)
    assert names[names.index("kubelet") + 1] == "kubelet-unit"
