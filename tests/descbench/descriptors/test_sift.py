"""SIFT family variants: the unrounded SIFT kernel against OpenCV, RootSIFT identities, domain-size
pooling, RGBSIFT blocks, the grey-image error, output contract.

Measured agreement of the kernel (descbench.descriptors.sift_kernel) with cv2 5.0.0's SIFT on
the demo image's 655 SIFT keypoints: after OpenCV's rounding 83839 of 83840 values are equal,
the one other differs by 1 (a value at a .5 rounding boundary); unrounded values are within 0.5
of OpenCV's. Expectations are built independently: OpenCV itself, per-channel / per-scale
computations done separately here, closed-form identities.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_image
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import sift_kernel as K
from descbench.descriptors import sift as S
from descbench.descriptors.dspsift import workbench_scale_geometry
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.sift import sift_octave_from_size


def kps_from_cv(cv_kps) -> ImageKeypoints:
    n = len(cv_kps)
    f = lambda a: np.array(a, dtype=np.float32)
    return ImageKeypoints(
        f([k.pt[0] for k in cv_kps]), f([k.pt[1] for k in cv_kps]), f([k.size for k in cv_kps]),
        f([k.angle for k in cv_kps]), f([k.response for k in cv_kps]),
        np.array([k.octave for k in cv_kps], np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


@pytest.fixture(scope="module")
def sift_kps(pristine):
    gray = read_image(pristine / "1.ppm")
    cv_kps = cv2.SIFT_create().detect(gray, None)[:300]
    return kps_from_cv(cv_kps)


SIFT_SET = {"detector": "sift", "params": {}}
FOREIGN_SET = {"detector": "orb", "params": {}}


def run(family, params, image, kps, kpset=SIFT_SET):
    params = check_descriptor_params(family, params, f"descriptors.d.params")
    return compute_descriptors(family, params, image, kps, kpset, "test")


# ----------------------------------------------------------------------------- kernel vs OpenCV


@pytest.mark.parametrize("foreign", [False, True])
def test_kernel_rounded_equals_opencv(pristine, sift_kps, foreign):
    """Our float SIFT, rounded the OpenCV way, equals cv2's SIFT output (both on SIFT keypoints
    with their own octave and on the same keypoints with the octave derived from size)."""
    gray = read_image(pristine / "1.ppm")
    octave = sift_octave_from_size(sift_kps.size, gray.shape) if foreign else sift_kps.octave
    cv_kps = [cv2.KeyPoint(float(x), float(y), float(s), float(a), 0, int(o)) for x, y, s, a, o in
              zip(sift_kps.x, sift_kps.y, sift_kps.size, sift_kps.angle, octave)]
    _, ref = cv2.SIFT_create().compute(gray, cv_kps)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(sift_kps.x, sift_kps.y, sift_kps.size, sift_kps.angle, octave)
    raw = K.raw_histograms(K.build_pyramid(gray, first, n_oct), level, ptx, pty, ori, scl)
    ours = K.normalise_sift(raw, round_uchar=True)
    diff = np.abs(ours - ref)
    assert diff.max() <= 1.0
    assert (diff == 0).mean() >= 0.9999
    unrounded = K.normalise_sift(raw)
    assert np.abs(unrounded - ref).max() <= 0.5 + 1e-3
    assert not np.all(unrounded == np.round(unrounded))  # genuinely unrounded
    # SIFT's normalisation: L2 norm 512
    np.testing.assert_allclose(np.linalg.norm(unrounded, axis=1), 512, rtol=1e-5)


def test_sift_workbench_convention_is_l2_normalised_opencv(pristine, sift_kps):
    base = run("sift", {}, pristine / "1.ppm", sift_kps)
    wb = run("sift", {"convention": "workbench"}, pristine / "1.ppm", sift_kps)
    np.testing.assert_allclose(np.linalg.norm(wb, axis=1), 1, rtol=1e-6)
    # same direction as OpenCV's (integer) output, up to the grey conversion (imread grey vs cvtColor)
    cos = (wb * base).sum(1) / np.linalg.norm(base, axis=1)
    assert np.median(cos) > 0.9999


def test_sift_vsift_convention_is_l2_normalised_vanillasift_of_cvtcolor_grey(pristine, sift_kps):
    """The workbench's vSIFT: the rgbsift family's VanillaSIFT kernel (unrounded) on the
    cvtColor grey, L2-normalised; close to (not equal to) OpenCV's rounded SIFT."""
    image = pristine / "3.ppm"
    got = run("sift", {"convention": "vsift"}, image, sift_kps)
    gray = cv2.cvtColor(read_image(image, color=True), cv2.COLOR_BGR2GRAY)
    from descbench.descriptors.rgbsift import workbench_sift_on_channel

    np.testing.assert_array_equal(got, K.cv_normalize_rows(workbench_sift_on_channel(gray, sift_kps, sift_kps.octave)))
    wb = run("sift", {"convention": "workbench"}, image, sift_kps)
    assert 0 < np.abs(got - wb).max() < 0.01
    foreign = run("sift", {"convention": "vsift"}, image, sift_kps, FOREIGN_SET)
    np.testing.assert_array_equal(foreign, K.cv_normalize_rows(workbench_sift_on_channel(
        gray, sift_kps, sift_octave_from_size(sift_kps.size, gray.shape))))


