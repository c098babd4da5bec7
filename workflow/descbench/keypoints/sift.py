"""OpenCV SIFT: the detector object (detection: descbench.keypoints.detectors), KeyPoint conversion,
SIFT's packed octave field, and the rows a SIFT keypoint job describes with its detection.

**Rows from the detection** (:func:`detect_with_rows`, side file ``<scene>.sift_rows.npz``,
:mod:`descbench.keypoints.sidefile`): a SIFT set's keypoint job (``mode: independent``) runs
``detectAndCompute``, which describes the keypoints on the scale space it detected them in, and
keeps the rows of the keypoints that pass the border rule and the cap. The ``sift`` descriptor
job on that set reads them (:func:`descbench.descriptors.sift.sift_own_rows`) instead of building
the pyramid again in ``compute``: 0.27 s of 0.96 s for 8,000 keypoints of a 1680 x 1260 image.
They are the same bits as ``compute`` gives on an image's kept keypoints whenever one of them
lies in SIFT's first octave (packed octave byte 255, octave -1): ``compute`` starts its pyramid at
the lowest octave among the keypoints it is given, ``detectAndCompute`` at -1 (the doubled
image), and from there both build the same levels. An image whose kept keypoints all lie in
octave 0 or above is computed, as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sidefile import side_file_path
from descbench.params import config_schema, fill_defaults

SIFT_ROWS_KIND = "sift_rows.npz"


def make_sift(params: dict):
    """An OpenCV SIFT object from the ``sift`` detector parameters (schema names); keys left out
    take the schema's defaults (``sift_detector_params``: OpenCV's own), so ``make_sift({})`` is
    OpenCV's default SIFT."""
    import cv2

    p = fill_defaults({"$ref": "#/definitions/sift_detector_params"}, dict(params), config_schema())
    return cv2.SIFT_create(
        nfeatures=int(p["n_features"]),
        nOctaveLayers=int(p["n_octave_layers"]),
        contrastThreshold=float(p["contrast_threshold"]),
        edgeThreshold=float(p["edge_threshold"]),
        sigma=float(p["sigma"]),
    )


def keypoints_from_cv(kps) -> ImageKeypoints:
    """OpenCV KeyPoints -> :class:`ImageKeypoints` (all fields; ``source_index`` = output order)."""
    n = len(kps)
    return ImageKeypoints(
        x=np.array([k.pt[0] for k in kps], dtype=np.float32).reshape(n),
        y=np.array([k.pt[1] for k in kps], dtype=np.float32).reshape(n),
        size=np.array([k.size for k in kps], dtype=np.float32).reshape(n),
        angle=np.array([k.angle for k in kps], dtype=np.float32).reshape(n),
        response=np.array([k.response for k in kps], dtype=np.float32).reshape(n),
        octave=np.array([k.octave for k in kps], dtype=np.int32).reshape(n),
        class_id=np.array([k.class_id for k in kps], dtype=np.int32).reshape(n),
        source_index=np.arange(n, dtype=np.int32),
    )


def keypoints_to_cv(kps: ImageKeypoints, octave: np.ndarray | None = None) -> list:
    """OpenCV KeyPoints with every field restored (SIFT's compute needs the octave field);
    ``octave`` replaces the keypoints' own field when given."""
    import cv2

    octs = kps.octave if octave is None else octave
    return [
        cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o), int(c))
        for x, y, s, a, r, o, c in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, octs, kps.class_id)
    ]


def sift_octave_from_size(size: np.ndarray, image_shape: tuple[int, int], n_octave_layers: int = 3,
                          sigma: float = 1.6) -> np.ndarray:
    """OpenCV's packed SIFT ``octave`` field for keypoints of other origins, from their size.

    SIFT's compute takes the blur level of a keypoint's descriptor from this field. OpenCV's
    detector gives a keypoint of octave ``o`` (-1 = the doubled image) and layer ``l`` the size
    ``2 sigma 2^(o + l / L)`` (L = ``n_octave_layers``; plus a sub-layer offset), so a keypoint of
    any detector is given ``t = log2(size / (2 sigma))`` (the DescriptorWorkbench's
    ``log2(size / 3.2)`` at sigma 1.6), ``o = floor(t)``, ``l = round((t - o) L)`` (``l = L`` is
    kept: it is the next octave's layer 0 at full resolution), clamped to the pyramid SIFT builds
    for an image of ``image_shape`` (H, W): ``-1 <= o <= round(log2(min(H, W))) - 3`` (OpenCV's
    octave count minus one, with the doubled first octave). Packed as ``(o & 255) | (l << 8)``,
    OpenCV's ``unpackOctave`` layout; the sub-layer byte is 0 (compute does not read it).
    """
    size = np.asarray(size, dtype=np.float64)
    t = np.log2(np.maximum(size, 1e-6) / (2.0 * sigma))
    o = np.floor(t)
    layer = np.rint((t - o) * n_octave_layers)
    top = int(round(np.log2(min(image_shape)))) - 3
    low = o < -1
    o = np.where(low, -1, o)
    layer = np.where(low, 0, layer)
    high = o > top
    o = np.where(high, top, o)
    layer = np.where(high, n_octave_layers, layer)
    return ((o.astype(np.int64) & 255) | (layer.astype(np.int64) << 8)).astype(np.int32)


def has_sift_octaves(kpset: dict) -> bool:
    """Whether a keypoint set's ``octave`` field is OpenCV SIFT's packed octave/layer (the one rule
    every SIFT-based family uses): its root detector is ``sift``, or ``locked`` whose octave mode
    is ``sift`` (:func:`descbench.keypoints.locked.octave_mode`: ``octave: sift``, or the default
    ``auto`` on a file that records ``sift``, i.e. an export of a SIFT set). Any other set's field
    is derived from the size (:func:`sift_octave_from_size`)."""
    if kpset.get("detector") == "sift":
        return True
    if kpset.get("detector") != "locked":
        return False
    from descbench.keypoints.locked import octave_mode

    return octave_mode(kpset.get("params") or {}) == "sift"


def sift_rows_path(keypoint_file: Path | str) -> Path:
    """The SIFT rows side file next to a scene's keypoint file: ``<scene>.sift_rows.npz``."""
    return side_file_path(keypoint_file, SIFT_ROWS_KIND)


def detect_with_rows(gray: np.ndarray, params: dict) -> tuple[ImageKeypoints, np.ndarray]:
    """SIFT's keypoints of a grey uint8 image, as ``detect`` gives them (same order), and OpenCV's
    128-D rows of every one of them from the same scale space (``detectAndCompute``; module
    docstring): uint8 when every value is an integer 0..255 (OpenCV's are), else float32."""
    cv_kps, rows = make_sift(params).detectAndCompute(gray, None)
    kps = keypoints_from_cv(cv_kps)
    if rows is None:
        return kps, np.zeros((len(kps), 128), dtype=np.uint8)
    as_u8 = rows.astype(np.uint8)
    return kps, as_u8 if np.array_equal(as_u8, rows) else np.ascontiguousarray(rows, dtype=np.float32)


def in_first_octave(kps: ImageKeypoints) -> bool:
    """Whether any keypoint lies in SIFT's first octave, -1 (packed octave byte 255): then
    ``compute`` on them builds the pyramid ``detectAndCompute`` built (module docstring)."""
    return bool(len(kps)) and bool(((np.asarray(kps.octave) & 255) == 255).any())
