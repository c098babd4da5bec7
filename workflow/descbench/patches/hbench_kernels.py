"""Numba kernels of :mod:`descbench.patches.hbench`: exact top-k retrieval in a patch pool.

Pure array functions, no I/O. Ranking key (the definition every path uses):

* float32 descriptors: ``s = sum_k (q_k - c_k)^2`` accumulated in float64 in index order
  (:func:`descbench.metrics.kernels.sqdist64`), reported distance ``sqrt(s)``;
* uint8 packed bits (as uint64 words): the Hamming distance (:func:`descbench.metrics.kernels.hamming_words`).

Order: the query patch itself first (HBench requires it as the first returned patch), then every
other pool patch by (key, pool index): ties go to the patch that comes first in the pool.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from descbench.metrics.kernels import hamming_words, round_down32, sqdist64


@njit(cache=True)
def row_sqnorms64(x):
    """``|x_i|^2`` per row, float64 accumulation in index order (rows may be a strided view)."""
    out = np.empty(x.shape[0], dtype=np.float64)
    for i in range(x.shape[0]):
        s = 0.0
        for k in range(x.shape[1]):
            v = np.float64(x[i, k])
            s += v * v
        out[i] = s
    return out


@njit(cache=True, inline="always")
def _heap_push_min(heap, size, v):
    """Insert v into the min-heap ``heap[:size]`` (size < capacity); returns the new size."""
    pos = size
    heap[pos] = v
    while pos > 0:
        parent = (pos - 1) // 2
        if heap[parent] <= heap[pos]:
            break
        tmp = heap[parent]
        heap[parent] = heap[pos]
        heap[pos] = tmp
        pos = parent
    return size + 1


@njit(cache=True, inline="always")
def _heap_replace_min(heap, size, v):
    """Replace the minimum of the full min-heap ``heap[:size]`` by v and restore the heap."""
    heap[0] = v
    pos = 0
    while True:
        left = 2 * pos + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[pos] <= heap[child]:
            break
        tmp = heap[child]
        heap[child] = heap[pos]
        heap[pos] = tmp
        pos = child


@njit(cache=True, parallel=True)
def topk_l2_block(screen, r0, self_idx, cdesc, tol, m, out_idx, out_key):
    """Exact top-m OTHER pool patches of query rows ``r0 .. r0 + len(screen) - 1`` (L2).

    screen   float32 [r, N]: ``g_j = fl32([q, 1] . [c_j, -|c_j|^2/2])`` (larger = closer), the
             BLAS screen of each query row against the whole pool
    self_idx int64 [Q]: pool index of each query patch (its descriptor is ``cdesc[self_idx]``);
             the query itself is excluded here (the caller puts it first)
    cdesc    float32 [N, D] (a strided view is fine): the pool descriptors
    tol      float64 [Q]: band half-width T per query (:func:`descbench.metrics.nn.l2_band_tolerance`)
    m        number of other patches to return (top - 1)
    out_idx  int64 [Q, m], out_key float64 [Q, m]: pool indices and exact squared distances in
             (key, pool index) order; -1 / inf past the end when the pool has fewer than m others.

    Why exact: let g(m) be the m-th largest screen value among the others. For i among the m
    candidates with ``g_i >= g(m)`` and any x with ``g_x < g(m) - T <= g_i - T``, the bound T
    (two screen errors plus two float64 evaluation errors, see :func:`descbench.metrics.nn.nearest_two`)
    gives ``s_x > s_i`` strictly in the float64 definition, so at least m patches precede x and x
    is not in the top m. Every candidate inside the band ``g >= g(m) - T`` (threshold rounded down
    to float32) is re-evaluated in float64 and the band is ordered by (key, index) with a stable
    sort (candidates are collected in increasing index).
    """
    r = screen.shape[0]
    n = screen.shape[1]
    for t in prange(r):
        qi = r0 + t
        s = self_idx[qi]
        for b in range(m):
            out_idx[qi, b] = -1
            out_key[qi, b] = np.inf
        if m == 0:
            continue
        g = screen[t]
        heap = np.empty(m, dtype=np.float32)
        size = 0
        for j in range(n):
            if j == s:
                continue
            v = g[j]
            if size < m:
                size = _heap_push_min(heap, size, v)
            elif v > heap[0]:
                _heap_replace_min(heap, size, v)
        if size < m:  # fewer others than m: every other patch is returned
            thr = np.float32(-np.inf)
        else:
            thr = round_down32(np.float64(heap[0]) - tol[qi])
        nb = 0
        for j in range(n):
            if j != s and g[j] >= thr:
                nb += 1
        cand = np.empty(nb, dtype=np.int64)
        p = 0
        for j in range(n):
            if j != s and g[j] >= thr:
                cand[p] = j
                p += 1
        q = cdesc[s]
        keys = np.empty(nb, dtype=np.float64)
        for b in range(nb):
            keys[b] = sqdist64(q, cdesc[cand[b]])
        order = np.argsort(keys, kind="mergesort")
        take = min(m, nb)
        for b in range(take):
            out_idx[qi, b] = cand[order[b]]
            out_key[qi, b] = keys[order[b]]


@njit(cache=True, parallel=True)
def topk_hamming(qrows, self_idx, cwords, n_bits, m, out_idx, out_key):
    """Exact top-m OTHER pool patches of queries ``qrows`` (indices into ``self_idx``), Hamming.

    cwords uint64 [N, W]: the pool's packed bits; n_bits: the largest possible distance (64 W).
    Per query: all N distances (exact integers), a histogram over 0..n_bits gives the cutoff
    distance c (fewer than m others below c, at least m at or below c); the others below c and
    the first ``m - #{< c}`` at c in pool order are kept and ordered by (distance, index).
    Outputs as :func:`topk_l2_block` (``out_key`` holds the distance as float64).
    """
    n = cwords.shape[0]
    for t in prange(qrows.shape[0]):
        qi = qrows[t]
        s = self_idx[qi]
        for b in range(m):
            out_idx[qi, b] = -1
            out_key[qi, b] = np.inf
        if m == 0:
            continue
        q = cwords[s]
        d = np.empty(n, dtype=np.int64)
        hist = np.zeros(n_bits + 2, dtype=np.int64)
        for j in range(n):
            if j == s:
                d[j] = -1
                continue
            dj = hamming_words(q, cwords[j])
            d[j] = dj
            hist[dj] += 1
        cut = 0
        below = 0  # others with distance < cut
        while cut <= n_bits and below + hist[cut] < m:
            below += hist[cut]
            cut += 1
        take_at_cut = m - below
        nb = 0
        cand = np.empty(min(m, n), dtype=np.int64)
        for j in range(n):
            if j == s:
                continue
            if d[j] < cut:
                cand[nb] = j
                nb += 1
            elif d[j] == cut and take_at_cut > 0:
                cand[nb] = j
                nb += 1
                take_at_cut -= 1
        keys = np.empty(nb, dtype=np.float64)
        for b in range(nb):
            keys[b] = np.float64(d[cand[b]])
        order = np.argsort(keys, kind="mergesort")
        for b in range(nb):
            out_idx[qi, b] = cand[order[b]]
            out_key[qi, b] = keys[order[b]]
