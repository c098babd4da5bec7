"""Download and unpack the HPatches sequences archive (stdlib only).

Both steps are crash-safe: :func:`fetch_archive` writes to ``<name>.part``, resumes it with
an HTTP ``Range`` request on the next call and only renames it to the final name once it is
complete (and its sha256 verified); :func:`extract_archive` unpacks into a hidden temporary
folder and renames the dataset folder into place at the end. An interrupted run therefore
never leaves a half-written archive or dataset under its final name.

Nothing here prints except the download progress lines on stderr.
"""

from __future__ import annotations

import gzip
import http.client
import math
import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path, PureWindowsPath
from typing import IO

from descbench.errors import DataError, DownloadError
from descbench.fileops import file_sha256

ARCHIVE_ROOT = "hpatches-sequences-release"
ARCHIVE_NAMES: tuple[str, ...] = (f"{ARCHIVE_ROOT}.tar.gz", f"{ARCHIVE_ROOT}.zip")
DEFAULT_URLS: tuple[str, ...] = (
    "http://icvl.ee.ic.ac.uk/vbalnt/hpatches/hpatches-sequences-release.tar.gz",
    "https://huggingface.co/datasets/vbalnt/hpatches/resolve/main/hpatches-sequences-release.zip",
)
SCENE_PREFIXES: tuple[str, ...] = ("i_", "v_")

_PROGRESS_SECONDS = 1.0
_PROGRESS_PERCENT = 5.0
_COPY_BYTES = 1 << 20
# URLError, HTTPError, refused connections and timeouts are all OSErrors; a server that hangs
# up mid-response can also raise http.client.HTTPException (IncompleteRead, BadStatusLine).
_NETWORK_ERRORS = (OSError, http.client.HTTPException)
# What tarfile/zipfile/gzip raise on a truncated or corrupt archive (never on a disk error).
_CORRUPT_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, gzip.BadGzipFile)
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)", re.IGNORECASE)


class _MirrorError(Exception):
    """One mirror failed (network error, HTTP error, short transfer); the message says why."""


# --------------------------------------------------------------------------- download


def fetch_archive(
    urls: Iterable[str] | str,
    dest_dir: Path | str,
    sha256: str | None = None,
    progress: bool = True,
    timeout: float = 30.0,
    chunk_bytes: int = 1 << 20,
) -> Path:
    """Download an archive from the first working mirror into ``dest_dir`` and return its path.

    The file is named after the last path component of the URL it came from. If such a file
    already exists in ``dest_dir`` (for any of ``urls``) it is returned without network access,
    after checking ``sha256`` when given. Otherwise the mirrors are tried in order; each one
    downloads to ``<name>.part``, resuming an existing ``.part`` with ``Range: bytes=N-`` (a
    ``206`` answer is appended, a ``200`` answer restarts from zero). Mirrors that share a file
    name must therefore serve identical bytes. A complete ``.part`` is checked against
    ``sha256`` (hex, any case; it applies to whichever file is downloaded) and atomically
    renamed to the final name.

    ``timeout`` (seconds) bounds connecting and each read. With ``progress``, rate-limited
    ``downloading <name>: done / total (pct %)`` lines go to stderr.

    Raises :class:`DownloadError` if every mirror fails (listing each URL with its error and
    where to place a hand-downloaded archive; a partial ``.part`` is kept for resuming), on a
    sha256 mismatch (the bad ``.part`` is deleted), or on an invalid URL or ``sha256``.
    """
    urls = (urls,) if isinstance(urls, str) else tuple(urls)  # a bare str would iterate chars
    if not urls:
        raise DownloadError("no download URL given; pass at least one http(s) URL")
    expected = _normalize_sha256(sha256)
    dest_dir = Path(dest_dir)
    names = [_archive_name(url) for url in urls]

    for name in dict.fromkeys(names):
        final = dest_dir / name
        if final.is_file():
            actual = file_sha256(final, chunk_bytes) if expected else None
            if actual != expected:
                raise DownloadError(
                    f"{final} exists but its sha256 is {actual}, expected {expected}: "
                    "delete it and rerun to download it again"
                )
            return final

    dest_dir.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for url, name in zip(urls, names):
        final, part = dest_dir / name, dest_dir / f"{name}.part"
        printer = _Progress(name, progress)
        try:
            _transfer(url, part, timeout, chunk_bytes, printer)
        except _MirrorError as err:
            failures.append(f"  {url}: {err}")
            continue
        finally:
            printer.end()
        if expected:
            actual = file_sha256(part, chunk_bytes)
            if actual != expected:
                part.unlink()
                raise DownloadError(
                    f"sha256 mismatch for {final} downloaded from {url}: expected {expected}, "
                    f"got {actual}. The download was deleted; rerun to download it again, or "
                    "check the expected checksum"
                )
        os.replace(part, final)
        return final
    raise DownloadError(_all_mirrors_failed_message(failures, dest_dir, names, expected))


