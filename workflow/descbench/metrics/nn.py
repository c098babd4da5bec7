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
in (d, index) order are returned. See :func:`nearest_two` for why this is rigorous.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from descbench.errors import DataError
from descbench.metrics.kernels import _hamming, _round_down32, _sqdist64
from descbench.metrics.retrieval import pack_bits_to_words, prepare_l2_screen, query_blocks, screen_tolerance


@njit(cache=True, inline="always")
def _push_top2(d, j, b1, j1, b2, j2):
    """Offer candidate j at distance d to the running best two (strict '<': the earlier index
    keeps a tie, so scanning j in ascending order gives the lowest index)."""
    if d < b1:
        return d, j, b1, j1
    if d < b2:
        return b1, j1, d, j
    return b1, j1, b2, j2

__all__ = ["nearest_two", "mutual_nearest", "l2_band_tolerance"]

_U64 = 2.0**-53
# Beyond this magnitude the float32 screen could overflow (|g_j| <= |q| |c| + |c|^2 / 2 and every
# partial sum is bounded by the same quantity); such inputs use the exact float64 brute force.
_SCREEN_LIMIT = 1e36


# --------------------------------------------------------------------------- kernels


@njit(cache=True, parallel=True)
def _top2_l2_screened(screen, rows, qdesc, cdesc, tol, second, idx1, dist1, idx2, dist2):
    """Best two candidates (float64 squared L2, lowest index on ties) of each screened row.

    screen float32 [r, N]: larger = closer; rows int64 [r]: query index of each screen row;
    tol float64 [Q]: band half-width (see :func:`l2_band_tolerance`); second: find the
    second-nearest too (band anchored at g(2)) or only the nearest (band anchored at g(1)).
    Outputs squared distances (the caller takes the square root).
    """
    r = rows.shape[0]
    n = cdesc.shape[0]
    for t in prange(r):
        qi = rows[t]
        g = screen[t]
        m1 = np.float32(-np.inf)
        m2 = np.float32(-np.inf)
        for j in range(n):  # the two largest screen values (with multiplicity)
            v = g[j]
            if v > m1:
                m2 = m1
                m1 = v
            elif v > m2:
                m2 = v
        ref = m2 if (second and n >= 2) else m1
        below = _round_down32(np.float64(ref) - tol[qi])  # a float32 <= g(ref) - T
        q = qdesc[qi]
        b1 = np.inf
        j1 = -1
        b2 = np.inf
        j2 = -1
        for j in range(n):  # ascending j + strict '<': lowest index wins a tie
            if g[j] >= below:
                d = _sqdist64(q, cdesc[j])
                b1, j1, b2, j2 = _push_top2(d, j, b1, j1, b2, j2)
        idx1[qi] = j1
        dist1[qi] = b1
        idx2[qi] = j2
        dist2[qi] = b2


@njit(cache=True, parallel=True)
def _top2_l2_exact(qdesc, cdesc, idx1, dist1, idx2, dist2):
    """Float64 brute force of the best two (squared L2); used when the screen could overflow."""
    nq = qdesc.shape[0]
    n = cdesc.shape[0]
    for i in prange(nq):
        q = qdesc[i]
        b1 = np.inf
        j1 = -1
        b2 = np.inf
        j2 = -1
        for j in range(n):
            d = _sqdist64(q, cdesc[j])
            b1, j1, b2, j2 = _push_top2(d, j, b1, j1, b2, j2)
        idx1[i] = j1
        dist1[i] = b1
        idx2[i] = j2
        dist2[i] = b2


