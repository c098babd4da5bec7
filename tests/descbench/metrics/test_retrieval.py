"""Keypoint retrieval (descbench.metrics.retrieval): boundaries, ground-truth modes and the
helpers of the scoring pass, each against a brute force written from the module's docstrings or
a hand-worked example.

Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
"Mutation testing"): the image border of ``project`` (``0 <= x < W``), points at infinity,
tau inclusive, the ``closest_group`` / ``closest_oriented`` sets, the C++ workbench's +1 labels,
the block sizes of the screen and the per-pair sufficient statistics.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from tests.descbench.metrics.test_nn import exact_norm2, random_screen_case, sqrt_fraction

from descbench.errors import DataError
from descbench.io import HIT_KS
from descbench.metrics.retrieval import (
    RECALL_KS,
    PairResult,
    RankCounts,
    RetrievalParams,
    augment_l2,
    nearest_sets,
    pair_statistics,
    policy_rank,
    project,
    query_blocks,
    rank_statistics,
    relevance,
    score_pair,
    screen_tolerance,
    workbench_positives,
)

I3 = np.eye(3)


# ----------------------------------------------------------------------------- project


def test_project_image_border_is_half_open():
    # W x H = 10 x 8: inside iff 0 <= x < 10 and 0 <= y < 8
    xy = np.array([[0.0, 3.0], [10.0, 3.0], [9.999, 3.0], [-1e-9, 3.0],
                   [5.0, 0.0], [5.0, 8.0], [5.0, 7.999], [5.0, -1e-9]])
    p, inside = project(I3, xy, 10, 8)
    assert inside.tolist() == [True, False, True, False, True, False, True, False]
    np.testing.assert_array_equal(p, xy)


def test_project_point_at_infinity_and_behind_camera_are_inf_and_outside():
    # w = x: the point (0, 5) maps to infinity (w = 0), (-2, 5) behind the camera (w < 0)
    H = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    p, inside = project(H, np.array([[0.0, 5.0], [-2.0, 5.0], [2.0, 4.0]]), 100, 100)
    assert inside.tolist() == [False, False, True]
    assert np.isposinf(p[:2]).all()
    np.testing.assert_array_equal(p[2], [1.0, 2.0])


def test_project_translation_and_perspective_by_hand():
    H = np.array([[2.0, 0.0, 3.0], [0.0, 1.0, -1.0], [0.0, 0.5, 1.0]])
    # (1, 2): h = (2 + 3, 2 - 1, 1 + 1) = (5, 1, 2) -> (2.5, 0.5)
    p, inside = project(H, [1.0, 2.0], 3, 1)
    np.testing.assert_allclose(p, [[2.5, 0.5]], rtol=0, atol=1e-15)
    assert inside.tolist() == [True]


# ----------------------------------------------------------------------------- relevance


def test_relevance_closest_tau_is_inclusive_and_outside_queries_have_none():
    targets = np.array([[1.0, 5.0], [50.0, 50.0]])
    # q0 projects inside, exactly 3 px from target 0; q1 lands outside the image (x < 0) 2 px
    # from target 0; q2 inside but 20 px from every target
    proj = np.array([[4.0, 5.0], [-1.0, 5.0], [20.0, 5.0]])
    inside = np.array([True, False, True])
    nn_idx, nn_px, indptr, indices = relevance(proj, inside, targets, 3.0, "closest")
    assert nn_idx.tolist() == [0, 0, 0]
    assert nn_px.tolist() == [3.0, 2.0, 19.0]
    assert indptr.tolist() == [0, 1, 1, 1] and indices.tolist() == [0]


@pytest.mark.bad_input
def test_relevance_error_messages():
    proj = np.zeros((1, 2))
    with pytest.raises(ValueError, match=r"^unknown ground truth mode 'nearest'$"):
        relevance(proj, np.array([True]), proj, 3.0, "nearest")
    with pytest.raises(ValueError, match=r"^gt 'closest_oriented' needs the keypoints' angles and sizes \(frames\)$"):
        relevance(proj, np.array([True]), proj, 3.0, "closest_oriented")


def brute_nearest_set(p, targets, tau):
    """D of one projection: every target at the nearest one's squared distance (if <= tau)."""
    d2 = [(t[0] - p[0]) ** 2 + (t[1] - p[1]) ** 2 for t in targets]
    if not d2 or math.sqrt(min(d2)) > tau:
        return []
    return [j for j, v in enumerate(d2) if v == min(d2)]


def test_nearest_sets_equal_brute_force_with_equidistant_targets():
    rng = np.random.default_rng(5)
    for trial in range(30):
        targets = rng.integers(0, 12, (rng.integers(1, 25), 2)).astype(np.float64)
        proj = rng.integers(-2, 14, (15, 2)).astype(np.float64) + rng.choice([0.0, 0.5], (15, 2))
        tau = float(rng.choice([1.0, 2.0, 3.0]))
        d2 = ((proj[:, None, :] - targets[None, :, :]) ** 2).sum(axis=2)
        nn = d2.argmin(axis=1)
        active = np.sqrt(d2.min(axis=1)) <= tau
        active[-1] = False  # the last query never has a set (its row must still be there)
        indptr, indices = nearest_sets(proj, targets, nn, active, tau)
        assert indptr.shape == (16,)
        for q in range(15):
            want = brute_nearest_set(proj[q], targets, tau) if active[q] else []
            assert indices[indptr[q]:indptr[q + 1]].tolist() == want, (trial, q)


def test_nearest_sets_hand_worked_asymmetric_positions():
    # p = (0, 0): targets (3, 0) and (0, 3) tie at exactly tau = 3; (2, 2) is nearer (sqrt 8)
    targets = np.array([[3.0, 0.0], [0.0, 3.0], [1.0, 4.0]])
    indptr, indices = nearest_sets(np.zeros((1, 2)), targets, np.array([0]), np.array([True]), 3.0)
    assert indices.tolist() == [0, 1]
    # p = (10, 1): targets (10, 4) (3 px), (13, 1) (3 px) and (7, 1) (3 px); (10, -2) too
    p = np.array([[10.0, 1.0]])
    targets = np.array([[10.0, 4.0], [13.0, 1.0], [7.0, 1.0], [10.0, -2.0], [12.0, 3.0]])
    indptr, indices = nearest_sets(p, targets, np.array([0]), np.array([True]), 3.0)
    assert indptr.tolist() == [0, 4] and indices.tolist() == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- closest_oriented


