"""Descriptors read from the precomputed feature files of a ``precomputed`` keypoint set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.descriptors import DescriptorFamily
from descbench.errors import ConfigError, DataError
from descbench.jobfacts import FILE_DESCRIPTOR, Cost
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sets import root_detector_spec
from descbench.params import object_fragment
from descbench.precomputed import load_features

# No parameters of its own: the files are named by its keypoint set's (detector: precomputed) params.
PARAMS_SCHEMA = {"precomputed": object_fragment()}


def precomputed_descriptors(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
    """Rows ``source_index`` of the file's ``descriptors`` (the keypoints kept by the filters).

    The file must still hold the keypoints that were detected from it (same x, y at the same
    rows); otherwise the descriptors would silently describe other keypoints.
    """
    p = kpset["params"]
    feats = load_features(image_path, p["method"], p.get("root"), p.get("default_size_px", 12.0), p.get("descriptor_kind"))
    idx = kps.source_index.astype(np.int64)
    n = len(feats.keypoints)
    if idx.size and idx.max() >= n or not (
        np.array_equal(feats.keypoints.x[idx[idx < n]], kps.x[idx < n]) and np.array_equal(feats.keypoints.y[idx[idx < n]], kps.y[idx < n])
    ):
        raise DataError(
            f"precomputed features {feats.path} changed after its keypoints were detected (rows or "
            "positions differ from the keypoint file); rerun the keypoint job (snakemake reruns it "
            "when the file's modification time changes, or use --forcerun keypoints)"
        )
    return feats.descriptors[idx]


def check_in_config(name: str, spec: dict, descriptors: dict, kpsets: dict) -> None:
    """Its descriptors are row-aligned with the keypoints of the files they come from: it lists its
    keypoint sets, and each comes from detector precomputed (or derives from one)."""
    used = spec.get("keypoint_sets")
    if not used:
        raise ConfigError(
            f"descriptors.{name} (family precomputed) must list its keypoint set in "
            "keypoint_sets: the precomputed descriptors are row-aligned with that set's keypoints"
        )
    for ks in used:
        det = root_detector_spec(kpsets, ks)["detector"]
        if det != "precomputed":
            raise ConfigError(
                f"descriptors.{name} (family precomputed) reads descriptors from the files of its "
                f"keypoint set, but keypoint set '{ks}' comes from detector '{det}'; "
                "list a keypoint set with detector: precomputed (or one derived from it)"
            )


FAMILIES = (DescriptorFamily(
    "precomputed", precomputed_descriptors, PARAMS_SCHEMA["precomputed"], binary=None, cost=Cost(model=FILE_DESCRIPTOR),
    check_in_config=check_in_config,
    not_on_patches="reads the feature files of a keypoint set; patch descriptors computed elsewhere are read from "
                   "hpatches-benchmark CSV files (descbench.patches.describe.read_hpatches_csv)"),)
