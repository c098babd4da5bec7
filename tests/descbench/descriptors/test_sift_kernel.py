"""descbench.descriptors.sift_kernel: OpenCV SIFT's geometry and normalisation, unrounded
(the kernel's full agreement with OpenCV on the demo keypoints: test_sift.py)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from descbench.descriptors import sift_kernel as K


def test_unpack_octave_is_opencvs_signed_byte_and_layer():
    o, layer = K.unpack_octave(np.array([0, 255, (2 << 8) | 1, (3 << 8) | 254, 5 | (7 << 16)]))
    assert o.tolist() == [0, -1, 1, -2, 5] and layer.tolist() == [0, 0, 2, 3, 0]
    assert K.octave_scale(np.array([-1, 0, 2])).tolist() == [2.0, 1.0, 0.25]


def test_normalise_sift_clips_at_a_fifth_and_scales_to_512():
    raw = np.array([[10.0, 0.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0], [1.0] * 4], dtype=np.float32)
    out = K.normalise_sift(raw)
    # row 0: one bin, clipped to 0.2 * 10 = 2, rescaled to norm 512
    np.testing.assert_allclose(out[0], [512.0, 0, 0, 0], rtol=1e-6)
    # row 1: 0.2 * 5 = 1 clips both bins to 1: equal values of norm 512
    np.testing.assert_allclose(out[1], [512 / np.sqrt(2), 512 / np.sqrt(2), 0, 0], rtol=1e-6)
    np.testing.assert_allclose(out[2], [256.0] * 4, rtol=1e-6)  # 0.2 * 2 = 0.4 < 1: all clipped equally
    rounded = K.normalise_sift(np.array([[1.0, 2.0, 3.0, 40.0]], dtype=np.float32), round_uchar=True)
    assert rounded.dtype == np.float32 and (rounded == np.round(rounded)).all() and rounded.max() <= 255
    assert K.normalise_sift(np.zeros((0, 128), np.float32)).shape == (0, 128)


def test_l2_rows_and_opencv_angle():
    np.testing.assert_allclose(K.l2_rows(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]], rtol=1e-7)
    assert K.opencv_angle(np.array([0.0, 90.0, 359.5, -1.0])).tolist() == [0.0, 270.0, 0.5, 361.0]


def test_geometry_of_opencv_keypoints():
    octave = np.array([255 | (1 << 8), 0 | (3 << 8), 1 | (2 << 8)])  # (-1, 1), (0, 3), (1, 2)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry([10.0, 20.0, 40.0], [4.0, 8.0, 16.0], [4.0, 6.0, 8.0],
                                                                [0.0, 90.0, 180.0], octave)
    assert (first, n_oct) == (-1, 3)
    assert level.tolist() == [1, 9, 14]  # (o - first) * (3 + 3) + layer
    assert ptx.tolist() == [20.0, 20.0, 20.0] and pty.tolist() == [8.0, 8.0, 8.0] and scl.tolist() == [4.0, 3.0, 2.0]
    assert ori.tolist() == [0.0, 270.0, 180.0]
    with pytest.raises(ValueError, match="octave field out of range"):
        K.opencv_geometry([1.0], [1.0], [1.0], [0.0], np.array([254]))  # octave -2


def test_rounded_kernel_equals_opencv_on_a_blob_image():
    rng = np.random.default_rng(3)
    img = cv2.GaussianBlur(rng.integers(0, 256, (96, 128), dtype=np.uint8), (0, 0), 2.0)
    sift = cv2.SIFT_create()
    kps = sift.detect(img, None)[:20]
    ref = sift.compute(img, kps)[1]
    x = np.array([k.pt[0] for k in kps]); y = np.array([k.pt[1] for k in kps])
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(x, y, np.array([k.size for k in kps]),
                                                                np.array([k.angle for k in kps]), np.array([k.octave for k in kps]))
    ours = K.normalise_sift(K.raw_histograms(K.build_pyramid(img, first, n_oct), level, ptx, pty, ori, scl), round_uchar=True)
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1  # OpenCV's rounding of float ties; test_sift.py measures the agreement
    assert (ours == ref).mean() > 0.99
