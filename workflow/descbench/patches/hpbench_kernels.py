"""Numba kernels of :mod:`descbench.patches.hpbench`: pure array functions, no I/O.

Two groups:

* **NumPy legacy MT19937 stream** (``np.random.RandomState``), to regenerate hpatches-benchmark's
  task files call for call but without its per-row Python calls. The state is the legacy
  ``RandomState.get_state()`` pair ``(key uint32[624], pos)``; ``pos`` lives in an int64[1] array
  so the kernels advance it (read at entry, written at exit) and the caller writes it back with ``set_state``. What is
  reproduced (NumPy's ``mtrand.pyx`` / ``distributions.c``, frozen for the legacy generator):

  - ``next_uint32``: the reference MT19937 (Matsumoto & Nishimura 1998): regenerate the 624
    words when ``pos == 624``, then temper ``key[pos]``;
  - ``randint(k)`` / ``randint(0, k, size)`` (dtype int64, ``k <= 2^32``): with ``rng = k - 1``,
    no draw at all when ``rng == 0``, otherwise masked rejection: ``mask`` = the smallest
    ``2^b - 1 >= rng``, draw ``next_uint32() & mask`` until it is ``<= rng``;
  - ``choice(arange(k), 2, replace=False)`` = ``permutation(k)[:2]``; ``permutation(k)``
    shuffles ``arange(k)`` with the legacy Fisher-Yates loop ``for i = k-1 .. 1: j =
    random_interval(i); swap(x[i], x[j])``, where ``random_interval(i)`` is the same masked
    rejection with ``rng = i``. So a row consumes exactly the draws of k - 1 bounded integers.

* **Exact distance kernels** for the three evaluations: row-wise keys of given pairs, and the
  retrieval counts (distractors closer than each positive, at every pool-size cut) from a float32
  BLAS screen with a rigorous band re-evaluated in float64 (see :func:`retrieval_counts_l2`).
  Keys: float32 descriptors -> ``s = sum_k (a_k - b_k)^2`` accumulated in float64 in index order
  (:func:`descbench.metrics.kernels.sqdist64`, the ranking key of the whole workbench; the L2
  distance is ``sqrt(s)``); uint8 packed bits -> Hamming distance (uint64 words).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from descbench.metrics.kernels import hamming_words, sqdist64

_MT_N = 624
_MT_M = 397


# --------------------------------------------------------------------------- legacy MT19937


@njit(cache=True)
def _mt_regenerate(key):
    """One MT19937 twist of the 624-word state, in place (the reference three loops)."""
    for i in range(_MT_N - _MT_M):
        y = (np.int64(key[i]) & 0x80000000) | (np.int64(key[i + 1]) & 0x7FFFFFFF)
        key[i] = np.uint32(np.int64(key[i + _MT_M]) ^ (y >> 1) ^ ((y & 1) * 0x9908B0DF))
    for i in range(_MT_N - _MT_M, _MT_N - 1):
        y = (np.int64(key[i]) & 0x80000000) | (np.int64(key[i + 1]) & 0x7FFFFFFF)
        key[i] = np.uint32(np.int64(key[i + _MT_M - _MT_N]) ^ (y >> 1) ^ ((y & 1) * 0x9908B0DF))
    y = (np.int64(key[_MT_N - 1]) & 0x80000000) | (np.int64(key[0]) & 0x7FFFFFFF)
    key[_MT_N - 1] = np.uint32(np.int64(key[_MT_M - 1]) ^ (y >> 1) ^ ((y & 1) * 0x9908B0DF))


@njit(cache=True, inline="always")
def _mt_next32(key, p):
    """``(output, new position)``: the next 32-bit output (int64 in [0, 2^32)) at position p."""
    if p >= _MT_N:
        _mt_regenerate(key)
        p = 0
    y = np.int64(key[p])
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y, p + 1


@njit(cache=True, inline="always")
def _mt_bounded(key, p, rng):
    """``(value, new position)``: legacy masked rejection draw in [0, rng] (``randint(rng + 1)``,
    ``random_interval(rng)``); ``rng == 0`` consumes nothing. Requires 0 <= rng < 2^32."""
    if rng == 0:
        return np.int64(0), p
    mask = np.int64(rng)
    mask |= mask >> 1
    mask |= mask >> 2
    mask |= mask >> 4
    mask |= mask >> 8
    mask |= mask >> 16
    while True:
        y, p = _mt_next32(key, p)
        v = y & mask
        if v <= rng:
            return v, p


@njit(cache=True)
def mt_raw32(key, pos, n):
    """``n`` raw outputs (= ``RandomState.randint(0, 2**32, n, dtype=np.uint32)``), for tests."""
    out = np.empty(n, dtype=np.int64)
    p = pos[0]
    for i in range(n):
        out[i], p = _mt_next32(key, p)
    pos[0] = p
    return out


@njit(cache=True)
def mt_bounded_draws(key, pos, highs):
    """``[randint(h) for h in highs]`` on the legacy stream (every h >= 1), int64."""
    out = np.empty(highs.shape[0], dtype=np.int64)
    p = pos[0]
    for r in range(highs.shape[0]):
        out[r], p = _mt_bounded(key, p, highs[r] - 1)
    pos[0] = p
    return out


@njit(cache=True)
def mt_permutation_heads(key, pos, sizes):
    """``[permutation(k)[:2] for k in sizes]`` (= ``choice(arange(k), 2, replace=False)``), int64 [n, 2].

    Every row draws the k - 1 swap partners ``j_i = random_interval(i)``, i = k-1 .. 1, exactly
    as the shuffle does. Only the final values at positions 0 and 1 are needed: after the
    swaps the value at position p is ``arange(k)[tau_{k-1}(... tau_1(p))]`` with ``tau_i`` the
    transposition (i, j_i) (the LAST swap, i = 1, applies first), so each head is traced through
    the transpositions in O(k) without materialising the permutation. Every k must be >= 2.
    """
    n = sizes.shape[0]
    out = np.empty((n, 2), dtype=np.int64)
    kmax = 2
    for r in range(n):
        kmax = max(kmax, sizes[r])
    partner = np.empty(kmax, dtype=np.int64)
    p = pos[0]
    for r in range(n):
        k = sizes[r]
        # partner[i] = random_interval(i) for i = k-1 .. 1, written without the unpredictable
        # rejection branch: every draw is stored at partner[i] and i only moves on when it is
        # accepted (a rejected draw is overwritten by the next one); the mask shrinks when i
        # falls to half of it (the smallest 2^b - 1 >= i, as random_interval computes it)
        i = k - 1
        mask = np.int64(i)
        mask |= mask >> 1
        mask |= mask >> 2
        mask |= mask >> 4
        mask |= mask >> 8
        mask |= mask >> 16
        while i >= 1:
            y, p = _mt_next32(key, p)
            v = y & mask
            partner[i] = v
            i -= np.int64(v <= i)
            if i == mask >> 1:
                mask >>= 1
        a = np.int64(0)
        b = np.int64(1)
        for i in range(1, k):
            j = partner[i]
            if a == i:
                a = j
            elif a == j:
                a = i
            if b == i:
                b = j
            elif b == j:
                b = i
        out[r, 0] = a
        out[r, 1] = b
    pos[0] = p
    return out


# --------------------------------------------------------------------------- pair keys


@njit(cache=True, parallel=True)
def rowwise_keys_l2(a, b):
    """``out[i]`` = squared L2 of rows ``a[i]``, ``b[i]`` (float32) in float64, index order."""
    out = np.empty(a.shape[0], dtype=np.float64)
    for i in prange(a.shape[0]):
        out[i] = sqdist64(a[i], b[i])
    return out


@njit(cache=True, parallel=True)
def rowwise_keys_hamming(a, b):
    """``out[i]`` = Hamming distance of rows ``a[i]``, ``b[i]`` (uint64 words) as float64."""
    out = np.empty(a.shape[0], dtype=np.float64)
    for i in prange(a.shape[0]):
        out[i] = np.float64(hamming_words(a[i], b[i]))
    return out


# --------------------------------------------------------------------------- retrieval counts


@njit(cache=True, inline="always")
def _snapshot(out, qi, c, cnt):
    for p in range(cnt.shape[0]):
        out[qi, c, p] = cnt[p]


@njit(cache=True, parallel=True)
def retrieval_counts_l2(screen, r0, qdesc, ddesc, qn2, wr, exact, dseq, qseq, pos_keys, cuts, out):
    """Distractor counts of the retrieval lists from one float32 screen block (exact).

    screen  float32 [r, Nd]: ``fl32([q_i, 1] . [d_j, -|d_j|^2/2])`` of query rows r0 .. r0+r-1
            against every distractor, in file order (:func:`descbench.metrics.pairpass.screen_block`);
    qn2     float64 [Q]: ``|q|^2``; ``x = qn2 - 2 g`` estimates the exact key s_j with
            ``|x - s_j| <= wr[qi]`` (rigorous width of :func:`descbench.metrics.pairpass.l2_setup`,
            which also covers the float64 rounding of ``x +- w``); ``exact``: the screen is exact
            (integer descriptors, pairpass's certificate), so x IS the key;
    dseq    int64 [Nd]: sequence id of each distractor; qseq int64 [Q]: of each query;
    pos_keys float64 [Q, P]: exact keys of the query's positives (all jitters side by side);
    cuts    int64 [K] ascending: the numbers of masked distractors of each pool size (k - 5).
    out     int64 [Q, K, P]: ``out[q, c, p]`` = #{masked distractors j among the first cuts[c]
            (file order, the query's own sequence skipped): s_j < pos_keys[q, p]} (strict).

    Per value: ``x - w > max_p s_p`` -> farther than every positive (one comparison); else per
    positive ``x + w < s_p`` -> certainly closer, ``x - w > s_p`` -> certainly not closer,
    otherwise s_j is evaluated in float64 (:func:`sqdist64`) and compared exactly. So the
    counts equal those of a float64 brute force whatever the BLAS.
    """
    r = screen.shape[0]
    nd = screen.shape[1]
    n_pos = pos_keys.shape[1]
    n_cut = cuts.shape[0]
    for t in prange(r):
        qi = r0 + t
        g = screen[t]
        q = qdesc[qi]
        a2 = qn2[qi]
        w = wr[qi]
        own = qseq[qi]
        sp = pos_keys[qi]
        smax = sp[0]
        for p in range(n_pos):
            smax = max(smax, sp[p])
        cnt = np.zeros(n_pos, dtype=np.int64)
        m = 0
        c = 0
        for j in range(nd):
            if dseq[j] == own:
                continue
            while c < n_cut and cuts[c] == m:
                _snapshot(out, qi, c, cnt)
                c += 1
            if c == n_cut:
                break
            m += 1
            x = a2 - 2.0 * np.float64(g[j])
            if x - w > smax:
                continue
            dj = -1.0
            for p in range(n_pos):
                if x + w < sp[p]:
                    cnt[p] += 1
                elif x - w <= sp[p]:
                    if dj < 0.0:
                        dj = x if exact else sqdist64(q, ddesc[j])
                    if dj < sp[p]:
                        cnt[p] += 1
        while c < n_cut:
            _snapshot(out, qi, c, cnt)
            c += 1


@njit(cache=True)
def _count_from_keys(keys, dseq, own, sp, cuts, out, qi):
    """The counting of :func:`retrieval_counts_l2` for one query from its exact keys [Nd]."""
    n_pos = sp.shape[0]
    n_cut = cuts.shape[0]
    cnt = np.zeros(n_pos, dtype=np.int64)
    m = 0
    c = 0
    for j in range(keys.shape[0]):
        if dseq[j] == own:
            continue
        while c < n_cut and cuts[c] == m:
            _snapshot(out, qi, c, cnt)
            c += 1
        if c == n_cut:
            break
        m += 1
        for p in range(n_pos):
            cnt[p] += keys[j] < sp[p]
    while c < n_cut:
        _snapshot(out, qi, c, cnt)
        c += 1


@njit(cache=True, parallel=True)
def retrieval_counts_hamming(qwords, dwords, dseq, qseq, pos_keys, cuts, out):
    """:func:`retrieval_counts_l2` for Hamming distances (uint64 words): every key is computed
    (exact integers, no screen)."""
    for qi in prange(qwords.shape[0]):
        keys = np.empty(dwords.shape[0], dtype=np.float64)
        for j in range(dwords.shape[0]):
            keys[j] = np.float64(hamming_words(qwords[qi], dwords[j]))
        _count_from_keys(keys, dseq, qseq[qi], pos_keys[qi], cuts, out, qi)


@njit(cache=True, parallel=True)
def retrieval_counts_direct_l2(qdesc, ddesc, dseq, qseq, pos_keys, cuts, out):
    """:func:`retrieval_counts_l2` without a screen, every key evaluated in float64 (the fallback
    for inputs so large that the float32 screen could overflow; also the reference in tests)."""
    for qi in prange(qdesc.shape[0]):
        keys = np.empty(ddesc.shape[0], dtype=np.float64)
        for j in range(ddesc.shape[0]):
            keys[j] = sqdist64(qdesc[qi], ddesc[j])
        _count_from_keys(keys, dseq, qseq[qi], pos_keys[qi], cuts, out, qi)


# --------------------------------------------------------------------------- verification pairs

_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


@njit(cache=True, inline="always")
def _strip_index(t, jitter):
    """PATCH_TYPES position of type index t (0 -> ref, k -> <jitter>k) for jitter 0/1/2 (e/h/t)."""
    return 0 if t == 0 else 1 + 5 * jitter + (t - 1)


@njit(cache=True, nogil=True)
def pair_keys_group_l2(a, b, t1, i1, t2, i2, rows, out):
    """``out[j, r]`` for r in ``rows`` and jitter j = 0, 1, 2 (e, h, t): squared L2 (float64,
    index order, :func:`sqdist64`) between patch ``i1[r]`` of type ``t1[r]`` of sequence a and
    patch ``i2[r]`` of type ``t2[r]`` of sequence b (type index 0 -> ref, k -> <j>k). ``a`` / ``b``:
    the 16 strips of each sequence as a tuple of arrays in PATCH_TYPES order (numba indexes a
    homogeneous tuple at run time; no gathered copy). The three jitters' sums run in one loop
    (independent accumulators, each still summed in index order: identical values, three times
    the instruction-level parallelism of three separate passes)."""
    for e in range(rows.shape[0]):
        r = rows[e]
        xe = a[_strip_index(t1[r], 0)][i1[r]]
        xh = a[_strip_index(t1[r], 1)][i1[r]]
        xt = a[_strip_index(t1[r], 2)][i1[r]]
        ye = b[_strip_index(t2[r], 0)][i2[r]]
        yh = b[_strip_index(t2[r], 1)][i2[r]]
        yt = b[_strip_index(t2[r], 2)][i2[r]]
        se = 0.0
        sh = 0.0
        st = 0.0
        for k in range(xe.shape[0]):
            de = np.float64(xe[k]) - np.float64(ye[k])
            dh = np.float64(xh[k]) - np.float64(yh[k])
            dt = np.float64(xt[k]) - np.float64(yt[k])
            se += de * de
            sh += dh * dh
            st += dt * dt
        out[0, r] = se
        out[1, r] = sh
        out[2, r] = st


@njit(cache=True, nogil=True)
def pair_keys_group_hamming(a, b, t1, i1, t2, i2, rows, out):
    """:func:`pair_keys_group_l2` for uint8 packed bits: Hamming distances (float64)."""
    for e in range(rows.shape[0]):
        r = rows[e]
        for j in range(3):
            x = a[_strip_index(t1[r], j)][i1[r]]
            y = b[_strip_index(t2[r], j)][i2[r]]
            s = 0
            for k in range(x.shape[0]):
                s += _POPCOUNT8[x[k] ^ y[k]]
            out[j, r] = np.float64(s)
