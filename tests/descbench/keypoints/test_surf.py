"""SURF (descbench.keypoints.surf, descbench.descriptors.surf) against the papers' properties.

Bay, Tuytelaars, Van Gool, ECCV 2006; Bay, Ess, Tuytelaars, Van Gool, CVIU 2008. Every
expectation here is computed independently of the module (brute-force sums, closed-form
geometry, scipy/OpenCV image warps) or is an invariance the method must have.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from scipy.spatial import cKDTree

from descbench.datasets.demo import source_image
from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.surf import (SURF_SCALE_PER_SIZE, SurfDetector, box_sum, detect_surf, hessian_boxes,
                                      integral_image, make_surf_detector, surf_orientations)
from descbench.descriptors.surf_kernels import surf_describe


def grey(scene: str, multiple: int = 1) -> np.ndarray:
    """Image 1 of a demo scene as grey uint8, cropped to a multiple of ``multiple`` pixels."""
    img = cv2.cvtColor(source_image(scene), cv2.COLOR_BGR2GRAY)
    h, w = img.shape
    return np.ascontiguousarray(img[: h - h % multiple, : w - w % multiple])


#: Blob centre offset from the image centre: off every sample grid, so that no two samples see the
#: blob identically (an exactly symmetric tie has no strict maximum).
BLOB_OFFSET = (0.3, -0.2)


def gaussian_blob(sigma: float, n: int, amplitude: float = 180.0, base: float = 40.0) -> np.ndarray:
    """An n x n image with a Gaussian blob of ``sigma`` centred at (n/2, n/2) + BLOB_OFFSET."""
    yy, xx = np.mgrid[:n, :n]
    cx, cy = n / 2 + BLOB_OFFSET[0], n / 2 + BLOB_OFFSET[1]
    return base + amplitude * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * sigma**2))


# ---------------------------------------------------------------------------------------------
# Integral image and box filters
# ---------------------------------------------------------------------------------------------


def test_integral_image_box_sums_match_brute_force_with_zero_padding():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(37, 53)).astype(np.uint8)
    ii = integral_image(img)
    assert ii.shape == (38, 54)
    np.testing.assert_array_equal(ii[1:, 1:][-1, -1], img.astype(np.int64).sum())
    padded = np.zeros((37 + 40, 53 + 40), dtype=np.int64)  # 20 px of zeros around the image
    padded[20:-20, 20:-20] = img
    for _ in range(300):
        r0, r1 = np.sort(rng.integers(-20, 57, size=2))
        c0, c1 = np.sort(rng.integers(-20, 73, size=2))
        expected = padded[r0 + 20 : r1 + 20, c0 + 20 : c1 + 20].sum()
        assert box_sum(ii, int(r0), int(c0), int(r1), int(c1)) == expected


def dense_kernels(size: int):
    """The paper's box filters as dense weight arrays (Dxx, Dyy, Dxy), built independently of the
    module from the documented layout: lobe b = size/3; Dyy = lobes +1/-2/+1 of height b and
    width 2b-1 (odd size) or 2b-2 (even size), centred; Dxx its transpose; Dxy four b x b
    squares (+ top-left/bottom-right) around a central gap of 1 (odd) or 2 (even) px."""
    b = size // 3
    wv = 2 * b - 1 if size % 2 else 2 * b - 2
    m = (size - wv) // 2
    dyy = np.zeros((size, size))
    dyy[0:b, m : m + wv] = 1
    dyy[b : 2 * b, m : m + wv] = -2
    dyy[2 * b : 3 * b, m : m + wv] = 1
    gap = 1 if size % 2 else 2
    h = (size - gap) // 2
    lo, hi = slice(h - b, h), slice(h + gap, h + gap + b)
    dxy = np.zeros((size, size))
    dxy[lo, lo] = dxy[hi, hi] = 1
    dxy[lo, hi] = dxy[hi, lo] = -1
    return dyy.T.copy(), dyy, dxy


@pytest.mark.parametrize("size", [9, 15, 18, 21, 27, 30, 42, 54])
def test_box_filter_responses_match_dense_kernels(size):
    kxx, kyy, kxy = dense_kernels(size)
    # the kernels are zero-mean and have the symmetries of the second derivatives they approximate
    for k in (kxx, kyy, kxy):
        assert k.sum() == 0
    np.testing.assert_array_equal(kyy, kyy[::-1]), np.testing.assert_array_equal(kyy, kyy[:, ::-1])
    np.testing.assert_array_equal(kxy, -kxy[:, ::-1])
    np.testing.assert_array_equal(kxy, kxy.T)
    rng = np.random.default_rng(size)
    img = rng.integers(0, 256, size=(90, 110)).astype(np.float64)
    ii = integral_image(img)
    for _ in range(25):
        t = int(rng.integers(0, 90 - size + 1))
        l = int(rng.integers(0, 110 - size + 1))
        patch = img[t : t + size, l : l + size]
        got = hessian_boxes(ii, t, l, size)
        want = [(k * patch).sum() / size**2 for k in (kxx, kyy, kxy)]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


def test_box_filters_measure_second_derivatives_with_the_right_signs():
    """On I = x*x (d2/dx2 = 2 > 0) only Dxx responds, positively; on I = x*y (d2/dxdy = 1) Dxy
    is positive (x right, y down) and Dxx, Dyy vanish; a constant image gives 0 everywhere."""
    yy, xx = np.mgrid[:60, :60].astype(np.float64)
    for size in (9, 18, 27):
        t = l = 10
        dxx, dyy, dxy = hessian_boxes(integral_image(xx * xx / 60), t, l, size)
        assert dxx > 0 and abs(dyy) < 1e-9 and abs(dxy) < 1e-9
        if size % 2:
            # closed form for odd L: the +1/-2/+1 lobes of width b give sum w(x) x^2 / 2 = b^3 per
            # row, over 2b - 1 rows, / L^2, times f'' = 2/60
            b = size // 3
            assert dxx == pytest.approx(2 / 60 * b**3 * (2 * b - 1) / size**2, rel=1e-9)
        dxx, dyy, dxy = hessian_boxes(integral_image(xx * yy / 60), t, l, size)
        assert dxy > 0 and abs(dxx) < 1e-9 and abs(dyy) < 1e-9
        assert hessian_boxes(integral_image(np.full((60, 60), 77.0)), t, l, size) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------------------------------------
# Detector
# ---------------------------------------------------------------------------------------------


def test_detected_scale_tracks_gaussian_blob_sigma():
    """s = 1.2 size / 9 is proportional to the blob's sigma (the detector is scale covariant).

    Expected constant: for exact scale-normalised Gaussian derivatives, a Gaussian blob of
    sigma_b smoothed at sigma has ``sigma^4 det H = A^2 sigma^4 / (4 pi^2 (sigma_b^2 +
    sigma^2)^4)`` at its centre, maximal where ``d/du [u^2 / (sigma_b^2 + u)^4] = 0`` (u =
    sigma^2), i.e. sigma = sigma_b: a ratio of 1. SURF's boxes normalised by L^2 are coarser:
    brute-force evaluation of the box det at a blob centre over all odd L peaks at
    1.2 L / 9 = 0.65 sigma_b, with the detector's even-sized octave filters ~0.72 sigma_b (the 9x9
    box's effective extent is larger than sigma = 1.2). So: the ratio must be constant across
    blob sizes (within 15 %) and lie between these estimates (0.6 .. 1.0), and the keypoint sits
    on the blob centre with the sign of a bright blob's Laplacian (class_id -1).
    """
    ratios = []
    for sigma in (3.0, 4.0, 5.0, 6.5, 8.0, 11.0, 16.0):
        n = int(16 * sigma) + 64
        n += n % 2
        k = detect_surf(gaussian_blob(sigma, n), hessian_threshold=1.0, n_octaves=5)
        i = int(np.argmax(k.response))
        # within a sample step of the centre (the position is interpolated, not exact)
        tol = 2 ** k.octave[i]
        assert abs(k.x[i] - n / 2 - BLOB_OFFSET[0]) < tol and abs(k.y[i] - n / 2 - BLOB_OFFSET[1]) < tol, sigma
        assert k.class_id[i] == -1
        ratios.append(k.size[i] * SURF_SCALE_PER_SIZE / sigma)
    ratios = np.array(ratios)
    assert ratios.max() / ratios.min() < 1.15, ratios
    assert 0.6 < ratios.mean() < 1.0, ratios
    # a dark blob: same scale, positive Laplacian
    k = detect_surf(255.0 - gaussian_blob(6.5, 168), hessian_threshold=1.0)
    i = int(np.argmax(k.response))
    assert k.class_id[i] == 1 and abs(k.size[i] * SURF_SCALE_PER_SIZE / 6.5 - ratios[3]) < 0.02


def test_threshold_and_fields():
    img = grey("v_camera")
    k = detect_surf(img)
    assert len(k) > 100
    assert np.all(k.response > 100) and np.all(np.diff(k.response) <= 0)  # sorted, descending
    assert np.all((k.angle >= 0) & (k.angle < 360))
    assert set(np.unique(k.class_id)) <= {-1, 0, 1}
    # filter side L = (9 + 6k) 2^o: an octave-o keypoint lies within one layer step of its layers
    for o in np.unique(k.octave):
        sz = k.size[k.octave == o]
        assert np.all(sz >= (15 - 6) * 2**o) and np.all(sz <= (9 + 6 * 4) * 2**o), o
    h, w = img.shape
    assert np.all((k.x >= 0) & (k.x < w) & (k.y >= 0) & (k.y < h))
    # a higher threshold keeps exactly the keypoints above it
    k2 = detect_surf(img, hessian_threshold=1000)
    assert 0 < len(k2) < len(k)
    np.testing.assert_array_equal(np.sort(k2.response), np.sort(k.response[k.response > 1000]))
    # upright: same positions, angle 0
    ku = detect_surf(img, upright=True)
    np.testing.assert_array_equal(ku.x, k.x)
    assert np.all(ku.angle == 0)


def test_mask_keeps_keypoints_on_nonzero_pixels():
    img = grey("v_camera")
    mask = np.zeros_like(img)
    mask[:, : img.shape[1] // 2] = 1
    k = detect_surf(img)
    km = detect_surf(img, mask=mask)
    keep = np.floor(k.x + 0.5) < img.shape[1] // 2
    np.testing.assert_array_equal(km.x, k.x[keep])
    with pytest.raises(DataError, match="mask"):
        detect_surf(img, mask=mask[:10])


def test_rot90_gives_the_same_keypoints():
    """The boxes are symmetric under 90-degree rotations and the sample grids map onto themselves
    when W and H are multiples of the coarsest sampling step (8 at 4 octaves): the keypoints of
    np.rot90(image) are the rotated keypoints, with the angle turned by -90 degrees."""
    img = grey("v_camera", multiple=8)
    h, w = img.shape
    k = detect_surf(img)
    r = detect_surf(np.rot90(img))
    assert len(r) == len(k) > 100
    # np.rot90 (counter-clockwise): (x, y) -> (y, W - 1 - x)
    dist, idx = cKDTree(np.c_[r.x, r.y]).query(np.c_[k.y, w - 1 - k.x])
    assert dist.max() < 1e-3
    np.testing.assert_allclose(r.size[idx], k.size, rtol=1e-5)
    np.testing.assert_allclose(r.response[idx], k.response, rtol=1e-5)
    turn = (k.angle - 90.0 - r.angle[idx] + 180.0) % 360.0 - 180.0
    assert np.abs(turn).max() < 0.01


def repeatability(p1, p2, affine, shape, tol=3.0, margin=10.0):
    """Fraction of keypoints with a counterpart within ``tol`` px after mapping image 1 to image 2
    by ``affine`` (2x3); only keypoints visible (``margin`` px inside) in both images count;
    correspondences = min over the two sides of the points having a counterpart."""
    h, w = shape
    inv = cv2.invertAffineTransform(affine)
    m1 = np.c_[p1, np.ones(len(p1))] @ affine.T
    b2 = np.c_[p2, np.ones(len(p2))] @ inv.T

    def inside(p):
        return (p[:, 0] >= margin) & (p[:, 0] < w - margin) & (p[:, 1] >= margin) & (p[:, 1] < h - margin)

    m1, q2 = m1[inside(m1)], p2[inside(b2)]
    n1 = (cKDTree(q2).query(m1)[0] <= tol).sum()
    n2 = (cKDTree(m1).query(q2)[0] <= tol).sum()
    return min(n1, n2) / min(len(m1), len(q2))


def test_repeatability_under_rotation_and_scaling():
    """30 degrees and 0.7x (bilinear warp of a real photograph): SURF finds the same points
    (paper Fig. 9-ish: 60-70 % at such changes), far above uniformly random points."""
    rng = np.random.default_rng(0)
    for scene in ("v_camera", "i_astronaut"):
        img = grey(scene)
        h, w = img.shape
        affine = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), 30, 0.7)
        warped = cv2.warpAffine(img, affine, (w, h), flags=cv2.INTER_LINEAR)
        k1, k2 = detect_surf(img), detect_surf(warped)
        rep = repeatability(np.c_[k1.x, k1.y], np.c_[k2.x, k2.y], affine, (h, w))
        rand = np.mean([
            repeatability(rng.uniform((0, 0), (w, h), size=(len(k1), 2)), rng.uniform((0, 0), (w, h), size=(len(k2), 2)),
                          affine, (h, w))
            for _ in range(5)
        ])
        assert rep >= 0.45, (scene, rep)
        assert rep > 5 * rand, (scene, rep, rand)


def test_orientation_of_an_intensity_ramp():
    """I = x cos(phi) + y sin(phi) (y down) has gradient direction phi: SURF's orientation is
    phi in OpenCV's KeyPoint.angle convention (degrees from +x towards +y)."""
    yy, xx = np.mgrid[:200, :200].astype(np.float64)
    for phi in (0.0, 37.0, 90.0, 160.0, 215.0, 300.0):
        a = np.radians(phi)
        ii = integral_image(128 + 0.5 * ((xx - 100) * np.cos(a) + (yy - 100) * np.sin(a)))
        got = surf_orientations(ii, np.array([100.0]), np.array([100.0]), np.array([20.0]))[0]
        assert abs((got - phi + 180) % 360 - 180) < 1.0, (phi, got)