def test_sift_vsift_patches_are_the_patch_images(tmp_path):
    from descbench.patches.describe import centre_keypoint, describe_patches

    rng = np.random.default_rng(4)
    patches = cv2.GaussianBlur(rng.uniform(0, 255, (2 * 65, 65)), (0, 0), 2.0).astype(np.uint8).reshape(2, 65, 65)
    rows = describe_patches(patches, "sift", {"convention": "vsift"})
    kp = centre_keypoint(S.sift_patch_support({}, 65))
    for i, p in enumerate(patches):
        path = tmp_path / f"p{i}.png"
        cv2.imwrite(str(path), p)
        np.testing.assert_array_equal(rows[i], run("sift", {"convention": "vsift"}, path, kp, {})[0])


def test_rgbsift_channel_average_is_the_mean_of_the_raw_blocks_l2_normalised(pristine, sift_kps):
    """RGBSIFT_CHANNEL_AVG: the mean of the three unnormalised channel blocks, then row L2."""
    from descbench.descriptors import rgbsift as R

    image = pristine / "4.ppm"
    bgr = read_image(image, color=True)
    got = run("rgbsift", {"convention": "workbench", "channels": "average"}, image, sift_kps)
    assert got.shape == (len(sift_kps), 128)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(sift_kps.x, sift_kps.y, sift_kps.size, sift_kps.angle, sift_kps.octave)
    blocks = [K.normalise_sift(K.raw_histograms(K.build_pyramid(np.ascontiguousarray(bgr[:, :, c]), first, n_oct), level, ptx, pty, ori, scl))
              for c in (0, 1, 2)]
    mean = sum(b.astype(np.float64) for b in blocks) / 3
    np.testing.assert_allclose(got, mean / np.linalg.norm(mean, axis=1, keepdims=True), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(R.average_blocks([np.float32([[3.0]]), np.float32([[6.0]]), np.float32([[9.0]])]), [[6.0]])
    desc = run("rgbsift", {"channels": "average"}, image, sift_kps)
    cat = run("rgbsift", {}, image, sift_kps).astype(np.float64)
    want = (cat[:, :128] + cat[:, 128:256] + cat[:, 256:]) / 3
    np.testing.assert_allclose(desc, want / np.linalg.norm(want, axis=1, keepdims=True), rtol=1e-6, atol=1e-7)
    assert R.rgbsift_width({"channels": "average"}, []) == 128 and R.rgbsift_width({}, []) == 384
    assert run("rgbsift", {"channels": "average"}, image, sift_kps.take(np.arange(0))).shape == (0, 128)


# ----------------------------------------------------------------------------- RootSIFT identities


@pytest.mark.parametrize("family,params", [("dspsift", {}), ("rgbsift", {}), ("dsprgbsift", {"convention": "workbench"})])
def test_root_identities(pristine, sift_kps, family, params):
    img = pristine / "2.ppm"
    plain = run(family, params, img, sift_kps).astype(np.float64)
    root = run(family, {**params, "root": True}, img, sift_kps).astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(root, axis=1), 1, rtol=1e-5)
    p = plain / plain.sum(1, keepdims=True)
    # squared dot of root descriptors = Hellinger kernel of the L1-normalised originals
    i, j = np.arange(0, 50), np.arange(50, 100)
    np.testing.assert_allclose((root[i] * root[j]).sum(1), np.sqrt(p[i] * p[j]).sum(1), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- domain-size pooling


def single_scale_raw(gray, kps, size):
    """One raw SIFT histogram per keypoint at the given size, the OpenCV size -> level rule."""
    octave = sift_octave_from_size(size, gray.shape)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(kps.x, kps.y, size, kps.angle, octave)
    return K.raw_histograms(K.build_pyramid(gray, first, n_oct), level, ptx, pty, ori, scl)


def test_dong_soatto_is_the_mean_of_single_scale_histograms(pristine, sift_kps):
    gray = read_image(pristine / "3.ppm")
    scales = [0.5, 1.0, 2.0]
    got = run("dspsift", {"scales": scales}, pristine / "3.ppm", sift_kps, FOREIGN_SET)
    mean = np.mean([single_scale_raw(gray, sift_kps, (sift_kps.size.astype(np.float64) * a).astype(np.float32))
                    for a in scales], axis=0)
    want = K.normalise_sift(mean.astype(np.float32))
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_dong_soatto_single_scale_is_normalised_sift(pristine, sift_kps):
    """scales [1.0] on foreign keypoints = OpenCV's SIFT (same level rule) up to rounding, normalised."""
    got = run("dspsift", {"scales": [1.0]}, pristine / "1.ppm", sift_kps, FOREIGN_SET)
    ref = run("sift", {}, pristine / "1.ppm", sift_kps, FOREIGN_SET)  # OpenCV's integers
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, rtol=1e-6)
    # back on OpenCV's scale (L2 norm 512) and rounded, it is OpenCV's output
    assert (np.rint(got * 512) == ref).mean() >= 0.999
    assert np.abs(got * 512 - ref).max() <= 0.5 + 1e-3


