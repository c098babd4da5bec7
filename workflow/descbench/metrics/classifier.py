"""Descriptor matching as a binary classifier over all keypoint pairs of an image pair.

**Population.** For an image pair (1, k) with N1 and N2 keypoints, the population is the set of
all N1 * N2 keypoint pairs (i, j). A pair is *positive* iff ``|H p_i - x_j| <= epsilon_px``
(``H`` maps image-1 pixels to image-k pixels; the test is ``dx*dx + dy*dy <= epsilon_px**2`` in
float64, see :func:`positives`). A projection behind the camera (homogeneous ``w <= 0``) or
non-finite has no positive partner; a projection outside image k is *not* special: its distance
to the image-k keypoints decides, exactly like for any other point. ``#P`` is the number of
positive pairs, found with a radius search (never the N1 x N2 table); ``#N = N1 N2 - #P``.

**Descriptor distance.** float32 descriptors: ``d = sqrt(s)`` with ``s = sum_k (q_k - c_k)^2``
accumulated in float64 in index order (:func:`descbench.metrics.kernels.sqdist64`; ``s`` is the
exact *ranking key*). uint8 packed bits: ``d = s =`` Hamming distance. These are the distances of
:mod:`descbench.metrics.nn`. Every comparison ``d <= t`` is decided exactly, without rounding
``t`` into key space: ``d <= t`` iff ``s <= K_le(t)`` with ``K_le(t)`` the largest double whose
(correctly rounded, monotone) square root is ``<= t`` (:func:`_key_le`); ``d < T`` iff
``s < K_ge(T)`` (:func:`_key_ge`).

**Matchers** (a threshold ``t`` predicts Yes/No for each pair; score = the quantity compared with t):

- ``threshold``: Yes iff ``d(i, j) <= t``; every pair has a finite score ``d(i, j)``.
- ``nn``: Yes iff ``j = NN(i)`` and ``d(i, NN(i)) <= t``; score ``d(i, NN(i))``.
- ``ratio``: Yes iff ``j = NN(i)`` and ``d1 / d2 <= t`` (Lowe's ratio; d2 = distance of the
  second-nearest neighbour). Conventions: ``d1 == d2`` (which includes ``d2 == 0``, where
  ``d1 = 0`` too) gives ratio 1 (the nearest neighbour is not distinctive); no second neighbour
  (N2 == 1) gives ``d2 = inf`` and ratio 0 (nothing competes).
- ``mutual_nn``: Yes iff i and j are mutual nearest neighbours and ``d <= t``; score d.

NN(i), the second neighbour and the mutual pairs come from :mod:`descbench.metrics.nn` (exact;
ties to the lowest index). For ``nn``, ``ratio`` and ``mutual_nn`` only the *candidate* pairs
(N1, resp. the mutual pairs) are ever predicted Yes at a finite t. Every other pair gets score
``+inf``: it is predicted Yes only at ``t = +inf``, where everything is Yes, which is the final
(1, 1) point of the ROC. ``confusion(..., t=inf)`` accordingly has FN = TN = 0 for every matcher.

**Counts and rates** at a threshold t: TP, FP, FN = #P - TP, TN = N1 N2 - TP - FP - FN (never by
materialising the pair table). TPR = TP/#P, FPR = FP/#N, TNR = TN/#N (= 1 - FPR), accuracy =
(TP + TN)/(N1 N2), precision = TP/(TP + FP), Youden J = TPR + TNR - 1 = (TP #N - FP #P)/(#P #N)
(evaluated from the integers); an undefined ratio (zero denominator) is NaN.

**ROC** (Fawcett 2006; scikit-learn's ``roc_curve(labels, -score, drop_intermediate=False)``):
one point per distinct score, in increasing threshold order, preceded by (0, 0). We report
thresholds in score units (Yes iff score <= t), i.e. sklearn's thresholds negated: (0, 0) has
``t = -inf``. AUC is the trapezoid over the points (= ``roc_auc_score`` when every pair has a
score), computed from the integer counts in exact arithmetic and rounded once. The best Youden J
is the maximum of J over the points; ties go to the first point (smallest threshold).

- ``nn``, ``ratio``, ``mutual_nn``: the full curve (at most N1 + 2 points): (0, 0) at -inf, one
  point per distinct candidate score, and (1, 1) at +inf when some pair is not a candidate.
- ``threshold``: the exact *corner curve* (see :func:`roc`): for each distinct positive distance
  T_b, the point just before its group (threshold: the largest double below T_b for L2, T_b - 1
  for Hamming; any t in [largest distance below T_b, T_b) gives this point, sklearn reports the
  former end, which is not computed) and the point after it (threshold T_b, as sklearn),
  plus (0, 0) at -inf and (1, 1) (threshold: T_last when no pair is farther, else +inf; sklearn
  would use the largest distance, which is not computed). Consecutive duplicates are dropped,
  keeping the first. The counts come from :func:`threshold_histogram`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from descbench.errors import DataError
from descbench.params import ConfigParams, config_field
from descbench.metrics.kernels import hamming_words, sqdist64, within_radius_csr
from descbench.metrics.pairpass import PairPass, PassResult, pair_pass
from descbench.metrics.retrieval import pack_bits_to_words, project

__all__ = [
    "MATCHERS", "ClassifierParams", "PairPopulation", "RocCurve", "ClassifierResult",
    "positives", "threshold_histogram", "confusion", "roc", "classify_pair", "prepare",
]

MATCHERS = ("threshold", "nn", "ratio", "mutual_nn")


@dataclass(frozen=True)
class ClassifierParams(ConfigParams):
    """The classifier's settings (defaults: the schema's; ``ClassifierParams.from_config(matching=...,
    scoring=...)``)."""

    epsilon_px: float = config_field("matching.classifier_epsilon_px", float)  # positive iff |H p_i - x_j| <= epsilon_px
    chunk_mb: float = config_field("scoring.chunk_mb", float)  # bound on the float32 screen block held in memory


# --------------------------------------------------------------------------- kernels


@njit(cache=True)
def _pair_keys_l2(qdesc, cdesc, rows, cols, out):
    for e in range(rows.shape[0]):  # O(N1 + #P) pairs: serial (cheap to compile)
        out[e] = sqdist64(qdesc[rows[e]], cdesc[cols[e]])


@njit(cache=True)
def _pair_keys_hamming(qwords, cwords, rows, cols, out):
    for e in range(rows.shape[0]):
        out[e] = np.float64(hamming_words(qwords[rows[e]], cwords[cols[e]]))


# --------------------------------------------------------------------------- histogram


def _check_descriptors(qdesc, cdesc) -> tuple[np.ndarray, np.ndarray]:
    q = np.asarray(qdesc)
    c = np.asarray(cdesc)
    for x, name in ((q, "query"), (c, "candidate")):
        if x.ndim != 2:
            raise DataError(f"{name} descriptors must be a 2-D array [N, D], got shape {x.shape}")
        if x.dtype not in (np.float32, np.uint8):
            raise DataError(f"{name} descriptors have dtype {x.dtype}; expected float32 (L2) or uint8 packed bits (Hamming)")
    if q.dtype != c.dtype or q.shape[1] != c.shape[1]:
        raise DataError(
            f"descriptor mismatch: query descriptors are {q.dtype} x {q.shape[1]}, candidate descriptors "
            f"are {c.dtype} x {c.shape[1]}; both images must use one descriptor"
        )
    if q.dtype == np.float32:
        for x, name in ((q, "query"), (c, "candidate")):
            if x.size and not np.isfinite(x).all():
                bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
                raise DataError(f"{name} descriptors contain NaN or inf (first bad row {bad})")
    return np.ascontiguousarray(q), np.ascontiguousarray(c)


def threshold_histogram(qdesc, cdesc, thresholds_sq, chunk_mb: float = 64.0):
    """Exact counts of all N1 x N2 descriptor distances per threshold bin.

    ``thresholds_sq``: sorted, strictly increasing, finite float64 *ranking keys* K_0 < ... <
    K_{B-1}: squared L2 (float64, summed in index order, :func:`descbench.metrics.kernels.sqdist64`)
    for float32 descriptors, Hamming distance for uint8 packed bits. With ``s_ij`` the key of pair
    (i, j), returns ``(n_less int64[B], n_equal int64[B], n_above int64)``::

        n_less[b]  = #{(i, j): K_{b-1} < s_ij < K_b}     (K_{-1} = -inf)
        n_equal[b] = #{(i, j): s_ij == K_b}
        n_above    = #{(i, j): s_ij > K_{B-1}}            (all pairs when B == 0)

    over every pair, equal to a float64 brute force whatever the BLAS. Memory: the float32 screen
    is held in blocks of query rows of at most ``chunk_mb`` MiB, plus O(B) per thread.

    Method (float32). One BLAS product per block of query rows gives the float32 screen
    ``g = fl32([q, 1] . [c_j, -|c_j|^2/2])``, an approximation of ``G = (|q|^2 - s)/2`` with
    ``|g - G| <= E`` (s the real squared distance of the float32 vectors, E the bound of
    :func:`descbench.metrics.retrieval.screen_tolerance`, which returns ``tol = 4 E``; gradual
    underflow of the float32 products adds at most ``(D+1) 2^-150``). With ``qn2`` = |q|^2 in
    float64 (``|qn2 - |q|^2| <= gamma_D |q|^2``) and ``x = fl64(qn2 - 2 g)`` (``2 g`` is exact,
    the subtraction errs by ``<= 2^-52 |x|``), ``|x - s| <= 2 E + gamma_D |q|^2 + 2^-52 |x| +
    (D+1) 2^-149``; the key itself errs by ``|s_hat - s| <= gamma_{D+2} s <= gamma_{D+2}
    (|q| + max|c|)^2``. Hence ``|s_hat - x| <= W + 2^-52 |x|`` with the per-row width
    ``W = (2 E + 2 gamma_{D+2} (qn2 + (|q| + max|c|)^2) + 8 (D+1) 2^-149) (1 + 2^-48)`` (factors
    of 2 of safety), and the interval ``[x - w, x + w]``, ``w = W + 2^-48 (1.5 (|q| + max|c|)^2 +
    1)`` (>= W + 2^-48 |x|), contains s_hat even after the float64 rounding of w and of its end
    points. If no key lies in it, s_hat is strictly between the keys around it: a bucket table
    over the key range with a margin >= w (:func:`descbench.metrics.pairpass.key_table`) proves
    this for most x with one table load; otherwise the bucket's few keys are scanned and, if one
    lies in the interval, s_hat is evaluated in float64 (:func:`descbench.metrics.kernels.sqdist64`).
    So every count is that of the float64 definition. Integer descriptors with an exact float32
    screen have E = 0 and W = 0 (the certificate of :mod:`descbench.metrics.pairpass`). Inputs
    whose screen could overflow (``|q| |c| + |c|^2 > 1e36``) are binned from float64 distances
    directly. The pass is :func:`descbench.metrics.pairpass.pair_pass` (histogram only here;
    :func:`classify_pair` gets the histogram and the neighbours from one pass).

    Method (Hamming): an exact histogram of the integer distances 0..8 * bytes, then binned.
    """
    q, c = _check_descriptors(qdesc, cdesc)
    keys = np.ascontiguousarray(np.asarray(thresholds_sq, dtype=np.float64).reshape(-1))
    if not np.isfinite(keys).all():
        raise ValueError("threshold_histogram: thresholds_sq must be finite")
    if keys.shape[0] > 1 and not (np.diff(keys) > 0).all():
        raise ValueError("threshold_histogram: thresholds_sq must be sorted and distinct")
    if not chunk_mb > 0:
        raise ValueError(f"chunk_mb must be > 0, got {chunk_mb}")
    res = pair_pass(q, c, keys, chunk_mb, rows=0, cols=False)
    return res.n_less, res.n_equal, res.n_above


# --------------------------------------------------------------------------- distances and keys


def _key_le(t: np.ndarray) -> np.ndarray:
    """Largest double s >= 0 with sqrt(s) <= t, for finite t >= 0 (sqrt is correctly rounded, so
    monotone: ``sqrt(s) <= t`` iff ``s <= _key_le(t)``)."""
    t = np.asarray(t, dtype=np.float64)
    x = np.minimum(t * t, np.finfo(np.float64).max)
    for _ in range(200):
        m = np.sqrt(x) > t
        if not m.any():
            break
        x[m] = np.nextafter(x[m], -np.inf)
    else:  # pragma: no cover - a few steps always suffice
        raise RuntimeError("_key_le did not converge")
    for _ in range(200):
        nx = np.nextafter(x, np.inf)
        m = np.isfinite(nx) & (np.sqrt(nx) <= t)
        if not m.any():
            break
        x[m] = nx[m]
    else:  # pragma: no cover
        raise RuntimeError("_key_le did not converge")
    return x


def _key_ge(t: np.ndarray) -> np.ndarray:
    """Smallest double s >= 0 with sqrt(s) >= t, for finite t >= 0 (``sqrt(s) < t`` iff
    ``s < _key_ge(t)``)."""
    t = np.asarray(t, dtype=np.float64)
    x = np.minimum(t * t, np.finfo(np.float64).max)
    for _ in range(200):
        m = np.sqrt(x) < t
        if not m.any():
            break
        x[m] = np.nextafter(x[m], np.inf)
    else:  # pragma: no cover
        raise RuntimeError("_key_ge did not converge")
    for _ in range(200):
        px = np.nextafter(x, -np.inf)
        m = (px >= 0) & (np.sqrt(np.maximum(px, 0.0)) >= t)
        if not m.any():
            break
        x[m] = px[m]
    else:  # pragma: no cover
        raise RuntimeError("_key_ge did not converge")
    return x


def positives(q_xy, t_xy, H, epsilon_px: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Positive pairs as CSR ``(indptr int64[N1+1], indices int64[#P])``, indices ascending per row.

    (i, j) is positive iff the projection ``p_i = H [x_i, y_i, 1]`` (divided by its third
    coordinate) satisfies ``(x_j - p_x)^2 + (y_j - p_y)^2 <= epsilon_px^2`` in float64. Points
    projecting behind the camera (``w <= 0``) or to a non-finite location have no positives;
    projections outside image k are kept (their pixel distance decides).
    """
    q_xy = np.asarray(q_xy, dtype=np.float64).reshape(-1, 2)
    t_xy = np.ascontiguousarray(np.asarray(t_xy, dtype=np.float64).reshape(-1, 2))
    p, _ = project(np.asarray(H, dtype=np.float64), q_xy, np.inf, np.inf)
    active = np.isfinite(p).all(axis=1)
    p = np.where(active[:, None], p, 0.0)
    if not epsilon_px >= 0:
        raise ValueError(f"epsilon_px must be >= 0, got {epsilon_px}")
    return within_radius_csr(np.ascontiguousarray(p), t_xy, float(epsilon_px), active)


