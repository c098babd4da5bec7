"""Keypoint verification and keypoint retrieval vs a plain brute force that pools every pair."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from descbench.errors import DataError
from descbench.metrics.ap import ap_tie_aware, verification_ap_columns
from descbench.metrics.bojanic import (
    BojanicParams, Distractors, SceneTasks, SegmentStats, Target, score_scene_tasks, segment_statistics, verification_ap,
    workbench_scene_stats,
)
from descbench.metrics.distractors import distractor_scenes, draw_distractors

# ----------------------------------------------------------------------------- brute force


def bf_relevant(q_xy, t: Target, tau, gt):
    """Relevant target rows per query, straight from the definitions (float64, full matrices)."""
    h = np.column_stack([q_xy, np.ones(len(q_xy))]) @ t.H.T
    p = h[:, :2] / h[:, 2:3]
    w, hgt = t.size
    inside = (h[:, 2] > 0) & (p[:, 0] >= 0) & (p[:, 0] < w) & (p[:, 1] >= 0) & (p[:, 1] < hgt)
    out = []
    for i in range(len(q_xy)):
        if not inside[i] or len(t.xy) == 0:
            out.append(set())
            continue
        d = np.sqrt(((t.xy - p[i]) ** 2).sum(1))
        if gt == "closest":
            j = int(np.argmin(d))  # lowest index on ties
            out.append({j} if d[j] <= tau else set())
        else:
            out.append(set(np.flatnonzero(d <= tau).tolist()))
    return out


def sqd(a, b):
    """Ranking key: squared L2 for float descriptors, Hamming for packed bits."""
    if a.dtype == np.uint8:
        return np.unpackbits(a[:, None, :] ^ b[None, :, :], axis=-1).sum(-1).astype(np.float64)
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    # sequential float64 summation (cumsum), the kernels' order, so distances compare bit for bit
    return np.cumsum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)[..., -1]


def expected_ap(dist, rel):
    """Tie-aware AP of a materialised list (metrics.ap, itself checked by enumeration in test_ap)."""
    return ap_tie_aware(dist, rel.astype(np.int8))


def bound_ap(dist, rel, positives_first):
    """AP with every tie group's positives ranked first (optimistic) or last (pessimistic):
    Python's stable sort on (distance, positive-last flag), then precision at each positive."""
    order = sorted(range(len(dist)), key=lambda k: (dist[k], bool(rel[k]) != positives_first))
    hits, s = 0, 0.0
    for rank, k in enumerate(order, start=1):
        if rel[k]:
            hits += 1
            s += hits / rank
    return s / hits


def brute_force(q_xy, q_desc, targets, distractors, params, ap=expected_ap):
    """The verification list (distance, label, and its (query, segment, keypoint row) entries)
    and the per-query retrieval APs under ``ap`` (tie-aware unless given)."""
    rel = [bf_relevant(q_xy, t, params.tau_px, params.gt) for t in targets]
    # verification (nearest): NN per segment with the lowest index on ties
    v_dist, v_label, v_entry = [], [], []
    for i in range(len(q_xy)):
        for s, t in enumerate(targets):
            if len(t.desc):
                d = sqd(q_desc[i : i + 1], t.desc)[0]
                j = int(np.argmin(d))
                v_dist.append(d[j])
                v_label.append(1 if j in rel[s][i] else -1)
                v_entry.append((i, s, j))
        for s, dset in enumerate(distractors, start=len(targets)):
            if len(dset.desc):
                d = sqd(q_desc[i : i + 1], dset.desc)[0]
                v_dist.append(d.min())
                v_label.append(-1)
                v_entry.append((i, s, dset.rows[int(np.argmin(d))]))  # the keypoint row in its image
    # keypoint retrieval: every candidate, three-tier labels
    ap_neg, ap_ign = [], []
    for i in range(len(q_xy)):
        dist, lab = [], []
        for s, t in enumerate(targets):
            d = sqd(q_desc[i : i + 1], t.desc)[0] if len(t.desc) else np.zeros(0)
            dist.append(d)
            lab.append(np.array([1 if j in rel[s][i] else 0 for j in range(len(d))], dtype=int))
        for dset in distractors:
            d = sqd(q_desc[i : i + 1], dset.desc)[0] if len(dset.desc) else np.zeros(0)
            dist.append(d)
            lab.append(np.full(len(d), -1))
        dist, lab = np.concatenate(dist), np.concatenate(lab)
        if not (lab == 1).any():
            ap_neg.append(np.nan)
            ap_ign.append(np.nan)
            continue
        ap_neg.append(ap(dist, lab == 1))
        keep = lab != 0
        ap_ign.append(ap(dist[keep], lab[keep] == 1))
    return (np.array(v_dist), np.array(v_label), np.array(ap_neg), np.array(ap_ign), rel,
            np.array(v_entry, dtype=np.int64).reshape(-1, 3))


