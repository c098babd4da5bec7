"""descbench.descriptors.surf: the ``surf`` family (OpenCV's SURF where the build has it, else the
numba kernel): widths, the kernel's rows, determinism, and properties of the descriptor."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import surf as S
from descbench.descriptors.surf_kernels import surf_describe
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.surf import opencv_surf


def kps_at(xy, size) -> ImageKeypoints:
    xy = np.asarray(xy, dtype=np.float32)
    n = len(xy)
    return ImageKeypoints(xy[:, 0], xy[:, 1], np.asarray(size, np.float32), np.full(n, -1, np.float32), np.ones(n, np.float32),
                          np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


@pytest.fixture(scope="module")
def image(pristine):
    return pristine / "1.ppm"


KPS = kps_at([(100, 100), (200.5, 150.25), (300, 200), (150, 220)], [20.0, 30.0, 15.0, 25.0])


def test_widths_and_the_kernels_rows(image):
    for extended, width in ((False, 64), (True, 128)):
        params = check_descriptor_params("surf", {"extended": extended}, "d")
        rows = compute_descriptors("surf", params, image, KPS, {}, "d")
        assert rows.shape == (len(KPS), width) and rows.dtype == np.float32
        assert S.surf_width(params, []) == width
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
        if opencv_surf() is None:  # pip wheels: no non-free module, the kernel describes every keypoint
            np.testing.assert_array_equal(rows, surf_describe(read_image(image), KPS.x, KPS.y, KPS.size, extended, False))
        np.testing.assert_array_equal(S.surf_descriptors(image, KPS, params, {}), rows)  # deterministic
    assert S.surf_descriptors(image, KPS.take(np.arange(0)), {"extended": True}, {}).shape == (0, 128)
    assert not get_family("surf").binary


def test_upright_ignores_rotation_and_the_default_does_not(image):
    up = S.surf_descriptors(image, KPS, {"upright": True}, {})
    rot = S.surf_descriptors(image, KPS, {"upright": False}, {})
    assert up.shape == rot.shape and not np.allclose(up, rot)


def test_patch_support_spans_the_patch():
    assert S.surf_patch_support({}, 65) == 65 * 9 / 24 == 24.375