def brute_oriented(members, p_angle, p_size, t_angle, t_size):
    """The member of D chosen by the docstring's rule (angles in degrees; -1 = undefined)."""
    def key(j):
        if t_angle[j] < 0 or p_angle < 0:
            da = 0.0
        else:
            da = abs((t_angle[j] - p_angle + 180.0) % 360.0 - 180.0)
        ds = abs(math.log(t_size[j]) - math.log(p_size))
        return (da, ds, j)
    return min(members, key=key)


def test_closest_oriented_choice_equals_brute_force():
    rng = np.random.default_rng(11)
    # three positions; each target position carries several keypoints (SIFT orientations)
    base = np.array([[10.0, 10.0], [30.0, 10.0], [10.0, 30.0]])
    for trial in range(40):
        targets = np.repeat(base, 4, axis=0)
        t_angle = rng.choice([-1.0, 0.0, 5.0, 90.0, 179.5, 180.5, 270.0, 355.0, 359.9], targets.shape[0])
        t_size = rng.choice([2.0, 3.0, 4.5, 6.0], targets.shape[0])
        proj = base + rng.choice([0.0, 0.5], (3, 2))
        p_angle = rng.choice([-1.0, 0.0, 1.0, 178.0, 182.0, 359.0], 3)
        p_size = rng.choice([2.5, 3.0, 5.0], 3)
        inside = np.array([True, True, trial % 2 == 0])  # the last query sometimes has no set
        frames = (p_angle, p_size, t_angle, t_size)
        nn_idx, _, indptr, indices = relevance(proj, inside, targets, 3.0, "closest_oriented", frames)
        for q in range(3):
            members = brute_nearest_set(proj[q], targets, 3.0) if inside[q] else []
            got = indices[indptr[q]:indptr[q + 1]].tolist()
            if not members:
                assert got == [], (trial, q)
                continue
            want = brute_oriented(members, p_angle[q], p_size[q], t_angle, t_size)
            assert got == [want], (trial, q, frames)
            assert nn_idx[q] == want


def test_closest_oriented_in_score_pair_compares_the_projected_size():
    # H doubles the scale: a query of size 3 projects to size 6. Three targets at its projection
    # share the angle; their sizes 3, 6, 12 -> the middle one (|log 6/6| = 0) is the relevant item.
    H = np.diag([2.0, 2.0, 1.0])
    q_xy = np.array([[10.0, 10.0]])
    t_xy = np.array([[20.0, 20.0]] * 3 + [[60.0, 60.0]])
    qd = np.ones((1, 4), np.float32)
    td = np.ones((4, 4), np.float32)
    q_frame = (np.array([30.0]), np.array([3.0]))
    t_frame = (np.array([30.0, 30.0, 30.0, 30.0]), np.array([3.0, 6.0, 12.0, 6.0]))
    res = score_pair(q_xy, qd, t_xy, td, H, (100, 100), RetrievalParams(gt="closest_oriented"), q_frame, t_frame)
    assert res.gt_index.tolist() == [1] and res.n_relevant.tolist() == [1]
    # without the scale change (H = identity, projected size 3) the first one fits best
    res = score_pair(q_xy * 2, qd, t_xy, td, I3, (100, 100), RetrievalParams(gt="closest_oriented"), q_frame, t_frame)
    assert res.gt_index.tolist() == [0]


@pytest.mark.bad_input
def test_closest_oriented_missing_frames_name_the_image():
    q_xy = np.array([[5.0, 5.0]])
    desc = np.ones((1, 4), np.float32)
    params = RetrievalParams(gt="closest_oriented")
    frame = (np.array([0.0]), np.array([2.0]))
    with pytest.raises(ValueError, match=r"^gt 'closest_oriented' needs the angles and sizes of the keypoints of image 1$"):
        score_pair(q_xy, desc, q_xy, desc, I3, (10, 10), params, None, frame)
    with pytest.raises(ValueError, match=r"^gt 'closest_oriented' needs the angles and sizes of the keypoints of image k$"):
        score_pair(q_xy, desc, q_xy, desc, I3, (10, 10), params, frame, None)


@pytest.mark.bad_input
def test_descriptor_mismatch_message_names_both_kinds():
    q = np.ones((2, 4), np.float32)
    with pytest.raises(DataError, match=r"^descriptor mismatch: image 1 has float32 x \(4,\), image k has float32 x \(5,\); "):
        score_pair(np.zeros((2, 2)), q, np.zeros((2, 2)), np.ones((2, 5), np.float32), I3, (10, 10), RetrievalParams(gt="closest"))


# ----------------------------------------------------------------------------- closest_group


def _random_pair(rng, n=40, binary=False):
    q_xy = rng.uniform(0, 60, (n, 2))
    t_xy = q_xy + rng.normal(0, 1.0, (n, 2))  # no two targets at one position: every D has one member
    if binary:
        qd = rng.integers(0, 4, (n, 4), dtype=np.uint8)
        td = rng.integers(0, 4, (n, 4), dtype=np.uint8)
    else:
        qd = rng.integers(0, 3, (n, 8)).astype(np.float32)
        td = rng.integers(0, 3, (n, 8)).astype(np.float32)
    return q_xy, qd, t_xy, td


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic", "half"])
def test_closest_group_with_single_member_sets_equals_closest(binary, policy):
    rng = np.random.default_rng(3)
    q_xy, qd, t_xy, td = _random_pair(rng, binary=binary)
    size = (55, 55)  # some projections fall outside
    ref = score_pair(q_xy, qd, t_xy, td, I3, size, RetrievalParams(gt="closest", tie_policy=policy))
    got = score_pair(q_xy, qd, t_xy, td, I3, size, RetrievalParams(gt="closest_group", tie_policy=policy))
    assert (ref.n_relevant == 1).any() and (ref.n_relevant == 0).any() and (~ref.inside).any()
    np.testing.assert_array_equal(got.inside, ref.inside)
    np.testing.assert_array_equal(got.n_relevant, ref.n_relevant)
    assert got.n_relevant.dtype == np.int32
    np.testing.assert_array_equal(got.gt_index, ref.gt_index)
    np.testing.assert_array_equal(got.gt_px, ref.gt_px)
    np.testing.assert_array_equal(got.n_closer, ref.n_closer)
    np.testing.assert_array_equal(got.n_tied, ref.n_tied)
    np.testing.assert_allclose(got.ap, ref.ap, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.hit, ref.hit, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.recall, ref.recall, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.rank, policy_rank(ref.n_closer, ref.n_tied, policy), rtol=1e-12, atol=0)
    assert ref.rank is None
    assert ref.n_relevant.dtype == np.int32  # PairResult: n_relevant int32 in every mode


