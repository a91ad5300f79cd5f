"""The per-layout PXE seeds: ``cloud-init/layouts/NAME/user-data`` and ``kickstart/layouts/NAME.ks``.

For a profile with named layouts read from the file source, each seed writes its name to /etc/migbake/layout
(cloud-init ``write_files``, a line of the Kickstart %post), judged by ``cloud-init schema`` and ``ksvalidator``;
``generate --layout NAME`` writes that seed as the top-level user-data and %post; an unknown name is refused,
located, with the closest name. The boot of a seed is tests/vm/test_boot_real.py's (h100-h200-inference by
cloud-init).
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest
import yaml
from pykickstart.parser import KickstartParser
from pykickstart.version import makeVersion
from realtools import cloud_init_schema, require, run
from support import REPO, cli
from test_ansible_kickstart import minimal_kickstart

from migbake.render.plan import LAYOUT_FILE

IMAGE = REPO / "images" / "h100-h200-inference"  # mig.layouts inference, training; restore.layout.from names file
PROFILE = IMAGE / "node-profile.yaml"
NAMES = ("inference", "training")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seeds") / "out"
    rc, _, err = cli("generate", str(PROFILE), "-o", str(out), "--user-data-gzip")
    assert rc == 0, err
    return out


def written_files(user_data: Path) -> dict[str, str]:
    """``write_files``' paths and contents, as cloud-init reads the document."""
    config = yaml.safe_load(user_data.read_text())
    return {f["path"]: f["content"] for f in config["write_files"]}


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_each_cloud_init_seed_writes_its_layout_name(out: Path, name: str) -> None:
    seed = out / f"cloud-init/layouts/{name}/user-data"
    files = written_files(seed)
    assert files[LAYOUT_FILE] == f"{name}\n"
    # the rest is the plain user-data's: every rootfs file, and no layout file there (the default decides)
    plain = written_files(out / "cloud-init/user-data")
    assert LAYOUT_FILE not in plain
    assert {k: v for k, v in files.items() if k != LAYOUT_FILE} == plain
    assert gzip.decompress((seed.parent / "user-data.gz").read_bytes()) == seed.read_bytes()


@pytest.mark.realtool
@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_cloud_init_accepts_each_seed(out: Path, name: str) -> None:
    result = cloud_init_schema(out / f"cloud-init/layouts/{name}/user-data")
    assert result.rc == 0 and "Valid cloud-config" in result.text, result.text


@pytest.mark.realtool
@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_ksvalidator_accepts_each_seed(out: Path, name: str, tmp_path: Path) -> None:
    ks = minimal_kickstart(out / f"kickstart/layouts/{name}.ks", tmp_path / "node.ks")
    result = run([require("ksvalidator"), "-e", "-i", "-v", "RHEL9", str(ks)])
    assert result.rc == 0 and "error" not in result.text.lower(), result.text


def _after_install(path: Path) -> list[str]:
    """The %post's own lines after the bake's install script (the embedded files come before it)."""
    parser = KickstartParser(makeVersion("RHEL9"))
    parser.readKickstart(str(path))
    (post,) = parser.handler.scripts
    lines = str(post.script).splitlines()
    return lines[next(i for i, line in enumerate(lines) if "scripts/install-mig-restore.sh" in line) + 1:]


def test_each_kickstart_seed_writes_its_layout_name(out: Path, tmp_path: Path) -> None:
    """The %post's lines that touch the layout file, run against a scratch root, leave the name there."""
    for name in NAMES:
        lines = [line for line in _after_install(out / f"kickstart/layouts/{name}.ks") if "'/etc/migbake" in line]
        assert lines
        root = tmp_path / name
        body = "\n".join(line.replace("'/etc/migbake", "\"$ROOT\"'/etc/migbake") for line in lines)
        subprocess.run(["bash", "-euc", body], env={"ROOT": str(root), "PATH": "/usr/bin:/bin"}, check=True)
        written = root / LAYOUT_FILE.lstrip("/")
        assert written.read_text() == f"{name}\n" and written.stat().st_mode & 0o777 == 0o644
    assert not [line for line in _after_install(out / "kickstart/mig-restore.ks") if "/etc/migbake" in line]


def test_generate_layout_writes_that_seed_at_the_top(out: Path, tmp_path: Path) -> None:
    one = tmp_path / "training"
    rc, _, err = cli("generate", str(PROFILE), "-o", str(one), "--layout", "training", "--user-data-gzip")
    assert rc == 0, err
    assert (one / "cloud-init/user-data").read_bytes() == (out / "cloud-init/layouts/training/user-data").read_bytes()
    assert (one / "cloud-init/user-data.gz").read_bytes() == (out / "cloud-init/layouts/training/user-data.gz"
                                                               ).read_bytes()
    assert (one / "kickstart/mig-restore.ks").read_bytes() == (out / "kickstart/layouts/training.ks").read_bytes()
    # --check compares with the --layout OUT was generated with, and says how to regenerate it
    rc, said, err = cli("generate", str(PROFILE), "-o", str(one), "--check")
    assert rc == 0, said + err
    (one / "cloud-init/user-data").write_text("#cloud-config\n")
    rc, said, err = cli("generate", str(PROFILE), "-o", str(one), "--check")
    assert rc == 1 and "--layout training" in err, err


@pytest.mark.parametrize(("profile", "name", "said"), [
    (PROFILE, "inferance", ["node-profile.yaml:20:", "/gpus/0/mig/layouts has no such layout",
                            "allowed: inference, training", "did you mean 'inference'?"]),
    (REPO / "images/h100-slurm/node-profile.yaml", "training", ["one unnamed layout (mig.layout)"]),
], ids=["typo", "unnamed"])
def test_an_unknown_layout_is_refused_and_nothing_written(profile: Path, name: str, said: list[str],
                                                           tmp_path: Path) -> None:
    rc, _, err = cli("generate", str(profile), "-o", str(tmp_path / "o"), "--layout", name)
    assert rc == 2, err
    assert "--layout" in err and all(s in err for s in said), err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_no_seed_where_the_restore_does_not_read_the_file(tmp_path: Path) -> None:
    """Without file in restore.layout.from a seed's layout file would never be read: no seeds, --layout refused."""
    text = PROFILE.read_text().replace("from: [kubelet-labels, credential, file]", "from: [kubelet-labels, credential]")
    assert text != PROFILE.read_text()
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(text)
    rc, _, err = cli("generate", str(profile), "-o", str(tmp_path / "o"))
    assert rc == 0, err
    assert not (tmp_path / "o/cloud-init/layouts").exists() and not (tmp_path / "o/kickstart/layouts").exists()
    rc, _, err = cli("generate", str(profile), "-o", str(tmp_path / "p"), "--layout", "training")
    assert rc == 2 and "does not name file" in err and "node-profile.yaml:" in err, err
