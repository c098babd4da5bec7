"""The HPatches sequence layout: file names, homography files and image reading.

A scene (= sequence) folder holds images ``1..6`` and homographies ``H_1_2 .. H_1_6``
(3x3 whitespace-separated text mapping image-1 pixels to image k: ``p_k ~ H [x, y, 1]^T``).
The Oxford affine layout (``img1.ppm``, ``H1to2p``) has the same semantics and is accepted
wherever a scene folder is read.

Everything here is pure: it only stats, reads and validates files, and every failure is a
:class:`~descbench.errors.DataError` that names the file and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.errors import DataError

N_IMAGES = 6
TARGET_IMAGES = tuple(range(2, N_IMAGES + 1))
IMAGE_EXTENSIONS = (".ppm", ".png", ".jpg", ".jpeg", ".pgm", ".bmp", ".tif", ".tiff")


@dataclass(frozen=True)
class SceneFiles:
    """Paths of one scene: ``images[k-1]`` is image k, ``homographies[k]`` is ``H_1_k``."""

    scene: str
    images: tuple[Path, ...]
    homographies: dict[int, Path]

    def all_paths(self) -> list[Path]:
        return [*self.images, *(self.homographies[k] for k in TARGET_IMAGES)]


def _find_image(scene_dir: Path, stem: str) -> Path | None:
    for ext in IMAGE_EXTENSIONS:
        p = scene_dir / f"{stem}{ext}"
        if p.exists():
            return p
    return None


def scene_files(scene_dir: Path | str, check_exists: bool = True) -> SceneFiles:
    """Locate the 6 images and 5 homographies of a scene folder (HPatches or Oxford layout).

    Only file names are inspected (no image is read), so this is safe at DAG-build time.
    With ``check_exists=False`` the HPatches names (``k.ppm``, ``H_1_k``) are returned
    unchecked, which is what a rule that *creates* the scene needs.
    """
    scene_dir = Path(scene_dir)
    scene = scene_dir.name
    if not check_exists:
        return SceneFiles(
            scene,
            tuple(scene_dir / f"{k}.ppm" for k in range(1, N_IMAGES + 1)),
            {k: scene_dir / f"H_1_{k}" for k in TARGET_IMAGES},
        )
    if not scene_dir.is_dir():
        raise DataError(
            f"scene folder {scene_dir} does not exist; place the sequence there "
            f"(HPatches layout: 1.ppm..6.ppm and H_1_2..H_1_6) or remove '{scene}' from the scene list"
        )
    images, missing = [], []
    oxford = _find_image(scene_dir, "img1") is not None and _find_image(scene_dir, "1") is None
    for k in range(1, N_IMAGES + 1):
        stem = f"img{k}" if oxford else str(k)
        p = _find_image(scene_dir, stem)
        if p is None:
            missing.append(f"{stem}.ppm (or {stem} with another of {'/'.join(IMAGE_EXTENSIONS[1:])})")
        else:
            images.append(p)
    homs = {}
    for k in TARGET_IMAGES:
        p = scene_dir / (f"H1to{k}p" if oxford else f"H_1_{k}")
        if not p.exists():
            missing.append(p.name)
        homs[k] = p
    if missing:
        raise DataError(
            f"scene folder {scene_dir} is incomplete: missing {', '.join(missing)}. "
            "A scene needs images 1..6 and homographies H_1_2..H_1_6 (HPatches layout) or "
            "img1..img6 and H1to2p..H1to6p (Oxford layout); restore the files (re-extract the "
            "dataset archive) or remove the scene"
        )
    return SceneFiles(scene, tuple(images), homs)


def read_homography(path: Path | str) -> np.ndarray:
    """Read a 3x3 homography (whitespace-separated text) as float64, validated.

    Raises :class:`DataError` unless the file holds exactly 9 finite numbers forming an
    invertible matrix with a non-zero ``H[2, 2]`` scale (after which it is normalised so that
    ``H[2, 2] == 1``; projection is invariant to that scale).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read homography {path}: {exc}") from exc
    try:
        values = np.array([float(t) for t in text.split()], dtype=np.float64)
    except ValueError as exc:
        raise DataError(
            f"homography {path} is malformed ({exc}); it must hold 9 numbers (3x3, whitespace separated)"
        ) from exc
    if values.size != 9:
        raise DataError(
            f"homography {path} holds {values.size} numbers, expected 9 (a 3x3 matrix, whitespace separated)"
        )
    H = values.reshape(3, 3)
    if not np.all(np.isfinite(H)):
        raise DataError(f"homography {path} contains non-finite values (nan/inf); fix or regenerate the file")
    # The condition number is scale-invariant: test it before normalising (an all-zero
    # matrix is reported as singular, not as a zero H[2,2]).
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(H) if np.any(H) else np.inf
    if not np.isfinite(cond) or cond > 1e12:
        raise DataError(f"homography {path} is singular (not invertible); fix or regenerate the file")
    if H[2, 2] == 0.0:
        raise DataError(f"homography {path} has H[2,2] == 0; it cannot be normalised, fix the file")
    return H / H[2, 2]


