"""Atomic writes and file digests, in one place (below every other module).

An output is written to a temporary file in its own folder and renamed onto its final name
(``os.replace``, atomic on POSIX within one file system), so an interrupted job never leaves a
file that looks complete. Temporary names start with a dot and end in ``.tmp``, so a crashed
job's leftovers are recognisable, hidden from scene listings and never match an output pattern.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Mode of written files (a temporary file made by ``mkstemp`` would be owner-only, 0600).
FILE_MODE = 0o644
_CHUNK = 1 << 20


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path`` (``.<name>.<random>.tmp``, made by ``mkstemp``
    so that concurrent writers never share one) to write ``path``'s content to; on success it is
    given mode :data:`FILE_MODE` and renamed onto ``path``; on any exception (an interrupt
    included) it is removed and ``path`` is left as it was. Parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`), flushed to disk first."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def file_sha256(path: Path | str, chunk_bytes: int = _CHUNK) -> str:
    """Hex SHA-256 of a file's bytes, read in ``chunk_bytes`` chunks (bounded memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(chunk_bytes), b""):
            digest.update(chunk)
    return digest.hexdigest()


def bytes_sha256(data: bytes) -> str:
    """Hex SHA-256 of bytes already read: :func:`file_sha256` of the file they were read from."""
    return hashlib.sha256(data).hexdigest()
