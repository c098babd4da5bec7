"""Exact nearest / second-nearest neighbours and mutual NN against a float64 brute force."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from descbench.errors import DataError
from descbench.metrics.nn import l2_band_tolerance, mutual_nearest, nearest_two
from descbench.metrics.retrieval import augment_l2, prepare_l2_screen, screen_tolerance

# ----------------------------------------------------------------------------- the reference


def ref_matrix(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Full distance matrix: float64 squared L2 summed in index order k = 0..D-1, or Hamming."""
    if q.dtype == np.uint8:
        x = q[:, None, :] ^ c[None, :, :]
        return np.unpackbits(x, axis=2).sum(axis=2).astype(np.float64)
    acc = np.zeros((q.shape[0], c.shape[0]))
    for k in range(q.shape[1]):
        acc += (q[:, None, k].astype(np.float64) - c[None, :, k].astype(np.float64)) ** 2
    return acc


def ref_nearest_two(q, c):
    D = ref_matrix(q, c)
    n1, n2 = D.shape
    idx1 = np.full(n1, -1, np.int64)
    idx2 = np.full(n1, -1, np.int64)
    d1 = np.full(n1, np.inf)
    d2 = np.full(n1, np.inf)
    if n2 >= 1:
        order = np.argsort(D, axis=1, kind="stable")
        idx1[:] = order[:, 0]
        d1[:] = D[np.arange(n1), order[:, 0]]
        if n2 >= 2:
            idx2[:] = order[:, 1]
            d2[:] = D[np.arange(n1), order[:, 1]]
    if q.dtype != np.uint8:
        d1, d2 = np.sqrt(d1), np.sqrt(d2)
    return idx1, d1, idx2, d2


def ref_mutual(a, b):
    D = ref_matrix(a, b)
    if D.size == 0:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0)
    ab = np.argmin(D, axis=1)  # first minimum = lowest index
    ba = np.argmin(D, axis=0)
    ia = np.flatnonzero(ba[ab] == np.arange(len(a)))
    d = D[ia, ab[ia]]
    return ia, ab[ia], (d if a.dtype == np.uint8 else np.sqrt(d))


def check_two(q, c, **kw):
    got = nearest_two(q, c, **kw)
    exp = ref_nearest_two(q, c)
    for g, e, name in zip(got, exp, ("idx1", "dist1", "idx2", "dist2")):
        assert g.dtype == e.dtype, name
        np.testing.assert_array_equal(g, e, err_msg=name)


def check_mutual(a, b, **kw):
    got = mutual_nearest(a, b, **kw)
    exp = ref_mutual(a, b)
    for g, e in zip(got, exp):
        np.testing.assert_array_equal(g, e)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64


# ----------------------------------------------------------------------------- float cases


@pytest.mark.parametrize("seed", range(4))
def test_random_float_with_duplicates(seed):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(90, 24)).astype(np.float32)
    c[10] = c[3]  # exact duplicate candidates: a tie at d = 0 for queries equal to them
    c[40:45] = c[7]
    q = rng.normal(size=(60, 24)).astype(np.float32)
    q[:5] = c[[3, 7, 10, 41, 0]]
    q[5] = c[3] + np.float32(1e-3)
    check_two(q, c)
    check_two(q, c, chunk_mb=1e-4)  # one query row per block
    check_mutual(q, c)
    check_mutual(c, q)


def test_integer_valued_descriptors_many_ties():
    rng = np.random.default_rng(5)
    q = rng.integers(0, 3, size=(120, 6)).astype(np.float32)
    c = rng.integers(0, 3, size=(150, 6)).astype(np.float32)
    check_two(q, c)
    check_two(q, c, chunk_mb=2e-3)
    check_mutual(q, c)
    check_mutual(c, q)


def test_scaled_sift_like_descriptors():
    rng = np.random.default_rng(6)
    q = np.floor(rng.uniform(0, 255, size=(70, 128))).astype(np.float32)
    c = np.concatenate([q[:20] + rng.integers(-1, 2, size=(20, 128)), rng.uniform(0, 255, size=(60, 128))]).astype(np.float32)
    check_two(q, c)
    check_mutual(q, c)