# --------------------------------------------------------------------------- the population


class PairPopulation:
    """One image pair as a classification population (shared by every matcher and threshold).

    Holds the descriptors, the positive pairs (CSR, with their exact ranking keys) and,
    computed on first use, the nearest-neighbour candidates of each matcher.
    """

    def __init__(self, q_xy, q_desc, t_xy, t_desc, H, params: ClassifierParams = ClassifierParams()):
        self.params = params
        self.q_desc, self.t_desc = _check_descriptors(q_desc, t_desc)
        self.binary = self.q_desc.dtype == np.uint8
        self.n1 = int(self.q_desc.shape[0])
        self.n2 = int(self.t_desc.shape[0])
        q_xy = np.asarray(q_xy, dtype=np.float64).reshape(-1, 2)
        t_xy = np.asarray(t_xy, dtype=np.float64).reshape(-1, 2)
        if q_xy.shape[0] != self.n1 or t_xy.shape[0] != self.n2:
            raise DataError(
                f"keypoint/descriptor count mismatch: image 1 has {q_xy.shape[0]} keypoints and {self.n1} "
                f"descriptors, image k has {t_xy.shape[0]} keypoints and {self.n2} descriptors"
            )
        self._qw = self._cw = None
        self._cand: dict = {}
        self._two = None  # (idx1, idx2): nearest and second-nearest candidate of every query
        self._nn1 = None  # idx1 alone (when only the nearest was computed)
        self._col = None  # nearest query of every candidate
        self._hist = None  # (keys, n_less, n_equal) of the threshold ROC
        self.pos_indptr, self.pos_indices = positives(q_xy, t_xy, H, params.epsilon_px)
        self.pos_rows = np.repeat(np.arange(self.n1, dtype=np.int64), np.diff(self.pos_indptr))
        self.pos_id = self.pos_rows * self.n2 + self.pos_indices  # ascending (CSR order)
        self.pos_key = self.pair_keys(self.pos_rows, self.pos_indices)

    # sizes
    @property
    def n_pairs(self) -> int:
        return self.n1 * self.n2

    @property
    def n_pos(self) -> int:
        return int(self.pos_indices.shape[0])

    @property
    def n_neg(self) -> int:
        return self.n_pairs - self.n_pos

    # distances
    def pair_keys(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Exact ranking keys (squared L2 in float64 / Hamming) of the pairs (rows[e], cols[e])."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        out = np.empty(rows.shape[0], dtype=np.float64)
        if rows.shape[0] == 0:
            return out
        if self.binary:
            if self._qw is None:
                self._qw = pack_bits_to_words(self.q_desc)
                self._cw = pack_bits_to_words(self.t_desc)
            _pair_keys_hamming(self._qw, self._cw, rows, cols, out)
        else:
            _pair_keys_l2(self.q_desc, self.t_desc, rows, cols, out)
        return out

    def key_to_distance(self, key: np.ndarray) -> np.ndarray:
        return np.asarray(key, dtype=np.float64) if self.binary else np.sqrt(key)

    def key_le(self, t: np.ndarray) -> np.ndarray:
        """Key bound K with ``d <= t`` iff ``s <= K``, for finite t (K = -1 for t < 0: nothing)."""
        t = np.asarray(t, dtype=np.float64)
        if self.binary:
            return np.where(t < 0, -1.0, t)
        out = np.full(t.shape, -1.0)
        ok = t >= 0
        out[ok] = _key_le(t[ok])
        return out

    def key_ge(self, t: np.ndarray) -> np.ndarray:
        """Key bound K with ``d < t`` iff ``s < K``, for distances t = d of actual pairs."""
        t = np.asarray(t, dtype=np.float64)
        return t.copy() if self.binary else _key_ge(t)

    def is_positive(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        ids = np.asarray(rows, dtype=np.int64) * self.n2 + np.asarray(cols, dtype=np.int64)
        k = np.searchsorted(self.pos_id, ids)
        ok = k < self.pos_id.shape[0]
        out = np.zeros(ids.shape[0], dtype=bool)
        out[ok] = self.pos_id[k[ok]] == ids[ok]
        return out

    def count_le(self, keys: np.ndarray) -> np.ndarray:
        """#{all pairs with s <= K} for each finite key K (one :func:`threshold_histogram` call)."""
        keys = np.asarray(keys, dtype=np.float64)
        uk, inv = np.unique(keys, return_inverse=True)
        n_less, n_equal, _ = threshold_histogram(self.q_desc, self.t_desc, uk, self.params.chunk_mb)
        return np.cumsum(n_less + n_equal)[inv.reshape(-1)].reshape(keys.shape)

    # the one pass over all pairs
    def threshold_keys(self):
        """``(T, p_b, k_ge, k_le, keys)`` of the threshold matcher's corner curve: T the distinct
        positive distances, p_b their counts, ``d < T_b`` iff ``s < k_ge[b]``, ``d <= T_b`` iff
        ``s <= k_le[b]``, keys = the sorted distinct union of both (the histogram's keys)."""
        T, p_b = np.unique(self.key_to_distance(self.pos_key), return_counts=True)
        k_ge = self.key_ge(T)
        k_le = self.key_le(T)
        return T, p_b, k_ge, k_le, np.unique(np.concatenate([k_ge, k_le]))

    def run_pass(self, hist: bool = True, rows: int = 2, cols: bool = True, chunk_mb: float | None = None) -> PassResult | None:
        """Compute what the matchers need in ONE pass over the pair table
        (:func:`descbench.metrics.pairpass.pair_pass`) and keep it: the threshold-ROC histogram
        (``hist``), the nearest (``rows=1``) or nearest two (``rows=2``) candidates of every query,
        and the nearest query of every candidate (``cols``, for mutual NN). Returns the pass
        result (None when there is no pair)."""
        pp = self.begin_pass(hist, rows, cols)
        if pp is None:
            return None
        chunk = self.params.chunk_mb if chunk_mb is None else chunk_mb
        if not chunk > 0:
            raise ValueError(f"chunk_mb must be > 0, got {chunk}")
        if pp.needs_screen:
            from descbench.metrics.pairpass import block_rows, screen_block

            step = block_rows(self.n2, chunk)
            for r0 in range(0, self.n1, step):
                pp.consume(screen_block(pp.qaug, pp.caug, r0, min(self.n1, r0 + step)), r0)
                pp.out.n_products += 1
        return self.end_pass(pp)

    def begin_pass(self, hist: bool = True, rows: int = 2, cols: bool = True) -> PairPass | None:
        """:meth:`run_pass` in steps: the :class:`descbench.metrics.pairpass.PairPass` to feed
        (None, with the empty results kept, when there is no pair); then :meth:`end_pass`."""
        keys = self.threshold_keys()[4] if hist else None
        self._pass_request = (hist, rows, cols, keys)
        if self.n1 == 0 or self.n2 == 0:
            if hist:
                self._hist = (keys, np.zeros(keys.shape[0], np.int64), np.zeros(keys.shape[0], np.int64))
            if rows:
                self._two = (np.full(self.n1, -1, np.int64), np.full(self.n1, -1, np.int64))
            if cols:
                self._col = np.full(self.n2, -1, np.int64)
            return None
        return PairPass(self.q_desc, self.t_desc, keys, rows, cols)

    def end_pass(self, pp: PairPass) -> PassResult:
        """Keep the results of a pass begun by :meth:`begin_pass` once every row was consumed."""
        hist, rows, cols, keys = self._pass_request
        res = pp.finish()
        if hist:
            self._hist = (keys, res.n_less, res.n_equal)
        if rows == 2:
            self._two = (res.idx1, res.idx2)
        elif rows == 1:
            self._nn1 = res.idx1
        if cols:
            self._col = res.col_idx
        return res

    def histogram(self, keys: np.ndarray):
        """``(n_less, n_equal)`` of :func:`threshold_histogram` for sorted distinct keys (from the
        pass when it was made with the same keys)."""
        if self._hist is not None and np.array_equal(self._hist[0], keys):
            return self._hist[1], self._hist[2]
        n_less, n_equal, _ = threshold_histogram(self.q_desc, self.t_desc, keys, self.params.chunk_mb)
        return n_less, n_equal

    def mutual_pairs(self):
        """``(rows, cols)`` of the mutual nearest-neighbour pairs (sorted by row)."""
        if self._col is None or (self._two is None and self._nn1 is None):
            self.run_pass(hist=False, rows=0 if (self._two is not None or self._nn1 is not None) else 1, cols=True)
        from descbench.metrics.nn import mutual_from

        idx1 = self._two[0] if self._two is not None else self._nn1
        rows, cols, _ = mutual_from(idx1, self._col)
        return rows, cols

    # matchers
    def candidates(self, matcher: str):
        """``(rows, cols, score, label)`` of the pairs that can be Yes at a finite threshold."""
        if matcher not in ("nn", "ratio", "mutual_nn"):
            raise ValueError(f"candidates: matcher must be nn, ratio or mutual_nn, got {matcher!r}")
        if matcher in self._cand:
            return self._cand[matcher]
        if matcher == "mutual_nn":
            rows, cols = self.mutual_pairs()
            score = self.key_to_distance(self.pair_keys(rows, cols))
        else:
            if self._two is None:
                self.run_pass(hist=False, rows=2, cols=False)
            idx1, idx2 = self._two
            rows = np.flatnonzero(idx1 >= 0).astype(np.int64)
            cols = idx1[rows].astype(np.int64)
            d1 = self.key_to_distance(self.pair_keys(rows, cols))
            if matcher == "nn":
                score = d1
            else:
                has2 = idx2[rows] >= 0
                d2 = np.full(rows.shape[0], np.inf)
                d2[has2] = self.key_to_distance(self.pair_keys(rows[has2], idx2[rows[has2]]))
                with np.errstate(divide="ignore", invalid="ignore"):
                    score = np.where(d1 == d2, 1.0, d1 / d2)  # d1 == d2 (incl. 0/0) -> 1; d2 = inf -> 0
        out = (rows, cols, np.asarray(score, dtype=np.float64), self.is_positive(rows, cols))
        self._cand[matcher] = out
        return out


# --------------------------------------------------------------------------- confusion and ROC


def _rates(tp, fp, n_pos: int, n_neg: int) -> dict:
    """Counts -> the confusion dictionary (arrays); undefined ratios NaN."""
    tp = np.asarray(tp, dtype=np.int64)
    fp = np.asarray(fp, dtype=np.int64)
    fn = n_pos - tp
    tn = n_neg - fp
    n = n_pos + n_neg
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = tp / n_pos if n_pos else np.full(tp.shape, np.nan)
        fpr = fp / n_neg if n_neg else np.full(tp.shape, np.nan)
        tnr = tn / n_neg if n_neg else np.full(tp.shape, np.nan)
        acc = (tp + tn) / n if n else np.full(tp.shape, np.nan)
        prec = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), np.nan)
    if n_pos and n_neg:
        j = np.array([(int(a) * n_neg - int(b) * n_pos) / (n_pos * n_neg) for a, b in zip(tp.reshape(-1), fp.reshape(-1))])
        j = j.reshape(tp.shape)
    else:
        j = np.full(tp.shape, np.nan)
    return {
        "tp": tp, "fp": fp, "fn": fn, "tn": tn, "n_pos": n_pos, "n_neg": n_neg, "n_pairs": n,
        "tpr": tpr, "fpr": fpr, "tnr": tnr, "accuracy": acc, "precision": prec, "youden_j": j,
    }


