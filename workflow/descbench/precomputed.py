"""Features computed elsewhere (e.g. by a learned network), in the D2-Net npz convention.

For each image ``<scene>/<k>.ppm`` a file ``<scene>/<k>.ppm.<method>`` (D2-Net, R2D2, ASLFeat,
DISK... write it with ``np.savez`` into a file object, so no ``.npz`` suffix is added; a
``.npz`` suffix is accepted too) holds:

- ``keypoints``: N x 2 or more, columns ``x, y[, scale, ...]`` in pixel coordinates of the image
  (x right, y down). A third column is taken as the keypoint size in pixels.
- ``descriptors``: N x D, float (compared with L2) or uint8 packed bits (compared with Hamming).
- ``scores`` (optional): N, used as the keypoint response for the ``max_keypoints`` cap; a set
  with a cap needs them (:func:`check_cap_has_scores`: without scores the cap would keep the
  first rows, not the best ones).

With ``root`` set, files are looked up under ``<root>/<scene>/`` instead of next to the images;
``<name>.<method>`` and ``<name>.<method>.npz`` side by side is an error (which one is meant?).
Each keypoint must lie in its image (``0 <= x < W``, ``0 <= y < H``; the rule and helper of locked
keypoints, :func:`descbench.keypoints.locked.check_inside`) and have a size > 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints


_FIX = "; regenerate the file (D2-Net convention: np.savez with keypoints N x 2+, descriptors N x D, optional scores N)"


@dataclass(frozen=True)
class PrecomputedFeatures:
    keypoints: ImageKeypoints
    descriptors: np.ndarray  # float32 [N, D] or uint8 [N, D/8] packed bits
    binary: bool
    path: Path
    has_scores: bool = True  # False: the file has no 'scores' (responses are all 0)


def feature_path(image_path: Path, method: str, root: str | Path | None) -> Path:
    """Where the features of ``image_path`` are: ``<image>.<method>`` or ``<image>.<method>.npz``.

    Both existing is a :class:`DataError` naming both (descbench does not pick one silently)."""
    base = Path(root) / image_path.parent.name if root else image_path.parent
    candidates = [base / f"{image_path.name}.{method}", base / f"{image_path.name}.{method}.npz"]
    found = [c for c in candidates if c.exists()]
    if len(found) == 2:
        raise DataError(
            f"precomputed features for image {image_path}: both {found[0]} and {found[1]} exist; descbench does not "
            "guess which one holds this image's features. Keep exactly one of them (move or delete the other)"
        )
    if found:
        return found[0]
    raise DataError(
        f"precomputed features for image {image_path} not found: expected {candidates[0]} "
        f"(an npz with 'keypoints' N x 2+ and 'descriptors' N x D, D2-Net convention); "
        "run your extractor on this image or fix keypoint_sets.<name>.params.method/root"
    )


def load_features(image_path: Path, method: str, root: str | Path | None = None, default_size_px: float = 12.0,
                  descriptor_kind: str | None = None, image_size: tuple[int, int] | None = None) -> PrecomputedFeatures:
    """Load and validate one image's precomputed features (raises :class:`DataError` naming the file).

    ``image_size`` (W, H): the image's real size; when given, a keypoint outside the image is a
    DataError naming the file and rows (a wrong coordinate frame, e.g. features of a resized image,
    not a keypoint for the border rule to drop), as for locked keypoints. A size (3rd column) that
    is not > 0 is always an error naming the file and row.

    ``descriptor_kind`` (``keypoint_sets.<set>.params.descriptor_kind``): ``binary`` = uint8
    packed bits (Hamming), ``float`` = values compared by L2 (uint8 values are converted to
    float32). uint8 descriptors are either, so for them the kind must be given (an error
    otherwise); float descriptors are float whatever the kind says, except ``binary``, an error.
    """
    path = feature_path(Path(image_path), method, root)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:  # np.load raises many types on a corrupt file
        raise DataError(f"precomputed features {path} cannot be read as npz ({exc}); regenerate the file") from exc
    for key in ("keypoints", "descriptors"):
        if key not in arrays:
            raise DataError(f"precomputed features {path} lack the array '{key}' (has: {', '.join(sorted(arrays)) or 'none'})"
                            + _FIX)
    kp, desc = arrays["keypoints"], arrays["descriptors"]
    if kp.ndim != 2 or kp.shape[1] < 2:
        raise DataError(f"precomputed features {path}: 'keypoints' must be N x 2 or more (x, y[, scale]), got shape {kp.shape}" + _FIX)
    if kp.dtype.kind not in "iuf":
        raise DataError(f"precomputed features {path}: 'keypoints' dtype {kp.dtype} is not supported; store pixel coordinates as numbers (float)" + _FIX)
    if desc.ndim != 2 or desc.shape[1] == 0:
        raise DataError(f"precomputed features {path}: 'descriptors' must be N x D with D >= 1, got shape {desc.shape}" + _FIX)
    n = kp.shape[0]
    if desc.shape[0] != n:
        raise DataError(
            f"precomputed features {path}: {n} keypoints but {desc.shape[0]} descriptors; "
            "row i of 'descriptors' must describe row i of 'keypoints'"
        )
    if not np.all(np.isfinite(kp[:, :3].astype(np.float64))):
        raise DataError(f"precomputed features {path}: 'keypoints' contain NaN or inf (first at row {_first_bad_row(kp[:, :3])})" + _FIX)
    if desc.dtype == np.uint8 and descriptor_kind is None:
        raise DataError(
            f"precomputed features {path}: 'descriptors' are uint8, which may be packed bits or 8-bit values; "
            "say which with keypoint_sets.<set>.params.descriptor_kind: binary (packed bits, Hamming distance) "
            "or float (values, L2 distance)"
        )
    if descriptor_kind == "binary" and desc.dtype != np.uint8:
        raise DataError(
            f"precomputed features {path}: descriptor_kind is binary but 'descriptors' are {desc.dtype}; "
            "store packed bits as uint8 (np.packbits) or set descriptor_kind: float"
        )
    binary = desc.dtype == np.uint8 and descriptor_kind == "binary"
    if not binary:
        if not (np.issubdtype(desc.dtype, np.floating) or desc.dtype == np.uint8):
            raise DataError(
                f"precomputed features {path}: 'descriptors' dtype {desc.dtype} is not supported; "
                "use float (L2) or uint8 packed bits (Hamming)"
            )
        with np.errstate(over="ignore"):  # checked after the cast: a huge float64 overflows to inf
            desc = desc.astype(np.float32)
        if not np.all(np.isfinite(desc)):
            raise DataError(f"precomputed features {path}: 'descriptors' contain NaN or inf (first at row {_first_bad_row(desc)})" + _FIX)
    scores = arrays.get("scores")
    if scores is not None:
        if scores.shape != (n,) or scores.dtype.kind not in "iuf":
            raise DataError(f"precomputed features {path}: 'scores' must be {n} numbers (shape ({n},)), got {scores.dtype} {scores.shape}" + _FIX)
        if not np.all(np.isfinite(scores)):
            raise DataError(f"precomputed features {path}: 'scores' contain NaN or inf (first at row {_first_bad_row(scores)})" + _FIX)
    size = np.asarray(kp[:, 2] if kp.shape[1] >= 3 else np.full(n, default_size_px), dtype=np.float32)
    bad = np.flatnonzero(~(size > 0))  # checked in float32, the stored type (1e-50 -> 0)
    if bad.size:
        raise DataError(
            f"precomputed features {path}: {bad.size} keypoint(s) with size (3rd column of 'keypoints', the diameter "
            f"in px) <= 0, first at row {int(bad[0])} (size {float(size[bad[0]]):.9g}); descriptors need a positive "
            "size: write the keypoints' scale in px, or store only x, y (N x 2) to use params.default_size_px"
        )
    kps = ImageKeypoints(
        x=kp[:, 0].astype(np.float32),
        y=kp[:, 1].astype(np.float32),
        size=size,
        angle=np.full(n, -1.0, dtype=np.float32),
        response=(scores if scores is not None else np.zeros(n)).astype(np.float32),
        octave=np.zeros(n, dtype=np.int32),
        class_id=np.full(n, -1, dtype=np.int32),
        source_index=np.arange(n, dtype=np.int32),
    )
    if image_size is not None:
        from descbench.keypoints.locked import check_inside

        check_inside(kps, np.arange(n), f"precomputed features {path} (image {image_path})",
                     "0-based rows of its 'keypoints' array", int(image_size[0]), int(image_size[1]))
    return PrecomputedFeatures(kps, np.ascontiguousarray(desc), binary, path, has_scores=scores is not None)


def check_cap_has_scores(feats: PrecomputedFeatures, max_keypoints: int | None, kpset: str) -> None:
    """DataError if set ``kpset`` caps by response (``max_keypoints``) but the file has no ``scores``:
    all responses would be 0 and the cap would keep the file's first rows, not its best keypoints."""
    if max_keypoints is None or feats.has_scores:
        return
    raise DataError(
        f"keypoint_sets.{kpset}: max_keypoints: {max_keypoints} keeps the keypoints with the highest response, but "
        f"precomputed features {feats.path} have no 'scores' array, so every response is 0 and the cap would keep "
        f"the file's first {max_keypoints} rows. Add 'scores' (N numbers, higher = better) to the files, or drop "
        f"max_keypoints from keypoint_sets.{kpset} to keep all keypoints"
    )


def _first_bad_row(a: np.ndarray) -> int:
    return int(np.flatnonzero(~np.all(np.isfinite(a.reshape(a.shape[0], -1).astype(np.float64)), axis=1))[0])