def test_near_equal_distances_need_the_recheck():
    """A large common offset makes the float32 screen useless; the float64 recheck must decide.

    Candidates differ from a common point of norm 1e3 by ~1e-3, so the screen values (~5e5)
    have a float32 ulp of 0.03 while the true squared distances differ by ~1e-6: the naive
    float32 argmax disagrees with the exact answer, yet nearest_two must equal the brute force.
    """
    rng = np.random.default_rng(7)
    base = np.zeros(8, np.float64)
    base[0] = 1000.0
    c = (base + rng.normal(scale=1e-3, size=(200, 8))).astype(np.float32)
    q = (base + rng.normal(scale=1e-3, size=(100, 8))).astype(np.float32)
    _, _, qaug, caug, _ = prepare_l2_screen(q, c)
    naive = np.argmax(qaug @ caug.T, axis=1)
    exact = ref_nearest_two(q, c)[0]
    assert (naive != exact).sum() > 10  # the case really is adversarial for float32
    check_two(q, c)
    check_mutual(q, c)


def test_two_candidates_closer_than_float32_resolution():
    """Near-equal pairs: c1 and c2 nearly equidistant from q (difference below float32 rounding)."""
    q = np.array([[1000.0, 0.0, 0.0]], np.float32)
    d = np.float32(1.0)
    c = np.array([[1000.0 + d, 0.0, 0.0], [1000.0, 1.0, np.float32(2.0**-10)], [1000.0, -1.0, 0.0], [999.0, 0.0, 0.0]], np.float32)
    # squared distances: 1, 1 + 2^-20, 1, 1 -> nearest 0, second 2 (ties by index), 1 is 4th
    check_two(q, c)
    idx1, _, idx2, _ = nearest_two(q, c)
    assert (idx1[0], idx2[0]) == (0, 2)


def test_huge_values_use_the_float64_path():
    rng = np.random.default_rng(8)
    q = (rng.normal(size=(30, 5)) * 1e20).astype(np.float32)
    c = (rng.normal(size=(40, 5)) * 1e20).astype(np.float32)
    check_two(q, c)
    check_mutual(q, c)


# ----------------------------------------------------------------------------- binary


@pytest.mark.parametrize("nbytes", [1, 2, 32, 61])
def test_binary_packed(nbytes):
    rng = np.random.default_rng(nbytes)
    q = rng.integers(0, 256, size=(80, nbytes), dtype=np.uint8)
    c = rng.integers(0, 256, size=(100, nbytes), dtype=np.uint8)
    c[5] = c[2]
    q[0] = c[2]
    check_two(q, c)
    check_mutual(q, c)
    check_mutual(c, q)


# ----------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_empty_and_single_candidate(dtype):
    rng = np.random.default_rng(9)
    q = rng.integers(0, 5, size=(7, 4)).astype(dtype)
    none = np.zeros((0, 4), dtype)
    one = rng.integers(0, 5, size=(1, 4)).astype(dtype)
    idx1, d1, idx2, d2 = nearest_two(q, none)
    assert (idx1 == -1).all() and (idx2 == -1).all() and np.isinf(d1).all() and np.isinf(d2).all()
    idx1, d1, idx2, d2 = nearest_two(q, one)
    assert (idx1 == 0).all() and (idx2 == -1).all() and np.isfinite(d1).all() and np.isinf(d2).all()
    check_two(q, one)
    out = nearest_two(none, q)
    assert all(len(x) == 0 for x in out) and out[0].dtype == np.int64
    for a, b in ((q, none), (none, q), (none, none)):
        ia, ib, d = mutual_nearest(a, b)
        assert len(ia) == len(ib) == len(d) == 0
    check_mutual(q, one)
    check_mutual(one, q)


