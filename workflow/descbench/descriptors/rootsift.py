"""RootSIFT (Arandjelovic & Zisserman 2012): Hellinger-kernel SIFT."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily
from descbench.descriptors.sift import sift_descriptors
from descbench.keypoints import ImageKeypoints


def root_normalise(desc: np.ndarray) -> np.ndarray:
    """``sqrt(d / ||d||_1)`` per row (SIFT is non-negative); the result has unit L2 norm.

    An all-zero descriptor stays all-zero (its L1 norm is replaced by 1 to avoid 0/0).
    """
    d = desc.astype(np.float64)
    l1 = np.abs(d).sum(axis=1, keepdims=True)
    return np.sqrt(d / np.where(l1 > 0, l1, 1.0)).astype(np.float32)


def rootsift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    return root_normalise(sift_descriptors(image_path, kps, params, kpset))


FAMILIES = (DescriptorFamily("rootsift", rootsift_descriptors),)
