"""Average precision (AP) conventions for ranked lists of *distances* (smaller = more similar).

Generic definition: rank the items by increasing distance; with S+ the positives and P(K) the
precision among the first K items, AP = (1/|S+|) * sum_K 1[x_K in S+] * P(K). The conventions
differ in how ties are ordered, which labels count, and how the sum is discretised:
:func:`ap_step` (scikit-learn ``average_precision_score``), :func:`ap_vlfeat` (VLFeat ``vl_pr``
``info.ap``), :func:`ap_trapezoid` (hpatches-benchmark ``pr``), :func:`ap_tie_aware` (He et al.
2018, mean over the orderings of tie groups), :func:`ap_from_tie_groups` /
:func:`ap_tie_aware_from_histograms` (the same from per-group counts, O(#groups)) and
:func:`ap_quantized` (soft-binned estimator of He et al. 2018 / FastAP / R2D2 ``APLoss``).

All functions return ``float('nan')`` when AP is undefined (empty input or no positive, unless
a positive ``num_positives`` is given) and raise ``ValueError`` naming the offending argument.

:data:`AP_CONVENTIONS` is the registry of the conventions keypoint verification reports (the
values of ``verification.ap_convention``): each :class:`APConvention` names its AP of a pooled
(distance, +1/-1 label) list, whether it can be computed from tie-group counts alone
(``candidates: all``), and its columns. The config schema's allowed values
(:func:`descbench.config.load_schema`), the per-scene Parquet columns
(:func:`descbench.io.verification_scene_schema`) and the report's
``keypoint_verification_ap_<name>`` columns (:func:`descbench.metrics.aggregate.verification_summary`)
are all read from it: adding a convention is one entry here (plus its test and its line in the
README).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:  # annotations only (postponed): no import at run time
    from numpy.typing import ArrayLike

__all__ = ["ap_step", "ap_vlfeat", "ap_trapezoid", "ap_tie_aware", "ap_from_tie_groups",
           "ap_tie_aware_from_histograms", "ap_quantized", "quantized_ap_gap", "APConvention", "AP_CONVENTIONS",
           "verification_ap_columns"]

CONVENTIONS = ("step", "tie_aware", "optimistic", "pessimistic")
GROUP_CONVENTIONS = CONVENTIONS + ("half",)  # ap_from_tie_groups also takes the workbench's half
_SMALL = 1e-10  # the floor used by vl_pr / hpatches ``pr`` in precision and recall


# ----------------------------------------------------------------------------- validation

def _array_1d(x, name: str, kinds: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in kinds:
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _check_finite(arr: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"{name} must be finite; found {arr[bad[0]]} at index {bad[0]}")


def _check_inputs(distances, labels, allowed: tuple) -> tuple[np.ndarray, np.ndarray]:
    d = _array_1d(distances, "distances", "iuf")
    _check_finite(d, "distances")
    lab = _array_1d(labels, "labels", "biuf")
    if lab.shape != d.shape:
        raise ValueError(f"labels has length {lab.size} but distances has length {d.size}")
    bad = ~np.isin(lab, allowed)
    if bad.any():
        raise ValueError(f"labels must only contain values in {set(allowed)}; found {lab[bad][0]}")
    return d, lab


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _check_num_positives(num_positives, present: int) -> int:
    if num_positives is None:
        return present
    if not _is_int(num_positives):
        raise ValueError(f"num_positives must be an integer or None, got {num_positives!r}")
    if num_positives < present:
        raise ValueError(f"num_positives ({num_positives}) must be >= the number of positive labels ({present})")
    return int(num_positives)


def _check_counts(x, name: str) -> np.ndarray:
    arr = _array_1d(x, name, "biuf")
    _check_finite(arr, name)
    if (arr < 0).any() or (arr != np.floor(arr)).any():
        raise ValueError(f"{name} must contain non-negative integer counts")
    return arr


# ----------------------------------------------------------------------------- helpers

_HT = 64  # harmonic numbers below _HT come from a table, above from the asymptotic series
_HTABLE = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, _HT + 1))])


def _harmonic_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """H_b - H_a = sum_{k=a+1}^{b} 1/k for integer-valued float arrays 0 <= a <= b, O(1) each.

    Table for the part below 64; above it the Euler-Maclaurin series written as differences
    (log1p(n/x) - n/(2xy) + n(x+y)/(12x^2y^2) + ...), so the result keeps its relative accuracy
    even when b - a << a (truncation error < 1/(240 * 64^8) ~ 1e-17).
    """
    x, y = np.maximum(a, _HT), np.maximum(b, _HT)
    n = y - x
    tail = (np.log1p(n / x) - n / (2.0 * x * y) + n / (12.0 * x * y) * (1.0 / x + 1.0 / y)
            + (y ** -4.0 - x ** -4.0) / 120.0 - (y ** -6.0 - x ** -6.0) / 252.0)
    head = _HTABLE[np.minimum(b, _HT).astype(np.int64)] - _HTABLE[np.minimum(a, _HT).astype(np.int64)]
    return head + tail


def _tie_groups(d: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positives, negatives) per group of equal distance, groups by increasing distance.

    Only counts per group are needed, not an order within a group, so the distances are sorted
    as values (no argsort): the positives of a group are counted in the sorted positive distances
    by two binary searches (value sorts are ~18x faster than a stable argsort: 6.5 M pooled
    verification items took 0.74 s a descriptor to order)."""
    ds = np.sort(d)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ds) != 0) + 1])
    sizes = np.diff(np.append(starts, ds.size)).astype(np.float64)
    values = ds[starts]
    dp = np.sort(d[pos])
    n_pos = (np.searchsorted(dp, values, side="right") - np.searchsorted(dp, values, side="left")).astype(np.float64)
    return n_pos, sizes - n_pos


