"""The HPatches sequence layout: file names, homography files and image reading.

A scene (= sequence) folder holds images ``1..6`` and homographies ``H_1_2 .. H_1_6``
(3x3 whitespace-separated text mapping image-1 pixels to image k: ``p_k ~ H [x, y, 1]^T``).
The Oxford affine layout (``img1.ppm``, ``H1to2p``) has the same semantics and is accepted
wherever a scene folder is read.

Everything here is pure: it only stats, reads and validates files, and every failure is a
:class:`~descbench.errors.DataError` that names the file and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.errors import DataError
from descbench.fileops import write_text_atomic

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


# What looks like an image or a homography of a sequence (either layout), by file name alone:
# an integer stem (``7``, ``img7``) with an image extension, or ``H_1_<n>`` / ``H1to<n>p``.
# Anything else (precomputed features ``1.ppm.<method>``, README, hidden files) is not matched.
_EXT_PATTERN = "|".join(e[1:] for e in IMAGE_EXTENSIONS)
_SEQUENCE_IMAGE = re.compile(rf"(img)?([0-9]+)\.({_EXT_PATTERN})", re.IGNORECASE)
_SEQUENCE_HOMOGRAPHY = re.compile(r"(?:H_1_([0-9]+)|H1to([0-9]+)p)", re.IGNORECASE)


def _check_sequence_files(scene_dir: Path, oxford: bool) -> list[str]:
    """Reject two candidate files for one image; return the names of the sequence-like files
    that are not one of the scene's 6 images and 5 homographies (the caller reports them)."""
    prefix = "img" if oxford else ""
    candidates: dict[int, list[str]] = {k: [] for k in range(1, N_IMAGES + 1)}
    used_homographies = {f"H1to{k}p" if oxford else f"H_1_{k}" for k in TARGET_IMAGES}
    extra = []
    for name in sorted(p.name for p in scene_dir.iterdir()):  # hidden names (".x") never match
        image = _SEQUENCE_IMAGE.fullmatch(name)
        if image is not None:
            stem = name[: name.rindex(".")]
            k = int(image.group(2))
            if stem == f"{prefix}{k}" and k in candidates:
                candidates[k].append(name)
            else:
                extra.append(name)
        elif _SEQUENCE_HOMOGRAPHY.fullmatch(name) is not None and name not in used_homographies:
            extra.append(name)
    for k, names in candidates.items():
        if len(names) > 1:
            raise DataError(
                f"scene folder {scene_dir} holds {len(names)} candidate files for image {k}: "
                f"{', '.join(names)}; descbench does not guess which one is the image. Keep exactly one "
                f"of them ({prefix}{k} with one extension) and move the other(s) out of the scene folder"
            )
    return extra


def _extra_files_message(scene_dir: Path, extra: list[str], oxford: bool) -> str:
    layout = ("img1..img6 and H1to2p..H1to6p (Oxford layout)" if oxford
              else "1..6 and H_1_2..H_1_6 (HPatches layout)")
    return (
        f"scene folder {scene_dir} holds files that look like images or homographies of the sequence "
        f"but are not among its {layout}: {', '.join(extra)}. A scene is exactly 6 images (image 1 "
        "and its 5 targets) and 5 homographies, and descbench does not ignore the rest silently: move "
        "the extra files out of the scene folder, or split a longer sequence into scenes of 6 images "
        "(each with its own 5 homographies from its image 1)"
    )


def scene_files(scene_dir: Path | str, check_exists: bool = True) -> SceneFiles:
    """Locate the 6 images and 5 homographies of a scene folder (HPatches or Oxford layout).

    Only file names are inspected (no image is read), so this is safe at DAG-build time.
    :class:`DataError` if a file is missing, if one image has two candidate files (``1.ppm`` and
    ``1.png``), or if the folder holds other files that look like images or homographies of the
    sequence (``7.ppm``, ``H_1_7``, ``img0.png``, files of the other layout): a scene is exactly 6
    images and 5 homographies. Other files (precomputed features ``1.ppm.<method>``, a README,
    hidden files) are not looked at.
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
    extra = _check_sequence_files(scene_dir, oxford)
    if missing:
        raise DataError(
            f"scene folder {scene_dir} is incomplete: missing {', '.join(missing)}. "
            "A scene needs images 1..6 and homographies H_1_2..H_1_6 (HPatches layout) or "
            "img1..img6 and H1to2p..H1to6p (Oxford layout); restore the files (re-extract the "
            "dataset archive) or remove the scene"
            + (f" (the folder also holds {', '.join(extra)}, which are not part of a scene)" if extra else "")
        )
    if extra:
        raise DataError(_extra_files_message(scene_dir, extra, oxford))
    return SceneFiles(scene, tuple(images), homs)


def read_homography(path: Path | str) -> np.ndarray:
    """Read a 3x3 homography (whitespace-separated text) as float64, validated.

    Raises :class:`DataError` unless the file holds exactly 9 finite numbers forming an
    invertible matrix (condition number at most :data:`MAX_CONDITION`) with a non-zero
    ``H[2, 2]`` scale (after which it is normalised so that ``H[2, 2] == 1``; projection is
    invariant to that scale). A matrix over the condition limit is reported as singular when it
    stays so after row/column equilibration (rank < 3), otherwise as ill-conditioned with its
    numbers (e.g. a 1e9 px translation, which maps the image far outside any plausible range).
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
    if not np.isfinite(cond) or cond > MAX_CONDITION:
        raise DataError(_ill_conditioned_message(path, H, cond))
    if H[2, 2] == 0.0:
        raise DataError(f"homography {path} has H[2,2] == 0; it cannot be normalised, fix the file")
    return H / H[2, 2]