# ----------------------------------------------------------------------------- rank statistics


@pytest.mark.parametrize("binary", [False, True])
def test_rank_statistics_equal_brute_force(binary):
    rng = np.random.default_rng(8)
    nq, nc = 30, 50
    if binary:
        qd = rng.integers(0, 256, (nq, 3), dtype=np.uint8)
        cd = rng.integers(0, 256, (nc, 3), dtype=np.uint8)
        d = np.unpackbits(qd[:, None, :] ^ cd[None, :, :], axis=2).sum(axis=2).astype(np.float64)
    else:
        qd = rng.integers(0, 3, (nq, 6)).astype(np.float32)
        cd = rng.integers(0, 3, (nc, 6)).astype(np.float32)
        d = ((qd[:, None, :].astype(np.float64) - cd[None, :, :]) ** 2).sum(axis=2)
    rel = [sorted(rng.choice(nc, rng.integers(0, 4), replace=False).tolist()) for _ in range(nq)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rel])]).astype(np.int64)
    indices = np.array([j for r in rel for j in r], dtype=np.int64)
    less, equal, dexact = rank_statistics(qd, cd, indptr, indices, chunk_mb=0.0005)  # several blocks
    e = 0
    for q, r in enumerate(rel):
        for j in r:
            assert dexact[e] == d[q, j]
            assert less[e] == int((d[q] < d[q, j]).sum())
            assert equal[e] == int((d[q] == d[q, j]).sum())  # the item itself included
            e += 1
    assert e == indices.size


@pytest.mark.parametrize("real", [False, True])
def test_rank_counts_read_their_columns_of_a_wider_screen_in_place(real):
    """A scene's screen covers more candidates than one pair's: RankCounts reads columns col0 ..
    col0 + N - 1 of it and nothing else (the other columns hold values that would be the closest of
    all if they were read); a screen that is not C-contiguous float32 or does not hold those
    columns is refused."""
    rng = np.random.default_rng(9)
    nq, nc = 25, 40
    if real:
        qd = rng.standard_normal((nq, 8)).astype(np.float32)
        cd = rng.standard_normal((nc, 8)).astype(np.float32)
    else:
        qd = rng.integers(0, 3, (nq, 8)).astype(np.float32)
        cd = rng.integers(0, 3, (nc, 8)).astype(np.float32)
    rel = [sorted(rng.choice(nc, rng.integers(0, 4), replace=False).tolist()) for _ in range(nq)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rel])]).astype(np.int64)
    indices = np.array([j for r in rel for j in r], dtype=np.int64)
    ref = rank_statistics(qd, cd, indptr, indices)
    rc = RankCounts(qd, cd, indptr, indices)
    big = np.float32(np.finfo(np.float32).max)
    rows = np.arange(nq, dtype=np.int64)
    for lo, hi in ((0, 10), (10, nq)):
        block = rc.qaug[rows[lo:hi]] @ rc.caug.T
        wide = np.full((hi - lo, 5 + nc + 7), big, np.float32)
        wide[:, 5 : 5 + nc] = block
        rc.consume(wide, rows[lo:hi], 5)
    for got, want in zip(rc.result(), ref):
        np.testing.assert_array_equal(got, want)
    screen = rc.qaug @ rc.caug.T
    for bad, col0, match in ((screen, 1, "does not hold 25 rows and columns 1..40"),
                             (np.ascontiguousarray(screen[:, :-1]), 0, "does not hold 25 rows and columns 0..39"),
                             (screen.astype(np.float64), 0, "C-contiguous float32"),
                             (np.asfortranarray(screen), 0, "C-contiguous float32")):
        with pytest.raises(ValueError, match=match):
            RankCounts(qd, cd, indptr, indices).consume(bad, rows, col0)
    with pytest.raises(ValueError, match="does not hold 24 rows"):
        RankCounts(qd, cd, indptr, indices).consume(screen, rows[:-1], 0)
    with pytest.raises(ValueError, match=r"columns -1\.\.38"):
        RankCounts(qd, cd, indptr, indices).consume(screen, rows, -1)


def test_zero_descriptors_tie_with_every_candidate():
    # blank descriptors: every candidate at distance 0, so the relevant item ties with all N - 1 others
    n = 6
    xy = np.array([[float(10 * i + 5), 5.0] for i in range(n)])
    zeros = np.zeros((n, 4), np.float32)
    res = score_pair(xy, zeros, xy, zeros, I3, (100, 100), RetrievalParams(gt="closest", tie_policy="optimistic"))
    assert res.n_closer.tolist() == [0] * n
    assert res.n_tied.tolist() == [n - 1] * n
    np.testing.assert_array_equal(res.ap, np.ones(n))


# ----------------------------------------------------------------------------- query blocks


