"""Write the rendered tree atomically, and compare an existing tree with what would be written.

The tree is built in a temporary directory beside OUT and swapped in with one rename (Linux
``renameat2(RENAME_EXCHANGE)`` where available), so OUT is never half-written. A non-empty OUT that
migbake did not create, or that holds files its marker does not list, is refused, --force included
(judged again at the swap, on what is at OUT then): migbake never deletes a file it did not write.
--force replaces only migbake's own output of another profile. A symlink as OUT, and a system
directory (``/``, ``/etc``, ``/usr``, the user's home...), are always refused. The marker file
records where OUT came from (the profile's path, name and sha256, and the generate options), so that
``--check`` compares with the same options and OUT is not silently taken over by another profile.

``--check`` compares what a file means, not its compressed bytes: gzip output differs between zlib builds
(zlib-ng's is not zlib's: zlib-ng/zlib-ng#795), so each gzip or base64 payload (a gzipped file, cloud-init's and
Cluster API's ``encoding: base64`` and ``gzip+base64`` contents, Ignition's ``data:`` URLs, the parts of a MIME
user-data) is compared, and shown in a diff, decoded (``readable``).
"""

from __future__ import annotations

import contextlib
import ctypes
import difflib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path

from migbake.document.files import NOT_REGULAR, read_regular
from migbake.problems import STDIN_NAME, OutputError
from migbake.render.artifact import Artifact
from migbake.render.origin import (
    EXPORT_ORIGIN,
    FILES_HEADER,
    MARKER_TEXT,
    MAX_MARKER_BYTES,
    OUTPUT_MARKER,
    Origin,
    listed_files,
    marker_text,
    read_origin,
)
from migbake.render.payloads import readable
from migbake.wording import plural

__all__ = ["EXPORT_ORIGIN", "MARKER_TEXT", "OUTPUT_MARKER", "Origin", "check_output_dir", "diff_tree", "read_origin",
           "readable", "write_tree"]

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2

def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux); False if the system cannot."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def _rename_noreplace(a: Path, b: Path) -> bool:
    """Rename ``a`` to ``b`` unless something is at ``b`` (FileExistsError); False if the system cannot."""
    return _renameat2(a, b, _RENAME_NOREPLACE)


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # this system or filesystem cannot
        return False
    raise OSError(err, os.strerror(err), str(b))


def _with_marker(artifacts: Sequence[Artifact], origin: Origin | None) -> list[Artifact]:
    text = (origin.text() if origin else MARKER_TEXT) + FILES_HEADER + "\n"
    text += "".join(f"  {a.path}\n" for a in sorted(artifacts, key=lambda a: a.path))
    return [*artifacts, Artifact(OUTPUT_MARKER, text, 0o644)]


def _safe_relpath(rel: str) -> Path:
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts or any(c < " " or c == "\x7f" for c in rel):
        raise OutputError(f"refusing to write {rel!r}: outside the output directory, or not a plain name")
    return p


def _entries(tree: Path) -> list[str]:
    """Every file, link and other non-folder entry below ``tree``, relative to it (folders are walked)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(tree):
        links = [d for d in dirnames if (Path(dirpath) / d).is_symlink()]
        found += [(Path(dirpath) / n).relative_to(tree).as_posix() for n in filenames + links]
    return sorted(found)


# Folders an output tree never replaces, whatever they hold (the user's home is added at run time)
SYSTEM_DIRECTORIES = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
                                "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys",
                                "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/local/bin",
                                "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log", "/var/tmp"})
EMPTY_ONE = "choose an empty or new directory"


def system_directory(out: Path) -> bool:
    """Whether ``out`` is ``/``, a top folder of the system or the user's home (spelled any way, or linked)."""
    homes = {os.path.expanduser("~"), os.environ.get("HOME", "") or "/"}
    forms = {os.path.normpath("/" + os.path.abspath(out).lstrip("/")), os.path.realpath(out)}
    system = SYSTEM_DIRECTORIES | {os.path.realpath(h) for h in homes} | {os.path.normpath(h) for h in homes}
    return bool(forms & system)