def test_workbench_dsp_is_mean_of_per_scale_vanillasift(pristine, sift_kps):
    gray = cv2.cvtColor(read_image(pristine / "2.ppm", color=True), cv2.COLOR_BGR2GRAY)
    scales = [1.0, 1.5, 2.0]
    got = run("dspsift", {"convention": "workbench"}, pristine / "2.ppm", sift_kps)
    o, _ = K.unpack_octave(sift_kps.octave)
    first, n_oct = min(0, int(o.min())), int(o.max()) - min(0, int(o.min())) + 1
    pyr = K.build_pyramid(gray, first, n_oct)
    per = []
    for a in scales:
        level, ptx, pty, scl, valid = workbench_scale_geometry(sift_kps, a, first, pyr.n_levels)
        assert valid.all()
        per.append(K.normalise_sift(K.raw_histograms(pyr, level, ptx, pty, K.opencv_angle(sift_kps.angle), scl)))
    want = np.mean(per, axis=0)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, atol=1e-6)
    # and the recorded default scales are the workbench's
    assert check_descriptor_params("dspsift", {"convention": "workbench"}, "d")["scales"] == scales


def test_workbench_scale_geometry_hand_worked():
    """size 3.2 * 2^1.5 at a = 1: t = 1.5 -> octave 1, layer floor(0.5 * 3) = 1; with first -1 the
    level is (1 + 1) * 6 + 1 = 13; position halves; a = 0.25 gives t = -0.5 -> octave -1, layer 1."""
    k = ImageKeypoints(*(np.array([v], dt) for v, dt in [(10, np.float32), (20, np.float32), (3.2 * 2 ** 1.5, np.float32),
                                                         (0, np.float32), (0, np.float32), (0, np.int32), (-1, np.int32), (0, np.int32)]))
    level, ptx, pty, scl, valid = workbench_scale_geometry(k, 1.0, -1, 100)
    assert level[0] == 13 and ptx[0] == 5 and pty[0] == 10 and valid[0]
    np.testing.assert_allclose(scl[0], 3.2 * 2 ** 1.5 / 2 / 2, rtol=1e-6)
    level, ptx, *_ = workbench_scale_geometry(k, 0.25, -1, 100)
    assert level[0] == 1 and ptx[0] == 20
    level, *_, valid = workbench_scale_geometry(k, 0.25, 0, 100)  # octave -1 below first octave 0
    assert level[0] == -1 and not valid[0]