@pytest.mark.parametrize("n_candidates", [1, 3, 1000, 300000])
@pytest.mark.parametrize("chunk_mb", [0.001, 0.01, 1.0])
def test_query_blocks_partition_the_relevant_rows_into_the_largest_blocks_that_fit(n_candidates, chunk_mb):
    rng = np.random.default_rng(n_candidates)
    counts = rng.integers(0, 3, 700)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    blocks = list(query_blocks(indptr, n_candidates, chunk_mb))
    rows = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
    assert rows.tolist() == np.flatnonzero(counts > 0).tolist()  # each relevant row once, in order
    limit = chunk_mb * 2**20
    for i, b in enumerate(blocks):
        assert b.dtype == np.int64
        assert len(b) == 1 or len(b) * n_candidates * 4 <= limit  # the float32 screen fits
        if i < len(blocks) - 1:
            assert (len(b) + 1) * n_candidates * 4 > limit  # and one more row would not
    assert list(query_blocks(np.zeros(5, np.int64), n_candidates, chunk_mb)) == []


# ----------------------------------------------------------------------------- workbench +1 labels


def brute_workbench(H, q_xy, t_xy, tau=3.0, eps=1e-6):
    """The C++ workbench's label +1, written out per query with numpy float32 / float64 scalars."""
    f32, f64 = np.float32, np.float64
    m = [f64(v) for v in np.asarray(H, dtype=np.float64).reshape(9)]
    out = []
    for qx, qy in np.asarray(q_xy).reshape(-1, 2):
        x, y = f64(f32(qx)), f64(f32(qy))
        w = (x * m[6] + y * m[7]) + m[8]
        if abs(w) > f64(np.finfo(np.float32).eps):
            with np.errstate(over="ignore", invalid="ignore"):
                px = f32(((x * m[0] + y * m[1]) + m[2]) * (f64(1.0) / w))
                py = f32(((x * m[3] + y * m[4]) + m[5]) * (f64(1.0) / w))
        else:
            px = py = f32(0.0)
        if not (np.isfinite(px) and np.isfinite(py)):
            out.append([])
            continue
        d = []
        for tx, ty in np.asarray(t_xy).reshape(-1, 2):
            dx = f64(f32(px - f32(tx)))
            dy = f64(f32(py - f32(ty)))
            d.append(math.sqrt(dx * dx + dy * dy))
        dmin = min(d) if d else math.inf
        out.append([j for j, v in enumerate(d) if v <= tau and not dmin < v - eps])
    return out


def test_workbench_positives_equal_brute_force_with_translation_and_perspective():
    rng = np.random.default_rng(21)
    H = np.array([[1.02, 0.03, 7.25], [-0.02, 0.98, -4.5], [1e-4, -5e-5, 1.0]])
    q_xy = rng.uniform(10, 90, (40, 2))
    p, _ = project(H, q_xy, 1000, 1000)
    # targets: exact projections (some duplicated, SIFT-style), points at exactly 3 px, and clutter
    t_xy = np.concatenate([p[:10], p[:5], p[10:20] + [3.0, 0.0], p[20:25] + [0.0, -3.0],
                           p[25:30] + rng.normal(0, 1.5, (5, 2)), rng.uniform(0, 100, (20, 2))])
    indptr, indices = workbench_positives(H, q_xy, t_xy)
    want = brute_workbench(H, q_xy, t_xy)
    got = [indices[indptr[i]:indptr[i + 1]].tolist() for i in range(len(q_xy))]
    assert got == want
    assert indptr.dtype == np.int64 and indices.dtype == np.int64
    assert sum(map(len, want)) > 20


def test_workbench_positives_points_at_infinity_use_the_origin():
    # |w| <= FLT_EPSILON: OpenCV writes (0, 0); of the targets (0, 0), (1, 0), (0, 1) only the first is +1
    eps = float(np.finfo(np.float32).eps)
    t_xy = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [2.0, 5.0]])
    H = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, -10.0]])
    q_xy = np.array([[10.0, 50.0], [20.0, 50.0]])  # w = 0 and w = 10 -> (2, 5)
    for H_, q_ in ((H, q_xy), (np.diag([1.0, 1.0, eps]), np.array([[30.0, 40.0]]))):  # w = eps exactly
        indptr, indices = workbench_positives(H_, q_, t_xy)
        got = [indices[indptr[i]:indptr[i + 1]].tolist() for i in range(len(q_))]
        assert got == brute_workbench(H_, q_, t_xy)
        assert got[0] == [0]
    assert got == [[0]]
    indptr, indices = workbench_positives(H, q_xy, t_xy)
    assert indices[indptr[1]:indptr[2]].tolist() == [3]


# ----------------------------------------------------------------------------- pair statistics


def test_pair_statistics_equal_loops_over_a_hand_built_result():
    nk = len(HIT_KS)
    inside = np.array([True, False, True, True, False])
    n_rel = np.array([1, 0, 2, 0, 0], np.int32)
    ap = np.array([0.5, np.nan, 0.25, np.nan, np.nan])
    hit = np.arange(5 * nk, dtype=np.float64).reshape(5, nk) / 100
    rec = np.arange(5 * len(RECALL_KS), dtype=np.float64).reshape(5, len(RECALL_KS)) / 10
    res = PairResult(inside, n_rel, np.zeros(5, np.int64), np.zeros(5), np.zeros(5, np.int64),
                     np.zeros(5, np.int64), ap, hit, rec)
    st = pair_statistics(res, 17)
    assert st["n_query_keypoints"] == 5 and st["n_queries"] == 5
    assert st["n_target_keypoints"] == 17
    assert st["n_outside"] == 2
    assert st["n_relevant_queries"] == 2 and st["n_relevant_items"] == 3
    assert st["sum_ap"] == 0.75
    for t, k in enumerate(HIT_KS):
        assert st[f"sum_hit_at_{k}"] == pytest.approx(hit[0, t] + hit[2, t], abs=1e-15)
    for t, k in enumerate(RECALL_KS):
        assert st[f"sum_recall_at_{k}"] == pytest.approx(rec[0, t] + rec[2, t], abs=1e-15)
    # no relevant query: the sums are 0.0, not NaN
    none = PairResult(inside, np.zeros(5, np.int32), np.zeros(5, np.int64), np.zeros(5), np.zeros(5, np.int64),
                      np.zeros(5, np.int64), np.full(5, np.nan), hit, rec)
    st = pair_statistics(none, 0)
    assert st["sum_ap"] == 0.0 and st["n_relevant_queries"] == 0
    assert all(st[f"sum_hit_at_{k}"] == 0.0 for k in HIT_KS)


