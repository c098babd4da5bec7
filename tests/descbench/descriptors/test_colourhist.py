"""descbench.descriptors.colourhist: the honc and howh families (rows against the kernel on the
colour pyramid, post-processing, determinism, bad input), their patches and their computeDSP hook
under ``dsp`` with ``image: base_pyramid``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import raises_naming

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors, get_family
from descbench.descriptors import colourhist as C
from descbench.descriptors import colourhist_kernel as CK
from descbench.descriptors import sift_kernel as K
from descbench.descriptors.dspsift import workbench_dsp_layout, workbench_scale_geometry
from descbench.errors import ConfigError, DataError
from descbench.keypoints.detectors import keypoints_from_cv

SIFT_SET = {"detector": "sift"}


@pytest.fixture(scope="module")
def image_kps(pristine: Path, tmp_path_factory):
    """A colour version of the demo's (grey) image 1: its grey times smooth random colour fields."""
    grey = read_image(pristine / "1.ppm").astype(np.float32)
    rng = np.random.default_rng(11)
    tint = cv2.resize(rng.uniform(0.1, 1.0, (6, 8, 3)).astype(np.float32), grey.shape[::-1], interpolation=cv2.INTER_LINEAR)
    image = tmp_path_factory.mktemp("colourhist") / "colour.png"
    cv2.imwrite(str(image), np.clip(grey[:, :, None] * tint / tint.max(), 0, 255).astype(np.uint8))
    bgr = cv2.imread(str(image), cv2.IMREAD_COLOR)
    assert np.abs(bgr[..., 0].astype(int) - bgr[..., 2]).max() > 50
    return image, keypoints_from_cv(cv2.SIFT_create(nfeatures=30).detect(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), None))


def l2(d):
    d = d.astype(np.float64)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


@pytest.mark.parametrize("family", ["honc", "howh"])
def test_rows_are_the_kernel_on_the_colour_pyramid_l2_normalised(image_kps, family):
    image, kps = image_kps
    params = check_descriptor_params(family, {}, "d")
    assert params == ({"root": False, "flat_window": "error"} if family == "honc" else {"root": False})
    rows = compute_descriptors(family, params, image, kps, SIFT_SET, "d")
    assert rows.shape == (len(kps), 128) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows.astype(np.float64), axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(get_family(family).compute(image, kps, params, SIFT_SET), rows)  # deterministic
    bgr = cv2.imread(str(image), cv2.IMREAD_COLOR)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(kps.x, kps.y, kps.size, kps.angle, kps.octave)
    assert C.HSV[family] == (family == "howh")
    pyr = CK.colour_pyramid(bgr, first, n_oct, hsv=C.HSV[family])
    raw = (CK.honc_rows if family == "honc" else CK.howh_rows)(pyr, level, ptx, pty, ori, scl)
    np.testing.assert_allclose(rows, l2(raw), rtol=1e-6, atol=1e-7)
    assert not np.allclose(rows, compute_descriptors("howh" if family == "honc" else "honc", params, image, kps, SIFT_SET, "d"))


def test_root_is_rootsift_of_the_row_last(image_kps):
    image, kps = image_kps
    plain = compute_descriptors("honc", {"root": False}, image, kps, SIFT_SET, "d").astype(np.float64)
    rooted = compute_descriptors("honc", {"root": True}, image, kps, SIFT_SET, "d")
    np.testing.assert_allclose(rooted, np.sqrt(plain / plain.sum(axis=1, keepdims=True)), rtol=1e-6, atol=1e-7)


def test_octaves_from_size_off_sift_sets(image_kps):
    image, kps = image_kps
    odd = dataclasses.replace(kps, octave=np.full(len(kps), 99, dtype=np.int32))  # a field that is not SIFT's
    a = compute_descriptors("honc", {"root": False}, image, odd, {"detector": "orb"}, "d")
    b = compute_descriptors("honc", {"root": False}, image, kps, {"detector": "orb"}, "d")
    np.testing.assert_array_equal(a, b)
    assert compute_descriptors("howh", {"root": False}, image, kps.take(np.arange(0)), SIFT_SET, "d").shape == (0, 128)


