"""The generated scripts, run for real against fake NVIDIA tools and a fake systemctl.

capture-mig-config.sh must never replace a config unless export and assert both succeeded;
uninstall-mig-restore.sh and the Packer provisioner scripts must be idempotent. No real nvidia-smi or
nvidia-mig-parted is ever called: the profile points the tools into the test's folder, and poisoned
stand-ins sit first on PATH and record any call. The fake node lives here, and ``good_node``: one where
everything went right, that test_verify_script.py and test_gpu_operator.py run the verify script on.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from realtools import FAKE_MANAGER, Ran, run
from support import H200_EXPORT, generate

pytestmark = pytest.mark.realtool

PATH_OK = re.compile(r"^/[A-Za-z0-9._+/-]+$")  # what the schema allows in a path

H200_LAYOUT = H200_EXPORT.read_text()
EMPTY_LAYOUT = """\
version: v1
mig-configs:
  current:
    - devices: all
      mig-enabled: true
      mig-devices: {}
"""


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@dataclass
class Node:
    """A fake node in a folder: tools, systemctl, state files, and the generated scripts for it."""

    root: Path
    out: Path
    bin: Path
    state: Path
    config: Path

    @property
    def env(self) -> dict[str, str]:
        """Environment for running a generated script here."""
        tmp = self.root / "tmp"
        tmp.mkdir(exist_ok=True)
        return {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "STATE": str(self.state),
            "TMPDIR": str(tmp),
            "LC_ALL": "C.UTF-8",
        }

    def set(self, name: str, value: str) -> None:
        """Write one state file (fake systemctl/tool behaviour)."""
        path = self.state / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)

    def calls(self, tool: str) -> list[str]:
        """The command lines ``tool`` was called with."""
        log = self.state / f"{tool}.calls"
        return log.read_text().splitlines() if log.exists() else []

    def run(self, script: Path, *args: str) -> Ran:
        """Run a script with this node's environment."""
        ran = run(["bash", str(script), *args], env=self.env, timeout=60)
        assert not (self.state / "poison").exists(), (self.state / "poison").read_text()
        return ran

    def patched(self, rel: str, **paths: Path) -> Path:
        """A copy of a generated script whose fixed absolute paths (VAR='/...') point into this folder."""
        text = (self.out / rel).read_text()
        for var, path in paths.items():
            line = re.compile(rf"^{var}='/[^']*'$", re.M)
            assert len(line.findall(text)) == 1, (rel, var)
            text = line.sub(f"{var}='{path}'", text)
        return _exe(self.root / "patched" / Path(rel).name, text)


