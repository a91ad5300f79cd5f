"""document/jsontext.py: Python's json text, written faster (a string without escapes, the indented form)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from migbake.document.jsontext import pretty, string

# long runs (the fast path starts at 64 characters) of characters kept as they are, and ones json escapes
TEXT = st.lists(st.sampled_from(["a", "Z", "%2F", "+/=", " ", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028",
                                 "😀", "x" * 70, "data:;base64," + "Qk" * 40]), max_size=12).map("".join)
KEYS = st.one_of(TEXT, st.sampled_from(["path", "mode", "contents"]))
LEAVES = st.one_of(TEXT, st.integers(-(10**20), 10**20), st.booleans(), st.none(),
                   st.floats(allow_nan=False), st.just([]), st.just({}))
DATA = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                    st.dictionaries(KEYS, inner, max_size=4),
                                                    st.dictionaries(st.integers(0, 3), inner, max_size=2)),
                    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_a_string_is_json_s(text: str) -> None:
    assert string(text) == json.dumps(text, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(DATA)
def test_pretty_is_json_s_indented_text(data: Any) -> None:
    assert pretty(data) == json.dumps(data, indent=2, ensure_ascii=False)


def test_a_str_subclass_and_an_int_subclass_are_written_as_json_writes_them() -> None:
    class Word(str):
        pass

    data = {Word("k"): [Word("v" * 80), True, 3, None]}
    assert pretty(data) == json.dumps(data, indent=2, ensure_ascii=False)