# ---------------------------------------------------------------------------------------------
# Descriptor
# ---------------------------------------------------------------------------------------------


def nn_accuracy(d1: np.ndarray, d2: np.ndarray) -> float:
    dist = ((d1[:, None, :].astype(np.float64) - d2[None, :, :]) ** 2).sum(-1)
    return float((dist.argmin(axis=1) == np.arange(len(d1))).mean())


@pytest.mark.parametrize("extended", [False, True])
def test_descriptor_is_rotation_invariant_and_upright_is_not(extended):
    """The same physical keypoints in an image and its 90-degree rotation (positions mapped,
    sizes kept, no angles given) match by nearest neighbour; U-SURF (upright) does not."""
    img = grey("i_brick", multiple=8)
    h, w = img.shape
    k = detect_surf(img)
    rot = np.ascontiguousarray(np.rot90(img))
    x2, y2 = k.y, w - 1 - k.x
    d1 = surf_describe(img, k.x, k.y, k.size, extended=extended)
    d2 = surf_describe(rot, x2, y2, k.size, extended=extended)
    assert nn_accuracy(d1, d2) > 0.8
    assert np.median(np.linalg.norm(d1 - d2, axis=1)) < 0.1
    u1 = surf_describe(img, k.x, k.y, k.size, extended=extended, upright=True)
    u2 = surf_describe(rot, x2, y2, k.size, extended=extended, upright=True)
    assert nn_accuracy(u1, u2) < 0.3
    # upright is fine when nothing rotates (a control for the control): a small shift of the image
    shifted = np.ascontiguousarray(img[:, 3:])
    u3 = surf_describe(shifted, k.x - 3, k.y, k.size, extended=extended, upright=True)
    assert nn_accuracy(u1, u3) > 0.8