def _ap_groups(p: np.ndarray, neg: np.ndarray, convention: str, denom: float) -> float:
    if denom == 0:
        return float("nan")
    n = p + neg
    N = np.cumsum(n) - n  # items before the group
    P = np.cumsum(p) - p  # positives before the group
    has = p > 0
    p, n, N, P, neg = p[has], n[has], N[has], P[has], neg[has]
    if convention == "step":
        contrib = p * (P + p) / (N + n)
    elif convention == "optimistic":  # sum_{j=1}^{p} (P+j)/(N+j) = p - (N-P)(H_{N+p} - H_N)
        contrib = p - (N - P) * _harmonic_diff(N, N + p)
    elif convention == "pessimistic":  # same with the group's negatives in front: M = N + neg
        M = N + neg
        contrib = p - (M - P) * _harmonic_diff(M, M + p)
    elif convention == "half":  # ceil(neg / 2) of the group's negatives in front
        M = N + np.ceil(neg / 2.0)
        contrib = p - (M - P) * _harmonic_diff(M, M + p)
    else:  # tie_aware: (p/n) sum_j (P+1+(j-1)s)/(N+j) = p s + (p/n)(P+1-s(N+1))(H_{N+n}-H_N)
        s = np.where(n > 1, (p - 1.0) / np.maximum(n - 1.0, 1.0), 0.0)
        contrib = p * s + (p / n) * (P + 1.0 - s * (N + 1.0)) * _harmonic_diff(N, N + n)
    return float(np.sum(contrib) / denom)


# ----------------------------------------------------------------------------- conventions

def ap_step(distances: ArrayLike, labels: ArrayLike) -> float:
    """AP with scikit-learn ``average_precision_score`` semantics on ``score = -distances``.

    ``labels`` take values in {1, 0, -1}; 1 is positive, 0 and -1 are negative (``pos_label=1``).
    Items with equal distance form one group (one threshold); groups g are taken by increasing
    distance and precision is read at the END of each group::

        AP = sum_g (pos_g / P) * TP(g) / (TP(g) + FP(g))

    with P the number of positives and TP(g), FP(g) the positives/negatives at distance <=
    that of group g. Returns NaN for empty input or when there is no positive; scikit-learn
    instead warns ("No positive class found in y_true") and returns 0.0 (version 1.9), and it
    rejects the three-valued labels {1, 0, -1} as multiclass whereas here 0 and -1 both count
    as negative.

    Positives at ranks 1 and 3 of four: (1/1 + 2/3) / 2; a positive tied with a negative is read
    at the end of the tie:

    >>> round(ap_step([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0]), 6)
    0.833333
    >>> ap_step([0.1, 0.1], [1, 0])
    0.5
    """
    d, lab = _check_inputs(distances, labels, (1, 0, -1))
    pos = lab == 1
    if not pos.any():
        return float("nan")
    n_pos, n_neg = _tie_groups(d, pos)
    return _ap_groups(n_pos, n_neg, "step", float(pos.sum()))


