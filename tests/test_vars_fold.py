"""The group data writer (render/ansiblevars.py): written directly (``_Writer``), double-quoted scalars a line
at a time, with the same bytes as PyYAML's emitter with the character-at-a-time writer and PyYAML's analysis
they replaced (kept here as the reference), and read back by PyYAML as the value written."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from migbake.document.patterns import CONTROL_BUT_LF
from migbake.problems import RenderError
from migbake.render import ansiblevars as quoting
from migbake.render.ansiblevars import Base64Text, _double_quoted, _Unsupported, _Writer, payload, vars_block, vars_yaml
from migbake.render.guard import Block, Checked, guard


class _OneAtATime(quoting._VarsDumper):
    """The reference: each character escaped and written alone, folding before it where the line would pass
    the width; every scalar analysed by PyYAML's own walk."""

    def analyze_scalar(self, scalar: str) -> yaml.emitter.ScalarAnalysis:
        return yaml.emitter.Emitter.analyze_scalar(self, scalar)

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        self.write_indicator('"', True)
        for i, ch in enumerate(text):
            piece = quoting._escaped(ch)
            if split and i and self.column + len(piece) + 1 > self.best_width:
                self.stream.write("\\")
                self.write_indent()
                self.whitespace = self.indention = False
                piece = "\\ " if ch == " " else piece
            self.stream.write(piece)
            self.column += len(piece)
        self.write_indicator('"', False)


def _reference(data: dict[str, object]) -> str:
    return str(yaml.dump(quoting._tagged(data), Dumper=_OneAtATime, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=quoting.WIDTH))


TEXT = st.lists(st.sampled_from([*list('ab \t\\"\x00\x1b\x85\u2028é€😀{}#:-\n'), "x" * 70, " " * 90, "y" * 200]),
                max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=4))
def test_the_run_writer_writes_the_bytes_of_the_one_at_a_time_writer(values: list[str]) -> None:
    data = {"mig_restore_files": [{"content": v, "path": "/etc/x"} for v in [*values, "\n".join(values) + "\n"]],
            "mig_restore_profile": values[0]}
    written = vars_yaml(data)
    assert written == _reference(data)
    back = yaml.safe_load(written.replace("!unsafe ", ""))
    assert [f["content"] for f in back["mig_restore_files"]] == [*values, "\n".join(values) + "\n"]


def test_a_long_line_folds_at_the_width() -> None:
    text = "a" * 300 + "\x01" + " " * 200
    written = vars_yaml({"k": text})
    assert written == _reference({"k": text})
    assert max(len(line) for line in written.splitlines()) <= quoting.WIDTH
    assert yaml.safe_load(written.replace("!unsafe ", ""))["k"] == text


def _one_at_a_time(text: str, column: int, indent: int, width: int) -> str:
    """The reference's double-quoted writing, alone: each character escaped and written, folding before it."""
    out = []
    for i, ch in enumerate(text):
        piece = quoting._escaped(ch)
        if i and column + len(piece) + 1 > width:
            out.append("\\\n" + " " * indent)
            column = indent
            piece = "\\ " if ch == " " else piece
        out.append(piece)
        column += len(piece)
    return "".join(out)


@settings(max_examples=500, deadline=None)
@given(TEXT, st.integers(0, 40), st.integers(0, 6), st.integers(12, 40))
def test_a_line_at_a_time_writes_the_bytes_of_a_character_at_a_time(text: str, column: int, indent: int,
                                                                    width: int) -> None:
    """Narrow widths, and a scalar that starts at or past the width: every fold, escape and first unit."""
    out: list[str] = []
    _double_quoted(text, column, indent, width, out)
    assert "".join(out) == _one_at_a_time(text, column, indent, width)


KEYS = st.sampled_from(["dest", "mode", "content", "a_b", "x.y", "k-1", "yes", "on", "null", "1", "0x1", "a b",
                        "é", "k" * 100, "k" * 130, ""])
LEAVES = st.one_of(TEXT, st.integers(-5, 10**6), st.booleans(), st.none(), st.just([]), st.just({}),
                   st.floats(allow_nan=False, allow_infinity=False))
DATA = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, DATA, min_size=1, max_size=5))
def test_the_direct_writer_writes_pyyamls_bytes_or_leaves_the_data_to_it(data: dict[str, Any]) -> None:
    """Any nesting of the kinds group data holds (and some it does not: odd keys, floats): ``vars_yaml`` writes
    PyYAML's bytes, directly where ``_Writer`` takes the data, through PyYAML where it does not."""
    assert vars_yaml(data) == _reference(data)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, DATA, min_size=1, max_size=5))
def test_a_checked_block_holds_no_control_character_whatever_the_data(data: dict[str, Any]) -> None:
    """What the guard does not search again (``Checked``): the writer's bytes, whose every string (control
    characters, NEL, line separators included) is escaped, base64 or a literal block without one; what the writer
    leaves to PyYAML stays a plain Block, which the guard searches."""
    block = vars_block("# intro\n", data)
    assert block == "# intro\n" + _reference(data).rstrip("\n")
    try:
        _Writer().document(data)
    except _Unsupported:
        assert type(block) is Block
    else:
        assert type(block) is Checked
        assert CONTROL_BUT_LF.search(block) is None


