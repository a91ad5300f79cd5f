"""A one-line layout change rewrites only the files whose content depends on the layout.

The profile's sha256 is recorded in OUT's marker alone, never in a generated file's header, so
``generate --check`` and a code review see the files the change touches and nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import IMAGES, cli

from migbake import __version__
from migbake.render.payloads import readable
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


def _readable(path: str, data: bytes) -> str:
    """The file's text, each payload in it decoded (``payloads.readable``: what ``--check`` compares)."""
    text = readable(path, data)
    assert text is not None, path
    return text


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


def test_the_carried_files_read_decoded(tmp_path: Path) -> None:
    # the rootfs config's layout line shows through every encoding a target carries the config in
    full = tmp_path / "node-profile.yaml"  # Karpenter's full form: its userData carries the config too
    full.write_text((IMAGES_BY_NAME["h200-inference"] / "node-profile.yaml").read_text()
                    + "karpenter: {user_data: full}\n")
    out = _generate(full, tmp_path / "out", tmp_path)
    def flat(text: str) -> str:  # each carrier indents the config its own way (a decoded payload's lines: "  | ")
        return " ".join(re.sub(r"(?m)^(?:[ ]*\|)+", "", text).split())

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