@njit(cache=True, parallel=True)
def _top2_hamming(qwords, cwords, idx1, dist1, idx2, dist2):
    """Best two candidates by Hamming distance on uint64 words (lowest index on ties)."""
    nq = qwords.shape[0]
    n = cwords.shape[0]
    for i in prange(nq):
        b1 = np.int64(1) << 62
        j1 = -1
        b2 = np.int64(1) << 62
        j2 = -1
        for j in range(n):
            d = _hamming(qwords[i], cwords[j])
            b1, j1, b2, j2 = _push_top2(d, j, b1, j1, b2, j2)
        idx1[i] = j1
        dist1[i] = np.float64(b1) if j1 >= 0 else np.inf
        idx2[i] = j2
        dist2[i] = np.float64(b2) if j2 >= 0 else np.inf


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


def _nearest(qdesc: np.ndarray, cdesc: np.ndarray, chunk_mb: float, second: bool):
    """Validated inputs -> (idx1, dist1, idx2, dist2); with second=False idx2/dist2 are not exact."""
    if not chunk_mb > 0:
        raise ValueError(f"chunk_mb must be > 0, got {chunk_mb}")
    nq = qdesc.shape[0]
    n = cdesc.shape[0]
    idx1 = np.full(nq, -1, dtype=np.int64)
    idx2 = np.full(nq, -1, dtype=np.int64)
    dist1 = np.full(nq, np.inf)
    dist2 = np.full(nq, np.inf)
    if nq == 0 or n == 0:
        return idx1, dist1, idx2, dist2
    if qdesc.dtype == np.uint8:
        _top2_hamming(pack_bits_to_words(qdesc), pack_bits_to_words(cdesc), idx1, dist1, idx2, dist2)
        return idx1, dist1, idx2, dist2
    cnorm2 = np.einsum("ij,ij->i", cdesc, cdesc, dtype=np.float64)
    qmax = float(np.sqrt(np.einsum("ij,ij->i", qdesc, qdesc, dtype=np.float64).max()))
    cmax = float(np.sqrt(cnorm2.max()))
    if qmax * cmax + cmax * cmax > _SCREEN_LIMIT:
        _top2_l2_exact(qdesc, cdesc, idx1, dist1, idx2, dist2)
    else:
        qdesc, cdesc, qaug, caug, _ = prepare_l2_screen(qdesc, cdesc)
        tol = l2_band_tolerance(qdesc, cnorm2)
        indptr = np.arange(nq + 1, dtype=np.int64)  # every row takes part
        for rows in query_blocks(indptr, n, chunk_mb):
            screen = qaug[rows[0] : rows[-1] + 1] @ caug.T  # consecutive rows: a view, no copy
            _top2_l2_screened(screen, rows, qdesc, cdesc, tol, second, idx1, dist1, idx2, dist2)
    np.sqrt(dist1, out=dist1)
    np.sqrt(dist2, out=dist2)
    return idx1, dist1, idx2, dist2


# --------------------------------------------------------------------------- public API


def nearest_two(qdesc: np.ndarray, cdesc: np.ndarray, chunk_mb: float = 64.0):
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
    """
    q, c = _validate(qdesc, cdesc)
    return _nearest(q, c, chunk_mb, second=True)


def mutual_nearest(a_desc: np.ndarray, b_desc: np.ndarray, chunk_mb: float = 64.0):
    """Mutual nearest-neighbour matches between two descriptor sets.

    ``(ia, ib, dist)``: a[ia] and b[ib] are each other's nearest neighbour (exact, ties to the
    lowest index, as :func:`nearest_two`); int64, int64, float64 distance; sorted by ia.
    The nearest neighbour alone is found with the band anchored at the largest screen value
    (same argument as :func:`nearest_two` with one candidate instead of two).
    """
    a, b = _validate(a_desc, b_desc, names=("image-a", "image-b"))
    ab, dab, _, _ = _nearest(a, b, chunk_mb, second=False)
    ba, _, _, _ = _nearest(b, a, chunk_mb, second=False)
    ia = np.flatnonzero(ab >= 0)
    ia = ia[ba[ab[ia]] == ia].astype(np.int64)
    ib = ab[ia]
    return ia, ib, dab[ia]
