"""Exact nearest / second-nearest descriptor neighbours and mutual nearest-neighbour matches.

Distances: float32 descriptors -> Euclidean L2, ``sqrt(d)`` with ``d = sum_k (q_k - c_k)^2``
accumulated in float64 in index order k = 0..D-1 (ranking is on this float64 ``d``);
uint8 packed-bit descriptors -> Hamming distance (returned as float64). Ties: the lowest
candidate index first. Results equal a float64 brute force (full distance matrix + stable sort),
whatever the BLAS library, its blocking or thread count.

Method (float32): the screen ``g_j = fl32([q, 1] . [c_j, -|c_j|^2/2])`` (one BLAS product per
block of query rows, at most ``chunk_mb`` MiB per block) approximates ``G_j = (|q|^2 - d_j) / 2``,
so larger screen = closer. Per query row, the two largest screen values g(1) >= g(2) are found;
every candidate with ``g_j >= g(2) - T`` (the *band*) is re-evaluated in float64 and the best two
in (d, index) order are returned. See :func:`nearest_two` for why this is rigorous. The pass
itself is :func:`descbench.metrics.pairpass.pair_pass`, which also gives the column-wise
nearest neighbours (for mutual matches) from the same screen: one BLAS product per row block.
"""

from __future__ import annotations

import numpy as np

from descbench.errors import DataError
from descbench.metrics.pairpass import pair_pass
from descbench.metrics.retrieval import screen_tolerance

__all__ = ["nearest_two", "mutual_nearest", "l2_band_tolerance"]

_U64 = 2.0**-53


# --------------------------------------------------------------------------- helpers


def l2_band_tolerance(qdesc: np.ndarray, cnorm2: np.ndarray) -> np.ndarray:
    """Per query, the band half-width T used by :func:`nearest_two` (float64 [Q]).

    ``T = 4 E + F + U`` where, for one screen value, E is the float32 BLAS error bound of
    :func:`descbench.metrics.retrieval.screen_tolerance` (which returns 4 E, i.e. twice the bound
    on the sum of two screen errors), ``F = gamma64_{D+2} (|q| + max|c|)^2`` bounds the sum of two
    float64 evaluation errors of ``d`` expressed in screen units (``|d_hat - d| <= gamma64_{D+2} d``,
    ``d <= (|q| + |c|)^2``, screen = d / 2), and ``U = 4 (D + 1) 2^-149`` covers gradual underflow
    of the float32 products (absolute error <= 2^-150 each, not covered by the relative bound).
    """
    dim = qdesc.shape[1]
    cmax = float(np.sqrt(cnorm2.max())) if cnorm2.size else 0.0
    qn = np.sqrt(np.einsum("ij,ij->i", qdesc, qdesc, dtype=np.float64))
    m = dim + 2
    gamma64 = m * _U64 / (1 - m * _U64)
    return screen_tolerance(qdesc, cnorm2) + gamma64 * (qn + cmax) ** 2 + 4.0 * (dim + 1) * 2.0**-149


def _validate(a: np.ndarray, b: np.ndarray, names=("query", "candidate")) -> tuple[np.ndarray, np.ndarray]:
    arrs = []
    for x, name in zip((a, b), names):
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.ndim != 2:
            raise DataError(f"{name} descriptors must be a 2-D array [N, D], got shape {x.shape}")
        if x.dtype not in (np.float32, np.uint8):
            raise DataError(
                f"{name} descriptors have dtype {x.dtype}; expected float32 (L2) or uint8 packed bits "
                "(Hamming) - convert the descriptors when writing them"
            )
        if x.shape[1] == 0:
            raise DataError(f"{name} descriptors have zero width (shape {x.shape})")
        arrs.append(x)
    a, b = arrs
    if a.dtype != b.dtype or a.shape[1] != b.shape[1]:
        raise DataError(
            f"descriptor mismatch: {names[0]} descriptors are {a.dtype} x {a.shape[1]}, "
            f"{names[1]} descriptors are {b.dtype} x {b.shape[1]}; both images must use one descriptor"
        )
    if a.dtype == np.float32:
        for x, name in zip((a, b), names):
            if x.size and not np.isfinite(x).all():
                bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
                raise DataError(f"{name} descriptors contain NaN or inf (first bad row {bad})")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


def _nearest(qdesc: np.ndarray, cdesc: np.ndarray, chunk_mb: float, second: bool, cols: bool = False):
    """Validated inputs -> (idx1, dist1, idx2, dist2, col_idx) from one
    :func:`descbench.metrics.pairpass.pair_pass`; with second=False idx2/dist2 are not exact."""
    res = pair_pass(qdesc, cdesc, None, chunk_mb, rows=2 if second else 1, cols=cols)
    dist1, dist2 = res.key1, res.key2
    if qdesc.dtype != np.uint8:
        np.sqrt(dist1, out=dist1)
        np.sqrt(dist2, out=dist2)
    return res.idx1, dist1, res.idx2, dist2, res.col_idx