def confusion(pop: PairPopulation, matcher: str, t) -> dict:
    """Confusion counts and rates of ``matcher`` at threshold(s) ``t`` (scalar or array).

    Keys: threshold, tp, fp, fn, tn, n_pos, n_neg, n_pairs, tpr, fpr, tnr, accuracy, precision,
    youden_j (scalars for a scalar t, arrays otherwise). Yes iff score <= t; ``t = +inf`` makes
    every pair Yes (the +inf convention of the module docstring), ``t = -inf`` none.
    """
    if matcher not in MATCHERS:
        raise ValueError(f"unknown matcher {matcher!r}; expected one of {MATCHERS}")
    scalar = np.ndim(t) == 0
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if np.isnan(t).any():
        raise ValueError("confusion: threshold is NaN")
    tp = np.zeros(t.shape, np.int64)
    fp = np.zeros(t.shape, np.int64)
    inf = np.isposinf(t)
    tp[inf] = pop.n_pos
    fp[inf] = pop.n_neg
    fin = np.isfinite(t)
    if fin.any():
        if matcher == "threshold":
            key = pop.key_le(t[fin])
            pos_sorted = np.sort(pop.pos_key)
            tp_f = np.searchsorted(pos_sorted, key, side="right")
            all_f = pop.count_le(key)
            tp[fin] = tp_f
            fp[fin] = all_f - tp_f
        else:
            _, _, score, label = pop.candidates(matcher)
            ps = np.sort(score[label])
            ns = np.sort(score[~label])
            tp[fin] = np.searchsorted(ps, t[fin], side="right")
            fp[fin] = np.searchsorted(ns, t[fin], side="right")
    out = _rates(tp, fp, pop.n_pos, pop.n_neg)
    out["threshold"] = t
    if scalar:
        out = {k: (v.reshape(-1)[0].item() if isinstance(v, np.ndarray) else v) for k, v in out.items()}
    return out