def _refusal(tree: Path, out: Path, origin: Origin | None, paths: Collection[str] | None,
             force: bool) -> str | None:
    """Why the tree at ``tree`` (OUT, or what was at OUT) may not be replaced; None: it may.

    It may when it is empty, or when its marker is migbake's (an empty marker proves nothing) and lists
    every file in it; a marker of an older migbake lists none: then the files about to be written at the
    same paths (``paths``; None: not judged yet) are the ones it may hold. --force (``force``) replaces
    migbake's own output of another profile: never a file migbake did not write, a link, a file as OUT or
    a system directory, whose messages say to choose an empty directory and never mention --force.
    """
    if system_directory(out):
        return f"{out} is a system directory, never an output directory; {EMPTY_ONE}"
    if tree.is_symlink():
        return f"{out} is a symbolic link; give the real directory (migbake never writes through a link)"
    if tree.exists() and not tree.is_dir():
        return f"{out} exists and is not a directory; {EMPTY_ONE}"
    if not tree.exists() or not any(tree.iterdir()):
        return None
    text = marker_text(tree)
    if text is None or not text.startswith(MARKER_TEXT):
        return (f"{out} is not empty and was not created by migbake; {EMPTY_ONE} (migbake never deletes files "
                "it did not write, --force included)")
    listed = listed_files(text)
    allowed = listed if listed is not None else paths
    if allowed is not None:
        folders = {p.rsplit("/", i)[0] for p in allowed for i in range(1, p.count("/") + 1)}
        strays = [rel for rel in _entries(tree) if rel != OUTPUT_MARKER and rel not in allowed and rel not in folders]
        if strays:
            shown = ", ".join(strays[:3]) + (f" and {len(strays) - 3} more" if len(strays) > 3 else "")
            return (f"{out} holds files migbake did not write there ({shown}); move them away, or {EMPTY_ONE} "
                    "(migbake never deletes files it did not write, --force included)")
    if force:
        return None
    had = read_origin(tree)
    if had and origin and EXPORT_ORIGIN in (had.profile, origin.profile) and had.profile != origin.profile:
        return (f"{out} holds {_made_by(had, out)}, not {_made_by(origin, out)}; choose another directory, or pass "
                "--force to replace it")
    if had and origin and _other_profile(had, origin, out):
        return (f"{out} was generated from another profile ({had.profile_path(out) or STDIN_NAME}, name "
                f"{had.name}), not {origin.profile_path(out) or STDIN_NAME} ({origin.name}); choose another "
                "directory, or pass --force to replace it")
    return None


def check_output_dir(out: Path, *, force: bool = False, origin: Origin | None = None,
              paths: Collection[str] | None = None) -> None:
    """Raise OutputError unless ``write_tree`` may replace ``out`` (written by ``origin``'s profile).

    The same check runs again at the swap, on what is then at OUT: this one only says it early.
    """
    why = _refusal(out, out, origin, paths, force)
    if why:
        raise OutputError(why)


def _made_by(origin: Origin, out: Path) -> str:
    """What wrote a folder, for a refusal: an export of several profiles, or one profile's generate."""
    if origin.profile == EXPORT_ORIGIN:
        return f"the output of `migbake export --ansible` (profiles {origin.name})"
    return f"the output of `migbake generate` ({origin.profile_path(out) or STDIN_NAME}, name {origin.name})"


def _other_profile(had: Origin, now: Origin, out: Path) -> bool:
    if EXPORT_ORIGIN in (had.profile, now.profile):  # an export's folder takes an export of any profiles
        return had.profile != now.profile
    if STDIN_NAME in (had.profile, now.profile):
        return had.name != now.name
    before, after = had.profile_path(out), now.profile_path(out)
    return before is None or after is None or os.path.abspath(before) != os.path.abspath(after)