def test_descriptor_matches_across_rotation_and_scale():
    """30 degrees + 0.7x: descriptors of detected keypoints match their geometric counterparts
    better than chance (nearest neighbour among the second image's keypoints)."""
    img = grey("v_camera")
    h, w = img.shape
    affine = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), 30, 0.7)
    warped = cv2.warpAffine(img, affine, (w, h), flags=cv2.INTER_LINEAR)
    k1, k2 = detect_surf(img), detect_surf(warped)
    d1 = surf_describe(img, k1.x, k1.y, k1.size)
    d2 = surf_describe(warped, k2.x, k2.y, k2.size)
    m1 = np.c_[k1.x, k1.y, np.ones(len(k1))] @ affine.T
    gt_dist, gt = cKDTree(np.c_[k2.x, k2.y]).query(m1)
    has = gt_dist <= 3.0
    assert has.sum() > 50
    nn = cKDTree(d2).query(d1[has])[1]
    assert (nn == gt[has]).mean() > 0.5


def test_descriptor_shape_norm_border_and_foreign_keypoints():
    img = grey("v_coins")
    h, w = img.shape
    # on-border and off-image positions, tiny and huge sizes (other detectors' keypoints)
    x = np.array([0.0, w - 1.0, 5.0, w / 2, -3.0, w + 2.0, w / 2, 100.0])
    y = np.array([0.0, h - 1.0, h / 2, 0.0, 10.0, h / 2, h / 2, 100.0])
    size = np.array([9.0, 20.0, 31.0, 12.0, 9.0, 9.0, 3.0, 400.0])
    for extended, dim in ((False, 64), (True, 128)):
        d = surf_describe(img, x, y, size, extended=extended)
        assert d.shape == (len(x), dim) and d.dtype == np.float32
        assert np.all(np.isfinite(d))
        np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
    assert surf_describe(img, [], [], []).shape == (0, 64)
    # a constant window has no gradient: all-zero vector, not NaN
    assert not np.any(surf_describe(np.full((64, 64), 100, np.uint8), [32.0], [32.0], [9.0]))


