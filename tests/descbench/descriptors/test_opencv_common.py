"""descbench.descriptors.opencv_common: what the OpenCV families share (scale-space rules, patch
supports, the keypoint fields a setup hands to OpenCV)."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.descriptors.cv_compute import OPENCV_DEFAULT_SCALE
from descbench.descriptors.opencv_common import (
    CvSetup,
    akaze_levels,
    akaze_n_levels,
    fixed_support,
    same_scale_space,
    window_support,
)
from descbench.keypoints import ImageKeypoints

AKAZE = {"n_octaves": 4, "n_octave_layers": 4, "diffusivity": "pm_g2"}


def kps_of(size, octave=None, class_id=None) -> ImageKeypoints:
    n = len(size)
    f32 = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731
    i32 = lambda v: np.asarray(v, dtype=np.int32)  # noqa: E731
    return ImageKeypoints(f32(np.arange(n) + 10.0), f32(np.arange(n) + 20.0), f32(size), f32([0.0] * n), f32([1.0] * n),
                          i32([0] * n if octave is None else octave), i32([-1] * n if class_id is None else class_id), i32(range(n)))


@pytest.mark.parametrize("shape, n_levels", [((480, 640), 16), ((100, 200), 8), ((79, 159), 4), ((40, 80), 4), ((600, 100), 4)])
def test_akaze_levels_exist_while_the_octave_is_80_by_40(shape, n_levels):
    h, w = shape
    octaves = 1 + sum(1 for i in range(1, 4) if w >> i >= 80 and h >> i >= 40)
    assert akaze_n_levels(shape, 4, 4) == octaves * 4 == n_levels


def test_akaze_levels_from_size_and_the_detectors_own():
    sizes = [4.8, 4.8 * 2 ** 0.25, 9.6, 1000.0, 0.5]
    level, octave = akaze_levels(kps_of(sizes), (480, 640), AKAZE, {"detector": "sift"})
    assert level.tolist() == [0, 1, 4, 15, 0] and octave.tolist() == [0, 0, 1, 3, 0]
    own = kps_of(sizes, octave=[1, 0, 2, 0, 0], class_id=[5, 3, 9, 99, -1])  # rows 0-2 valid; 3 out of range; 4 negative
    level, _ = akaze_levels(own, (480, 640), AKAZE, {"detector": "akaze", "params": {}})
    assert level.tolist() == [5, 3, 9, 15, 0]
    level, _ = akaze_levels(own, (480, 640), AKAZE, {"detector": "akaze", "params": {"n_octaves": 3}})
    assert level.tolist() == [0, 1, 4, 15, 0]  # another scale space: every level from the size


def test_same_scale_space_reads_left_out_keys_as_the_detectors_defaults():
    assert same_scale_space({"detector": "kaze"}, AKAZE, "kaze")
    assert not same_scale_space({"detector": "kaze"}, AKAZE, "akaze")
    assert not same_scale_space({"detector": "kaze", "params": {"diffusivity": "weickert"}}, AKAZE, "kaze")


def test_patch_supports():
    assert fixed_support(6.0)({"anything": 1}, 65) == 6.0
    assert window_support({"scale_factor": None}, 65) == 65 / OPENCV_DEFAULT_SCALE
    assert window_support({"scale_factor": 5.0}, 64) == 12.8


def test_setup_keypoints_use_the_setups_fields_or_the_keypoints_own():
    kps = kps_of([7.0, 9.0], octave=[1, 2], class_id=[3, 4])
    own = CvSetup(extractor=None).keypoints(kps)
    assert [(k.pt, k.size, k.octave, k.class_id) for k in own] == [((10.0, 20.0), 7.0, 1, 3), ((11.0, 21.0), 9.0, 2, 4)]
    given = CvSetup(extractor=None, octave=np.array([0, 0]), class_id=np.array([8, 9])).keypoints(kps)
    assert [(k.octave, k.class_id) for k in given] == [(0, 8), (0, 9)]