def find_local_archive(dest_dir: Path | str, names: tuple[str, ...] = ARCHIVE_NAMES) -> Path | None:
    """Return the complete archive in ``dest_dir``: the first of ``names`` that exists (default:
    the HPatches sequences, ``.tar.gz`` first, then ``.zip``).

    ``.part`` files are partial downloads and never returned; ``None`` if there is no archive.
    """
    for name in names:
        path = Path(dest_dir) / name
        if path.is_file():
            return path
    return None


def _transfer(url: str, part: Path, timeout: float, chunk_bytes: int, printer: _Progress) -> None:
    """Download ``url`` into ``part``, resuming it if it is non-empty.

    Returns once ``part`` holds the whole file; raises :class:`_MirrorError` otherwise, keeping
    whatever was received so that the next call resumes from there.
    """
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        with err:
            _, total = _parse_content_range(err.headers.get("Content-Range"))
        if err.code == 416 and offset:
            if total == offset:
                return  # the .part is already complete: an earlier run stopped before the rename
            # The .part is longer than the file on the server: it is stale, start over.
            part.unlink()
            return _transfer(url, part, timeout, chunk_bytes, printer)
        raise _MirrorError(f"HTTP error {err.code}: {err.reason}") from err
    except _NETWORK_ERRORS as err:
        raise _MirrorError(_describe(err)) from err

    with response:
        if offset and response.status == 206:
            start, total = _parse_content_range(response.headers.get("Content-Range"))
            if start != offset:
                raise _MirrorError(
                    f"asked for bytes from {offset} but the server sent "
                    f"Content-Range {response.headers.get('Content-Range')!r}"
                )
            mode = "ab"
        else:
            # A 200 answer carries the whole file: the server ignored (or was not sent) a Range.
            offset, mode = 0, "wb"
            total = _parse_int(response.headers.get("Content-Length"))
        size = offset
        printer.update(size, total)
        with part.open(mode) as out:
            while chunk := _read(response, chunk_bytes):
                out.write(chunk)
                size += len(chunk)
                printer.update(size, total)
        printer.update(size, total, force=True)
    if total is not None and size < total:
        raise _MirrorError(
            f"connection closed after {size} of {total} bytes; the partial download {part} "
            "is kept and resumed on the next run"
        )


def _read(response: http.client.HTTPResponse, n: int) -> bytes:
    """Read up to ``n`` bytes, turning network failures into :class:`_MirrorError`."""
    try:
        return response.read(n)
    except _NETWORK_ERRORS as err:
        raise _MirrorError(_describe(err)) from err


def _describe(err: BaseException) -> str:
    """A short human-readable reason for a network error (URLError wraps the real one)."""
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err) or type(err).__name__


def _all_mirrors_failed_message(
    failures: list[str], dest_dir: Path, names: list[str], expected: str | None
) -> str:
    """The error text when no mirror worked: each URL's error and how to proceed by hand."""
    unique = list(dict.fromkeys(names))
    paths = [str(dest_dir / n) for n in unique]
    places = paths[0] + (f" (or {', '.join(paths[1:])})" if len(paths) > 1 else "")
    lines = [f"could not download {unique[0]} from any mirror:", *failures]
    lines += [
        f"Partial download kept for resuming: {p} ({_format_size(p.stat().st_size)})"
        for p in (dest_dir / f"{n}.part" for n in unique)
        if p.is_file()
    ]
    checksum = f" (its sha256 must be {expected})" if expected else ""
    lines.append(
        f"Download {unique[0]} yourself from one of the URLs above{checksum} and place it at "
        f"{places}, then rerun."
    )
    return "\n".join(lines)


