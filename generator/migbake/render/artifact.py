"""One generated file (``Artifact``: its path inside OUT, its text or bytes, its mode) and the files rendered so far."""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Artifact:
    """One generated file: its path inside OUT, its text and its mode."""

    path: str
    content: str | bytes
    mode: int

    @property
    def data(self) -> bytes:
        """The file's bytes (text is UTF-8)."""
        return self.content if isinstance(self.content, bytes) else self.content.encode("utf-8")

    @property
    def text(self) -> str:
        """The file's text (a generated text file; bytes are read as UTF-8)."""
        return self.content if isinstance(self.content, str) else self.content.decode("utf-8")


class Rendered:
    """What the targets before this one wrote, in the order they wrote it (a later target may carry it)."""

    def __init__(self, artifacts: Sequence[Artifact] = ()) -> None:
        self._artifacts = list(artifacts)
        self._by_path = {a.path: a for a in self._artifacts}

    def add(self, artifacts: Sequence[Artifact]) -> None:
        """Files a target wrote."""
        self._artifacts.extend(artifacts)
        self._by_path.update((a.path, a) for a in artifacts)

    def __getitem__(self, path: str) -> Artifact:
        return self._by_path[path]

    def under(self, folder: str) -> Iterator[tuple[str, Artifact]]:
        """``(path inside folder, artifact)`` for each file below ``folder``, in the order written."""
        prefix = folder.rstrip("/") + "/"
        return ((a.path[len(prefix):], a) for a in self._artifacts if a.path.startswith(prefix))

    def all(self) -> list[Artifact]:
        """Every file, in the order written."""
        return list(self._artifacts)


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzipped the same way on every Python: no time stamp, level 9, and the header's OS byte 255.

    CPython writes the OS byte itself, and not alike across versions (3 on 3.11 and 3.12, 255 on 3.9, 3.10
    and 3.13 here): fixed to "unknown" (RFC 1952), a generated file is the same bytes whichever Python wrote
    it. The compressed stream is zlib's, the same for one zlib version.
    """
    packed = bytearray(gzip.compress(data, compresslevel=9, mtime=0))
    packed[9] = 255
    return bytes(packed)
