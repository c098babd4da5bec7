"""One fused pass over all N1 x N2 descriptor pairs of an image pair (matching + classifier ROC).

For query rows i (image 1) and candidate columns j (image k), a single sweep over the pair table
gives at once, each exactly equal to a float64 brute force whatever the BLAS:

- **rows**: the nearest and second-nearest candidate of every query (:func:`descbench.metrics.nn.nearest_two`);
- **columns**: the nearest query of every candidate (for mutual nearest neighbours);
- **histogram**: the threshold-ROC slot counts of every pair key against sorted keys
  (:func:`descbench.metrics.classifier.threshold_histogram`).

Keys: float32 descriptors -> ``s = sum_k (q_k - c_k)^2`` accumulated in float64 in index order
(:func:`descbench.metrics.kernels.sqdist64`); uint8 packed bits -> Hamming distance. Ties go to
the lowest index. Distances reported are ``sqrt(s)`` (L2) or s (Hamming).

Method (float32): per block of consecutive query rows (at most ``chunk_mb`` MiB of screen), ONE
BLAS product :func:`screen_block` gives ``g_ij = fl32([q_i, 1] . [c_j, -|c_j|^2/2])``, and one
numba kernel reads every screen value once (the row's second read, for the row band, is from
cache). Per value it keeps the row's two largest screen values, forms the key estimate
``x = |q_i|^2 - 2 g_ij`` (float64) with ``|x - s_hat| <= w_i`` (a rigorous per-row width, see
:func:`l2_setup`), updates the column's running bound and bins x. Wherever the screen cannot
decide, the pair is re-evaluated in float64 (the definition):

- rows: every candidate with ``g >= g(2) - T_i`` (the band of :func:`descbench.metrics.nn.nearest_two`);
- columns: per candidate j and per thread, ``U_j`` = the running minimum of ``x_ij + w_i`` over
  the rows seen so far (>= the smallest exact key among them); a row with ``x_ij - w_i <= U_j``
  (after ``U_j`` includes it) is re-evaluated and offered to the running best ``(s, i)``
  (lexicographic, so ties go to the lowest i). The exact minimiser i* among a thread's rows
  satisfies ``x - w <= s_hat_i* <= U_j`` when it is seen, so it is always re-evaluated; the
  per-thread winners are merged lexicographically;
- histogram: a uniform bucket grid over the key range, with a margin ``M >= max w_i`` plus the
  grid's own rounding, tells for most x that no key lies within ``[x - w, x + w]`` (one table
  load, no search); otherwise the keys of the bucket are scanned and, if one lies within the
  interval, s is evaluated in float64.

**Exact-screen certificate.** If every descriptor value is an integer and
``max|q| max|c| + max|c|^2 / 2 < 2^22``, every partial sum of the screen dot product (in any
order, with or without FMA or wider accumulators) is a multiple of 1/2 below 2^22 in magnitude,
hence exactly representable in float32: the screen is exact, and so are ``|q|^2``, ``|c|^2``,
``x = |q|^2 - 2 g`` and the float64 key (integers below 2^53): ``x`` IS the key. Then the
tolerances are 0 (the kernels still use outward-rounded bounds) and nothing is re-evaluated in
float64 (rows, columns and bins use x). OpenCV SIFT descriptors (integers 0..255, norm ~512)
satisfy it; real-valued descriptors (RootSIFT, learned ones) take the general path.

Inputs so large that the float32 screen could overflow use a float64 brute force with the same
outputs; Hamming distances are exact integers (one kernel, every distance computed once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from descbench.metrics.kernels import hamming_words, round_down32, sqdist64
from descbench.metrics.retrieval import check_screen, pack_bits_to_words, screen_tolerance

__all__ = ["PassResult", "PairPass", "pair_pass", "screen_block", "key_table"]

_U64 = 2.0**-53
# Beyond this magnitude the float32 screen could overflow (|g_j| <= |q| |c| + |c|^2 / 2 and every
# partial sum is bounded by the same quantity); such inputs use the exact float64 brute force.
SCREEN_LIMIT = 1e36
_EXACT_LIMIT = 2.0**22  # exact-screen certificate bound on max|q| max|c| + max|c|^2 / 2
_CB = 64  # columns per vectorised block: the scalar column check runs only on blocks that need it


@dataclass
class PassResult:
    """Outputs of :func:`pair_pass` (arrays; None for parts not requested).

    idx1, key1, idx2, key2: per query, the nearest / second-nearest candidate and its key
    (-1 / inf when missing; with ``rows=1`` only idx1/key1 are exact). col_idx, col_key: per
    candidate, its nearest query. n_less, n_equal, n_above: the histogram of
    :func:`descbench.metrics.classifier.threshold_histogram`. n_products: BLAS products made.
    """

    idx1: np.ndarray | None = None
    key1: np.ndarray | None = None
    idx2: np.ndarray | None = None
    key2: np.ndarray | None = None
    col_idx: np.ndarray | None = None
    col_key: np.ndarray | None = None
    n_less: np.ndarray | None = None
    n_equal: np.ndarray | None = None
    n_above: int | None = None
    n_products: int = 0


# --------------------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _offer(d, j, b1, j1, b2, j2):
    """Offer candidate j at key d to the running best two (strict '<' with ascending j: the
    earlier index keeps a tie)."""
    if d < b1:
        return d, j, b1, j1
    if d < b2:
        return b1, j1, d, j
    return b1, j1, b2, j2


@njit(cache=True, fastmath={"reassoc", "contract"})
def _sqdist64_any_order(a, b):
    """Squared L2 in float64, summation order left to the compiler (vectorised): an estimate of
    the definition :func:`descbench.metrics.kernels.sqdist64`; both are within
    ``gamma_{D+2} s`` of the real value (any order, with or without FMA)."""
    s = 0.0
    for k in range(a.shape[0]):
        d = np.float64(a[k]) - np.float64(b[k])
        s += d * d
    return s


@njit(cache=True, inline="always")
def _n_below(keys, lo, hi, v):
    """``lo + #{p in [lo, hi): keys[p] < v}`` for sorted keys: the position of v among them (a
    linear scan that stops at the first key >= v: a bucket holds a few keys, and the scan was
    faster than a branch-free count over the bucket)."""
    p = lo
    while p < hi and keys[p] < v:
        p += 1
    return p


@njit(cache=True, inline="always")
def _slot_dirty(x, w, lo, hi, keys, q, c, exact):
    """Slot of the exact key of pair (q, c) given its estimate x (``|x - s_hat| <= w``) and the
    range ``[lo, hi]`` of key positions the bucket allows (``lo <= #{keys < x - w}``,
    ``#{keys <= x + w} <= hi``). Slot 2 b: K_{b-1} < s < K_b; 2 b + 1: s == K_b. ``exact``: x is
    the key itself (the exact-screen certificate), no evaluation needed."""
    p = _n_below(keys, lo, hi, x - w)
    if p == hi or keys[p] > x + w:  # no key within the interval: s_hat lies strictly between
        return 2 * p
    if exact:
        p = _n_below(keys, lo, hi, x)
        return 2 * p + 1 if (p < hi and keys[p] == x) else 2 * p
    # a closer look: a float64 estimate in any summation order (|est - s_hat| <= 2 gamma_{D+2}
    # s_hat, with 2x safety and an absolute term for gradual underflow of the squares); the
    # definition only when a key lies within the estimate's error bound
    est = _sqdist64_any_order(q, c)
    m = q.shape[0] + 2
    err = 4.0 * (m * 2.0**-53 / (1.0 - m * 2.0**-53)) * est + m * 2.0**-1070
    p = _n_below(keys, lo, hi, est - err)
    if p == hi or keys[p] > est + err:
        return 2 * p
    s = sqdist64(q, c)
    p = _n_below(keys, lo, hi, s)
    if p < keys.shape[0] and keys[p] == s:
        return 2 * p + 1
    return 2 * p


@njit(cache=True, parallel=True)
def _pass_l2_block(screen, r0, col0, qdesc, cdesc, qn2, rtol, wr, exact, mode_rows, do_cols, do_hist,
                   keys, tab, lohi, e0, scale, nbk, idx1, key1, idx2, key2, col_u, col_d, col_i, acc):
    """One screen block (rows ``r0 .. r0 + r - 1``): row top-2, column running best, histogram.

    screen float32 [r, >= col0 + N2] (larger = closer), this pair's columns from col0; qn2 float64
    [N1] = |q|^2; rtol float64 [N1]: the row band half-width T (screen units); wr float64 [N1]: the
    key-estimate width w (``|x - s_hat| <= w``, x = qn2 - 2 g); exact: the screen is exact
    (certificate), so x IS the key and no float64 re-evaluation is needed; mode_rows 0 / 1 / 2: no
    rows / nearest only / nearest two; keys float64 [B] sorted distinct; tab int32 [nbk + 2], lohi
    int64 [nbk + 2, 2], e0, scale: the bucket table of :func:`key_table`; outputs: idx1..key2 [N1]
    (squared keys), col_u / col_d / col_i [n_chunks, N2] per-thread column state, acc [n_chunks, 2 B
    + 1] per-thread slot counts.

    Per row, a branch-free (SIMD) loop computes every value's table row and the row maximum and
    tells whether any column needs attention; a branch-free scalar loop then counts the slots of
    the clean table rows and lists the columns whose table row is not clean, which are decided
    after it (:func:`_slot_dirty`, inlined; about 9 % of RootSIFT's values at HPatches sizes); the other
    rare cases (a possible column minimum, the row band) branch off.
    """
    r = screen.shape[0]
    n = cdesc.shape[0]
    nch = min(acc.shape[0], r)
    top = nbk + 1.5
    for c in prange(nch):
        # per thread, per block (< 2^31 pairs): in cache; the last slot is scratch (see below)
        scratch = acc.shape[1]
        hist = np.zeros(scratch + 1, dtype=np.int32)
        kbuf = np.empty(n, dtype=np.int32)
        dbuf = np.empty(n, dtype=np.int32)
        nblk = (n + _CB - 1) // _CB
        bmax = np.empty(nblk, dtype=np.float32)
        cu = col_u[c]
        cd = col_d[c]
        ci = col_i[c]
        for t in range(c * r // nch, (c + 1) * r // nch):
            qi = r0 + t
            g = screen[t, col0 : col0 + n]
            q = qdesc[qi]
            a2 = qn2[qi]
            w = wr[qi]
            # z = (x - e0) scale + 1 with x = a2 - 2 g: one multiply-add per value
            za = (a2 - e0) * scale + 1.0
            zb = -2.0 * scale
            ninf = np.float32(-np.inf)
            for jb in range(0, n, _CB):
                je = min(jb + _CB, n)
                need = 0
                bm = ninf
                for j in range(jb, je):  # branch-free: vectorised by LLVM
                    v = g[j]
                    bm = max(bm, v)
                    if do_hist:
                        z = min(max(za + zb * np.float64(v), 0.0), top)
                        kbuf[j] = np.int32(z)
                    if do_cols:
                        need += np.int32((a2 - 2.0 * np.float64(v)) - w <= cu[j])
                bmax[jb // _CB] = bm
                if need:
                    for j in range(jb, je):
                        x = a2 - 2.0 * np.float64(g[j])
                        if x - w <= cu[j]:  # row qi may be column j's nearest: decide exactly
                            hv = x + w
                            if hv < cu[j]:
                                cu[j] = hv
                            d = x if exact else sqdist64(q, cdesc[j])
                            if d < cd[j] or (d == cd[j] and qi < ci[j]):
                                cd[j] = d
                                ci[j] = qi
                            if d < cu[j]:
                                cu[j] = d
            if do_hist:
                # branch-free: a clean bucket's slot is counted; a value whose bucket holds a key
                # near it goes to the scratch slot and onto the list decided after the row
                nd = 0
                for j in range(n):
                    sl = tab[kbuf[j]]
                    hist[sl + (sl < 0) * (scratch + 1)] += 1
                    dbuf[nd] = j
                    nd += sl < 0
                for t2 in range(nd):
                    j = dbuf[t2]
                    k = kbuf[j]
                    x = a2 - 2.0 * np.float64(g[j])
                    hist[_slot_dirty(x, w, lohi[k, 0], lohi[k, 1], keys, q, cdesc[j], exact)] += 1
            if mode_rows > 0:
                # g(1) = the largest block maximum (first such block b1); g(2) = the largest of the
                # other blocks' maxima and of block b1's values after removing one copy of g(1)
                b1i = 0
                for b in range(nblk):
                    if bmax[b] > bmax[b1i]:
                        b1i = b
                m1 = bmax[b1i]
                ref = m1
                if mode_rows == 2 and n >= 2:
                    m2 = ninf
                    for b in range(nblk):
                        if b != b1i:
                            m2 = max(m2, bmax[b])
                    seen = False
                    for j in range(b1i * _CB, min(b1i * _CB + _CB, n)):
                        v = g[j]
                        if v == m1 and not seen:
                            seen = True
                        else:
                            m2 = max(m2, v)
                    ref = m2
                below = round_down32(np.float64(ref) - rtol[qi])  # a float32 <= g(ref) - T
                b1 = np.inf
                j1 = -1
                b2 = np.inf
                j2 = -1
                for b in range(nblk):
                    if bmax[b] >= below:  # the block holds band members
                        for j in range(b * _CB, min(b * _CB + _CB, n)):  # ascending j + strict '<': lowest index wins a tie
                            if g[j] >= below:
                                d = a2 - 2.0 * np.float64(g[j]) if exact else sqdist64(q, cdesc[j])
                                b1, j1, b2, j2 = _offer(d, j, b1, j1, b2, j2)
                idx1[qi] = j1
                key1[qi] = b1
                idx2[qi] = j2
                key2[qi] = b2
        if do_hist:
            for k in range(acc.shape[1]):
                acc[c, k] += hist[k]


@njit(cache=True)
def _bin_of(s, keys):
    """Histogram slot of an exact key value: 2 b for K_{b-1} < s < K_b, 2 b + 1 for s == K_b."""
    b = np.searchsorted(keys, s)  # number of keys < s
    if b < keys.shape[0] and keys[b] == s:
        return 2 * b + 1
    return 2 * b


@njit(cache=True, parallel=True)
def _pass_l2_direct(qdesc, cdesc, do_cols, do_hist, keys, idx1, key1, idx2, key2, col_d, col_i, acc):
    """Float64 brute force of everything (inputs whose float32 screen could overflow)."""
    r = qdesc.shape[0]
    n = cdesc.shape[0]
    nch = min(acc.shape[0], r)
    for c in prange(nch):
        hist = np.zeros(acc.shape[1], dtype=np.int64)
        for i in range(c * r // nch, (c + 1) * r // nch):
            q = qdesc[i]
            b1 = np.inf
            j1 = -1
            b2 = np.inf
            j2 = -1
            for j in range(n):
                d = sqdist64(q, cdesc[j])
                b1, j1, b2, j2 = _offer(d, j, b1, j1, b2, j2)
                if do_cols and (d < col_d[c, j] or (d == col_d[c, j] and i < col_i[c, j])):
                    col_d[c, j] = d
                    col_i[c, j] = i
                if do_hist:
                    hist[_bin_of(d, keys)] += 1
            idx1[i] = j1
            key1[i] = b1
            idx2[i] = j2
            key2[i] = b2
        if do_hist:
            for k in range(acc.shape[1]):
                acc[c, k] += hist[k]


@njit(cache=True, parallel=True)
def _pass_hamming(qwords, cwords, do_cols, do_hist, idx1, key1, idx2, key2, col_d, col_i, acc):
    """Every Hamming distance once: row top-2, column best, and acc[chunk, d] += #{pairs at d}."""
    r = qwords.shape[0]
    n = cwords.shape[0]
    nch = min(acc.shape[0], r)
    for c in prange(nch):
        hist = np.zeros(acc.shape[1], dtype=np.int64)
        for i in range(c * r // nch, (c + 1) * r // nch):
            b1 = np.int64(1) << 62
            j1 = -1
            b2 = np.int64(1) << 62
            j2 = -1
            for j in range(n):
                d = hamming_words(qwords[i], cwords[j])
                b1, j1, b2, j2 = _offer(d, j, b1, j1, b2, j2)
                if do_cols and (d < col_d[c, j] or (d == col_d[c, j] and i < col_i[c, j])):
                    col_d[c, j] = d
                    col_i[c, j] = i
                if do_hist:
                    hist[d] += 1
            idx1[i] = j1
            key1[i] = np.float64(b1) if j1 >= 0 else np.inf
            idx2[i] = j2
            key2[i] = np.float64(b2) if j2 >= 0 else np.inf
        if do_hist:
            for k in range(acc.shape[1]):
                acc[c, k] += hist[k]


@njit(cache=True)
def _merge_columns(col_d, col_i, out_d, out_i):
    """Per column, the lexicographically smallest (key, index) over the threads' states."""
    for j in range(col_d.shape[1]):
        bd = np.inf
        bi = -1
        for c in range(col_d.shape[0]):
            i = col_i[c, j]
            if i >= 0 and (col_d[c, j] < bd or (col_d[c, j] == bd and i < bi) or bi < 0):
                bd = np.float64(col_d[c, j])
                bi = i
        out_d[j] = bd
        out_i[j] = bi


# --------------------------------------------------------------------------- helpers


def screen_block(qaug: np.ndarray, caug: np.ndarray, r0: int, r1: int) -> np.ndarray:
    """The float32 screen of query rows r0..r1-1: the one BLAS product of a row block.

    Every L2 pass of this module makes its products here (tests count the calls).
    """
    return qaug[r0:r1] @ caug.T  # consecutive rows: a view; BLAS reads the transposed view


def _n_chunks() -> int:
    return max(1, int(numba.get_num_threads()))


def block_rows(n_candidates: int, chunk_mb: float) -> int:
    """Query rows per block so that the float32 screen holds at most ``chunk_mb`` MiB (as
    :func:`descbench.metrics.retrieval.query_blocks`), and fewer than 2^31 pairs (the kernel's
    per-block int32 counts)."""
    n = max(1, n_candidates)
    return max(1, min(int(chunk_mb * 2**20 // (4 * n)), (2**31 - 1) // n))


def _exact_screen(q: np.ndarray, c: np.ndarray, qmax: float, cmax: float) -> bool:
    """The exact-screen certificate of the module docstring."""
    if qmax * cmax + 0.5 * cmax * cmax >= _EXACT_LIMIT:
        return False
    return bool(np.array_equal(q, np.rint(q)) and np.array_equal(c, np.rint(c)))


def l2_setup(q: np.ndarray, c: np.ndarray, qn2: np.ndarray, cnorm2: np.ndarray):
    """``(qaug, caug, rtol, wr, exact)``: augmented float32 descriptors, per-row band half-width
    T (screen units, :func:`descbench.metrics.nn.l2_band_tolerance`) and key width w.

    w: with E the bound on one screen error (``tol = 4 E`` from
    :func:`descbench.metrics.retrieval.screen_tolerance`), ``|x - s_hat| <= W + 2^-52 |x|`` with
    ``W = (tol / 2 + 2 gamma_{D+2} (qn2 + (|q| + max|c|)^2) + 8 (D+1) 2^-149) (1 + 2^-48)`` (the
    derivation of :func:`descbench.metrics.classifier.threshold_histogram`, factors of 2 of
    safety). Since ``|x| <= qn2 + 2 |g| <= (|q| + max|c|)^2 + 2 E``, the row constant
    ``w = W + 2^-48 (1.5 (|q| + max|c|)^2 + 1)`` also covers the float64 rounding of ``x +- w``.
    With the exact-screen certificate, T = 0 and W = 0.
    """
    dim = q.shape[1]
    qn = np.sqrt(qn2)
    cmax = float(np.sqrt(cnorm2.max()))
    exact = _exact_screen(q, c, float(qn.max()), cmax)
    caug = np.empty((c.shape[0], dim + 1), dtype=np.float32)
    caug[:, :-1] = c
    caug[:, -1] = -0.5 * cnorm2
    qaug = np.empty((q.shape[0], dim + 1), dtype=np.float32)
    qaug[:, :-1] = q
    qaug[:, -1] = 1.0
    span2 = (qn + cmax) ** 2
    if exact:
        rtol = np.zeros(q.shape[0])
        W = np.zeros(q.shape[0])
    else:
        m = dim + 2
        gamma = m * _U64 / (1 - m * _U64)
        tol = screen_tolerance(q, cnorm2)
        rtol = tol + gamma * span2 + 4.0 * (dim + 1) * 2.0**-149  # = l2_band_tolerance
        W = (0.5 * tol + 2.0 * gamma * (qn2 + span2) + 8.0 * (dim + 1) * 2.0**-149) * (1 + 2.0**-48)
    wr = W + 2.0**-48 * (1.5 * span2 + 1.0)
    return qaug, caug, rtol, wr, exact


def key_table(keys: np.ndarray, margin: float, n_buckets: int | None = None):
    """Bucket table for binning key estimates: ``(tab int32 [nbk + 2], lohi int64 [nbk + 2, 2], e0,
    scale, nbk)``; ``tab[k]`` = the slot 2 lo of a clean row (lo == hi), else -1.

    Buckets b = 0..nbk-1 of width h = 1/scale cover ``[e0, K_{B-1} + M]`` with ``e0 = K_0 - M``
    (M = ``margin`` >= every estimate width w, plus the grid's rounding). An estimate x goes to
    table row ``k = int(clip((x - e0) scale + 1, 0, nbk + 1.5))``: row 0 = below e0 (every key
    is above x + w), row nbk + 1 = above the grid (every key is below x - w), row b + 1 =
    bucket b. ``lohi[k] = (#{keys < left - M'}, #{keys <= right + M'})`` over the bucket's
    extent widened by ``M' = M + slack``, where slack bounds how far the computed k can
    misplace x (relative 2^-50 of the grid's extent; we use 1e-12 of it plus 1e-9 h): so
    ``lo <= #{keys < x - w}`` and ``#{keys <= x + w} <= hi``, and ``lo == hi`` proves no key
    lies within ``[x - w, x + w]`` (slot 2 lo).
    """
    nb = keys.shape[0]
    k0 = float(keys[0])
    kl = float(keys[-1])
    slack0 = 1e-12 * (abs(k0) + abs(kl) + 2 * margin) + 1e-300
    M = margin + slack0
    e0 = k0 - M
    span = (kl + M) - e0
    if n_buckets is None:
        n_buckets = int(min(max(16 * nb, 1024), 2**17))
    nbk = int(n_buckets)
    scale = nbk / span if span > 0 else 0.0
    if not (0 < scale < 1e250):  # degenerate (or z could overflow): one bucket, always searched
        nbk = 1
        scale = 0.0
    h = span / nbk
    slack = M + 1e-9 * h + 1e-12 * (abs(e0) + abs(span))
    b = np.arange(nbk, dtype=np.float64)
    left = e0 + b * h
    right = e0 + (b + 1) * h
    lohi = np.empty((nbk + 2, 2), dtype=np.int64)
    lohi[0] = 0
    lohi[-1] = nb
    lohi[1:-1, 0] = np.searchsorted(keys, left - slack, side="left")
    lohi[1:-1, 1] = np.searchsorted(keys, right + slack, side="right")
    if scale == 0.0:  # all estimates land in row 1: make it search every key
        lohi[1] = (0, nb)
    tab = np.where(lohi[:, 0] == lohi[:, 1], 2 * lohi[:, 0], -1).astype(np.int32)
    return tab, lohi, float(e0), float(scale), nbk


# --------------------------------------------------------------------------- entry point


class PairPass:
    """:func:`pair_pass` in steps, so a scene pass can feed it screen blocks computed once for
    several consumers (:mod:`descbench.metrics.scenepass`).

    Construction validates, allocates the outputs and makes the per-row tolerances from THIS
    pair's descriptors (``rtol``, ``wr``, the exact-screen certificate: each bounds the screen
    value of a column j from |q_i| and max |c| over this pair's candidates, for any summation
    order, so they hold for a screen made by any BLAS call over a wider candidate matrix).
    Hamming descriptors, empty inputs and the float64 fallback are done here as well. When
    ``needs_screen``, :meth:`consume` takes the screen ``[q_i, 1] . [c_j, -|c_j|^2/2]`` of the
    consecutive query rows ``r0 .. r0 + r - 1`` against every candidate of ``c`` (C-contiguous
    float32 [r, N2]); every row must be consumed exactly once (any blocking: the row, column and
    histogram states are exact whatever the split). :meth:`finish` merges and returns the
    :class:`PassResult`.
    """

    def __init__(self, q: np.ndarray, c: np.ndarray, keys: np.ndarray | None = None, rows: int = 2, cols: bool = True):
        n1, n2 = q.shape[0], c.shape[0]
        self.q, self.c, self.rows, self.cols = q, c, rows, cols
        out = self.out = PassResult()
        self.needs_screen = False
        do_hist = keys is not None
        nb = 0
        if do_hist:
            keys = np.ascontiguousarray(keys, dtype=np.float64)
            nb = keys.shape[0]
        self.keys, self.nb = keys, nb
        if rows:
            out.idx1 = np.full(n1, -1, np.int64)
            out.idx2 = np.full(n1, -1, np.int64)
            out.key1 = np.full(n1, np.inf)
            out.key2 = np.full(n1, np.inf)
        if cols:
            out.col_idx = np.full(n2, -1, np.int64)
            out.col_key = np.full(n2, np.inf)
        if do_hist:
            out.n_less = np.zeros(nb, np.int64)
            out.n_equal = np.zeros(nb, np.int64)
            out.n_above = int(n1) * int(n2)
        self.done = n1 == 0 or n2 == 0 or not (rows or cols or (do_hist and nb > 0))
        if self.done:
            return
        hist_on = self.hist_on = do_hist and nb > 0
        nch = min(_n_chunks(), n1)
        # row outputs are always written by the kernels; scratch arrays when rows are not wanted
        self.i1 = out.idx1 if rows else np.full(n1, -1, np.int64)
        self.i2 = out.idx2 if rows else np.full(n1, -1, np.int64)
        self.k1 = out.key1 if rows else np.full(n1, np.inf)
        self.k2 = out.key2 if rows else np.full(n1, np.inf)
        ncol = n2 if cols else 1
        self.col_i = np.full((nch, ncol), -1, np.int64)
        self.counts = None
        if q.dtype == np.uint8:
            nbits = 8 * q.shape[1]
            acc = np.zeros((nch, nbits + 1 if hist_on else 1), np.int64)
            col_d = np.full((nch, ncol), np.int64(1) << 62, np.int64)
            _pass_hamming(pack_bits_to_words(q), pack_bits_to_words(c), cols, hist_on, self.i1, self.k1, self.i2, self.k2,
                          col_d, self.col_i, acc)
            if hist_on:
                per_d = acc.sum(axis=0)
                d = np.arange(nbits + 1, dtype=np.float64)
                slot = 2 * np.searchsorted(keys, d)
                b = slot // 2
                hit = b < nb
                slot[hit] += keys[np.minimum(b, nb - 1)][hit] == d[hit]
                counts = np.zeros(2 * nb + 1, dtype=np.int64)
                np.add.at(counts, slot, per_d)
                self.counts = counts
            self.col_d = col_d.astype(np.float64)
            return
        self.acc = np.zeros((nch, 2 * nb + 1 if hist_on else 1), np.int64)
        self.col_d = np.full((nch, ncol), np.inf)
        qn2 = self.qn2 = np.einsum("ij,ij->i", q, q, dtype=np.float64)
        cnorm2 = np.einsum("ij,ij->i", c, c, dtype=np.float64)
        qmax = float(np.sqrt(qn2.max()))
        cmax = float(np.sqrt(cnorm2.max()))
        self.kk = keys if hist_on else np.zeros(1)
        if qmax * cmax + cmax * cmax > SCREEN_LIMIT:
            _pass_l2_direct(q, c, cols, hist_on, self.kk, self.i1, self.k1, self.i2, self.k2, self.col_d, self.col_i, self.acc)
            return
        self.qaug, self.caug, self.rtol, self.wr, self.exact = l2_setup(q, c, qn2, cnorm2)
        if hist_on:
            self.table = key_table(keys, float(self.wr.max()))
        else:
            self.table = np.zeros(3, np.int32), np.zeros((3, 2), np.int64), 0.0, 0.0, 1
        self.col_u = np.full((nch, ncol), np.inf)
        self.needs_screen = True

    def consume(self, screen: np.ndarray, r0: int, col0: int = 0) -> None:
        """One screen block of the consecutive query rows ``r0 .. r0 + screen.shape[0] - 1``; this
        pair's candidates are its columns ``col0 .. col0 + N2 - 1`` (a scene's product over more
        candidates is read in place)."""
        if not 0 <= r0 <= self.q.shape[0] - screen.shape[0]:
            raise ValueError(f"screen rows {r0}..{r0 + screen.shape[0] - 1} are not query rows (N1 = {self.q.shape[0]})")
        check_screen(screen, screen.shape[0], col0, self.c.shape[0])
        tab, lohi, e0, scale, nbk = self.table
        _pass_l2_block(screen, r0, col0, self.q, self.c, self.qn2, self.rtol, self.wr, self.exact, self.rows, self.cols,
                       self.hist_on, self.kk, tab, lohi, e0, scale, nbk,
                       self.i1, self.k1, self.i2, self.k2, self.col_u, self.col_d, self.col_i, self.acc)

    def finish(self) -> PassResult:
        out = self.out
        if self.done:
            return out
        nb = self.nb
        if self.hist_on:
            counts = self.counts if self.counts is not None else self.acc.sum(axis=0)
            out.n_less = counts[0 : 2 * nb : 2].copy()
            out.n_equal = counts[1 : 2 * nb : 2].copy()
            out.n_above = int(counts[2 * nb])
        if self.cols:
            _merge_columns(self.col_d, self.col_i, out.col_key, out.col_idx)
        return out


def pair_pass(q: np.ndarray, c: np.ndarray, keys: np.ndarray | None = None, chunk_mb: float = 64.0,
              rows: int = 2, cols: bool = True) -> PassResult:
    """Everything of one descriptor pair in one pass (validated, C-contiguous inputs).

    q [N1, D], c [N2, D]: both float32 (finite) or both uint8 packed bits. ``keys``: sorted,
    distinct, finite float64 keys for the histogram (None: no histogram). ``rows``: 0 none,
    1 nearest only, 2 nearest and second-nearest; ``cols``: the nearest query of every candidate.
    Exactness and method: see the module docstring.
    """
    if not chunk_mb > 0:
        raise ValueError(f"chunk_mb must be > 0, got {chunk_mb}")
    pp = PairPass(q, c, keys, rows, cols)
    if pp.needs_screen:
        n1, n2 = q.shape[0], c.shape[0]
        step = block_rows(n2, chunk_mb)
        for r0 in range(0, n1, step):
            r1 = min(n1, r0 + step)
            pp.consume(screen_block(pp.qaug, pp.caug, r0, r1), r0)
            pp.out.n_products += 1
    return pp.finish()
