"""``gpu.placement.per_model``: a placement answer is remembered for one model object and layout, never shared
with another model (a catalog file's model of the same key), and ``fit`` answers as a fresh search does."""

from __future__ import annotations

import dataclasses

import pytest

from migbake.gpu import placement
from migbake.gpu.catalog import load_catalog
from migbake.gpu.driverplacement import placements_of, predict
from migbake.gpu.search import Budget


def test_an_answer_is_remembered_per_model_object_and_layout() -> None:
    asked: list[object] = []

    @placement.per_model
    def find(model: object, layout: object) -> int:
        asked.append((model, layout))
        return len(asked)

    model = load_catalog().by_key("h200-141gb")
    assert find(model, {"1g.18gb": 7}) == find(model, {"1g.18gb": 7}) == 1
    assert find(model, {"1g.18gb": 6}) == 2
    assert find(dataclasses.replace(model), {"1g.18gb": 7}) == 3  # same key, another model: asked again
    assert find(model, {"1g.18gb": [7]}) == 4  # a layout that cannot be a key: asked every time
    assert find(model, {"1g.18gb": [7]}) == 5


def test_fit_and_placements_answer_as_a_fresh_search() -> None:
    model = load_catalog().by_key("h200-141gb")
    for layout in ({"1g.18gb": 7}, {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}, {"7g.141gb": 2}):
        assert placement.fit(model, layout) == placement._fit_within(model, layout, Budget())
        assert placement.fit(model, layout) is placement.fit(model, layout)
        fresh = predict(model, layout)
        assert placements_of(model, layout) == (fresh if fresh is not None else
                                                placement._fit_within(model, layout, Budget()).placements)


def test_remembering_can_be_turned_off() -> None:
    asked: list[object] = []

    @placement.per_model
    def find(model: object, layout: object) -> int:
        asked.append(layout)
        return len(asked)

    model = load_catalog().by_key("h200-141gb")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(placement, "REMEMBER", False)
        assert [find(model, {"1g.18gb": 7}) for _ in range(2)] == [1, 2]
    assert find(model, {"1g.18gb": 7}) == find(model, {"1g.18gb": 7}) == 3
