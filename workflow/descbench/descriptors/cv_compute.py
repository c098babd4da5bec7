"""OpenCV ``Feature2D.compute`` with one descriptor row per input keypoint, in input order.

OpenCV's ``compute`` may silently drop keypoints (ORB, BRIEF and LATCH: closer to the image
border than their fixed patch; BRISK and FREAK: closer than their pattern at the keypoint's
scale, so large keypoints are dropped far from the border), and may reorder the kept ones (ORB
returns them grouped by pyramid level; the others keep the input order). A benchmark must never lose or misalign rows, so :func:`compute_rows`:

1. tags every keypoint with its row index in ``class_id`` (for extractors that do not read
   ``class_id``; AKAZE and KAZE read it as their scale level and are called untagged: they keep
   every keypoint, which is checked) and calls ``compute`` on the unpadded image. The kept rows
   are therefore exactly plain OpenCV's descriptors;
2. only for the dropped keypoints, pads the image by a margin ``M`` with
   ``cv2.BORDER_REFLECT_101`` (OpenCV's own default border: the mirror image without repeating
   the edge pixel, so no artificial constant band enters the patch), shifts the keypoints by
   ``(M, M)`` and computes again, with ``M`` doubling from :data:`FIRST_MARGIN` up to
   :data:`MAX_MARGIN` px (each step only for the keypoints still dropped). For single-scale
   extractors (BRIEF, LATCH, BRISK, FREAK) the result does not depend on ``M``: the reflected
   content around the keypoint is the same for every margin. ORB resamples its pyramid from the
   padded image, so a rescued ORB keypoint above pyramid level 0 sees a pyramid whose pixel grid
   is offset by a fraction of a pixel from the unpadded one (deterministic, documented);
3. a keypoint still dropped at :data:`MAX_MARGIN` (non-finite or far outside the image) raises
   :class:`~descbench.errors.DataError` naming the image, the descriptor, the count and the fix.
   Rows are never zero-filled.

Returned keypoints are mapped back by their tag, which must come back as distinct row indices
(OpenCV's ``compute`` copies ``class_id`` through); anything else is an OpenCV behaviour this code
does not know, and raises rather than guess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.errors import DataError

FIRST_MARGIN = 32
MAX_MARGIN = 1024


def cv_keypoints(x, y, size, angle, octave, class_id, response=None) -> list:
    """OpenCV KeyPoints from field arrays (``response`` 0 when not given)."""
    import cv2

    n = len(x)
    resp = np.zeros(n, dtype=np.float32) if response is None else response
    return [
        cv2.KeyPoint(float(x[i]), float(y[i]), float(size[i]), float(angle[i]), float(resp[i]), int(octave[i]), int(class_id[i]))
        for i in range(n)
    ]


def _descriptor_dtype(extractor) -> np.dtype:
    import cv2

    return np.dtype(np.uint8) if extractor.descriptorType() == cv2.CV_8U else np.dtype(np.float32)


def _compute_tagged(extractor, image: np.ndarray, kps: list, rows: np.ndarray, shift: float):
    """compute on ``image`` for keypoints ``kps[rows]`` shifted by ``shift``; returns (rows kept, descriptors)."""
    import cv2

    tagged = [cv2.KeyPoint(kps[r].pt[0] + shift, kps[r].pt[1] + shift, kps[r].size, kps[r].angle, kps[r].response,
                           kps[r].octave, int(t)) for t, r in enumerate(rows)]
    out, desc = extractor.compute(image, tagged)
    tags = np.array([k.class_id for k in out], dtype=np.int64)
    if len(out) == 0 or desc is None:
        return rows[:0], None
    if (desc.shape[0] != len(out) or tags.min() < 0 or tags.max() >= len(rows)
            or np.unique(tags).shape[0] != tags.shape[0]):
        raise RuntimeError(
            f"OpenCV {extractor.getDefaultName()} rewrote the class_id of the keypoints it returned "
            "(their tags are not distinct row indices of the input); rows cannot be realigned"
        )
    return rows[tags], desc


def compute_rows(extractor, gray: np.ndarray, kps: list, *, family: str, image_path: Path, tag: bool = True) -> np.ndarray:
    """Descriptors ``[len(kps), D]`` of ``extractor`` at ``kps`` on ``gray``, one row per keypoint.

    ``tag=False`` is for extractors that read ``class_id`` (AKAZE, KAZE): they must return every
    keypoint unchanged in position, else this raises (never realigns by guesswork).
    """
    dim = int(extractor.descriptorSize())
    dtype = _descriptor_dtype(extractor)
    n = len(kps)
    out = np.zeros((n, dim), dtype=dtype)
    if n == 0:
        return out
    fields = np.array([(k.pt[0], k.pt[1], k.size, k.angle) for k in kps], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(fields).all(axis=1))
    if bad.size:  # OpenCV would return garbage or zeros for them, or drop them
        raise DataError(
            f"image {image_path}: {bad.size} keypoints have a non-finite position, size or angle (first at keypoint row "
            f"{int(bad[0])}); descriptor '{family}' cannot be computed there: fix the keypoint file or its detector"
        )
    if not tag:
        got, desc = extractor.compute(gray, kps)
        same = len(got) == n and all(a.pt == b.pt for a, b in zip(got, kps))
        if desc is None or not same or desc.shape != out.shape:
            raise RuntimeError(
                f"OpenCV {extractor.getDefaultName()} returned {len(got)} of {n} keypoints of {image_path} "
                f"for descriptor '{family}'; it is expected to keep every keypoint in place"
            )
        return np.ascontiguousarray(desc, dtype=dtype)
    done = np.zeros(n, dtype=bool)
    kept, desc = _compute_tagged(extractor, gray, kps, np.arange(n), 0.0)
    if desc is not None:
        out[kept] = desc
        done[kept] = True
    margin = FIRST_MARGIN
    while not done.all() and margin <= MAX_MARGIN:
        import cv2

        padded = cv2.copyMakeBorder(gray, margin, margin, margin, margin, cv2.BORDER_REFLECT_101)
        kept, desc = _compute_tagged(extractor, padded, kps, np.flatnonzero(~done), float(margin))
        if desc is not None:
            out[kept] = desc
            done[kept] = True
        margin *= 2
    if not done.all():
        raise DataError(dropped_message(family, image_path, gray.shape, kps, np.flatnonzero(~done)))
    return out


def dropped_message(family: str, image_path: Path, shape: tuple, kps: list, missing: np.ndarray) -> str:
    """The DataError text for keypoints OpenCV drops even with the largest padding."""
    h, w = shape[:2]
    k = kps[int(missing[0])]
    sizes = np.array([kps[i].size for i in missing], dtype=np.float64)
    outside = sum(1 for i in missing if not (0 <= kps[i].pt[0] < w and 0 <= kps[i].pt[1] < h))
    why = (f"{outside} lie outside the {w}x{h} image or have non-finite coordinates" if outside
           else f"their sizes reach {sizes.max():.1f} px")
    return (
        f"image {image_path}: OpenCV dropped {len(missing)} of {len(kps)} keypoints for descriptor '{family}' "
        f"even on the image padded by {MAX_MARGIN} px ({why}; first at keypoint row {int(missing[0])}, "
        f"x={k.pt[0]:.2f} y={k.pt[1]:.2f} size={k.size:.2f}); remove them from the keypoint set "
        "(fix the keypoint file, raise border_px, or filter by size) or use another descriptor"
    )


# --------------------------------------------------------------------------- shared parameter rules

# ``scale_factor: null`` of the patch-resampling descriptors: OpenCV's documented window ratio for
# the keypoint set's root detector (the ratio between a detector's keypoint size and the patch the
# descriptor was trained on). Detectors OpenCV's documentation does not list (gftt, precomputed)
# get the value OpenCV documents as its default, 6.25.
BEBLID_SCALE = {"orb": 1.0, "sift": 6.75, "kaze": 6.25, "akaze": 5.0, "brisk": 5.0, "fast": 5.0}
VGG_BOOST_SCALE = {"orb": 0.75, "sift": 6.75, "kaze": 6.25, "akaze": 5.0, "brisk": 5.0, "fast": 5.0}
OPENCV_DEFAULT_SCALE = 6.25


def scale_factor(params: dict, kpset: dict, table: dict) -> float:
    """``params['scale_factor']``, or for ``null`` the table's value for the set's root detector."""
    value = params.get("scale_factor")
    if value is None:
        return float(table.get(kpset.get("detector"), OPENCV_DEFAULT_SCALE))
    return float(value)


def choice(family: str, params: dict, key: str, options: dict):
    """The OpenCV value of an enumerated parameter; an unknown value is a ConfigError."""
    from descbench.errors import ConfigError

    value = params[key]
    try:
        known = value in options
    except TypeError:  # an unhashable value (a list, a mapping)
        known = False
    if not known:
        allowed = ", ".join(repr(o) for o in options)
        raise ConfigError(f"descriptor family '{family}': params.{key} = {value!r} is not one of {allowed}")
    return options[value]