def _archive_name(url: str) -> str:
    """The file name an archive from ``url`` is stored under: the URL's last path component."""
    parts = urllib.parse.urlsplit(url)
    name = posixpath.basename(parts.path)
    if parts.scheme not in ("http", "https") or name in ("", ".", ".."):
        raise DownloadError(f"cannot download from {url!r}: expected an http(s) URL ending in a file name")
    return name


def _normalize_sha256(sha256: str | None) -> str | None:
    """Lower-case hex digest, or None; validated up front so that a typo never deletes a download."""
    if sha256 is None:
        return None
    digest = sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise DownloadError(f"sha256 must be 64 hexadecimal digits, got {sha256!r}")
    return digest


def _parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """``(first byte, total size)`` of a ``Content-Range`` header; None where absent or ``*``."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip())
    if match is None:
        return None, None
    start, total = match.groups()
    return (int(start) if start else None, None if total == "*" else int(total))


def _parse_int(value: str | None) -> int | None:
    """A non-negative integer header value, or None when missing or malformed."""
    return int(value) if value is not None and value.strip().isdigit() else None


# --------------------------------------------------------------------------- progress


def _format_size(n: int) -> str:
    """Binary-prefixed size: ``512 B``, ``12.3 MiB``, ``1.3 GiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, exp = float(n), 0
    while value >= 1024 and exp < len(units) - 1:
        value, exp = value / 1024, exp + 1
    return f"{n} B" if exp == 0 else f"{value:.1f} {units[exp]}"


def _progress_line(name: str, done: int, total: int | None) -> str:
    """``downloading <name>: 12.3 MiB / 1.3 GiB (0.9 %)`` (without total/percent if unknown)."""
    if not total:
        return f"downloading {name}: {_format_size(done)}"
    return f"downloading {name}: {_format_size(done)} / {_format_size(total)} ({100 * done / total:.1f} %)"


class _Progress:
    """Rate-limited progress lines on stderr: at most about one per second or per 5 %.

    On a TTY the line is redrawn in place with ``\\r``; otherwise (logs, CI) whole lines are
    written, so that a log file never fills up with carriage returns.
    """

    def __init__(self, name: str, enabled: bool) -> None:
        self._name = name
        self._stream: IO[str] | None = sys.stderr if enabled else None
        self._tty = enabled and sys.stderr.isatty()
        self._last_time = -math.inf
        self._last_pct = -math.inf
        self._last_done: int | None = None
        self._width = 0  # length of the line currently drawn on the TTY; 0 when none

    def update(self, done: int, total: int | None, force: bool = False) -> None:
        """Show ``done`` of ``total`` bytes if due (or ``force``d) and not already shown."""
        if self._stream is None or done == self._last_done:
            return
        now = time.monotonic()
        pct = 100 * done / total if total else None
        due = now - self._last_time >= _PROGRESS_SECONDS or (
            pct is not None and pct - self._last_pct >= _PROGRESS_PERCENT
        )
        if not (force or due):
            return
        self._last_time, self._last_done = now, done
        if pct is not None:
            self._last_pct = pct
        line = _progress_line(self._name, done, total)
        if self._tty:
            self._stream.write("\r" + line.ljust(self._width))  # pad to erase a longer old line
            self._width = len(line)
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def end(self) -> None:
        """Finish the TTY line so that later output starts on a fresh line."""
        if self._stream is not None and self._width:
            self._stream.write("\n")
            self._stream.flush()
            self._width = 0


# --------------------------------------------------------------------------- extraction


