"""descbench.metrics.depth: depth sampling, reprojection and ground-truth matches against
independent references: hand-worked geometry (a fronto-parallel wall, pure translations),
bilinear weights computed by hand, scalar loops over every keypoint pair for the ground truth, the
posed demo's exact renders, and (when torch is installed) a re-implementation of glue-factory's
definitions with ``torch.nn.functional.grid_sample``."""

from __future__ import annotations

import doctest
import importlib.util

import numpy as np
import pytest

from descbench.datasets import posed_demo as D
from descbench.metrics import depth as M

F, CX, CY, W, H = 100.0, 50.0, 40.0, 100, 80
K = np.array([[F, 0.0, CX], [0.0, F, CY], [0.0, 0.0, 1.0]])  # COLMAP's convention: offset 0.5
HALF = np.array([[0.0, 0.0, 0.5], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])


def test_the_examples_run():
    failed, attempted = doctest.testmod(M)
    assert attempted >= 15 and failed == 0


def test_the_thresholds_are_glue_factorys():
    assert M.REPROJECTION_THRESHOLDS_PX == (1.0, 3.0, 5.0)
    assert (M.GT_POSITIVE_PX, M.GT_NEGATIVE_PX) == (3.0, 5.0)


# --- sampling -----------------------------------------------------------------------------------

def test_bilinear_sampling_is_the_hand_computed_mix_of_four_pixels():
    depth = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    # (0.3, 1.6) with offset 0.5: fractional index (0.3, 1.6): pixels (0, 1), (1, 1), (0, 2), (1, 2)
    want = 4.0 * 0.7 * 0.4 + 5.0 * 0.3 * 0.4 + 7.0 * 0.7 * 0.6 + 8.0 * 0.3 * 0.6
    d, valid = M.sample_depth([[0.3, 1.6]], depth)
    assert d[0] == pytest.approx(want, abs=1e-12) and valid[0]
    # offset 0 (keypoints already in COLMAP's convention): half a pixel up and left
    d, _ = M.sample_depth([[0.8, 2.1]], depth, offset=0.0)
    assert d[0] == pytest.approx(want, abs=1e-12)


def test_the_outer_half_pixel_is_scaled_down_by_zero_padding():
    """glue-factory's grid_sample pads with zeros: beyond the last pixel centre the depth fades
    linearly to 0 one pixel out; there and beyond, 0 and invalid."""
    depth = np.array([[4.0, 2.0], [4.0, 2.0]])
    xs = [-0.25, -0.5, -0.75, -1.0, -3.0, 1.25, 1.5, 1.99, 2.0]
    d, valid = M.sample_depth([[x, 0.0] for x in xs], depth)
    assert d.tolist() == pytest.approx([3.0, 2.0, 1.0, 0.0, 0.0, 1.5, 1.0, 0.02, 0.0], abs=1e-12)
    assert valid.tolist() == [True, True, True, False, False, True, True, True, False]


def test_an_unknown_pixel_makes_bilinear_nan_and_the_nearest_pixel_is_taken():
    depth = np.array([[3.0, 0.0, 5.0]])  # 0: unknown
    # at the centre of pixel 0 pixel 1 has weight 0, but NaN * 0 is NaN: the nearest, 3; at 0.3
    # the nearest is pixel 0 too; at 0.7 and 1.4 it is pixel 1, unknown: invalid; at 1.5 rint
    # rounds to even (pixel 2): 5; at 2.5 (the outer half pixel, no NaN involved) 5 x 0.5
    d, valid = M.sample_depth([[x, 0.0] for x in (0.0, 0.3, 0.7, 1.4, 1.5, 2.5)], depth)
    assert d[[0, 1, 4, 5]].tolist() == [3.0, 3.0, 5.0, 2.5] and np.isnan(d[[2, 3]]).all()
    assert valid.tolist() == [True, True, False, False, True, True]
    neg = np.array([[3.0, -1.0]])  # a negative depth is unknown too
    assert M.sample_depth([[0.5, 0.0]], neg)[0].tolist() == [3.0]


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="xy"):
        M.sample_depth([[np.nan, 0.0]], np.ones((2, 2)))
    with pytest.raises(ValueError, match="inf"):
        M.sample_depth([[0.0, 0.0]], np.full((2, 2), np.inf))
    with pytest.raises(ValueError, match="xy0 and xy1"):
        M.symmetric_reprojection_error(np.zeros((2, 2)), np.zeros((3, 2)), K, K, np.eye(3), np.zeros(3),
                                       np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="depth_values"):
        M.project(np.zeros((2, 2)), [1.0], K, K, np.eye(3), np.zeros(3), (W, H))


# --- hand-worked geometry -----------------------------------------------------------------------

def test_a_fronto_parallel_wall_and_a_sideways_move_shift_every_pixel_by_f_t_over_z():
    """Wall at z = 4, camera 1 displaced by (0.2, -0.1, 0) in camera 0's frame (t = -c):
    a pixel moves by (-f 0.2 / 4, +f 0.1 / 4) = (-5, +2.5)."""
    wall = np.full((H, W), 4.0)
    t = np.array([-0.2, 0.1, 0.0])
    xy0 = np.array([[10.0, 10.0], [49.5, 39.5], [80.25, 60.75]])
    xy1, visible = M.project(xy0, [4.0] * 3, K, K, np.eye(3), t, (W, H))
    assert np.allclose(xy1, xy0 + [-5.0, 2.5], atol=1e-12) and visible.all()
    e, valid = M.symmetric_reprojection_error(xy0, xy1 + [[0.0, 0.0], [3.0, 4.0], [0.0, -1.0]], K, K, np.eye(3), t,
                                              wall, wall)
    assert e.tolist() == pytest.approx([0.0, 5.0, 1.0], abs=1e-9) and valid.all()


