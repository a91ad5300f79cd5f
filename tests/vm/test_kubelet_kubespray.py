"""A kubespray-shaped kubelet: the generated preflight catches a mismatched layout, a fitting one boots.

1. Chroot, no boot: the boot test's kubespray fixture (``scenarios.kubelet``: kubespray's own kubelet.service,
   /etc/kubernetes/kubelet.env and /usr/local/bin/kubelet, no kubeadm drop-in) in a copy of the Debian rootfs;
   the generated preflight runs in it (no systemd running: it reads the unit folders, with Debian's mawk).
   kubelet.layout kubeadm FAILs naming kubelet.layout generic and the variables that fit; generic with
   kubelet_args_env KUBELET_API_SERVER (expanded by the unit, set by no file) PASSes.
2. One boot (the cloud-init path, ``--kubeadm-package kubespray``) of that generic profile: every claim of
   an ok boot holds, kubelet started after the restore, and kubelet got the node labels and the admin's
   flags from kubespray's env file (``kubelet-labels``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest

from migbake.rules.validate import check_bytes
from migbake_boottest import BootAssets, run_boot_test
from migbake_boottest.scenarios import kubelet as kubelet_fixtures
from migbake_boottest.scenarios.node import promises_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support.py
from support import generate

pytestmark = pytest.mark.vm
PROFILE = """version: 1
name: kubespray-node
gpu_count: 1
gpus:
  - model: h100-80gb
    mig: {{layout: {{3g.40gb: 2}}}}
kubelet: {{layout: {layout}}}
kubernetes:
  node_labels: {{nvidia.com/gpu.deploy.mig-manager: "false"}}
{extra}"""
GENERIC = PROFILE.format(layout="generic", extra="  kubelet_args_env: KUBELET_API_SERVER\n")
KUBEADM = PROFILE.format(layout="kubeadm", extra="")


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="migbake-kubespray-", dir="/var/tmp"))
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def _preflight_in(rootfs: Path, out: Path) -> dict[str, str]:
    script = rootfs / "root/preflight-mig-restore.sh"
    shutil.copy(out / "scripts/preflight-mig-restore.sh", script)
    # a node's /dev and /proc (bash's process substitution reads /dev/fd), in a mount namespace of its own
    inside = (f"mount --bind /dev {rootfs}/dev && mount -t proc proc {rootfs}/proc && "
              f"exec chroot {rootfs} /bin/bash /root/preflight-mig-restore.sh --json")
    ran = subprocess.run(["unshare", "--mount", "sh", "-c", inside], capture_output=True, text=True, timeout=120,
                         check=False)
    assert ran.returncode in (0, 1), ran.stderr
    report = json.loads(ran.stdout)
    return {c["check"]: f"{c['status']} {c['detail']}" for c in report["checks"]}


def test_preflight_on_a_kubespray_node_fails_kubeadm_and_passes_generic(boot_assets: BootAssets, work: Path) -> None:
    rootfs = boot_assets.rootfs.fresh_copy(work / "rootfs")
    kubelet_fixtures.install(rootfs, "kubespray", print)
    subprocess.run(["systemctl", "--quiet", f"--root={rootfs}", "enable", "kubelet.service"], check=True)
    assert not (rootfs / "usr/bin/kubelet").exists() and (rootfs / "usr/local/bin/kubelet").is_file()

    mismatch = _preflight_in(rootfs, generate(KUBEADM, work / "out-kubeadm", production=True))["kubelet-unit"]
    print("kubelet.layout kubeadm:", mismatch)
    assert mismatch.startswith("FAIL this is not kubeadm's kubelet, which kubelet.layout kubeadm assumes: no kubeadm "
                               "drop-in (kubelet.service.d/10-kubeadm.conf in /etc/systemd/system"), mismatch
    assert "ExecStart=/usr/local/bin/kubelet $KUBE_LOGTOSTDERR $KUBE_LOG_LEVEL $KUBELET_API_SERVER" in mismatch
    assert ("kubelet.layout generic fits, with kubernetes.kubelet_args_env one of KUBE_LOGTOSTDERR "
            "KUBELET_API_SERVER KUBELET_PORT KUBELET_HOSTNAME DOCKER_SOCKET KUBELET_NETWORK_PLUGIN "
            "KUBELET_VOLUME_PLUGIN") in mismatch
    assert "this is kubespray's unit" in mismatch

    fits = _preflight_in(rootfs, generate(GENERIC, work / "out-generic", production=True))["kubelet-unit"]
    print("kubelet.layout generic:", fits)
    assert fits.startswith("PASS ExecStart=/usr/local/bin/kubelet") and "expands $KUBELET_API_SERVER" in fits, fits


def test_a_generic_profile_boots_a_kubespray_kubelet_after_the_restore(boot_assets: BootAssets, work: Path) -> None:
    checked = check_bytes(GENERIC.encode(), "node-profile.yaml")
    assert checked.profile is not None
    out = generate(GENERIC, work / "out", production=True)
    result = run_boot_test(out, path="cloud-init", scenario="ok", boots=1, assets=boot_assets, log=print,
                           promises=promises_of(checked.profile), kubeadm_package="kubespray")
    print(result.summary())
    assert result.passed, result.summary()
    claims = {c.id: c for b in result.boots for c in b.claims}
    assert "kubelet-labels" in claims and "(kubespray)" in claims["kubelet-labels"].description
    assert "--node-labels=nvidia.com/gpu.deploy.mig-manager=false" in claims["kubelet-labels"].evidence
