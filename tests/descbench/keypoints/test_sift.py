"""descbench.keypoints.sift: the SIFT object from the detector's parameters, KeyPoint conversion
and SIFT's packed octave field for keypoints of other origins."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import has_sift_octaves, keypoints_to_cv, make_sift, sift_octave_from_size


def test_make_sift_defaults_are_opencvs_and_params_reach_it():
    img = cv2.GaussianBlur(np.random.default_rng(0).integers(0, 256, (120, 160), dtype=np.uint8), (0, 0), 1.5)
    ours = make_sift({}).detect(img, None)
    ref = cv2.SIFT_create().detect(img, None)
    assert [(k.pt, k.size, k.octave) for k in ours] == [(k.pt, k.size, k.octave) for k in ref]
    few = make_sift({"contrast_threshold": 0.2}).detect(img, None)
    assert len(few) == len(cv2.SIFT_create(contrastThreshold=0.2).detect(img, None)) < len(ours)
    assert make_sift({"n_octave_layers": 5}).getNOctaveLayers() == 5


def test_keypoints_to_cv_restores_every_field():
    kps = ImageKeypoints(np.array([1.5], np.float32), np.array([2.5], np.float32), np.array([7.0], np.float32),
                         np.array([30.0], np.float32), np.array([0.25], np.float32), np.array([511], np.int32),
                         np.array([4], np.int32), np.array([0], np.int32))
    (k,) = keypoints_to_cv(kps)
    assert (k.pt, k.size, k.angle, k.response, k.octave, k.class_id) == ((1.5, 2.5), 7.0, 30.0, 0.25, 511, 4)
    assert keypoints_to_cv(kps, np.array([3]))[0].octave == 3


def unpack(field):
    o = field & 255
    return np.where(o < 128, o, o - 256), (field >> 8) & 255


@pytest.mark.parametrize("size, octave, layer", [
    (3.2, 0, 0),                 # 2 sigma: octave 0, layer 0
    (6.4, 1, 0),
    (3.2 * 2 ** (2 / 3), 0, 2),
    (3.2 * 2 ** (0.9), 0, 3),    # rounds up to layer L: kept as layer 3 of octave 0
    (1.6, -1, 0),                # the doubled image
    (0.2, -1, 0),                # below the first octave: clamped
    (1000.0, 4, 3),              # above the top octave round(log2 120) - 3 = 4 of a 120 x 160 image: its layer L
])
def test_octave_from_size_hand_worked(size, octave, layer):
    o, lay = unpack(sift_octave_from_size(np.array([size]), (120, 160)))
    assert (int(o[0]), int(lay[0])) == (octave, layer)


def test_which_sets_carry_sift_octaves():
    assert has_sift_octaves({"detector": "sift"})
    assert not has_sift_octaves({"detector": "orb"}) and not has_sift_octaves({})
    assert has_sift_octaves({"detector": "locked", "params": {"octave": "sift"}})
    assert not has_sift_octaves({"detector": "locked", "params": {"octave": "from_size"}})