def test_moving_back_along_the_axis_scales_about_the_principal_point():
    """Camera 1 2 m behind camera 0 (t = (0, 0, 2)), wall at z = 2: image 1 is image 0 shrunk by
    2 / 4 about the principal point (49.5, 39.5 in descbench's convention)."""
    xy0 = np.array([[9.5, 19.5], [89.5, 79.5]])
    xy1, visible = M.project(xy0, [2.0, 2.0], K, K, np.eye(3), [0.0, 0.0, 2.0], (W, H))
    assert np.allclose(xy1, [[29.5, 29.5], [69.5, 59.5]], atol=1e-12) and visible.all()


def test_visibility_is_depth_in_front_and_glue_factorys_in_image_test():
    """in_image is 0 <= p <= size - 1 in COLMAP's coordinates: -0.5 <= x <= W - 1.5 here."""
    t0 = np.zeros(3)
    xy = np.array([[-0.5, 0.0], [-0.51, 0.0], [W - 1.5, H - 1.5], [W - 1.49, 0.0], [10.0, 10.0], [10.0, 10.0]])
    d = np.array([1.0, 1.0, 1.0, 1.0, 0.0, np.nan])
    xy1, visible = M.project(xy, d, K, K, np.eye(3), t0, (W, H))
    assert visible.tolist() == [True, False, True, False, False, False]
    # behind camera j: z clamped to 1e-4, the pixel finite, not visible
    xy1, visible = M.project([[49.5, 39.5 + F]], [1.0], K, K, np.eye(3), [0.0, 0.0, -1.0 + 5e-5], (W, H))
    assert not visible[0] and np.isfinite(xy1).all() and xy1[0, 1] == pytest.approx(39.5 + F * 1.0 / 1e-4)


def test_a_match_without_depth_is_not_covisible_and_not_counted():
    wall = np.full((H, W), 4.0)
    wall[:, :10] = 0.0  # no depth on the left of image 0
    t = np.array([-0.2, 0.0, 0.0])
    xy0 = np.array([[5.0, 5.0], [30.0, 30.0], [60.0, 30.0]])
    xy1 = xy0 + [-5.0, 0.0]
    e, valid = M.symmetric_reprojection_error(xy0, xy1, K, K, np.eye(3), t, wall, np.full((H, W), 4.0))
    assert valid.tolist() == [False, True, True] and e[1:].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    assert M.reprojection_precision(e, valid).tolist() == [1.0, 1.0, 1.0]
    assert M.covisibility(valid) == (2, pytest.approx(200.0 / 3))
    e[1] = np.nan  # NaN counts as inf: below no threshold
    assert M.reprojection_precision(e, valid).tolist() == [0.5, 0.5, 0.5]
    assert M.reprojection_precision(e, [False] * 3).tolist() == [0.0, 0.0, 0.0]
    count, percent = M.covisibility([])
    assert count == 0 and np.isnan(percent)


def test_thresholds_are_strict():
    assert M.reprojection_precision([1.0, 3.0, 5.0, 0.999], [True] * 4).tolist() == [0.25, 0.5, 0.75]


# --- ground-truth matches -----------------------------------------------------------------------

