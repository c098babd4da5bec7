"""The hpatches-release patch layout: strip files, sequence folders and patch names.

A patch dataset root holds one folder per sequence (``i_ajuntament``, ``v_boat``, ...). Each
holds the 16 strips ``<type>.png`` for ``type`` in :data:`~descbench.patches.PATCH_TYPES`: an
8-bit grayscale PNG of width 65 and height ``65 * N``, i.e. N patches of 65x65 stacked
vertically; row ``i`` is the same physical patch in all 16 strips of a sequence.

Colour PNGs
    hpatches-benchmark reads strips with ``cv2.imread(path, 0)``, which silently converts colour
    to gray. Here a 3-channel PNG is accepted only if its three channels are identical (a gray
    strip saved as RGB: taking one channel loses nothing); a PNG whose channels differ, or with
    an alpha channel, is a :class:`~descbench.errors.DataError`, because converting it would
    produce patches that are not the ones the dataset's authors described.

Names (HBench signatures)
    a patch is ``<sequence>.<type>.<index>`` (e.g. ``v_boat.e3.125``), a strip
    ``<sequence>.<type>``. Sequence names may not contain ``.``, ``,`` or whitespace (the
    separators of HBench's benchmark and results files).

Every failure is a :class:`~descbench.errors.DataError` whose message names the file and the fix.
Writing is atomic (temporary file in the same folder, then ``os.replace``) and byte-reproducible
(``cv2.imencode`` with fixed PNG parameters).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np

from descbench.errors import DataError
from descbench.fileops import write_bytes_atomic
from descbench.patches import JITTERS, PATCH_SIZE, PATCH_TYPES

#: How to obtain a patch dataset; appended to every "missing data" message.
OBTAIN_HINT = (
    "download hpatches-release (hpatches-release.tar.gz, 4.2 GB, from the HPatches site; the "
    "hpatches-benchmark repository's download.sh fetches it) and extract it there, or generate "
    "patches from a sequence dataset with descbench.patches.generate.generate_patch_dataset"
)

#: zlib level of :func:`write_strip`'s PNGs: fixed so that equal arrays give equal bytes.
PNG_COMPRESSION = 1  # fastest zlib level; level 3 shrinks a strip by ~5 %, level 9 by ~12 % at 10x the time

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_NAME_FORBIDDEN = re.compile(r"[.,\s]")
_SEQUENCE_NAME = re.compile(r"[^.,\s]+")  # a valid sequence name: the complement of _NAME_FORBIDDEN


# ---------------------------------------------------------------------------------------------
# names


def _check_sequence_name(seq: str) -> None:
    if not isinstance(seq, str) or not seq or _NAME_FORBIDDEN.search(seq):
        raise DataError(
            f"invalid sequence name {seq!r}: a sequence name is a non-empty folder name without "
            "'.', ',' or whitespace (e.g. 'v_boat'); rename the sequence folder"
        )


def _check_patch_type(ptype: str, where: str) -> None:
    if ptype not in PATCH_TYPES:
        raise DataError(f"invalid patch type {ptype!r} in {where}; valid types are {', '.join(PATCH_TYPES)}")


def strip_name(seq: str, ptype: str) -> str:
    """``"<seq>.<type>"``: the HBench name of a strip (patch-image), e.g. ``"v_boat.e3"``."""
    _check_sequence_name(seq)
    _check_patch_type(ptype, f"strip of sequence {seq!r}")
    return f"{seq}.{ptype}"


def parse_strip_name(name: str) -> tuple[str, str]:
    """``(seq, type)`` of a strip name ``"<seq>.<type>"``; :class:`DataError` if malformed."""
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 2:
        raise DataError(f"malformed strip name {name!r}: expected '<sequence>.<type>', e.g. 'v_boat.e3'")
    _check_sequence_name(parts[0])
    _check_patch_type(parts[1], f"strip name {name!r}")
    return parts[0], parts[1]


def patch_name(seq: str, ptype: str, index: int) -> str:
    """``"<seq>.<type>.<index>"``: the HBench name of patch ``index`` (0-based row) of a strip."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise DataError(f"invalid patch index {index!r} for {seq}.{ptype}: it must be an integer >= 0")
    return f"{strip_name(seq, ptype)}.{int(index)}"


