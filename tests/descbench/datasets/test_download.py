"""Tests of descbench.datasets.download against a local HTTP server (127.0.0.1 only)."""

from __future__ import annotations

import hashlib
import io
import random
import re
import socket
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from descbench.datasets.download import (
    ARCHIVE_ROOT,
    DEFAULT_URLS,
    extract_archive,
    fetch_archive,
    find_local_archive,
)
from descbench.errors import DataError, DownloadError

TAR_NAME = f"{ARCHIVE_ROOT}.tar.gz"
ZIP_NAME = f"{ARCHIVE_ROOT}.zip"
SCENES = ("i_foo", "v_bar")
HOMOGRAPHY = "1 0 0\n0 1 0\n0 0 1\n"
IMAGE_BYTES = 16_000  # 12 random images: ~200 KB archives that do not compress away
TIMEOUT = 5.0  # bounds every request, so that a bug cannot hang the suite


# --------------------------------------------------------------------------- archives


def _layout_files(prefix: str) -> dict[str, bytes]:
    """Member name -> content of a small HPatches tree whose scenes live under ``prefix``."""
    rng = random.Random(0)
    files = {}
    for scene in SCENES:
        for k in range(1, 7):
            files[f"{prefix}{scene}/{k}.ppm"] = rng.randbytes(IMAGE_BYTES)
        for k in range(2, 7):
            files[f"{prefix}{scene}/H_1_{k}"] = HOMOGRAPHY.encode()
    return files


def _dirs(files: dict[str, bytes]) -> list[str]:
    """Every folder of ``files`` (parents first), as archives list them; a hostile ``..`` is no folder."""
    dirs = {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    return sorted(d for d in dirs if ".." not in d.split("/"))


def _write_tar(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in _dirs(files):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _write_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in _dirs(files):
            zf.writestr(f"{name}/", b"")
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@dataclass(frozen=True)
class Archives:
    tar_gz: Path
    zip: Path


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Archives:
    """A tar.gz and a zip of the same 2-scene tree under ``hpatches-sequences-release/``."""
    folder = tmp_path_factory.mktemp("archives")
    files = _layout_files(f"{ARCHIVE_ROOT}/")
    return Archives(_write_tar(folder / TAR_NAME, files), _write_zip(folder / ZIP_NAME, files))


# --------------------------------------------------------------------------- HTTP server


@dataclass
class ServerState:
    """What the test server serves and how, plus a log of what it received."""

    files: dict[str, bytes]
    cut_after: int | None = None  # send the full Content-Length but hang up after this many bytes
    honor_range: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)


def _handler(state: ServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: the server closes the connection after each response, which is what
        # turns an early return in the cut_after mode into an interrupted transfer.
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            range_header = self.headers.get("Range")
            state.requests.append((self.path, range_header))
            data = state.files.get(self.path)
            if data is None:
                self.send_error(404)
                return
            match = re.fullmatch(r"bytes=(\d+)-", range_header or "") if state.honor_range else None
            start = int(match[1]) if match else 0
            if start >= len(data) and match:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if match:
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if state.cut_after is None else body[: state.cut_after])

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the test output clean

    return Handler


@dataclass(frozen=True)
class Server:
    base: str
    state: ServerState


@pytest.fixture
def server(archives: Archives) -> Iterator[Server]:
    """A local HTTP server serving both archives at ``/<name>``; anything else is a 404."""
    state = ServerState(
        {f"/{TAR_NAME}": archives.tar_gz.read_bytes(), f"/{ZIP_NAME}": archives.zip.read_bytes()}
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{httpd.server_address[1]}", state)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=2)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy configured in the environment must not intercept requests to 127.0.0.1."""
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")


def _closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- fetch_archive


def test_default_urls_are_the_two_mirrors():
    assert [u.rsplit("/", 1)[1] for u in DEFAULT_URLS] == [TAR_NAME, ZIP_NAME]


def test_full_download_with_sha256_and_progress(server: Server, archives: Archives, tmp_path: Path, capsys):
    data = archives.tar_gz.read_bytes()
    path = fetch_archive(
        [f"{server.base}/{TAR_NAME}"],
        tmp_path,
        sha256=_sha256(data).upper(),  # hex digests are case-insensitive
        timeout=TIMEOUT,
        chunk_bytes=16_384,  # several chunks, so several progress lines
    )
    assert path == tmp_path / TAR_NAME
    assert path.read_bytes() == data
    assert not (tmp_path / f"{TAR_NAME}.part").exists()
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines and all(line.startswith(f"downloading {TAR_NAME}: ") for line in lines)
    assert lines[-1].endswith("(100.0 %)")
    assert "\r" not in err  # captured stderr is not a TTY: whole lines only
    assert len(lines) <= 22  # rate limited: one per 5 % (plus start and end) at this speed


@pytest.mark.bad_input
def test_sha256_mismatch_deletes_download(server: Server, archives: Archives, tmp_path: Path):
    wrong = "0" * 64
    with pytest.raises(DownloadError) as exc:
        fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, sha256=wrong, progress=False, timeout=TIMEOUT)
    message = str(exc.value)
    assert wrong in message and _sha256(archives.tar_gz.read_bytes()) in message
    assert str(tmp_path / TAR_NAME) in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.bad_input
def test_invalid_sha256_is_rejected_before_downloading(server: Server, tmp_path: Path):
    with pytest.raises(DownloadError, match="64 hexadecimal digits"):
        fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, sha256="abc", progress=False)
    assert server.state.requests == []


