"""What the tests share: the repository, the example images, a helper that generates into a folder, and
the argv of each command line in a ``systemd --test`` dump.

(Not in conftest.py: tests/vm has a conftest of its own, and `from conftest import` would be ambiguous.)
"""

from __future__ import annotations

import inspect
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click.testing
import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
IMAGES = sorted(p.parent for p in (REPO / "images").glob("*/node-profile.yaml"))
# the images whose kubelet waits for the restore (a driver container's node holds its GPU plugins instead, and its
# export --gpu-operator writes Helm values, not the MIG manager's ConfigMap)
HELD_KUBELET = [p for p in IMAGES if "driver: container" not in (p / "node-profile.yaml").read_text()]
# real nvidia-smi/NVML output of an H200, recorded on the machine (see its README.md)
H200_FIXTURES = REPO / "tests" / "fixtures" / "h200"
H200_EXPORT = REPO / "tests/fixtures/mig-parted-export-h200-7x1g.yaml"  # an export's shape: 7x 1g.18gb
CASES_ROOT = REPO / "tests/cases"  # invalid/, warning/, valid/: one folder per profile
SHARED = REPO.parent / "shared"  # the team's shared folder beside the checkout (reference copies only)
# the real third-party judges the tests run (NVIDIA's nvidia-mig-parted, CoreOS's butane and ignition-validate,
# AWS's nodeadm), in ../shared/tools beside the checkout, where .ci/fetch-tools builds them
TOOLS = SHARED / "tools"
# what a missing file under ../shared is, in the skip/fail line: (folder under ../shared, what it is)
_JUDGES = {
    "tools/nvidia-mig-parted": "NVIDIA's nvidia-mig-parted (the judge of every mig-parted config)",
    "tools/butane": "CoreOS's butane and ignition-validate (the judges of Butane and Ignition)",
    "tools/nodeadm": "AWS's nodeadm (the judge of NodeConfig user data)",
    "reference": "the team's reference copies (NVIDIA's configs, the GPU catalog)",
}


def _judge(path: Path) -> str:
    """What ``path`` is, for the one line a missing judge prints."""
    if path.is_relative_to(SHARED):
        rel = path.relative_to(SHARED).as_posix()
        for folder, what in _JUDGES.items():
            if rel == folder or rel.startswith(folder + "/"):
                how = ("run bash .ci/fetch-tools (CONTRIBUTING.md: the real tools)" if folder.startswith("tools/")
                       else "check out shared/ beside the repository")
                return f"{what}: {path} not found; {how}"
    return f"{path} is missing: check out shared/ beside the repository"


def shared_file(path: Path) -> Path:
    """``path`` under ../shared (a judge in ../shared/tools, or a reference copy): skipped when absent locally
    with one line naming it and how to get it, a failure in CI (CI=true).

    Only for what a user's checkout cannot have; the H200 fixtures are in tests/fixtures/.
    """
    if not path.exists():
        message = _judge(path)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def migbake_shell(command: str) -> str:
    """A bash script that runs ``command`` with ``migbake`` being this checkout's (a shell function: a path
    that contains "migbake" is left as it is, which a text replacement would break)."""
    python = shlex.quote(sys.executable)
    return f'migbake() {{ {python} -m migbake "$@"; }}\n{command}'


# click 8.1 (the declared floor) mixes stderr into stdout unless told; 8.2 keeps them apart and has no switch
_MIXES_STDERR = "mix_stderr" in inspect.signature(click.testing.CliRunner.__init__).parameters


class _BothStreams(click.testing.Result):
    @property
    def output(self) -> str:
        """What the terminal shows, stdout then stderr (click 8.2's ``output``; 8.1's is stdout alone)."""
        return self.stdout + self.stderr


class CliRunner(click.testing.CliRunner):
    """click's test runner with ``stdout``, ``stderr`` and ``output`` meaning the same on every click."""

    def __init__(self, **kwargs: Any) -> None:
        if _MIXES_STDERR:
            kwargs.setdefault("mix_stderr", False)
        super().__init__(**kwargs)

    def invoke(self, *args: Any, **kwargs: Any) -> click.testing.Result:
        result = super().invoke(*args, **kwargs)
        if _MIXES_STDERR:
            result.__class__ = _BothStreams
        return result


class NodeWorld:
    """The machine a test copy of the node scripts reads (CONTRIBUTING.md: testing the node scripts).

    The generated scripts take no path from their environment: ``render(profile, node=NodePaths(...))`` renders
    a copy with other paths. The copies the tests render read a folder of this test process, where ``root``,
    ``sys``, ``proc`` and ``run`` are links: a test points one at a tree of its own (``WORLD.point("sys", tree)``)
    before or after it renders, and every test starts from the defaults (an H200 on the PCI bus, an empty root,
    the real /proc and /run; ``tests/conftest.py`` resets them). The metadata servers' URL is rendered in: a
    test that serves them sets ``WORLD.network`` before it renders.
    """

    LINKS = ("root", "sys", "proc", "run")
    NO_NETWORK = "http://127.0.0.1:9"  # discard: nothing answers HTTP there

    def __init__(self) -> None:
        import atexit
        import shutil
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="migbake-node-"))
        atexit.register(shutil.rmtree, self.folder, True)
        self.gpu_sysfs = fake_sysfs(self.folder / "gpu-sysfs", [H200_3D])
        self.network = self.NO_NETWORK
        self._roots = 0
        self.reset()

    def path(self, name: str) -> Path:
        """The path the test copies read for ``name`` (one of ``LINKS``): a link to what the test points it at."""
        assert name in self.LINKS, name
        return self.folder / name

    def point(self, name: str, target: Path | str) -> None:
        """Let the test copies read ``target`` as ``name`` from now on (the link replaced at once)."""
        link = self.path(name)
        new = link.with_name(f".{name}.new")
        new.unlink(missing_ok=True)
        new.symlink_to(Path(target).absolute())
        new.replace(link)

    def reset(self) -> None:
        """The defaults: one H200 on the PCI bus, a fresh empty root, the real /proc and /run, no metadata server."""
        self._roots += 1
        empty = self.folder / f"empty-root-{self._roots}"
        empty.mkdir()
        for name, target in (("root", empty), ("sys", self.gpu_sysfs), ("proc", Path("/proc")), ("run", Path("/run"))):
            self.point(name, target)
        self.network = self.NO_NETWORK

    def paths(self) -> Any:
        """The ``NodePaths`` a test copy is rendered with."""
        from migbake.render.parts import NodePaths

        return NodePaths(root=str(self.path("root")), sys=str(self.path("sys")), proc=str(self.path("proc")),
                         run=str(self.path("run")), gce_metadata=self.network, ec2_imds=self.network)


