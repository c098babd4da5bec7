"""Matching as a binary classifier against a brute force on the materialised N1 x N2 pair table
(float64 distances summed in index order, np.argmin / stable argsort neighbours) and against
scikit-learn's roc_curve / roc_auc_score on the materialised population."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from descbench.errors import DataError
from descbench.metrics import classifier as classifier_module
from descbench.metrics.classifier import (
    MATCHERS, ClassifierParams, PairPopulation, RocCurve, _key_ge, _key_le, begin_prepare, classify_pair,
    confusion, pass_needs, positives, prepare, roc, threshold_histogram,
)
from descbench.metrics.pairpass import screen_block
from descbench.metrics.retrieval import prepare_l2_screen

# ----------------------------------------------------------------------------- the reference


def ref_keys(q, c):
    """Full key table: float64 squared L2 summed in index order k = 0..D-1, or Hamming."""
    if q.dtype == np.uint8:
        return np.unpackbits(q[:, None, :] ^ c[None, :, :], axis=2).sum(axis=2).astype(np.float64)
    acc = np.zeros((q.shape[0], c.shape[0]))
    for k in range(q.shape[1]):
        acc += (q[:, None, k].astype(np.float64) - c[None, :, k].astype(np.float64)) ** 2
    return acc


def ref_labels(q_xy, t_xy, H, eps):
    lab = np.zeros((len(q_xy), len(t_xy)), bool)
    for i, (x, y) in enumerate(q_xy):
        v = H @ np.array([x, y, 1.0])
        if v[2] <= 0:
            continue
        px, py = v[0] / v[2], v[1] / v[2]
        for j, (tx, ty) in enumerate(t_xy):
            dx, dy = tx - px, ty - py
            lab[i, j] = dx * dx + dy * dy <= eps * eps
    return lab


def ref_scores(q, c, matcher):
    """Score table of a matcher: +inf for pairs never predicted Yes at a finite threshold."""
    S = ref_keys(q, c)
    D = S if q.dtype == np.uint8 else np.sqrt(S)
    n1, n2 = D.shape
    if matcher == "threshold":
        return D
    out = np.full((n1, n2), np.inf)
    if n1 == 0 or n2 == 0:
        return out
    if matcher == "mutual_nn":
        ab = np.argmin(S, axis=1)
        ba = np.argmin(S, axis=0)
        for i in range(n1):
            if ba[ab[i]] == i:
                out[i, ab[i]] = D[i, ab[i]]
        return out
    order = np.argsort(S, axis=1, kind="stable")
    for i in range(n1):
        j1 = order[i, 0]
        d1 = D[i, j1]
        if matcher == "nn":
            out[i, j1] = d1
        else:
            d2 = D[i, order[i, 1]] if n2 >= 2 else math.inf
            out[i, j1] = 1.0 if d1 == d2 else d1 / d2
    return out


def ref_confusion(score, lab, t):
    yes = score <= t
    tp = int((yes & lab).sum())
    fp = int((yes & ~lab).sum())
    fn = int(lab.sum()) - tp
    tn = lab.size - tp - fp - fn
    return tp, fp, fn, tn


def ratio_or_nan(a, b):
    """The module docstring's rule: a ratio with a zero denominator is NaN."""
    return a / b if b else math.nan


def same(a, b):
    """Equal, or both NaN."""
    return (math.isnan(a) and math.isnan(b)) if isinstance(b, float) and math.isnan(b) else a == b


def assert_confusion_matches(got, score, lab, ts):
    """Every key of :func:`confusion` at the thresholds ts (any shape) against the brute force."""
    P, N = int(lab.sum()), int((~lab).sum())
    assert (got["n_pos"], got["n_neg"], got["n_pairs"]) == (P, N, lab.size)
    assert got["threshold"].dtype == np.float64 and np.array_equal(got["threshold"], ts)
    for key in ("tp", "fp", "fn", "tn", "tpr", "fpr", "tnr", "accuracy", "precision", "youden_j"):
        assert got[key].shape == ts.shape, key
    for k in np.ndindex(ts.shape):
        tp, fp, fn, tn = ref_confusion(score, lab, ts[k])
        assert (got["tp"][k], got["fp"][k], got["fn"][k], got["tn"][k]) == (tp, fp, fn, tn), ts[k]
        exp = {
            "tpr": ratio_or_nan(tp, P), "fpr": ratio_or_nan(fp, N), "tnr": ratio_or_nan(tn, N),
            "accuracy": ratio_or_nan(tp + tn, lab.size), "precision": ratio_or_nan(tp, tp + fp),
            # J = (TP #N - FP #P) / (#P #N), from the integers
            "youden_j": ratio_or_nan(tp * N - fp * P, P * N),
        }
        for key, v in exp.items():
            assert same(float(got[key][k]), v), (key, ts[k])


def forbid_passes(monkeypatch, pop):
    """From here on a pass over the pair table (or a histogram of it) fails the test: what the
    matchers need must already be kept."""
    monkeypatch.setattr(pop, "run_pass", lambda *a, **k: pytest.fail("another pass over the pair table"))
    monkeypatch.setattr(classifier_module, "threshold_histogram", lambda *a, **k: pytest.fail("another histogram pass"))


def feed(pp, n1):
    """Consume every query row of a begun pass (one block, as run_pass does with a large chunk)."""
    if pp.needs_screen:
        pp.consume(screen_block(pp.qaug, pp.caug, 0, n1), 0)


def ref_mutual(q, c):
    """Mutual nearest-neighbour pairs (rows, cols) of the key table, ties to the lowest index."""
    S = ref_keys(q, c)
    if S.size == 0:
        return [], []
    ab, ba = np.argmin(S, axis=1), np.argmin(S, axis=0)
    rows = [i for i in range(S.shape[0]) if ba[ab[i]] == i]
    return rows, [int(ab[i]) for i in rows]