@pytest.mark.bad_input
@pytest.mark.parametrize("family", ["honc", "howh"])
def test_grey_image_unknown_param_and_bad_octave_are_errors(image_kps, tmp_path, family):
    image, kps = image_kps
    grey = tmp_path / "grey.png"
    cv2.imwrite(str(grey), read_image(image))
    raises_naming(lambda: compute_descriptors(family, {"root": False}, grey, kps, SIFT_SET, "d"),
                  f"image {grey} is greyscale", f"descriptor family '{family}' needs a colour image")
    raises_naming(lambda: check_descriptor_params(family, {"bins": 4}, "descriptors.x.params"), "descriptors.x.params",
                  "bins", exc=ConfigError)
    raises_naming(lambda: check_descriptor_params(family, {"root": "yes"}, "descriptors.x.params"),
                  "descriptors.x.params.root", exc=ConfigError)
    bad = dataclasses.replace(kps, octave=np.full(len(kps), 254, dtype=np.int32))  # octave -2
    raises_naming(lambda: compute_descriptors(family, {"root": False}, image, bad, SIFT_SET, "d"), "octave",
                  "SIFT set")


@pytest.mark.bad_input
def test_honc_of_a_flat_window_is_an_error_naming_the_keypoint(image_kps, tmp_path):
    _, kps = image_kps
    flat = tmp_path / "flat.png"
    img = np.zeros((120, 160, 3), dtype=np.uint8)  # black: its blur is exactly 0, its spread exactly 0
    img[:, 120:] = (200, 10, 10)  # texture far from the first keypoint
    cv2.imwrite(str(flat), img)
    one = dataclasses.replace(kps.take(np.arange(2)), x=np.float32([30, 130]), y=np.float32([60, 60]),
                              octave=np.int32([0, 0]), size=np.float32([4.0, 30.0]))
    raises_naming(lambda: compute_descriptors("honc", {"root": False}, flat, one, SIFT_SET, "desc x, scene s"),
                  "desc x, scene s", "'honc' is undefined at 1 keypoints (first: row 0, x 30.0, y 60.0",
                  "no spread", "params.flat_window: unstretched", "use family howh")
    raises_naming(lambda: check_descriptor_params("honc", {"flat_window": "zero"}, "descriptors.x.params"),
                  "descriptors.x.params.flat_window", "'error', 'unstretched'", exc=ConfigError)
    params = check_descriptor_params("honc", {"flat_window": "unstretched"}, "d")
    unstretched = compute_descriptors("honc", params, flat, one, SIFT_SET, "d")
    assert np.all(np.isfinite(unstretched)) and np.all(unstretched[0] > 0)  # black, unstretched: the 8 bins of a cell alike
    cells = unstretched[0].reshape(16, 8)
    np.testing.assert_allclose(cells, cells[:, :1] * np.ones((1, 8)), rtol=1e-5)
    rows = compute_descriptors("howh", {"root": False}, flat, one, SIFT_SET, "d")  # howh is defined there
    assert np.all(np.isfinite(rows))


def test_honc_patches_are_the_grey_patch_as_a_colour_image(tmp_path):
    from descbench.patches.describe import centre_keypoint, describe_patches

    rng = np.random.default_rng(5)
    patches = cv2.GaussianBlur(rng.uniform(0, 255, (3 * 65, 65)), (0, 0), 2.0).astype(np.uint8).reshape(3, 65, 65)
    params = check_descriptor_params("honc", {}, "d")
    rows = describe_patches(patches, "honc", params)
    assert rows.shape == (3, 128)
    kp = centre_keypoint(get_family("honc").patch_support(params, 65))
    for i, p in enumerate(patches):
        path = tmp_path / f"p{i}.png"
        cv2.imwrite(str(path), np.repeat(p[:, :, None], 3, axis=2))
        np.testing.assert_array_equal(rows[i], compute_descriptors("honc", params, path, kp, {}, "d")[0])
    assert "saturation is 0" in get_family("howh").patch_problem()


# ----------------------------------------------------------------------------- dsp, image: base_pyramid


def dsp_params(family, **kw):
    return check_descriptor_params("dsp", {"base": {"family": family}, "image": "base_pyramid", **kw}, "descriptors.x.params")