FAKE_SYSTEMCTL = r"""#!/bin/bash
# fake systemctl: units' states and properties are files under $STATE
printf '%s\n' "$*" >>"$STATE/systemctl.calls"
get() { cat "$STATE/$1" 2>/dev/null || printf '%s' "$2"; }
case "$1" in
  is-enabled) s="$(get "enabled/$2" disabled)"; echo "$s"; [ "$s" = enabled ] ;;
  is-active) s="$(get "active/$2" inactive)"; echo "$s"; [ "$s" = active ] ;;
  enable) mkdir -p "$STATE/enabled"; echo enabled >"$STATE/enabled/$2" ;;
  disable) mkdir -p "$STATE/enabled"; echo disabled >"$STATE/enabled/$2" ;;
  daemon-reload) ;;
  show) get "props/$5.$3" "" ; echo ;;
  cat) if [ -f "$STATE/cat/$3" ]; then cat "$STATE/cat/$3"; else echo "No files found for $3." >&2; exit 1; fi ;;
  *) echo "fake systemctl: unexpected: $*" >&2; exit 1 ;;
esac
"""
FAKE_MIG_PARTED = r"""#!/bin/bash
# fake nvidia-mig-parted: $STATE/mig-parted.mode says how export and assert behave
printf '%s\n' "$*" >>"$STATE/mig-parted.calls"
mode="$(cat "$STATE/mig-parted.mode" 2>/dev/null || echo ok)"
case "$1:$mode" in
  export:export-fails) cat "$STATE/layout"; echo "export: cannot talk to NVML" >&2; exit 1 ;;
  export:export-empty) exit 0 ;;
  export:export-no-devices) cat "$STATE/empty-layout" ;;
  export:*) cat "$STATE/layout" ;;
  assert:assert-fails) echo "assert: not all GPUs match the specified config" >&2; exit 1 ;;
  assert:*) exit 0 ;;
  *) echo "fake nvidia-mig-parted: unexpected: $*" >&2; exit 2 ;;
esac
"""
FAKE_SMI = r"""#!/bin/bash
printf '%s\n' "$*" >>"$STATE/nvidia-smi.calls"
[ "$(cat "$STATE/smi.mode" 2>/dev/null)" = fails ] && { echo "NVIDIA-SMI has failed" >&2; exit 9; }
case "$1" in
  -L) for i in 0 1; do
        echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"
        for j in 0 1 2 3 4 5 6; do echo "  MIG 1g.18gb     Device  $j: (UUID: MIG-$i-$j)"; done
      done ;;
  --query-gpu=*) printf '0, 0x233510DE\n1, 0x233510DE\n' ;;
  *) ;;
esac
"""
FAKE_JOURNALCTL = (
    "#!/bin/bash\nprintf '%s\\n' \"$*\" >>\"$STATE/journalctl.calls\"\necho 'journal: apply failed'\n"
)
POISON = '#!/bin/bash\necho "$0 $*" >>"$STATE/poison"\nexit 99\n'


def make_node(tmp_path: Path, profile_extra: str = "", *, kubelet: bool = True,
              restore_extra: str = "", kubelet_keys: str = "", mig: str = "layout: {1g.18gb: 7}") -> Node:
    """Generate a profile whose tools and config live in ``tmp_path``, and fake everything around it."""
    root = tmp_path / "node"
    tools = root / "opt" / "nvidia"
    config = root / "etc" / "nvidia-mig" / "config.yaml"
    for p in (tools, config):
        assert PATH_OK.match(str(p)), f"{p}: pytest's temporary folder has characters a profile path may not"
    text = f"""\
version: 1
name: scripts-under-test
gpu_count: 2
gpus:
  - model: h200-141gb
    mig:
      {mig}
kubelet: {{present: {str(kubelet).lower()}{kubelet_keys}}}
restore:
  config_path: {config}
{restore_extra}tools:
  nvidia_smi: {tools}/nvidia-smi
  nvidia_mig_parted: {tools}/nvidia-mig-parted
{profile_extra}"""
    out = generate(text, tmp_path / "out", node_root=True)
    bin_dir = root / "bin"
    state = root / "state"
    state.mkdir(parents=True)
    _exe(bin_dir / "systemctl", FAKE_SYSTEMCTL)
    _exe(bin_dir / "journalctl", FAKE_JOURNALCTL)
    _exe(bin_dir / "id", "#!/bin/sh\necho 0\n")  # the scripts insist on root; the test need not be
    _exe(bin_dir / "kubectl", "#!/bin/sh\nexit 1\n")  # no cluster here
    for real in ("nvidia-smi", "nvidia-mig-parted"):
        _exe(bin_dir / real, POISON)  # only the profile's absolute tool paths may be used
    _exe(tools / "nvidia-mig-parted", FAKE_MIG_PARTED)
    _exe(tools / "nvidia-smi", FAKE_SMI)
    (state / "layout").write_text(H200_LAYOUT)
    (state / "empty-layout").write_text(EMPTY_LAYOUT)
    return Node(root, out, bin_dir, state, config)


def file_state(path: Path) -> tuple[bytes, int] | None:
    """Content and mode of a file, or None."""
    return (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) if path.exists() else None