def sk_curve(score, lab):
    """sklearn's full ROC on the materialised population (+inf scores replaced by max + 1).

    Returns integer counts (fp, tp) and our-convention thresholds (score units, -inf first).
    """
    s = score.ravel().copy()
    fin = np.isfinite(s)
    big = (s[fin].max() + 1.0) if fin.any() else 0.0
    s[~fin] = big
    fpr, tpr, thr = roc_curve(lab.ravel(), -s, drop_intermediate=False)
    P, N = int(lab.sum()), int((~lab).sum())
    fp = np.rint(fpr * N).astype(np.int64)
    tp = np.rint(tpr * P).astype(np.int64)
    t = -thr
    t[0] = -np.inf
    if not fin.all():
        t[t == big] = np.inf
    return fp, tp, t, fpr, tpr, roc_auc_score(lab.ravel(), -s)


def make_scene(rng, n1, n2, kind, H):
    """Integer keypoints (with duplicates) and integer-valued descriptors: many exact ties."""
    t_xy = rng.integers(0, 12, (n2, 2)).astype(np.float64)
    q_xy = rng.integers(-1, 13, (n1, 2)).astype(np.float64)
    m = max(1, min(n1, n2) // 3)
    # correspondences: H^-1 of target keypoints, jittered by -2..2 px in x (|jitter| = 2 = epsilon)
    src = t_xy[np.arange(m) % n2] + np.column_stack([rng.integers(-2, 3, m), np.zeros(m)])
    h = np.column_stack([src, np.ones(m)]) @ np.linalg.inv(H).T
    q_xy[:m] = h[:, :2] / h[:, 2:]
    if n1 > m + 1:
        q_xy[m] = q_xy[0]  # duplicated keypoint
    if kind == "binary":
        q_desc = rng.integers(0, 256, (n1, 1)).astype(np.uint8)
        t_desc = rng.integers(0, 256, (n2, 1)).astype(np.uint8)
        t_desc[: n2 // 3] = t_desc[n2 // 3 : 2 * (n2 // 3)]  # duplicated descriptors
    else:
        q_desc = rng.integers(0, 3, (n1, 3)).astype(np.float32)
        t_desc = rng.integers(0, 3, (n2, 3)).astype(np.float32)
    return q_xy, q_desc, t_xy, t_desc


HS = {
    "translate": np.array([[1.0, 0, 1], [0, 1, 0], [0, 0, 1]]),
    "homography": np.array([[0.9, 0.1, 0.5], [-0.05, 1.1, 0.2], [0.002, -0.003, 1.0]]),
}


# ----------------------------------------------------------------------------- threshold_histogram


def ref_histogram(S, keys):
    v = S.ravel()
    lo = np.concatenate([[-np.inf], keys[:-1]])
    n_less = np.array([((v > a) & (v < b)).sum() for a, b in zip(lo, keys)], dtype=np.int64)
    n_equal = np.array([(v == k).sum() for k in keys], dtype=np.int64)
    return n_less, n_equal, int((v > keys[-1]).sum()) if len(keys) else v.size


def near_tie_descriptors(seed=5, dim=64, n1=6, n2=200):
    """Candidates 1 ulp apart in single coordinates: distances differ far below float32 BLAS error."""
    rng = np.random.default_rng(seed)
    base = (rng.standard_normal(dim) * 10).astype(np.float32)
    c = np.tile(base, (n2, 1))
    for j in range(n2):
        for _ in range(j % 3):
            k = rng.integers(dim)
            c[j, k] = np.nextafter(c[j, k], np.float32(np.inf) if rng.random() < 0.5 else np.float32(-np.inf))
    q = np.tile(base, (n1, 1)) + (rng.standard_normal((n1, dim)) * 1e-3).astype(np.float32)
    q[0] = c[3]  # distance exactly 0 to some candidates
    return q, c


def test_threshold_histogram_float_near_ties():
    q, c = near_tie_descriptors()
    S = ref_keys(q, c)
    vals = np.unique(S)
    rng = np.random.default_rng(1)
    pick = rng.choice(vals, 40, replace=False)
    keys = np.unique(np.concatenate([pick, np.nextafter(pick, np.inf), np.nextafter(pick, -np.inf), [-1.0, 0.0, 1e6]]))
    # sharpness: binning the float32 screen without the float64 re-check gets it wrong here
    q32, c32, qaug, caug, _ = prepare_l2_screen(q, c)
    naive = np.einsum("ij,ij->i", q32, q32, dtype=np.float64)[:, None] - 2.0 * (qaug @ caug.T).astype(np.float64)
    assert (ref_histogram(naive, keys)[1] != ref_histogram(S, keys)[1]).any()
    exp = ref_histogram(S, keys)
    for chunk in (64.0, 0.0005):  # one block, and one row per block
        got = threshold_histogram(q, c, keys, chunk_mb=chunk)
        assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1]) and got[2] == exp[2]
        assert got[0].sum() + got[1].sum() + got[2] == S.size


def test_threshold_histogram_float_random_and_integer():
    rng = np.random.default_rng(2)
    for q, c in [
        (rng.standard_normal((30, 16)).astype(np.float32), rng.standard_normal((45, 16)).astype(np.float32)),
        (rng.integers(0, 3, (40, 4)).astype(np.float32), rng.integers(0, 3, (35, 4)).astype(np.float32)),
        # |c|^2 > 1e36: the float32 screen could overflow, the float64 direct path is used
        ((rng.integers(0, 3, (20, 5)) * 1e18).astype(np.float32), (rng.integers(0, 3, (25, 5)) * 1e18).astype(np.float32)),
    ]:
        S = ref_keys(q, c)
        keys = np.unique(S)[::3]
        keys = np.unique(np.concatenate([keys, (keys[:-1] + keys[1:]) / 2]))
        got = threshold_histogram(q, c, keys, chunk_mb=0.002)
        exp = ref_histogram(S, keys)
        assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1]) and got[2] == exp[2]


