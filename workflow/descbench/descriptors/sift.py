"""SIFT descriptors (OpenCV), computed at the given keypoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import keypoints_to_cv, make_sift


def sift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """128-D OpenCV SIFT at ``kps`` (float32; OpenCV rounds the values to integers 0..255).

    The pyramid parameters are the keypoint set's SIFT parameters when it is a SIFT set (so the
    descriptor sees the scale space the keypoints were detected in), OpenCV's defaults otherwise.
    """
    if len(kps) == 0:
        return np.zeros((0, 128), dtype=np.float32)
    gray = read_image(image_path)
    sift = make_sift(kpset.get("params", {}) if kpset.get("detector") == "sift" else {})
    cv_kps = keypoints_to_cv(kps)
    out_kps, desc = sift.compute(gray, cv_kps)
    if desc is None or len(out_kps) != len(cv_kps):
        raise RuntimeError(f"OpenCV SIFT returned {0 if desc is None else len(out_kps)} of {len(cv_kps)} descriptors for {image_path}")
    return np.ascontiguousarray(desc, dtype=np.float32)


FAMILY = DescriptorFamily("sift", sift_descriptors)
