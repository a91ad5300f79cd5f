"""Safe output from the quoting functions alone, fed strings the schema would never let through.

Quotes, ``$``/``%`` sequences, shell and YAML metacharacters, option-like words, control characters,
line and paragraph separators, a BOM, escape lookalikes: ``sh_quote`` is read back by bash and sh,
``systemd_command`` by systemd (``systemd --test`` prints the argv), ``hcl_string`` by ``packer console``
and ``yaml_scalar``/``yaml_flow_list`` by PyYAML. What no quoting can carry (NUL, a prefix systemd reads
after unquoting an executable) is refused. The same languages with real profiles: test_quoting_roundtrip.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from realtools import SystemdTree, packer, packer_console
from support import command_lines

from migbake.problems import RenderError
from migbake.render.quoting import (
    MAX_LINE,
    hcl_string,
    indent,
    sh_quote,
    systemd_command,
    systemd_word,
    wrap_long,
    yaml_flow_list,
    yaml_scalar,
)

HOSTILE = [
    "plain",
    "",
    " ",
    "two words",
    " lead",
    "trail ",
    "'",
    '"',
    "\\",
    "\\\\",
    "trailing\\",
    "a'b\"c",
    "''",
    '""',
    "$",
    "$$",
    "$$$",
    "$HOME",
    "${HOME}",
    "$(id)",
    "`id`",
    "$((1+1))",
    "${x:-y}",
    "%",
    "%%",
    "%n",
    "%%n",
    "%i",
    "%{x}",
    "${x}",
    "$${x}",
    "%%{x}",
    "#",
    "# c",
    "a #b",
    ";",
    "&&",
    "|",
    "a;b",
    "&",
    ">",
    "<",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "~",
    "~root",
    "!",
    "!!",
    "-n",
    "-e",
    "--",
    "--help",
    "=",
    "a=b",
    ":",
    "@",
    "+",
    "-",
    "a\nb",
    "\r\n",
    "\n",
    "\t",
    "\x01\x1b[31m",
    "\x7f",
    "é",
    "✓",
    "𝄞",
    "\u2028",
    "\u2029",
    "\u0085",
    "\u00a0",
    "\ufeff",
    "\\x41",
    "\\n",
    "\\u0041",
    "yes",
    "null",
    "0644",
    "- x",
    "a: b",
    "{}",
    "[]",
    "()",
    "*a",
    "&a",
    "!tag",
]


@pytest.mark.realtool
def test_sh_quote_round_trips_in_bash_and_sh(tmp_path: Path) -> None:
    lines = [f"v{i}={sh_quote(v)}" for i, v in enumerate(HOSTILE)]
    dump = "".join(f"printf '%s\\0' \"$v{i}\"\n" for i in range(len(HOSTILE)))
    script = tmp_path / "dump.sh"
    script.write_text("\n".join(lines) + "\n" + dump, encoding="utf-8")
    for shell in ("/bin/bash", "/bin/sh"):
        # bytes, not text: text mode would turn the value "\r\n" into "\n" on the way back
        p = subprocess.run(
            [shell, str(script)],
            env={"PATH": str(tmp_path), "LC_ALL": "C.UTF-8"},
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert p.returncode == 0 and p.stderr == b"", p
        assert p.stdout.decode("utf-8").split("\0")[:-1] == HOSTILE, shell
    # a value alone on an argv: no word splitting, no globbing, no option parsing by the assignment
    assert sh_quote("-n") == "'-n'" and sh_quote("a-b") == "'a-b'"
    with pytest.raises(RenderError):
        sh_quote("a\0b")


@pytest.mark.realtool
def test_systemd_word_round_trips_through_systemd() -> None:
    tree = SystemdTree()
    try:
        unit = tree.root / "etc/systemd/system/quoting-probe.service"
        unit.write_text(
            "[Service]\nType=oneshot\nExecStart=" + systemd_command(["/usr/bin/true", *HOSTILE]) + "\n",
            encoding="utf-8",
        )
        assert unit.read_text(encoding="utf-8").count("\n") == 3  # every word stayed on its line
        assert tree.systemctl("enable", "quoting-probe.service").rc == 0
        verify = tree.verify("quoting-probe.service")
        assert verify.rc == 0, verify.text
        graph = tree.boot_graph("quoting-probe.service")
        assert graph.rc == 0, graph.err
        assert command_lines(graph.out, "quoting-probe.service") == [["/usr/bin/true", *HOSTILE]]
    finally:
        tree.cleanup()


@pytest.mark.parametrize("prefix", ["-", "@", ":", "+", "!"])
def test_systemd_word_refuses_an_executable_with_a_prefix(prefix: str) -> None:
    # systemd reads these prefixes after unquoting: quoting cannot keep them literal
    with pytest.raises(RenderError):
        systemd_word(f"{prefix}/usr/bin/true", executable=True)
    assert systemd_word(f"{prefix}x") in (f"{prefix}x", f'"{prefix}x"')  # fine as an argument
    with pytest.raises(RenderError):
        systemd_word("a\0b")


@pytest.mark.realtool
def test_hcl_string_round_trips_through_packer(tmp_path: Path) -> None:
    values = [v for v in HOSTILE if v]  # packer console prints "" for an empty default too; keep it simple
    body = "".join(
        f'variable "v{i}" {{\n  type    = string\n  default = {hcl_string(v)}\n}}\n'
        for i, v in enumerate(values)
    )
    body += 'source "null" "n" {\n  communicator = "none"\n}\n\nbuild {\n  sources = ["source.null.n"]\n}\n'
    (tmp_path / "probe.pkr.hcl").write_text(body, encoding="utf-8")
    assert packer(["validate", str(tmp_path)]).rc == 0
    got = json.loads(
        packer_console(tmp_path, "jsonencode([" + ", ".join(f"var.v{i}" for i in range(len(values))) + "])")
    )
    assert got == values
    assert hcl_string("${x}") == '"$${x}"' and hcl_string("%{x}") == '"%%{x}"'


def test_yaml_scalar_round_trips_through_pyyaml() -> None:
    values = [*HOSTILE, "\x00", "\ufffe", "\uffff", "\x80\x9f"]
    for v in values:
        text = f"k: {yaml_scalar(v)}\nl: {yaml_flow_list([v, v])}\n"
        assert yaml.safe_load(text) == {"k": v, "l": [v, v]}, repr(v)
    # one line, whatever the value: it can sit in a block sequence of cloud-init user-data
    assert all("\n" not in yaml_scalar(v) and "\u2028" not in yaml_scalar(v) for v in values)


LINES = st.lists(st.sampled_from(["", " ", "a", "# x", "\r", "\t", "\u2028", "é", "w " * 50, "#" + "w " * 100]),
                 max_size=12).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(LINES, st.integers(0, 8))
def test_indent_pads_each_line_that_is_not_empty(text: str, spaces: int) -> None:
    """``indent`` (one regular expression) against the line-at-a-time definition: empty lines stay empty, a
    line holding only a CR or U+2028 is a line (only a line feed ends one), final line feeds dropped."""
    expected = "\n".join((" " * spaces + row) if row else "" for row in text.rstrip("\n").split("\n"))
    assert indent(text, spaces) == expected


@settings(max_examples=200, deadline=None)
@given(LINES)
def test_wrap_long_keeps_a_text_of_short_lines_and_wraps_only_the_long_ones(text: str) -> None:
    wrapped = wrap_long(text)
    rows = text.split("\n")
    if max(map(len, rows)) <= MAX_LINE:
        assert wrapped == text
    # words never broken, lost or added (a comment's "#" starts each of its pieces)
    assert wrapped.replace("#", " ").split() == text.replace("#", " ").split()
    assert all(len(row) <= MAX_LINE or " " not in row.strip() for row in wrapped.split("\n"))