def ap_vlfeat(distances: ArrayLike, labels: ArrayLike, num_positives: int | None = None) -> float:
    """AP with VLFeat ``vl_pr`` ``info.ap`` semantics (TREC AP, no interpolation).

    ``labels`` take values in {1, 0, -1}: +1 positive, -1 negative, 0 ignored. vl_pr keeps
    0-labelled items in the ranking but counts them neither as TP nor FP, which leaves every
    precision unchanged, so they are simply removed here. The remaining items are sorted by
    increasing distance with a stable sort (MATLAB ``sort(scores, 'descend')`` keeps the input
    order of equal scores); with r_k the rank of the k-th positive in that order::

        AP = (1 / num_positives) * sum_k k / r_k

    i.e. vl_pr's ``sum(precision(sel)) / p`` where ``sel`` are the ranks at which recall
    increases and ``p`` is NUMPOSITIVES. ``num_positives`` defaults to the number of +1 labels
    and may be larger (must not be smaller): the extra positives are treated like vl_pr's
    surrogate positives with score -inf, never retrieved, precision 0, so they only enlarge the
    denominator. Returns NaN when ``num_positives`` is 0 (no positive and no num_positives) and
    0.0 when ``num_positives > 0`` but no positive is present.

    The 0-labelled item is ignored; a positive that was never retrieved halves the AP:

    >>> ap_vlfeat([0.1, 0.2, 0.3], [1, 0, -1])
    1.0
    >>> ap_vlfeat([0.1, 0.2, 0.3], [1, 0, -1], num_positives=2)
    0.5
    """
    d, lab = _check_inputs(distances, labels, (1, 0, -1))
    keep = lab != 0
    d, pos = d[keep], lab[keep] == 1
    denom = _check_num_positives(num_positives, int(pos.sum()))
    if denom == 0:
        return float("nan")
    ranks = np.flatnonzero(pos[np.argsort(d, kind="stable")]) + 1.0
    return float(np.sum(np.arange(1, ranks.size + 1) / ranks) / denom)


def ap_trapezoid(distances: ArrayLike, labels: ArrayLike, num_positives: int | None = None) -> float:
    """AP as in hpatches-benchmark (``python/utils/metrics.py``, ``pr``): trapezoid area under PR.

    ``labels`` take values in {1, 0}: 1 positive, 0 negative. Items are sorted by increasing
    distance with a stable mergesort (hpatches: ``argsort(-scores, kind='mergesort')`` on
    ``scores = -distances``). For K = 0..n (K = 0 being the empty prefix), with TP(K), FP(K)
    the counts among the first K items and P = ``num_positives``::

        recall(K) = TP(K) / P,   precision(K) = max(TP(K), 1e-10) / max(K, 1e-10)
        AP = np.trapezoid(precision, recall)

    so precision(0) = 1 at recall 0 and, exactly as in hpatches, the precision of a prefix
    without positives is 1e-10/K instead of 0 (this changes AP by < 1e-10). ``num_positives``
    defaults to the number of positives and may be larger (hpatches ``numpos``): the missing
    positives are never retrieved, the curve stops at recall < 1 and the rest adds no area.
    Returns NaN when P is 0 (hpatches would return 0.0) and 0.0 when P > 0 and nothing
    positive is present (hpatches crashes on an empty list there).

    A positive ranked second: the curve goes from (recall 0, precision 1e-10) to (1, 1/2), an area
    of 1/4 + 5e-11:

    >>> ap_trapezoid([0.1, 0.2], [1, 0])
    1.0
    >>> round(ap_trapezoid([0.1, 0.2], [0, 1]), 9)
    0.25
    """
    d, lab = _check_inputs(distances, labels, (1, 0))
    pos = lab[np.argsort(d, kind="stable")] == 1
    denom = _check_num_positives(num_positives, int(pos.sum()))
    if denom == 0:
        return float("nan")
    tp = np.concatenate([[0.0], np.cumsum(pos)])
    k = np.arange(tp.size, dtype=np.float64)
    precision = np.maximum(tp, _SMALL) / np.maximum(k, _SMALL)
    return float(np.trapezoid(precision, tp / denom))


def ap_tie_aware(distances: ArrayLike, labels: ArrayLike) -> float:
    """Tie-aware AP (He et al., CVPR 2018): the mean AP over all orderings inside tie groups.

    ``labels`` take values in {1, 0, -1}; 1 positive, 0 and -1 negative. For a group of n items
    at one distance holding p positives, preceded by N items of which P are positive, the
    expected sum of precisions at its positives over the n! orderings of the group is::

        sum_{j=1}^{n} (p/n) * (P + 1 + (j-1)(p-1)/(n-1)) / (N + j)     ((P+1)/(N+1) if n == 1)

    and AP = (sum over groups) / (total positives). Evaluated in closed form with harmonic
    numbers (see :func:`ap_from_tie_groups`). Without ties this is the plain AP. Returns NaN for
    empty input or when there is no positive.

    A positive tied with a negative ranks first or second with equal probability, (1 + 1/2) / 2:

    >>> ap_tie_aware([0.1, 0.1], [1, 0])
    0.75
    >>> round(ap_tie_aware([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0]), 6)
    0.833333
    """
    d, lab = _check_inputs(distances, labels, (1, 0, -1))
    pos = lab == 1
    if not pos.any():
        return float("nan")
    n_pos, n_neg = _tie_groups(d, pos)
    return _ap_groups(n_pos, n_neg, "tie_aware", float(pos.sum()))


