"""descbench.estimators.homography: glue-factory's DLT against kornia's own output and an
independent reference, the OpenCV flags and defaults, PoseLib's options, failures, determinism and
the config checks."""

from __future__ import annotations

import doctest
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import raises_naming
from descbench.errors import ConfigError, DataError
from descbench.estimators import homography as E
from descbench.estimators import library_versions
from descbench.estimators.homography import ESTIMATORS, check_estimator, estimate_homography, find_homography_dlt
from descbench.metrics.matching import corner_error

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "gluefactory" / "dlt_kornia.npz"
H_TRUE = np.array([[0.9, 0.12, 35.0], [-0.08, 1.1, -12.0], [2e-4, -1.5e-4, 1.0]])
SIZE = (640, 480)
# Written out here, not read from the module: glue-factory's opencv.py solver table.
OPENCV_FLAGS = {"ransac": cv2.RANSAC, "lmeds": cv2.LMEDS, "rho": cv2.RHO, "usac_default": cv2.USAC_DEFAULT,
                "usac_fast": cv2.USAC_FAST, "usac_accurate": cv2.USAC_ACCURATE, "usac_prosac": cv2.USAC_PROSAC,
                "usac_magsac": cv2.USAC_MAGSAC}


def project(H, p):
    q = np.c_[p, np.ones(len(p))] @ np.asarray(H).T
    return q[:, :2] / q[:, 2:]


def scene(n=100, outlier_fraction=0.0, noise=0.0, seed=0):
    """src, dst, inlier mask: exact (or noisy) matches under H_TRUE, a fraction replaced by
    uniformly random dst points."""
    rng = np.random.default_rng(seed)
    src = rng.uniform(0, 640, (n, 2))
    dst = project(H_TRUE, src) + rng.normal(0, noise, (n, 2)) * (noise > 0)
    out = np.zeros(n, bool)
    out[rng.permutation(n)[: int(round(outlier_fraction * n))]] = True
    dst[out] = rng.uniform(0, 640, (int(out.sum()), 2))
    return src, dst, ~out


# --------------------------------------------------------------------------- the DLT


def reference_dlt(src, dst, w, solver):
    """An independent DLT of kornia's definition: rows built one match at a time from the cross
    product ``dst_h x (H src_h) = 0`` (its first two components), the weight applied as sqrt(w)
    on the rows, the LU system solved by least squares, the SVD taken of the weighted rows."""
    def norm(p):
        c = p - p.mean(0)
        s = np.sqrt(2) / (np.sqrt((c ** 2).sum(1)).mean() + 1e-8)
        T = np.diag([s, s, 1.0])
        T[:2, 2] = -s * p.mean(0)
        return c * s, T

    a, Ta = norm(src)
    b, Tb = norm(dst)
    rows = []
    for (x1, y1), (x2, y2), wi in zip(a, b, w):
        p = np.array([x1, y1, 1.0])
        # (dst x H p)_0 = y2 (H p)_2 - (H p)_1 ; (dst x H p)_1 = (H p)_0 - x2 (H p)_2
        rows.append(np.sqrt(wi) * np.concatenate([0 * p, -p, y2 * p]))
        rows.append(np.sqrt(wi) * np.concatenate([p, 0 * p, -x2 * p]))
    A = np.array(rows)
    if solver == "lu":
        h = np.linalg.lstsq(A.T @ A, np.ones(9), rcond=None)[0]
    else:
        h = np.linalg.svd(A)[2][-1]
    H = np.linalg.inv(Tb) @ h.reshape(3, 3) @ Ta
    return H / (H[2, 2] + 1e-8)


def test_dlt_recovers_an_exact_homography():
    src, dst, _ = scene(50)
    for w in (None, np.random.default_rng(3).uniform(0.1, 1, 50)):
        for solver in ("lu", "svd"):
            H = find_homography_dlt(src, dst, w, solver=solver)
            # lu: H[2, 2] + 1e-8 is ~1e16 and the 1e-8 vanishes; svd: it biases H by ~1e-8 relative
            tol = 1e-9 if solver == "lu" else 1e-6
            np.testing.assert_allclose(H, H_TRUE, rtol=tol, atol=tol)
            assert corner_error(H, H_TRUE, SIZE, corners="image_edges") < (1e-7 if solver == "lu" else 1e-4)


