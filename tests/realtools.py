"""The real tools that check generated output: cloud-init, systemd, shellcheck, Packer, an HCL2 parser,
and NVIDIA's own nvidia-mig-parted parser.

Each checker returns what the tool said, so that a test can assert on it and a negative test can
show the same checker rejecting a deliberately broken input. In CI (CI=true) a missing tool fails
the test; elsewhere it skips with the command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO, shared_file

IN_CI = os.environ.get("CI", "").lower() == "true"
SYSTEMD_BIN = Path("/lib/systemd/systemd")
HOST_UNITS = Path("/usr/lib/systemd/system")

INSTALL_HINT = ("apt-get install -y --no-install-recommends packer shellcheck cloud-init systemd "
                "(see .ci/run)")
# the judges that pyproject's dependency groups install (console scripts of their packages), not apt
FROM_THE_TEST_EXTRA = {"ansible-playbook": "ansible-core", "ansible-inventory": "ansible-core",
                       "ansible-lint": "ansible-lint", "ksvalidator": "pykickstart", "ruff": "ruff",
                       "pre-commit": "pre-commit", "mypy": "mypy", "check-jsonschema": "check-jsonschema"}
PIP_HINT = ("pip install --group judges --group dev into the tests' venv (nox -s tests-3.11 makes one with them; "
            "see noxfile.py)")


def require(tool: str) -> str:
    """The path of ``tool``; fail in CI, skip elsewhere, when it is missing."""
    path = tool if os.path.isabs(tool) and os.access(tool, os.X_OK) else shutil.which(tool)
    if path:
        return path
    message = f"{tool} is not installed: {PIP_HINT if tool in FROM_THE_TEST_EXTRA else INSTALL_HINT}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Ran:
    """What a tool run printed and returned."""

    rc: int
    out: str
    err: str

    @property
    def text(self) -> str:
        """stdout and stderr together."""
        return self.out + self.err


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> Ran:
    """Run a command, capture everything."""
    full_env = {**os.environ, **(env or {})}
    p = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, check=False)
    return Ran(p.returncode, p.stdout, p.stderr)


# --- cloud-init --------------------------------------------------------------------------------

def cloud_init_schema(user_data: Path) -> Ran:
    """``cloud-init schema --config-file`` (the distro's cloud-init)."""
    return run([require("cloud-init"), "schema", "--config-file", str(user_data)])


_STRICT = r"""
import json, sys, yaml
from cloudinit.config.schema import get_schema
schema = get_schema()
known = set(schema.get("properties", {})).union(
    *(d.get("properties", {}) for d in schema.get("$defs", {}).values()))
text = open(sys.argv[1], encoding="utf-8").read()
errs = [] if text.startswith("#cloud-config\n") else ['first line must be "#cloud-config"']
cfg = yaml.safe_load(text)
if not isinstance(cfg, dict):
    errs.append("top level is not a mapping")
else:
    errs += [f"unknown top-level key {k!r}" for k in cfg if k not in known]
print(json.dumps(errs))
"""


def cloud_init_unknown_keys(user_data: Path) -> list[str]:
    """Top-level keys no cloud-init module declares (cloud-init 22.4's schema lets them through)."""
    require("cloud-init")
    ran = run(["/usr/bin/python3", "-c", _STRICT, str(user_data)])
    assert ran.rc == 0, ran.text
    errs: list[str] = json.loads(ran.out)
    return errs


_PARTS = r"""
import json, sys
from cloudinit import helpers, user_data
msg = user_data.UserDataProcessor(helpers.Paths({})).process(open(sys.argv[1], "rb").read())
print(json.dumps([[p.get_content_type(), p.get_filename()] for p in msg.walk() if not p.is_multipart()]))
"""


def cloud_init_parts(user_data: Path) -> list[tuple[str, str]]:
    """(content type, file name) of each part, as cloud-init's own user-data processor sees them (the name
    a shell script part is written under in /var/lib/cloud/instance/scripts/)."""
    require("cloud-init")
    ran = run(["/usr/bin/python3", "-c", _PARTS, str(user_data)])
    assert ran.rc == 0, ran.text
    return [(kind, name) for kind, name in json.loads(ran.out)]


# --- shell -------------------------------------------------------------------------------------

def shellcheck(paths: list[Path]) -> Ran:
    """``shellcheck -x`` in gcc format (one finding per line)."""
    return run([require("shellcheck"), "-x", "-f", "gcc", *map(str, paths)])


def bash_n(path: Path) -> Ran:
    """``bash -n``: the script parses."""
    return run(["bash", "-n", str(path)])


# --- Packer ------------------------------------------------------------------------------------

def packer(args: list[str], cwd: Path | None = None) -> Ran:
    """Run the Debian packer (1.6.6) with telemetry off."""
    return run([require("packer"), *args], cwd=cwd, env={"CHECKPOINT_DISABLE": "1"})


def packer_console(folder: Path, expression: str) -> str:
    """What ``packer console`` prints for one expression over the templates in ``folder``."""
    p = subprocess.run(
        [require("packer"), "console", str(folder)],
        input=expression + "\n",
        text=True,
        capture_output=True,
        env={**os.environ, "CHECKPOINT_DISABLE": "1"},
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# example values of the variables a source requires (migbake.bake.packer.SOURCES); 192.0.2.0/24 is TEST-NET-1
EXAMPLE_VARS = {
    "ssh_host": "192.0.2.10",
    "gcp_project_id": "example-project",
    "azure_subscription_id": "00000000-0000-0000-0000-000000000000",
    "azure_managed_image_resource_group": "images-rg",
    "qemu_base_image": "https://images.example.com/gpu-base.qcow2",  # never fetched: the checksum is given
    "qemu_base_image_checksum": f"sha256:{'0' * 64}",
}


def packer_validate(packer_dir: Path, only: str = "", *, required: bool = True) -> Ran:
    """``packer validate [-only=SOURCE]`` with the chosen sources' required variables (``required``).

    The qemu source's default checksum is a file: URL that Packer fetches while validating, and its
    seed files must exist: an offline checksum and a throwaway seed (as `migbake bake` makes) stand in.
    """
    from migbake.bake.packer import SOURCES, qemu_seed

    args = ["validate"] + ([f"-only={only}"] if only else [])
    if required:
        args += [f"-var={v}={EXAMPLE_VARS[v]}" for s in SOURCES if s.name == only or not only for v in s.required]
    if only in ("", "qemu.image"):
        seed = Path(tempfile.mkdtemp(prefix="migbake-seed-"))
        args += [f"-var={v}" for v in qemu_seed(seed)]
        try:
            return packer([*args, str(packer_dir)])
        finally:
            shutil.rmtree(seed, ignore_errors=True)
    return packer([*args, str(packer_dir)])


def hcl_parse(path: Path) -> dict[str, object]:
    """Parse one HCL2 file with python-hcl2 (a real HCL2 parser)."""
    hcl2 = pytest.importorskip("hcl2") if not IN_CI else __import__("hcl2")
    with path.open(encoding="utf-8") as fh:
        data: dict[str, object] = hcl2.load(fh)
    return data


# --- systemd -----------------------------------------------------------------------------------

FAKE_KUBELET = """[Unit]
Description=fake kubelet (test fixture)
[Service]
ExecStart=/usr/bin/sleep infinity
[Install]
WantedBy=multi-user.target
"""
FAKE_MANAGER = """[Unit]
Description=fake packaged nvidia-mig-manager (test fixture)
DefaultDependencies=no
Before=kubelet.service
[Service]
Type=oneshot
ExecStart=/usr/bin/true
[Install]
WantedBy=multi-user.target
"""


class SystemdTree:
    """A root directory systemd can verify offline: stock units, stub binaries, fake kubelet/manager.

    Lives in a 0755 directory directly under /tmp, because ``systemd --test`` runs as nobody.
    """

    def __init__(self, *, kubelet_unit: str = "kubelet.service",
                 manager_unit: str = "nvidia-mig-manager.service", stubs: tuple[str, ...] = (),
                 extra_units: tuple[str, ...] = ()) -> None:
        require("systemd-analyze")
        self.base = Path(tempfile.mkdtemp(prefix="migbake-sd-", dir="/tmp"))
        os.chmod(self.base, 0o755)
        self.root = self.base / "root"
        self.empty = self.base / "empty"
        self.empty.mkdir()
        r = self.root
        for d in ("usr/bin", "usr/lib/systemd", "etc/systemd/system", "usr/local/nvidia/bin"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.symlink("usr/bin", r / "bin")
        os.symlink("usr/lib", r / "lib")
        os.symlink("usr/sbin", r / "sbin") if (r / "usr/sbin").exists() else None
        shutil.copytree(HOST_UNITS, r / "usr/lib/systemd/system", symlinks=True)
        for exe in ("sh", "sleep", "true", "nvidia-smi", "nvidia-mig-parted", *stubs):
            target = r / exe.lstrip("/") if exe.startswith("/") else r / "usr/bin" / exe
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("#!/bin/sh\nexit 0\n")
            target.chmod(0o755)
        (r / "usr/lib/systemd/system" / kubelet_unit).write_text(FAKE_KUBELET)
        (r / "usr/lib/systemd/system" / manager_unit).write_text(FAKE_MANAGER)
        for unit in extra_units:  # other GPU consumers (slurmd, ...), enabled like kubelet
            name = unit.split("@")[0] + "@.service" if "@" in unit else unit
            (r / "usr/lib/systemd/system" / name).write_text(FAKE_KUBELET.replace("fake kubelet", f"fake {name}"))
        self.systemctl("enable", kubelet_unit, manager_unit, *extra_units)

    def install_rootfs(self, rootfs: Path) -> None:
        """Copy a generated rootfs/ tree into the root (as the provisioner would, without enabling)."""
        shutil.copytree(rootfs, self.root, dirs_exist_ok=True, symlinks=True)

    def systemctl(self, *args: str) -> Ran:
        """``systemctl --root=ROOT ...`` (offline)."""
        return run(["systemctl", f"--root={self.root}", "--quiet", *args])

    def verify(self, *units: str) -> Ran:
        """``systemd-analyze verify --root`` of units inside the tree."""
        subprocess.run(["chmod", "-R", "a+rX", str(self.base)], check=True)
        return run(["systemd-analyze", "verify", f"--root={self.root}", "--man=no", *units])

    def boot_graph(self, unit: str = "multi-user.target") -> Ran:
        """``systemd --test`` as nobody: every unit's dependencies and the boot's start jobs."""
        subprocess.run(["chmod", "-R", "a+rX", str(self.base)], check=True)
        return boot_graph(self.root, self.empty, unit)

    def cleanup(self) -> None:
        """Remove the tree."""
        shutil.rmtree(self.base, ignore_errors=True)


def boot_graph(root: Path, empty: Path, unit: str = "multi-user.target") -> Ran:
    """``systemd --test`` as nobody over the units of ``root`` (which nobody must be able to read)."""
    if not SYSTEMD_BIN.exists():
        require(str(SYSTEMD_BIN))
    env = {
        "HOME": "/tmp",
        "SYSTEMD_UNIT_PATH": f"{root}/etc/systemd/system:{root}/usr/lib/systemd/system:{root}/lib/systemd/system",
        "SYSTEMD_GENERATOR_PATH": str(empty),
        "SYSTEMD_ENVIRONMENT_GENERATOR_PATH": str(empty),
    }
    return run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(SYSTEMD_BIN), "--test",
                "--system", f"--unit={unit}", "--no-pager"], env=env)


def unit_section(dump: str, unit: str) -> str:
    """The part of a ``systemd --test`` dump that describes ``unit``."""
    lines = dump.splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("\t-> Unit "):
            inside = line.strip() == f"-> Unit {unit}:"
            continue
        if line.startswith("-> ") and not line.startswith("\t"):
            inside = False
        if inside:
            out.append(line.strip())
    return "\n".join(out)


def boot_jobs(dump: str) -> list[str]:
    """Units the boot transaction starts (``Action: X -> start``)."""
    jobs: list[str] = []
    started = False
    for line in dump.splitlines():
        if line.startswith("-> By jobs:"):
            started = True
        if started and "Action:" in line and "-> start" in line:
            jobs.append(line.split("Action:")[1].split("->")[0].strip())
    return jobs


# --- nvidia-mig-parted (NVIDIA's own parser) ----------------------------------------------------

MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
MIG_PARTED_CHECKS: list[str] = []  # "FILE -c NAME" for every config the real parser judged in this run
_CANONICAL_FILTER = r"0x[0-9A-F]{8}"


def mig_parted_valid(config: Path, name: str) -> Ran:
    """``nvidia-mig-parted assert --valid-config -f CONFIG -c NAME``: NVIDIA's strict parser, no GPU needed.

    The v0.15.0 binary in ../shared/tools (skipped locally when absent, a failure in CI). It reads YAML
    1.1 (go-yaml v2), checks version, keys, devices, mig-enabled, profile names and counts, and that
    config NAME exists; it does not check device-filter strings (see ``device_filter_problems``).
    """
    tool = shared_file(MIG_PARTED)
    ran = run([str(tool), "assert", "--valid-config", "-f", str(config), "-c", name], timeout=60)
    MIG_PARTED_CHECKS.append(f"{config.name} -c {name}")
    return ran


def mig_parted_refusals(configs: list[tuple[Path, str]]) -> list[str]:
    """``mig_parted_valid`` over many (FILE, NAME) pairs in one shell loop; what the parser refused."""
    tool = shared_file(MIG_PARTED)
    script = ('t=$1; shift; while [ $# -gt 0 ]; do out=$("$t" assert --valid-config -f "$1" -c "$2" 2>&1) '
              '|| printf "%s -c %s: %s\\n" "$1" "$2" "$out"; shift 2; done')
    args = [str(x) for f, n in configs for x in (f, n)]
    ran = run(["bash", "-c", script, "_", str(tool), *args], timeout=600)
    assert ran.rc == 0, ran.text
    MIG_PARTED_CHECKS.extend(f"{f.name} -c {n}" for f, n in configs)
    return ran.out.splitlines()


def device_filter_problems(text: str) -> list[str]:
    """Our own check of what mig-parted does not check: every device-filter a catalog PCI id, 0x + 8 hex."""
    import re

    from migbake.gpu.catalog import load_catalog

    cat, bad = load_catalog(), []
    for name, entries in (yaml.safe_load(text).get("mig-configs") or {}).items():
        for i, entry in enumerate(entries or []):
            found = entry.get("device-filter", []) if isinstance(entry, dict) else []
            for f in [found] if isinstance(found, str) else found:
                if not isinstance(f, str) or not re.fullmatch(_CANONICAL_FILTER, f) or cat.by_pci_id(f) is None:
                    bad.append(f"{name}/{i}: device-filter {f!r}")
    return bad


def assert_mig_parted_accepts(text: str, names: list[str] | None, where: Path) -> list[str]:
    """Write the config ``text`` to ``where``; NVIDIA's parser must accept each config in ``names``.

    ``names`` None: every config of the file (as PyYAML reads the names: pass them explicitly where
    YAML 1.1 readers disagree). Also runs our own device-filter check. Returns the names checked.
    """
    where.write_text(text, encoding="utf-8")
    if names is None:
        names = [str(n) for n in yaml.safe_load(text)["mig-configs"]]
    for name in names:
        ran = mig_parted_valid(where, name)
        assert ran.rc == 0 and "Selected MIG configuration is valid" in ran.text, (
            f"nvidia-mig-parted assert --valid-config -f {where} -c {name!r} refused it:\n{ran.text}\n{text}")
    assert device_filter_problems(text) == []
    return names


# --- nodeadm (AWS's own NodeConfig parser; ../shared/tools/nodeadm/README.md) -----------------

NODEADM = REPO.parent / "shared" / "tools" / "nodeadm" / "nodeadm"
# the cluster settings nodeadm's validation needs (its README's example NodeConfig)
NODECONFIG_CLUSTER = """  cluster:
    name: my-cluster
    apiServerEndpoint: https://example.com
    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=
    cidr: 10.100.0.0/16
"""


def nodeadm(command: str, *sources: Path) -> Ran:
    """``nodeadm config check|dump -c file://SOURCE ...`` (merged in order), never the instance metadata service.

    ``file://`` reads a document as it is: gunzip (and base64-decode) compressed user data first, as the
    node's IMDS source does (README).
    """
    tool = shared_file(NODEADM)
    args = [a for s in sources for a in ("-c", f"file://{s.resolve()}")]
    return run([str(tool), "config", command, *args], env={"AWS_EC2_METADATA_DISABLED": "true"})


def nodeadm_merged(*sources: Path) -> dict[str, Any]:
    """The NodeConfig nodeadm merges from ``sources`` (``config dump``: no validation; check is separate)."""
    ran = nodeadm("dump", *sources)
    assert ran.rc == 0, ran.text
    merged: dict[str, Any] = json.loads(ran.out)
    return merged


# ansible-playbook's own default output, its results as JSON: the `json` stdout callback is not ansible-core's
# since 2.19 (it moved to the ansible.posix collection), and the judges install ansible-core alone
ANSIBLE_JSON_RESULTS = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}


def ansible_debug_messages(out: str) -> dict[str, list[Any]]:
    """Every ``ok: [HOST] => {...}`` result with a ``msg`` in ansible-playbook's output, per host, in order."""
    import re

    found: dict[str, list[Any]] = {}
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^ok: \[([^\]]+)\] => ", out, re.M):
        result, _ = decoder.raw_decode(out, m.end())
        if isinstance(result, dict) and "msg" in result:
            found.setdefault(m.group(1), []).append(result["msg"])
    return found
