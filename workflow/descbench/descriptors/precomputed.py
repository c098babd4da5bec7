"""Descriptors read from the precomputed feature files of a ``precomputed`` keypoint set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily
from descbench.keypoints import ImageKeypoints
from descbench.precomputed import load_features


def precomputed_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """Rows ``source_index`` of the file's ``descriptors`` (the keypoints kept by the filters)."""
    p = kpset["params"]
    feats = load_features(image_path, p["method"], p.get("root"), p.get("default_size_px", 12.0))
    return feats.descriptors[kps.source_index.astype(np.int64)]


FAMILY = DescriptorFamily("precomputed", precomputed_descriptors, binary=None)