def parse_patch_name(name: str) -> tuple[str, str, int]:
    """``(seq, type, index)`` of a patch name ``"<seq>.<type>.<index>"``.

    The index must be a plain non-negative decimal integer (no sign, no spaces, no leading
    zeros other than ``"0"`` itself, so that a name has exactly one spelling).
    """
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 3 or not re.fullmatch(r"0|[1-9][0-9]*", parts[2]):
        raise DataError(
            f"malformed patch name {name!r}: expected '<sequence>.<type>.<index>' with a "
            "non-negative integer index, e.g. 'v_boat.e3.125'"
        )
    seq, ptype = parse_strip_name(f"{parts[0]}.{parts[1]}")
    return seq, ptype, int(parts[2])


def type_source(ptype: str) -> tuple[int, str | None]:
    """``(k, jitter)``: the image of an HPatches sequence a strip is cut from, and its jitter.

    The HPatches convention (6 images: 1 reference + 5 targets): ``ref`` is image 1 without
    jitter -> ``(1, None)``; ``<j><n>`` (j in e/h/t, n in 1..5) is image ``n + 1`` with jitter
    level ``j`` -> ``(n + 1, j)``; e.g. ``"h3"`` -> ``(4, "h")``.
    """
    _check_patch_type(ptype, "type_source")
    if ptype == "ref":
        return 1, None
    return int(ptype[1:]) + 1, ptype[0]


def source_type(k: int, jitter: str) -> str:
    """Inverse of :func:`type_source` for targets: image ``k`` (2..6) with jitter ``j`` -> ``"<j><k-1>"``."""
    if jitter not in JITTERS or not 2 <= int(k) <= 6:
        raise ValueError(f"no HPatches strip for image {k} with jitter {jitter!r}")
    return f"{jitter}{int(k) - 1}"


# ---------------------------------------------------------------------------------------------
# strips


def strip_path(seq_dir: Path | str, ptype: str) -> Path:
    """``<seq_dir>/<type>.png``."""
    _check_patch_type(ptype, f"sequence folder {seq_dir}")
    return Path(seq_dir) / f"{ptype}.png"


def _patch_count(path: Path, width: int, height: int) -> int:
    """N for a strip of the given size, or :class:`DataError` (the one shape rule)."""
    if width != PATCH_SIZE:
        raise DataError(
            f"patch strip {path} has width {width}, expected {PATCH_SIZE} (one {PATCH_SIZE}x{PATCH_SIZE} "
            f"patch per row); it is not an HPatches strip: re-extract or regenerate it"
        )
    if height % PATCH_SIZE:
        raise DataError(
            f"patch strip {path}: height {height} is not a multiple of {PATCH_SIZE} (it must stack whole "
            f"{PATCH_SIZE}x{PATCH_SIZE} patches); the file is damaged or not a strip: re-extract or regenerate it"
        )
    if height == 0:
        raise DataError(f"patch strip {path} holds zero patches; re-extract or regenerate it")
    return height // PATCH_SIZE


def read_strip(path: Path | str) -> np.ndarray:
    """The patches of a strip PNG as ``uint8 [N, 65, 65]`` (row i = ``strip[65 i : 65 (i+1)]``).

    Raises :class:`DataError` naming the file when it is missing, empty, not decodable
    (corrupt, truncated), not 8-bit, a colour PNG whose channels differ or with alpha (a
    3-channel PNG with equal channels is accepted, see the module docstring), of width != 65,
    of height not a multiple of 65, or holding zero patches.
    """
    import cv2

    path = Path(path)
    if not path.is_file():
        raise DataError(f"patch strip {path} does not exist; {OBTAIN_HINT}")
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise DataError(f"patch strip {path} cannot be read ({exc}); restore it: {OBTAIN_HINT}") from exc
    if data.size == 0:
        raise DataError(f"patch strip {path} is empty (0 bytes); restore it: {OBTAIN_HINT}")
    img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if img is None or img.size == 0:
        raise DataError(
            f"patch strip {path} cannot be decoded as an image (corrupt or truncated, {data.size} bytes); "
            f"restore it: {OBTAIN_HINT}"
        )
    if img.dtype != np.uint8:
        raise DataError(f"patch strip {path} is {img.dtype}, expected 8-bit grayscale; re-extract or regenerate it")
    if img.ndim == 3:
        if img.shape[2] != 3:
            raise DataError(
                f"patch strip {path} has {img.shape[2]} channels; HPatches strips are 8-bit grayscale "
                "(an alpha channel is not allowed): re-extract it or save it as grayscale"
            )
        if not (np.array_equal(img[..., 0], img[..., 1]) and np.array_equal(img[..., 0], img[..., 2])):
            raise DataError(
                f"patch strip {path} is a colour PNG whose channels differ; HPatches strips are grayscale "
                "and descbench does not guess a conversion: save it as grayscale (e.g. "
                "cv2.imwrite(path, cv2.cvtColor(img, cv2.COLOR_BGR2GRAY))) or re-extract it"
            )
        img = np.ascontiguousarray(img[..., 0])
    n = _patch_count(path, img.shape[1], img.shape[0])
    return img.reshape(n, PATCH_SIZE, PATCH_SIZE)