def test_policy_rank_hand_worked():
    L = np.array([0, 3, -1, 2])
    t = np.array([0, 3, -1, 1])
    assert policy_rank(L, t, "optimistic")[[0, 1, 3]].tolist() == [1, 4, 3]
    assert policy_rank(L, t, "pessimistic")[[0, 1, 3]].tolist() == [1, 7, 4]
    assert policy_rank(L, t, "half")[[0, 1, 3]].tolist() == [1, 6, 4]
    assert policy_rank(L, t, "expected")[[0, 1, 3]].tolist() == [1, 5.5, 3.5]
    assert all(math.isnan(policy_rank(L, t, p)[2]) for p in ("optimistic", "pessimistic", "half", "expected"))


@pytest.mark.parametrize("gt", ["closest", "closest_group"])
def test_relevance_tau_is_inclusive_for_every_nearest_rule(gt):
    """A nearest target exactly tau away is relevant under closest and closest_group alike; for
    closest_group every target tied at that distance joins the group (hand-worked)."""
    targets = np.array([[1.0, 5.0], [50.0, 50.0], [7.0, 5.0]])  # targets 0 and 2 both 3 px from q0
    proj = np.array([[4.0, 5.0], [20.0, 5.0]])
    inside = np.array([True, True])
    nn_idx, nn_px, indptr, indices = relevance(proj, inside, targets, 3.0, gt)
    assert nn_px.tolist() == [3.0, 13.0]
    assert indptr.tolist() == [0, len(indices), len(indices)]
    assert indices.tolist() == ([0] if gt == "closest" else [0, 2])
    # just beyond tau: nothing is relevant
    _, _, indptr, indices = relevance(proj, inside, targets, np.nextafter(3.0, 0.0), gt)
    assert indptr.tolist() == [0, 0, 0] and indices.size == 0


# ------------------------------------------------------------------------------------------------
# Merged from test_metrics_retrieval.py:
# Retrieval kernels against an independent brute-force float64 reference (full sort / enumeration).
# ------------------------------------------------------------------------------------------------


POLICIES = ("expected", "optimistic", "pessimistic", "half")


# ----------------------------------------------------------------------------- the reference


def ref_ground_truth(q_xy, t_xy, H, size, tau, gt):
    """Plain loops: projection, nearest target (lowest index on ties), relevant sets."""
    W, Hh = size
    out = []
    for x, y in q_xy:
        v = H @ np.array([x, y, 1.0])
        if v[2] <= 0:
            out.append((False, -1, math.inf, []))
            continue
        px, py = v[0] / v[2], v[1] / v[2]
        inside = 0 <= px < W and 0 <= py < Hh
        dists = [math.hypot(tx - px, ty - py) for tx, ty in t_xy]
        j = int(np.argmin(dists)) if dists else -1  # argmin returns the first minimum
        d = dists[j] if dists else math.inf
        if not inside:
            rel = []
        elif gt == "closest":
            rel = [j] if j >= 0 and d <= tau else []
        else:
            rel = [i for i, di in enumerate(dists) if di <= tau]
        out.append((inside, j, d, rel))
    return out


def ref_distances(q, C):
    if q.dtype == np.uint8:
        return np.array([np.unpackbits(q ^ c).sum() for c in C], dtype=np.float64)
    return ((C.astype(np.float64) - q.astype(np.float64)) ** 2).sum(axis=1)


def ap_of_ranking(labels):
    """AP of a full ranking (list of 0/1, best first): (1/|S+|) sum_K 1[x_K in S+] P(K)."""
    hits, s = 0, 0.0
    for k, l in enumerate(labels, 1):
        if l:
            hits += 1
            s += hits / k
    return s / max(1, sum(labels))