def test_threshold_histogram_binary():
    rng = np.random.default_rng(3)
    q = rng.integers(0, 256, (50, 3)).astype(np.uint8)
    c = rng.integers(0, 256, (70, 3)).astype(np.uint8)
    c[:10] = q[:10]  # Hamming 0
    S = ref_keys(q, c)
    keys = np.array([-0.5, 0.0, 3.0, 5.5, 7.0, 8.0, 12.0, 12.5, 13.0, 24.0, 30.0])
    exp = ref_histogram(S, keys)
    for k in (keys, keys.reshape(-1, 1)):  # the keys of any shape are read flat
        got = threshold_histogram(q, c, k)
        assert np.array_equal(got[0], exp[0]) and np.array_equal(got[1], exp[1]) and got[2] == exp[2]


@pytest.mark.bad_input
def test_threshold_histogram_edges_and_errors():
    q = np.ones((3, 4), np.float32)
    c = np.zeros((5, 4), np.float32)
    nl, ne, na = threshold_histogram(q, c, np.zeros(0))
    assert nl.shape == (0,) and na == 15
    nl, ne, na = threshold_histogram(q, c[:0], np.array([1.0, 4.0]))
    assert nl.tolist() == [0, 0] and ne.tolist() == [0, 0] and na == 0
    nl, ne, na = threshold_histogram(q, c, np.array([4.0]))
    assert (nl.tolist(), ne.tolist(), na) == ([0], [15], 0)
    for keys, chunk, msg in [
        (np.array([2.0, 1.0]), 64.0, "threshold_histogram: thresholds_sq must be sorted and distinct"),
        (np.array([1.0, 1.0]), 64.0, "threshold_histogram: thresholds_sq must be sorted and distinct"),
        (np.array([1.0, np.nan]), 64.0, "threshold_histogram: thresholds_sq must be finite"),
        (np.array([1.0]), -1.0, "chunk_mb must be > 0, got -1.0"),
    ]:
        with pytest.raises(ValueError) as e:
            threshold_histogram(q, c, keys, chunk)
        assert str(e.value) == msg
    with pytest.raises(DataError):
        threshold_histogram(q, c.astype(np.uint8), np.array([1.0]))


@pytest.mark.bad_input
def test_descriptor_errors_name_the_image_and_the_problem():
    q = np.zeros((4, 3), np.float32)
    bad = q.copy()
    bad[2, 1], bad[3, 0] = np.nan, np.inf  # rows 2 and 3 are bad, row 2 is reported
    cases = [
        (q[0], q, "query descriptors must be a 2-D array [N, D], got shape (3,)"),
        (q, q[0], "candidate descriptors must be a 2-D array [N, D], got shape (3,)"),
        (q.astype(np.float64), q, "query descriptors have dtype float64; expected float32 (L2) or uint8 packed bits (Hamming)"),
        (q, q.astype(np.int32), "candidate descriptors have dtype int32; expected float32 (L2) or uint8 packed bits (Hamming)"),
        (q, q.astype(np.uint8), "descriptor mismatch: query descriptors are float32 x 3, candidate descriptors are uint8 x 3; "
                                "both images must use one descriptor"),
        (q, q[:, :2], "descriptor mismatch: query descriptors are float32 x 3, candidate descriptors are float32 x 2; "
                      "both images must use one descriptor"),
        (bad, q, "query descriptors contain NaN or inf (first bad row 2)"),
        (q, bad, "candidate descriptors contain NaN or inf (first bad row 2)"),
    ]
    for a, b, msg in cases:
        with pytest.raises(DataError) as e:
            threshold_histogram(a, b, np.zeros(0))
        assert str(e.value) == msg


# ----------------------------------------------------------------------------- keys and positives


def test_key_bounds_are_the_extreme_squared_distances_of_their_definition():
    """_key_le(t): the largest double s >= 0 with sqrt(s) <= t; _key_ge(t): the smallest with sqrt(s) >= t."""
    # fl(t * t) is off by more than the square root can absorb only on underflow (3e-162: t * t
    # rounds up, 1e-160: down, 1e-200: to 0) and overflow (2e154: inf, clipped to the largest
    # double); elsewhere a neighbour of fl(t * t) may share its root (0.0409..., 0.6369... < 1)
    t = np.concatenate([
        [0.0, 5e-324, 3e-162, 1e-160, 1e-200, 0.04097352393619469, 0.6369616873214543, 1.0, 2.0, 2e154],
        np.random.default_rng(4).uniform(0, 10, 200),
    ])
    with np.errstate(over="ignore"):  # 2e154 ** 2, and the step above the largest double
        le, ge = _key_le(t), _key_ge(t)
        up, down = np.nextafter(le, np.inf), np.nextafter(ge, -np.inf)
    assert (le >= 0).all() and (np.sqrt(le) <= t).all()
    assert (~np.isfinite(up) | (np.sqrt(up) > t)).all()
    assert (ge >= 0).all() and (np.sqrt(ge) >= t).all()
    assert ((down < 0) | (np.sqrt(np.maximum(down, 0.0)) < t)).all()
    # PairPopulation.key_le: K = -1 for t < 0 (no distance is that small), L2 and Hamming alike
    for desc in (np.zeros((1, 2), np.float32), np.zeros((1, 2), np.uint8)):
        pop = PairPopulation([[0.0, 0.0]], desc, [[0.0, 0.0]], desc, np.eye(3))
        assert pop.key_le(np.array([-0.5, -3.0])).tolist() == [-1.0, -1.0]