def _temporary(out: Path, kind: str) -> Path:
    """A new folder beside OUT named after it, the name shortened to fit the filesystem's 255 bytes."""
    name = out.name
    while len(os.fsencode(name)) > 200:
        name = name[:-1]
    return Path(tempfile.mkdtemp(prefix=f".{name}.{kind}-", dir=out.parent))


def write_tree(artifacts: Sequence[Artifact], out: Path, *, force: bool = False,
               origin: Origin | None = None) -> None:
    """Replace ``out`` with exactly ``artifacts`` (plus migbake's marker file, recording ``origin``), atomically.

    Refused (OutputError) when OUT is not migbake's, or was generated from another profile, unless forced:
    checked before building and again at the swap, on what is at OUT then. Any failure of the system
    (a read-only or full filesystem, no permission) is an OutputError too; OUT is then as it was, and no
    temporary folder is left (SIGTERM included: the command group makes it an exception).
    """
    out = Path(os.path.abspath(out))
    paths = {a.path for a in artifacts}
    check_output_dir(out, force=force, origin=origin, paths=paths)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary(out, "tmp")
    except OSError as err:
        raise _cannot(out, err) from err
    try:
        _build(tmp, _with_marker(artifacts, origin))
        with _signals_held():
            _swap(tmp, out, force, origin, paths)
    except BaseException as err:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise _cannot(out, err) from err
        raise


def _cannot(out: Path, err: OSError) -> OutputError:
    return OutputError(f"cannot write {out}: {err.strerror or err}")


