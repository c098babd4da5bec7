"""The fused pair pass (row top-2, column NN, threshold histogram in one sweep) against a float64
brute force, evaluate_pair against match_pair + classify_pair, and the one-BLAS-product-per-row-
block guarantee of the matching path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.descbench.metrics.test_classifier import HS, make_scene, near_tie_descriptors, ref_histogram
from tests.descbench.metrics.test_matching import H_TRUE, H1, HK, W1, WK, random_scene
from tests.descbench.metrics.test_nn import ref_matrix, ref_nearest_two

from descbench.metrics import pairpass
from descbench.metrics.classifier import MATCHERS, ClassifierParams, classify_pair, threshold_histogram
from descbench.metrics.kernels import sqdist64
from descbench.metrics.matching import MatchingParams, evaluate_pair, match_pair
from descbench.metrics.nn import mutual_nearest, nearest_two
from descbench.metrics.retrieval import prepare_l2_screen

# ----------------------------------------------------------------------------- reference


def ref_columns(q, c):
    """Nearest query of every candidate: first minimum of each column (lowest index on ties)."""
    S = ref_matrix(q, c)
    if S.shape[0] == 0:
        return np.full(S.shape[1], -1, np.int64), np.full(S.shape[1], np.inf)
    i = np.argmin(S, axis=0)
    return i.astype(np.int64), S[i, np.arange(S.shape[1])]


def some_keys(S, rng, n=40):
    """Histogram keys: actual pair keys (exact hits), their float64 neighbours, and gaps."""
    vals = np.unique(S)
    if vals.size == 0:
        return np.array([0.0, 1.0])
    pick = rng.choice(vals, min(n, vals.size), replace=False)
    return np.unique(np.concatenate([pick, np.nextafter(pick, np.inf), np.nextafter(pick, -np.inf), [-1.0, 0.0]]))


def check_pass(q, c, keys, chunk_mb=64.0):
    """pair_pass == brute force for every output."""
    res = pairpass.pair_pass(np.ascontiguousarray(q), np.ascontiguousarray(c), keys, chunk_mb, rows=2, cols=True)
    i1, d1, i2, d2 = ref_nearest_two(q, c)
    k1, k2 = (d1, d2) if q.dtype == np.uint8 else (d1**2, d2**2)
    S = ref_matrix(q, c)
    np.testing.assert_array_equal(res.idx1, i1)
    np.testing.assert_array_equal(res.idx2, i2)
    # the keys themselves: exact float64 sums (compare with the brute force's entries, not sqrt^2)
    if S.shape[1]:
        np.testing.assert_array_equal(res.key1[i1 >= 0], S[np.flatnonzero(i1 >= 0), i1[i1 >= 0]])
        np.testing.assert_array_equal(res.key2[i2 >= 0], S[np.flatnonzero(i2 >= 0), i2[i2 >= 0]])
    assert np.isinf(res.key1[i1 < 0]).all() and np.isinf(res.key2[i2 < 0]).all()
    ci, ck = ref_columns(q, c)
    np.testing.assert_array_equal(res.col_idx, ci)
    np.testing.assert_array_equal(res.col_key, ck)
    nl, ne, na = ref_histogram(S, keys)
    np.testing.assert_array_equal(res.n_less, nl)
    np.testing.assert_array_equal(res.n_equal, ne)
    assert res.n_above == na
    return res


# ----------------------------------------------------------------------------- fused pass == brute force


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("chunk_mb", [64.0, 1e-4, 3e-3])  # one block; one row per block; a few rows per block
def test_pass_integer_ties_and_duplicates(seed, chunk_mb):
    """Integer descriptors in 0..2: the exact-screen certificate holds, and ties are everywhere."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 3, (70, 5)).astype(np.float32)
    c = rng.integers(0, 3, (55, 5)).astype(np.float32)
    c[10:14] = c[3]  # duplicated candidates
    q[:4] = c[3]  # queries at distance 0 from several candidates
    q[20:23] = q[5]  # duplicated queries: a column's nearest query is tied
    S = ref_matrix(q, c)
    assert (np.sort(S, axis=1)[:, 0] == np.sort(S, axis=1)[:, 1]).mean() > 0.3  # many ties really
    qn2 = np.einsum("ij,ij->i", q, q, dtype=np.float64)
    cn2 = np.einsum("ij,ij->i", c, c, dtype=np.float64)
    assert pairpass.l2_setup(q, c, qn2, cn2)[4]  # certified exact
    check_pass(q, c, some_keys(S, rng), chunk_mb)