def scalar_depth(depth, x, y):
    """glue-factory's sample_depth for one keypoint (offset 0.5), written as loops."""
    h, w = depth.shape

    def at(c, r):
        if 0 <= c < w and 0 <= r < h:
            v = depth[r, c]
            return v if v > 0 else float("nan")
        return 0.0

    c0, r0 = int(np.floor(x)), int(np.floor(y))
    fx, fy = x - c0, y - r0
    total = 0.0
    for dc, dr, wgt in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)), (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
        total += at(c0 + dc, r0 + dr) * wgt
    if np.isnan(total):
        total = at(int(np.rint(x)), int(np.rint(y)))
    return total, (not np.isnan(total)) and total > 0


def scalar_project(x, y, d, Ki, Kj, R, t, size):
    """One keypoint (offset 0.5) through depth d into camera j: pixel and visibility (depth only)."""
    X = d * np.array([(x + 0.5 - Ki[0, 2]) / Ki[0, 0], (y + 0.5 - Ki[1, 2]) / Ki[1, 1], 1.0])
    Xj = R @ X + t
    z = max(Xj[2], 1e-4) if not np.isnan(Xj[2]) else np.nan
    px, py = Kj[0, 0] * Xj[0] / z + Kj[0, 2], Kj[1, 1] * Xj[1] / z + Kj[1, 2]
    inside = 0 <= px <= size[0] - 1 and 0 <= py <= size[1] - 1
    return px - 0.5, py - 0.5, bool(Xj[2] > 1e-4 and inside)


def brute_force_gt(xy0, xy1, K0, K1, R, t, depth0, depth1, pos=3.0, neg=5.0):
    Rinv, tinv = R.T, -R.T @ t
    s0 = [scalar_depth(depth0, *p) for p in xy0]
    s1 = [scalar_depth(depth1, *p) for p in xy1]
    p0 = [scalar_project(*p, d, K0, K1, R, t, depth1.shape[::-1]) for p, (d, _) in zip(xy0, s0)]
    p1 = [scalar_project(*p, d, K1, K0, Rinv, tinv, depth0.shape[::-1]) for p, (d, _) in zip(xy1, s1)]
    n0, n1 = len(xy0), len(xy1)
    dist = np.full((n0, n1), np.inf)
    e0 = np.zeros((n0, n1))
    for i in range(n0):
        for j in range(n1):
            e0[i, j] = (p0[i][0] - xy1[j][0]) ** 2 + (p0[i][1] - xy1[j][1]) ** 2
            e1 = (xy0[i][0] - p1[j][0]) ** 2 + (xy0[i][1] - p1[j][1]) ** 2
            if s0[i][1] and p0[i][2] and s1[j][1] and p1[j][2]:
                dist[i, j] = max(e0[i, j], e1)
    out = []
    for i in range(n0):
        j = min(range(n1), key=lambda k: dist[i, k])  # the first minimum
        i_back = min(range(n0), key=lambda k: dist[k, j])
        m = j if (i_back == i and dist[i, j] < pos**2) else -2
        if s0[i][1] and min(e0[i]) > neg**2:
            m = -1
        out.append(m)
    return np.array(out)


@pytest.mark.parametrize("seed", range(4))
def test_gt_matches_equal_a_brute_force_loop_on_random_scenes(seed):
    """Two cameras over a slanted plane with holes in its depth maps; keypoints of image 1 are
    image 0's true projections moved by 0-8 px, shuffled, plus random ones: every outcome occurs."""
    rng = np.random.default_rng(seed)
    n = np.array([0.1, -0.2, 1.0]) / np.linalg.norm([0.1, -0.2, 1.0])  # plane n . X = 5 in camera 0
    ang = rng.normal(scale=0.05, size=3)
    import cv2
    R = cv2.Rodrigues(ang)[0]
    t = np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3)])
    K1 = K + np.array([[5.0, 0, 2.0], [0, 5.0, -1.0], [0, 0, 0]])
    ys, xs = np.mgrid[0:H, 0:W].astype(float)

    def plane_depth(Kc, Rc, tc):  # the plane in camera c: (Rc n) . X = 5 + (Rc n) . tc
        nc = Rc @ n
        dc = 5.0 + nc @ tc
        rays = np.stack([(xs + 0.5 - Kc[0, 2]) / Kc[0, 0], (ys + 0.5 - Kc[1, 2]) / Kc[1, 1], np.ones_like(xs)])
        return dc / np.tensordot(nc, rays, 1)

    depth0, depth1 = plane_depth(K, np.eye(3), np.zeros(3)), plane_depth(K1, R, t)
    depth0[rng.random((H, W)) < 0.05] = 0.0
    depth1[20:30, 30:45] = 0.0
    xy0 = rng.uniform(-1.0, [W, H], size=(60, 2))
    d0, _ = M.sample_depth(xy0, depth0)
    proj, _ = M.project(xy0, d0, K, K1, R, t, (W, H))
    keep = np.isfinite(proj).all(1)
    moved = proj[keep][:40] + rng.normal(size=(min(40, keep.sum()), 2)) * rng.uniform(0.0, 5.0, (min(40, keep.sum()), 1))
    xy1 = np.concatenate([moved, rng.uniform(0.0, [W, H], size=(15, 2))])
    xy1 = xy1[rng.permutation(len(xy1))]
    got = M.gt_matches_from_pose_depth(xy0, xy1, K, K1, R, t, depth0, depth1)
    want = brute_force_gt(xy0, xy1, K, K1, R, t, depth0, depth1)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert {-2, -1}.issubset(set(got.tolist())) and (got >= 0).sum() >= 10
    assert len(set(got[got >= 0].tolist())) == (got >= 0).sum()  # mutual nearest: one-to-one


def test_a_gt_match_is_within_3_px_in_both_images():
    """Camera 1 zooms 2x (f = 200, same centre, no motion; wall at 4 m): a keypoint 4 px from the
    true position in image 1 is 2 px from it in image 0. D = max(16, 4) = 16 >= 9: not a match;
    min e0 = 16 <= 25: not unmatched either: ignored. At 2 px in image 1 (1 px in 0) a match; at
    12 px (6 in 0) unmatched."""
    K1 = np.array([[2 * F, 0.0, CX], [0.0, 2 * F, CY], [0.0, 0.0, 1.0]])
    wall = np.full((H, W), 4.0)
    xy0 = np.array([[59.5, 39.5]])  # 10 px right of the centre: 20 px in image 1
    for offset_1, want in ((4.0, -2), (2.0, 0), (12.0, -1)):
        xy1 = np.array([[69.5 + offset_1, 39.5]])
        got = M.gt_matches_from_pose_depth(xy0, xy1, K, K1, np.eye(3), np.zeros(3), wall, wall)
        assert got.tolist() == [want], offset_1


def test_gt_matches_of_empty_inputs_are_unmatched():
    wall = np.full((H, W), 4.0)
    assert M.gt_matches_from_pose_depth(np.zeros((3, 2)), np.zeros((0, 2)), K, K, np.eye(3), np.zeros(3),
                                        wall, wall).tolist() == [-1, -1, -1]
    assert M.gt_matches_from_pose_depth(np.zeros((0, 2)), np.zeros((3, 2)), K, K, np.eye(3), np.zeros(3),
                                        wall, wall).shape == (0,)