def test_extended_splits_the_64d_sums():
    """128-D = the 64-D sums of du and |du| split by the sign of dv (and dv, |dv| by du): adding
    the two halves back gives the 64-D vector up to the normalisation factor."""
    img = grey("v_camera")
    k = detect_surf(img)
    d64 = surf_describe(img, k.x, k.y, k.size).astype(np.float64).reshape(-1, 16, 4)
    d128 = surf_describe(img, k.x, k.y, k.size, extended=True).astype(np.float64).reshape(-1, 16, 8)
    back = np.stack([d128[..., 0] + d128[..., 2], d128[..., 4] + d128[..., 6],
                     d128[..., 1] + d128[..., 3], d128[..., 5] + d128[..., 7]], axis=-1)
    scale = np.linalg.norm(back.reshape(len(k), -1), axis=1)
    np.testing.assert_allclose(back / scale[:, None, None], d64, atol=1e-5)


def test_determinism():
    img = grey("v_chelsea")
    a, b = detect_surf(img), detect_surf(img.copy())
    for f in ("x", "y", "size", "angle", "response", "octave", "class_id"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    d1 = surf_describe(img, a.x, a.y, a.size, extended=True)
    d2 = surf_describe(img.copy(), b.x, b.y, b.size, extended=True)
    assert d1.tobytes() == d2.tobytes()


@pytest.mark.bad_input
def test_bad_input_is_a_data_error():
    img = grey("v_coins")
    with pytest.raises(DataError, match="size"):
        surf_describe(img, [10.0], [10.0], [0.0], what="keypoints of image a.ppm")
    with pytest.raises(DataError, match="a.ppm"):
        surf_describe(img, [np.nan], [10.0], [9.0], what="keypoints of image a.ppm")
    with pytest.raises(DataError, match="grey"):
        detect_surf(np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(DataError, match="hessian_threshold"):
        detect_surf(img, hessian_threshold=-1)
    assert len(detect_surf(np.zeros((5, 5), np.uint8))) == 0  # too small for a 3x3x3 block


# ---------------------------------------------------------------------------------------------
# Registry plumbing
# ---------------------------------------------------------------------------------------------


def test_family_computes_one_row_per_keypoint_in_order(pristine):
    from descbench.descriptors import check_descriptor_params, compute_descriptors
    from descbench.keypoints.detectors import keypoints_from_cv

    path = pristine / "1.ppm"
    gray = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    kps = keypoints_from_cv(cv2.SIFT_create().detect(gray, None))  # another detector's keypoints
    params = check_descriptor_params("surf", {}, "descriptors.s.params")
    assert params == {"extended": False, "upright": False}
    d = compute_descriptors("surf", params, path, kps, {"detector": "sift"}, "descriptors.s")
    assert d.shape == (len(kps), 64)
    np.testing.assert_array_equal(d, surf_describe(gray, kps.x, kps.y, kps.size))
    rev = kps.take(np.arange(len(kps))[::-1])
    np.testing.assert_array_equal(compute_descriptors("surf", params, path, rev, {}, "d")[::-1], d)
    ext = compute_descriptors("surf", {"extended": True, "upright": True}, path, kps, {}, "d")
    assert ext.shape == (len(kps), 128)
    empty = kps.take(np.zeros(0, dtype=int))
    assert compute_descriptors("surf", params, path, empty, {}, "d").shape == (0, 64)
    bad = ImageKeypoints(*(getattr(kps, f)[:1].copy() for f in kps.__dataclass_fields__))
    bad.size[0] = -1
    with pytest.raises(DataError, match=str(path)):
        compute_descriptors("surf", params, path, bad, {}, "d")


def test_detector_registry_entry(pristine, monkeypatch):
    from descbench.keypoints import detectors as det_mod
    from descbench.keypoints import surf as surf_mod

    gray = cv2.imread(str(pristine / "1.ppm"), cv2.IMREAD_GRAYSCALE)
    params = {"hessian_threshold": 100.0, "n_octaves": 4, "n_octave_layers": 3, "upright": False}
    ours = det_mod.detect("surf", gray, params)
    ref = detect_surf(gray)
    np.testing.assert_array_equal(ours.x, ref.x)
    np.testing.assert_array_equal(ours.size, ref.size)
    np.testing.assert_array_equal(ours.angle, ref.angle)
    np.testing.assert_array_equal(ours.class_id, ref.class_id)
    assert isinstance(make_surf_detector(params), SurfDetector)  # no non-free OpenCV here
    # OpenCV's SURF is preferred whenever this OpenCV build can create it
    sentinel = object()
    monkeypatch.setattr(surf_mod, "opencv_surf", lambda p, extended=False: sentinel)
    assert surf_mod.make_surf_detector(params) is sentinel
