"""``generate --check`` on a stale OUT: the unified diff of what differs, whatever the sizes, and bounded."""

from __future__ import annotations

from pathlib import Path

from support import IMAGES, cli

from migbake.render.write import MAX_DIFF_LINE_CHARS, MAX_DIFF_LINES

PROFILE = str(next(p for p in IMAGES if p.name == "h100-slurm") / "node-profile.yaml")
SCRIPT = "scripts/verify-mig-restore.sh"


def _generated(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert cli("generate", PROFILE, "-o", str(out))[0] == 0
    return out


def test_a_file_of_another_size_shows_its_diff(tmp_path: Path) -> None:
    out = _generated(tmp_path)
    target = out / SCRIPT
    text = target.read_text()
    target.write_text(text.replace("\n", "\n# an edit by hand\n", 1))  # some bytes longer than generated
    code, stdout, err = cli("generate", PROFILE, "-o", str(out), "--check")
    assert code == 1 and "is stale" in err
    assert f"--- out/{SCRIPT} (on disk)" in stdout and f"+++ out/{SCRIPT} (generated)" in stdout, stdout
    assert "\n-# an edit by hand\n" in stdout and "bytes on disk" not in stdout, stdout


def test_a_long_diff_is_bounded_and_says_what_it_left_out(tmp_path: Path) -> None:
    out = _generated(tmp_path)
    target = out / SCRIPT
    generated = target.read_text().splitlines()
    target.write_text("".join(f"line {i}\n" for i in range(1000)))
    code, stdout, _ = cli("generate", PROFILE, "-o", str(out), "--check")
    lines = stdout.splitlines()
    full = 3 + 1000 + len(generated)  # ---, +++, one hunk header: every line removed, every line added
    assert code == 1 and lines[-1] == f"... {full - MAX_DIFF_LINES} more lines of the diff of {SCRIPT} left out"
    assert len(lines) == MAX_DIFF_LINES + 1, stdout[-500:]


def test_a_file_far_larger_than_generated_shows_the_diff_of_what_was_read(tmp_path: Path) -> None:
    out = _generated(tmp_path)
    target = out / SCRIPT
    size = len(target.read_bytes())
    target.write_text("x" * (2 * size + 70000) + "\n")  # beyond what is read to compare
    code, stdout, _ = cli("generate", PROFILE, "-o", str(out), "--check")
    said = f"{SCRIPT}: {2 * size + 70001} bytes on disk, {size} generated; the diff reads its first "
    assert code == 1 and said in stdout, stdout[:2000]
    assert f"--- out/{SCRIPT} (on disk)" in stdout, stdout[:2000]
    long = next(line for line in stdout.splitlines() if line.startswith("-xxx"))
    assert long.endswith(" more characters)") and len(long) < MAX_DIFF_LINE_CHARS + 40, long[-100:]