def test_dlt_pure_translation_by_hand():
    """A shift by (3, -2): H = [[1, 0, 3], [0, 1, -2], [0, 0, 1]] to roundoff."""
    src = np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0], [5.0, 3.0]])
    H = find_homography_dlt(src, src + [3.0, -2.0], np.ones(5))
    np.testing.assert_allclose(H, [[1, 0, 3], [0, 1, -2], [0, 0, 1]], atol=1e-12)


def test_dlt_scales_as_kornia():
    """H / (H[2, 2] + 1e-8): with the SVD solver the result's H[2, 2] misses 1 by 1e-8 / H[2, 2]
    before scaling, as kornia's does (the LU solution is ~1e16 large and shows no such bias)."""
    src, dst, _ = scene(30)
    H = find_homography_dlt(src, dst, solver="svd")
    assert H[2, 2] != 1.0 and abs(H[2, 2] - 1.0) < 1e-6


def test_dlt_equals_kornias_own_output():
    """kornia v0.8.3's find_homography_dlt (tests/data/gluefactory/make_dlt_fixture.py) on noisy
    weighted / unweighted, outlier and minimal cases, both solvers."""
    d = np.load(FIXTURE)
    names = sorted({k[: -len("_H")] for k in d.files if k.endswith("_H")})
    assert len(names) == 6
    for n in names:
        w = d[f"{n}_weights"] if f"{n}_weights" in d.files else None
        H = find_homography_dlt(d[f"{n}_src"], d[f"{n}_dst"], w, solver=str(d[f"{n}_solver"]))
        np.testing.assert_allclose(H, d[f"{n}_H"], rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.parametrize("solver", ["lu", "svd"])
def test_dlt_equals_an_independent_reference_on_noisy_weighted_matches(solver):
    src, dst, _ = scene(40, noise=1.0, seed=5)
    w = np.random.default_rng(6).uniform(0.0, 1.0, 40)
    H = find_homography_dlt(src, dst, w, solver=solver)
    ref = reference_dlt(src, dst, w, solver)
    np.testing.assert_allclose(H, ref, rtol=1e-7, atol=1e-9)
    # the two solvers solve different problems on noisy data: LU is not the SVD vector
    other = find_homography_dlt(src, dst, w, solver="svd" if solver == "lu" else "lu")
    assert corner_error(H, other, SIZE, corners="image_edges") > 1e-4


def test_dlt_zero_weight_removes_an_outlier():
    src, dst, _ = scene(30)
    dst = dst.copy()
    dst[7] += [250.0, -180.0]
    w = np.ones(30)
    w[7] = 0.0
    np.testing.assert_allclose(find_homography_dlt(src, dst, w), H_TRUE, rtol=1e-9, atol=1e-9)
    # with its weight the outlier pulls the fit away (the zero weight is what removed it)
    assert corner_error(find_homography_dlt(src, dst, np.ones(30)), H_TRUE, SIZE, corners="image_edges") > 1.0
    # the outlier still counts in the (unweighted) Hartley normalisation: same H as without it only to roundoff
    keep = np.arange(30) != 7
    np.testing.assert_allclose(find_homography_dlt(src, dst, w), find_homography_dlt(src[keep], dst[keep]), rtol=1e-9)


def test_dlt_failures_are_none():
    src, dst, _ = scene(10)
    assert find_homography_dlt(src[:3], dst[:3]) is None
    assert find_homography_dlt(np.zeros((0, 2)), np.zeros((0, 2))) is None
    assert find_homography_dlt(src, dst, np.zeros(10)) is None  # an all-zero system: LU meets a zero pivot
    assert find_homography_dlt(src[:4], dst[:4]) is not None


# --------------------------------------------------------------------------- OpenCV


@pytest.mark.parametrize("name", list(OPENCV_FLAGS))
def test_each_opencv_name_calls_its_flag_with_gluefactorys_defaults(name, monkeypatch):
    calls = []

    def fake(src, dst, method, th, maxIters, confidence):
        calls.append((method, th, maxIters, confidence, src.dtype))
        return H_TRUE.copy(), np.ones((len(src), 1), np.uint8)

    seeds = []
    monkeypatch.setattr(cv2, "findHomography", fake)
    monkeypatch.setattr(cv2, "setRNGSeed", seeds.append)
    src, dst, _ = scene(10)
    est = estimate_homography(src, dst, name, 2.5, seed=7)
    assert calls == [(OPENCV_FLAGS[name], 2.5, 3000, 0.995, np.float64)] and seeds == [7]
    assert est.success and est.n_inliers == 10 and est.estimator == name and est.ransac_th == 2.5
    estimate_homography(src, dst, name, 1.0, max_iters=50, confidence=0.9)
    assert calls[-1][2:4] == (50, 0.9)


@pytest.mark.parametrize("name", list(OPENCV_FLAGS))
def test_each_opencv_estimator_recovers_H_with_30_percent_outliers(name):
    src, dst, inl = scene(100, outlier_fraction=0.3, seed=1)
    est = estimate_homography(src, dst, name, 3.0)
    assert est.H.dtype == np.float64 and est.H.shape == (3, 3)
    assert corner_error(est.H, H_TRUE, SIZE, corners="image_edges") < 0.01
    assert np.array_equal(est.inliers, inl)


@pytest.mark.parametrize("name", ["ransac", "usac_magsac", "lmeds"])
def test_opencv_is_deterministic(name):
    src, dst, _ = scene(150, outlier_fraction=0.4, noise=1.0, seed=2)
    a = estimate_homography(src, dst, name, 2.0, seed=3)
    b = estimate_homography(src, dst, name, 2.0, seed=3)
    assert np.array_equal(a.H, b.H) and np.array_equal(a.inliers, b.inliers)


def test_opencv_failures(monkeypatch):
    src, dst, _ = scene(10)
    for m in (3, 0):
        est = estimate_homography(src[:m], dst[:m], "ransac", 3.0)
        assert est.H is None and not est.success and est.inliers.shape == (m,) and est.n_inliers == 0

    def raises(*a, **k):
        raise cv2.error("no model")

    monkeypatch.setattr(cv2, "findHomography", raises)
    assert estimate_homography(src, dst, "ransac", 3.0).H is None
    monkeypatch.setattr(cv2, "findHomography", lambda *a, **k: (None, None))
    est = estimate_homography(src, dst, "rho", 3.0)
    assert est.H is None and est.inliers.tolist() == [False] * 10
    monkeypatch.setattr(cv2, "findHomography", lambda *a, **k: (np.full((3, 3), np.nan), np.ones((10, 1), np.uint8)))
    assert estimate_homography(src, dst, "rho", 3.0).H is None


def test_estimate_homography_dlt():
    src, dst, _ = scene(20)
    est = estimate_homography(src, dst, "dlt", None, weights=np.ones(20))
    np.testing.assert_allclose(est.H, H_TRUE, rtol=1e-9, atol=1e-9)
    assert est.inliers.all() and est.ransac_th is None
    # ransac_th is ignored
    same = estimate_homography(src, dst, "dlt", 123.0, weights=np.ones(20))
    assert np.array_equal(same.H, est.H)
    fail = estimate_homography(src[:3], dst[:3], "dlt", None, weights=np.ones(3))
    assert fail.H is None and fail.inliers.tolist() == [False] * 3


@pytest.mark.bad_input
def test_estimate_homography_bad_arguments():
    src, dst, _ = scene(10)
    raises_naming(lambda: estimate_homography(src, dst, "dlt", None), "dlt", "weights", "np.ones(M)", exc=ValueError)
    raises_naming(lambda: estimate_homography(src, dst, "ransac", 3.0, weights=np.ones(10)), "ransac", "weights",
                  exc=ValueError)
    raises_naming(lambda: estimate_homography(src, dst, "ransac", 0.0), "ransac_th", "> 0", exc=ValueError)
    raises_naming(lambda: estimate_homography(src, dst, "ransca", 1.0), "ransca", "usac_magsac", "poselib",
                  exc=ConfigError)
    raises_naming(lambda: estimate_homography(src, dst[:5], "ransac", 1.0), "10 src points but 5 dst")
    raises_naming(lambda: estimate_homography(src[:, :1], dst, "ransac", 1.0), "src", "[M, 2]")
    bad = dst.copy()
    bad[0, 0] = np.nan
    raises_naming(lambda: estimate_homography(src, bad, "ransac", 1.0), "dst", "NaN")
    raises_naming(lambda: find_homography_dlt(src, dst, np.ones(9)), "weights", "(10)")
    raises_naming(lambda: find_homography_dlt(src, dst, -np.ones(10)), "weights", ">= 0")
    raises_naming(lambda: find_homography_dlt(src, dst, solver="qr"), "qr", "lu, svd", exc=ValueError)


# --------------------------------------------------------------------------- PoseLib


def fake_poselib(calls, num_inliers=None, H=None):
    def estimate(src, dst, opts):
        calls.append(dict(opts))
        n = len(src) if num_inliers is None else num_inliers
        inl = [True] * n + [False] * (len(src) - n)
        return (H_TRUE * 2.0 if H is None else H), {"num_inliers": n, "inliers": inl}

    return types.SimpleNamespace(estimate_homography=estimate, __version__="0.fake")


def test_poselib_options(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "poselib", fake_poselib(calls))
    src, dst, _ = scene(12)
    est = estimate_homography(src, dst, "poselib", 1.5, seed=4)
    assert calls == [{"max_reproj_error": 1.5, "max_iterations": 100000, "success_prob": 0.9999, "seed": 4}]
    np.testing.assert_allclose(est.H, H_TRUE, rtol=1e-12)  # PoseLib's scale (here 2) is removed: H[2, 2] = 1
    assert est.n_inliers == 12
    # a negative scale too (PoseLib's H[2, 2] is often negative): corner_error reads w <= 0 as behind the camera
    monkeypatch.setitem(sys.modules, "poselib", fake_poselib(calls, H=-0.03 * H_TRUE))
    est = estimate_homography(src, dst, "poselib", 1.5)
    np.testing.assert_allclose(est.H, H_TRUE, rtol=1e-12)
    assert corner_error(est.H, H_TRUE, SIZE, corners="image_edges") < 1e-9
    estimate_homography(src, dst, "poselib", 1.5, max_iters=10, confidence=0.5)
    assert calls[-1]["max_iterations"] == 10 and calls[-1]["success_prob"] == 0.5
    assert library_versions()["poselib"] == "0.fake"


def test_dlt_exactly_singular_lu_falls_back_to_the_null_vector(monkeypatch):
    """Exact matches can give an exactly zero LU pivot (roundoff decides; this scene does in
    numpy): the null vector is then the solution, the exact H."""
    src, dst, _ = scene(50)
    with pytest.raises(np.linalg.LinAlgError):
        a, Ta = E.hartley_normalization(src)
        b, Tb = E.hartley_normalization(dst)
        A = E.dlt_rows(a, b)
        np.linalg.solve(A.T @ A, np.ones(9))
    np.testing.assert_allclose(find_homography_dlt(src, dst), H_TRUE, rtol=1e-9, atol=1e-9)

    def singular(*a, **k):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(np.linalg, "solve", singular)
    noisy, dst_n, _ = scene(30, noise=1.0, seed=4)
    ref = find_homography_dlt(noisy, dst_n, solver="svd")
    H = find_homography_dlt(noisy, dst_n)  # the fallback: the SVD's vector, scaled by 1 / H[2, 2] exactly
    np.testing.assert_allclose(H, ref / ref[2, 2], rtol=1e-12)
    assert H[2, 2] == 1.0
    assert find_homography_dlt(src, dst, np.zeros(50)) is None  # rank 0: no fallback


def test_poselib_failures(monkeypatch):
    calls = []
    src, dst, _ = scene(12)
    monkeypatch.setitem(sys.modules, "poselib", fake_poselib(calls, num_inliers=0))
    assert estimate_homography(src, dst, "poselib", 1.0).H is None
    monkeypatch.setitem(sys.modules, "poselib", fake_poselib(calls, H=np.full((3, 3), np.inf)))
    assert estimate_homography(src, dst, "poselib", 1.0).H is None
    # fewer than 4 matches: PoseLib is not called (it returns an uninitialised matrix there)
    n = len(calls)
    monkeypatch.setitem(sys.modules, "poselib", fake_poselib(calls))
    est = estimate_homography(src[:3], dst[:3], "poselib", 1.0)
    assert est.H is None and len(calls) == n


@pytest.mark.bad_input
def test_poselib_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "poselib", None)  # `import poselib` raises ImportError
    src, dst, _ = scene(12)
    raises_naming(lambda: estimate_homography(src, dst, "poselib", 1.0), "'poselib'", "pip install poselib",
                  "pip install -e '.[estimators]'", exc=ConfigError)
    raises_naming(lambda: check_estimator("poselib", {"ransac_th": 1.0}, "homography.estimator"),
                  "homography.estimator", "pip install poselib", exc=ConfigError)
    assert library_versions() == {"opencv": cv2.__version__, "poselib": None}