def ref_query(dist, rel, policy):
    """Reference AP, hit@K and recall@K of one query by full sort and tie enumeration."""
    n = len(dist)
    is_rel = np.zeros(n, bool)
    is_rel[rel] = True
    values = sorted(set(dist.tolist()))
    groups = [(np.flatnonzero(dist == v)) for v in values]
    # Each tie group is a set of positions; enumerate the placements of its positives.
    per_group = []
    for g in groups:
        p = int(is_rel[g].sum())
        m = len(g)
        if policy == "optimistic":
            placements = [tuple(range(p))]
        elif policy == "pessimistic":
            placements = [tuple(range(m - p, m))]
        elif policy == "half":
            assert p <= 1
            placements = [(m // 2,)] if p == 1 else [()]
        else:
            placements = list(itertools.combinations(range(m), p))
        per_group.append((m, placements))
    aps, hits, recs = [], [], []
    for combo in itertools.product(*[pl for _, pl in per_group]):
        labels = []
        for (m, _), pos in zip(per_group, combo):
            lab = [0] * m
            for j in pos:
                lab[j] = 1
            labels += lab
        ranks = [k + 1 for k, l in enumerate(labels) if l]
        aps.append(ap_of_ranking(labels))
        hits.append([1.0 if ranks[0] <= K else 0.0 for K in HIT_KS])
        recs.append([sum(r <= K for r in ranks) / len(ranks) for K in RECALL_KS])
    return float(np.mean(aps)), np.mean(hits, axis=0), np.mean(recs, axis=0)


def random_case(rng, nq, nt, dim, kind):
    """Keypoints on a coarse grid (position ties) and descriptors with many distance ties."""
    q_xy = rng.integers(0, 12, size=(nq, 2)).astype(np.float64) * 2.0 + 1.0
    t_xy = rng.integers(0, 12, size=(nt, 2)).astype(np.float64) * 2.0 + 1.0
    if kind == "binary":
        qd = rng.integers(0, 256, size=(nq, dim), dtype=np.uint8) & 0x0F
        td = rng.integers(0, 256, size=(nt, dim), dtype=np.uint8) & 0x0F
    elif kind == "int":
        qd = rng.integers(0, 3, size=(nq, dim)).astype(np.float32)
        td = rng.integers(0, 3, size=(nt, dim)).astype(np.float32)
    else:
        qd = rng.standard_normal((nq, dim)).astype(np.float32)
        td = rng.standard_normal((nt, dim)).astype(np.float32)
    # duplicates: copy some target descriptors onto others and onto queries
    for _ in range(nt // 4):
        td[rng.integers(nt)] = td[rng.integers(nt)]
    for _ in range(nq // 4):
        qd[rng.integers(nq)] = td[rng.integers(nt)]
    H = np.array([[1.0, 0.02, 0.5], [-0.01, 1.0, -0.5], [0.0, 0.0, 1.0]])
    return q_xy, qd, t_xy, td, H


@pytest.mark.parametrize("kind", ["int", "float", "binary"])
@pytest.mark.parametrize("gt", ["closest", "all_within_tau"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_score_pair_matches_brute_force(kind, gt, seed):
    rng = np.random.default_rng(seed)
    q_xy, qd, t_xy, td, H = random_case(rng, nq=40, nt=30, dim=4, kind=kind)
    size = (22, 20)  # some projections fall outside
    ref_gt = ref_ground_truth(q_xy, t_xy, H, size, 2.5, gt)
    for policy in POLICIES:
        if policy == "half" and gt != "closest":
            continue
        params = RetrievalParams(tau_px=2.5, gt=gt, tie_policy=policy, chunk_mb=0.0001)
        res = score_pair(q_xy, qd, t_xy, td, H, size, params)
        n_r0 = 0
        for i, (inside, j, d, rel) in enumerate(ref_gt):
            assert res.inside[i] == inside
            assert res.gt_index[i] == j
            assert res.gt_px[i] == pytest.approx(d)
            assert res.n_relevant[i] == len(rel)
            if not rel:
                n_r0 += 1
                assert math.isnan(res.ap[i])
                continue
            dist = ref_distances(qd[i], td)
            ap, hit, rec = ref_query(dist, rel, policy)
            assert res.ap[i] == pytest.approx(ap, rel=1e-12, abs=1e-12), (i, policy)
            np.testing.assert_allclose(res.hit[i], hit, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(res.recall[i], rec, rtol=1e-12, atol=1e-12)
            if gt == "closest":
                dj = dist[rel[0]]
                assert res.n_closer[i] == int((dist < dj).sum())
                assert res.n_tied[i] == int((dist == dj).sum()) - 1
        assert n_r0 > 0  # the case really contains R = 0 queries
        assert (res.n_tied[res.n_relevant > 0] > 0).any()  # ... and ties


def test_closed_forms_for_single_relevant():
    """AP = 1/(L+1), 1/(L+t+1), 1/(L+1+ceil(t/2)), (1/(t+1)) sum 1/r with L=2 closer, t=3 tied."""
    # Query at origin; target 0 is the ground truth at distance^2 4; targets 1,2 closer; 3,4,5 tied.
    q_xy = np.array([[10.0, 10.0]])
    t_xy = np.array([[10.0, 10.0], [30, 30], [40, 40], [50, 50], [60, 60], [70, 70], [80, 80]], float)
    qd = np.array([[0.0, 0.0]], np.float32)
    td = np.array([[2, 0], [1, 0], [0, 1], [0, 2], [2, 0], [-2, 0], [3, 0]], np.float32)
    expected = {
        "optimistic": 1 / 3,
        "pessimistic": 1 / 6,
        "half": 1 / (2 + 1 + 2),
        "expected": (1 / 4) * (1 / 3 + 1 / 4 + 1 / 5 + 1 / 6),
    }
    ranks = {"optimistic": 3, "pessimistic": 6, "half": 5, "expected": 4.5}
    for policy, ap in expected.items():
        res = score_pair(q_xy, qd, t_xy, td, np.eye(3), (100, 100), RetrievalParams(gt="closest", tie_policy=policy))
        assert res.n_closer[0] == 2 and res.n_tied[0] == 3
        assert res.ap[0] == pytest.approx(ap, rel=1e-15)
        assert policy_rank(res.n_closer, res.n_tied, policy)[0] == ranks[policy]
    assert np.isnan(policy_rank(np.array([-1]), np.array([-1]), "expected")[0])
    # P@K under 'expected': the relevant item is at rank 3..6 with probability 1/4 each.
    res = score_pair(q_xy, qd, t_xy, td, np.eye(3), (100, 100), RetrievalParams(gt="closest"))
    hit = dict(zip(HIT_KS, res.hit[0]))
    assert (hit[1], hit[2], hit[3], hit[4], hit[5], hit[10]) == (0, 0, 0.25, 0.5, 0.75, 1.0)


def test_blas_screen_is_exact_near_ties():
    """Candidates closer than float32 BLAS resolution are ordered exactly as in float64."""
    rng = np.random.default_rng(5)
    dim, n = 128, 300
    base = rng.standard_normal(dim).astype(np.float32)
    td = np.tile(base, (n, 1))
    # perturb single coordinates by 1 ulp-ish amounts: distances differ far below BLAS error
    for j in range(n):
        k = rng.integers(dim)
        td[j, k] = np.nextafter(td[j, k], np.float32(np.inf) if j % 2 else np.float32(-np.inf))
    qd = (base + rng.standard_normal(dim).astype(np.float32) * 1e-3)[None, :]
    t_xy = np.column_stack([np.arange(n) * 5.0 + 50, np.full(n, 50.0)])
    for gt_j in (0, 7, 123):
        q_xy = t_xy[gt_j : gt_j + 1].copy()
        res = score_pair(q_xy, qd, t_xy, td, np.eye(3), (2000, 100), RetrievalParams(gt="closest", tie_policy="optimistic"))
        dist = ref_distances(qd[0], td)
        assert res.n_closer[0] == int((dist < dist[gt_j]).sum())
        assert res.n_tied[0] == int((dist == dist[gt_j]).sum()) - 1


def test_project_marks_outside_and_behind_camera():
    H = np.array([[1, 0, 0], [0, 1, 0], [-0.01, 0, 1.0]])
    p, inside = project(H, np.array([[10.0, 10.0], [200.0, 10.0], [50, 99.5]]), 100, 100)
    assert inside.tolist() == [True, False, False]  # x=200 -> w=-1 (behind); y -> 99.5/0.5


def test_empty_target_image_gives_r0_for_every_query():
    res = score_pair(np.array([[5.0, 5.0]]), np.ones((1, 4), np.float32), np.zeros((0, 2)),
                     np.zeros((0, 4), np.float32), np.eye(3), (50, 50), RetrievalParams(gt="closest"))
    assert res.n_relevant.tolist() == [0] and res.gt_index.tolist() == [-1] and math.isinf(res.gt_px[0])
    stats = pair_statistics(res, 0)
    assert stats["n_queries"] == 1 and stats["n_relevant_queries"] == 0 and stats["sum_ap"] == 0.0


@pytest.mark.bad_input
def test_dimension_mismatch_is_an_error():
    from descbench.errors import DataError

    with pytest.raises(DataError, match="descriptor mismatch"):
        score_pair(np.zeros((1, 2)), np.zeros((1, 4), np.float32), np.zeros((1, 2)), np.zeros((1, 8), np.float32),
                   np.eye(3), (10, 10), RetrievalParams(gt="closest"))


def test_spatial_nearest_sweep_equals_brute_force_with_ties():
    from descbench.metrics.kernels import spatial_nearest

    rng = np.random.default_rng(3)
    targets = np.round(rng.uniform(0, 60, (1500, 2)))  # integer grid: many exact ties
    targets[::7] = targets[1::7][: len(targets[::7])]  # duplicated positions
    points = np.vstack([np.round(rng.uniform(-5, 65, (700, 2)) * 2) / 2, [[np.inf, np.inf]]])
    idx, dist = spatial_nearest(points, targets)
    for i, p in enumerate(points[:-1]):
        d2 = ((targets - p) ** 2).sum(axis=1)
        assert idx[i] == int(np.argmin(d2)) and dist[i] == np.sqrt(d2.min())
    assert idx[-1] == -1 and np.isinf(dist[-1])


@pytest.mark.parametrize("gt", ["closest", "all_within_tau", "closest_group"])
def test_given_projections_score_as_the_homography_that_makes_them(gt):
    """score_projected with H's own projections (and H's inside flags) is score_pair with H, for
    every ground truth defined without frames; closest_oriented needs H and says so."""
    from descbench.metrics.retrieval import RetrievalParams, project, score_pair, score_projected

    rng = np.random.default_rng(11)
    q_xy, t_xy = rng.uniform(0, 100, (80, 2)), rng.uniform(0, 100, (90, 2))
    t_xy[:40] = q_xy[:40] * 0.9 + 6 + rng.normal(0, 1.0, (40, 2))  # near the projections: relevant items
    q, t = rng.normal(size=(80, 16)).astype(np.float32), rng.normal(size=(90, 16)).astype(np.float32)
    H = np.array([[0.9, 0.0, 6.0], [0.0, 0.9, 6.0], [0.0, 0.0, 1.0]])
    params = RetrievalParams(gt=gt, tau_px=3.0)
    a = score_pair(q_xy, q, t_xy, t, H, (100, 100), params)
    b = score_projected(*project(H, q_xy, 100, 100), q, t_xy, t, params)
    for field in ("inside", "n_relevant", "n_closer", "n_tied", "ap", "hit", "recall"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert (a.n_relevant > 0).sum() > 20
    with pytest.raises(ValueError, match="closest_oriented"):
        score_projected(*project(H, q_xy, 100, 100), q, t_xy, t, RetrievalParams(gt="closest_oriented"))
    with pytest.raises(ValueError, match="one projection and one flag per query, got 79 and 79 for 80 queries"):
        score_projected(q_xy[:79], np.ones(79, bool), q, t_xy, t, params)


# ----------------------------------------------------------------------------- screen_tolerance


def ref_screen_tolerance(q: np.ndarray, cnorm2: np.ndarray) -> list[Fraction]:
    """The docstring's bound in exact rationals: per candidate j, the error of one float32 screen
    value is at most E_j = gamma_{D+1} (|q| |c_j| + |c_j|^2/2) + u |c_j|^2/2 (u = 2^-24,
    gamma_m = m u / (1 - m u), |q|^2 the exact sum of the squared float32 entries); two
    candidates' errors add (<= 2 max_j E_j) and are doubled; a floor of 1e-300 keeps it positive
    (max over no candidates: 0)."""
    m = q.shape[1] + 1
    u = Fraction(1, 2**24)
    gamma = m * u / (1 - m * u)
    cn = [sqrt_fraction(Fraction(float(v))) for v in cnorm2]
    out = []
    for row in q:
        qn = sqrt_fraction(exact_norm2(row))
        e = max((gamma * (qn * c + c * c / 2) + u * c * c / 2 for c in cn), default=Fraction(0))
        out.append(2 * (e + e) + Fraction(1e-300))
    return out


_SCREEN_CASES = {
    # a zero query row: only the max|c| terms remain, and at D = 2 the u |c|^2/2 rounding term is
    # a quarter of the bound; max|c| = 12 (not 0, 1 or 2) so |c|^2 is not |c|, |c|^3 or 2 |c|
    "zero_row_small_dim": (np.array([[0.0, 0.0], [3.0, 4.0], [0.0, -0.5]], np.float32), np.array([25.0, 144.0, 0.0])),
    # no candidates: max|c| = 0, the bound is the 1e-300 floor alone
    "no_candidates": (np.array([[3.0, 4.0], [1.0, 0.0]], np.float32), np.zeros(0)),
    # everything zero: again exactly the floor (one screen error bound of 0)
    "all_zero": (np.zeros((2, 3), np.float32), np.zeros(2)),
    # float32 sum of squares rounds (32 + 32 * 2^-26 -> 32): |q| must be accumulated in float64;
    # |q| |c| dominates the bound
    "float32_norm_would_round": (np.array([[1.0, 2.0**-13] * 32, [2.0**-13, 1.0] * 32], np.float32), np.array([1.0, 0.25])),
    # wide D: gamma's 1 / (1 - m u) is 1 + 1.5e-5, and every term is present
    "wide_d": (np.tile(np.array([0.5, -1.25, 3.0, 0.125], np.float32), (3, 75)) * np.arange(3, dtype=np.float32)[:, None],
               np.array([9.0, 400.0, 2.25])),
}


@pytest.mark.parametrize("case", sorted(_SCREEN_CASES))
def test_screen_tolerance_equals_the_documented_formula(case):
    """screen_tolerance is exactly (to 1e-15) 2 x (two candidates' float32 dot-product error
    bounds) + 1e-300, against an exact rational evaluation of the docstring: pins D + 1, u = 2^-24,
    gamma_m, |q| in float64, max|c| = 0 without candidates, and the u |c|^2/2 rounding term."""
    q, cnorm2 = _SCREEN_CASES[case]
    got = screen_tolerance(q, cnorm2)
    assert got.dtype == np.float64 and got.shape == (q.shape[0],)
    for g, want in zip(got, ref_screen_tolerance(q, cnorm2)):
        assert abs(Fraction(float(g)) - want) <= Fraction(1, 10**15) * want, (float(g), float(want))
    assert (got >= 1e-300).all()
    if case in ("no_candidates", "all_zero"):
        assert (got == 1e-300).all()


@pytest.mark.parametrize("dim,scale,offset", [(3, 1.0, 0.0), (128, 1.0, 0.0), (128, 1e3, 0.0), (8, 1e-3, 1e3)])
def test_screen_tolerance_bounds_the_float32_screen_error_and_is_tight(dim, scale, offset):
    """Every float32 screen value g = [q, 1] . [c, -|c|^2/2] (as the kernels compute it, any
    BLAS) is within T/4 of the exact q.c - |c|^2/2 (checked exactly: the float32 entries scaled by
    2^149 are integers), so any two candidates' errors differ by at most T/2; and T/4 is at most
    1e3 x the largest error observed in the row (at D = 128 the bound is ~100-250x the worst)."""
    q, c, cnorm2, g = random_screen_case(dim, scale, offset)

    def ints(a):
        return np.array([[int(x) for x in row] for row in np.ldexp(a.astype(np.float64), 149)], dtype=object)

    qi, ci = ints(q), ints(c)
    exact2 = 2 * (qi @ ci.T) - (ci * ci).sum(axis=1)[None, :]  # 2^299 (q.c - |c|^2/2)
    T = screen_tolerance(q, cnorm2)
    for i in range(q.shape[0]):
        err = max(abs(Fraction(float(g[i, j])) - Fraction(int(exact2[i, j]), 2**299)) for j in range(c.shape[0]))
        assert 4 * err <= Fraction(float(T[i])), i
        assert 0 < T[i] / 4 <= 1e3 * float(err), (i, float(T[i]) / 4 / float(err))


def test_augment_l2_rounds_to_float32_first():
    """Descriptors given in float64 are rounded to float32 first, and |c|^2 is that of the
    rounded rows (the screen ranks the float32 descriptors, the only ones descbench stores)."""
    q64 = np.array([[0.1, 0.2, 0.3]])
    c64 = np.array([[1.0 / 3.0, 0.7, 0.0], [0.1, 0.1, 0.1]])
    q, c, qaug, caug, cnorm2 = augment_l2(q64, c64)
    assert q.dtype == c.dtype == qaug.dtype == caug.dtype == np.float32 and cnorm2.dtype == np.float64
    c32 = c64.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(c, c64.astype(np.float32))
    np.testing.assert_array_equal(cnorm2, (c32 * c32).sum(axis=1))
    assert cnorm2[0] != (c64[0] * c64[0]).sum()  # the rounding is visible in |c|^2


def test_workbench_positives_eps_is_strict():
    """A keypoint is +1 unless another lies closer by MORE than eps (the workbench's
    ``d < d_c - eps``): with eps = 0.25 (exact in binary), keypoints 0.5 and 0.75 px from the
    projection are both +1; one at 1.0 px (0.5 < 1.0 - 0.25) is not."""
    H = np.eye(3)
    t_xy = np.array([[50.5, 50.0], [50.0, 50.75], [49.0, 50.0]])
    indptr, indices = workbench_positives(H, np.array([[50.0, 50.0]]), t_xy, tau_px=3.0, eps=0.25)
    assert indptr.tolist() == [0, 2] and indices.tolist() == [0, 1]


def test_given_projections_are_checked_and_read_as_flags_and_pixels():
    """score_projected refuses closest_oriented with its whole message, and a projection or a flag
    count that does not match the queries (either alone); flags given as 0/1 integers or as a
    column, and integer pixel coordinates, score as bool flags and float coordinates do."""
    from descbench.metrics.retrieval import RetrievalParams, score_projected

    rng = np.random.default_rng(5)
    proj = np.array([[10.0, 10.0], [30.0, 10.0], [10.0, 30.0], [50.0, 50.0]])
    t_xy = proj + [[1.0, 0.0], [0.0, 2.0], [0.0, 0.0], [9.0, 9.0]]
    q, t = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(4, 8)).astype(np.float32)
    flags = np.array([True, True, False, True])
    params = RetrievalParams(gt="closest", tau_px=3.0)
    want = score_projected(proj, flags, q, t_xy, t, params)
    assert want.n_relevant.tolist() == [1, 1, 0, 0]
    for p, f in ((proj.astype(np.int64), flags), (proj.astype(np.float32), flags), (proj, flags.astype(np.int64)),
                 (proj, flags[:, None])):
        got = score_projected(p, f, q, t_xy, t, params)
        for field in ("inside", "n_relevant", "gt_index", "gt_px", "n_closer", "n_tied", "ap"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
            assert getattr(got, field).dtype == getattr(want, field).dtype, field
    with pytest.raises(ValueError, match=r"^gt 'closest_oriented' maps the query's frame through H; with given "
                                         r"projections use closest, all_within_tau or closest_group$"):
        score_projected(proj, flags, q, t_xy, t, RetrievalParams(gt="closest_oriented"))
    for p, f in ((proj[:3], flags), (proj, flags[:3])):
        with pytest.raises(ValueError, match="one projection and one flag per query"):
            score_projected(p, f, q, t_xy, t, params)
