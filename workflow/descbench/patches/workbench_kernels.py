"""Numba kernels of :mod:`descbench.patches.workbench`: pure array functions, no I/O.

* **Distances** as the C++ DescriptorWorkbench's ``PatchMetrics::l2Distance`` computes them with
  OpenCV 4.x (``cv::Mat diff = a - b; cv::norm(diff, NORM_L2)`` on 1 x D float32 rows):
  the difference rounded to float32 per component, the squares summed in float64 (OpenCV's
  ``normL2Sqr<float, double>``: blocks of four, ``s += ((v0*v0 + v1*v1) + v2*v2) + v3*v3``, then
  the tail one by one; :func:`descbench.descriptors.fusion.opencv_sq_diff`), ``sqrt`` in float64, the result rounded to float32
  (:func:`l2_matrix_f32`). The float64 counterpart (:func:`l2_matrix_f64`) takes the difference
  in float64, sums the squares in index order and keeps the float64 root.
* **Nearest neighbour** (:func:`first_nearest`): the first index of the row minimum, found with a
  strict ``<`` scan from a start value (``FLT_MAX`` for the float32 path: a row whose distances
  are all above it has no neighbour, -1).
* **Rank of the correct target** (:func:`correct_ranks`): its 0-based position after GCC
  libstdc++'s ``std::sort`` of the ``(distance, index)`` pairs built in index order, comparing
  distances only. Without a tie at the correct target's distance that is the number of strictly
  smaller distances; with one, the position depends on the unstable introsort, which
  :func:`libstdcxx_sort` replays step for step (``__introsort_loop`` with threshold 16 and depth
  limit ``2 * floor(log2 n)``, median-of-three pivot moved to the front, unguarded Hoare
  partition, heap sort at depth 0, final insertion sort).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from descbench.descriptors.fusion import opencv_sq_diff as _sq_f32  # OpenCV's float64 sum of squared differences

FLT_MAX = float(np.finfo(np.float32).max)
_THRESHOLD = 16  # libstdc++'s _S_threshold


@numba.njit(cache=True)
def l2_matrix_f32(a, b):
    """float32 [n, d], [m, d] -> float32 [n, m]: the workbench's L2 distances (module docstring)."""
    out = np.empty((a.shape[0], b.shape[0]), dtype=np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            out[i, j] = np.float32(math.sqrt(_sq_f32(a[i], b[j])))
    return out


@numba.njit(cache=True)
def l2_matrix_f64(a, b):
    """float32 or float64 [n, d], [m, d] -> float64 [n, m]: L2 with float64 differences, float64 sum in index order."""
    out = np.empty((a.shape[0], b.shape[0]), dtype=np.float64)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            s = 0.0
            for k in range(a.shape[1]):
                v = np.float64(a[i, k]) - np.float64(b[j, k])
                s += v * v
            out[i, j] = math.sqrt(s)
    return out


@numba.njit(cache=True)
def l2_pairs_f32(a, b):
    """float32 [n, d] x 2 -> float32 [n]: distance of row i of ``a`` to row i of ``b``."""
    out = np.empty(a.shape[0], dtype=np.float32)
    for i in range(a.shape[0]):
        out[i] = np.float32(math.sqrt(_sq_f32(a[i], b[i])))
    return out


@numba.njit(cache=True)
def l2_pairs_sq_f32(a, b):
    """float32 [n, d] x 2 -> float64 [n]: the float64 sum of squares behind :func:`l2_pairs_f32`
    (OpenCV's ``cv::norm`` before its square root)."""
    out = np.empty(a.shape[0], dtype=np.float64)
    for i in range(a.shape[0]):
        out[i] = _sq_f32(a[i], b[i])
    return out


@numba.njit(cache=True)
def l2_pairs_f64(a, b):
    """[n, d] x 2 -> float64 [n]: float64 distance of row i of ``a`` to row i of ``b``."""
    out = np.empty(a.shape[0], dtype=np.float64)
    for i in range(a.shape[0]):
        s = 0.0
        for k in range(a.shape[1]):
            v = np.float64(a[i, k]) - np.float64(b[i, k])
            s += v * v
        out[i] = math.sqrt(s)
    return out


@numba.njit(cache=True)
def first_nearest(dist, start):
    """[n, m] distances -> int64 [n]: first column with the strict row minimum below ``start``, else -1."""
    out = np.full(dist.shape[0], -1, dtype=np.int64)
    for i in range(dist.shape[0]):
        best = start
        for j in range(dist.shape[1]):
            if dist[i, j] < best:
                best = dist[i, j]
                out[i] = j
    return out


# ---- GCC libstdc++ std::sort on (key, index) pairs, comparing keys only -------------------------

@numba.njit(cache=True)
def _swap(k, v, i, j):
    tk = k[i]
    k[i] = k[j]
    k[j] = tk
    tv = v[i]
    v[i] = v[j]
    v[j] = tv


@numba.njit(cache=True)
def _median_to_first(k, v, result, a, b, c):
    if k[a] < k[b]:
        if k[b] < k[c]:
            _swap(k, v, result, b)
        elif k[a] < k[c]:
            _swap(k, v, result, c)
        else:
            _swap(k, v, result, a)
    elif k[a] < k[c]:
        _swap(k, v, result, a)
    elif k[b] < k[c]:
        _swap(k, v, result, c)
    else:
        _swap(k, v, result, b)


@numba.njit(cache=True)
def _unguarded_partition(k, v, first, last, pivot):
    while True:
        while k[first] < k[pivot]:
            first += 1
        last -= 1
        while k[pivot] < k[last]:
            last -= 1
        if not first < last:
            return first
        _swap(k, v, first, last)
        first += 1


@numba.njit(cache=True)
def _push_heap(k, v, first, hole, top, vk, vv):
    parent = (hole - 1) // 2
    while hole > top and k[first + parent] < vk:
        k[first + hole] = k[first + parent]
        v[first + hole] = v[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    k[first + hole] = vk
    v[first + hole] = vv


@numba.njit(cache=True)
def _adjust_heap(k, v, first, hole, length, vk, vv):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if k[first + child] < k[first + child - 1]:
            child -= 1
        k[first + hole] = k[first + child]
        v[first + hole] = v[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        k[first + hole] = k[first + child - 1]
        v[first + hole] = v[first + child - 1]
        hole = child - 1
    _push_heap(k, v, first, hole, top, vk, vv)


@numba.njit(cache=True)
def _heap_sort(k, v, first, last):
    length = last - first
    if length >= 2:  # make_heap
        parent = (length - 2) // 2
        while True:
            _adjust_heap(k, v, first, parent, length, k[first + parent], v[first + parent])
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:  # sort_heap: pop_heap(first, last - 1, last - 1)
        last -= 1
        vk = k[last]
        vv = v[last]
        k[last] = k[first]
        v[last] = v[first]
        _adjust_heap(k, v, first, 0, last - first, vk, vv)


@numba.njit(cache=True)
def _linear_insert(k, v, last):
    vk = k[last]
    vv = v[last]
    nxt = last - 1
    while vk < k[nxt]:
        k[last] = k[nxt]
        v[last] = v[nxt]
        last = nxt
        nxt -= 1
    k[last] = vk
    v[last] = vv


@numba.njit(cache=True)
def _insertion_sort(k, v, first, last):
    if first == last:
        return
    for i in range(first + 1, last):
        if k[i] < k[first]:
            vk = k[i]
            vv = v[i]
            for j in range(i, first, -1):
                k[j] = k[j - 1]
                v[j] = v[j - 1]
            k[first] = vk
            v[first] = vv
        else:
            _linear_insert(k, v, i)


@numba.njit(cache=True)
def _floor_log2(n):
    r = 0
    while n > 1:
        n >>= 1
        r += 1
    return r


@numba.njit(cache=True)
def libstdcxx_sort(k, v):
    """Sort ``k`` (keys) in place carrying ``v`` along, exactly as GCC's ``std::sort`` with
    ``a.first < b.first`` orders a vector of pairs (module docstring)."""
    n = k.shape[0]
    if n == 0:
        return
    # __introsort_loop, its recursion on the right part kept on an explicit stack
    stack = np.empty((2 * _floor_log2(n) + 4, 3), dtype=np.int64)
    top = 0
    stack[0, 0] = 0
    stack[0, 1] = n
    stack[0, 2] = 2 * _floor_log2(n)
    top = 1
    while top > 0:
        top -= 1
        first = stack[top, 0]
        last = stack[top, 1]
        depth = stack[top, 2]
        while last - first > _THRESHOLD:
            if depth == 0:
                _heap_sort(k, v, first, last)
                break
            depth -= 1
            mid = first + (last - first) // 2
            _median_to_first(k, v, first, first + 1, mid, last - 1)
            cut = _unguarded_partition(k, v, first + 1, last, first)
            if top == stack.shape[0]:
                grown = np.empty((2 * stack.shape[0], 3), dtype=np.int64)
                grown[:top] = stack[:top]
                stack = grown
            stack[top, 0] = cut
            stack[top, 1] = last
            stack[top, 2] = depth
            top += 1
            last = cut
    # __final_insertion_sort
    if n > _THRESHOLD:
        _insertion_sort(k, v, 0, _THRESHOLD)
        for i in range(_THRESHOLD, n):
            _linear_insert(k, v, i)
    else:
        _insertion_sort(k, v, 0, n)


@numba.njit(cache=True)
def correct_ranks(dist):
    """[n, n] distances -> int64 [n]: 0-based position of column q in row q after
    :func:`libstdcxx_sort` of ``(dist[q, t], t)`` for t = 0..n-1 (the sort runs only when another
    column ties with column q)."""
    n = dist.shape[0]
    out = np.empty(n, dtype=np.int64)
    for q in range(n):
        dq = dist[q, q]
        less = 0
        tied = False
        for t in range(dist.shape[1]):
            if dist[q, t] < dq:
                less += 1
            elif t != q and dist[q, t] == dq:
                tied = True
        if not tied:
            out[q] = less
            continue
        keys = dist[q].copy()
        idx = np.arange(dist.shape[1])
        libstdcxx_sort(keys, idx)
        for r in range(idx.shape[0]):
            if idx[r] == q:
                out[q] = r
                break
    return out