def test_recall_and_precision_count_as_glue_factory():
    gt = np.array([0, 1, 2, -1, -1, -2, -2])
    m = np.array([0, 1, 5, 3, -1, 4, -1])
    # recall: gt >= 0 are 0, 1, 2; reproduced 0 and 1
    assert M.gt_match_recall(m, gt) == pytest.approx(2 / 3, rel=1e-7)
    # precision: m >= 0 where gt >= -1: indices 0, 1, 2, 3; correct 0 and 1 (index 5, ignored, left out)
    assert M.gt_match_precision(m, gt) == pytest.approx(2 / 4, rel=1e-7)
    assert M.gt_match_recall(m, [-1] * 7) == 0.0 and M.gt_match_precision([-1] * 7, gt) == 0.0
    assert M.gt_match_recall([0, 1], [0, 1]) == 2 / (2 + 1e-8)  # glue-factory's 1e-8, kept
    with pytest.raises(ValueError, match="matches0"):
        M.gt_match_recall([0, 1], [0])


# --- the posed demo -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_pair():
    planes, cams = D.make_scene(0)
    return planes, cams, D.render(planes, cams[0])[1], D.render(planes, cams[1])[1]


def visible_plane_depth(planes, cam, xs, ys):
    """The z-buffer at sub-pixel positions: the depth of the nearest plane whose rectangle (as the
    renderer draws it: texel centres from 0.5 / s to size - 0.5 / s) holds the ray's point."""
    best = np.full(len(xs), np.inf)
    rays = np.linalg.solve(cam.K, np.stack([xs, ys, np.ones_like(xs)]))
    for p in planes:
        z = D.plane_depth(p, cam, xs, ys)
        X = (cam.R.T @ (rays * np.where(np.isfinite(z), z, 1.0) - cam.t[:, None])).T
        a, b = (X - p.origin) @ p.u, (X - p.origin) @ p.v
        th, tw = p.texture.shape[:2]
        lo = 0.5 / p.px_per_m
        on = np.isfinite(z) & (a >= lo) & (a <= (tw - 0.5) / p.px_per_m) & (b >= lo) & (b <= (th - 0.5) / p.px_per_m)
        best = np.where(on & (z < best), z, best)
    return best


def test_exact_correspondences_of_the_demo_have_zero_error(demo_pair):
    """Pixels of view 0 projected with the exact rendered depth into view 1 (COLMAP's K, offset
    0.5, as views.txt writes them): where the point is what view 1 sees and its four neighbouring
    pixels lie on the same plane, the symmetric error is ~0 and the precision 1; the covisible
    matches are exactly those inside view 1's sampling support (-1 < x < W, -1 < y < H)."""
    planes, cams, depth0, depth1 = demo_pair
    w, h = D.IMAGE_SIZE
    ys, xs = np.mgrid[2:h:7, 3:w:7]
    xy0 = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    K0, K1 = cams[0].K + HALF, cams[1].K + HALF
    R = cams[1].R @ cams[0].R.T
    t = cams[1].t - R @ cams[0].t
    d0 = depth0[xy0[:, 1].astype(int), xy0[:, 0].astype(int)]
    xy1, visible = M.project(xy0, d0, K0, K1, R, t, (w, h))
    # reference: the point in camera 1 and its pixel by explicit matrices
    X1 = (np.linalg.solve(cams[0].K, np.column_stack([xy0, np.ones(len(xy0))]).T) * d0).T @ R.T + t
    assert np.allclose(xy1, (X1 @ cams[1].K.T)[:, :2] / X1[:, 2:], atol=1e-9)
    assert np.array_equal(visible, (xy1[:, 0] >= -0.5) & (xy1[:, 0] <= w - 1.5) & (xy1[:, 1] >= -0.5)
                          & (xy1[:, 1] <= h - 1.5) & (X1[:, 2] > 1e-4))
    seen = visible & (np.abs(visible_plane_depth(planes, cams[1], xy1[:, 0], xy1[:, 1]) - X1[:, 2]) < 1e-9)
    # the four pixels around it on the point's own plane (the bilinear depth is then nearly exact)
    own = np.array([np.argmin([abs((cams[0].R.T @ (x - cams[0].t) - p.origin) @ p.normal) for p in planes])
                    for x in (np.linalg.solve(cams[0].K, np.column_stack([xy0, np.ones(len(xy0))]).T) * d0).T])
    interior = seen.copy()
    for k in np.flatnonzero(seen):
        c0, r0 = np.floor(xy1[k]).astype(int)
        cs, rs = np.array([c0, c0 + 1, c0, c0 + 1], float), np.array([r0, r0, r0 + 1, r0 + 1], float)
        ok = (cs >= 0) & (cs < w) & (rs >= 0) & (rs < h)
        zp = D.plane_depth(planes[own[k]], cams[1], cs[ok], rs[ok])
        # (a neighbour outside the image is zero padding: the depth scaled down, a large error)
        interior[k] = ok.all() and np.allclose(depth1[rs.astype(int), cs.astype(int)], zp, rtol=0, atol=1e-9)
    e, valid = M.symmetric_reprojection_error(xy0, xy1, K0, K1, R, t, depth0, depth1)
    assert interior.sum() > 0.6 * visible.sum() > 1000
    assert e[interior].max() < 1e-3
    assert M.reprojection_precision(e[interior], valid[interior]).tolist() == [1.0, 1.0, 1.0]
    support = (xy1[:, 0] > -1) & (xy1[:, 0] < w) & (xy1[:, 1] > -1) & (xy1[:, 1] < h)
    assert np.array_equal(valid, support)
    count, percent = M.covisibility(valid)
    assert count == support.sum() and 50.0 < percent < 100.0  # view 1 turns away from part of view 0
    # the ground truth of the exact projections: every interior point is its own match
    gt = M.gt_matches_from_pose_depth(xy0, xy1, K0, K1, R, t, depth0, depth1)
    assert np.array_equal(gt[interior], np.flatnonzero(interior))


