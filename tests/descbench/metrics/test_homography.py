"""descbench.metrics.homography: glue-factory's per-pair precision, corner error and inlier
figures, and its summary (rounded AUCs, best threshold by mAA, medians), by hand and against an
independent AUC reference."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from conftest import raises_naming
from descbench.errors import DataError
from descbench.estimators.homography import estimate_homography
from descbench.metrics import homography as M
from descbench.metrics.homography import (evaluate_estimate, match_precision, median_over_pairs, summarize_errors,
                                          summarize_thresholds)

H_TRUE = np.array([[0.9, 0.12, 35.0], [-0.08, 1.1, -12.0], [2e-4, -1.5e-4, 1.0]])


def project(H, p):
    q = np.c_[p, np.ones(len(p))] @ np.asarray(H).T
    return q[:, :2] / q[:, 2:]


def reference_auc(errors, t):
    """The area under the recall curve up to t, divided by t, accumulated pair by pair: the curve
    rises linearly from (e_{i-1}, (i-1)/N) to (e_i, i/N) and stays flat after the last error below t."""
    e = sorted(errors)
    n = len(e)
    area, prev_x, prev_y = 0.0, 0.0, 0.0
    for i, x in enumerate(e, start=1):
        if not x < t:
            break
        area += (x - prev_x) * (prev_y + i / n) / 2
        prev_x, prev_y = x, i / n
    area += (t - prev_x) * prev_y
    return round(area / t, 4)


# --------------------------------------------------------------------------- per pair


def test_match_precision_counts_errors_strictly_below_the_threshold():
    # identity H: the symmetric error of a match is its distance; 0.5, exactly 1, 2.9, exactly 3, 10
    xy0 = np.zeros((5, 2))
    xy1 = np.array([[0.5, 0], [1.0, 0], [0, 2.9], [3.0, 0], [6, 8]])
    assert match_precision(xy0, xy1, np.eye(3)) == {"num_matches": 5, "prec_at_1": 0.2, "prec_at_3": 0.6}
    assert match_precision(xy0, xy1, np.eye(3), thresholds=(1.5, 11)) == {"num_matches": 5, "prec_at_1.5": 0.4,
                                                                          "prec_at_11": 1.0}


def test_match_precision_uses_the_symmetric_error():
    """H = scale 2: a match (p, 2p + (1, 0)) is 1 px off forward and 0.5 px backward: 0.75 < 1."""
    H = np.diag([2.0, 2.0, 1.0])
    p = np.array([[3.0, 4.0]])
    assert match_precision(p, 2 * p + [1.0, 0.0], H)["prec_at_1"] == 1.0
    assert match_precision(p, 2 * p + [1.5, 0.0], H)["prec_at_1"] == 0.0  # (1.5 + 0.75) / 2 = 1.125


def test_match_precision_without_matches_is_zero():
    assert match_precision(np.zeros((0, 2)), np.zeros((0, 2)), H_TRUE) == {"num_matches": 0, "prec_at_1": 0.0,
                                                                          "prec_at_3": 0.0}


def test_corner_error_by_hand_in_both_conventions():
    """H_est = scale 2 about the origin on a 4 x 3 image. glue-factory's corners (0,0), (4,0),
    (4,3), (0,3) move by 0, 4, 5, 3: mean 3. descbench's matching task's pixel_centres corners
    (0,0), (3,0), (0,2), (3,2) move by 0, 3, 2, sqrt(13)."""
    H2 = np.diag([2.0, 2.0, 1.0])
    r = evaluate_estimate(H2, np.eye(3), (4, 3), np.ones(6, bool))
    assert r == {"success": 1, "corner_error": 3.0, "n_inliers": 6, "inlier_ratio": 1.0}
    from descbench.metrics.matching import corner_error
    assert corner_error(H2, np.eye(3), (4, 3)) == pytest.approx((0 + 3 + 2 + np.sqrt(13)) / 4)


def test_corner_error_of_a_translation():
    T = np.array([[1.0, 0, 3], [0, 1, -4], [0, 0, 1]])
    assert evaluate_estimate(T @ H_TRUE, H_TRUE, (640, 480), [True])["corner_error"] == pytest.approx(5.0)
    assert evaluate_estimate(H_TRUE, H_TRUE, (640, 480), [True])["corner_error"] == 0.0


def test_failure_and_inlier_ratio():
    r = evaluate_estimate(None, H_TRUE, (640, 480), [True, True, False])
    assert r == {"success": 0, "corner_error": np.inf, "n_inliers": 0, "inlier_ratio": 0.0}
    r = evaluate_estimate(H_TRUE, H_TRUE, (640, 480), [True, True, False, False])
    assert (r["n_inliers"], r["inlier_ratio"]) == (2, 0.5)
    assert evaluate_estimate(H_TRUE, H_TRUE, (640, 480), np.zeros(0, bool))["inlier_ratio"] == 0.0  # / max(M, 1)
    assert evaluate_estimate(H_TRUE, H_TRUE, (640, 480), [True])["inlier_ratio"] == 1.0  # one match: / 1


def test_fewer_than_four_matches_give_an_infinite_error():
    src = np.random.default_rng(0).uniform(0, 640, (3, 2))
    dst = project(H_TRUE, src)
    for name, kw in (("dlt", {"weights": np.ones(3)}), ("ransac", {})):
        est = estimate_homography(src, dst, name, 3.0, **kw)
        r = evaluate_estimate(est.H, H_TRUE, (640, 480), est.inliers)
        assert r["corner_error"] == np.inf and r["success"] == 0 and r["n_inliers"] == 0


def test_exact_matches_end_to_end_give_auc_one():
    rng = np.random.default_rng(1)
    errors = {1.0: [], 3.0: []}
    dlt = []
    for _ in range(5):
        src = rng.uniform(0, 640, (40, 2))
        dst = project(H_TRUE, src)
        for th in errors:
            est = estimate_homography(src, dst, "ransac", th)
            errors[th].append(evaluate_estimate(est.H, H_TRUE, (640, 480), est.inliers)["corner_error"])
        est = estimate_homography(src, dst, "dlt", None, weights=rng.uniform(0.2, 1, 40))
        dlt.append(evaluate_estimate(est.H, H_TRUE, (640, 480), est.inliers)["corner_error"])
    assert max(dlt) < 1e-7 and max(max(v) for v in errors.values()) < 1e-3
    s = summarize_thresholds(errors)
    assert s.best.auc == (1.0, 1.0, 1.0) and s.best_th == 1.0
    assert summarize_errors(dlt).auc == (1.0, 1.0, 1.0)


# --------------------------------------------------------------------------- summary


def test_summarize_errors_by_hand():
    """Errors 0.5, 2, inf (N = 3). AUC@1: (0.5 * 1/3 / 2 + 0.5 * 1/3) / 1 = 0.25; AUC@3: (1/12 +
    1.5 * 0.5 + 2/3) / 3 = 0.5; AUC@5: (1/12 + 0.75 + 2) / 5 = 0.56667 -> 0.5667."""
    s = summarize_errors([0.5, 2.0, np.inf])
    assert s.auc == (0.25, 0.5, 0.5667)
    assert s.mean_auc == pytest.approx((0.25 + 0.5 + 0.5667) / 3, abs=1e-15)
    assert (s.median_error, s.mean_error, s.n_pairs, s.n_failed, s.n_no_data) == (2.0, np.inf, 3, 1, 0)
    assert s.auc_thresholds == (1.0, 3.0, 5.0) and s.ransac_th is None


def test_auc_is_glue_factorys_rounded_auc():
    rng = np.random.default_rng(2)
    for n in (1, 7, 50):
        e = np.concatenate([rng.exponential(2.0, n), [np.inf] * (n // 5)])
        e[:2] = [1.0, 3.0][: len(e[:2])]  # errors equal to a threshold are not below it
        assert summarize_errors(e).auc == tuple(reference_auc(e, t) for t in (1, 3, 5))


def test_nan_is_no_data_and_left_out():
    a = summarize_errors([0.5, 2.0, np.inf, np.nan, np.nan])
    b = summarize_errors([0.5, 2.0, np.inf])
    assert (a.auc, a.median_error, a.n_pairs, a.n_no_data) == (b.auc, b.median_error, 3, 2)


def test_medians_round_to_three_decimals():
    assert median_over_pairs([0.12345, 0.2, 7]) == 0.2
    assert median_over_pairs([0.12345, 0.12365]) == 0.124
    assert median_over_pairs([0.12345, 0.12365], decimals=None) == pytest.approx(0.12355)
    assert median_over_pairs([1, np.inf, np.inf]) == np.inf
    assert np.isnan(median_over_pairs([np.nan]))
    assert summarize_errors([0.12345, 0.3, 0.1]).median_error == 0.123


def test_float32_errors_are_summarised_in_float64():
    """Errors given in float32 (glue-factory's own dtype) are summarised in float64: the median and
    mean of 1 + 2^-23 and 1 + 2^-22 is 1 + 1.5 * 2^-23, which float32 cannot hold."""
    e32 = np.array([1 + 2.0**-23, 1 + 2.0**-22], dtype=np.float32)
    want = 1 + 1.5 * 2.0**-23
    assert float(np.median(e32)) != want  # float32 arithmetic would round it
    assert median_over_pairs(e32, decimals=None) == want
    s = summarize_errors(e32)
    assert s.mean_error == want and s.median_error == round(want, 3)


def test_best_threshold_by_mean_auc():
    table = {0.5: [0.4, 2.5, 6.0], 1.0: [0.4, 0.9, 6.0], 2.0: [np.inf, 0.2, 0.3]}
    s = summarize_thresholds(table)
    maa = {th: np.mean([reference_auc(v, t) for t in (1, 3, 5)]) for th, v in table.items()}
    assert {th: s.by_threshold[th].mean_auc for th in table} == pytest.approx(maa, abs=1e-15)
    assert s.best_th == max(maa, key=maa.get) == 2.0
    assert s.best is s.by_threshold[2.0] and s.best.ransac_th == 2.0
    # errors 0.4, 0.9, 6 by hand: area 0.4/3/2 + 0.5/2 + (t - 0.9) * 2/3, divided by t = 1, 3, 5
    assert s.by_threshold[1.0].auc == (0.3833, 0.5722, 0.61)
    assert list(s.by_threshold) == [0.5, 1.0, 2.0]


def test_best_threshold_tie_goes_to_the_first_given():
    """The same errors in another pair order tie; glue-factory's max over its dict keeps the first."""
    a, b = [0.5, 4.0, np.inf], [4.0, np.inf, 0.5]
    assert summarize_thresholds({3.0: a, 1.0: b}).best_th == 3.0
    assert summarize_thresholds({1.0: b, 3.0: a}).best_th == 1.0
    # ties after rounding count too: the mAA compares the rounded AUCs
    c, d = [0.50001, 2.0], [0.50002, 2.0]
    assert summarize_errors(c).auc == summarize_errors(d).auc
    assert summarize_thresholds({2.0: d, 1.0: c}).best_th == 2.0


@pytest.mark.bad_input
def test_summary_bad_input():
    raises_naming(lambda: summarize_thresholds({1.0: [0.1, 0.2], 2.0: [0.1]}), "ransac_th 2", "1 pairs", "has 2",
                  "same pairs")
    assert raises_naming(lambda: summarize_thresholds({}), "no RANSAC threshold") == "summarize_thresholds: no RANSAC threshold given"
    raises_naming(lambda: summarize_thresholds({1.0: [np.nan]}), "corner errors at ransac_th 1: no pair with data")
    raises_naming(lambda: summarize_thresholds({"1": [0.1], 1.0: [0.2]}), "repeat")
    raises_naming(lambda: summarize_errors([0.1, -1.0]), "corner errors must be >= 0", "-1.0")
    raises_naming(lambda: summarize_errors([0.0, -2.5]), "got -2.5")  # the first negative one, not the zero
    # the errors are named as the caller says (the pose task's: pose errors of an estimator)
    raises_naming(lambda: summarize_thresholds({1.0: [np.nan]}, what="pose errors of estimator opencv"),
                  "pose errors of estimator opencv at ransac_th 1: no pair with data")


def test_docstring_examples_run():
    failed, attempted = doctest.testmod(M)
    assert failed == 0 and attempted >= 8