@pytest.mark.parametrize("real", [False, True])
def test_pass_reads_its_columns_of_a_wider_screen_in_place(real):
    """A scene's screen covers more candidates than one pair's: PairPass.consume reads columns
    col0 .. col0 + N2 - 1 of it and nothing else (the other columns hold values that would be
    every row's and column's nearest if they were read), in any row blocks; the rows must be query
    rows and the screen must hold the pair's columns."""
    rng = np.random.default_rng(5)
    if real:
        q = rng.standard_normal((45, 12)).astype(np.float32)
        c = rng.standard_normal((38, 12)).astype(np.float32)
    else:
        q = rng.integers(0, 3, (45, 12)).astype(np.float32)
        c = rng.integers(0, 3, (38, 12)).astype(np.float32)
    keys = some_keys(ref_matrix(q, c), rng)
    ref = check_pass(q, c, keys)
    pp = pairpass.PairPass(q, c, keys, 2, True)
    big = np.float32(np.finfo(np.float32).max)
    for r0, r1 in ((0, 7), (7, 8), (8, 45)):
        wide = np.full((r1 - r0, 3 + 38 + 4), big, np.float32)
        wide[:, 3:41] = pairpass.screen_block(pp.qaug, pp.caug, r0, r1)
        pp.consume(wide, r0, 3)
    res = pp.finish()
    for name in ("idx1", "key1", "idx2", "key2", "col_idx", "col_key", "n_less", "n_equal", "n_above"):
        np.testing.assert_array_equal(getattr(res, name), getattr(ref, name))
    screen = pairpass.screen_block(pp.qaug, pp.caug, 0, 45)
    for bad, r0, col0, match in ((screen, 0, 1, r"does not hold 45 rows and columns 1\.\.38"),
                                 (np.ascontiguousarray(screen[:, :-1]), 0, 0, "columns 0..37"),
                                 (screen[:10], 36, 0, r"screen rows 36\.\.45 are not query rows \(N1 = 45\)"),
                                 (screen[:10], -1, 0, "are not query rows"),
                                 (screen.astype(np.float64), 0, 0, "C-contiguous float32")):
        with pytest.raises(ValueError, match=match):
            pairpass.PairPass(q, c, keys, 2, True).consume(bad, r0, col0)


@pytest.mark.parametrize("chunk_mb", [64.0, 1e-4])
def test_pass_real_valued_not_certified(chunk_mb):
    rng = np.random.default_rng(4)
    q = rng.standard_normal((60, 24)).astype(np.float32)
    c = rng.standard_normal((80, 24)).astype(np.float32)
    c[7] = c[2]
    q[0] = c[2]
    q[1] = c[2] + np.float32(1e-3)
    q[30:33] = q[12]
    qn2 = np.einsum("ij,ij->i", q, q, dtype=np.float64)
    cn2 = np.einsum("ij,ij->i", c, c, dtype=np.float64)
    assert not pairpass.l2_setup(q, c, qn2, cn2)[4]
    check_pass(q, c, some_keys(ref_matrix(q, c), rng), chunk_mb)


def test_pass_near_ties_float32_misorders():
    """A large common offset: the float32 screen misorders rows AND columns; the pass must not."""
    rng = np.random.default_rng(7)
    base = np.zeros(8)
    base[0] = 1000.0
    c = (base + rng.normal(scale=1e-3, size=(120, 8))).astype(np.float32)
    q = (base + rng.normal(scale=1e-3, size=(90, 8))).astype(np.float32)
    q[5:8] = q[4]  # tied queries for the column minimum
    _, _, qaug, caug, _ = prepare_l2_screen(q, c)
    g = qaug @ caug.T
    x = np.einsum("ij,ij->i", q, q, dtype=np.float64)[:, None] - 2.0 * g.astype(np.float64)
    S = ref_matrix(q, c)
    assert (np.argmin(x, axis=0) != np.argmin(S, axis=0)).sum() > 10  # naive columns are wrong
    assert (np.argmax(g, axis=1) != np.argmin(S, axis=1)).sum() > 10  # naive rows are wrong
    for chunk in (64.0, 2e-3):
        check_pass(q, c, some_keys(S, rng), chunk)


def test_pass_histogram_near_ties():
    q, c = near_tie_descriptors()
    S = ref_matrix(q, c)
    rng = np.random.default_rng(1)
    for chunk in (64.0, 5e-4):
        check_pass(q, c, some_keys(S, rng, 60), chunk)


