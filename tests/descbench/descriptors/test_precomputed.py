"""descbench.descriptors.precomputed: descriptors read from a precomputed keypoint set's files,
row-aligned with the keypoints the filters kept (the file format itself: tests/descbench/test_precomputed.py)."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.descriptors import compute_descriptors
from descbench.descriptors.precomputed import check_in_config, precomputed_descriptors
from descbench.errors import ConfigError, DataError
from descbench.precomputed import load_features

METHOD = "d2-net"


def write(image, kp, desc):
    with open(image.parent / f"{image.name}.{METHOD}", "wb") as fh:  # as D2-Net writes it: no .npz suffix
        np.savez(fh, keypoints=kp, descriptors=desc, scores=np.ones(len(kp), np.float32))


@pytest.fixture
def image(tmp_path):
    p = tmp_path / "scene" / "1.ppm"
    p.parent.mkdir()
    p.write_bytes(b"P5 1 1 255\n\x00")
    rng = np.random.default_rng(0)
    write(p, np.column_stack([rng.uniform(5, 95, (6, 2)), np.full(6, 4.0)]).astype(np.float32), rng.normal(size=(6, 8)).astype(np.float32))
    return p


KPSET = {"detector": "precomputed", "params": {"method": METHOD}}


def test_rows_are_the_files_rows_of_the_kept_keypoints(image):
    feats = load_features(image, METHOD)
    kept = feats.keypoints.take(np.array([4, 0, 2]))  # a filter kept (and ordered) rows 4, 0, 2
    rows = precomputed_descriptors(image, kept, {}, KPSET)
    np.testing.assert_array_equal(rows, feats.descriptors[[4, 0, 2]])
    np.testing.assert_array_equal(compute_descriptors("precomputed", {}, image, kept, KPSET, "d"), rows)
    assert precomputed_descriptors(image, kept.take(np.arange(0)), {}, KPSET).shape == (0, 8)


@pytest.mark.bad_input
def test_a_file_changed_after_detection_is_a_data_error(image):
    kept = load_features(image, METHOD).keypoints
    f = load_features(image, METHOD)
    write(image, f.keypoints.xy[::-1].astype(np.float32), f.descriptors)  # same rows, other order
    with pytest.raises(DataError, match=r"precomputed features .*1\.ppm\.d2-net changed after its keypoints were detected"):
        precomputed_descriptors(image, kept, {}, KPSET)
    write(image, f.keypoints.xy[:3].astype(np.float32), f.descriptors[:3])  # fewer rows
    with pytest.raises(DataError, match="rerun the keypoint job"):
        precomputed_descriptors(image, kept, {}, KPSET)


@pytest.mark.bad_input
def test_config_rules():
    kpsets = {"pre": {"detector": "precomputed", "params": {"method": METHOD}}, "top": {"source": "pre", "filters": []},
              "sift": {"detector": "sift"}}
    check_in_config("p", {"keypoint_sets": ["pre", "top"]}, {}, kpsets)
    with pytest.raises(ConfigError, match=r"^descriptors\.p \(family precomputed\) must list its keypoint set"):
        check_in_config("p", {}, {}, kpsets)
    with pytest.raises(ConfigError, match=r"keypoint set 'sift' comes from detector 'sift'"):
        check_in_config("p", {"keypoint_sets": ["pre", "sift"]}, {}, kpsets)
