"""descbench.descriptors.opencv_float: the float OpenCV families (kaze, akaze_kaze, daisy, vgg,
boostdesc) against OpenCV called directly on the demo image (every family's full comparison
with plain OpenCV: test_opencv_binary.py)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import opencv_float as F
from descbench.keypoints import ImageKeypoints

KAZE = {"extended": False, "upright": False, "n_octaves": 4, "n_octave_layers": 4, "diffusivity": "pm_g2"}


def kps_at(xy, size, angle=0.0, octave=0, class_id=-1) -> ImageKeypoints:
    n = len(xy)
    xy = np.asarray(xy, dtype=np.float32)
    full = lambda v, t: np.full(n, v, dtype=t) if np.isscalar(v) else np.asarray(v, dtype=t)  # noqa: E731
    return ImageKeypoints(xy[:, 0], xy[:, 1], full(size, np.float32), full(angle, np.float32), full(1.0, np.float32),
                          full(octave, np.int32), full(class_id, np.int32), np.arange(n, dtype=np.int32))


@pytest.fixture(scope="module")
def image(pristine: Path) -> Path:
    return pristine / "1.ppm"


@pytest.fixture(scope="module")
def kps() -> ImageKeypoints:
    return kps_at([(120, 100), (200, 150), (303.5, 202.25), (250, 230), (90, 180)], [12.0, 20.0, 8.0, 30.0, 16.0],
                  angle=[0.0, 45.0, 90.0, 200.0, 359.0])


def test_the_families_and_their_widths(image, kps):
    assert [f.name for f in F.FAMILIES] == ["kaze", "akaze_kaze", "daisy", "vgg", "boostdesc"]
    widths = {"kaze": 64, "akaze_kaze": 64, "daisy": 200, "vgg": 120, "boostdesc": 64}
    for name, width in widths.items():
        params = check_descriptor_params(name, {}, "d")
        rows = compute_descriptors(name, params, image, kps, {"detector": "sift"}, "d")
        assert rows.shape == (len(kps), width) and rows.dtype == np.float32 and np.isfinite(rows).all(), name
        assert not get_family(name).binary
        np.testing.assert_array_equal(compute_descriptors(name, params, image, kps, {"detector": "sift"}, "d"), rows)  # deterministic


def test_daisy_and_vgg_rows_equal_opencv_called_directly(image, kps):
    gray = read_image(image)
    cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), float(a)) for x, y, s, a in zip(kps.x, kps.y, kps.size, kps.angle)]
    daisy = compute_descriptors("daisy", check_descriptor_params("daisy", {"radius": 10.0}, "d"), image, kps, {}, "d")
    np.testing.assert_array_equal(daisy, cv2.xfeatures2d.DAISY_create(radius=10.0).compute(gray, cv_kps)[1])
    vgg = compute_descriptors("vgg", check_descriptor_params("vgg", {"desc": 64}, "d"), image, kps, {"detector": "orb"}, "d")
    ref = cv2.xfeatures2d.VGG_create(desc=102, scale_factor=0.75, dsc_normalize=False).compute(gray, cv_kps)[1]
    assert vgg.shape == (len(kps), 64)
    np.testing.assert_array_equal(vgg, ref)


def test_vgg_and_boostdesc_window_follows_the_root_detector(kps):
    p = check_descriptor_params("vgg", {}, "d")
    assert F.vgg_setup(p, kps, {"detector": "sift"}, (10, 10), Path("i")).extractor.getScaleFactor() == pytest.approx(6.75)
    assert F.vgg_setup(p, kps, {"detector": "orb"}, (10, 10), Path("i")).extractor.getScaleFactor() == pytest.approx(0.75)
    p = check_descriptor_params("vgg", {"scale_factor": 3.0}, "d")
    assert F.vgg_setup(p, kps, {"detector": "orb"}, (10, 10), Path("i")).extractor.getScaleFactor() == pytest.approx(3.0)


def test_kaze_levels_from_size_never_level_zero():
    sizes = [3.2, 6.4, 3.2 * 2 ** 1.25, 0.1, 1e5]
    level, octave = F.kaze_levels(kps_at([(0, 0)] * 5, sizes), KAZE, {"detector": "sift"})
    assert level.tolist() == [1, 4, 5, 1, 15] and octave.tolist() == [0, 1, 1, 0, 3]
    own = kps_at([(0, 0)] * 5, sizes, class_id=[7, 0, 3, 16, 2])  # 0 and 16: not KAZE levels of this scale space
    assert F.kaze_levels(own, KAZE, {"detector": "kaze"})[0].tolist() == [7, 4, 3, 1, 2]
    assert F.kaze_levels(own, KAZE, {"detector": "akaze"})[0].tolist() == [1, 4, 5, 1, 15]


def test_kaze_rows_equal_opencv_kaze_at_the_documented_levels(image, kps):
    gray = read_image(image)
    level, octave = F.kaze_levels(kps, KAZE, {"detector": "sift"})
    cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), float(a), 1.0, int(o), int(c))
              for x, y, s, a, o, c in zip(kps.x, kps.y, kps.size, kps.angle, octave, level)]
    ref = cv2.xfeatures2d.KAZE_create().compute(gray, cv_kps)[1]
    np.testing.assert_array_equal(compute_descriptors("kaze", KAZE, image, kps, {"detector": "sift"}, "d"), ref)


def test_vgg_rows_workbench_are_opencvs_rows_l2_normalised_as_cv_normalize(image, kps):
    """rows: workbench = the workbench runner's cv::normalize(NORM_L2) of every row: the scale is
    float32(1 / norm), the norm from the float64 sum of squares (checked here by hand)."""
    ours = compute_descriptors("vgg", check_descriptor_params("vgg", {}, "d"), image, kps, {"detector": "sift"}, "d")
    wb = compute_descriptors("vgg", check_descriptor_params("vgg", {"rows": "workbench"}, "d"), image, kps, {"detector": "sift"}, "d")
    norms = np.sqrt((ours.astype(np.float64) ** 2).sum(axis=1))
    assert np.all(np.abs(norms - 1.0) > 0.1)  # OpenCV's VGG rows are not unit rows: the step matters
    want = np.stack([row * np.float32(1.0 / n) for row, n in zip(ours, norms)])
    np.testing.assert_array_equal(wb, want)
    assert check_descriptor_params("vgg", {}, "d")["rows"] == "opencv"


@pytest.mark.bad_input
def test_vgg_rows_other_than_opencv_or_workbench_is_refused():
    from descbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"rows"):
        check_descriptor_params("vgg", {"rows": "l2"}, "d")


def test_vgg_rows_workbench_on_patches_is_the_same_step(image):
    from descbench.descriptors.fusion import normalize_rows_l2
    from descbench.patches.describe import describe_patches

    gray = read_image(image)
    patches = np.stack([gray[y:y + 65, x:x + 65] for x, y in ((100, 80), (180, 120), (240, 200))])
    plain = describe_patches(patches, "vgg", {})
    np.testing.assert_array_equal(describe_patches(patches, "vgg", {"rows": "workbench"}), normalize_rows_l2(plain))
    assert not np.allclose(np.linalg.norm(plain, axis=1), 1.0)
