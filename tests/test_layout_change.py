"""A one-line layout change rewrites only the files whose content depends on the layout (issue 36).

The profile's sha256 is recorded in OUT's marker alone, never in a generated file's header, so
``generate --check`` and a code review see the files the change touches and nothing else.
"""

from __future__ import annotations

import base64
import email
import gzip
import json
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support import IMAGES, cli

from migbake import __version__
from migbake.render.tree import TARGETS, Target
from migbake.render.write import OUTPUT_MARKER

IMAGES_BY_NAME = {i.name: i for i in IMAGES}

# files that never depend on a layout: whatever the count, they must come out byte for byte the same
LAYOUT_FREE = (
    "packer/plugins/amazon/required-plugins.pkr.hcl",
    "packer/plugins/qemu/required-plugins.pkr.hcl",
    "packer/variables.pkr.hcl",
    "packer/sources.pkr.hcl",
    "packer/build.pkr.hcl",
    "packer/scripts/install-mig-restore.sh",
    "packer/scripts/disable-mig-manager.sh",
    "scripts/uninstall-mig-restore.sh",
    "scripts/capture-mig-config.sh",
    "ansible/install.yml",
    "ansible/activate.yml",
    "ansible/roles/mig_restore/tasks/main.yml",
)


# files that exist only for some layouts: Bottlerocket's settings say one profile per GPU model at its full
# count, so a count lowered by one leaves it without a file (migbake show says why)
LAYOUT_SHAPED = {"bottlerocket/settings.toml"}


def plain(path: str, data: bytes) -> str | None:
    """A target whose files carry nothing encoded: their text."""
    return data.decode()


def _data_urls(value: object) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _data_urls(v)]
    if isinstance(value, list):
        return [t for v in value for t in _data_urls(v)]
    if isinstance(value, str) and value.startswith("data:"):
        head, _, data = value.partition(",")
        return [base64.b64decode(data).decode() if head.endswith(";base64") else urllib.parse.unquote(data)]
    return []


def butane(path: str, data: bytes) -> str | None:
    """An Ignition config's or a MachineConfig's data: URLs (rootfs/'s files, each)."""
    text = data.decode()
    if not path.endswith((".ign", ".yaml")):
        return text
    return text + "\n".join(_data_urls(json.loads(text) if path.endswith(".ign") else yaml.safe_load(text)))


def _unpack(raw: bytes) -> bytes:
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def cluster_api(path: str, data: bytes) -> str | None:
    """A KubeadmConfigTemplate's base64 (and gzip) files (rootfs/'s files, each)."""
    text = data.decode()
    spec = yaml.safe_load(text)["spec"]["template"]["spec"]
    return text + "\n".join(_unpack(base64.b64decode(f["content"])).decode() for f in spec.get("files", []))


def _cloud_config(text: str) -> str:
    """A cloud-config with its gzip+base64 write_files decoded."""
    doc = yaml.safe_load(text) or {}
    return text + "\n".join(_unpack(base64.b64decode(f["content"])).decode() for f in doc.get("write_files", [])
                            if f.get("encoding") == "gzip+base64")


def _mime(text: str) -> str:
    """A multi-part user-data's parts, each decoded (a cloud-config's gzip+base64 files too)."""
    parts = [p.get_payload(decode=True).decode() for p in email.message_from_string(text).walk()
             if not p.is_multipart()]
    return text + "\n".join(_cloud_config(p) if p.startswith("#cloud-config") else p for p in parts)


def karpenter(path: str, data: bytes) -> str | None:
    """An EC2NodeClass's userData: a MIME document whose cloud-config carries rootfs/'s files gzip+base64 (the
    NodePools of named layouts carry nothing encoded)."""
    text = data.decode()
    if path.endswith("/nodepools.yaml"):
        return text
    return text + _mime(yaml.safe_load(text)["spec"]["userData"])


def user_data(path: str, data: bytes) -> str | None:
    """cloud-init/user-data.gz, .mime and .mime.gz: the user-data inflated, the MIME parts decoded."""
    if not path.endswith((".gz", ".mime")):
        return None  # cloud-init's own user-data
    text = _unpack(data).decode()
    return _mime(text) if path.endswith((".mime", ".mime.gz")) else text


# how the layout shows in each target's files: every declared target (render.tree.TARGETS) has a decoder, which
# decodes what it carries of other targets' files (``plain``: nothing encoded); None: not a file of this target
DECODERS: dict[str, Callable[[str, bytes], str | None]] = {
    "rootfs": plain, "cloud-init": plain, "user-data": user_data, "packer": plain, "scripts": plain,
    "slurm": plain, "kubernetes": plain, "ansible": plain, "kickstart": plain, "butane": butane,
    "bottlerocket": plain, "karpenter": karpenter, "cluster-api": cluster_api,
}


def undecoded(targets: tuple[Target, ...], decoders: dict[str, Callable[[str, bytes], str | None]]) -> list[str]:
    """The declared targets without a decoder, and the decoders of no declared target."""
    names = {t.name for t in targets}
    return sorted((names - set(decoders)) | (set(decoders) - names))