# --- torch re-implementation (glue-factory's definitions, float64) ------------------------------

HAS_TORCH = importlib.util.find_spec("torch") is not None


def torch_sample_depth(torch, pts, depth):
    """glue-factory's sample_depth as its source defines it: pts in COLMAP's convention."""
    import torch.nn.functional as Fn

    d = torch.from_numpy(depth)
    d = torch.where(d > 0, d, torch.tensor(float("nan"), dtype=d.dtype))[None, None]
    h, w = depth.shape
    p = torch.from_numpy(pts)
    grid = (p / torch.tensor([[w, h]], dtype=p.dtype) * 2 - 1)[None, None]
    lin = Fn.grid_sample(d, grid, mode="bilinear", align_corners=False)
    nn = Fn.grid_sample(d, grid, mode="nearest", align_corners=False)
    out = torch.where(torch.isnan(lin), nn, lin)[0, 0, 0]
    return out.numpy(), (~torch.isnan(out) & (out > 0)).numpy()


@pytest.mark.skipif(not HAS_TORCH, reason="torch is optional (the learned extra)")
def test_sampling_equals_torch_grid_sample():
    import torch

    rng = np.random.default_rng(3)
    depth = rng.uniform(1.0, 9.0, (17, 23))
    depth[rng.random(depth.shape) < 0.2] = 0.0
    xy = np.concatenate([rng.uniform(-2.0, [25.0, 19.0], size=(4000, 2)),
                         np.stack(np.meshgrid(np.arange(-2, 25), np.arange(-2, 19)), -1).reshape(-1, 2) + 0.0,
                         rng.integers(0, 17, (200, 2)) + 0.5])  # pixel centres, and halfway points
    d, valid = M.sample_depth(xy, depth)
    d_t, valid_t = torch_sample_depth(torch, xy + 0.5, depth)
    # exactly one pixel outside (index -1 or the size): 0 here, the normalised grid's rounding
    # leaves ~1e-15 (valid) in torch; exactly halfway between two pixels where the nearest one is
    # taken, rint rounds to even, torch wherever its grid's rounding falls (module docstring)
    edge = (xy[:, 0] == -1) | (xy[:, 0] == 23) | (xy[:, 1] == -1) | (xy[:, 1] == 17)
    assert (d[edge] == 0).all() and (np.nan_to_num(d_t[edge]) < 1e-12).all()
    tie = ((xy % 1) == 0.5).any(1)
    assert (d[tie] != d_t[tie]).sum() > 0  # the rounding does show
    same = ~edge & ~tie
    assert np.array_equal(valid[same], valid_t[same])
    assert np.allclose(d[same & valid], d_t[same & valid], rtol=0, atol=1e-9)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is optional (the learned extra)")
def test_symmetric_error_equals_a_torch_reimplementation():
    import torch

    rng = np.random.default_rng(4)
    depth0, depth1 = rng.uniform(3.0, 6.0, (H, W)), rng.uniform(3.0, 6.0, (H, W))
    depth0[:5], depth1[:, -5:] = 0.0, 0.0
    import cv2
    R, t = cv2.Rodrigues(np.array([0.02, -0.05, 0.01]))[0], np.array([-0.3, 0.05, 0.1])
    xy0, xy1 = rng.uniform(-1.0, [W, H], (300, 2)), rng.uniform(-1.0, [W, H], (300, 2))
    e, valid = M.symmetric_reprojection_error(xy0, xy1, K, K, R, t, depth0, depth1)

    def project(pts, d, Ki, Kj, R, t):  # COLMAP's convention: image2cam, transform, cam2image
        Ki, Kj, R, t = (torch.from_numpy(a) for a in (Ki, Kj, R, t))
        p = torch.from_numpy(pts)
        X = torch.cat([(p - Ki[:2, 2]) / Ki.diagonal()[:2], torch.ones(len(p), 1, dtype=p.dtype)], -1)
        X = (X * torch.from_numpy(d)[:, None]) @ R.T + t
        return X[:, :2] / X[:, 2:].clamp(min=1e-4) * Kj.diagonal()[:2] + Kj[:2, 2]

    p0, p1 = xy0 + 0.5, xy1 + 0.5
    d0, v0 = torch_sample_depth(torch, p0, depth0)
    d1, v1 = torch_sample_depth(torch, p1, depth1)
    p01, p10 = project(p0, d0, K, K, R, t), project(p1, d1, K, K, R.T, -R.T @ t)
    e_t = 0.5 * ((p01 - torch.from_numpy(p1)).norm(dim=-1) + (p10 - torch.from_numpy(p0)).norm(dim=-1))
    assert np.array_equal(valid, v0 & v1) and 100 < valid.sum() < 300
    assert np.allclose(e[valid], e_t.numpy()[valid], rtol=1e-12, atol=1e-9)


# --- every bad argument is named; each clause of a compound check on its own ---------------------

WALL = np.full((H, W), 4.0)
I3, T0 = np.eye(3), np.zeros(3)


def _sym(**kw):
    a = dict(xy0=np.zeros((2, 2)), xy1=np.zeros((2, 2)), K0=K, K1=K, R=I3, t=T0, depth0=WALL, depth1=WALL)
    a.update(kw)
    return lambda: M.symmetric_reprojection_error(**a)