@dataclass
class RocCurve:
    """ROC points of one matcher on one pair (increasing threshold; Yes iff score <= threshold).

    ``corner`` is True for the threshold matcher's corner curve (a subset of the full curve with
    the same piecewise-linear shape, AUC and best J; see :func:`roc`).
    """

    matcher: str
    thresholds: np.ndarray  # float64
    tp: np.ndarray  # int64
    fp: np.ndarray  # int64
    n_pos: int
    n_neg: int
    n_candidates: int  # pairs with a finite score
    corner: bool
    tpr: np.ndarray = field(init=False)
    fpr: np.ndarray = field(init=False)
    auc: float = field(init=False)
    best_j: float = field(init=False)
    best_j_threshold: float = field(init=False)
    best_j_index: int = field(init=False)

    def __post_init__(self):
        P, N = self.n_pos, self.n_neg
        with np.errstate(divide="ignore", invalid="ignore"):
            self.tpr = self.tp / P if P else np.full(self.tp.shape, np.nan)
            self.fpr = self.fp / N if N else np.full(self.tp.shape, np.nan)
        if P == 0 or N == 0:
            self.auc = self.best_j = self.best_j_threshold = float("nan")
            self.best_j_index = -1
            return
        if 2 * P * N < 2**62:
            # int64 is exact here: 0 <= tp <= P, fp nondecreasing in 0..N, so every partial sum of
            # the trapezoid numerator lies in [0, 2 P N] and |J numerator| <= P N
            tp = np.asarray(self.tp, dtype=np.int64)
            fp = np.asarray(self.fp, dtype=np.int64)
            num = int(np.sum(np.diff(fp) * (tp[1:] + tp[:-1])))
            jn = tp * N - fp * P
            best = int(np.argmax(jn))  # first maximum
            jbest = int(jn[best])
        else:  # Python integers (unbounded)
            tp = [int(v) for v in self.tp]
            fp = [int(v) for v in self.fp]
            num = sum((fp[k] - fp[k - 1]) * (tp[k] + tp[k - 1]) for k in range(1, len(tp)))
            jl = [a * N - b * P for a, b in zip(tp, fp)]
            best = max(range(len(jl)), key=lambda k: (jl[k], -k))  # first maximum
            jbest = jl[best]
        self.auc = num / (2 * P * N)  # exact integer, rounded once
        self.best_j_index = int(best)
        self.best_j = jbest / (P * N)
        self.best_j_threshold = float(self.thresholds[best])

    def summary(self) -> dict:
        """One row for a per-pair table (scalars only)."""
        k = self.best_j_index
        return {
            "matcher": self.matcher, "n_pairs": self.n_pos + self.n_neg, "n_pos": self.n_pos, "n_neg": self.n_neg,
            "n_candidates": self.n_candidates, "n_roc_points": int(self.tp.shape[0]), "corner_curve": self.corner,
            "auc": self.auc, "best_j": self.best_j, "best_j_threshold": self.best_j_threshold,
            "best_j_tp": int(self.tp[k]) if k >= 0 else -1, "best_j_fp": int(self.fp[k]) if k >= 0 else -1,
            "best_j_tpr": float(self.tpr[k]) if k >= 0 else float("nan"),
            "best_j_fpr": float(self.fpr[k]) if k >= 0 else float("nan"),
        }