def test_positives_use_a_closed_ball_of_epsilon_px():
    # one projection at (10, 10); image-k keypoints at distance 0, 0.5, 2, 2.5 and 3 from it
    q_xy = np.array([[10.0, 10.0]])
    t_xy = np.array([[10.0, 10.0], [10.5, 10.0], [10.0, 12.0], [12.5, 10.0], [13.0, 10.0]])
    H = np.eye(3)
    assert positives(q_xy, t_xy, H)[1].tolist() == [0, 1, 2]  # default epsilon_px = 2 (inclusive)
    for eps in (0.0, 0.5, 2.5):  # epsilon 0: only the coincident keypoint
        exp = np.flatnonzero(ref_labels(q_xy, t_xy, H, eps)[0]).tolist()
        assert positives(q_xy, t_xy, H, eps)[1].tolist() == exp
        pop = PairPopulation(q_xy, np.zeros((1, 2), np.float32), t_xy, np.zeros((5, 2), np.float32), H,
                             ClassifierParams(epsilon_px=eps, chunk_mb=64.0))
        assert pop.n_pos == len(exp)
    with pytest.raises(ValueError) as e:
        positives(q_xy, t_xy, H, -1.0)
    assert str(e.value) == "epsilon_px must be >= 0, got -1.0"


@pytest.mark.bad_input
def test_population_keypoint_count_mismatch_names_both_images():
    d3, d5 = np.zeros((3, 2), np.float32), np.zeros((5, 2), np.float32)
    for nq, nt in ((4, 5), (3, 6)):  # either image alone
        with pytest.raises(DataError) as e:
            PairPopulation(np.zeros((nq, 2)), d3, np.zeros((nt, 2)), d5, np.eye(3))
        assert str(e.value) == (f"keypoint/descriptor count mismatch: image 1 has {nq} keypoints and 3 descriptors, "
                                f"image k has {nt} keypoints and 5 descriptors")


# ----------------------------------------------------------------------------- matchers


SCENES = [
    ("float", "translate", 0, 24, 30),
    ("float", "homography", 1, 30, 22),
    ("binary", "translate", 2, 28, 26),
    ("binary", "homography", 3, 20, 33),
    ("float", "translate", 4, 9, 1),  # one candidate: ratio without a second neighbour
    ("binary", "translate", 5, 7, 2),
]


@pytest.fixture(scope="module", params=SCENES, ids=lambda s: f"{s[0]}-{s[1]}-{s[3]}x{s[4]}")
def scene(request):
    kind, hname, seed, n1, n2 = request.param
    rng = np.random.default_rng(seed)
    H = HS[hname]
    q_xy, q_desc, t_xy, t_desc = make_scene(rng, n1, n2, kind, H)
    eps = 2.0
    pop = PairPopulation(q_xy, q_desc, t_xy, t_desc, H, ClassifierParams(epsilon_px=eps, chunk_mb=0.001))
    lab = ref_labels(q_xy, t_xy, H, eps)
    return pop, lab, {m: ref_scores(q_desc, t_desc, m) for m in MATCHERS}


def test_positives_equal_brute_force(scene):
    pop, lab, _ = scene
    dense = np.zeros_like(lab)
    dense[np.repeat(np.arange(pop.n1), np.diff(pop.pos_indptr)), pop.pos_indices] = True
    assert np.array_equal(dense, lab)
    assert lab.sum() > 0 and pop.n_pos == lab.sum()