# --------------------------------------------------------------------------- public API


def nearest_two(qdesc: np.ndarray, cdesc: np.ndarray, chunk_mb: float = 64.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nearest and second-nearest row of ``cdesc`` for every row of ``qdesc``.

    Returns ``(idx1, dist1, idx2, dist2)``: int64 indices and float64 distances, each of length
    ``len(qdesc)``; index -1 and distance inf where there are fewer than 1 (resp. 2) candidates.
    float32 descriptors: L2 distance ``sqrt(d)``, ``d`` the float64 sum of squared differences
    (ranking on d); uint8 packed bits: Hamming distance. Ties: lowest index first. Memory: the
    float32 screen is held in row blocks of at most ``chunk_mb`` MiB (never N1 x N2 float64).

    Why the float32 screen + band recheck is exact. Let ``d_hat_j`` be the float64 distance
    (the definition) and d_j the real one; ``G_j = (|q|^2 - d_j)/2``. With E the bound on one
    screen error ``|g_j - G_j|`` and F/2 the bound on ``|d_hat_j - d_j| / 2`` (see
    :func:`l2_band_tolerance`, T >= 2E + F), ``g_i - g_x > T`` implies
    ``d_hat_x - d_hat_i >= 2 (G_i - G_x) - F > 2 (T - 2E) - F >= 0``: i is strictly closer than x
    in the float64 definition. Let i1 != i2 attain the two largest screen values g(1) >= g(2).
    Any candidate x outside the band (``g_x < g(2) - T <= g(1) - T``) is strictly farther than
    both i1 and i2, so at least two candidates precede it in (d_hat, index) order and it can be
    neither the first nor the second. Hence the exact best two lie in the band, and re-evaluating
    every band member in float64 and keeping the best two in (d_hat, index) order returns exactly
    the brute-force answer. The band threshold is rounded down to a float32 (more candidates,
    never fewer). Inputs so large that the float32 screen could overflow use a float64 brute
    force. Hamming distances are integers computed exactly (no screen).

    The first query is as far from both candidates (a tie: the lower index is nearest):

    >>> q = np.array([[0.0, 0.0], [3.0, 4.0]], dtype=np.float32)
    >>> c = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    >>> idx1, dist1, idx2, dist2 = nearest_two(q, c)
    >>> idx1.tolist(), dist1.tolist(), idx2.tolist()
    ([0, 0], [1.0, 4.47213595499958], [1, 1])
    """
    q, c = _validate(qdesc, cdesc)
    return _nearest(q, c, chunk_mb, second=True)[:4]


def mutual_nearest(a_desc: np.ndarray, b_desc: np.ndarray, chunk_mb: float = 64.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mutual nearest-neighbour matches between two descriptor sets.

    ``(ia, ib, dist)``: a[ia] and b[ib] are each other's nearest neighbour (exact, ties to the
    lowest index, as :func:`nearest_two`); int64, int64, float64 distance; sorted by ia.
    The nearest neighbour alone is found with the band anchored at the largest screen value
    (same argument as :func:`nearest_two` with one candidate instead of two); the nearest a of
    every b comes from the same screen blocks (column-wise, see
    :mod:`descbench.metrics.pairpass`): one BLAS product per block of a's rows, no b -> a product.

    b[0] is the nearest of both a[0] and a[2] but chooses a[2]; a[1] and b[1] choose each other:

    >>> a = np.array([[0.0], [5.0], [1.0]], dtype=np.float32)
    >>> b = np.array([[1.2], [5.0]], dtype=np.float32)
    >>> ia, ib, dist = mutual_nearest(a, b)
    >>> ia.tolist(), ib.tolist(), dist.round(6).tolist()
    ([1, 2], [1, 0], [0.0, 0.2])
    """
    a, b = _validate(a_desc, b_desc, names=("image-a", "image-b"))
    ab, dab, _, _, ba = _nearest(a, b, chunk_mb, second=False, cols=True)
    return mutual_from(ab, ba, dab)


def mutual_from(ab: np.ndarray, ba: np.ndarray, dab: np.ndarray | None = None):
    """Mutual pairs from the two nearest-neighbour maps: ``(ia, ib, dist)`` with ``ba[ab[ia]] == ia``
    (ab: nearest b of each a, -1 if none; ba: nearest a of each b; dist = dab[ia], or None)."""
    ia = np.flatnonzero(ab >= 0)
    ia = ia[ba[ab[ia]] == ia].astype(np.int64)
    return ia, ab[ia], (dab[ia] if dab is not None else None)