def test_interrupted_transfer_is_resumed(server: Server, archives: Archives, tmp_path: Path):
    data, cut = archives.tar_gz.read_bytes(), 50_000
    url, part = f"{server.base}/{TAR_NAME}", tmp_path / f"{TAR_NAME}.part"
    server.state.cut_after = cut
    with pytest.raises(DownloadError, match="connection closed after 50000"):
        fetch_archive([url], tmp_path, progress=False, timeout=TIMEOUT)
    assert part.read_bytes() == data[:cut]
    assert not (tmp_path / TAR_NAME).exists()

    server.state.cut_after = None
    path = fetch_archive([url], tmp_path, sha256=_sha256(data), progress=False, timeout=TIMEOUT)
    assert server.state.requests[-1] == (f"/{TAR_NAME}", f"bytes={cut}-")
    assert path.read_bytes() == data
    assert not part.exists()


def test_server_ignoring_range_restarts_from_zero(server: Server, archives: Archives, tmp_path: Path):
    data = archives.tar_gz.read_bytes()
    (tmp_path / f"{TAR_NAME}.part").write_bytes(b"stale bytes")
    server.state.honor_range = False
    path = fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, progress=False, timeout=TIMEOUT)
    assert server.state.requests == [(f"/{TAR_NAME}", f"bytes={len(b'stale bytes')}-")]
    assert path.read_bytes() == data


def test_complete_part_is_renamed_after_416(server: Server, archives: Archives, tmp_path: Path):
    data = archives.tar_gz.read_bytes()
    (tmp_path / f"{TAR_NAME}.part").write_bytes(data)
    path = fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, progress=False, timeout=TIMEOUT)
    assert server.state.requests == [(f"/{TAR_NAME}", f"bytes={len(data)}-")]
    assert path.read_bytes() == data


def test_mirror_fallback(server: Server, archives: Archives, tmp_path: Path):
    urls = [f"{server.base}/missing/{TAR_NAME}", f"{server.base}/{ZIP_NAME}"]
    path = fetch_archive(urls, tmp_path, progress=False, timeout=TIMEOUT)
    assert path == tmp_path / ZIP_NAME
    assert path.read_bytes() == archives.zip.read_bytes()
    assert [p for p, _ in server.state.requests] == [f"/missing/{TAR_NAME}", f"/{ZIP_NAME}"]
    assert not (tmp_path / f"{TAR_NAME}.part").exists()


@pytest.mark.bad_input
def test_all_mirrors_failing_says_where_to_put_the_archive(server: Server, tmp_path: Path):
    urls = [f"{server.base}/missing/{TAR_NAME}", f"http://127.0.0.1:{_closed_port()}/{ZIP_NAME}"]
    with pytest.raises(DownloadError) as exc:
        fetch_archive(urls, tmp_path, progress=False, timeout=TIMEOUT)
    message = str(exc.value)
    assert all(url in message for url in urls)
    assert "404" in message
    assert str(tmp_path / TAR_NAME) in message and "rerun" in message
    assert list(tmp_path.iterdir()) == []


def test_existing_final_file_skips_the_network(server: Server, archives: Archives, tmp_path: Path):
    data = archives.tar_gz.read_bytes()
    (tmp_path / TAR_NAME).write_bytes(data)
    path = fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, sha256=_sha256(data), progress=False)
    assert path == tmp_path / TAR_NAME
    assert server.state.requests == []


@pytest.mark.bad_input
def test_existing_final_file_with_wrong_sha256_is_reported_not_deleted(server: Server, tmp_path: Path):
    (tmp_path / TAR_NAME).write_bytes(b"not the archive")
    with pytest.raises(DownloadError, match="delete it"):
        fetch_archive([f"{server.base}/{TAR_NAME}"], tmp_path, sha256="f" * 64, progress=False)
    assert (tmp_path / TAR_NAME).read_bytes() == b"not the archive"
    assert server.state.requests == []


def test_find_local_archive(tmp_path: Path):
    assert find_local_archive(tmp_path) is None
    (tmp_path / f"{TAR_NAME}.part").write_bytes(b"partial")
    assert find_local_archive(tmp_path) is None
    (tmp_path / ZIP_NAME).write_bytes(b"zip")
    assert find_local_archive(tmp_path) == tmp_path / ZIP_NAME
    (tmp_path / TAR_NAME).write_bytes(b"tar")
    assert find_local_archive(tmp_path) == tmp_path / TAR_NAME


# --------------------------------------------------------------------------- extract_archive