@pytest.mark.parametrize("matcher", MATCHERS)
def test_confusion_equals_brute_force(scene, matcher):
    pop, lab, scores = scene
    score = scores[matcher]
    fin = np.unique(score[np.isfinite(score)])
    ts = np.concatenate([fin, (fin[:-1] + fin[1:]) / 2, np.nextafter(fin, -np.inf), [-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, np.inf]])
    got = confusion(pop, matcher, ts)
    assert_confusion_matches(got, score, lab, ts)
    ts2 = ts[: len(ts) // 2 * 2].reshape(2, -1)  # a 2-D threshold array keeps its shape
    assert_confusion_matches(confusion(pop, matcher, ts2), score, lab, ts2)
    one = confusion(pop, matcher, float(ts[0]))  # scalar in, scalars out
    assert one["tp"] == got["tp"][0] and isinstance(one["tp"], int)
    # an integer threshold is a float64 threshold too
    assert isinstance(confusion(pop, matcher, 1)["threshold"], float)


def on_curve(fp, tp, cfp, ctp):
    """Does the integer point (fp, tp) lie on the polyline through (cfp, ctp)?"""
    for k in range(len(cfp) - 1):
        a, b = (cfp[k], ctp[k]), (cfp[k + 1], ctp[k + 1])
        if a[0] <= fp <= b[0] and a[1] <= tp <= b[1]:
            if (fp - a[0]) * (b[1] - a[1]) == (tp - a[1]) * (b[0] - a[0]):
                return True
    return len(cfp) == 1 and (fp, tp) == (cfp[0], ctp[0])


def assert_summary_matches_sklearn(cur, score, lab):
    """RocCurve.summary() against sklearn's full curve on the materialised population: the best J
    point is the first maximum of TP #N - FP #P over sklearn's points (increasing threshold)."""
    sfp, stp, sthr, sfpr, stpr, sauc = sk_curve(score, lab)
    P, N = int(lab.sum()), int((~lab).sum())
    k = int(np.argmax(stp * N - sfp * P))
    s = cur.summary()
    assert s["matcher"] == cur.matcher and s["auc"] == cur.auc and abs(cur.auc - sauc) <= 1e-12
    assert (s["n_pairs"], s["n_pos"], s["n_neg"]) == (lab.size, P, N)
    # candidates: the pairs with a finite score; the threshold matcher's corner curve
    assert s["n_candidates"] == int(np.isfinite(score).sum()) and s["n_roc_points"] == len(cur.tp)
    assert s["corner_curve"] is (cur.matcher == "threshold") and cur.corner is s["corner_curve"]
    assert s["best_j"] == cur.best_j == (stp[k] * N - sfp[k] * P) / (P * N)
    assert s["best_j_threshold"] == cur.best_j_threshold == sthr[k]
    assert (s["best_j_tp"], s["best_j_fp"]) == (stp[k], sfp[k])
    assert (s["best_j_tpr"], s["best_j_fpr"]) == (stpr[k], sfpr[k])


@pytest.mark.parametrize("matcher", MATCHERS)
def test_roc_equals_sklearn(scene, matcher):
    pop, lab, scores = scene
    score = scores[matcher]
    cur = roc(pop, matcher)
    sfp, stp, sthr, sfpr, stpr, sauc = sk_curve(score, lab)
    assert abs(cur.auc - sauc) <= 1e-12
    # our points are sklearn points (same floats), and every sklearn point is on our curve
    sk_pts = set(zip(sfpr.tolist(), stpr.tolist()))
    assert all(p in sk_pts for p in zip(cur.fpr.tolist(), cur.tpr.tolist()))
    assert all(on_curve(a, b, cur.fp.tolist(), cur.tp.tolist()) for a, b in zip(sfp.tolist(), stp.tolist()))
    # every stored threshold reproduces its point on the brute-force table
    for t, tp, fp in zip(cur.thresholds, cur.tp, cur.fp):
        assert ref_confusion(score, lab, t)[:2] == (tp, fp)
    if matcher != "threshold":  # the full curve: identical to sklearn's, thresholds too
        assert np.array_equal(cur.tp, stp) and np.array_equal(cur.fp, sfp)
        assert np.array_equal(cur.thresholds, sthr)
    else:
        assert cur.corner and len(cur.tp) <= 2 * len(np.unique(score[lab])) + 2
        # after points carry sklearn's exact threshold
        pos = set(np.unique(score[lab]).tolist())
        sk = dict(zip(zip(sfp.tolist(), stp.tolist()), sthr.tolist()))
        for t, tp, fp in zip(cur.thresholds, cur.tp, cur.fp):
            if t in pos:
                assert sk[(fp, tp)] == t
        # the other thresholds: -inf, +inf, or just before a positive distance T_b: T_b - 1 for
        # Hamming, the largest double below T_b for L2 (module docstring)
        T = np.unique(score[lab])
        before = T - 1.0 if pop.binary else np.nextafter(T, -np.inf)
        assert set(cur.thresholds.tolist()) <= {-math.inf, math.inf} | pos | set(before.tolist())
    assert cur.tp.dtype == cur.fp.dtype == np.int64 and cur.thresholds.dtype == np.float64
    # best Youden J: first maximum over sklearn's points (increasing threshold)
    assert_summary_matches_sklearn(cur, score, lab)
    P, N = int(lab.sum()), int((~lab).sum())
    # and equal to the brute-force maximum over all distinct thresholds
    ts = np.concatenate([[-np.inf], np.unique(score[np.isfinite(score)]), [np.inf]])
    js = [ref_confusion(score, lab, t) for t in ts]
    jv = [(tp * N - fp * P) for tp, fp, _, _ in js]
    kb = int(np.argmax(jv))
    assert cur.best_j == jv[kb] / (P * N) and cur.best_j_threshold == ts[kb]


def small_population(q_xy, q_desc, t_xy, t_desc, eps=2.0):
    """A hand-made float32 population under the identity homography, with its brute-force labels
    and score tables."""
    q_xy, t_xy = np.asarray(q_xy, np.float64).reshape(-1, 2), np.asarray(t_xy, np.float64).reshape(-1, 2)
    q_desc, t_desc = np.asarray(q_desc, np.float32), np.asarray(t_desc, np.float32)
    pop = PairPopulation(q_xy, q_desc, t_xy, t_desc, np.eye(3), ClassifierParams(epsilon_px=eps, chunk_mb=64.0))
    return pop, ref_labels(q_xy, t_xy, np.eye(3), eps), {m: ref_scores(q_desc, t_desc, m) for m in MATCHERS}


DEGENERATE = {
    # every image-k keypoint is far from every projection
    "no_positive": ([[0, 0], [0, 10]], [[0, 1], [2, 2]], [[50, 50], [60, 60], [70, 70]], [[0, 0], [1, 1], [3, 0]]),
    # one image-k keypoint, within epsilon of both projections
    "no_negative": ([[0, 0], [0, 0.5]], [[0, 0], [1, 0]], [[0, 0]], [[0, 1]]),
    "empty_image_k": ([[0, 0], [0, 10]], [[0, 1], [2, 2]], np.zeros((0, 2)), np.zeros((0, 2))),
    "empty_image_1": (np.zeros((0, 2)), np.zeros((0, 2)), [[0, 0], [1, 1]], [[0, 0], [1, 1]]),
}


@pytest.mark.parametrize("case", DEGENERATE)
def test_confusion_without_positives_negatives_or_pairs(case):
    pop, lab, scores = small_population(*DEGENERATE[case])
    ts = np.array([[-np.inf, 0.0, 0.5], [1.0, 2.0, np.inf]])  # a 2-D threshold array keeps its shape
    for m in MATCHERS:
        assert_confusion_matches(confusion(pop, m, ts), scores[m], lab, ts)
        one = confusion(pop, m, 1.0)
        exp = confusion(pop, m, np.array([1.0]))
        assert all(same(one[k], v[0] if isinstance(v, np.ndarray) else v) for k, v in exp.items())


@pytest.mark.parametrize("case", DEGENERATE)
def test_roc_without_positives_or_negatives_is_undefined(case, monkeypatch):
    pop, lab, scores = small_population(*DEGENERATE[case])
    P, N = int(lab.sum()), int((~lab).sum())
    # with no pair there is nothing to pass over; what the matchers need is kept all the same
    res = prepare(pop, MATCHERS)
    assert (res is None) == (lab.size == 0)
    forbid_passes(monkeypatch, pop)
    rows, cols = pop.mutual_pairs()
    assert (rows.tolist(), cols.tolist()) == ref_mutual(pop.q_desc, pop.t_desc)
    for m in MATCHERS:
        cur = roc(pop, m)
        assert math.isnan(cur.auc) and math.isnan(cur.best_j) and math.isnan(cur.best_j_threshold)
        assert cur.best_j_index == -1  # no best point
        assert cur.tpr.dtype == cur.fpr.dtype == np.float64
        for tpr, fpr, tp, fp in zip(cur.tpr, cur.fpr, cur.tp, cur.fp):
            assert same(float(tpr), ratio_or_nan(int(tp), P)) and same(float(fpr), ratio_or_nan(int(fp), N))
        s = cur.summary()
        assert (s["n_pairs"], s["n_pos"], s["n_neg"], s["n_candidates"]) == (lab.size, P, N, int(np.isfinite(scores[m]).sum()))
        # summary's sentinels of "no best point"
        assert (s["best_j_tp"], s["best_j_fp"]) == (-1, -1) and math.isnan(s["best_j_tpr"]) and math.isnan(s["best_j_fpr"])


def test_best_j_at_the_origin_with_one_negative():
    """One positive pair (distance 3) and one negative (distance 1): every matcher finds the
    negative first, J <= 0 everywhere and the first maximum is (0, 0) at -inf."""
    q_xy, q_desc, t_xy, t_desc = [[0.0, 0.0]], [[0, 0]], [[0.0, 0.0], [50.0, 0.0]], [[3, 0], [1, 0]]
    _, lab, scores = small_population(q_xy, q_desc, t_xy, t_desc)
    assert lab.tolist() == [[True, False]]
    # one query row: classify_pair's pass must still be made
    res = classify_pair(q_xy, np.asarray(q_desc, np.float32), t_xy, np.asarray(t_desc, np.float32), np.eye(3))
    for m in MATCHERS:
        cur = res.curves[m]
        assert_summary_matches_sklearn(cur, scores[m], lab)
        assert cur.best_j_index == 0 and cur.best_j_threshold == -math.inf


def test_corner_curve_before_point_thresholds():
    """One query; positives at distance 1 and 3, a negative at distance 2 between them."""
    # corner points (module docstring): (0, 0) at -inf; T = 1: before (0, 0) (dropped, equal to
    # its predecessor), after (FP, TP) = (0, 1); T = 3: before (1, 1) at the largest double
    # below 3 (L2) or 3 - 1 = 2 (Hamming), after (1, 2) at 3; (1, 2) at the end is dropped too
    xy = ([[0.0, 0.0]], [[0.0, 0.0], [50.0, 0.0], [0.0, 1.0]])
    for dtype, q_desc, t_desc, before in [
        (np.float32, [[0, 0]], [[1, 0], [2, 0], [3, 0]], np.nextafter(3.0, -np.inf)),
        (np.uint8, [[0b0000]], [[0b0001], [0b0011], [0b0111]], 2.0),  # Hamming 1, 2, 3
    ]:
        pop = PairPopulation(xy[0], np.array(q_desc, dtype), xy[1], np.array(t_desc, dtype), np.eye(3))
        cur = roc(pop, "threshold")
        assert cur.thresholds.tolist() == [-np.inf, 1.0, before, 3.0]
        assert (cur.fp.tolist(), cur.tp.tolist()) == ([0, 0, 1, 1], [0, 1, 1, 2])


def test_roc_curve_counts_beyond_int64_are_exact():
    """AUC and best J from Python integers when 2 #P #N >= 2^62, where int64 products would wrap."""
    # #P = #N = 4u, points (FP, TP) = (0, 0) (u, 2u) (u, 3u) (2u, 4u) (4u, 4u)
    # trapezoid numerator sum dFP (TP_k + TP_k-1) = u 2u + 0 + u 7u + 2u 8u = 25 u^2, over 2 #P #N = 32 u^2
    # J numerator TP #N - FP #P = 4u (TP - FP) = 0, 4u^2, 8u^2, 8u^2, 0: first maximum at point 2, J = 8/16
    for u in (1, 2**38):  # 2 #P #N = 32 (int64 sums) and 2^81 (Python integers)
        tp = np.array([0, 2, 3, 4, 4], np.int64) * u
        fp = np.array([0, 1, 1, 2, 4], np.int64) * u
        cur = RocCurve("nn", np.array([-np.inf, 1.0, 2.0, 3.0, np.inf]), tp, fp, 4 * u, 4 * u, 3, False)
        assert cur.auc == 25 / 32 and cur.best_j == 0.5
        assert cur.best_j_index == 2 and cur.best_j_threshold == 2.0
        assert cur.tpr.tolist() == [0, 0.5, 0.75, 1, 1] and cur.fpr.tolist() == [0, 0.25, 0.25, 0.5, 1]


def float_scene(seed=11, n1=12, n2=10):
    """(q_xy, q_desc, t_xy, t_desc, H) of a small float scene, and its brute-force labels (epsilon 2)."""
    args = (*make_scene(np.random.default_rng(seed), n1, n2, "float", HS["translate"]), HS["translate"])
    return args, ref_labels(args[0], args[2], args[4], 2.0)


def test_pass_needs_asks_for_what_each_matcher_reads():
    # run_pass arguments: the histogram for threshold, both neighbours for nn / ratio, the nearest
    # and the columns for mutual NN (or when the mutual pairs are asked for)
    assert pass_needs(()) == {"hist": False, "rows": 0, "cols": False}
    assert pass_needs(("threshold",)) == {"hist": True, "rows": 0, "cols": False}
    assert pass_needs(("nn",)) == {"hist": False, "rows": 2, "cols": False}
    assert pass_needs(("ratio",)) == {"hist": False, "rows": 2, "cols": False}
    assert pass_needs(("mutual_nn",)) == {"hist": False, "rows": 1, "cols": True}
    assert pass_needs(("threshold",), mutual=True) == {"hist": True, "rows": 1, "cols": True}
    assert pass_needs(MATCHERS) == {"hist": True, "rows": 2, "cols": True}


@pytest.mark.parametrize("matchers, mutual", [
    (("threshold",), False), (("nn",), False), (("ratio",), True), (("mutual_nn",), False), (MATCHERS, False),
], ids=["threshold", "nn", "ratio-and-mutual", "mutual_nn", "all"])
def test_prepare_makes_the_one_pass_the_matchers_need(matchers, mutual, monkeypatch):
    args, lab = float_scene()
    exp_mutual = ref_mutual(args[1], args[3])

    def check(pop):
        with monkeypatch.context() as mp:
            forbid_passes(mp, pop)
            for m in matchers:
                assert_summary_matches_sklearn(roc(pop, m), ref_scores(args[1], args[3], m), lab)
            if mutual:
                rows, cols = pop.mutual_pairs()
                assert (rows.tolist(), cols.tolist()) == exp_mutual

    def only_what_was_needed(res):
        need = pass_needs(matchers, mutual)
        assert (res.n_less is not None, res.idx1 is not None, res.col_idx is not None) == (
            need["hist"], need["rows"] > 0, need["cols"])

    kw = {"mutual": True} if mutual else {}  # mutual NN columns only when asked for
    pop = PairPopulation(*args)
    res = prepare(pop, matchers, chunk_mb=1e-6, **kw)  # one query row per product
    assert res.n_products == pop.n1
    only_what_was_needed(res)
    check(pop)
    pop = PairPopulation(*args)  # the same in steps
    pp = begin_prepare(pop, matchers, **kw)
    feed(pp, pop.n1)
    only_what_was_needed(pop.end_pass(pp))
    check(pop)
    # nothing needed: no pass
    assert prepare(pop, ()) is None and begin_prepare(pop, ()) is None


def test_run_pass_and_begin_pass_defaults_keep_everything(monkeypatch):
    args, lab = float_scene()
    S = ref_keys(args[1], args[3])
    order = np.argsort(S, axis=1, kind="stable")
    for steps in (False, True):
        pop = PairPopulation(*args)
        if steps:
            pp = pop.begin_pass()
            feed(pp, pop.n1)
            res = pop.end_pass(pp)
        else:
            res = pop.run_pass(chunk_mb=1e-6)  # one query row per product
            assert res.n_products == pop.n1
        # the histogram over the threshold ROC keys, both neighbours, the nearest query per column
        nl, ne, _ = ref_histogram(S, pop.threshold_keys()[4])
        assert np.array_equal(res.n_less, nl) and np.array_equal(res.n_equal, ne)
        assert np.array_equal(res.idx1, order[:, 0]) and np.array_equal(res.idx2, order[:, 1])
        assert np.array_equal(res.col_idx, np.argmin(S, axis=0))
        with monkeypatch.context() as mp:
            forbid_passes(mp, pop)
            for m in MATCHERS:
                assert_summary_matches_sklearn(roc(pop, m), ref_scores(args[1], args[3], m), lab)
    # a pass returns only what it was asked for (PassResult: None for the rest)
    pop = PairPopulation(*args)
    res = pop.run_pass(hist=False, rows=2, cols=False)
    assert res.n_less is None and res.col_idx is None and np.array_equal(res.idx1, order[:, 0])
    with pytest.raises(ValueError) as e:
        pop.run_pass(chunk_mb=0)
    assert str(e.value) == "chunk_mb must be > 0, got 0"


def test_mutual_pairs_whatever_was_computed_before():
    args, _ = float_scene()
    exp = ref_mutual(args[1], args[3])
    for before in ("nothing", "nn", "columns"):
        pop = PairPopulation(*args)
        if before == "nn":
            pop.candidates("nn")
        elif before == "columns":
            pop.run_pass(hist=False, rows=0, cols=True)
        rows, cols = pop.mutual_pairs()
        assert (rows.tolist(), cols.tolist()) == exp, before


def test_pair_keys_count_le_and_candidates_equal_the_key_table():
    args, _ = float_scene()
    pop = PairPopulation(*args)
    S = ref_keys(args[1], args[3])
    for i, j in [(0, 0), (3, 7), (11, 9)]:  # one pair at a time
        assert pop.pair_keys(np.array([i]), np.array([j])).tolist() == [S[i, j]]
    assert pop.pair_keys(np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)
    K = np.array([[0.0, 1.0], [2.5, S.max()]])  # keys of any shape
    got = pop.count_le(K)
    assert got.shape == K.shape and all(got[k] == (S <= K[k]).sum() for k in np.ndindex(K.shape))
    rows, cols, score, label = pop.candidates("nn")
    assert rows.dtype == cols.dtype == np.int64
    assert np.array_equal(cols, np.argsort(S, axis=1, kind="stable")[rows, 0])
    with pytest.raises(ValueError) as e:
        pop.candidates("threshold")
    assert str(e.value) == "candidates: matcher must be nn, ratio or mutual_nn, got 'threshold'"


def test_ratio_of_two_zero_distances_is_one_without_warning():
    """d1 == d2 == 0 (a query equal to two candidates) is ratio 1 (module docstring), not 0 / 0."""
    pop, lab, scores = small_population([[0, 0]], [[1, 2]], [[0, 0], [9, 9], [20, 20]], [[1, 2], [1, 2], [5, 5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, cols, score, label = pop.candidates("ratio")
    fin = np.isfinite(scores["ratio"])
    assert (rows.tolist(), cols.tolist()) == tuple(v.tolist() for v in np.nonzero(fin))
    assert score.tolist() == scores["ratio"][fin].tolist() == [1.0] and label.tolist() == lab[fin].tolist()


@pytest.mark.bad_input
def test_unknown_matcher_and_nan_threshold_errors():
    pop, _, _ = small_population(*DEGENERATE["no_positive"])
    msg = "unknown matcher 'bogus'; expected one of ('threshold', 'nn', 'ratio', 'mutual_nn')"
    for call in (lambda: roc(pop, "bogus"), lambda: confusion(pop, "bogus", 1.0),
                 lambda: classify_pair(*DEGENERATE["no_positive"], np.eye(3), matchers=("nn", "bogus"))):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
    with pytest.raises(ValueError) as e:
        confusion(pop, "nn", [1.0, np.nan])
    assert str(e.value) == "confusion: threshold is NaN"


def test_sqrt_merges_distinct_keys():
    """Distinct squared distances with one float64 square root form one score group (d <= t)."""
    # keys ~ 1.06 * 2^52 are exact integers; consecutive integers there can share a square root
    dim, Y, n = 19, np.float32(2**24 - 1), 6
    c = np.zeros((n, dim), np.float32)
    c[:, 2:] = Y
    c[:, 0] = np.arange(n)
    c[:, 1] = np.arange(n) % 2
    q = np.zeros((n, dim), np.float32)
    q[:, 0] = np.arange(n)[::-1]
    q[:, 1] = (np.arange(n) // 2) % 2
    S = ref_keys(q, c)
    D = np.sqrt(S)
    diag = np.eye(n, dtype=bool)  # the positives below
    # sharp: a positive's distance group holds a negative with a different squared distance
    assert any(((D == D[i, i]) & (S != S[i, i]) & ~diag).any() for i in range(n))
    xy = np.column_stack([np.arange(n) * 10.0, np.zeros(n)])
    pop = PairPopulation(xy, q, xy, c, np.eye(3), ClassifierParams())
    lab = ref_labels(xy, xy, np.eye(3), 2.0)
    cur = roc(pop, "threshold")
    sfp, stp, sthr, sfpr, stpr, sauc = sk_curve(D, lab)
    sk_pts = set(zip(sfpr.tolist(), stpr.tolist()))
    assert all(p in sk_pts for p in zip(cur.fpr.tolist(), cur.tpr.tolist()))
    assert all(on_curve(a, b, cur.fp.tolist(), cur.tp.tolist()) for a, b in zip(sfp.tolist(), stp.tolist()))
    assert abs(cur.auc - sauc) <= 1e-12
    for t in np.unique(D):
        got = confusion(pop, "threshold", t)
        assert (got["tp"], got["fp"]) == ref_confusion(D, lab, t)[:2]


def test_classify_pair_tables_and_empty_cases():
    rng = np.random.default_rng(9)
    q_xy, q_desc, t_xy, t_desc = make_scene(rng, 20, 25, "float", HS["translate"])
    res = classify_pair(q_xy, q_desc, t_xy, t_desc, HS["translate"], ClassifierParams())
    rows = res.summary_rows()
    assert [r["matcher"] for r in rows] == list(MATCHERS)
    pts = res.roc_rows()
    assert len({len(v) for v in pts.values()}) == 1 and set(pts["matcher"]) == set(MATCHERS)
    assert pts["matcher"].dtype == object and pts["point"].dtype == np.int32
    lab = ref_labels(q_xy, t_xy, HS["translate"], 2.0)
    for r in rows:
        assert (r["n1"], r["n2"], r["n_pairs"]) == (20, 25, 500)
        # the curve from the one prepared pass (the kept histogram) against sklearn
        assert abs(r["auc"] - sk_curve(ref_scores(q_desc, t_desc, r["matcher"]), lab)[5]) <= 1e-12
        assert pts["point"][pts["matcher"] == r["matcher"]].tolist() == list(range(r["n_roc_points"]))
    # no matcher: no rows, no points
    res = classify_pair(q_xy, q_desc, t_xy, t_desc, HS["translate"], matchers=())
    assert res.summary_rows() == [] and all(len(v) == 0 for v in res.roc_rows().values())
    # empty image k: no pairs at all, every rate undefined
    res = classify_pair(q_xy, q_desc, t_xy[:0], t_desc[:0], np.eye(3))
    for r in res.summary_rows():
        assert r["n_pairs"] == 0 and math.isnan(r["auc"]) and math.isnan(r["best_j"])
    # behind the camera: no positives
    indptr, idx = positives(np.array([[200.0, 10.0]]), np.array([[0.0, 0.0]]), np.array([[1, 0, 0], [0, 1, 0], [-0.01, 0, 1.0]]), 1e9)
    assert idx.shape == (0,)
    with pytest.raises(DataError):
        classify_pair(q_xy, q_desc, t_xy, t_desc.astype(np.float64), np.eye(3))
