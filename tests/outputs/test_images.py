"""The example images: valid, and their committed generated output is exactly what generate writes."""

from __future__ import annotations

from pathlib import Path

from support import IMAGES, REPO

from migbake.render.tree import render
from migbake.render.write import Origin, diff_tree
from migbake.rules.validate import check_file


def test_there_are_at_least_three_images() -> None:
    assert len(IMAGES) >= 3, IMAGES


def test_image_profile_is_valid_without_warnings(image_dir: Path) -> None:
    checked = check_file(image_dir / "node-profile.yaml")
    assert checked.profile is not None
    assert checked.problems == []


def test_committed_output_is_up_to_date(image_dir: Path) -> None:
    checked = check_file(image_dir / "node-profile.yaml")
    assert checked.profile is not None
    out = image_dir / "generated"
    origin = Origin.of(str(image_dir / "node-profile.yaml"), out, checked.profile.name, checked.profile.source_sha256)
    assert origin.profile == "../node-profile.yaml"
    diff = diff_tree(render(checked.profile), out, origin)
    assert diff == [], (f"images/{image_dir.name}/generated is stale; run: migbake generate "
                        f"images/{image_dir.name}/node-profile.yaml -o images/{image_dir.name}/generated\n"
                        + "\n".join(diff[:80]))


def test_image_names_match_their_folder(image_dir: Path) -> None:
    checked = check_file(image_dir / "node-profile.yaml")
    assert checked.profile is not None
    assert checked.profile.name == image_dir.name
    assert (REPO / "images" / checked.profile.name).is_dir()
