"""Matching as a binary classifier against a brute force on the materialised N1 x N2 pair table
(float64 distances summed in index order, np.argmin / stable argsort neighbours) and against
scikit-learn's roc_curve / roc_auc_score on the materialised population."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from descbench.errors import DataError
from descbench.metrics.classifier import (
    MATCHERS, ClassifierParams, PairPopulation, classify_pair, confusion, positives, roc, threshold_histogram,
)
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
    got = threshold_histogram(q, c, keys)
    exp = ref_histogram(S, keys)
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
    with pytest.raises(ValueError):
        threshold_histogram(q, c, np.array([2.0, 1.0]))
    with pytest.raises(ValueError):
        threshold_histogram(q, c, np.array([1.0, np.nan]))
    with pytest.raises(DataError):
        threshold_histogram(q, c.astype(np.uint8), np.array([1.0]))


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
    P, N = int(lab.sum()), int((~lab).sum())
    for k, t in enumerate(ts):
        tp, fp, fn, tn = ref_confusion(score, lab, t)
        assert (got["tp"][k], got["fp"][k], got["fn"][k], got["tn"][k]) == (tp, fp, fn, tn), (matcher, t)
        assert got["tpr"][k] == tp / P and got["fpr"][k] == fp / N
        assert got["accuracy"][k] == (tp + tn) / lab.size
        if tp + fp:
            assert got["precision"][k] == tp / (tp + fp)
        else:
            assert math.isnan(got["precision"][k])
        assert abs(got["youden_j"][k] - (tp / P + tn / N - 1)) < 1e-15
    one = confusion(pop, matcher, float(ts[0]))  # scalar in, scalars out
    assert one["tp"] == got["tp"][0] and isinstance(one["tp"], int)


def on_curve(fp, tp, cfp, ctp):
    """Does the integer point (fp, tp) lie on the polyline through (cfp, ctp)?"""
    for k in range(len(cfp) - 1):
        a, b = (cfp[k], ctp[k]), (cfp[k + 1], ctp[k + 1])
        if a[0] <= fp <= b[0] and a[1] <= tp <= b[1]:
            if (fp - a[0]) * (b[1] - a[1]) == (tp - a[1]) * (b[0] - a[0]):
                return True
    return len(cfp) == 1 and (fp, tp) == (cfp[0], ctp[0])


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
    # best Youden J: first maximum over sklearn's points (increasing threshold)
    P, N = int(lab.sum()), int((~lab).sum())
    jn = stp * N - sfp * P
    k = int(np.argmax(jn))  # the first maximum
    assert cur.best_j == jn[k] / (P * N) and cur.best_j_threshold == sthr[k]
    # and equal to the brute-force maximum over all distinct thresholds
    ts = np.concatenate([[-np.inf], np.unique(score[np.isfinite(score)]), [np.inf]])
    js = [ref_confusion(score, lab, t) for t in ts]
    jv = [(tp * N - fp * P) for tp, fp, _, _ in js]
    kb = int(np.argmax(jv))
    assert cur.best_j == jv[kb] / (P * N) and cur.best_j_threshold == ts[kb]


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
    for r in rows:
        assert 0 <= r["auc"] <= 1 and r["n_pairs"] == 500
    # empty image k: no pairs at all, every rate undefined
    res = classify_pair(q_xy, q_desc, t_xy[:0], t_desc[:0], np.eye(3))
    for r in res.summary_rows():
        assert r["n_pairs"] == 0 and math.isnan(r["auc"]) and math.isnan(r["best_j"])
    # behind the camera: no positives
    indptr, idx = positives(np.array([[200.0, 10.0]]), np.array([[0.0, 0.0]]), np.array([[1, 0, 0], [0, 1, 0], [-0.01, 0, 1.0]]), 1e9)
    assert idx.shape == (0,)
    with pytest.raises(DataError):
        classify_pair(q_xy, q_desc, t_xy, t_desc.astype(np.float64), np.eye(3))
