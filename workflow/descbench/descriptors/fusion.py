"""The C++ DescriptorWorkbench's descriptor fusion arithmetic, the one definition both layers use:
patch fusion (:mod:`descbench.patches.workbench`, ``PatchFusionExtractor::fuseDescriptors`` in
``src/core/patches/PatchFusionExtractor.cpp:76-160``) and the image composite's
``arithmetic: workbench`` (:mod:`descbench.descriptors.composite`,
``CompositeDescriptorExtractor::aggregate*`` in
``src/core/descriptor/extractors/CompositeDescriptorExtractor.cpp:267-340``).

:func:`fuse_rows` combines float32 rows of N patches / keypoints, every step in float32 (each
addition and product rounded, as OpenCV 4.6 computes ``cv::Mat`` expressions on ``CV_32F``):

* ``concatenate``: the components side by side, in component order;
* ``average``: a float32 sum in component order times ``float32(1 / n_components)``;
* ``weighted_avg``: float32 ``sum += float32(w_i) * x_i`` from zero (weights default
  ``float32(1 / n)`` each; used as given: the patch fusion does not renormalise them);
* ``max``, ``min``: element-wise, from the first component;
* ``channel_wise``: every component cut to the smallest width w, a component of width 3w averaged
  over its three blocks first, ``((x[c] + x[c+w]) + x[c+2w]) / 3``, then the average as above.

All but ``concatenate`` and ``channel_wise`` need equal widths. :func:`normalize_rows_l2` is
``cv::normalize(row, row, 1, 0, NORM_L2)`` per row: the norm from the float64 sum of squares in
OpenCV's order (:func:`opencv_sq_diff`), scale ``float32(1 / norm)``, a norm <= DBL_EPSILON gives
a zero row, ``|scale - 1| < DBL_EPSILON`` leaves the row as is. :func:`fuse` is both, the patch
fusion's output; bit for bit the C++ with OpenCV 4.6 on the fixture
``tests/data/dw/workbench_patch_metrics.npz`` (``tests/descbench/patches/test_workbench.py``).

The image composite's own arithmetic equals this for ``concatenate``, ``weighted_avg``, ``max`` and
``min``, and for ``average`` up to the sign of a zero (it starts from a copy of the first
component, not from zeros: an element that is -0.0 in every component stays -0.0 there; distances
are the same). Its weights are renormalised to sum 1 first when their sum differs from 1 by more
than 1e-6 (``CompositeDescriptorExtractor.cpp:37-53``, in double; the composite does that before
calling :func:`fuse_rows`). Its ``channel_wise`` is another computation (``cv::addWeighted`` of the
grey row with each colour block, then the mean of the three) and is not offered with this
arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from descbench.errors import ConfigError, DataError

FUSION_METHODS = {
    "average": "average", "avg": "average",
    "weighted_avg": "weighted_avg", "weighted": "weighted_avg",
    "max": "max", "min": "min",
    "concatenate": "concatenate", "concat": "concatenate",
    "channel_wise": "channel_wise", "channelwise": "channel_wise",
}
SAME_WIDTH = ("average", "weighted_avg", "max", "min")


@numba.njit(cache=True)
def opencv_sq_diff(a, b):
    """The float64 sum of ``float32(a_k - b_k)^2`` over two float32 rows in OpenCV 4.x's order
    (``normL2Sqr<float, double>``: blocks of four, ``s += ((v0*v0 + v1*v1) + v2*v2) + v3*v3``,
    then the tail one by one); ``cv::norm(a - b, NORM_L2)`` is its square root."""
    n = a.shape[0]
    s = 0.0
    k = 0
    while k + 4 <= n:
        v0 = np.float64(np.float32(a[k] - b[k]))
        v1 = np.float64(np.float32(a[k + 1] - b[k + 1]))
        v2 = np.float64(np.float32(a[k + 2] - b[k + 2]))
        v3 = np.float64(np.float32(a[k + 3] - b[k + 3]))
        s += ((v0 * v0 + v1 * v1) + v2 * v2) + v3 * v3
        k += 4
    while k < n:
        v = np.float64(np.float32(a[k] - b[k]))
        s += v * v
        k += 1
    return s


@numba.njit(cache=True)
def _row_sq_norms(x):
    out = np.empty(x.shape[0], dtype=np.float64)
    zero = np.zeros(x.shape[1], dtype=np.float32)
    for i in range(x.shape[0]):
        out[i] = opencv_sq_diff(x[i], zero)
    return out


def check_rows(x, name: str) -> np.ndarray:
    """``x`` as a C-contiguous float32 [N, D] array of finite values; else DataError naming ``name``."""
    a = np.asarray(x)
    if a.ndim != 2:
        raise DataError(f"{name}: expected a 2-D array [rows, dim] of descriptors, got shape {a.shape}")
    if a.dtype != np.float32:
        raise DataError(f"{name}: the workbench's fusion computes on float32 rows (CV_32F), got dtype {a.dtype}; "
                        "convert with .astype(np.float32) if that is what its extractor would hold")
    if not np.isfinite(a).all():
        bad = int(np.argwhere(~np.isfinite(a))[0, 0])
        raise DataError(f"{name}: row {bad} holds NaN or infinity")
    return np.ascontiguousarray(a)


def normalize_rows_l2(x: np.ndarray) -> np.ndarray:
    """``cv::normalize(row, row, 1, 0, NORM_L2)`` of every float32 row (module docstring).

    >>> normalize_rows_l2(np.array([[3, 4], [0, 0]], np.float32)).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    out = check_rows(x, "rows").copy()
    eps = np.finfo(np.float64).eps
    norms = np.sqrt(_row_sq_norms(out)) if out.shape[1] else np.zeros(out.shape[0])
    for i in range(out.shape[0]):
        norm = float(norms[i])
        scale = 1.0 / norm if norm > eps else 0.0
        if abs(scale - 1.0) < eps:
            continue
        out[i] = out[i] * np.float32(scale)
    return out