def ap_from_tie_groups(n_pos, n_neg, convention: str, num_positives=None) -> float:
    """AP from sufficient statistics: counts per tie group, groups sorted by increasing distance.

    ``n_pos[g]`` / ``n_neg[g]`` are the numbers of positives / negatives at the g-th smallest
    distance (non-negative integers; empty groups are allowed and contribute nothing). With
    N_g, P_g the items / positives in groups before g, n = n_pos[g] + n_neg[g], p = n_pos[g],
    the per-group sums of precision at positives are

    - ``"step"``: p * (P_g + p) / (N_g + n) (precision at the group end; = :func:`ap_step`);
    - ``"tie_aware"``: He et al.'s expectation (= :func:`ap_tie_aware`);
    - ``"optimistic"``: positives first, sum_{j=1}^{p} (P_g + j) / (N_g + j);
    - ``"pessimistic"``: positives last, sum_{j=1}^{p} (P_g + j) / (N_g + n - p + j);
    - ``"half"``: ceil((n - p) / 2) of the group's negatives first, sum_{j=1}^{p} (P_g + j) /
      (N_g + ceil((n - p) / 2) + j) (one positive: the C++ workbench's rank L + 1 + ceil(t/2));

    and AP = total / ``num_positives`` (default sum(n_pos); may be larger, unretrieved positives
    counting as precision 0). The sums over j use H_b - H_a (harmonic numbers, exact table below
    64, Euler-Maclaurin series above), so the cost is O(#groups) vectorised. Returns NaN when
    the denominator is 0.
    """
    p = _check_counts(n_pos, "n_pos")
    neg = _check_counts(n_neg, "n_neg")
    if neg.shape != p.shape:
        raise ValueError(f"n_neg has length {neg.size} but n_pos has length {p.size}")
    if convention not in GROUP_CONVENTIONS:
        raise ValueError(f"convention must be one of {GROUP_CONVENTIONS}, got {convention!r}")
    denom = _check_num_positives(num_positives, int(p.sum()))
    return _ap_groups(p, neg, convention, float(denom))


def ap_tie_aware_from_histograms(hist_pos, hist_neg) -> float:
    """Tie-aware AP for integer distances from histograms, O(len(hist)).

    ``hist_pos[d]`` / ``hist_neg[d]`` count the positives / negatives at distance d (e.g.
    Hamming distances 0..bits). Bins are the tie groups (empty bins contribute nothing), so this
    equals :func:`ap_tie_aware` on the materialised list. NaN when there is no positive.
    """
    p = _check_counts(hist_pos, "hist_pos")
    neg = _check_counts(hist_neg, "hist_neg")
    if neg.shape != p.shape:
        raise ValueError(f"hist_neg has length {neg.size} but hist_pos has length {p.size}")
    return _ap_groups(p, neg, "tie_aware", float(p.sum()))