@pytest.mark.parametrize("n1,n2", [(0, 5), (6, 0), (0, 0), (9, 1), (1, 9), (1, 1)])
@pytest.mark.parametrize("kind", ["float", "binary"])
def test_pass_tiny_shapes(n1, n2, kind):
    rng = np.random.default_rng(n1 * 10 + n2)
    if kind == "float":
        q = rng.integers(0, 3, (n1, 4)).astype(np.float32)
        c = rng.integers(0, 3, (n2, 4)).astype(np.float32)
    else:
        q = rng.integers(0, 256, (n1, 2), dtype=np.uint8)
        c = rng.integers(0, 256, (n2, 2), dtype=np.uint8)
    keys = np.array([0.0, 1.0, 2.0, 3.0, 4.5])
    check_pass(q, c, keys, 1e-4)
    res = pairpass.pair_pass(q, c, np.zeros(0), rows=2, cols=True)
    assert res.n_less.shape == (0,) and res.n_above == n1 * n2


@pytest.mark.parametrize("nbytes", [1, 3, 32])
def test_pass_binary(nbytes):
    rng = np.random.default_rng(nbytes)
    q = rng.integers(0, 256, (50, nbytes), dtype=np.uint8)
    c = rng.integers(0, 256, (65, nbytes), dtype=np.uint8)
    c[5] = c[2]
    q[0] = c[2]
    q[10:12] = q[9]
    check_pass(q, c, np.array([-0.5, 0.0, 3.0, 5.5, 7.0, 8.0, 12.0, 16.0, 100.0]))


def test_pass_huge_values_direct_path():
    rng = np.random.default_rng(8)
    q = (rng.integers(0, 3, (25, 5)) * 1e19).astype(np.float32)
    c = (rng.integers(0, 3, (30, 5)) * 1e19).astype(np.float32)
    check_pass(q, c, some_keys(ref_matrix(q, c), rng))


def test_exact_screen_certificate_is_sharp():
    """Certified inputs give a bit-exact float32 screen; the bound is what makes it so."""
    rng = np.random.default_rng(3)
    q = np.floor(rng.uniform(0, 81, (50, 128))).astype(np.float32)  # norm ~520, like SIFT's 512
    c = np.floor(rng.uniform(0, 81, (60, 128))).astype(np.float32)
    qn2 = np.einsum("ij,ij->i", q, q, dtype=np.float64)
    cn2 = np.einsum("ij,ij->i", c, c, dtype=np.float64)
    qaug, caug, rtol, wr, exact = pairpass.l2_setup(q, c, qn2, cn2)
    assert exact and not rtol.any()
    g = (qaug @ caug.T).astype(np.float64)
    np.testing.assert_array_equal(g, q.astype(np.float64) @ c.T.astype(np.float64) - 0.5 * cn2[None, :])
    # not certified: a fraction, or values so large that partial sums exceed 2^22
    assert not pairpass.l2_setup(q + np.float32(0.5), c, np.einsum("ij,ij->i", q + 0.5, q + 0.5), cn2)[4]
    big_q, big_c = q * np.float32(37) + 1, c * np.float32(41) + 3
    bq2 = np.einsum("ij,ij->i", big_q, big_q, dtype=np.float64)
    bc2 = np.einsum("ij,ij->i", big_c, big_c, dtype=np.float64)
    qaug, caug, _, _, exact = pairpass.l2_setup(big_q, big_c, bq2, bc2)
    assert not exact
    exact_g = big_q.astype(np.float64) @ big_c.T.astype(np.float64) - 0.5 * bc2[None, :]
    assert ((qaug @ caug.T).astype(np.float64) != exact_g).any()  # beyond the bound, float32 does round