def generate(profile_text: str, out: Path, name: str = "node-profile.yaml", *, node_root: bool = False,
             production: bool = False) -> Path:
    """Validate and render ``profile_text`` into ``out`` (asserting it is valid); returns ``out``.

    The node scripts are a test copy that reads ``WORLD`` (``production``: the real paths, as ``migbake
    generate`` writes them).

    ``node_root``: a node emulated under a test's folder, whose written paths (config, metrics) are there, not
    in their folders on a node: ``output-path-not-allowed`` is the only error allowed, every other must be absent.
    """
    import yaml

    from migbake.profile.nodeprofile import build_profile
    from migbake.render.tree import render
    from migbake.render.write import Origin, write_tree
    from migbake.rules.validate import check_bytes

    checked = check_bytes(profile_text.encode("utf-8"), name)
    profile = checked.profile
    if profile is None and node_root:
        others = [p for p in checked.problems if p.severity == "error" and p.rule != "output-path-not-allowed"]
        assert not others, "\n".join(p.format() for p in others)
        profile = build_profile(yaml.safe_load(profile_text), profile_text)
    assert profile is not None, "\n".join(p.format() for p in checked.problems)
    origin = Origin.of(name, out, profile.name, profile.source_sha256)  # Packer reads its sha256
    write_tree(render(profile) if production else render(profile, node=WORLD.paths()), out, origin=origin)
    return out


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``migbake ARGS`` in-process (click's runner): exit code, stdout, stderr."""
    from migbake.cli.group import main

    r = CliRunner().invoke(main, list(args), input=stdin, env=env)
    return r.exit_code, r.stdout, r.stderr


_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def decode_command_line(text: str) -> list[str]:
    """The argv of a ``systemd --test`` "Command Line:", as the process would get it.

    systemd prints words C-escaped in double quotes when needed, before the exec-time ``$$`` -> ``$``.
    """
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == " ":
            i += 1
            continue
        word: list[str] = []
        if text[i] == '"':
            i += 1
            while text[i] != '"':
                if text[i] != "\\":
                    word.append(text[i])
                    i += 1
                    continue
                nxt = text[i + 1]
                if nxt in _C_ESCAPES:
                    word.append(_C_ESCAPES[nxt])
                    i += 2
                elif nxt.isdigit():
                    word.append(chr(int(text[i + 1 : i + 4], 8)))
                    i += 4
                elif nxt == "x":
                    word.append(chr(int(text[i + 2 : i + 4], 16)))
                    i += 4
                else:
                    word.append(nxt)
                    i += 2
            i += 1
        else:
            while i < n and text[i] != " ":
                word.append(text[i])
                i += 1
        args.append("".join(word).replace("$$", "$"))
    return args


def unit_lines(dump: str, unit: str) -> list[str]:
    """The lines of a ``systemd --test`` dump about ``unit`` (split on newlines only: U+2028 is data)."""
    out: list[str] = []
    inside = False
    for line in dump.split("\n"):
        if line.startswith("\t-> Unit "):
            inside = line.strip() == f"-> Unit {unit}:"
            continue
        if line.startswith("-> "):
            inside = False
        if inside:
            out.append(line.strip())
    return out


def command_lines(dump: str, unit: str) -> list[list[str]]:
    """Every command of ``unit`` as argv lists, in the order systemd runs them."""
    return [
        decode_command_line(line[len("Command Line: ") :])
        for line in unit_lines(dump, unit)
        if line.startswith("Command Line: ")
    ]


# A PCI device in a fake sysfs tree: (address, vendor, device, class), as Linux's sysfs writes the files
PciDevice = tuple[str, str, str, str]
H200_3D: PciDevice = ("0000:18:00.0", "0x10de", "0x2335", "0x030200")  # an H200: NVIDIA, 3D controller


def fake_sysfs(root: Path, devices: list[PciDevice]) -> Path:
    """A sysfs tree under ``root`` with these PCI devices (bus/pci/devices/ADDRESS/{vendor,device,class}).

    A test copy of the generated scripts reads it where ``WORLD.point("sys", root)`` says.
    """
    folder = root / "bus/pci/devices"
    folder.mkdir(parents=True, exist_ok=True)
    for address, vendor, device, klass in devices:
        dev = folder / address
        dev.mkdir()
        for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
            (dev / name).write_text(value + "\n")
    return root


WORLD = NodeWorld()  # the machine the test copies of the node scripts read (one per test process)
