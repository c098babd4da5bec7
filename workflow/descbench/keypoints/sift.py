"""OpenCV SIFT: the detector object (detection: descbench.keypoints.detectors), KeyPoint conversion,
and SIFT's packed octave field."""

from __future__ import annotations

import numpy as np

from descbench.keypoints import ImageKeypoints
from descbench.params import config_schema, fill_defaults


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
