"""descbench.estimators.homography with the real PoseLib (the ``estimators`` extra, which README's
test command installs: these tests import it plainly and fail, not skip, where it is missing).

References: PoseLib's own ``estimate_homography`` called directly with the options written out here
(not read from the module), exact correspondences (the true H), PoseLib's own iteration count and
defaults, and the installed distribution's version. The failure paths (no inlier, non-finite H,
fewer than 4 matches, PoseLib missing) are tested with a fake module in ``test_homography.py``."""

from __future__ import annotations

from importlib import metadata

import numpy as np
import poselib  # the `estimators` extra: a plain import, so a CI without it fails here instead of skipping

from descbench.estimators import library_versions
from descbench.estimators.homography import ESTIMATORS, estimate_homography
from descbench.metrics.matching import corner_error
from tests.descbench.estimators.test_homography import H_TRUE, SIZE, scene

# glue-factory's PoseLibHomographyEstimator passes only max_reproj_error, so PoseLib 2.0.5's own
# defaults apply (written out here: PoseLib's RansacOptions).
GF_MAX_ITERATIONS, GF_SUCCESS_PROB = 100000, 0.9999


def direct(src, dst, th, max_iterations=GF_MAX_ITERATIONS, success_prob=GF_SUCCESS_PROB, seed=0):
    """PoseLib called directly: (H scaled to H[2, 2] = 1, as descbench scales it; inliers; info)."""
    H, info = poselib.estimate_homography(src, dst, {"max_reproj_error": th, "max_iterations": max_iterations,
                                                     "success_prob": success_prob, "seed": seed})
    return H / H[2, 2], np.asarray(info["inliers"], dtype=bool), info


class Spy:
    """Wraps the real ``poselib.estimate_homography`` and keeps the info dict of each call."""

    def __init__(self, monkeypatch):
        self.infos = []
        real = poselib.estimate_homography

        def estimate(*args, **kwargs):
            H, info = real(*args, **kwargs)
            self.infos.append(info)
            return H, info

        monkeypatch.setattr(poselib, "estimate_homography", estimate)


def test_equals_poselib_called_directly_bit_for_bit():
    """H (scaled to H[2, 2] = 1) and the inliers equal PoseLib's own, on clean, noisy and
    outlier-ridden matches, at several thresholds and seeds, with glue-factory's defaults and with
    other settings."""
    cases = [
        (scene(100), 1.0, {}),
        (scene(150, outlier_fraction=0.3, noise=0.7, seed=1), 1.0, {}),
        (scene(150, outlier_fraction=0.3, noise=0.7, seed=1), 2.5, {"seed": 3}),
        (scene(200, outlier_fraction=0.6, noise=1.0, seed=2), 2.0, {"seed": 1}),
        (scene(200, outlier_fraction=0.6, noise=1.0, seed=2), 0.5, {"max_iters": 500, "confidence": 0.9, "seed": 7}),
    ]
    for (src, dst, _), th, kw in cases:
        est = estimate_homography(src, dst, "poselib", th, **kw)
        H, inliers, info = direct(src, dst, th, kw.get("max_iters", GF_MAX_ITERATIONS),
                                  kw.get("confidence", GF_SUCCESS_PROB), kw.get("seed", 0))
        assert info["num_inliers"] > 0 and est.success, (th, kw)
        assert np.array_equal(est.H, H), (th, kw)
        assert np.array_equal(est.inliers, inliers) and est.n_inliers == info["num_inliers"], (th, kw)
        assert est.estimator == "poselib" and est.ransac_th == th


def test_exact_correspondences_give_the_true_H_and_every_inlier():
    src, dst, _ = scene(100)
    est = estimate_homography(src, dst, "poselib", 1.0)
    np.testing.assert_allclose(est.H, H_TRUE, rtol=1e-9, atol=0)
    assert est.H[2, 2] == 1.0
    assert est.inliers.all() and est.n_inliers == 100
    assert corner_error(est.H, H_TRUE, SIZE, corners="image_edges") < 1e-6


def test_outliers_are_found_and_repeated_calls_agree():
    src, dst, inl = scene(100, outlier_fraction=0.3, seed=1)
    a = estimate_homography(src, dst, "poselib", 2.0)
    b = estimate_homography(src, dst, "poselib", 2.0)
    assert corner_error(a.H, H_TRUE, SIZE, corners="image_edges") < 1e-6
    assert np.array_equal(a.inliers, inl)
    assert np.array_equal(a.H, b.H) and np.array_equal(a.inliers, b.inliers)


def test_max_iters_confidence_and_seed_reach_poselib(monkeypatch):
    """Seen in what PoseLib does, not only in the dict it is handed: the iterations it runs
    (``max_iters`` caps them, a lower ``confidence`` stops earlier) and the samples it draws (the
    seed changes the estimate when few iterations are allowed)."""
    spy = Spy(monkeypatch)
    src, dst, _ = scene(200, outlier_fraction=0.8, noise=0.5, seed=3)
    estimate_homography(src, dst, "poselib", 2.0)
    default_iterations = spy.infos[-1]["iterations"]
    assert default_iterations > 5000  # 20 % inliers at success_prob 0.9999: far more than PoseLib's minimum 1000
    estimate_homography(src, dst, "poselib", 2.0, max_iters=2000)
    assert spy.infos[-1]["iterations"] == 2000
    estimate_homography(src, dst, "poselib", 2.0, confidence=0.5)
    assert 1000 < spy.infos[-1]["iterations"] < default_iterations / 4
    assert spy.infos[-1]["iterations"] == direct(src, dst, 2.0, success_prob=0.5)[2]["iterations"]

    src, dst, _ = scene(100, outlier_fraction=0.5, noise=1.0, seed=2)
    by_seed = [estimate_homography(src, dst, "poselib", 2.0, max_iters=20, seed=s) for s in range(4)]
    assert len({e.H.tobytes() for e in by_seed}) == 4  # each seed samples differently
    for s, e in enumerate(by_seed):
        H, inliers, _ = direct(src, dst, 2.0, max_iterations=20, seed=s)
        assert np.array_equal(e.H, H) and np.array_equal(e.inliers, inliers), s
    # the default seed is PoseLib's own default (0)
    H0, _ = poselib.estimate_homography(src, dst, {"max_reproj_error": 2.0, "max_iterations": 20})
    assert np.array_equal(estimate_homography(src, dst, "poselib", 2.0, max_iters=20).H, H0 / H0[2, 2])


def test_no_inlier_from_the_real_library_is_a_failure():
    """One iteration on half outliers: PoseLib keeps no model (num_inliers 0, H a placeholder)."""
    src, dst, _ = scene(100, outlier_fraction=0.5, noise=1.0, seed=2)
    assert direct(src, dst, 2.0, max_iterations=1)[2]["num_inliers"] == 0
    est = estimate_homography(src, dst, "poselib", 2.0, max_iters=1)
    assert est.H is None and not est.inliers.any()


def test_registry_defaults_are_poselibs_own():
    """glue-factory passes no max_iterations / success_prob: ESTIMATORS records PoseLib's defaults."""
    opts = poselib.RansacOptions()
    assert (opts["max_iterations"], opts["success_prob"], opts["seed"]) == (GF_MAX_ITERATIONS, GF_SUCCESS_PROB, 0)
    assert (ESTIMATORS["poselib"].max_iters, ESTIMATORS["poselib"].confidence) == (GF_MAX_ITERATIONS, GF_SUCCESS_PROB)


def test_library_versions_records_the_installed_poselib():
    version = metadata.version("poselib")
    assert library_versions()["poselib"] == version == poselib.__version__