def _gt(**kw):
    a = dict(xy0=np.zeros((2, 2)), xy1=np.zeros((3, 2)), K0=K, K1=K, R=I3, t=T0, depth0=WALL, depth1=WALL)
    a.update(kw)
    return lambda: M.gt_matches_from_pose_depth(**a)


def _proj(**kw):
    a = dict(xy=np.zeros((2, 2)), depth_values=[1.0, 1.0], K_i=K, K_j=K, R=I3, t=T0, image_size_j=(W, H))
    a.update(kw)
    return lambda: M.project(**a)


BAD_POINTS = [np.zeros((2, 3)), [1.0, 2.0], [[np.nan, 1.0], [0.0, 0.0]], [[5.0]]]  # [N, 3], 1-D, NaN, [1, 1]
BAD_DEPTHS = [np.ones(4), np.ones((H, W, 1)), np.ones((0, 4))]  # 1-D, [H, W, 1], empty
BAD_R = [np.eye(2), np.diag([1.0, np.nan, 1.0])]  # finite but 2x2; 3x3 but NaN
BAD_T = [[1.0, 0.0], [0.0, np.nan, 0.0]]  # 2 values; 3 but NaN


@pytest.mark.bad_input
@pytest.mark.parametrize("call, name", [
    *[(lambda p=p: M.sample_depth(p, WALL), "xy") for p in BAD_POINTS],
    *[(lambda d=d: M.sample_depth([[1.0, 1.0]], d), "depth") for d in BAD_DEPTHS],
    *[(_proj(xy=p), "xy") for p in BAD_POINTS[:3]],
    (_proj(K_j=np.diag([100.0, 100.0, 2.0])), "K_j"),
    (_proj(K_j=np.eye(2)), "K_j"),
    *[(_proj(R=r), "R") for r in BAD_R],
    *[(_proj(t=t), "t") for t in BAD_T],
    *[(_sym(xy0=p), "xy0") for p in BAD_POINTS],
    *[(_sym(xy1=p), "xy1") for p in BAD_POINTS],
    *[(_sym(depth0=d), "depth0") for d in BAD_DEPTHS],
    *[(_sym(depth1=d), "depth1") for d in BAD_DEPTHS],
    *[(_sym(R=r), "R") for r in BAD_R],
    *[(_sym(t=t), "t") for t in BAD_T],
    *[(_gt(xy0=p), "xy0") for p in BAD_POINTS],
    *[(_gt(xy1=p), "xy1") for p in BAD_POINTS],
    *[(_gt(depth0=d), "depth0") for d in BAD_DEPTHS],
    *[(_gt(depth1=d), "depth1") for d in BAD_DEPTHS],
    *[(_gt(R=r), "R") for r in BAD_R],
    *[(_gt(t=t), "t") for t in BAD_T],
    (lambda: M.reprojection_precision([1.0, 2.0], [True]), "errors and valid"),
])
def test_each_bad_argument_is_named_in_the_error(call, name):
    """One argument bad at a time (the others valid): the message starts with its name."""
    with pytest.raises(ValueError, match=rf"^{name}: "):
        call()


def test_a_single_keypoint_and_a_1x1_depth_map_are_valid_input():
    d, valid = M.sample_depth([[0.0, 0.0]], [[2.0]])
    assert d.tolist() == [2.0] and valid.tolist() == [True]


# --- boundaries -----------------------------------------------------------------------------------

def test_a_depth_between_0_and_1_is_valid():
    """Unknown is <= 0 (module docstring); 0.5 m (a close-up, ScanNet) is a depth like any other."""
    d, valid = M.sample_depth([[1.0, 1.0], [0.3, 1.7]], np.full((3, 3), 0.5))
    assert d.tolist() == pytest.approx([0.5, 0.5], abs=1e-15) and valid.tolist() == [True, True]


def test_empty_keypoints_give_empty_results_of_the_right_shape():
    """No keypoint (a plain [] as well as [0, 2]): empty depths, pixels [0, 2], masks [0] bool; no
    match: empty errors and validity."""
    for xy in ([], np.zeros((0, 2))):
        d, valid = M.sample_depth(xy, WALL)
        assert d.shape == (0,) and valid.shape == (0,)
        xy_j, visible = M.project(xy, [], K, K, I3, T0, (W, H))
        assert xy_j.shape == (0, 2) and visible.shape == (0,) and visible.dtype == bool
        e, valid = M.symmetric_reprojection_error(xy, xy, K, K, I3, T0, WALL, WALL)
        assert e.shape == (0,) and valid.shape == (0,)


# pixel arithmetic exact in binary: f = 64, principal point (32, 24), depths powers of 2
K64 = np.array([[64.0, 0.0, 32.0], [0.0, 64.0, 24.0], [0.0, 0.0, 1.0]])
W64, H64 = 64, 48


def test_a_pixel_exactly_on_the_image_border_is_in_image():
    """R = I, t = 0: a keypoint maps to itself (COLMAP pixel x + 0.5). glue-factory's in_image is
    0 <= p <= size - 1: keypoints at -0.5 and size - 1.5 (row or column) are in, 1/64 px beyond not."""
    e = 1.0 / 64
    xy = np.array([[10.0, -0.5], [-0.5, 10.0], [10.0, H64 - 1.5], [W64 - 1.5, 10.0],
                   [10.0, -0.5 - e], [-0.5 - e, 10.0], [10.0, H64 - 1.5 + e], [W64 - 1.5 + e, 10.0]])
    xy_j, visible = M.project(xy, np.ones(len(xy)), K64, K64, I3, T0, (W64, H64))
    assert xy_j.tolist() == xy.tolist()
    assert visible.tolist() == [True] * 4 + [False] * 4