def _dedupe(thr, tp, fp):
    """Drop points equal to their predecessor (keeping the first, i.e. the smallest threshold)."""
    keep = np.ones(tp.shape[0], dtype=bool)
    keep[1:] = (tp[1:] != tp[:-1]) | (fp[1:] != fp[:-1])
    return thr[keep], tp[keep], fp[keep]


def roc(pop: PairPopulation, matcher: str) -> RocCurve:
    """ROC curve, AUC and best Youden J of ``matcher`` (conventions in the module docstring).

    **Threshold matcher: the corner curve is exact.** Let T_0 < ... < T_{m-1} be the distinct
    distances of positive pairs, p_b the number of positives at T_b, and (from
    :func:`threshold_histogram`, minus the positives) ``a_b`` = #negatives with T_{b-1} < d < T_b,
    ``e_b`` = #negatives with d == T_b. In increasing threshold order, sklearn's full curve is
    (0, 0), then for each distinct score one point. Between the point *after* group b-1 (counts
    (FP, TP) = (F_{b-1}, S_{b-1}), cumulative up to T_{b-1}) and the point *before* group b
    ((F_{b-1} + a_b, S_{b-1})), every distinct score is a negative-only score, so all those points
    have TP = S_{b-1}: they lie on the horizontal segment joining the two stored points. Group b
    itself is one distinct score, i.e. one point, the *after* point (F_{b-1} + a_b + e_b,
    S_{b-1} + p_b), joined to the before point by a straight segment in both curves. After the
    last group all scores are negative-only again (horizontal to (#N, #P)). Hence:

    1. every sklearn point lies on the piecewise-linear curve through the stored points, and every
       stored point is an sklearn point (a before point is the point of the largest distance below
       T_b, or (0, 0); after points and (1, 1) are sklearn points);
    2. the two piecewise-linear curves are the same set, and the trapezoid rule integrates a
       piecewise-linear function exactly whatever extra collinear points it is given, so the AUCs
       are equal (we sum exact integers);
    3. along a horizontal run FP strictly increases at constant TP, so J = TPR - FPR strictly
       decreases: the first maximum of J over sklearn's points is at (0, 0) or at an after point,
       both stored, with the same threshold (T_b; -inf for (0, 0)).

    Other matchers: the full curve over the candidate scores, (1, 1) at +inf for the rest.
    """
    if matcher not in MATCHERS:
        raise ValueError(f"unknown matcher {matcher!r}; expected one of {MATCHERS}")
    P, N = pop.n_pos, pop.n_neg
    if matcher == "threshold":
        T, p_b, k_ge, k_le, keys = pop.threshold_keys()
        if T.shape[0]:
            n_less, n_equal = pop.histogram(keys)
            cum_le = np.cumsum(n_less + n_equal)
            cum_lt = cum_le - n_equal
            all_lt = cum_lt[np.searchsorted(keys, k_ge)]
            all_le = cum_le[np.searchsorted(keys, k_le)]
            s_le = np.cumsum(p_b)
            s_lt = s_le - p_b
            f_lt = all_lt - s_lt
            f_le = all_le - s_le
        else:
            f_lt = f_le = s_lt = s_le = np.zeros(0, np.int64)
        # a threshold giving the before point: any t in [largest distance below T_b, T_b)
        before = T - 1.0 if pop.binary else np.nextafter(T, -np.inf)
        thr = np.concatenate([[-np.inf], np.column_stack([before, T]).reshape(-1), [np.inf]])
        tp = np.concatenate([[0], np.column_stack([s_lt, s_le]).reshape(-1), [P]]).astype(np.int64)
        fp = np.concatenate([[0], np.column_stack([f_lt, f_le]).reshape(-1), [N]]).astype(np.int64)
        n_cand = pop.n_pairs
        corner = True
    else:
        _, _, score, label = pop.candidates(matcher)
        u, inv = np.unique(score, return_inverse=True)
        gp = np.bincount(inv, weights=label, minlength=u.shape[0]).astype(np.int64)
        gn = np.bincount(inv, weights=~label, minlength=u.shape[0]).astype(np.int64)
        thr = np.concatenate([[-np.inf], u, [np.inf]])
        tp = np.concatenate([[0], np.cumsum(gp), [P]]).astype(np.int64)
        fp = np.concatenate([[0], np.cumsum(gn), [N]]).astype(np.int64)
        n_cand = int(score.shape[0])
        corner = False
    thr, tp, fp = _dedupe(thr.astype(np.float64), tp, fp)
    return RocCurve(matcher, thr, tp, fp, P, N, n_cand, corner)