def write_homography(path: Path | str, H: np.ndarray) -> None:
    """Write a 3x3 homography in the HPatches text format (fixed formatting: byte-reproducible)."""
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3):
        raise ValueError(f"homography must be 3x3, got {H.shape}")
    lines = ["  ".join(f"{v:.10e}" for v in row) for row in H]
    Path(path).write_text("\n".join(lines) + "\n")


def read_image(path: Path | str, color: bool = False) -> np.ndarray:
    """Read an image with OpenCV (grayscale uint8 by default, BGR if ``color``).

    A missing, unreadable, truncated or empty file raises :class:`DataError` naming the file.
    """
    import cv2

    path = Path(path)
    if not path.exists():
        raise DataError(f"image {path} does not exist; restore it (re-extract or regenerate the dataset)")
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:  # a directory, no read permission, an I/O error
        raise DataError(f"image {path} cannot be read ({exc}); restore it (re-extract or regenerate the dataset)") from exc
    if data.size == 0:
        raise DataError(f"image {path} is empty (0 bytes); restore it (re-extract or regenerate the dataset)")
    img = cv2.imdecode(data, cv2.IMREAD_COLOR if color else cv2.IMREAD_GRAYSCALE)
    if img is None or img.size == 0:
        raise DataError(
            f"image {path} cannot be decoded (corrupt or truncated, {data.size} bytes); "
            "restore it (re-extract or regenerate the dataset)"
        )
    if path.suffix.lower() in (".ppm", ".pgm"):
        _check_pnm_complete(path, data, img)
    return img


def _check_pnm_complete(path: Path, data: np.ndarray, img: np.ndarray) -> None:
    """OpenCV may decode a truncated binary PPM/PGM without error: check the byte count."""
    header = bytes(data[:64])
    tokens, pos = [], 0
    # Header: magic, width, height, maxval, separated by whitespace, '#' comments allowed.
    while len(tokens) < 4 and pos < len(header):
        while pos < len(header) and chr(header[pos]).isspace():
            pos += 1
        if pos < len(header) and header[pos : pos + 1] == b"#":
            while pos < len(header) and header[pos : pos + 1] != b"\n":
                pos += 1
            continue
        start = pos
        while pos < len(header) and not chr(header[pos]).isspace():
            pos += 1
        tokens.append(header[start:pos].decode("ascii", "replace"))
    if len(tokens) < 4 or tokens[0] not in ("P5", "P6"):
        return  # ASCII variants: OpenCV's own decoder is the check
    w, h, maxval = int(tokens[1]), int(tokens[2]), int(tokens[3])
    channels = 3 if tokens[0] == "P6" else 1
    need = pos + 1 + w * h * channels * (2 if maxval > 255 else 1)
    if data.size < need:
        raise DataError(
            f"image {path} is truncated ({data.size} of {need} bytes); "
            "restore it (re-extract or regenerate the dataset)"
        )


def image_size(path: Path | str) -> tuple[int, int]:
    """(width, height) of an image, read fully (and validated) by :func:`read_image`."""
    img = read_image(path)
    return int(img.shape[1]), int(img.shape[0])