def extract_archive(archive: Path | str, out_dir: Path | str, expected_root: str = ARCHIVE_ROOT,
                    scene_parent: Callable[[Path], bool] | None = None, what: str = "") -> Path:
    """Safely extract a ``.tar.gz``/``.tgz``/``.tar``/``.zip`` archive to ``<out_dir>/<expected_root>``.

    Members are written into the temporary sibling ``<out_dir>/.<expected_root>.extracting``;
    then the folder holding the scene directories (names starting with ``i_`` or ``v_``) is
    renamed to ``<out_dir>/<expected_root>``. That folder may be the archive's top level or
    its single top-level folder of any name. Returns the dataset folder.

    Raises :class:`DataError` (naming the archive, and the member where relevant) if the
    target already exists, the archive is missing, of unknown type, corrupt or truncated, has
    no (or several) scene folders, or has an unsafe member: an absolute path, a ``..``
    component, a link pointing outside the extraction folder, or a device/fifo. The temporary
    folder is removed whatever happens. ``scene_parent`` (default: holds an ``i_*`` or ``v_*``
    folder) says whether a folder holds the dataset's scenes, ``what`` names them in its errors
    (default: HPatches').

    Tar members get the checks of the standard library's ``data`` extraction filter
    (:func:`tarfile.data_filter`, where this Python has it) and, on every Python, descbench's
    own: every path is resolved against a record of the links extracted so far (not with
    ``os.path.realpath``, which gives up silently on loops and over-long paths), so nothing is
    ever written through a link that leaves the folder, and once all members are out every
    link is resolved again against the *final* tree, so that a chain whose links were each
    harmless when created (``l -> m/k/../..`` created before ``m -> .``, which the ``data``
    filter of older Pythons, 3.11.7 included, lets through) cannot leave a link that resolves outside the
    dataset folder. Zip members get the same checks, symlinks included (a zip stores them as
    members whose Unix mode, in the external attributes, says "link").
    """
    archive, out_dir = Path(archive), Path(out_dir)
    target = out_dir / expected_root
    if target.exists() or target.is_symlink():
        raise DataError(
            f"{target} already exists: delete it to extract {archive} again, or use it as is"
        )
    if not archive.is_file():
        raise DataError(f"archive {archive} does not exist; download it first")
    extract = _archive_extractor(archive)
    tmp = out_dir / f".{expected_root}.extracting"
    shutil.rmtree(tmp, ignore_errors=True)  # left over by a run killed mid-extraction
    tmp.mkdir(parents=True)
    try:
        tree = _Tree(archive, os.path.realpath(tmp))
        try:
            extract(archive, tree)
        except _CORRUPT_ARCHIVE_ERRORS as err:
            raise DataError(
                f"archive {archive} is corrupt or truncated ({err}): delete it and download it again"
            ) from err
        tree.check_links(())
        root = _scene_root(tmp, archive, scene_parent or _is_scene_parent, what or _HPATCHES_SCENES)
        tree.check_links(root.relative_to(tmp).parts)
        os.replace(root, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _archive_extractor(archive: Path) -> Callable[[Path, _Tree], None]:
    """The extraction function for ``archive``, chosen by its suffix."""
    name = archive.name.lower()
    if name.endswith(".zip"):
        return _extract_zip
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        return _extract_tar
    raise DataError(f"archive {archive} has an unsupported type; expected .tar.gz, .tgz, .tar or .zip")


def _extract_tar(archive: Path, tree: _Tree) -> None:
    """Write the members of a tar archive (any compression) into ``tree``, checking each one."""
    data_filter = getattr(tarfile, "data_filter", None)  # Python >= 3.11.4
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            tree.parts(member.name)  # descbench's own name check first: its message names the rule
            if data_filter is not None:
                try:
                    data_filter(member, tree.root)
                except tarfile.FilterError as err:  # a TarError: must not read as "corrupt"
                    why = f"is refused by the tar 'data' extraction filter ({err})"
                    raise tree.unsafe(member.name, why, _member_kind(member)) from err
            if member.isdir():
                tree.mkdir(member.name)
            elif member.isfile():
                tree.write(member.name, tar.extractfile(member))
            elif member.issym():
                tree.symlink(member.name, member.linkname)
            elif member.islnk():
                tree.hardlink(member.name, member.linkname)
            else:
                raise tree.unsafe(member.name, "is a device or fifo, which an image dataset never contains")


def _member_kind(member: tarfile.TarInfo) -> str:
    """What a tar member is, for messages."""
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hard link"
    return "folder" if member.isdir() else "file" if member.isfile() else "member"


def _extract_zip(archive: Path, tree: _Tree) -> None:
    """Write the members of a zip archive into ``tree``, checking each one.

    A member whose Unix mode (the high 16 bits of its external attributes) says symlink holds
    the link text; it is checked and created like a tar symlink, never written as a file.
    """
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if stat.S_ISLNK(info.external_attr >> 16):
                if info.file_size > _MAX_LINK_TEXT:
                    raise tree.unsafe(info.filename, f"holds {info.file_size} bytes, too many for a link", "symlink")
                try:
                    link = zf.read(info).decode("utf-8")
                except UnicodeDecodeError as err:
                    raise tree.unsafe(info.filename, f"has a target that is not UTF-8 text ({err})", "symlink") from err
                tree.symlink(info.filename, link)
            elif info.is_dir():
                tree.mkdir(info.filename)
            else:
                with zf.open(info) as src:
                    tree.write(info.filename, src)


_MAX_LINK_HOPS = 40  # links followed while resolving one path, as in the Linux kernel
_MAX_LINK_TEXT = 4096  # PATH_MAX: a longer zip "symlink" is not one
_UNSAFE_FIX = (
    "an archive you built yourself must hold only files, folders and links that stay inside it "
    "(no absolute paths, no '..' leaving it)"
)


class _Escape(Exception):
    """A path resolved by :meth:`_Tree.walk` leaves the extraction folder."""


class _Tree:
    """The extraction folder ``root`` (fresh, written by this process only) and its links.

    Every path is resolved component by component against the record of the symlinks created
    so far, which *is* the tree's state, instead of asking ``os.path.realpath`` (which resolves
    a dangling or looping link lexically, silently). Each write also gets the file system's
    own view (``realpath``) as a second opinion.
    """

    def __init__(self, archive: Path, root: str) -> None:
        self.archive, self.root = archive, root
        self.links: dict[tuple[str, ...], tuple[str, str]] = {}  # path parts -> (link text, member)

    def unsafe(self, name: str, why: str, kind: str = "member") -> DataError:
        return DataError(
            f"archive {self.archive}: {kind} {name!r} {why}; refusing to extract it. Fix: delete "
            f"{self.archive} and download it again from an official mirror; {_UNSAFE_FIX}"
        )

    def parts(self, name: str) -> tuple[str, ...]:
        """The components of member ``name``; rejects absolute names and ``..`` components."""
        # PureWindowsPath splits on both separators and sees drive letters, so "C:x", "\\x" and
        # "a\\..\\.." are caught on every OS.
        path = PureWindowsPath(name)
        if path.anchor or ".." in path.parts:
            raise self.unsafe(name, "is unsafe (absolute path or '..' component)")
        return path.parts

    def resolve(self, parts: Iterable[str], name: str, kind: str) -> tuple[str, ...]:
        """``parts`` with every recorded link expanded; :class:`DataError` if it leaves ``root``."""
        try:
            return self.walk(parts, name)
        except _Escape:
            raise self.unsafe(name, "leads outside the extraction folder (through links or '..')", kind) from None

    def walk(self, parts: Iterable[str], name: str) -> tuple[str, ...]:
        """``parts`` with every recorded link expanded; :class:`_Escape` if it leaves ``root``."""
        out: list[str] = []
        todo = list(parts)
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not out:
                    raise _Escape
                out.pop()
                continue
            link = self.links.get((*out, part))
            if link is None:
                out.append(part)
                continue
            hops += 1
            if hops > _MAX_LINK_HOPS:
                raise self.unsafe(name, f"goes through more than {_MAX_LINK_HOPS} symlinks (a link loop)")
            todo = link[0].split("/") + todo  # relative to the link's folder, which is `out`
        return tuple(out)

    def _place(self, name: str, kind: str) -> tuple[tuple[str, ...], str]:
        """Where member ``name`` goes: its folder resolved, its last component as is."""
        parts = self.parts(name)
        if not parts:
            raise self.unsafe(name, "has an empty name", kind)
        rel = (*self.resolve(parts[:-1], name, kind), parts[-1])
        path = os.path.join(self.root, *rel)
        self._require_inside(os.path.dirname(path), name, kind)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return rel, path

    def _require_inside(self, path: str, name: str, kind: str) -> None:
        """The file system's second opinion (``realpath``) on a path the record says is inside."""
        if os.path.commonpath([self.root, os.path.realpath(path)]) != self.root:
            raise self.unsafe(name, "leads outside the extraction folder", kind)

    def _clear(self, rel: tuple[str, ...], path: str, name: str, kind: str) -> None:
        """Make room for a member that replaces an earlier one (tar semantics: the last one wins)."""
        if self.links.pop(rel, None) is not None or os.path.islink(path):
            os.unlink(path)
        elif os.path.isdir(path):
            raise self.unsafe(name, "would replace a folder extracted before it (the archive is inconsistent)", kind)

    def mkdir(self, name: str) -> None:
        parts = self.parts(name)
        if not parts:
            return  # "./": the extraction folder itself
        self._place(name, "folder")
        rel = self.resolve(parts, name, "folder")  # a link as last component is followed, as by mkdir -p
        path = os.path.join(self.root, *rel)
        self._require_inside(path, name, "folder")
        if os.path.lexists(path) and not os.path.isdir(path):
            raise self.unsafe(name, "would replace a file extracted before it (the archive is inconsistent)", "folder")
        os.makedirs(path, exist_ok=True)

    def write(self, name: str, src: IO[bytes] | None) -> None:
        rel, path = self._place(name, "file")
        self._clear(rel, path, name, "file")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        with os.fdopen(os.open(path, flags, 0o666), "wb") as dst:
            if src is not None:
                shutil.copyfileobj(src, dst, _COPY_BYTES)

    def symlink(self, name: str, link: str) -> None:
        if not link or "\\" in link or link.startswith("/") or PureWindowsPath(link).anchor:
            raise self.unsafe(name, f"points to {link!r}: empty, absolute or with a backslash", "symlink")
        rel, path = self._place(name, "symlink")
        self._clear(rel, path, name, "symlink")
        self.links[rel] = (link, name)
        try:
            self.walk(rel, name)  # now, with the links so far; check_links does it again at the end
        except _Escape:
            raise self.unsafe(name, f"-> {link!r} points outside the extraction folder", "symlink") from None
        os.symlink(link, path)

    def hardlink(self, name: str, source: str) -> None:
        # A hard link names another member; a copy of it avoids linking to anything outside.
        source_parts = PureWindowsPath(source)
        try:
            if source_parts.anchor or ".." in source_parts.parts:
                raise _Escape
            src = os.path.join(self.root, *self.walk(source_parts.parts, name))
        except _Escape:
            raise self.unsafe(name, f"-> {source!r} points outside the extraction folder", "hard link") from None
        if not os.path.isfile(src) or os.path.islink(src):
            raise self.unsafe(name, f"-> {source!r} does not name a file extracted before it", "hard link")
        rel, path = self._place(name, "hard link")
        self._clear(rel, path, name, "hard link")
        shutil.copyfile(src, path)

    def check_links(self, base: tuple[str, ...]) -> None:
        """Resolve every link under ``base`` against the final tree: each must stay inside ``base``."""
        top = os.path.join(self.root, *base)
        for rel, (link, name) in self.links.items():
            if rel[: len(base)] != base:
                continue
            try:
                resolved: tuple[str, ...] | None = self.walk(rel, name)
            except _Escape:
                resolved = None
            real = os.path.realpath(os.path.join(self.root, *rel))
            if resolved is None or resolved[: len(base)] != base or os.path.commonpath([top, real]) != top:
                where = "the dataset folder" if base else "the extraction folder"
                raise self.unsafe(
                    name, f"-> {link!r} resolves outside {where} once all members are extracted", "symlink"
                )


def _is_scene_parent(folder: Path) -> bool:
    """Whether ``folder`` directly contains a scene directory (``i_*`` or ``v_*``)."""
    return any(child.is_dir() and child.name.startswith(SCENE_PREFIXES) for child in folder.iterdir())


_HPATCHES_SCENES = "scene folders (i_* or v_*) at its top level or one folder below; it is not an HPatches sequences archive"


def _scene_root(extracted: Path, archive: Path, is_parent: Callable[[Path], bool] = _is_scene_parent,
                what: str = _HPATCHES_SCENES) -> Path:
    """The folder holding the scenes: ``extracted`` itself or its only top-level folder that does."""
    if is_parent(extracted):
        return extracted
    # Filtering on scene content (not "the only folder") also skips e.g. a macOS __MACOSX folder.
    candidates = [
        d for d in sorted(extracted.iterdir()) if d.is_dir() and not d.is_symlink() and is_parent(d)
    ]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise DataError(f"archive {archive} holds no {what}")
    raise DataError(
        f"archive {archive} has several top-level folders holding scenes "
        f"({', '.join(d.name for d in candidates)}); cannot tell which one is the dataset"
    )