def test_key_table_and_dirty_slots_equal_searchsorted():
    """The bucket table never claims 'no key near x' wrongly, and the dirty path bins exactly."""
    rng = np.random.default_rng(11)
    for keys, margin in [
        (np.array([3.0]), 0.0),
        (np.array([3.0]), 0.5),
        (np.unique(np.concatenate([rng.normal(0, 1e-9, 50), [1e12]])), 1e-10),  # clustered + far outlier
        (np.unique(rng.integers(0, 40, 30).astype(np.float64)), 0.3),
        (np.unique(rng.standard_normal(200)), 1e-3),
        (np.unique(rng.integers(0, 10**6, 500).astype(np.float64)), 6.0),
    ]:
        tab, lohi, e0, scale, nbk = pairpass.key_table(keys, margin)
        xs = np.concatenate([keys, np.nextafter(keys, np.inf), np.nextafter(keys, -np.inf), keys + margin, keys - margin,
                             rng.uniform(keys[0] - 3, keys[-1] + 3, 300), [-1e300, 1e300, 0.0, e0, e0 + nbk / scale if scale else e0]])
        for x in xs:
            with np.errstate(over="ignore"):
                k = int(min(max((x - e0) * scale + 1.0, 0.0), nbk + 1.5))
            lo, hi = lohi[k]
            w = margin * rng.uniform(0, 1)
            assert lo <= np.searchsorted(keys, x - w, "left") and np.searchsorted(keys, x + w, "right") <= hi, (x, k)
            if tab[k] >= 0:
                assert lo == hi and tab[k] == 2 * lo
            # the dirty path, with an exact key s in [x - w, x + w]: s = a^2 for q = [a], c = [0]
            a = np.float32(np.sqrt(max(x, 0.0))) if abs(x) < 1e30 else np.float32(0.0)
            s = sqdist64(np.array([a]), np.array([np.float32(0)]))
            if abs(s - x) <= w and s > -1:
                slot = pairpass._slot_dirty(x, w, lo, hi, keys, np.array([a]), np.array([np.float32(0)]), False)
                b = np.searchsorted(keys, s)
                assert slot == 2 * b + int(b < len(keys) and keys[b] == s)


# ----------------------------------------------------------------------------- evaluate_pair == old entry points


def assert_same_result(a, b):
    assert a.n1 == b.n1 and a.n2 == b.n2 and list(a.curves) == list(b.curves)
    for m in a.curves:
        x, y = a.curves[m], b.curves[m]
        for f in ("thresholds", "tp", "fp", "tpr", "fpr"):
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f), err_msg=f"{m}.{f}")
        for f in ("auc", "best_j", "best_j_threshold"):
            u, v = getattr(x, f), getattr(y, f)
            assert u == v or (math.isnan(u) and math.isnan(v)), (m, f)
        assert (x.best_j_index, x.n_candidates, x.corner) == (y.best_j_index, y.n_candidates, y.corner)


def assert_same_stats(a, b):
    assert list(a) == list(b)
    for k in a:
        assert type(a[k]) is type(b[k]) and (a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k]))), k


@pytest.mark.parametrize("seed,binary", [(0, False), (1, True), (2, False)])
@pytest.mark.parametrize("matchers", [MATCHERS, ("threshold",), ("nn", "mutual_nn"), ("ratio",), ()])
def test_evaluate_pair_equals_match_and_classify(seed, binary, matchers):
    scene = random_scene(seed, n1=90, n2=110, binary=binary)
    mp = MatchingParams(chunk_mb=0.01)
    cp = ClassifierParams(epsilon_px=3.0, chunk_mb=0.02)
    stats, res = evaluate_pair(*scene, H_TRUE, (W1, H1), (WK, HK), mp, cp, matchers)
    assert_same_stats(stats, match_pair(*scene, H_TRUE, (W1, H1), (WK, HK), mp))
    assert_same_result(res, classify_pair(*scene, H_TRUE, cp, matchers))
    assert stats["n_matches"] > 10


@pytest.mark.parametrize("kind", ["float", "binary"])
@pytest.mark.parametrize("n1,n2", [(24, 30), (9, 1), (0, 7), (7, 0)])
def test_evaluate_pair_on_tied_scenes(kind, n1, n2):
    rng = np.random.default_rng(n1 + n2)
    H = HS["homography"]
    q_xy, q_desc, t_xy, t_desc = make_scene(rng, max(n1, 1), max(n2, 1), kind, H)
    q_xy, q_desc, t_xy, t_desc = q_xy[:n1], q_desc[:n1], t_xy[:n2], t_desc[:n2]
    cp = ClassifierParams(chunk_mb=0.0005)
    stats, res = evaluate_pair(q_xy, q_desc, t_xy, t_desc, H, (20, 20), (20, 20), MatchingParams(), cp)
    assert_same_stats(stats, match_pair(q_xy, q_desc, t_xy, t_desc, H, (20, 20), (20, 20)))
    assert_same_result(res, classify_pair(q_xy, q_desc, t_xy, t_desc, H, cp))