def test_a_point_exactly_at_z_1e_4_is_not_in_front():
    """On the principal ray at depth 1e-4 (R = I, t = 0): z_j = 1e-4 exactly, and visibility needs
    z > 1e-4 (glue-factory's Camera.eps); at 2e-4 it is visible."""
    xy = np.array([[31.5, 23.5], [31.5, 23.5]])  # COLMAP (32, 24): the principal point
    _, visible = M.project(xy, [M.CAMERA_Z_EPS, 2e-4], K64, K64, I3, T0, (W64, H64))
    assert visible.tolist() == [False, True]


def test_a_zero_depth_or_a_given_invalid_mask_is_never_visible():
    """Depth 0 puts the point at camera i's centre, which camera j (t = (0, 0, 1)) sees at its
    principal point, in front and in image: still invisible, a depth must be > 0 (the default
    valid_i). A valid_i given as False overrides a good depth."""
    xy = np.array([[31.5, 23.5], [31.5, 23.5], [31.5, 23.5]])
    xy_j, visible = M.project(xy, [0.0, 2.0, 2.0], K64, K64, I3, [0.0, 0.0, 1.0], (W64, H64))
    assert xy_j[0].tolist() == [31.5, 23.5] and visible.tolist() == [False, True, True]
    _, visible = M.project(xy, [0.0, 2.0, 2.0], K64, K64, I3, [0.0, 0.0, 1.0], (W64, H64),
                           valid_i=[False, False, True])
    assert visible.tolist() == [False, False, True]


def _gt64(xy0, xy1):
    """A wall at z = 4 (powers of 2: exact pixels), camera 1 moved 1 right: keypoints move by
    f / z = 16 px left. Keypoint (40.5, 32) of image 0 lands on (24.5, 32) in image 1."""
    wall = np.full((H64, W64), 4.0)
    return M.gt_matches_from_pose_depth(xy0, xy1, K64, K64, I3, [-1.0, 0.0, 0.0], wall, wall).tolist()


def test_a_gt_match_exactly_3_px_off_is_not_positive():
    """D < pos_th^2 (strict, module docstring): 3 px off in both images, D = 9: not a match, and
    not unmatched (min e0 = 9 <= 25): ignored; 2.75 px off: matched."""
    assert _gt64([[40.5, 32.0]], [[24.5 + 3.0, 32.0]]) == [M.IGNORE]
    assert _gt64([[40.5, 32.0]], [[24.5 + 2.75, 32.0]]) == [0]


def test_a_keypoint_exactly_5_px_from_all_is_not_unmatched():
    """min_j e0 > neg_th^2 (strict): exactly 5 px from its only candidate, min e0 = 25: ignored;
    5.25 px: unmatched."""
    assert _gt64([[40.5, 32.0]], [[24.5 + 5.0, 32.0]]) == [M.IGNORE]
    assert _gt64([[40.5, 32.0]], [[24.5 + 5.25, 32.0]]) == [M.UNMATCHED]


# --- offset reaches the sampling and the projections ----------------------------------------------

def test_offset_0_reaches_both_depth_samplings():
    """Keypoints in COLMAP's convention (offset 0): (49.5, 40) samples at fractional index
    u = 49.0, the centre of pixel 49, depth 5 (pixel 50 beyond the step, depth 10, has weight 0);
    with offset 0.5 it would be halfway, 7.5. Camera 1 1 m right, equal K: image 0's keypoint moves
    f / 5 = 20 px left to (29.5, 40), where image 1's depth steps from 5 to 10 likewise. The match
    is exact (error 0, gt match 0); a keypoint at x = -0.8 samples u = -1.3, outside the map's
    support: no depth (invalid, ignored)."""
    depth0, depth1 = np.full((H, W), 5.0), np.full((H, W), 5.0)
    depth0[:, 50:], depth1[:, 30:] = 10.0, 10.0
    t = [-1.0, 0.0, 0.0]
    xy0 = np.array([[49.5, 40.0], [-0.8, 40.0], [70.0, 40.0]])
    xy1 = np.array([[29.5, 40.0], [60.0, 10.0], [-0.8, 40.0]])
    e, valid = M.symmetric_reprojection_error(xy0, xy1, K, K, I3, t, depth0, depth1, offset=0.0)
    assert e[0] == pytest.approx(0.0, abs=1e-9) and valid.tolist() == [True, False, False]
    gt = M.gt_matches_from_pose_depth(xy0[:2], xy1[:2], K, K, I3, t, depth0, depth1, offset=0.0)
    assert gt.tolist() == [0, M.IGNORE]


@pytest.mark.parametrize("zoom_in_1", [True, False])
def test_offset_0_reaches_both_projections(zoom_in_1):
    """One camera zoomed 10x (f = 1000, same principal point), no motion, walls at 5 m, keypoints in
    COLMAP's convention (offset 0): (51, 41) at f = 100 is (60, 50) at f = 1000 (10 x the 1 px
    from the centre). With offset 0.5 in the zoomed direction it would land at (64.5, 54.5)."""
    K10 = np.array([[1000.0, 0.0, CX], [0.0, 1000.0, CY], [0.0, 0.0, 1.0]])
    wall = np.full((H, W), 5.0)
    a, b = np.array([[51.0, 41.0]]), np.array([[60.0, 50.0]])
    K0, K1, xy0, xy1 = (K, K10, a, b) if zoom_in_1 else (K10, K, b, a)
    e, valid = M.symmetric_reprojection_error(xy0, xy1, K0, K1, I3, T0, wall, wall, offset=0.0)
    assert e[0] == pytest.approx(0.0, abs=1e-9) and valid.tolist() == [True]
    assert M.gt_matches_from_pose_depth(xy0, xy1, K0, K1, I3, T0, wall, wall, offset=0.0).tolist() == [0]