@pytest.mark.bad_input
def test_validation():
    f = np.zeros((3, 4), np.float32)
    with pytest.raises(DataError, match="mismatch"):
        nearest_two(f, np.zeros((3, 5), np.float32))
    with pytest.raises(DataError, match="mismatch"):
        mutual_nearest(f, np.zeros((3, 4), np.uint8))
    with pytest.raises(DataError, match="dtype"):
        nearest_two(f.astype(np.float64), f.astype(np.float64))
    with pytest.raises(DataError, match="2-D"):
        nearest_two(np.zeros(4, np.float32), f)
    bad = f.copy()
    bad[1, 2] = np.nan
    with pytest.raises(DataError, match="NaN or inf"):
        nearest_two(f, bad)
    bad[1, 2] = np.inf
    with pytest.raises(DataError, match="row 1"):
        mutual_nearest(bad, f)
    with pytest.raises(DataError, match="zero width"):
        nearest_two(np.zeros((3, 0), np.float32), np.zeros((3, 0), np.float32))


def test_validation_names_the_image_and_the_fix_and_takes_lists():
    """mutual_nearest names the two sides image-a / image-b; a dtype error says how to fix it;
    a list of float32 rows is the array it lists."""
    f = np.zeros((3, 4), np.float32)
    with pytest.raises(DataError, match=r"image-b descriptors contain NaN or inf \(first bad row 0\)"):
        mutual_nearest(f, np.full((2, 4), np.nan, np.float32))
    with pytest.raises(DataError, match="image-a descriptors must be a 2-D array"):
        mutual_nearest(np.zeros(4, np.float32), f)
    with pytest.raises(DataError, match=r"^query descriptors have dtype float64; expected float32 \(L2\) or uint8 packed bits "
                                         r"\(Hamming\) - convert the descriptors when writing them$"):
        nearest_two(f.astype(np.float64), f)
    a = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], np.float32)
    b = np.array([[1.0, 0.1], [0.1, 1.0]], np.float32)
    from_lists = mutual_nearest(list(a), list(b))  # lists of float32 rows
    for got, want in zip(from_lists, mutual_nearest(a, b)):
        np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- the band half-width T


def sqrt_fraction(x: Fraction) -> Fraction:
    """sqrt(x) to about 2^-200 relative (exact integer square root of a scaled numerator)."""
    if x == 0:
        return Fraction(0)
    k = 200 + max(0, x.denominator.bit_length() - x.numerator.bit_length())
    return Fraction(math.isqrt(x.numerator * x.denominator << (2 * k)), x.denominator << k)


def exact_norm2(row: np.ndarray) -> Fraction:
    """|row|^2 exactly: the sum of the squared float32 entries in rational arithmetic."""
    return sum((Fraction(float(v)) ** 2 for v in row), Fraction(0))


def random_screen_case(dim: int, scale: float, offset: float):
    """Random float32 queries [20, dim] (the first equal to candidate 4) and candidates [50, dim],
    with ``augment_l2``'s outputs and the float32 screen as the kernels compute it (any BLAS):
    ``(q, c, cnorm2, screen)``."""
    rng = np.random.default_rng(dim)
    c = (offset + scale * rng.normal(size=(50, dim))).astype(np.float32)
    q = (offset + scale * rng.normal(size=(20, dim))).astype(np.float32)
    q[0] = c[4]  # a query equal to a candidate
    q, c, qaug, caug, cnorm2 = augment_l2(q, c)
    return q, c, cnorm2, qaug @ caug.T


def ref_band_tolerance(q: np.ndarray, cnorm2: np.ndarray) -> list[Fraction]:
    """The documented T = screen_tolerance + gamma64_{D+2} (|q| + max|c|)^2 + 4 (D + 1) 2^-149,
    term by term in exact rational arithmetic (gamma_m = m u / (1 - m u), u = 2^-53; |q|^2 the
    exact sum of the squared float32 entries; max|c| = 0 without candidates)."""
    dim = q.shape[1]
    u = Fraction(1, 2**53)
    gamma = (dim + 2) * u / (1 - (dim + 2) * u)
    underflow = 4 * (dim + 1) * Fraction(1, 2**149)
    cmax2 = max((Fraction(float(v)) for v in cnorm2), default=Fraction(0))
    screen = screen_tolerance(q, cnorm2)
    out = []
    for i, row in enumerate(q):
        qn2 = exact_norm2(row)
        sum2 = qn2 + cmax2 + 2 * sqrt_fraction(qn2 * cmax2)  # (|q| + max|c|)^2
        out.append(Fraction(float(screen[i])) + gamma * sum2 + underflow)
    return out


