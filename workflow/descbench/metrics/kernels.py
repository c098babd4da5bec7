"""Numba kernels: pure array functions, no I/O, no Python objects.

Ranking is *exact*: descriptor distances are screened with a float32 BLAS product, and every
candidate whose screened value lies within a rigorous rounding-error bound of a relevant item's
value is re-evaluated in float64 directly. Ranks, ties and AP therefore equal those of a float64
brute force, whatever the BLAS library, its blocking or its thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

U32 = 2.0**-24  # unit roundoff of float32


# --------------------------------------------------------------------------- geometry


@njit(cache=True, parallel=True)
def spatial_nearest(points: np.ndarray, targets: np.ndarray):
    """For each point, the nearest target (Euclidean); the lowest index wins a tie.

    Returns ``(index int64[Q], distance float64[Q])``; index -1 and distance inf when there is
    no target. Brute force O(Q N), parallel over points.
    """
    q = points.shape[0]
    n = targets.shape[0]
    idx = np.full(q, -1, dtype=np.int64)
    dist = np.full(q, np.inf, dtype=np.float64)
    for i in prange(q):
        px = points[i, 0]
        py = points[i, 1]
        best = np.inf
        bj = -1
        for j in range(n):
            dx = targets[j, 0] - px
            dy = targets[j, 1] - py
            d2 = dx * dx + dy * dy
            if d2 < best:  # strict: the first (lowest) index is kept on ties
                best = d2
                bj = j
        idx[i] = bj
        dist[i] = np.sqrt(best)
    return idx, dist


@njit(cache=True)
def within_radius_csr(points: np.ndarray, targets: np.ndarray, radius: float, active: np.ndarray):
    """All targets within ``radius`` (inclusive) of each active point, as CSR (indptr, indices).

    Inactive points get no entries. Indices are ascending within a row.
    """
    q = points.shape[0]
    n = targets.shape[0]
    r2 = radius * radius
    counts = np.zeros(q, dtype=np.int64)
    for i in range(q):
        if not active[i]:
            continue
        for j in range(n):
            dx = targets[j, 0] - points[i, 0]
            dy = targets[j, 1] - points[i, 1]
            if dx * dx + dy * dy <= r2:
                counts[i] += 1
    indptr = np.zeros(q + 1, dtype=np.int64)
    for i in range(q):
        indptr[i + 1] = indptr[i] + counts[i]
    indices = np.empty(indptr[q], dtype=np.int64)
    for i in range(q):
        if not active[i]:
            continue
        p = indptr[i]
        for j in range(n):
            dx = targets[j, 0] - points[i, 0]
            dy = targets[j, 1] - points[i, 1]
            if dx * dx + dy * dy <= r2:
                indices[p] = j
                p += 1
    return indptr, indices


# --------------------------------------------------------------------------- ranking


@njit(cache=True, inline="always")
def _sqdist64(a, b) -> float:
    s = 0.0
    for k in range(a.shape[0]):
        d = np.float64(a[k]) - np.float64(b[k])
        s += d * d
    return s


@njit(cache=True, parallel=True)
def rank_counts_l2(gram, rows, qdesc, cdesc, cnorm2, cnorm, indptr, indices, less, equal, dexact):
    """Exact rank statistics of relevant items for squared-L2 distances.

    gram    float32 [r, N]: ``qdesc[rows] @ cdesc.T`` (BLAS screen; any rounding within gamma_D)
    rows    int64 [r]: query index of each gram row
    cnorm2  float64 [N]: |c_j|^2;  cnorm float64 [N]: |c_j|
    indptr, indices: CSR of relevant candidate indices per query
    Outputs per relevant entry e (position in ``indices``): ``less[e]`` = #{j: d_j < d_e},
    ``equal[e]`` = #{j: d_j == d_e} (including e itself), ``dexact[e]`` = d_e, with
    d_j = sum_k (q_k - c_jk)^2 evaluated in float64.

    The screen compares s_j = |c_j|^2 - 2 g_j (|q|^2 cancels). With u = 2^-24 and
    gamma = D u / (1 - D u), |fl(g_j) - q.c_j| <= gamma |q| |c_j| for any summation order, so
    two candidates whose screened values differ by more than 2 gamma |q| (|c_i| + |c_j|) (times
    a safety factor 2) are ordered correctly; closer ones are re-evaluated exactly.
    """
    r = rows.shape[0]
    n = cdesc.shape[0]
    dim = cdesc.shape[1]
    gamma = dim * U32 / (1.0 - dim * U32)
    cmax = 0.0
    for j in range(n):
        if cnorm[j] > cmax:
            cmax = cnorm[j]
    for t in prange(r):
        qi = rows[t]
        e0 = indptr[qi]
        e1 = indptr[qi + 1]
        nrel = e1 - e0
        if nrel == 0:
            continue
        q = qdesc[qi]
        qn = 0.0
        for k in range(dim):
            qn += np.float64(q[k]) * np.float64(q[k])
        qn = np.sqrt(qn)
        tol = 4.0 * gamma * qn * (2.0 * cmax) + 1e-300
        g = gram[t]
        sr = np.empty(nrel, dtype=np.float64)
        for e in range(nrel):
            j = indices[e0 + e]
            sr[e] = cnorm2[j] - 2.0 * np.float64(g[j])
            dexact[e0 + e] = _sqdist64(q, cdesc[j])
            less[e0 + e] = 0
            equal[e0 + e] = 0
        for j in range(n):
            sj = cnorm2[j] - 2.0 * np.float64(g[j])
            dj = -1.0  # exact distance, evaluated lazily
            for e in range(nrel):
                diff = sj - sr[e]
                if diff < -tol:
                    less[e0 + e] += 1
                elif diff <= tol:
                    if dj < 0.0:
                        dj = _sqdist64(q, cdesc[j])
                    if dj < dexact[e0 + e]:
                        less[e0 + e] += 1
                    elif dj == dexact[e0 + e]:
                        equal[e0 + e] += 1


@njit(cache=True, inline="always")
def _popcount64(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, inline="always")
def _hamming(a, b) -> np.int64:
    s = np.int64(0)
    for k in range(a.shape[0]):
        s += np.int64(_popcount64(a[k] ^ b[k]))
    return s


@njit(cache=True, parallel=True)
def rank_counts_hamming(qwords, cwords, indptr, indices, less, equal, dexact):
    """Exact rank statistics for Hamming distances on bits packed into uint64 words.

    Same outputs as :func:`rank_counts_l2` (``dexact`` holds the integer distance as float64).
    """
    q = qwords.shape[0]
    n = cwords.shape[0]
    for qi in prange(q):
        e0 = indptr[qi]
        e1 = indptr[qi + 1]
        nrel = e1 - e0
        if nrel == 0:
            continue
        dr = np.empty(nrel, dtype=np.int64)
        for e in range(nrel):
            dr[e] = _hamming(qwords[qi], cwords[indices[e0 + e]])
            less[e0 + e] = 0
            equal[e0 + e] = 0
            dexact[e0 + e] = np.float64(dr[e])
        for j in range(n):
            dj = _hamming(qwords[qi], cwords[j])
            for e in range(nrel):
                if dj < dr[e]:
                    less[e0 + e] += 1
                elif dj == dr[e]:
                    equal[e0 + e] += 1


# --------------------------------------------------------------------------- AP under ties

POLICY_CODES = {"expected": 0, "optimistic": 1, "pessimistic": 2, "half": 3}


@njit(cache=True)
def _group_ap_sum(policy, n_before, pos_before, n_group, pos_group):
    """Sum of precision values at the positives of one tie group.

    The group occupies ranks n_before+1 .. n_before+n_group and holds pos_group positives;
    pos_before positives precede it. expected: mean over all orderings of the group (He et al.
    2018): sum_{j=1}^{n} (p/n) (P + 1 + (j-1)(p-1)/(n-1)) / (N + j). optimistic: positives
    first; pessimistic: positives last; half: the single positive at rank N+1+ceil((n-1)/2).
    """
    N = np.float64(n_before)
    P = np.float64(pos_before)
    n = n_group
    p = pos_group
    s = 0.0
    if policy == 1:
        for j in range(1, p + 1):
            s += (P + j) / (N + j)
    elif policy == 2:
        for j in range(1, p + 1):
            s += (P + j) / (N + n - p + j)
    elif policy == 3:
        # Defined for one positive (config validation enforces gt=closest).
        rank = N + 1.0 + np.ceil((n - 1) / 2.0)
        s = p * (P + 1.0) / rank
    else:
        if n == 1:
            s = (P + 1.0) / (N + 1.0)
        else:
            frac = np.float64(p) / n
            slope = (p - 1.0) / (n - 1.0)
            for j in range(1, n + 1):
                s += frac * (P + 1.0 + (j - 1) * slope) / (N + j)
    return s


@njit(cache=True)
def _first_hit_prob(policy, n_before, n_group, pos_group, k):
    """P(the first positive has rank <= k) when the first positive group is (N, n, p)."""
    m = k - n_before
    if m <= 0:
        return 0.0
    if policy == 1:
        return 1.0
    if policy == 2:
        return 1.0 if n_before + n_group - pos_group + 1 <= k else 0.0
    if policy == 3:
        return 1.0 if n_before + 1 + (n_group - 1 + 1) // 2 <= k else 0.0
    if m >= n_group:
        return 1.0
    # 1 - C(n-m, p) / C(n, p)
    ratio = 1.0
    for i in range(pos_group):
        if n_group - m - i <= 0:
            return 1.0
        ratio *= (n_group - m - i) / (n_group - i)
    return 1.0 - ratio


@njit(cache=True)
def _group_recall_count(policy, n_before, n_group, pos_group, k):
    """Expected number of the group's positives ranked <= k."""
    m = k - n_before
    if m <= 0:
        return 0.0
    if policy == 1:
        return np.float64(min(m, pos_group))
    if policy == 2:
        return np.float64(max(0, min(m - (n_group - pos_group), pos_group)))
    if policy == 3:
        return pos_group * 1.0 if n_before + 1 + (n_group - 1 + 1) // 2 <= k else 0.0
    return pos_group * min(m, n_group) / np.float64(n_group)