def random_scene(rng, nq=12, n_t=(10, 0, 14, 9, 11), n_dis=(5, 7, 0), dim=4, levels=3, binary=False):
    size = (60, 50)
    q_xy = rng.uniform(0, 60, (nq, 2))
    if nq > 1:
        q_xy[1] = q_xy[0]  # duplicate position
    def desc(n):
        if binary:
            return rng.integers(0, 4, (n, 1), dtype=np.uint8)
        return rng.integers(0, levels, (n, dim)).astype(np.float32)
    q_desc = desc(nq)
    targets = []
    for n in n_t:
        H = np.eye(3)
        H[:2, 2] = rng.uniform(-3, 3, 2)
        H[0, 1] = rng.uniform(-0.05, 0.05)
        h = np.column_stack([q_xy, np.ones(nq)]) @ H.T
        proj = h[:, :2] / h[:, 2:3]
        # half the targets near projections (so positives exist), the rest random
        src = proj if nq else rng.uniform(0, 60, (1, 2))
        near = src[rng.integers(0, len(src), n // 2)] + rng.normal(0, 1.5, (n // 2, 2))
        xy = np.vstack([near, rng.uniform(0, 60, (n - n // 2, 2))])
        targets.append(Target(xy, desc(n), H, size))
    distractors = [Distractors(f"x{i}", 1, np.arange(n) * 2, desc(n)) for i, n in enumerate(n_dis)]
    return q_xy, q_desc, targets, distractors


@pytest.mark.parametrize("gt", ["closest", "all_within_tau"])
@pytest.mark.parametrize("binary", [False, True])
def test_verification_and_retrieval_equal_brute_force(gt, binary):
    rng = np.random.default_rng(7 + binary)
    params = BojanicParams(gt=gt, tau_px=3.0, chunk_mb=0.0001)  # tiny blocks: several screen blocks
    for _ in range(6):
        q_xy, q_desc, targets, distractors = random_scene(rng, binary=binary)
        res = score_scene_tasks(q_xy, q_desc, targets, distractors, params)
        v_dist, v_label, ap_neg, ap_ign, rel, v_entry = brute_force(q_xy, q_desc, targets, distractors, params)
        np.testing.assert_array_equal(res.v_distance, v_dist)
        np.testing.assert_array_equal(res.v_label, v_label)
        np.testing.assert_array_equal(np.column_stack([res.v_query, res.v_segment, res.v_candidate]), v_entry)
        np.testing.assert_allclose(res.r_ap_negative, ap_neg, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.r_ap_ignore, ap_ign, rtol=0, atol=1e-12)
        n_rel = [sum(len(r[i]) for r in rel) for i in range(len(q_xy))]
        np.testing.assert_array_equal(res.r_positives, n_rel)
        assert res.stats["retrieval_num_true_positives"] == sum(n_rel)
        assert res.stats["retrieval_n_queries_with_positive"] == sum(n > 0 for n in n_rel)
        assert res.stats["verification_num_positives"] == (v_label == 1).sum()
        assert res.stats["verification_num_negatives"] == (v_label == -1).sum()
        # the result arrays carry the verification task's Parquet column types
        assert res.v_query.dtype == res.v_segment.dtype == res.v_candidate.dtype == res.r_positives.dtype == np.int32
        assert res.v_label.dtype == np.int8
        assert res.stats["n_distractors"] == sum(len(d.desc) for d in distractors)
        if (v_label == 1).any():
            assert res.stats["verification_ap_step"] == pytest.approx(average_precision_score(v_label == 1, -v_dist), abs=1e-12)


def test_float_screen_is_exact_for_near_ties():
    """Candidates closer than float32 resolution still rank exactly (float64 recheck)."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal(64).astype(np.float32)
    q_desc = base[None, :].copy()
    eps = np.zeros(64, np.float32)
    eps[5] = np.float32(1e-6)
    cands = np.stack([base + 1.0, base + 1.0 + eps, base + 1.0 - eps, base + 2.0]).astype(np.float32)
    q_xy = np.array([[10.0, 10.0]])
    t = Target(np.array([[10.0, 10.0], [40.0, 40.0], [30.0, 5.0], [5.0, 30.0]]), cands, np.eye(3), (50, 50))
    res = score_scene_tasks(q_xy, q_desc, [t], [], BojanicParams(gt="closest"))
    v_dist, v_label, ap_neg, _, _, _ = brute_force(q_xy, q_desc, [t], [], BojanicParams(gt="closest"))
    np.testing.assert_array_equal(res.v_distance, v_dist)
    np.testing.assert_array_equal(res.v_label, v_label)
    assert res.r_ap_negative[0] == pytest.approx(ap_neg[0], abs=1e-15)


def test_empty_inputs_are_recorded_not_skipped():
    rng = np.random.default_rng(0)
    q_xy, q_desc, targets, distractors = random_scene(rng, nq=0)
    res = score_scene_tasks(q_xy, q_desc, targets, distractors, BojanicParams(gt="closest"))
    assert res.stats["n_queries"] == 0
    assert np.isnan(res.stats["verification_ap_step"])
    assert res.stats["retrieval_n_queries_with_positive"] == 0


def test_descriptor_mismatch_names_the_source():
    rng = np.random.default_rng(0)
    q_xy, q_desc, targets, distractors = random_scene(rng)  # float32 x 4 descriptors
    bad = [Distractors("v_other", 3, np.arange(2), np.zeros((2, 9), np.float32))]
    msg = ("scene: distractor v_other/3 has float32 x (9,) descriptors, image 1 has float32 x (4,); "
           "every scene must use the same descriptor")
    with pytest.raises(DataError, match=re.escape(msg)):  # 'scene' names the scene by default
        score_scene_tasks(q_xy, q_desc, targets, bad, BojanicParams(gt="closest"))
    with pytest.raises(DataError, match=re.escape(msg)):
        SceneTasks(q_xy, q_desc, targets, bad, BojanicParams(gt="closest"))
    # the first target is image 2; a dtype mismatch is named too
    first = Target(targets[0].xy, targets[0].desc.astype(np.float64), targets[0].H, targets[0].size)
    msg = ("v_wall: image 2 has float64 x (4,) descriptors, image 1 has float32 x (4,); "
           "every scene must use the same descriptor")
    with pytest.raises(DataError, match=re.escape(msg)):
        score_scene_tasks(q_xy, q_desc, [first] + targets[1:], distractors, BojanicParams(gt="closest"), where="v_wall")


def test_distractor_draw_is_stable_and_reproducible():
    scenes = [f"i_s{i}" for i in range(6)] + [f"v_s{i}" for i in range(6)]
    a = distractor_scenes("i_s0", scenes, 10, seed=0)
    assert a == distractor_scenes("i_s0", list(reversed(scenes)), 10, seed=0)  # order-independent
    assert len(a) == 10 and "i_s0" not in a and len(set(a)) == 10
    assert a != distractor_scenes("i_s0", scenes, 10, seed=1)
    counts = {s: {k: 30 + k for k in range(1, 7)} for s in scenes}
    d1 = draw_distractors("i_s0", scenes, 10, 20, 0, counts)
    d2 = draw_distractors("i_s0", scenes, 10, 20, 0, counts)
    assert [d.scene for d in d1] == a
    for x, y in zip(d1, d2):
        assert (x.scene, x.image) == (y.scene, y.image) and np.array_equal(x.rows, y.rows)
        assert len(x.rows) == 20 and np.all(np.diff(x.rows) > 0) and x.rows.max() < counts[x.scene][x.image]
    # fewer other scenes than asked: all of them, and 'all' keypoints
    few = draw_distractors("i_s0", scenes[:3], 10, "all", 0, counts)
    assert sorted(d.scene for d in few) == scenes[1:3]
    assert all(len(d.rows) == counts[d.scene][d.image] for d in few)
    # pinned values: a change of the sampling scheme must be deliberate (it changes every result)
    assert distractor_scenes("v_wall", ["i_a", "i_b", "v_c", "v_wall", "i_d"], 2, seed=0) == ["i_a", "i_d"]


@pytest.mark.parametrize("binary", [False, True])
def test_candidates_all_equals_the_materialised_pooled_list(binary):
    """candidates: all -- AP of every (query, candidate) pair, never materialised, vs sklearn."""
    from descbench.metrics.ap import ap_tie_aware as list_tie_aware

    rng = np.random.default_rng(11 + binary)
    params = BojanicParams(gt="closest", candidates="all", chunk_mb=0.0001)
    for _ in range(4):
        q_xy, q_desc, targets, distractors = random_scene(rng, binary=binary)
        res = score_scene_tasks(q_xy, q_desc, targets, distractors, params)
        rel = [bf_relevant(q_xy, t, params.tau_px, params.gt) for t in targets]
        dist, lab = [], []
        for i in range(len(q_xy)):
            for s, t in enumerate(targets):
                if len(t.desc):
                    dist.append(sqd(q_desc[i : i + 1], t.desc)[0])
                    lab.append(np.array([j in rel[s][i] for j in range(len(t.desc))]))
            for dset in distractors:
                if len(dset.desc):
                    dist.append(sqd(q_desc[i : i + 1], dset.desc)[0])
                    lab.append(np.zeros(len(dset.desc), bool))
        dist, lab = np.concatenate(dist), np.concatenate(lab)
        assert res.stats["verification_num_positives"] == lab.sum()
        assert res.stats["verification_num_negatives"] == (~lab).sum()
        assert res.stats["verification_ap_step"] == pytest.approx(average_precision_score(lab, -dist), abs=1e-12)
        assert res.stats["verification_ap_tie_aware"] == pytest.approx(list_tie_aware(dist, lab.astype(np.int8)), abs=1e-12)
        assert np.isnan(res.stats["verification_ap_vlfeat"])  # order-dependent: not defined without the list
        for a in (res.v_query, res.v_segment, res.v_candidate, res.v_distance, res.v_label):
            assert len(a) == 0  # no list is built


def test_many_distractor_segments_keep_their_identity():
    """More than 127 segments (int8 would wrap): every entry maps to its own distractor rows."""
    rng = np.random.default_rng(5)
    q_xy, q_desc, targets, _ = random_scene(rng, nq=3)
    distractors = [Distractors(f"x{i}", 1 + i % 6, np.arange(3) * 7 + i, q_desc[:1] + np.float32(i + 1) * np.ones((3, 4), np.float32))
                   for i in range(150)]
    res = score_scene_tasks(q_xy, q_desc, targets, distractors, BojanicParams(gt="closest"))
    dis = res.v_segment >= len(targets)
    assert res.v_segment.max() == len(targets) + 149 and (res.v_segment >= 0).all()
    for seg, cand in zip(res.v_segment[dis], res.v_candidate[dis]):
        assert cand in distractors[seg - len(targets)].rows


@pytest.mark.parametrize("levels", [3, None])
def test_segment_statistics_equal_brute_force_across_column_blocks(levels):
    """The segment kernel reads each segment in blocks of 64 candidates (block maxima first): with
    segments of 0, 1, 63, 64, 65, 130 and 200 candidates, every nearest neighbour and every
    class-split count equals a brute force over the definition (float64, index-order sums).
    ``levels``: integer descriptors with many ties; None: real-valued ones where each query's two
    near copies per segment sit at block edges (first and last column of a block), alone above
    the rest, so a block's maximum or its last column cannot be missed unnoticed."""
    rng = np.random.default_rng(11)
    sizes = [65, 0, 130, 1, 64, 63, 200]
    n_image = 65 + 130 + 1 + 64  # the first five segments are the scene's own images
    seg_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    nq, dim = 40, 6
    if levels:
        q = rng.integers(0, levels, (nq, dim)).astype(np.float32)
        c = rng.integers(0, levels, (seg_start[-1], dim)).astype(np.float32)
        rel = [np.sort(rng.choice(seg_start[-1], size=rng.integers(0, 6), replace=False)) for _ in range(nq)]
    else:
        q = rng.random((nq, dim), dtype=np.float32)
        c = (rng.random((seg_start[-1], dim), dtype=np.float32) + 3.0).astype(np.float32)  # far from every query
        edges = [0, 63, 64, 127, 128, 191, 199, 62]
        rel = []
        for i in range(nq):
            mine = []
            for s, n in enumerate(sizes):
                if n == 0:
                    continue
                p1 = min(edges[(i + s) % len(edges)], n - 1)
                p2 = min(edges[(i + s + 3) % len(edges)], n - 1)
                c[seg_start[s] + p2] = q[i] + np.float32(1e-3) * rng.integers(0, 3, dim)
                c[seg_start[s] + p1] = q[i] + np.float32(1e-3) * rng.integers(0, 3, dim)  # p1 wins when p1 == p2
                mine.append(seg_start[s] + p1)
            rel.append(np.array(sorted(mine[: 1 + i % 3]), dtype=np.int64))
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rel])]).astype(np.int64)
    indices = np.concatenate(rel).astype(np.int64)
    nn_idx, nn_d, less_img, equal_img, less_dis, equal_dis, dexact = segment_statistics(
        q, c, seg_start, n_image, indptr, indices, chunk_mb=0.001)
    assert nn_idx.shape == nn_d.shape == (nq, len(sizes))  # one column per segment
    for counts in (nn_idx, less_img, equal_img, less_dis, equal_dis):
        assert counts.dtype == np.int64
    d = sqd(q, c)
    own = np.arange(seg_start[-1]) < n_image
    for i in range(nq):
        for s in range(len(sizes)):
            a, b = seg_start[s], seg_start[s + 1]
            if b == a:
                assert nn_idx[i, s] == -1 and nn_d[i, s] == np.inf
            else:
                assert nn_idx[i, s] == int(np.argmin(d[i, a:b])) and nn_d[i, s] == d[i, a:b].min()
        for e in range(indptr[i], indptr[i + 1]):
            de = d[i, indices[e]]
            assert dexact[e] == de
            assert less_img[e] == (own & (d[i] < de)).sum() and equal_img[e] == (own & (d[i] == de)).sum()
            assert less_dis[e] == (~own & (d[i] < de)).sum() and equal_dis[e] == (~own & (d[i] == de)).sum()


@pytest.mark.parametrize("policy", ["optimistic", "pessimistic"])
def test_retrieval_tie_policy_places_positives_inside_ties(policy):
    """tie_policy reaches both retrieval APs: integer descriptors tie often, and the positives of
    a tie group come first (optimistic) or last (pessimistic) in the brute-force ranking."""
    rng = np.random.default_rng(21)
    params = BojanicParams(gt="all_within_tau", tau_px=3.0, tie_policy=policy)
    ap = lambda d, r: bound_ap(d, r, positives_first=policy == "optimistic")  # noqa: E731
    for _ in range(2):
        q_xy, q_desc, targets, distractors = random_scene(rng, levels=2)
        res = score_scene_tasks(q_xy, q_desc, targets, distractors, params)
        _, _, ap_neg, ap_ign, _, _ = brute_force(q_xy, q_desc, targets, distractors, params, ap=ap)
        np.testing.assert_allclose(res.r_ap_negative, ap_neg, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.r_ap_ignore, ap_ign, rtol=0, atol=1e-12)


def test_single_keypoint_target_labels_only_its_own_query():
    """A target image with one keypoint: every query's nearest neighbour there is that keypoint,
    +1 only for the query it is relevant to."""
    q_xy = np.array([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]])
    q_desc = np.array([[0.0], [1.0], [2.0]], np.float32)
    # the keypoint sits on query 1's position (H = identity); queries 0 and 2 are 14 px away > tau
    t = Target(np.array([[20.0, 20.0]]), np.array([[1.0]], np.float32), np.eye(3), (50, 50))
    res = score_scene_tasks(q_xy, q_desc, [t], [], BojanicParams(gt="closest", tau_px=3.0))
    assert res.v_query.tolist() == [0, 1, 2] and res.v_candidate.tolist() == [0, 0, 0]
    assert res.v_label.tolist() == [-1, 1, -1]
    assert res.v_distance.tolist() == [1.0, 0.0, 1.0]  # squared distances (0-1)^2, 0, (2-1)^2


def test_scene_without_targets_has_only_distractor_entries():
    """No target image (only distractors): no query has a relevant keypoint, the list holds the
    nearest distractor of each query with its keypoint row."""
    q_xy = np.array([[5.0, 5.0], [15.0, 15.0]])
    q_desc = np.array([[0.0, 0.0], [3.0, 0.0]], np.float32)
    dis = Distractors("other", 2, np.array([4, 9]), np.array([[1.0, 0.0], [3.0, 1.0]], np.float32))
    res = score_scene_tasks(q_xy, q_desc, [], [dis], BojanicParams(gt="closest"))
    # query 0: squared distances 1 and 9 + 1 -> set index 0 = row 4; query 1: 4 and 1 -> row 9
    assert res.v_segment.tolist() == [0, 0] and res.v_candidate.tolist() == [4, 9]
    assert res.v_distance.tolist() == [1.0, 1.0] and res.v_label.tolist() == [-1, -1]
    assert res.r_positives.tolist() == [0, 0]
    assert np.isnan(res.r_ap_negative).all() and np.isnan(res.r_ap_ignore).all()
    assert res.stats["n_target_keypoints"] == 0 and res.stats["retrieval_num_true_positives"] == 0
    assert res.stats["verification_num_negatives"] == 2 and res.stats["retrieval_num_distractors"] == 4
    assert all(math.isnan(res.stats[c]) for c in verification_ap_columns())  # no positive in the list


WORKBENCH_AP_KEYS = ("workbench_verification_ap", "workbench_verification_ap_optimistic",
                     "workbench_verification_ap_pessimistic", "workbench_retrieval_ap")


def workbench_stats(stats):
    return {k: v for k, v in stats.items() if k.lower().startswith("workbench")}


def test_workbench_stats_without_list_or_without_positive():
    """The workbench columns when the pooled list is empty (NaN) or has no positive (0)."""
    q_xy = np.array([[5.0, 5.0], [25.0, 5.0]])
    q_desc = np.ones((2, 2), np.float32)
    params = BojanicParams(gt="closest", convention="workbench")
    st = workbench_stats(score_scene_tasks(q_xy, q_desc, [], [], params).stats)  # nothing to rank
    assert st.keys() == {"workbench_num_positives", "workbench_num_candidates", *WORKBENCH_AP_KEYS}
    assert st["workbench_num_candidates"] == 0 and st["workbench_num_positives"] == 0
    assert all(math.isnan(st[k]) for k in WORKBENCH_AP_KEYS)
    far = Target(np.array([[90.0, 90.0]]), np.zeros((1, 2), np.float32), np.eye(3), (100, 100))
    st = workbench_stats(score_scene_tasks(q_xy, q_desc, [far], [], params).stats)  # 2 pairs, > 3 px away
    assert st == {"workbench_num_positives": 0, "workbench_num_candidates": 2, **{k: 0.0 for k in WORKBENCH_AP_KEYS}}


def bf_workbench_relevant(q_xy, t: Target, tau):
    """The workbench's +1 per query (float64 here): every keypoint within tau px of the
    projection and within 1e-6 px of the nearest distance; no inside-the-image test."""
    h = np.column_stack([q_xy, np.ones(len(q_xy))]) @ t.H.T
    p = h[:, :2] / h[:, 2:3]
    out = []
    for i in range(len(q_xy)):
        d = np.sqrt(((t.xy - p[i]) ** 2).sum(1))
        out.append(set(np.flatnonzero((d <= tau) & (d <= d.min() + 1e-6)).tolist()) if len(d) else set())
    return out


def test_workbench_convention_binary_descriptors_and_tau():
    """Packed-bit descriptors (Hamming keys) and tau_px = 2: the workbench's pooled AP of every
    (query, candidate) pair equals a brute force over the materialised list."""
    rng = np.random.default_rng(4)
    params = BojanicParams(gt="closest", tau_px=2.0, convention="workbench", tie_policy="expected")
    for _ in range(3):
        q_xy, q_desc, targets, distractors = random_scene(rng, binary=True)
        st = score_scene_tasks(q_xy, q_desc, targets, distractors, params).stats
        rel = [bf_workbench_relevant(q_xy, t, params.tau_px) for t in targets]
        dist, lab = [], []
        for i in range(len(q_xy)):
            for s, t in enumerate(targets):
                dist.append(sqd(q_desc[i : i + 1], t.desc)[0])
                lab.append(np.array([j in rel[s][i] for j in range(len(t.desc))], dtype=bool))
            for dset in distractors:
                dist.append(sqd(q_desc[i : i + 1], dset.desc)[0])
                lab.append(np.zeros(len(dset.desc), bool))
        dist, lab = np.concatenate(dist), np.concatenate(lab)
        assert lab.any()
        assert st["workbench_num_positives"] == lab.sum() and st["workbench_num_candidates"] == len(lab)
        assert st["workbench_verification_ap"] == pytest.approx(expected_ap(dist, lab), abs=1e-12)
        assert st["workbench_retrieval_ap"] == st["workbench_verification_ap"]
        assert st["workbench_verification_ap_optimistic"] == pytest.approx(bound_ap(dist, lab, True), abs=1e-12)
        assert st["workbench_verification_ap_pessimistic"] == pytest.approx(bound_ap(dist, lab, False), abs=1e-12)


def test_candidates_all_with_a_single_positive_pair():
    """candidates: all, one relevant pair in the scene, ranked second of four."""
    q_xy = np.array([[10.0, 10.0], [40.0, 40.0]])
    q_desc = np.array([[0.0], [1.5]], np.float32)
    # H = identity: query 0 sits on keypoint 0 (+1); query 1's nearest keypoint is 21 px away
    t = Target(np.array([[10.0, 10.0], [25.0, 25.0]]), np.array([[1.0], [3.0]], np.float32), np.eye(3), (60, 60))
    st = score_scene_tasks(q_xy, q_desc, [t], [], BojanicParams(gt="closest", candidates="all")).stats
    # squared distances: (q0, k0) 1 (+), (q0, k1) 9, (q1, k0) 0.25, (q1, k1) 2.25
    # sorted: 0.25 (-), 1 (+), 2.25, 9 -> AP = 1/2 (no ties: step = tie-aware)
    assert st["verification_num_positives"] == 1 and st["verification_num_negatives"] == 3
    assert st["verification_ap_step"] == 0.5 and st["verification_ap_tie_aware"] == 0.5


def test_closest_oriented_names_the_missing_frames():
    q_xy = np.array([[10.0, 10.0]])
    q_desc = np.zeros((1, 2), np.float32)
    t = Target(np.array([[10.0, 10.0]]), np.zeros((1, 2), np.float32), np.eye(3), (50, 50))
    params = BojanicParams(gt="closest_oriented")
    with pytest.raises(ValueError, match=re.escape("gt 'closest_oriented' needs the angles and sizes of the keypoints of image 1")):
        score_scene_tasks(q_xy, q_desc, [t], [], params)
    with pytest.raises(ValueError, match=re.escape("gt 'closest_oriented' needs the angles and sizes of the keypoints of images 2..6")):
        score_scene_tasks(q_xy, q_desc, [t], [], params, q_frame=(np.zeros(1), np.ones(1)))


def test_verification_ap_of_small_lists():
    """verification_ap on hand-made lists (labels +1 / -1)."""
    lab = lambda *x: np.array(x, np.int8)  # noqa: E731
    # no positive: AP undefined
    out = verification_ap(np.array([0.2, 0.5]), lab(-1, -1), 8)
    assert list(out) == verification_ap_columns() and all(math.isnan(v) for v in out.values())
    # one entry, positive; two entries, both positive: every precision is 1
    for d, y in ((np.array([0.5]), lab(1)), (np.array([0.2, 0.5]), lab(1, 1))):
        assert verification_ap(d, y, 8) == {c: 1.0 for c in verification_ap_columns()}
    # distances 0, 1, 2 on the 3 bin centres: the quantised AP is the step AP, (1/1 + 2/3) / 2
    out = verification_ap(np.array([0.0, 1.0, 2.0]), lab(1, -1, 1), 3)
    assert out["verification_ap_quantized"] == pytest.approx(5 / 6, abs=1e-12)
    # 40 entries tied at 0, every other one of them positive, interleaved with 40 at 1: vlfeat
    # keeps the list order inside the tie, so the k-th positive has rank 2k - 1 and
    # AP = (1/20) sum_k k / (2k - 1) (the ap_vlfeat definition)
    d = np.array([1.0, 0.0] * 40)
    y = np.full(80, -1, np.int8)
    y[1::4] = 1
    out = verification_ap(d, y, 8)
    assert out["verification_ap_vlfeat"] == pytest.approx(sum(k / (2 * k - 1) for k in range(1, 21)) / 20, abs=1e-12)
    assert out["verification_ap_step"] == pytest.approx(20 / 40)  # precision at the tie group's end


def test_segment_statistics_without_candidates():
    """Float descriptors and only empty segments: no screen is needed, every nearest neighbour
    is -1 / inf."""
    q = np.ones((2, 3), np.float32)
    c = np.zeros((0, 3), np.float32)
    seg_start = np.zeros(3, np.int64)  # two empty segments
    indptr, indices = np.zeros(3, np.int64), np.zeros(0, np.int64)
    assert SegmentStats(q, c, seg_start, 0, indptr, indices).needs_screen is False
    nn_idx, nn_d, *_ = segment_statistics(q, c, seg_start, 0, indptr, indices, chunk_mb=1.0)
    assert nn_idx.tolist() == [[-1, -1], [-1, -1]] and np.isinf(nn_d).all()


def test_workbench_stats_refuse_descriptors_other_than_float32_or_bits():
    """float16 descriptors: the DataError of the exact pair pass, naming the dtype."""
    q = np.zeros((2, 3), np.float16)
    c = np.ones((4, 3), np.float16)
    indptr, indices = np.array([0, 1, 2], np.int64), np.array([0, 3], np.int64)
    msg = "query descriptors have dtype float16; expected float32 (L2) or uint8 packed bits (Hamming)"
    with pytest.raises(DataError, match=re.escape(msg)):
        workbench_scene_stats(q, c, indptr, indices, "expected")