def _build(tmp: Path, artifacts: Sequence[Artifact]) -> None:
    os.chmod(tmp, 0o755)
    for a in artifacts:
        rel = _safe_relpath(a.path)
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, a.mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(a.data)
        os.chmod(target, a.mode)  # not subject to the umask
    for d, _, _ in os.walk(tmp):
        os.chmod(d, 0o755)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT wait while the trees are swapped and checked (they act right after)."""
    import signal

    held = {signal.SIGTERM, signal.SIGINT}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _swap(tmp: Path, out: Path, force: bool, origin: Origin | None, paths: Collection[str]) -> None:
    """Put the tree at ``tmp`` at ``out``; what was at ``out`` is judged once it is out of the way."""
    try:
        if _rename_noreplace(tmp, out):
            return  # nothing was at OUT
    except FileExistsError:
        pass  # something is at OUT now: judged below
    else:
        if not out.exists() and not out.is_symlink():  # a system without renameat2
            os.rename(tmp, out)  # fails on a non-empty folder created meanwhile, replaces an empty one
            return
    if _exchange(tmp, out):  # tmp now holds what was at OUT
        why = _refusal(tmp, out, origin, paths, force)
        if why:
            _exchange(tmp, out)  # put it back: tmp holds our tree again, removed by the caller
            raise OutputError(why)
        shutil.rmtree(tmp)
        return
    old = _temporary(out, "old")
    os.rmdir(old)
    os.rename(out, old)
    why = _refusal(old, out, origin, paths, force)
    if why:
        os.rename(old, out)
        raise OutputError(why)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)  # put the old tree back: OUT is never missing
        raise
    shutil.rmtree(old)


def _read_tree(out: Path, bounds: Mapping[str, int]) -> dict[str, tuple[bytes | None, int, int]]:
    """OUT's files: (bytes, mode, size on disk); bytes None for what is not a regular file (a FIFO, a socket, a
    symlink). Only the files ``bounds`` names are read, each through ``read_regular`` (never waited on, even if a
    FIFO took its place since it was listed) and at most one byte more than its bound, the size of what would be
    written there: a 2 GiB file there differs from it, and is never read whole."""
    found: dict[str, tuple[bytes | None, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(out):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            rel = path.relative_to(out).as_posix()
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                found[rel] = (None, 0, 0)
                continue
            if rel not in bounds:  # not generated: named, never read
                found[rel] = (b"", stat.S_IMODE(st.st_mode), st.st_size)
                continue
            try:
                data = read_regular(path, bounds[rel])
            except OSError as err:
                if err.strerror == NOT_REGULAR:
                    found[rel] = (None, 0, 0)
                    continue
                raise OutputError(f"{path}: cannot read it to compare with what would be generated: "
                                  f"{err.strerror or err}") from err
            found[rel] = (data, stat.S_IMODE(st.st_mode), max(st.st_size, len(data)))
    return found


def diff_tree(artifacts: Sequence[Artifact], out: Path, origin: Origin | None = None) -> list[str]:
    """Differences between ``out`` and what ``write_tree`` would leave there (empty: up to date).

    Files are compared as ``readable`` gives them: a payload compressed by another zlib is the same file.
    Without ``origin`` the marker's content is not compared, only its presence.
    """
    if not out.is_dir():
        return [f"{out}: does not exist (run migbake generate)"]
    want = {a.path: a for a in _with_marker(artifacts, origin)}
    bounds = {rel: _bound(len(a.data)) for rel, a in want.items()}
    if origin is None:
        bounds[OUTPUT_MARKER] = MAX_MARKER_BYTES
    have = _read_tree(out, bounds)
    if origin is None and OUTPUT_MARKER in have and have[OUTPUT_MARKER][0] is not None:
        want[OUTPUT_MARKER] = Artifact(OUTPUT_MARKER, have[OUTPUT_MARKER][0] or b"", 0o644)
    lines: list[str] = []
    for rel in sorted(set(want) | set(have)):
        if rel not in have:
            lines.append(f"missing: {rel}")
            continue
        if rel not in want:
            lines.append(f"not generated (would be removed): {rel}")
            continue
        data, mode, size = have[rel]
        a = want[rel]
        if data is None:
            lines.append(f"not a regular file: {rel}")
            continue
        if len(data) > bounds[rel]:  # read one byte past the bound: the diff is of what was read
            lines.append(f"{rel}: {size} bytes on disk, {len(a.data)} generated; the diff reads its first "
                         f"{bounds[rel]} bytes")
            lines.extend(_diff(rel, out.name, data[:bounds[rel]], a.data))
        elif data != a.data:
            lines.extend(_diff(rel, out.name, data, a.data))
        if mode != a.mode:
            lines.append(f"mode of {rel}: {mode:04o} on disk, {a.mode:04o} generated")
    return lines


def _bound(size: int) -> int:
    """How much of a file on disk is read to compare with ``size`` generated bytes: room for its payloads compressed
    worse by another zlib (level 1 against 9 makes text some 40% larger), never a whole 2 GiB file."""
    return 2 * size + 65536


# a stale file's diff shows at most this many lines, each at most this many characters: a file replaced by
# something else entirely (a log, a binary, a 2 GiB file) makes a diff no one reads through
MAX_DIFF_LINES = 200
MAX_DIFF_LINE_CHARS = 400


def _diff(rel: str, top: str, have: bytes, want: bytes) -> list[str]:
    """A unified diff of the two files as ``readable`` gives them, bounded (``MAX_DIFF_LINES``, each line
    ``MAX_DIFF_LINE_CHARS``; what is left out is counted); nothing when they read the same."""
    old, new = readable(rel, have), readable(rel, want)
    if old is None or new is None:
        return [f"binary file differs: {rel}"]
    if old == new:
        return []
    lines = [_shortened(line) for line in difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"{top}/{rel} (on disk)", f"{top}/{rel} (generated)", lineterm="")]
    if len(lines) <= MAX_DIFF_LINES:
        return lines
    left = len(lines) - MAX_DIFF_LINES
    return [*lines[:MAX_DIFF_LINES], f"... {plural(left, 'more line')} of the diff of {rel} left out"]


def _shortened(line: str) -> str:
    """``line`` cut to ``MAX_DIFF_LINE_CHARS``, saying how many characters were left out."""
    if len(line) <= MAX_DIFF_LINE_CHARS:
        return line
    return f"{line[:MAX_DIFF_LINE_CHARS]}... ({len(line) - MAX_DIFF_LINE_CHARS} more characters)"