def good_node(tmp_path: Path, profile_extra: str = "", consumers: tuple[str, ...] = (),
              kubelet_keys: str = "", restore_extra: str = "", mig: str = "layout: {1g.18gb: 7}") -> tuple[Node, Path]:
    """A node where everything went right, and the verify script pointed at its drop-ins."""
    node = make_node(tmp_path, profile_extra, kubelet_keys=kubelet_keys, restore_extra=restore_extra, mig=mig)
    node.config.parent.mkdir(parents=True)
    node.config.write_text(H200_LAYOUT)
    etc = node.root / "etc/systemd/system"
    r, m = "nvidia-mig-restore.service", "nvidia-mig-manager.service"
    for unit in ("kubelet.service", *consumers):
        dropin = etc / f"{unit}.d/20-mig-restore.conf"
        dropin.parent.mkdir(parents=True)
        dropin.write_bytes((node.out / "rootfs" / dropin.relative_to(node.root)).read_bytes())
        node.set(f"active/{unit}", "active")
        node.set(f"props/{unit}.Requires", f"sysinit.target {r}")
        node.set(f"props/{unit}.After", f"basic.target {r} network.target")
        node.set(f"props/{unit}.InactiveExitTimestampMonotonic", "2000")
    for name, value in {
        f"enabled/{r}": "enabled",
        f"active/{r}": "active",
        f"props/{r}.Result": "success",
        f"props/{r}.ActiveEnterTimestampMonotonic": "1000",
        f"enabled/{m}": "masked",
        f"props/{m}.InactiveExitTimestampMonotonic": "0",
    }.items():
        node.set(name, value)
    marker = node.root / "var/lib/migbake/reboot-attempted"
    return node, node.patched("scripts/verify-mig-restore.sh", systemd_dir=etc, marker=marker)


# --- capture-mig-config.sh ------------------------------------------------------------------------

FAILURES = {
    "export-fails": "nvidia-mig-parted export failed",
    "export-empty": "nvidia-mig-parted export printed nothing",
    "export-no-devices": "the export has no MIG devices",
    "assert-fails": "nvidia-mig-parted assert of the export failed",
}


@pytest.mark.parametrize("existing", [True, False], ids=["config-exists", "no-config"])
@pytest.mark.parametrize("mode", sorted(FAILURES))
def test_capture_leaves_the_config_alone_unless_export_and_assert_succeed(
    tmp_path: Path, mode: str, existing: bool
) -> None:
    node = make_node(tmp_path)
    if existing:
        node.config.parent.mkdir(parents=True)
        node.config.write_text("# the known-good config\n")
        node.config.chmod(0o600)
    before = file_state(node.config)
    node.set("mig-parted.mode", mode)
    ran = node.run(node.out / "scripts/capture-mig-config.sh")
    assert ran.rc == 1, ran.text
    assert FAILURES[mode] in ran.err and f"{node.config} left unchanged" in ran.err
    assert file_state(node.config) == before
    assert list((node.root / "tmp").iterdir()) == []  # the temporary export is cleaned up
    exported = [c for c in node.calls("mig-parted") if c.startswith("export")]
    assert exported == ["export --config-label current"]