def _assert_extracted(out: Path) -> None:
    root = out / ARCHIVE_ROOT
    for scene in SCENES:
        assert (root / scene / "H_1_2").read_text() == HOMOGRAPHY
        assert len((root / scene / "6.ppm").read_bytes()) == IMAGE_BYTES
    assert not (out / f".{ARCHIVE_ROOT}.extracting").exists()


@pytest.mark.parametrize("kind", ["tar_gz", "zip"])
def test_extract(archives: Archives, tmp_path: Path, kind: str):
    root = extract_archive(getattr(archives, kind), tmp_path)
    assert root == tmp_path / ARCHIVE_ROOT
    _assert_extracted(tmp_path)


@pytest.mark.parametrize("prefix", ["", "other-root/"])
@pytest.mark.parametrize("writer", [_write_tar, _write_zip])
def test_extract_other_root_layouts(tmp_path: Path, prefix: str, writer):
    suffix = ".tar.gz" if writer is _write_tar else ".zip"
    archive = writer(tmp_path / f"a{suffix}", _layout_files(prefix))
    extract_archive(archive, tmp_path / "out")
    _assert_extracted(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [ARCHIVE_ROOT]


def _assert_nothing_extracted(out: Path) -> None:
    assert not (out / ARCHIVE_ROOT).exists()
    assert not (out / f".{ARCHIVE_ROOT}.extracting").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("writer", [_write_tar, _write_zip])
def test_path_traversal_member_is_rejected(tmp_path: Path, writer):
    files = {**_layout_files(f"{ARCHIVE_ROOT}/"), "../evil": b"owned"}
    archive = writer(tmp_path / ("bad.tar.gz" if writer is _write_tar else "bad.zip"), files)
    out = tmp_path / "deep" / "out"
    with pytest.raises(DataError, match=r"'\.\./evil'") as exc:
        extract_archive(archive, out)
    assert str(archive) in str(exc.value)
    assert not (out.parent / "evil").exists()
    _assert_nothing_extracted(out)


@pytest.mark.bad_input
def test_symlink_pointing_outside_is_rejected(tmp_path: Path):
    archive = tmp_path / "link.tar"
    with tarfile.open(archive, "w") as tar:
        link = tarfile.TarInfo(f"{ARCHIVE_ROOT}/i_foo/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "../../../outside"
        tar.addfile(link)
    with pytest.raises(DataError, match="symlink .*escape.* outside"):
        extract_archive(archive, tmp_path / "out")
    _assert_nothing_extracted(tmp_path / "out")


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", ["tar_gz", "zip"])
def test_truncated_archive_raises_data_error(archives: Archives, tmp_path: Path, kind: str):
    source = getattr(archives, kind)
    truncated = tmp_path / source.name
    truncated.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    with pytest.raises(DataError, match="corrupt or truncated.*delete it and download it again"):
        extract_archive(truncated, tmp_path / "out")
    _assert_nothing_extracted(tmp_path / "out")


@pytest.mark.bad_input
def test_existing_target_is_not_overwritten(archives: Archives, tmp_path: Path):
    (tmp_path / ARCHIVE_ROOT).mkdir()
    with pytest.raises(DataError, match="already exists.*delete it.*use it as is"):
        extract_archive(archives.tar_gz, tmp_path)
    assert list((tmp_path / ARCHIVE_ROOT).iterdir()) == []


# --------------------------------------------------------------------------- hpatches-release (patches)


def _patch_archive(folder: Path, bad_strip: bool = False) -> Path:
    """hpatches-release.tar.gz holding two sequences of 3 patches (one strip 7 px too tall if bad)."""
    import cv2
    import numpy as np

    from descbench.patches import PATCH_TYPES

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for seq in ("i_one", "v_two"):
        for t in PATCH_TYPES:
            h = 65 * 3 + (7 if bad_strip and (seq, t) == ("v_two", "h2") else 0)
            ok, png = cv2.imencode(".png", np.full((h, 65), 100, np.uint8))
            files[f"hpatches-release/{seq}/{t}.png"] = png.tobytes()
    return _write_tar(folder / "hpatches-release.tar.gz", files)


def test_patches_download_extracts_and_validates(tmp_path: Path):
    from descbench.patches.download import obtain_patches

    archive = _patch_archive(tmp_path / "srv")
    state = ServerState({"/hpatches-release.tar.gz": archive.read_bytes()})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/hpatches-release.tar.gz"
        flag = tmp_path / "flag"
        root = obtain_patches([url], _sha256(archive.read_bytes()), tmp_path / "data", flag, sequences=["i_one", "v_two"])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=2)
    assert root == tmp_path / "data" / "hpatches" / "hpatches-release" and (root / "v_two" / "t5.png").is_file()
    assert "validated 2 patch sequences" in flag.read_text()
    # offline: an archive placed by hand is used without any network (no URL reachable)
    manual = tmp_path / "manual"
    (manual / "hpatches").mkdir(parents=True)
    _patch_archive(manual / "hpatches", bad_strip=True)
    with pytest.raises(DataError, match=r"v_two.h2\.png.*not a multiple of 65"):
        obtain_patches([f"http://127.0.0.1:{_closed_port()}/x.tar.gz"], None, manual, sequences=["i_one", "v_two"])