def test_the_guard_still_reads_a_checked_blocks_syntax_and_a_plain_blocks_controls() -> None:
    assert guard(Checked("a\x00b"), "yaml") == "a\x00b"  # taken as checked: the writer's word
    with pytest.raises(RenderError, match="cannot be printed in markdown"):
        guard(Checked("a -- b"), "markdown")
    with pytest.raises(RenderError, match="cannot be printed in yaml"):
        guard(Block("a\x00b"), "yaml")
    with pytest.raises(RenderError, match="holds the control character"):
        vars_block("# intro\x1b\n", {"k": "v"})


def test_every_example_images_group_data_is_written_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer is not a path the real data never takes: each example image's role data goes through it."""
    from migbake.render.targets import ansible
    from migbake.render.tree import render
    from migbake.rules.validate import check_bytes

    written: list[dict[str, Any]] = []
    blocks: list[Block] = []
    monkeypatch.setattr(ansible, "vars_block", lambda intro, data: written.append(data) or blocks.append(
        vars_block(intro, data)) or blocks[-1])
    images = sorted(Path(__file__).resolve().parents[1].glob("images/*/node-profile.yaml"))
    assert images
    for profile in images:
        checked = check_bytes(profile.read_bytes(), str(profile))
        assert checked.profile is not None
        render(checked.profile)
    assert len(written) == len(images)
    for data, block in zip(written, blocks):
        assert _Writer().document(data) == _reference(data)
        assert type(block) is Checked


def test_what_the_writer_does_not_take_goes_through_pyyaml() -> None:
    for data in ({"yes": "a"}, {"k": 1.5}, {"k" * 130: 1}, {}):
        with pytest.raises(_Unsupported):
            _Writer().document(data)
        assert vars_yaml(data) == _reference(data)


def _folds_as_one_at_a_time(text: str, column: int, indent: int, width: int, **options: bool) -> str:
    """``_double_quoted``'s bytes, and the column it returns, against the character-at-a-time writer's."""
    out: list[str] = []
    after = _double_quoted(text, column, indent, width, out, **options)
    written = "".join(out)
    assert written == _one_at_a_time(text, column, indent, width)
    last_line = written.rsplit("\n", 1)[-1]
    assert after == (column + len(written) if "\n" not in written else len(last_line))
    return written


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("abz09+/=é€"), max_size=400), st.integers(0, 40), st.integers(0, 6),
       st.integers(12, 40))
def test_text_of_one_character_units_folds_as_a_character_at_a_time(text: str, column: int, indent: int,
                                                                    width: int) -> None:
    """No space and no escape (base64: most of the group data's double-quoted text): the slicing path."""
    _folds_as_one_at_a_time(text, column, indent, width)


ASCII_TEXT = st.lists(st.sampled_from([*list('ab \t\\"\n#:-'), "\\\\\\", "x" * 70, " " * 90]), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(ASCII_TEXT, st.integers(0, 40), st.integers(0, 6), st.integers(12, 40))
def test_ascii_text_of_two_character_escapes_folds_as_a_character_at_a_time(text: str, column: int, indent: int,
                                                                           width: int) -> None:
    """Printable ASCII, tabs and line feeds (a file's text, mostly): every escape two characters long, the
    path that cuts a line only before an escape's backslash; runs of backslashes of either parity."""
    _folds_as_one_at_a_time(text, column, indent, width)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 40), st.integers(0, 6), st.integers(12, 40))
def test_base64_text_is_folded_as_a_character_at_a_time_without_a_look_for_escapes(data: bytes, column: int,
                                                                                  indent: int, width: int) -> None:
    """``payload``'s base64 (``Base64Text``) skips the escaping: the same bytes as the text written a character
    at a time, and as the writer writes it as an ordinary string."""
    text = base64.b64encode(data).decode("ascii")
    assert _folds_as_one_at_a_time(text, column, indent, width, base64_text=True) == _folds_as_one_at_a_time(
        text, column, indent, width)
    entry = payload(b"{{ x }}".decode() + text)
    assert type(entry["content_base64"]) is Base64Text
    assert vars_yaml({"k": entry}) == _reference({"k": entry})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["{", "}", "%", "#", "$", "a", "\n", "é", "{{", "{%", "{#"]), max_size=20).map("".join))
def test_a_text_holding_a_jinja_start_string_is_carried_as_base64(text: str) -> None:
    """``payload``: base64 exactly when the text holds one of Jinja's start strings (``JINJA_DELIMITERS``), which
    decodes to the text; else the text itself."""
    entry = payload(text)
    if any(d in text for d in quoting.JINJA_DELIMITERS):
        assert list(entry) == ["content_base64"]
        assert base64.b64decode(entry["content_base64"], validate=True).decode("utf-8") == text
    else:
        assert entry == {"content": text}