# --- realistic input types: OpenCV's (N, 1) columns and uint8 masks, float32 keypoints ------------

def test_column_inputs_as_opencv_returns_them_are_flattened():
    """t as [3, 1] (cv2.recoverPose), depths and an inlier mask as [N, 1] uint8 (cv2's masks):
    the same as flat input; visible stays [N] bool."""
    xy = np.array([[10.0, 10.0], [20.0, 30.0]])
    flat = M.project(xy, [4.0, 4.0], K, K, I3, [-0.2, 0.1, 0.0], (W, H))
    col = M.project(xy, np.array([[4.0], [4.0]]), K, K, I3, np.array([[-0.2], [0.1], [0.0]]), (W, H),
                    valid_i=np.array([[1], [0]], dtype=np.uint8))
    assert col[0].tolist() == flat[0].tolist()
    assert col[1].shape == (2,) and col[1].dtype == bool and col[1].tolist() == [True, False]
    # a mask of 0 / 2 (any non-zero is valid) still gives a bool mask
    _, vis = M.project(xy, [4.0, 4.0], K, K, I3, T0, (W, H), valid_i=np.array([2, 0], dtype=np.uint8))
    assert vis.dtype == bool and vis.tolist() == [True, False]
    assert M.reprojection_precision(np.array([[0.5], [2.0]]), [True, True]).tolist() == [0.5, 1.0, 1.0]
    assert M.reprojection_precision([0.5, 2.0], np.array([[1], [1]], dtype=np.uint8)).tolist() == [0.5, 1.0, 1.0]
    assert M.gt_match_recall(np.array([[0], [1]]), [0, 2]) == pytest.approx(0.5)
    assert M.gt_match_recall([0, 1], np.array([[0], [2]])) == pytest.approx(0.5)


def test_covisibility_counts_a_uint8_mask_by_truth_and_warns_on_nothing():
    """An OpenCV-style 0 / 255 mask: 2 of 4 valid, 50 %. No match: NaN without a numpy warning."""
    assert M.covisibility(np.array([255, 0, 255, 0], dtype=np.uint8)) == (2, 50.0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        count, percent = M.covisibility([])
    assert count == 0 and np.isnan(percent)


def test_float32_keypoints_are_sampled_in_float64():
    """x = 1024 - 2^-14 is a float32, x + 0.5 is not (float32 rounds it to 1024.5). On a depth ramp
    1 + column index, the bilinear depth at u = x + 0.5 - 0.5 = x is 1 + x = 1024.99993896484375."""
    depth = 1.0 + np.arange(1030.0)[None, :]
    x = np.float32(1024.0 - 2.0**-14)
    d, valid = M.sample_depth(np.array([[x, 0.0]], dtype=np.float32), depth)
    assert d[0] == 1024.99993896484375 and valid[0]


def test_float32_errors_are_compared_with_the_thresholds_in_float64():
    """float32(0.7) = 0.699999988... is strictly below 0.7 (a float32 comparison would round 0.7 to
    the same float32 and count it as not below)."""
    e = np.array([0.7], dtype=np.float32)
    assert float(e[0]) < 0.7
    assert M.reprojection_precision(e, [True], thresholds=(0.7,)).tolist() == [1.0]


@pytest.mark.bad_input
@pytest.mark.parametrize("call, message", [
    (_proj(K_i=np.eye(2)), "^K_i: expected finite 3x3 intrinsics, got shape"),
    (_proj(K_i=np.diag([100.0, 100.0, 2.0])), "^K_i: expected pinhole intrinsics"),
    (_sym(K0=np.eye(2)), "^K0: "), (_sym(K1=np.eye(2)), "^K1: "),
    (_gt(K0=np.eye(2)), "^K0: "), (_gt(K1=np.diag([100.0, 100.0, 2.0])), "^K1: "),
    # an empty image is no reason to accept a bad camera
    (_gt(xy0=np.zeros((0, 2)), K1=np.eye(2)), "^K1: "), (_proj(xy=np.zeros((0, 2)), depth_values=[], K_i=np.eye(2)), "^K_i: "),
    # NaN or inf is said as such, not as a shape that is right
    (_sym(R=np.diag([1.0, np.nan, 1.0])), r"^R: expected a finite 3x3 rotation matrix, got NaN or inf$"),
    (_sym(t=[0.0, np.inf, 0.0]), r"^t: expected a finite 3-vector, got NaN or inf$"),
    (_sym(xy0=[[np.nan, 1.0], [0.0, 0.0]]), r"^xy0: expected finite pixel coordinates \[N, 2\], got NaN or inf$"),
    (_proj(K_j=np.diag([100.0, np.nan, 1.0])), r"^K_j: expected finite 3x3 intrinsics, got NaN or inf$"),
])
def test_the_cameras_are_named_as_the_caller_names_them(call, message):
    """K0 / K1 (K_i / K_j in project) are checked up front under their own names, also when an
    image has no keypoint; a non-finite value is named as one."""
    with pytest.raises(ValueError, match=message):
        call()