def encode_strip(patches: np.ndarray) -> bytes:
    """PNG bytes of ``patches`` (``uint8 [N, 65, 65]``, N >= 1) stacked vertically.

    ``cv2.imencode`` with the fixed parameters (zlib level :data:`PNG_COMPRESSION`, default
    strategy): equal arrays give equal bytes with the same OpenCV/zlib build.
    """
    import cv2

    patches = np.asarray(patches)
    if patches.dtype != np.uint8 or patches.ndim != 3 or patches.shape[1:] != (PATCH_SIZE, PATCH_SIZE):
        raise ValueError(f"patches must be uint8 [N, {PATCH_SIZE}, {PATCH_SIZE}], got {patches.dtype} {patches.shape}")
    if len(patches) == 0:
        raise ValueError("cannot write a strip of zero patches (an empty strip is not a valid PNG strip)")
    strip = np.ascontiguousarray(patches.reshape(-1, PATCH_SIZE))
    ok, buf = cv2.imencode(".png", strip, [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION])
    if not ok:
        raise RuntimeError("OpenCV could not encode a patch strip as PNG")
    return buf.tobytes()


def write_strip(path: Path | str, patches: np.ndarray) -> None:
    """Write ``patches`` (``uint8 [N, 65, 65]``) as a strip PNG, atomically and byte-reproducibly.

    :func:`read_strip` returns exactly ``patches`` (PNG is lossless).
    """
    write_bytes_atomic(path, encode_strip(patches))


