"""OpenCV SIFT detection."""

from __future__ import annotations

import numpy as np

from descbench.keypoints import ImageKeypoints


def make_sift(params: dict):
    """An OpenCV SIFT object from the ``sift`` detector parameters (schema names)."""
    import cv2

    return cv2.SIFT_create(
        nfeatures=int(params.get("n_features", 0)),
        nOctaveLayers=int(params.get("n_octave_layers", 3)),
        contrastThreshold=float(params.get("contrast_threshold", 0.04)),
        edgeThreshold=float(params.get("edge_threshold", 10)),
        sigma=float(params.get("sigma", 1.6)),
    )


def keypoints_from_cv(kps) -> ImageKeypoints:
    n = len(kps)
    return ImageKeypoints(
        x=np.array([k.pt[0] for k in kps], dtype=np.float32).reshape(n),
        y=np.array([k.pt[1] for k in kps], dtype=np.float32).reshape(n),
        size=np.array([k.size for k in kps], dtype=np.float32).reshape(n),
        angle=np.array([k.angle for k in kps], dtype=np.float32).reshape(n),
        response=np.array([k.response for k in kps], dtype=np.float32).reshape(n),
        octave=np.array([k.octave for k in kps], dtype=np.int32).reshape(n),
        source_index=np.arange(n, dtype=np.int32),
    )


def keypoints_to_cv(kps: ImageKeypoints) -> list:
    """OpenCV KeyPoints with every field restored (SIFT's compute needs the octave field)."""
    import cv2

    return [
        cv2.KeyPoint(float(x), float(y), float(s), float(a), float(r), int(o))
        for x, y, s, a, r, o in zip(kps.x, kps.y, kps.size, kps.angle, kps.response, kps.octave)
    ]


def detect_sift(gray: np.ndarray, params: dict) -> ImageKeypoints:
    """Raw SIFT keypoints of a grayscale uint8 image, in OpenCV's output order."""
    return keypoints_from_cv(make_sift(params).detect(gray, None))