def fuse_rows(components: Sequence[np.ndarray], method: str = "concatenate",
              weights: Sequence[float] | None = None) -> np.ndarray:
    """The fused rows before the L2 step (module docstring): ``components`` float32 [N, D_c] each
    (row i of each describes the same patch / keypoint), ``method`` one of
    :data:`FUSION_METHODS` (the workbench's aliases), ``weights`` one per component for
    ``weighted_avg`` (default 1/n each). Returns float32 [N, D_out].

    >>> a = np.array([[1, 2]], np.float32); b = np.array([[3, 8]], np.float32)
    >>> fuse_rows([a, b], "average").tolist(), fuse_rows([a, b], "weighted_avg", [0.25, 0.75]).tolist()
    ([[2.0, 5.0]], [[2.5, 6.5]])
    """
    if method not in FUSION_METHODS:
        raise ConfigError(f"fusion method {method!r} is unknown; the workbench accepts {', '.join(FUSION_METHODS)}")
    method = FUSION_METHODS[method]
    if not len(components):
        raise DataError("fuse: at least one component is needed")
    comps = [check_rows(c, f"component {i}") for i, c in enumerate(components)]
    n = comps[0].shape[0]
    for i, c in enumerate(comps):
        if c.shape[0] != n:
            raise DataError(f"fuse: component {i} has {c.shape[0]} rows, component 0 has {n}")
    if method in SAME_WIDTH:
        for i, c in enumerate(comps):
            if c.shape[1] != comps[0].shape[1]:
                raise DataError(f"fuse: {method} needs equal widths; component 0 has {comps[0].shape[1]}, "
                                f"component {i} has {c.shape[1]}")
    if method == "weighted_avg":
        if weights is None:
            weights = [np.float32(1.0) / np.float32(len(comps))] * len(comps)
        if len(weights) != len(comps):
            raise DataError(f"fuse: {len(weights)} weights for {len(comps)} components")
    f32 = np.float32
    if method == "concatenate":
        fused = np.concatenate(comps, axis=1)
    elif method == "average":
        fused = np.zeros_like(comps[0])
        for c in comps:
            fused = fused + c
        fused = fused * f32(1.0 / len(comps))
    elif method == "weighted_avg":
        fused = np.zeros_like(comps[0])
        for w, c in zip(weights, comps):
            fused = fused + f32(w) * c
    elif method in ("max", "min"):
        op = np.maximum if method == "max" else np.minimum
        fused = comps[0].copy()
        for c in comps[1:]:
            fused = op(fused, c)
    else:  # channel_wise
        w = min(c.shape[1] for c in comps)
        fused = np.zeros((n, w), dtype=f32)
        for c in comps:
            if c.shape[1] == 3 * w:
                fused = fused + ((c[:, :w] + c[:, w:2 * w]) + c[:, 2 * w:]) / f32(3.0)
            else:
                fused = fused + c[:, :w]
        fused = fused * f32(1.0 / len(comps))
    return fused.astype(f32)


def fuse(components: Sequence[np.ndarray], method: str = "concatenate", weights: Sequence[float] | None = None) -> np.ndarray:
    """The workbench's patch fusion: :func:`fuse_rows`, then every row L2-normalised
    (:func:`normalize_rows_l2`). Returns float32 [N, D_out].

    >>> a = np.array([[3, 0]], np.float32); b = np.array([[0, 4]], np.float32)
    >>> fuse([a, b]).tolist(), fuse([a, b], "average").tolist()
    ([[0.6000000238418579, 0.0, 0.0, 0.800000011920929]], [[0.6000000238418579, 0.800000011920929]])
    """
    return normalize_rows_l2(fuse_rows(components, method, weights))
