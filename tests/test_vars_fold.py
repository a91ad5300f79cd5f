"""The group data writer's scalars (render/quoting.py, ``_VarsDumper``): double-quoted ones written a run of
characters at a time, and long ones not walked by PyYAML's analysis where their style is decided, with the
same bytes as the character-at-a-time writer and PyYAML's analysis they replaced (kept here as the
reference), and read back by PyYAML as the value written."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from migbake.render import quoting
from migbake.render.quoting import vars_yaml


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