def _p2(k: int) -> float:
    return math.ldexp(1.0, k)


_BAND_CASES = {
    # |q| = 5 * 2^-49, max|c| = 12 * 2^-80: screen term, float64 term and underflow term all of
    # similar size (~1e-44), so a change to any constant or operator of any term shows.
    "three_terms_balanced": (np.array([[3 * _p2(-49), 4 * _p2(-49)], [0.0, _p2(-49)]], np.float32),
                             np.array([(12 * _p2(-80)) ** 2, (5 * _p2(-80)) ** 2])),
    # ordinary magnitudes, a zero query row: max|c| = 12 enters (|q| + max|c|)^2
    "ordinary_with_zero_row": (np.array([[3.0, 4.0], [0.0, 0.0]], np.float32), np.array([144.0, 25.0, 0.0])),
    # no candidates: max|c| must be 0 (and no max() of an empty array); the screen term is ~1e-300
    # so T is the float64 term alone - wide D shows gamma's 1 / (1 - m u) (relative 2 m u ~ 6e-14)
    "no_candidates_wide": (np.tile(np.array([0.5, -1.25, 3.0, 0.125], np.float32), (3, 64)) * np.arange(1, 4, dtype=np.float32)[:, None],
                           np.zeros(0)),
    # float32 sum of squares rounds (32 + 32 * 2^-26 -> 32): |q| must be accumulated in float64
    "float32_norm_would_round": (np.array([[1.0, _p2(-13)] * 32, [_p2(-13), 1.0] * 32], np.float32), np.zeros(0)),
    # descriptors ~1e-30: the gradual-underflow term 4 (D + 1) 2^-149 dominates T
    "tiny_descriptors_underflow_term": (np.full((2, 8), 1e-30, np.float32) * np.array([[1.0], [3.0]], np.float32),
                                        np.array([8e-60, 2e-60])),
}


@pytest.mark.parametrize("case", sorted(_BAND_CASES))
def test_l2_band_tolerance_equals_the_documented_formula(case):
    """T is exactly (to 1e-15) the docstring's three-term bound, checked against an exact rational
    evaluation: pins gamma64_{D+2}, (|q| + max|c|)^2 with |q| in float64, max|c| = 0 without
    candidates, and 4 (D + 1) 2^-149 (the cases make each term, in turn, visible at that tolerance)."""
    q, cnorm2 = _BAND_CASES[case]
    got = l2_band_tolerance(q, cnorm2)
    assert got.dtype == np.float64 and got.shape == (q.shape[0],)
    for g, want in zip(got, ref_band_tolerance(q, cnorm2)):
        assert abs(Fraction(float(g)) - want) <= Fraction(1, 10**15) * want, (float(g), float(want))


@pytest.mark.parametrize("dim,scale,offset", [(3, 1.0, 0.0), (128, 1.0, 0.0), (128, 1e3, 0.0), (8, 1e-3, 1e3)])
def test_l2_band_tolerance_bounds_screen_plus_float64_error_and_is_tight(dim, scale, offset):
    """What nearest_two relies on: for any two candidates j, k of a query, the float32 screen
    difference g_j - g_k and the float64 distance difference (d_k - d_j) / 2 disagree by at most T
    (checked exactly in rationals); and T is a bound, not a blanket: T < 1e-3 (|q| + max|c|)^2."""
    q, c, cnorm2, g = random_screen_case(dim, scale, offset)
    d = ref_matrix(q, c)  # float64, index order: what the recheck compares
    T = l2_band_tolerance(q, cnorm2)
    cmax = math.sqrt(float(cnorm2.max()))
    for i in range(q.shape[0]):
        e = [Fraction(float(g[i, j])) + Fraction(float(d[i, j])) / 2 for j in range(c.shape[0])]
        assert max(e) - min(e) <= Fraction(float(T[i])), i
        qn = math.sqrt(sum(float(v) ** 2 for v in q[i]))
        assert 0 < T[i] < 1e-3 * (qn + cmax) ** 2, i