#: A homography whose condition number exceeds this is rejected (:func:`read_homography`).
MAX_CONDITION = 1e12
#: Pixel coordinates beyond this are implausible for an image (used in error messages only).
PLAUSIBLE_PX = 1e6


def _equilibrated(H: np.ndarray) -> np.ndarray | None:
    """``H`` with its rows and columns scaled to unit max-abs (Ruiz); None if a row or column is 0.

    Invertibility does not depend on such scalings, but the plain condition number does: a
    translation of 1e9 px has condition number 1e18 although its determinant is 1. A matrix
    that stays ill-conditioned after equilibration is (numerically) singular.
    """
    A = np.abs(H)
    if not (np.all(A.max(axis=1) > 0) and np.all(A.max(axis=0) > 0)):
        return None  # a zero row or column: rank < 3
    A = H.astype(np.float64)
    for _ in range(50):
        r = np.sqrt(np.abs(A).max(axis=1))
        c = np.sqrt(np.abs(A).max(axis=0))
        A = A / r[:, None] / c[None, :]
        if np.all(np.abs(r - 1) < 1e-6) and np.all(np.abs(c - 1) < 1e-6):
            break
    return A


def _ill_conditioned_message(path: Path, H: np.ndarray, cond: float) -> str:
    """Why a homography with a huge condition number is rejected: singular, or badly scaled."""
    A = _equilibrated(H)
    with np.errstate(all="ignore"):
        eq_cond = np.inf if A is None else float(np.linalg.cond(A))
    if not np.isfinite(eq_cond) or eq_cond > MAX_CONDITION:
        sv = np.linalg.svd(H if A is None else A, compute_uv=False)
        rank = int(np.sum(sv > sv.max() / MAX_CONDITION))  # rank at the same tolerance as the limit
        return (
            f"homography {path} is singular (not invertible: numerical rank {rank} of 3, its rows are "
            "linearly dependent, so it would collapse image 1 onto a line or a point); fix or "
            "regenerate the file (it must map image 1 to image k, p_k ~ H [x, y, 1]^T)"
        )
    scaled = H[2, 2] != 0
    Hn = H / H[2, 2] if scaled else H
    det = f"determinant {np.linalg.det(Hn):.6g}" + (" after scaling H[2,2] to 1" if scaled else ", H[2,2] = 0")
    where, far = [], False
    for x, y in ((0.0, 0.0), (1000.0, 1000.0)):
        w = Hn[2, 0] * x + Hn[2, 1] * y + Hn[2, 2]
        if w == 0:
            where.append(f"({x:g}, {y:g}) to infinity")
            far = True
            continue
        u = (Hn[0, 0] * x + Hn[0, 1] * y + Hn[0, 2]) / w
        v = (Hn[1, 0] * x + Hn[1, 1] * y + Hn[1, 2]) / w
        where.append(f"({x:g}, {y:g}) to ({u:.6g}, {v:.6g})")
        far = far or max(abs(u), abs(v)) > PLAUSIBLE_PX
    sv = np.linalg.svd(H, compute_uv=False)
    effect = (
        f"far outside any plausible image (beyond {PLAUSIBLE_PX:g} px), so no keypoint of image 1 could land in image k"
        if far else f"with singular values from {sv.min():.3g} to {sv.max():.3g}, an implausible squeeze or stretch of image 1"
    )
    return (
        f"homography {path} is ill-conditioned, not singular: its condition number is {cond:.3g} "
        f"(the limit is {MAX_CONDITION:g}; {det}) because its entries span "
        f"{np.abs(H[H != 0]).min():.3g} to {np.abs(H).max():.3g}. It maps pixel {' and '.join(where)}, "
        f"{effect}. Check that the file is a pixel-to-pixel homography from image 1 to image k "
        "(p_k ~ H [x, y, 1]^T, in pixels, not inverted) and fix or regenerate it"
    )


def write_homography(path: Path | str, H: np.ndarray) -> None:
    """Write a 3x3 homography in the HPatches text format (fixed formatting: byte-reproducible)."""
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (3, 3):
        raise ValueError(f"homography must be 3x3, got {H.shape}")
    lines = ["  ".join(f"{v:.10e}" for v in row) for row in H]
    write_text_atomic(path, "\n".join(lines) + "\n")


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