def png_size(path: Path | str) -> tuple[int, int]:
    """``(width, height)`` from a PNG's IHDR chunk (the first 24 bytes; nothing is decoded).

    :class:`DataError` if the file is missing, shorter than a PNG header, or not a PNG.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except FileNotFoundError:
        raise DataError(f"patch strip {path} does not exist; {OBTAIN_HINT}") from None
    except OSError as exc:
        raise DataError(f"patch strip {path} cannot be read ({exc}); restore it: {OBTAIN_HINT}") from exc
    # Layout: 8-byte signature, then the IHDR chunk: length (4), b"IHDR", width (4), height (4).
    if len(head) < 24 or head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise DataError(
            f"patch strip {path} is not a PNG file (no PNG signature / IHDR header, {len(head)} bytes read); "
            f"restore it: {OBTAIN_HINT}"
        )
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def strip_patch_count(path: Path | str) -> int:
    """N of a strip from its PNG header alone (same shape rules as :func:`read_strip`)."""
    path = Path(path)
    width, height = png_size(path)
    return _patch_count(path, width, height)


# ---------------------------------------------------------------------------------------------
# sequences and datasets


def _missing_strips(seq_dir: Path) -> list[str]:
    return [f"{t}.png" for t in PATCH_TYPES if not strip_path(seq_dir, t).is_file()]


def _check_sequence_dir(seq_dir: Path) -> None:
    if not seq_dir.is_dir():
        raise DataError(f"patch sequence folder {seq_dir} does not exist; {OBTAIN_HINT}")
    missing = _missing_strips(seq_dir)
    if missing:
        raise DataError(
            f"patch sequence folder {seq_dir} is incomplete: missing {', '.join(missing)} (a sequence needs "
            f"all 16 strips {', '.join(PATCH_TYPES)}); {OBTAIN_HINT}"
        )


def sequence_patch_count(seq_dir: Path | str) -> int:
    """N of a sequence, read from the 16 PNG headers only (no decoding).

    :class:`DataError` if the folder or a strip is missing, a header is invalid, or two strips
    hold different numbers of patches (the message names both files and their counts).
    """
    seq_dir = Path(seq_dir)
    _check_sequence_dir(seq_dir)
    first = strip_path(seq_dir, PATCH_TYPES[0])
    n_first = strip_patch_count(first)
    for ptype in PATCH_TYPES[1:]:
        path = strip_path(seq_dir, ptype)
        n = strip_patch_count(path)
        if n != n_first:
            raise DataError(
                f"patch strips of one sequence disagree: {first} holds {n_first} patches but {path} holds "
                f"{n} (row i must be the same patch in all 16 strips); re-extract or regenerate {seq_dir}"
            )
    return n_first


def read_sequence(seq_dir: Path | str) -> dict[str, np.ndarray]:
    """All 16 strips of a sequence: ``{type: uint8 [N, 65, 65]}`` in :data:`PATCH_TYPES` order.

    :class:`DataError` for a missing folder or strip, any bad strip (:func:`read_strip`), or
    strips with different N.
    """
    seq_dir = Path(seq_dir)
    _check_sequence_dir(seq_dir)
    out = {t: read_strip(strip_path(seq_dir, t)) for t in PATCH_TYPES}
    ref = strip_path(seq_dir, "ref")
    for t, patches in out.items():
        if len(patches) != len(out["ref"]):
            raise DataError(
                f"patch strips of one sequence disagree: {ref} holds {len(out['ref'])} patches but "
                f"{strip_path(seq_dir, t)} holds {len(patches)}; re-extract or regenerate {seq_dir}"
            )
    return out


def list_patch_sequences(root: Path | str) -> list[str]:
    """Sorted names of the sequence folders under ``root``: sub-folders holding a ``ref.png``.

    Other entries (files, folders without ``ref.png``, hidden folders) are ignored;
    :class:`DataError` if ``root`` is not a folder, or if a sequence folder's name is not a valid
    sequence name (no ``.``, ``,`` or whitespace: the separators of HBench's files), so that a
    bad name is reported here, naming the folder, rather than by a later job.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"patch dataset folder {root} does not exist; {OBTAIN_HINT}")
    names = sorted(
        p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "ref.png").is_file()
    )
    bad = [n for n in names if not _SEQUENCE_NAME.fullmatch(n)]
    if bad:
        raise DataError(
            f"patch dataset {root}: sequence folder(s) {', '.join(str(root / n) for n in bad)} have invalid "
            f"names; a sequence folder name must match {_SEQUENCE_NAME.pattern} (no '.', ',' or whitespace, "
            "which separate the parts of HBench's patch names '<sequence>.<type>.<index>', e.g. 'v_boat'); "
            f"rename the folder(s) (e.g. {bad[0]!r} -> {_NAME_FORBIDDEN.sub('_', bad[0])!r}) or move them out "
            "of the dataset folder"
        )
    return names


def validate_patch_dataset(root: Path | str, sequences: list[str] | tuple[str, ...]) -> dict[str, int]:
    """Check that every sequence of ``sequences`` is complete under ``root``; ``{seq: N}``.

    Only names and PNG headers are read (cheap enough for DAG-build time). Everything missing
    (sequence folders and strips) is collected and reported in one :class:`DataError` with the
    way to obtain the data; inconsistent strips raise as in :func:`sequence_patch_count`.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"patch dataset folder {root} does not exist; {OBTAIN_HINT}")
    problems = []
    for seq in sequences:
        _check_sequence_name(seq)
        seq_dir = root / seq
        if not seq_dir.is_dir():
            problems.append(f"{seq}/ (whole sequence folder)")
            continue
        problems.extend(f"{seq}/{name}" for name in _missing_strips(seq_dir))
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise DataError(f"patch dataset {root} is incomplete: missing {', '.join(shown)}; {OBTAIN_HINT}")
    return {seq: sequence_patch_count(root / seq) for seq in sequences}
