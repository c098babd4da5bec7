"""Keypoint-set filters and the intersection of two sets (protocols section 2), one definition each.

Every function is pure and works on one image's arrays (the global size filter on a dataset's
sizes); each returns the indices of the kept keypoints **in ascending order**, so a filtered set
keeps its source's row order and ties never depend on sort stability:

- :func:`min_size`: keep iff ``size >= min_size_px``.
- :func:`per_image_top_n_by_size`: the ``n`` largest per image; among equal sizes the lower index.
- :func:`global_top_n_by_size`: the ``n`` largest of the whole dataset (the seed's
  "scale-matched" sets); among equal sizes the lower ``(scene, image, index)``, scenes compared
  as strings. Computed as a cutoff (:func:`global_size_cutoff`, from every scene's sizes) that
  each scene then applies alone (:func:`keep_by_cutoff`), so the workflow needs one small job that
  reads the sizes, not one that rewrites every scene.
- :func:`mutual_nearest_within`: pairs (a, b) of sets A and B on the same image with b = A's
  nearest B keypoint, a = b's nearest A keypoint and ``|a - b| <= tol_px`` (Euclidean, float64,
  exact; among equidistant keypoints the lower index is the nearest).
"""

from __future__ import annotations

import numpy as np


def min_size(size: np.ndarray, min_size_px: float) -> np.ndarray:
    """Indices of keypoints with ``size >= min_size_px`` (size = OpenCV diameter in pixels)."""
    return np.flatnonzero(np.asarray(size, dtype=np.float64) >= float(min_size_px))