def ap_quantized(distances, labels, n_q, d_min=None, d_max=None) -> float:
    """Quantised AP estimator (He et al. 2018; FastAP; R2D2 ``APLoss``) with n_q soft bins.

    ``labels`` take values in {1, 0, -1}; 1 positive, 0 and -1 negative. Bin centres
    c_b = d_min + b * (d_max - d_min) / (n_q - 1), b = 0..n_q-1 (defaults: min and max of
    ``distances``). Each item sits at t = (d - d_min) / (c_1 - c_0), clipped to [0, n_q - 1]
    (items outside the range go fully to the end bins), and gives weight 1 - (t - floor t) to bin
    floor t and t - floor t to the next one (triangular kernel, weights sum to 1). With soft
    counts a_b (all items) and q_b (positives)::

        precision_b = cumsum(q)_b / cumsum(a)_b,   AP = sum_b precision_b * q_b / sum_b q_b

    If every distinct distance lies exactly on a bin centre (e.g. integer distances with
    d_min=0, d_max=bits, n_q=bits+1), the bins are exactly the tie groups and AP equals
    :func:`ap_step`. As n_q grows, distinct distances stop sharing bins and the gap to
    :func:`ap_step` shrinks, but for arbitrary real distances it does NOT vanish: once no two
    distinct distances share a bin, a positive split with share w into its lower bin sees
    precision (TP + w)/(N + w) there instead of (TP + 1)/(N + 1) (N items, TP positives ranked
    before it), so ap_step - AP = (1/P) sum_pos w(1-w)(N-TP)/((N+w)(N+1)), which lies in
    [0, (1/P) sum_pos (N-TP)/(4N(N+1))] (see :func:`quantized_ap_gap`). NaN for empty input or
    without positives. ``n_q`` must be an integer >= 2.
    """
    d, lab = _check_inputs(distances, labels, (1, 0, -1))
    if not _is_int(n_q) or n_q < 2:
        raise ValueError(f"n_q must be an integer >= 2, got {n_q!r}")
    pos = (lab == 1).astype(np.float64)
    if d.size == 0 or pos.sum() == 0:
        return float("nan")
    lo = float(d.min() if d_min is None else d_min)
    hi = float(d.max() if d_max is None else d_max)
    for name, v in (("d_min", lo), ("d_max", hi)):
        if not np.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v}")
    if lo > hi:
        raise ValueError(f"d_min ({lo}) must be <= d_max ({hi})")
    last = n_q - 1
    if hi > lo:
        t = np.clip((d - lo) * (last / (hi - lo)), 0.0, last)
    else:
        t = np.where(d <= lo, 0.0, float(last))
    b = np.minimum(np.floor(t), last - 1).astype(np.int64)
    w_hi = t - b
    w_lo = 1.0 - w_hi
    a = np.bincount(b, w_lo, n_q) + np.bincount(b + 1, w_hi, n_q)
    q = np.bincount(b, w_lo * pos, n_q) + np.bincount(b + 1, w_hi * pos, n_q)
    ca, cq = np.cumsum(a), np.cumsum(q)
    prec = np.divide(cq, ca, out=np.zeros(n_q), where=ca > 0)
    return float(np.sum(prec * q) / pos.sum())


def quantized_ap_gap(distances, labels, n_q) -> tuple[float, float, float]:
    """``(ap_quantized(distances, labels, n_q), ap_step(distances, labels), |difference|)``."""
    aq = ap_quantized(distances, labels, n_q)
    ae = ap_step(distances, labels)
    return aq, ae, abs(aq - ae)


# ----------------------------------------------------------------------------- the registry (verification.ap_convention)


@dataclass(frozen=True)
class APConvention:
    """An AP convention of keypoint verification's pooled list (protocols section 4)."""

    name: str
    # AP of a materialised list: (distances, labels +1 / -1, in the list's order; it ranks by distance
    # itself, ties in list order where it needs an order) -> AP
    ap: Callable[[np.ndarray, np.ndarray], float]
    # the ap_from_tie_groups convention giving the same AP from per-tie-group counts, or None when
    # the AP depends on the order inside ties (then candidates 'all', whose list is never built,
    # leaves it NaN and the config refuses it as the headline)
    tie_groups: str | None

    @property
    def column(self) -> str:
        """Its per-scene column (the verification ``scene`` Parquet files)."""
        return f"verification_ap_{self.name}"

    @property
    def report_column(self) -> str:
        """Its column of the comparison table (mean over scenes with a positive)."""
        return f"keypoint_verification_ap_{self.name}"


def _positives(labels: np.ndarray) -> np.ndarray:
    return (labels == 1).astype(np.int8)


# In column order. Labels of the pooled list are +1 / -1: step, tie_aware and trapezoid take them
# as 1 / 0, vlfeat as +1 / -1 (its 0 = ignored never occurs).
AP_CONVENTIONS: dict[str, APConvention] = {c.name: c for c in (
    APConvention("step", lambda d, lab: ap_step(d, _positives(lab)), "step"),
    APConvention("tie_aware", lambda d, lab: ap_tie_aware(d, _positives(lab)), "tie_aware"),
    APConvention("vlfeat", lambda d, lab: ap_vlfeat(d, lab), None),
    APConvention("trapezoid", lambda d, lab: ap_trapezoid(d, _positives(lab)), None),
)}
QUANTIZED_COLUMN = "verification_ap_quantized"  # ap_quantized's estimate (verification.quantized_bins), after the conventions


def verification_ap_columns() -> list[str]:
    """The per-scene AP columns, in order: one per convention, then the quantised estimate."""
    return [c.column for c in AP_CONVENTIONS.values()] + [QUANTIZED_COLUMN]