@pytest.mark.parametrize("family, colour", [("honc", True), ("howh", False), ("honc", False)])
def test_dsp_base_pyramid_is_compute_dsp(image_kps, family, colour):
    """The pooled rows are the element-wise mean over the scales of the kernel's rows on one
    pyramid (never HSV) of the BGR image (colour) or of its grey in three channels, at
    computeDSP's levels, L2-normalised."""
    image, kps = image_kps
    params = dsp_params(family, scales=[0.75, 1.0, 1.5], colour=colour)
    rows = compute_descriptors("dsp", params, image, kps, SIFT_SET, "d")
    assert rows.shape == (len(kps), 128)
    bgr = cv2.imread(str(image), cv2.IMREAD_COLOR)
    if not colour:
        bgr = cv2.cvtColor(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    first, n_oct = workbench_dsp_layout(kps.octave, [0.75, 1.0, 1.5])
    pyr = CK.colour_pyramid(bgr, first, n_oct, hsv=False)
    acc, cnt, ori = 0.0, 0, K.opencv_angle(kps.angle)
    for a in (0.75, 1.0, 1.5):
        level, ptx, pty, scl, ok = workbench_scale_geometry(kps, a, first, pyr.n_levels)
        d = (CK.honc_rows if family == "honc" else CK.howh_rows)(pyr, level, ptx, pty, ori, scl)
        acc, cnt = acc + np.where(ok[:, None], d.astype(np.float64), 0.0), cnt + ok[:, None]
    np.testing.assert_allclose(rows, l2(acc / np.maximum(cnt, 1)), rtol=1e-6, atol=1e-7)


def test_dsp_base_pyramid_skips_keypoints_below_the_pyramid(image_kps):
    """A keypoint too small for the pyramid at a scale is left out of that scale's mean; at every
    scale: a zero row (the workbench's AVERAGE over no valid value)."""
    image, kps = image_kps
    two = kps.take(np.arange(2))
    tiny = dataclasses.replace(two, size=np.float32([1.0, 20.0]), octave=np.int32([0, 0]))
    rows, valid = get_family("honc").pyramid_rows(image, tiny, {"root": False}, {"detector": "orb"}, [0.5, 4.0], False)
    assert [v.tolist() for v in valid] == [[False, True], [True, True]]
    pooled = compute_descriptors("dsp", dsp_params("honc", scales=[0.5, 4.0]), image, tiny, {"detector": "orb"}, "d")
    np.testing.assert_allclose(pooled[0], l2(rows[1][:1])[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(pooled[1], l2((rows[0][1:].astype(np.float64) + rows[1][1:]) / 2)[0], rtol=1e-6, atol=1e-7)
    one = compute_descriptors("dsp", dsp_params("honc", scales=[0.5]), image, tiny.take(np.arange(1)), {"detector": "orb"}, "d")
    assert not one.any()
    mx = compute_descriptors("dsp", dsp_params("honc", scales=[0.5, 4.0], aggregation="max"), image, tiny, {"detector": "orb"}, "d")
    np.testing.assert_allclose(mx[0], pooled[0], rtol=1e-6, atol=1e-7)
    cat = compute_descriptors("dsp", dsp_params("honc", scales=[0.5, 4.0], aggregation="concatenate", normalise_after="none"),
                              image, tiny, {"detector": "orb"}, "d")
    assert cat.shape == (2, 256) and np.all(cat[0, :128] == -1.0)


@pytest.mark.bad_input
def test_dsp_base_pyramid_refusals():
    raises_naming(lambda: dsp_params("sift"), "descriptors.x.params.image: base_pyramid", "family 'sift' has none",
                  "DSPSIFT_V2) is family 'dspsift' with convention: workbench", "honc, howh", exc=ConfigError)
    raises_naming(lambda: dsp_params("rgbsift"), "family 'rgbsift' has none", "(DSPRGBSIFT_V2) is family 'dsprgbsift'",
                  exc=ConfigError)
    raises_naming(lambda: dsp_params("surf"), "family 'surf' has none (no pyramid_rows hook); use a base", exc=ConfigError)
    raises_naming(lambda: dsp_params("honc", weighting="gaussian"), "descriptors.x.params.weighting", "remove weighting",
                  exc=ConfigError)
    raises_naming(lambda: dsp_params("honc", weights=[1, 1, 2]), "descriptors.x.params.weights", exc=ConfigError)
    raises_naming(lambda: check_descriptor_params("dsp", {"base": {"family": "honc"}, "colour": True}, "descriptors.x.params"),
                  "descriptors.x.params.colour applies to image: workbench_pyramid or base_pyramid only", exc=ConfigError)


def test_dsp_base_pyramid_patches_are_the_images_of_the_patches(tmp_path):
    from descbench.patches.describe import centre_keypoint, describe_patches

    rng = np.random.default_rng(9)
    patches = cv2.GaussianBlur(rng.uniform(0, 255, (2 * 65, 65)), (0, 0), 2.0).astype(np.uint8).reshape(2, 65, 65)
    params = dsp_params("honc")
    rows = describe_patches(patches, "dsp", params)
    assert rows.shape == (2, 128)
    kp = centre_keypoint(get_family("dsp").patch_support(params, 65))
    for i, p in enumerate(patches):
        path = tmp_path / f"p{i}.png"
        cv2.imwrite(str(path), np.repeat(p[:, :, None], 3, axis=2))
        np.testing.assert_array_equal(rows[i], compute_descriptors("dsp", params, path, kp, {}, "d")[0])
    with pytest.raises(ConfigError, match="saturation is 0"):
        describe_patches(patches, "dsp", dsp_params("howh"))