def test_capture_saves_the_export_after_assert(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    node.config.parent.mkdir(parents=True)
    node.config.write_text("# an older config\n")
    node.config.chmod(0o600)
    ran = node.run(node.out / "scripts/capture-mig-config.sh")
    assert ran.rc == 0, ran.text
    assert file_state(node.config) == (H200_LAYOUT.encode(), 0o644)
    calls = node.calls("mig-parted")
    assert calls[0] == "export --config-label current"
    assert re.fullmatch(r"assert -f \S+ -c current", calls[1]), calls
    assert "saved to" in ran.out
    # a second capture of the same layout changes nothing
    ran = node.run(node.out / "scripts/capture-mig-config.sh")
    assert ran.rc == 0 and "already holds this layout" in ran.out, ran.text
    assert file_state(node.config) == (H200_LAYOUT.encode(), 0o644)
    assert list((node.root / "tmp").iterdir()) == []


def test_capture_creates_a_missing_config_and_allow_empty_takes_an_empty_layout(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    node.set("mig-parted.mode", "export-no-devices")
    ran = node.run(node.out / "scripts/capture-mig-config.sh", "--allow-empty")
    assert ran.rc == 0, ran.text
    assert file_state(node.config) == (EMPTY_LAYOUT.encode(), 0o644)


def test_capture_rejects_unknown_options_before_touching_anything(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    ran = node.run(node.out / "scripts/capture-mig-config.sh", "--force")
    assert ran.rc == 2 and "unknown option --force" in ran.err
    assert node.calls("mig-parted") == [] and not node.config.exists()


# --- uninstall-mig-restore.sh ---------------------------------------------------------------------


def tree_state(*roots: Path, skip: tuple[str, ...] = (".calls",)) -> dict[str, str]:
    """Every file and folder below ``roots`` with its content hash and mode (call logs left out)."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.name.endswith(skip):
                continue
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
            out[str(p)] = f"{stat.S_IMODE(st.st_mode):o} {digest}"
    return out


@pytest.mark.parametrize("purge", [False, True], ids=["keep-files", "purge"])
def test_uninstall_is_idempotent(tmp_path: Path, purge: bool) -> None:
    node = make_node(tmp_path, "consumers: [{unit: slurmd.service}]\n")
    etc = node.root / "etc/systemd/system"
    dropins = [etc / "kubelet.service.d/20-mig-restore.conf", etc / "slurmd.service.d/20-mig-restore.conf"]
    unit = etc / "nvidia-mig-restore.service"
    script, marker = node.root / "etc/nvidia-mig/restore.sh", node.root / "var/lib/migbake/reboot-attempted"
    rootfs = node.out / "rootfs/etc/systemd/system"
    for target in (*dropins, unit):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((rootfs / target.relative_to(etc)).read_bytes())
    node.config.parent.mkdir(parents=True)
    node.config.write_text(H200_LAYOUT)
    script.write_bytes((node.out / "rootfs/etc/nvidia-mig/restore.sh").read_bytes())
    marker.parent.mkdir(parents=True)
    marker.write_text("1764000000 GPU 0 (Disabled -> Enabled)\n")
    node.set("enabled/nvidia-mig-restore.service", "enabled")
    patched = node.patched("scripts/uninstall-mig-restore.sh", systemd_dir=etc, unit_file=unit, script=script,
                           marker=marker)
    args = ["--purge"] if purge else []

    ran = node.run(patched, *args)
    assert ran.rc == 0, ran.text
    assert not any(d.exists() or d.parent.exists() for d in dropins)
    assert "disable nvidia-mig-restore.service" in node.calls("systemctl")
    assert (node.state / "enabled/nvidia-mig-restore.service").read_text().strip() == "disabled"
    for kept in (unit, node.config, script, marker):
        assert kept.exists() is not purge, kept
    after_first = tree_state(node.root)

    calls_before = len(node.calls("systemctl"))
    ran = node.run(patched, *args)
    assert ran.rc == 0, ran.text
    assert tree_state(node.root) == after_first, "a second uninstall changed something"
    assert ran.out.count("already absent") == 2 and "already disabled" in ran.out
    second = node.calls("systemctl")[calls_before:]
    assert not any(c.startswith(("disable", "enable", "mask")) for c in second), second


def test_purge_removes_what_the_restore_and_the_layout_sources_wrote(tmp_path: Path) -> None:
    # named layouts read from the file, kubelet started by kubeadm (the restore writes kubelet's label), metrics
    metrics = tmp_path / "node/var/lib/node_exporter/textfile/migbake.prom"
    node = make_node(tmp_path, kubelet_keys=", layout: kubeadm", mig="layouts: {infer: {1g.18gb: 7}}",
                     restore_extra=f"  layout: {{from: [file]}}\n  metrics_textfile: {metrics}\n")
    layout, labels = node.root / "etc/migbake/layout", node.root / "run/migbake/kubelet-labels.env"
    other = metrics.parent / "node.prom"  # node_exporter's folder is not migbake's: it stays
    label = "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=infer\n"
    for path, text in ((layout, "infer\n"), (labels, label), (metrics, "migbake_mig_restore_success 1\n"),
                       (other, "up 1\n")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    patched = node.patched("scripts/uninstall-mig-restore.sh", systemd_dir=node.root / "etc/systemd/system",
                           unit_file=node.root / "etc/systemd/system/nvidia-mig-restore.service",
                           script=node.root / "etc/nvidia-mig/restore.sh", marker=node.root / "var/lib/migbake/x",
                           layout_file=layout, labels_file=labels, metrics=metrics)

    ran = node.run(patched)
    assert ran.rc == 0, ran.text
    assert layout.exists() and labels.exists() and metrics.exists()  # without --purge the files stay

    for _ in range(2):  # and a second purge finds nothing to do
        ran = node.run(patched, "--purge")
        assert ran.rc == 0, ran.text
        assert not layout.parent.exists() and not labels.parent.exists() and not metrics.exists()
        assert other.read_text() == "up 1\n"
    assert "removed" not in ran.out, ran.out


# --- provisioner scripts (packer/scripts) ---------------------------------------------------------

needs_root = pytest.mark.skipif(  # in CI (root) these always run; a non-root CI fails them instead
    os.geteuid() != 0 and os.environ.get("CI") != "true", reason="install -o root needs root (the scripts run as root)"
)


def _base_image(target: Path, *, skip: tuple[str, ...] = ()) -> None:
    """What install-mig-restore.sh checks for: both tools at their default paths and kubelet's unit."""
    for tool in ("nvidia-mig-parted", "nvidia-smi"):
        if tool not in skip:
            (target / "usr/bin").mkdir(parents=True, exist_ok=True)
            (target / "usr/bin" / tool).write_text("#!/bin/sh\nexit 0\n")
            (target / "usr/bin" / tool).chmod(0o755)
    if "kubelet.service" not in skip:
        (target / "usr/lib/systemd/system").mkdir(parents=True, exist_ok=True)
        (target / "usr/lib/systemd/system/kubelet.service").write_text("[Service]\nExecStart=/bin/true\n")


@needs_root
@pytest.mark.parametrize("manager", ["enabled", "disabled", "absent"])
@pytest.mark.parametrize("action", ["disable", "mask"])
def test_provisioners_are_idempotent(tmp_path: Path, action: str, manager: str) -> None:
    out = generate(
        f"""\
version: 1
name: provisioned
gpus:
  - model: h200-141gb
    mig:
      layout: {{1g.18gb: 7}}
conflicting_manager: {{action: {action}}}
""",
        tmp_path / "out",
    )
    target = tmp_path / "image"
    (target / "etc/systemd/system").mkdir(parents=True)
    (target / "usr/lib/systemd/system").mkdir(parents=True)
    _base_image(target)
    if manager != "absent":
        (target / "usr/lib/systemd/system/nvidia-mig-manager.service").write_text(FAKE_MANAGER)
    if manager == "enabled":
        assert run(["systemctl", f"--root={target}", "enable", "nvidia-mig-manager.service"]).rc == 0
    scripts = out / "packer/scripts"

    def provision() -> list[str]:
        logs = []
        for script in ("disable-mig-manager.sh", "install-mig-restore.sh"):
            ran = run(["bash", str(scripts / script), "--root", str(target), str(out / "rootfs")])
            assert ran.rc == 0, ran.text
            logs.append(ran.out)
        return logs

    provision()
    first = tree_state(target, skip=())
    state = run(["systemctl", f"--root={target}", "is-enabled", "nvidia-mig-restore.service"])
    assert state.out.strip() == "enabled"
    if manager != "absent" or action == "mask":
        want = "masked" if action == "mask" else "disabled"
        got = run(["systemctl", f"--root={target}", "is-enabled", "nvidia-mig-manager.service"]).out.strip()
        assert got == want
    logs = provision()
    assert tree_state(target, skip=()) == first, "a second provisioner run changed the image"
    assert "already" in logs[0] or "not installed" in logs[0], logs[0]
    assert "installed /" not in logs[1] and logs[1].count("unchanged /") == 4, logs[1]