def _readable(path: str, data: bytes) -> str:
    """The file's text, with what it carries of other targets' files decoded (by the last declared target
    writing its folder that claims it: the user-data forms before cloud-init's own user-data)."""
    folder = path.split("/", 1)[0]
    for t in reversed(TARGETS):
        if folder in t.folders:
            text = DECODERS[t.name](path, data)
            if text is not None:
                return text
    return data.decode()  # the marker


def _generate(profile: Path, out: Path, tmp_path: Path) -> Path:
    """``generate`` with both user-data forms (so that the user-data target's files are in the tree too)."""
    part = tmp_path / "part.sh"
    part.write_text("#!/bin/sh\necho hi\n")
    code, _, err = cli("generate", str(profile), "-o", str(out), "--user-data-gzip", "--user-data-mime", str(part))
    assert code == 0, err
    return out


def _tree(out: Path) -> dict[str, str]:
    return {path: _readable(path, p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()
            for path in [p.relative_to(out).as_posix()]}


def test_every_declared_target_has_a_decoder() -> None:
    assert undecoded(TARGETS, DECODERS) == []
    new = Target("example-new", ("example-new",), TARGETS[0].render, doc="a target declared without a decoder")
    assert undecoded((*TARGETS, new), DECODERS) == ["example-new"]
    assert undecoded(TARGETS, {**DECODERS, "gone": plain}) == ["gone"]


def test_the_decoders_read_the_carried_files(tmp_path: Path) -> None:
    # the rootfs config's layout line shows through every encoding a target carries the config in
    out = _generate(IMAGES_BY_NAME["h200-inference"] / "node-profile.yaml", tmp_path / "out", tmp_path)
    def flat(text: str) -> str:  # each carrier indents the config its own way
        return " ".join(text.split())

    body = "mig-devices: 1g.18gb: 7"
    assert body in flat((out / "rootfs/etc/nvidia-mig/config.yaml").read_text())
    for path in ("karpenter/ec2nodeclass.yaml", "butane/fcos.ign", "cloud-init/user-data.gz",
                 "cloud-init/user-data.mime", "cloud-init/user-data.mime.gz"):
        data = (out / path).read_bytes()
        assert body not in flat(data.decode(errors="replace")), path
        assert body in flat(_readable(path, data)), path


def _one_count_less(text: str) -> tuple[str, str]:
    """The profile with its first layout count of 2 or more lowered by one, and that MIG profile's name."""
    found = re.search(r"^( +)(\d+g\.\d+gb(?:\+me)?): ([2-9])$", text, re.M)
    assert found, "the example profile has no layout count of 2 or more"
    indent, name, count = found.groups()
    changed = text[: found.start()] + f"{indent}{name}: {int(count) - 1}" + text[found.end():]
    return changed, name


@pytest.mark.parametrize("image", IMAGES, ids=[i.name for i in IMAGES])
def test_a_layout_count_changes_only_the_files_that_depend_on_it(image: Path, tmp_path: Path) -> None:
    before_text = (image / "node-profile.yaml").read_text()
    after_text, mig_profile = _one_count_less(before_text)
    trees = {}
    for label, text in (("before", before_text), ("after", after_text)):
        (tmp_path / f"{label}.yaml").write_text(text)
        trees[label] = _tree(_generate(tmp_path / f"{label}.yaml", tmp_path / label, tmp_path))
    before, after = trees["before"], trees["after"]
    assert set(before) ^ set(after) <= LAYOUT_SHAPED
    changed = {p for p in set(before) & set(after) if before[p] != after[p]}

    # the marker records the profile's sha256 (so it changes); no other file carries it
    shas = {label: re.search(r"^sha256: ([0-9a-f]{64})$", trees[label][OUTPUT_MARKER], re.M) for label in trees}
    assert all(shas.values()) and shas["before"] != shas["after"]  # type: ignore[union-attr]
    for label, tree in trees.items():
        sha = shas[label].group(1)  # type: ignore[union-attr]
        assert [p for p, t in tree.items() if sha in t or sha[:16] in t] == [OUTPUT_MARKER]

    # every other changed file names the layout it changed; what does not name it is the same
    for path in changed - {OUTPUT_MARKER}:
        assert mig_profile in before[path] and mig_profile in after[path], path
    assert {p for p in before if mig_profile not in before[p] and mig_profile not in after[p]} & changed \
        == {OUTPUT_MARKER}
    for path in LAYOUT_FREE:
        assert path not in changed, path
    assert "rootfs/etc/nvidia-mig/config.yaml" in changed
    assert len(changed) < len(before) / 2, sorted(changed)

    # headers name the profile and migbake's version
    name = re.search(r"^name: (\S+)$", before_text, re.M).group(1)  # type: ignore[union-attr]
    head = f"# Generated by migbake {__version__} from node profile '{name}'.\n"
    assert after["scripts/uninstall-mig-restore.sh"].splitlines(keepends=True)[1] == head