# --------------------------------------------------------------------------- per pair


@dataclass
class ClassifierResult:
    """All matchers of one image pair: :meth:`summary_rows` and :meth:`roc_rows` are table-ready."""

    n1: int
    n2: int
    curves: dict  # matcher -> RocCurve

    def summary_rows(self) -> list[dict]:
        return [dict(n1=self.n1, n2=self.n2, **c.summary()) for c in self.curves.values()]

    def roc_rows(self) -> dict:
        """Long-format ROC points: columns matcher, point, threshold, tp, fp, tpr, fpr."""
        cols = {"matcher": [], "point": [], "threshold": [], "tp": [], "fp": [], "tpr": [], "fpr": []}
        for m, c in self.curves.items():
            k = c.tp.shape[0]
            cols["matcher"].append(np.full(k, m, dtype=object))
            cols["point"].append(np.arange(k, dtype=np.int32))
            cols["threshold"].append(c.thresholds)
            cols["tp"].append(c.tp)
            cols["fp"].append(c.fp)
            cols["tpr"].append(c.tpr)
            cols["fpr"].append(c.fpr)
        return {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}


def classify_pair(q_xy, q_desc, t_xy, t_desc, H, params: ClassifierParams = ClassifierParams(),
                  matchers=MATCHERS) -> ClassifierResult:
    """ROC, AUC and best Youden J of each matcher on one image pair (see the module docstring)."""
    for m in matchers:
        if m not in MATCHERS:
            raise ValueError(f"unknown matcher {m!r}; expected one of {MATCHERS}")
    pop = PairPopulation(q_xy, q_desc, t_xy, t_desc, H, params)
    prepare(pop, matchers)
    return ClassifierResult(pop.n1, pop.n2, {m: roc(pop, m) for m in matchers})


def pass_needs(matchers, mutual: bool = False) -> dict:
    """Arguments of :meth:`PairPopulation.run_pass` covering ``matchers`` (and mutual NN if asked)."""
    two = any(m in matchers for m in ("nn", "ratio"))
    cols = mutual or "mutual_nn" in matchers
    return {"hist": "threshold" in matchers, "rows": 2 if two else (1 if cols else 0), "cols": cols}


def prepare(pop: PairPopulation, matchers, mutual: bool = False, chunk_mb: float | None = None):
    """Everything ``matchers`` need from the pair table, in one pass (see :meth:`PairPopulation.run_pass`)."""
    need = pass_needs(matchers, mutual)
    if need["hist"] or need["rows"] or need["cols"]:
        return pop.run_pass(chunk_mb=chunk_mb, **need)
    return None


def begin_prepare(pop: PairPopulation, matchers, mutual: bool = False) -> PairPass | None:
    """:func:`prepare` in steps: the pass to feed (None when nothing is needed or there is no
    pair); after feeding it, :meth:`PairPopulation.end_pass`."""
    need = pass_needs(matchers, mutual)
    if need["hist"] or need["rows"] or need["cols"]:
        return pop.begin_pass(**need)
    return None
