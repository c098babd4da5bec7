"""RootSIFT (Arandjelovic & Zisserman 2012): Hellinger-kernel SIFT.

Its rows are :func:`root_normalise` of the ``sift`` family's rows at that family's defaults. When
the config also evaluates a ``sift`` descriptor with those params on the same keypoint set, the
rootsift job reads that descriptor's files and only roots them (``derives``; the same rows bit
for bit, at the cost of the transform); otherwise it computes SIFT itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.descriptors.sift import PARAMS_SCHEMA as SIFT_PARAMS_SCHEMA, sift_descriptors, sift_patch_rows, \
    sift_patch_support
from descbench.keypoints import ImageKeypoints
from descbench.params import fragment_defaults, object_fragment

# RootSIFT has no parameters: it roots the ``sift`` family's descriptors at that family's defaults.
PARAMS_SCHEMA = {"rootsift": object_fragment()}
SIFT_PARAMS = fragment_defaults(SIFT_PARAMS_SCHEMA["sift"])


def root_normalise(desc: np.ndarray) -> np.ndarray:
    """``sqrt(d / ||d||_1)`` per row (SIFT is non-negative); the result has unit L2 norm.

    An all-zero descriptor stays all-zero (its L1 norm is replaced by 1 to avoid 0/0).
    """
    d = desc.astype(np.float64)
    l1 = np.abs(d).sum(axis=1, keepdims=True)
    return np.sqrt(d / np.where(l1 > 0, l1, 1.0)).astype(np.float32)


def rootsift_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    return root_normalise(sift_descriptors(image_path, kps, SIFT_PARAMS, kpset))


def rootsift_patch_rows(job: PatchJob, params: dict) -> np.ndarray:
    return root_normalise(sift_patch_rows(job, SIFT_PARAMS))


FAMILIES = (DescriptorFamily("rootsift", rootsift_descriptors, PARAMS_SCHEMA["rootsift"], patch_support=sift_patch_support,
                             patch_rows=rootsift_patch_rows,
                             derives=("sift", lambda params: SIFT_PARAMS, lambda rows, params: root_normalise(rows))),)