# --------------------------------------------------------------------------- registry and checks


def test_registry():
    assert list(ESTIMATORS) == ["dlt", *OPENCV_FLAGS, "poselib"]
    for name, flag in OPENCV_FLAGS.items():
        assert getattr(cv2, ESTIMATORS[name].cv2_method) == flag
    assert E.RANSAC_TH_SWEEP == (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)


def test_check_estimator_fills_defaults():
    assert check_estimator("ransac") == {"estimator": "ransac", "ransac_th": (3.0,), "max_iters": 3000,
                                         "confidence": 0.995, "seed": 0}
    assert check_estimator("usac_magsac", {"ransac_th": [2, 0.5], "max_iters": 10, "confidence": 0.9, "seed": 3}) == {
        "estimator": "usac_magsac", "ransac_th": (2.0, 0.5), "max_iters": 10, "confidence": 0.9, "seed": 3}
    assert check_estimator("dlt")["ransac_th"] == ()


@pytest.mark.bad_input
@pytest.mark.parametrize("name, params, fragments", [
    ("ransca", {}, ["hom.estimator", "'ransca'", "usac_prosac"]),
    ("ransac", {"ransac_th": 0}, ["hom.estimator.ransac_th", "> 0"]),
    ("ransac", {"ransac_th": -1.0}, ["hom.estimator.ransac_th", "> 0"]),
    ("ransac", {"ransac_th": []}, ["hom.estimator.ransac_th", "empty", "[1.0]"]),
    ("ransac", {"ransac_th": [1.0, 1.0]}, ["hom.estimator.ransac_th", "repeat"]),
    ("ransac", {"ransac_th": True}, ["hom.estimator.ransac_th", "finite number"]),
    ("ransac", {"ransac_th": "1"}, ["hom.estimator.ransac_th", "finite number"]),
    ("ransac", {"ransac_th": float("inf")}, ["hom.estimator.ransac_th", "finite number"]),
    ("rho", {"max_iters": 0}, ["hom.estimator.max_iters", ">= 1"]),
    ("rho", {"max_iters": 2.5}, ["hom.estimator.max_iters", "integer"]),
    ("rho", {"confidence": 1.0}, ["hom.estimator.confidence", "(0, 1)"]),
    ("rho", {"seed": -1}, ["hom.estimator.seed", ">= 0"]),
    ("rho", {"ransac": 1.0}, ["hom.estimator.ransac", "unknown", "ransac_th"]),
    ("dlt", {"ransac_th": 1.0}, ["hom.estimator.ransac_th", "'dlt'", "remove it"]),
    ("rho", [1.0], ["hom.estimator", "mapping"]),
])
def test_check_estimator_bad_input(name, params, fragments):
    raises_naming(lambda: check_estimator(name, params, "hom.estimator"), *fragments, exc=ConfigError)


def test_docstring_examples_run():
    failed, attempted = doctest.testmod(E)
    assert failed == 0 and attempted >= 4


def test_bad_points_are_data_errors():
    with pytest.raises(DataError):
        find_homography_dlt(np.zeros((5, 3)), np.zeros((5, 3)))