# ----------------------------------------------------------------------------- RGBSIFT


def test_rgbsift_blocks_are_per_channel_sift(pristine, sift_kps, tmp_path):
    bgr = read_image(pristine / "4.ppm", color=True)
    got = run("rgbsift", {}, pristine / "4.ppm", sift_kps)
    assert got.shape == (len(sift_kps), 384)
    for block, c in enumerate((2, 1, 0)):  # R, G, B
        p = tmp_path / f"c{c}.png"
        cv2.imwrite(str(p), bgr[:, :, c])
        ref = run("sift", {}, p, sift_kps)
        ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
        np.testing.assert_allclose(got[:, 128 * block:128 * (block + 1)], ref, atol=1e-6)


def test_rgbsift_workbench_blocks_are_per_channel_vanillasift(pristine, sift_kps):
    bgr = read_image(pristine / "4.ppm", color=True)
    got = run("rgbsift", {"convention": "workbench"}, pristine / "4.ppm", sift_kps)
    first, n_oct, level, ptx, pty, ori, scl = K.opencv_geometry(sift_kps.x, sift_kps.y, sift_kps.size, sift_kps.angle, sift_kps.octave)
    blocks = [K.normalise_sift(K.raw_histograms(K.build_pyramid(np.ascontiguousarray(bgr[:, :, c]), first, n_oct), level, ptx, pty, ori, scl))
              for c in (0, 1, 2)]  # B, G, R
    want = np.concatenate(blocks, axis=1)
    np.testing.assert_allclose(got, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("family,params", [("rgbsift", {}), ("rgbsift", {"convention": "workbench"}),
                                           ("dsprgbsift", {}), ("dsprgbsift", {"convention": "workbench"})])
def test_equal_channels_give_equal_blocks(pristine, sift_kps, tmp_path, family, params):
    gray = read_image(pristine / "1.ppm")
    p = tmp_path / "grey3.ppm"
    cv2.imwrite(str(p), cv2.merge([gray, gray, gray]))
    d = run(family, params, p, sift_kps)
    np.testing.assert_array_equal(d[:, :128], d[:, 128:256])
    np.testing.assert_array_equal(d[:, :128], d[:, 256:])


@pytest.mark.bad_input
@pytest.mark.parametrize("family", ["rgbsift", "dsprgbsift"])
def test_colour_family_on_grey_file_is_a_data_error(pristine, sift_kps, tmp_path, family):
    p = tmp_path / "grey.pgm"
    cv2.imwrite(str(p), read_image(pristine / "1.ppm"))
    with pytest.raises(DataError, match=rf"grey\.pgm.*{family}.*use a grey descriptor, e\.g\. sift, or a colour dataset"):
        run(family, {}, p, sift_kps)


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("family,params,dim", [
    ("rgbsift", {}, 384), ("rgbsift", {"convention": "workbench"}, 384),
    ("dspsift", {}, 128), ("dspsift", {"convention": "workbench"}, 128),
    ("dsprgbsift", {}, 384), ("dsprgbsift", {"convention": "workbench", "root": True}, 384),
    ("sift", {"convention": "workbench"}, 128), ("sift", {"convention": "vsift"}, 128),
    ("rgbsift", {"convention": "workbench", "channels": "average"}, 128)])
def test_rows_dtype_determinism(pristine, sift_kps, family, params, dim):
    img = pristine / "5.ppm"
    for kpset in (SIFT_SET, FOREIGN_SET):
        a = run(family, params, img, sift_kps, kpset)
        assert a.shape == (len(sift_kps), dim) and a.dtype == np.float32 and np.isfinite(a).all()
        np.testing.assert_array_equal(a, run(family, params, img, sift_kps, kpset))
    # row order follows the input order (a permutation of the same keypoints: same pyramid layout)
    perm = np.random.default_rng(0).permutation(len(sift_kps))
    np.testing.assert_array_equal(run(family, params, img, sift_kps.take(perm)), run(family, params, img, sift_kps)[perm])
    empty = sift_kps.take(np.arange(0))
    assert run(family, params, img, empty).shape == (0, dim)


@pytest.mark.bad_input
def test_params_recorded_and_checked():
    assert check_descriptor_params("dspsift", {}, "d") == {
        "convention": "dong_soatto", "scales": [float(v) for v in np.linspace(1 / 6, 3, 10)], "root": False}
    assert check_descriptor_params("dsprgbsift", {"scales": [1, 2]}, "d")["scales"] == [1.0, 2.0]
    assert check_descriptor_params("rgbsift", {}, "d") == {"convention": "descbench", "root": False, "channels": "concat"}
    assert check_descriptor_params("sift", {}, "d") == {"convention": "opencv"}
    with pytest.raises(ConfigError, match=r"d\.scales"):
        check_descriptor_params("dspsift", {"scales": []}, "d")
    with pytest.raises(ConfigError, match=r"d\.convention"):
        check_descriptor_params("rgbsift", {"convention": "paper"}, "d")
    with pytest.raises(ConfigError, match=r"d\.convention"):
        check_descriptor_params("sift", {"convention": "vl"}, "d")


def test_sift_family_rows_are_opencv_sift_with_the_sets_octaves_or_derived_ones(pristine):
    """descbench.descriptors.sift directly: a SIFT set keeps its keypoints' octave field and its
    pyramid parameters; other keypoints get OpenCV's default pyramid and octaves from their size."""
    image = pristine / "1.ppm"
    gray = read_image(image)
    sift = cv2.SIFT_create(nfeatures=30, contrastThreshold=0.03)
    cv_kps = sift.detect(gray, None)
    kps = ImageKeypoints(*(np.array(v, dtype=t) for v, t in [
        ([k.pt[0] for k in cv_kps], np.float32), ([k.pt[1] for k in cv_kps], np.float32), ([k.size for k in cv_kps], np.float32),
        ([k.angle for k in cv_kps], np.float32), ([k.response for k in cv_kps], np.float32), ([k.octave for k in cv_kps], np.int32),
        ([k.class_id for k in cv_kps], np.int32), (range(len(cv_kps)), np.int32)]))
    own = S.sift_descriptors(image, kps, {}, {"detector": "sift", "params": {"contrast_threshold": 0.03}})
    np.testing.assert_array_equal(own, sift.compute(gray, cv_kps)[1])
    derived = S.sift_descriptors(image, kps, {}, {"detector": "orb"})
    octs = sift_octave_from_size(kps.size, gray.shape)
    ref = cv2.SIFT_create().compute(gray, [cv2.KeyPoint(k.pt[0], k.pt[1], k.size, k.angle, k.response, int(o), k.class_id)
                                           for k, o in zip(cv_kps, octs)])[1]
    np.testing.assert_array_equal(derived, ref)
    wb = S.sift_descriptors(image, kps, {"convention": "workbench"}, {"detector": "sift"})
    np.testing.assert_allclose(np.linalg.norm(wb, axis=1), 1.0, rtol=1e-6)
    assert S.sift_patch_support({}, 65) == 65 / 5.303
    with pytest.raises(ConfigError, match="convention must be one of opencv, workbench"):
        S.sift_descriptors(image, kps, {"convention": "x"}, {})


@pytest.mark.bad_input
def test_sift_vsift_octave_out_of_range_is_a_data_error_naming_it(pristine, sift_kps):
    bad = ImageKeypoints(sift_kps.x[:2], sift_kps.y[:2], sift_kps.size[:2], sift_kps.angle[:2], sift_kps.response[:2],
                         np.full(2, 254, np.int32), sift_kps.class_id[:2], sift_kps.source_index[:2])
    with pytest.raises(DataError, match=r"^test: .*octave field out of range.*convention vsift reads the keypoints' packed"):
        run("sift", {"convention": "vsift"}, pristine / "1.ppm", bad)
