"""Settings and user files as small files that Snakemake's own job graph can compare.

Snakemake decides what to rerun from its inputs' modification times and its records in the
working directory's ``.snakemake``. Neither sees a changed setting once the records are gone
(``rm -rf .snakemake``, a second working directory on the same ``results_dir``), and a file
replaced by one with an *older* date (``mv`` of an earlier download) looks unchanged. So the
workflow hands every setting to its jobs as a **spec file** and every user-supplied file (network
weights, ONNX models, a folder dataset's images, precomputed features, patch CSVs) as a **digest
file**, both declared as job inputs:

* :func:`write_if_changed` writes a spec file only when its text changes. An unchanged setting
  keeps the file's old date (nothing reruns); a changed one gives it a new date, and Snakemake
  reruns exactly the jobs that read it, whatever its records say.
* :func:`digest_file` records a user file's SHA-256 in ``<folder>/<name>.sha256``, rewritten only
  when the content changes. A touched file with the same bytes reruns nothing; different bytes
  rerun every job that lists the digest, whatever the file's date. :func:`digest_files` does the
  same for a group (a batch of a folder dataset's images and homographies): one digest file.

Each write also stamps the file with a unique ``written`` token. Snakemake keeps, per job, the
checksums of its small inputs and calls a job up to date when a newer input has the checksum it
recorded; without the token a second working directory that rewrote the outputs with other
settings, and then this one writing its settings back, would look unchanged to this one's records.

Hashing large files on every start of Snakemake is avoided by a stat cache beside each digest
(size, modification time, inode, change time): the file is read again only when one of them
changed. The cache is not an input, so it never triggers a rerun itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from descbench.fileops import atomic_path, file_sha256


_WRITTEN = ', "written": '


def _token() -> str:
    return uuid.uuid4().hex


def spec_value_text(text: str) -> str | None:
    """The JSON value text of a spec file's ``text`` (None: not a spec file)."""
    if not text.startswith('{"value": ') or _WRITTEN not in text:
        return None
    return text[len('{"value": '):text.rindex(_WRITTEN)]


def write_spec(path: Path | str, value_text: str) -> bool:
    """Write the spec file ``path`` holding the JSON ``value_text`` unless it already holds exactly
    it; return whether it wrote. The file is ``{"value": <value_text>, "written": "<token>"}``
    (:func:`read_spec`), replaced atomically (a job never reads half a spec). Not fsynced: a
    spec lost in a crash is written again by the next start of the workflow.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> write_spec(d / "a.json", "[1, 2]"), write_spec(d / "a.json", "[1, 2]"), read_spec(d / "a.json")
    (True, False, [1, 2])
    """
    path = Path(path)
    try:
        if spec_value_text(path.read_text(encoding="utf-8")) == value_text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    _replace(path, f'{{"value": {value_text}{_WRITTEN}"{_token()}"}}\n')
    return True


def read_spec(path: Path | str):
    """The value of a spec file written by :func:`write_spec` (plain JSON is read as it is)."""
    value = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(value, dict) and set(value) == {"value", "written"}:
        return value["value"]
    return value


def write_if_changed(path: Path | str, text: str) -> bool:
    """Write ``text`` to ``path`` unless the file already holds exactly it; return whether it wrote
    (atomically, not fsynced)."""
    path = Path(path)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    _replace(path, text)
    return True


def _replace(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def digest_name(path: Path | str) -> str:
    """The digest file's name for a user file: its base name and a hash of its absolute path (two
    files of the same name in different folders get different digests)."""
    resolved = str(Path(path).resolve())
    return f"{Path(path).name}.{hashlib.sha256(resolved.encode()).hexdigest()[:12]}.sha256"


def group_digest_name(paths) -> str:
    """The digest file's name for a group of user files (:func:`digest_files`): how many, and a
    hash of their sorted absolute paths (the same group always gets the same name)."""
    resolved = sorted({str(Path(p).resolve()) for p in paths})
    return f"{len(resolved)}-files.{hashlib.sha256(chr(10).join(resolved).encode()).hexdigest()[:12]}.sha256"


def _cached_sha256(path: Path, folder: Path) -> str:
    """``path``'s SHA-256, read again only when its stat key changed since the cache beside its
    digest name under ``folder`` was written."""
    st = path.stat()
    cache = folder / ("." + digest_name(path)[: -len(".sha256")] + ".stat")
    try:
        cached = json.loads(cache.read_text())
        if cached.get("stat") == _stat_key(st) and cached.get("sha256"):
            return cached["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    sha = file_sha256(path)
    write_if_changed(cache, json.dumps({"stat": _stat_key(st), "sha256": sha}))
    return sha


def _bring_up_to_date(out: Path, head: str, preview: Path | str | None) -> Path:
    try:
        if out.read_text(encoding="utf-8").startswith(head):
            return out
    except (OSError, UnicodeDecodeError):
        pass
    if preview is not None:
        out = Path(preview) / out.name
    _replace(out, f"{head}written {_token()}\n")
    return out


def digest_file(path: Path | str, folder: Path | str, write: bool = True, preview: Path | str | None = None) -> Path:
    """The digest file of ``path`` under ``folder``, brought up to date with the file's content
    (``write=False``: only its name, e.g. on a cluster job node, where the main run wrote it).

    ``preview`` (a dry run): the digest under ``folder`` is left as it is; when the content
    changed, a digest is written under ``preview`` instead and returned (a new input, which
    Snakemake shows as the reason to rerun), so that a dry run changes nothing a later run sees.

    The digest holds ``sha256 <hex>``, the absolute path and the ``written`` token of the write
    (a new one only when the content changed); nothing about dates.
    """
    path = Path(path)
    out = Path(folder) / digest_name(path)
    if not write:
        return out
    sha = _cached_sha256(path, Path(folder))
    return _bring_up_to_date(out, f"sha256 {sha}\npath {path.resolve()}\n", preview)


def digest_files(paths, folder: Path | str, write: bool = True, preview: Path | str | None = None) -> Path:
    """One digest file for a group of user files (a batch's images and homographies), as
    :func:`digest_file` does for one: ``sha256 <hex>`` and ``path <absolute path>`` per file, in
    path order, then the ``written`` token; rewritten only when some file's content changed.

    Why one file per group: Snakemake looks up the size of every input of every ready job each
    time it schedules (a few thousand times in a 116-scene run), so a job listing 66 digests
    instead of one made each round 66 times the work.
    """
    resolved = sorted({Path(p).resolve() for p in paths})
    out = Path(folder) / group_digest_name(resolved)
    if not write:
        return out
    # hashlib releases the GIL on large updates: a first run hashes a batch's files on every core
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        shas = list(pool.map(lambda p: _cached_sha256(p, Path(folder)), resolved))
    head = "".join(f"sha256 {sha}\npath {p}\n" for sha, p in zip(shas, resolved))
    return _bring_up_to_date(out, head, preview)