@njit(cache=True)
def query_scores(indptr, dexact, less, equal, policy, ks, recall_ks):
    """Per-query AP, hit@k (first relevant within k) and recall@k from exact rank statistics.

    Returns ``ap[Q]`` (NaN where R = 0), ``hit[Q, len(ks)]``, ``recall[Q, len(recall_ks)]``,
    ``n_closer[Q]`` and ``n_tied[Q]`` (L and t of the first relevant group; -1 where R = 0).
    Relevant items with equal exact distance form one tie group (they share ``less``/``equal``).
    """
    q = indptr.shape[0] - 1
    ap = np.full(q, np.nan)
    hit = np.zeros((q, ks.shape[0]))
    rec = np.zeros((q, recall_ks.shape[0]))
    n_closer = np.full(q, -1, dtype=np.int64)
    n_tied = np.full(q, -1, dtype=np.int64)
    for i in range(q):
        e0 = indptr[i]
        r = indptr[i + 1] - e0
        if r == 0:
            continue
        order = np.argsort(dexact[e0 : e0 + r], kind="mergesort")
        s = 0.0
        pos_before = 0
        a = 0
        first = True
        while a < r:
            ea = e0 + order[a]
            b = a + 1
            while b < r and dexact[e0 + order[b]] == dexact[ea]:
                b += 1
            p = b - a
            nb = less[ea]
            ng = equal[ea]
            s += _group_ap_sum(policy, nb, pos_before, ng, p)
            if first:
                n_closer[i] = nb
                n_tied[i] = ng - 1
                for t in range(ks.shape[0]):
                    hit[i, t] = _first_hit_prob(policy, nb, ng, p, ks[t])
                first = False
            for t in range(recall_ks.shape[0]):
                rec[i, t] += _group_recall_count(policy, nb, ng, p, recall_ks[t])
            pos_before += p
            a = b
        ap[i] = s / r
        for t in range(recall_ks.shape[0]):
            rec[i, t] /= r
    return ap, hit, rec, n_closer, n_tied