def per_image_top_n_by_size(size: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` largest keypoints of one image (all if there are fewer), ascending.

    Order: size descending, then index ascending (so among equal sizes the lower index is kept).
    """
    size = np.asarray(size, dtype=np.float64)
    if n >= size.shape[0]:
        return np.arange(size.shape[0])
    order = np.lexsort((np.arange(size.shape[0]), -size))  # last key is primary: -size, then index
    return np.sort(order[:n])


# The global cutoff: the n-th keypoint of the dataset in the order (size desc, scene, image, index).
Cutoff = tuple  # (size: float, scene: str, image: int, index: int), or () = keep everything


def global_size_cutoff(entries: list[tuple[str, int, np.ndarray]], n: int) -> Cutoff:
    """The last keypoint kept by the dataset-wide top-``n`` by size.

    ``entries``: ``(scene, image, sizes of that image in row order)`` for every image of the
    dataset. Returns ``(size, scene, image, index)`` of the n-th keypoint in the order size
    descending, then scene, image, index ascending; ``()`` when the dataset has at most n keypoints.
    """
    if n < 1:
        raise ValueError(f"global_top_n_by_size needs n >= 1, got {n}")
    total = sum(int(np.asarray(s).shape[0]) for _, _, s in entries)
    if total <= n:
        return ()
    sizes = np.concatenate([np.asarray(s, dtype=np.float64) for _, _, s in entries])
    scene_names = sorted({sc for sc, _, _ in entries})
    scene_rank = {sc: i for i, sc in enumerate(scene_names)}
    scene = np.concatenate([np.full(len(s), scene_rank[sc], dtype=np.int64) for sc, _, s in entries])
    image = np.concatenate([np.full(len(s), im, dtype=np.int64) for _, im, s in entries])
    index = np.concatenate([np.arange(len(s), dtype=np.int64) for _, _, s in entries])
    # the n-th element in the order; only keypoints at least as large as the n-th largest size matter
    kth = np.partition(-sizes, n - 1)[n - 1]
    cand = np.flatnonzero(-sizes <= kth)
    order = cand[np.lexsort((index[cand], image[cand], scene[cand], -sizes[cand]))]
    last = order[n - 1]
    return (float(sizes[last]), scene_names[scene[last]], int(image[last]), int(index[last]))


def keep_by_cutoff(size: np.ndarray, scene: str, image: int, cutoff: Cutoff) -> np.ndarray:
    """Indices of one image's keypoints kept by :func:`global_size_cutoff`'s ``cutoff``.

    Kept iff ``(-size, scene, image, index) <= (-cutoff size, cutoff scene, cutoff image, cutoff
    index)`` lexicographically (scenes compared as strings).
    """
    size = np.asarray(size, dtype=np.float64)
    if cutoff == ():
        return np.arange(size.shape[0])
    c_size, c_scene, c_image, c_index = cutoff
    larger = size > c_size
    equal = size == c_size
    same_key = (scene, int(image))
    if same_key < (c_scene, int(c_image)):
        tie_kept = equal
    elif same_key > (c_scene, int(c_image)):
        tie_kept = np.zeros_like(equal)
    else:
        tie_kept = equal & (np.arange(size.shape[0]) <= c_index)
    return np.flatnonzero(larger | tie_kept)


def _nearest_within(src: np.ndarray, dst: np.ndarray, tol_px: float) -> tuple[np.ndarray, np.ndarray]:
    """For every src point its nearest dst point among those within ``tol_px`` (-1 if none) and the
    squared distance; ties to the lower dst index. Exact: a grid of cell ``tol_px`` gives every dst
    point within ``tol_px`` of a src point among the 3 x 3 cells around it."""
    n = src.shape[0]
    best = np.full(n, -1, dtype=np.int64)
    best_d2 = np.full(n, np.inf)
    if n == 0 or dst.shape[0] == 0:
        return best, best_d2
    cell = float(tol_px) if tol_px > 0 else 1.0
    dcx = np.floor(dst[:, 0] / cell).astype(np.int64)
    dcy = np.floor(dst[:, 1] / cell).astype(np.int64)
    span = int(max(dcy.max(), np.floor(src[:, 1].max() / cell)) - min(dcy.min(), np.floor(src[:, 1].min() / cell))) + 3
    ymin = int(min(dcy.min(), np.floor(src[:, 1].min() / cell))) - 1
    dkey = dcx * span + (dcy - ymin)
    dorder = np.argsort(dkey, kind="stable")
    dsorted = dkey[dorder]
    scx = np.floor(src[:, 0] / cell).astype(np.int64)
    scy = np.floor(src[:, 1] / cell).astype(np.int64)
    qi, cj = [], []
    for ox in (-1, 0, 1):
        for oy in (-1, 0, 1):
            key = (scx + ox) * span + (scy + oy - ymin)
            lo = np.searchsorted(dsorted, key, side="left")
            hi = np.searchsorted(dsorted, key, side="right")
            cnt = hi - lo
            if cnt.sum() == 0:
                continue
            rows = np.repeat(np.arange(n), cnt)
            offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            qi.append(rows)
            cj.append(dorder[np.repeat(lo, cnt) + offs])
    if not qi:
        return best, best_d2
    qi = np.concatenate(qi)
    cj = np.concatenate(cj)
    d2 = (src[qi, 0] - dst[cj, 0]) ** 2 + (src[qi, 1] - dst[cj, 1]) ** 2
    ok = d2 <= float(tol_px) ** 2
    qi, cj, d2 = qi[ok], cj[ok], d2[ok]
    # per src point: the smallest (d2, dst index)
    order = np.lexsort((cj, d2, qi))
    first = np.ones(order.shape[0], dtype=bool)
    first[1:] = qi[order][1:] != qi[order][:-1]
    sel = order[first]
    best[qi[sel]] = cj[sel]
    best_d2[qi[sel]] = d2[sel]
    return best, best_d2


def mutual_nearest_within(xy_a: np.ndarray, xy_b: np.ndarray, tol_px: float) -> tuple[np.ndarray, np.ndarray]:
    """Row-aligned index pairs ``(ia, ib)`` of the intersection of sets A and B on one image.

    ``(a, b)`` is kept iff b is a's nearest B keypoint, a is b's nearest A keypoint (nearest by
    Euclidean distance in float64; among equidistant keypoints the lower index) and
    ``|a - b| <= tol_px``. Pairs are ordered by ``ia`` ascending; each index occurs at most once.
    """
    a = np.asarray(xy_a, dtype=np.float64).reshape(-1, 2)
    b = np.asarray(xy_b, dtype=np.float64).reshape(-1, 2)
    if tol_px < 0:
        raise ValueError(f"tol_px must be >= 0, got {tol_px}")
    nn_ab, _ = _nearest_within(a, b, tol_px)
    nn_ba, _ = _nearest_within(b, a, tol_px)
    ia = np.flatnonzero(nn_ab >= 0)
    ib = nn_ab[ia]
    mutual = nn_ba[ib] == ia
    return ia[mutual], ib[mutual]
