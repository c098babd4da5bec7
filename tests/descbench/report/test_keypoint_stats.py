"""Keypoint statistics: coverage by hand, repeatability and counts against a brute force."""

from __future__ import annotations

import numpy as np

from descbench.keypoints import ImageKeypoints
from descbench.report.keypoint_stats import coverage, set_statistics


def kps(xy, size=None):
    xy = np.asarray(xy, np.float32).reshape(-1, 2)
    n = len(xy)
    size = np.full(n, 4.0, np.float32) if size is None else np.asarray(size, np.float32)
    return ImageKeypoints(xy[:, 0], xy[:, 1], size, np.zeros(n, np.float32), np.zeros(n, np.float32),
                          np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def test_coverage_by_hand():
    # 40 x 20 image, 16 px cells: 3 x 2 = 6 cells (partial edge cells count)
    assert coverage(np.array([1.0, 2.0, 17.0, 39.9]), np.array([1.0, 3.0, 1.0, 19.0]), 40, 20) == 3 / 6
    assert coverage(np.array([]), np.array([]), 40, 20) == 0.0


def brute_repeatability(xy1, xyk, H, size1, sizek, r):
    def proj(M, p):
        h = M @ np.array([p[0], p[1], 1.0])
        return (h[:2] / h[2]) if h[2] > 0 else None

    def inside(p, size):
        return p is not None and 0 <= p[0] < size[0] and 0 <= p[1] < size[1]

    Hi = np.linalg.inv(H)
    a = [proj(H, p) for p in xy1 if inside(proj(H, p), sizek)]
    b = [p for p in xyk if inside(proj(Hi, p), size1)]
    rep1 = sum(any(np.hypot(*(p - q)) <= r for q in b) for p in a)
    repk = sum(any(np.hypot(*(q - p)) <= r for p in a) for q in b)
    return len(a), len(b), rep1, repk


def test_statistics_against_brute_force():
    rng = np.random.default_rng(5)
    scenes = []
    for s in range(2):
        H = {k: np.array([[1.0, 0.02 * k, 3.0 * k], [-0.01 * k, 1.0, -2.0], [1e-5 * k, 0, 1.0]]) for k in range(2, 7)}
        per_image = {k: kps(rng.uniform(0, 120, (15 + k + s, 2)), rng.uniform(1, 30, 15 + k + s)) for k in range(1, 7)}
        per_image[4] = kps(np.zeros((0, 2)))  # an empty image
        scenes.append((f"s{s}", per_image, {str(k): [120, 100] for k in range(1, 7)}, [(1, k, H[k]) for k in range(2, 7)]))
    got = set_statistics(scenes, 3.0)
    shared = rep = 0
    vals = []
    no_data = 0
    for _, per_image, sizes, pairs in scenes:
        H = {k: h for _, k, h in pairs}
        for k in range(2, 7):
            if len(per_image[1]) == 0 or len(per_image[k]) == 0:
                no_data += 1  # a pair with an image without keypoints has no data (matching metrics' rule)
                continue
            a, b, r1, rk = brute_repeatability(per_image[1].xy, per_image[k].xy, H[k], (120, 100), (120, 100), 3.0)
            shared += a + b
            rep += r1 + rk
            if a + b:
                vals.append((r1 + rk) / (a + b))
    assert rep > 0
    np.testing.assert_allclose(got["repeatability"], rep / shared)
    np.testing.assert_allclose(got["repeatability_pair_mean"], np.mean(vals))
    assert no_data == 2 and got["repeatability_pairs_undefined"] == no_data
    counts = [len(p[k]) for _, p, _, _ in scenes for k in range(1, 7)]
    assert got["n_images"] == 12 and got["n_empty_images"] == 2 and got["keypoints_total"] == sum(counts)
    assert got["keypoints_per_image_min"] == 0 and got["keypoints_per_image_max"] == max(counts)
    sizes = np.concatenate([p[k].size for _, p, _, _ in scenes for k in range(1, 7)]).astype(np.float64)
    np.testing.assert_allclose([got["size_median"], got["size_p90"]], np.percentile(sizes, [50, 90]))