@pytest.mark.bad_input
def test_evaluate_pair_validation():
    scene = random_scene(13, n1=20, n2=20)
    with pytest.raises(ValueError, match="unknown matcher"):
        evaluate_pair(*scene, H_TRUE, (W1, H1), (WK, HK), MatchingParams(), ClassifierParams(), ("bogus",))
    from descbench.errors import DataError

    with pytest.raises(DataError, match="mismatch"):
        evaluate_pair(scene[0], scene[1], scene[2], scene[3].astype(np.uint8), H_TRUE, (W1, H1), (WK, HK))
    with pytest.raises(DataError, match="singular"):
        evaluate_pair(*scene, np.zeros((3, 3)), (W1, H1), (WK, HK))


# ----------------------------------------------------------------------------- no pass computed twice


class ProductCounter:
    """Records the row range of every screen product (pairpass.screen_block is the only maker)."""

    def __init__(self, monkeypatch):
        self.calls = []
        orig = pairpass.screen_block

        def counted(qaug, caug, r0, r1):
            self.calls.append((qaug.shape[0], caug.shape[0], r0, r1))
            return orig(qaug, caug, r0, r1)

        monkeypatch.setattr(pairpass, "screen_block", counted)

    def assert_one_product_per_block(self, n1, n2, chunk_mb):
        step = pairpass.block_rows(n2, chunk_mb)
        expected = [(n1, n2, r0, min(n1, r0 + step)) for r0 in range(0, n1, step)]
        assert self.calls == expected  # each row block once, image 1 against image k only
        self.calls.clear()


def test_matching_path_makes_one_product_per_row_block(monkeypatch):
    rng = np.random.default_rng(0)
    q_xy, q_desc, t_xy, t_desc = random_scene(3, n1=80, n2=70)
    q_desc = (q_desc + rng.uniform(0, 0.5, q_desc.shape)).astype(np.float32)  # not certified: bands matter
    counter = ProductCounter(monkeypatch)
    chunk = 0.004  # 14 rows per block: 6 blocks
    assert 80 / pairpass.block_rows(70, chunk) > 5
    stats, res = evaluate_pair(q_xy, q_desc, t_xy, t_desc, H_TRUE, (W1, H1), (WK, HK), MatchingParams(chunk_mb=chunk),
                               ClassifierParams(chunk_mb=chunk))
    counter.assert_one_product_per_block(80, 70, chunk)
    assert stats["n_matches"] > 0 and res.curves["threshold"].tp.shape[0] > 2
    # the thin wrappers: one pass each as well (mutual NN no longer runs b -> a)
    match_pair(q_xy, q_desc, t_xy, t_desc, H_TRUE, (W1, H1), (WK, HK), MatchingParams(chunk_mb=chunk))
    counter.assert_one_product_per_block(80, 70, chunk)
    classify_pair(q_xy, q_desc, t_xy, t_desc, H_TRUE, ClassifierParams(chunk_mb=chunk))
    counter.assert_one_product_per_block(80, 70, chunk)
    mutual_nearest(q_desc, t_desc, chunk)
    counter.assert_one_product_per_block(80, 70, chunk)
    nearest_two(q_desc, t_desc, chunk)
    counter.assert_one_product_per_block(80, 70, chunk)
    threshold_histogram(q_desc, t_desc, np.array([1.0, 50.0]), chunk)
    counter.assert_one_product_per_block(80, 70, chunk)


# ----------------------------------------------------------------------------- radius search (positives)


def test_within_radius_csr_equals_brute_force():
    """The x-sorted sweep of kernels.within_radius_csr equals the all-pairs test, rows ascending."""
    from descbench.metrics.kernels import within_radius_csr

    rng = np.random.default_rng(0)
    for trial in range(30):
        n, m = rng.integers(0, 60, 2)
        p = rng.integers(0, 8, (n, 2)).astype(float)  # integer grid: many points exactly at the radius
        t = rng.integers(0, 8, (m, 2)).astype(float)
        if trial % 3 == 0 and n:
            p[0, 0] = np.nan
        if trial % 4 == 0 and m:
            t[0, 1] = np.inf
            t[-1, 0] = np.nan
        act = rng.random(n) < 0.8
        for r in (0.0, 1.0, 1.5, 2.0, math.sqrt(2)):
            indptr, indices = within_radius_csr(p, t, r, act)
            for i in range(n):
                dx = t[:, 0] - p[i, 0]
                dy = t[:, 1] - p[i, 1]
                exp = np.flatnonzero(dx * dx + dy * dy <= r * r) if act[i] else np.zeros(0, int)
                np.testing.assert_array_equal(indices[indptr[i] : indptr[i + 1]], exp)
