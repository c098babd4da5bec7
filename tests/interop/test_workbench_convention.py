"""The C++ DescriptorWorkbench's verification / keypoint retrieval convention and the
order-independent ground truths (closest_group, closest_oriented), on hand-built cases.

Every expected value is either worked out by hand in a comment or produced by a brute force
written here independently of descbench (full lists, Python sorting, enumeration of tie orders).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from descbench.config import validate_config
from descbench.errors import ConfigError
from descbench.metrics import kernels
from descbench.metrics.aggregate import verification_scene_values, verification_summary
from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
from descbench.metrics.retrieval import RetrievalParams, score_pair, workbench_positives

from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"

F32_EPS = float(np.finfo(np.float32).eps)


# ----------------------------------------------------------------------------- brute force of the workbench


def wb_project(H, q):
    """cv::perspectiveTransform on one cv::Point2f: double arithmetic, float result."""
    x, y = float(np.float32(q[0])), float(np.float32(q[1]))
    w = x * H[2, 0] + y * H[2, 1] + H[2, 2]
    if abs(w) <= F32_EPS:
        return np.float32(0.0), np.float32(0.0)
    iw = 1.0 / w
    return np.float32((x * H[0, 0] + y * H[0, 1] + H[0, 2]) * iw), np.float32((x * H[1, 0] + y * H[1, 1] + H[1, 2]) * iw)


def wb_labels(H, q, targets, tau=3.0):
    """isCorrectMatch for every target keypoint: the indices labelled +1."""
    px, py = wb_project(H, q)
    ds = []
    for tx, ty in targets:
        dx = np.float32(px - np.float32(tx))
        dy = np.float32(py - np.float32(ty))
        ds.append(math.sqrt(float(dx) * float(dx) + float(dy) * float(dy)))
    return [j for j, d in enumerate(ds) if d <= tau and not any(e < d - 1e-6 for e in ds)]


def pooled_list(q_xy, q_desc, targets, distractors):
    """The workbench's pooled list of one scene: (distance, is_positive) for every pair."""
    out = []
    for i, q in enumerate(q_xy):
        for t in targets:
            pos = set(wb_labels(t.H, q, t.xy))
            for j, c in enumerate(t.desc):
                out.append((float(np.sum((q_desc[i].astype(np.float64) - c.astype(np.float64)) ** 2)), j in pos))
        for d in distractors:
            for c in d.desc:
                out.append((float(np.sum((q_desc[i].astype(np.float64) - c.astype(np.float64)) ** 2)), False))
    return out


def plain_ap(flags):
    hits, s = 0, 0.0
    for k, f in enumerate(flags, start=1):
        if f:
            hits += 1
            s += hits / k
    return s / hits if hits else 0.0


def tie_placements(items, policy):
    """All orderings of the positives inside each tie group under ``policy`` (list of flag lists)."""
    groups = {}
    for d, f in items:
        groups.setdefault(d, []).append(f)
    per = []
    for d in sorted(groups):
        m, p = len(groups[d]), sum(groups[d])
        if policy == "optimistic":
            pl = [tuple(range(p))]
        elif policy == "pessimistic":
            pl = [tuple(range(m - p, m))]
        elif policy == "half":
            k = math.ceil((m - p) / 2)
            pl = [tuple(range(k, k + p))]
        else:
            pl = list(itertools.combinations(range(m), p))
        per.append((m, pl))
    out = []
    for combo in itertools.product(*[pl for _, pl in per]):
        flags = []
        for (m, _), pos in zip(per, combo):
            flags += [j in pos for j in range(m)]
        out.append(flags)
    return out


def brute_pooled_ap(items, policy):
    return float(np.mean([plain_ap(f) for f in tie_placements(items, policy)]))


# ----------------------------------------------------------------------------- workbench labels


def test_workbench_labels_every_same_position_duplicate():
    # three SIFT-like keypoints (three orientations) at exactly (20, 20), one at 1 px, one far
    t_xy = np.array([[20.0, 20.0], [21.0, 20.0], [20.0, 20.0], [50.0, 50.0], [20.0, 20.0]])
    q_xy = np.array([[20.2, 20.0], [35.0, 35.0], [21.0, 20.0]])
    indptr, idx = workbench_positives(np.eye(3), q_xy, t_xy, 3.0)
    rows = [sorted(idx[indptr[i]:indptr[i + 1]].tolist()) for i in range(3)]
    # q0 is 0.2 px from the triple, 0.8 px from (21, 20): the whole triple is +1
    # q1 is > 3 px from everything: nothing; q2 sits on (21, 20): only it
    assert rows == [[0, 2, 4], [], [1]]
    # 'closest' keeps one of them (the lowest index), 'all_within_tau' all four within 3 px
    res = score_pair(q_xy, np.eye(3, 4, dtype=np.float32), t_xy, np.eye(5, 4, dtype=np.float32), np.eye(3), (100, 100),
                     RetrievalParams(gt="closest"))
    assert res.gt_index[0] == 0 and res.n_relevant.tolist() == [1, 0, 1]


def test_workbench_labels_equal_brute_force_on_random_homographies():
    rng = np.random.default_rng(0)
    for trial in range(20):
        H = np.eye(3) + rng.normal(0, 0.02, (3, 3))
        H[2, :2] = rng.normal(0, 2e-4, 2)
        H[2, 2] = 1.0
        q_xy = rng.uniform(0, 60, (25, 2)).astype(np.float32).astype(np.float64)
        base = rng.uniform(0, 60, (15, 2)).astype(np.float32)
        # duplicates at the same position and near-projections
        proj = np.array([wb_project(H, q) for q in q_xy[:8]], dtype=np.float32)
        t = np.concatenate([base, proj, proj[:4], proj[:3] + np.float32(0.5)]).astype(np.float64)
        rng.shuffle(t)
        indptr, idx = workbench_positives(H, q_xy, t, 3.0)
        for i, q in enumerate(q_xy):
            assert sorted(idx[indptr[i]:indptr[i + 1]].tolist()) == wb_labels(H, q, t), (trial, i)


def test_workbench_epsilon_is_on_the_distance_not_the_position():
    # two keypoints at different positions but the same distance (2 px) from the projection: the
    # workbench's "no keypoint closer by more than 1e-6" rule makes both +1
    t_xy = np.array([[12.0, 10.0], [10.0, 12.0], [10.0, 14.0]])
    indptr, idx = workbench_positives(np.eye(3), np.array([[10.0, 10.0]]), t_xy, 3.0)
    assert idx.tolist() == [0, 1]


# ----------------------------------------------------------------------------- workbench pooled AP


def tiny_scene(rng, integer: bool):
    """2 targets with duplicates at one position, ties in distances (integer descriptors), 2 distractor sets."""
    q_xy = np.array([[10.0, 10.0], [30.0, 30.0], [50.0, 12.0]])
    dim = 3

    def desc(n):
        if integer:
            return rng.integers(0, 2, (n, dim)).astype(np.float32)
        return rng.standard_normal((n, dim)).astype(np.float32)

    targets = []
    for shift in (0.0, 1.0):
        H = np.array([[1.0, 0.0, shift], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        xy = np.array([[10.0 + shift, 10.0], [10.0 + shift, 10.0], [30.5 + shift, 30.0], [31.5 + shift, 30.0],
                       [10.0 + shift, 10.0], [70.0, 70.0]])
        targets.append(Target(xy, desc(len(xy)), H, (100, 100)))
    dis = [Distractors("x", 1, np.arange(2), desc(2)), Distractors("y", 3, np.arange(3), desc(3))]
    return q_xy, desc(3), targets, dis


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic", "half"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_workbench_verification_equals_brute_force(integer, policy, seed):
    rng = np.random.default_rng(seed)
    q_xy, q_desc, targets, dis = tiny_scene(rng, integer)
    params = BojanicParams(gt="closest", tie_policy=policy, convention="workbench", candidates="all")
    res = score_scene_tasks(q_xy, q_desc, targets, dis, params)
    items = pooled_list(q_xy, q_desc, targets, dis)
    st = res.stats
    assert st["workbench_num_positives"] == sum(f for _, f in items) == 8  # q0: the triple in each image (3 + 3), q1: one per image
    assert st["workbench_num_candidates"] == len(items) == 3 * (12 + 5)
    if integer and policy == "expected":  # too many tie orders to enumerate: He et al.'s closed form
        from descbench.metrics.ap import ap_tie_aware  # (itself checked by enumeration in test_ap.py)

        d = np.array([x for x, _ in items])
        want = ap_tie_aware(d, np.array([int(f) for _, f in items]))
    else:
        want = brute_pooled_ap(items, policy)
    assert st["workbench_verification_ap"] == pytest.approx(want, abs=1e-12)
    assert st["workbench_verification_ap_optimistic"] == pytest.approx(brute_pooled_ap(items, "optimistic"), abs=1e-12)
    assert st["workbench_verification_ap_pessimistic"] == pytest.approx(brute_pooled_ap(items, "pessimistic"), abs=1e-12)
    assert st["workbench_retrieval_ap"] == st["workbench_verification_ap"]  # the same pooled list
    if not integer:  # no ties: the workbench's std::sort + step AP, whatever the tie rule
        assert st["workbench_verification_ap"] == pytest.approx(plain_ap([f for _, f in sorted(items)]), abs=1e-12)
    # the descbench columns are those of the descbench convention
    ref = score_scene_tasks(q_xy, q_desc, targets, dis, BojanicParams(gt="closest", tie_policy="expected" if policy == "half" else policy,
                                                                       candidates="all"))
    if policy != "half":
        for k, v in ref.stats.items():
            assert res.stats[k] == v or (isinstance(v, float) and math.isnan(v) and math.isnan(res.stats[k]))
    assert "workbench_verification_ap" not in ref.stats


def test_workbench_scene_without_positive_counts_zero_and_empty_list_nan():
    q_desc = np.ones((1, 2), np.float32)
    far = Target(np.array([[90.0, 90.0]]), np.zeros((1, 2), np.float32), np.eye(3), (100, 100))
    st = score_scene_tasks(np.array([[5.0, 5.0]]), q_desc, [far], [], BojanicParams(gt="closest", convention="workbench")).stats
    assert st["workbench_num_positives"] == 0 and st["workbench_verification_ap"] == 0.0
    empty = Target(np.zeros((0, 2)), np.zeros((0, 2), np.float32), np.eye(3), (100, 100))
    st = score_scene_tasks(np.array([[5.0, 5.0]]), q_desc, [empty], [], BojanicParams(gt="closest", convention="workbench")).stats
    assert math.isnan(st["workbench_verification_ap"])


def test_workbench_hand_example_with_duplicates_and_distractor():
    # one query at (0+10, 10); target: duplicates a, b at the projection, c at 5 px; one distractor.
    # squared distances: a 4, b 1, c 0 (c is not +1), distractor 2 -> sorted c(-) b(+) dis(-) a(+)
    # AP = (1/2 + 2/4) / 2 = 0.5
    q = np.array([[10.0, 10.0]])
    qd = np.zeros((1, 1), np.float32)
    t = Target(np.array([[10.0, 10.0], [10.0, 10.0], [15.0, 10.0]]), np.array([[2.0], [1.0], [0.0]], np.float32), np.eye(3), (50, 50))
    dis = [Distractors("o", 1, np.array([0]), np.array([[np.sqrt(2.0)]], np.float32))]
    st = score_scene_tasks(q, qd, [t], dis, BojanicParams(gt="closest", convention="workbench")).stats
    assert st["workbench_verification_ap"] == pytest.approx(0.5, abs=1e-7)
    # ties: a at distance 1 with the distractor (squared 1): group {b+, dis-} at rank 1..2
    dis = [Distractors("o", 1, np.array([0]), np.array([[1.0]], np.float32))]
    t2 = Target(t.xy, np.array([[2.0], [1.0], [0.0]], np.float32), np.eye(3), (50, 50))
    vals = {p: score_scene_tasks(q, qd, [t2], dis, BojanicParams(gt="closest", convention="workbench", tie_policy=p)).stats["workbench_verification_ap"]
            for p in ("optimistic", "pessimistic", "half", "expected")}
    # sorted: c(0,-) {b+, dis-}(1) a(4,+)   optimistic: ranks 2, 4 -> (1/2 + 2/4)/2 = 0.5
    # pessimistic: ranks 3, 4 -> (1/3 + 2/4)/2 = 5/12; half: ceil(1/2) = 1 negative first = pessimistic
    # expected: mean of the two = 11/24
    assert vals["optimistic"] == pytest.approx(0.5) and vals["pessimistic"] == pytest.approx(5 / 12)
    assert vals["half"] == pytest.approx(5 / 12) and vals["expected"] == pytest.approx(11 / 24)


def test_workbench_summary_means_over_scenes_with_a_list():
    from descbench.metrics.ap import verification_ap_columns

    rows = pd.DataFrame({
        "scene": ["i_a", "v_b", "v_c", "x_d"],
        "n_queries": [1, 1, 1, 1], "n_target_keypoints": [3, 2, 2, 1], "n_distractor_scenes": [1, 1, 1, 1],
        "n_distractors": [1, 1, 1, 1], "verification_num_positives": [1, 1, 0, 1], "verification_num_negatives": [1, 1, 1, 1],
        **{c: [0.5] * 4 for c in verification_ap_columns()},  # every AP convention's column (the registry's)
        "retrieval_n_queries_with_positive": [1, 1, 0, 1], "retrieval_sum_ap_negative": [0.5, 0.5, 0, 0.5],
        "retrieval_sum_ap_ignore": [0.5, 0.5, 0, 0.5], "retrieval_num_true_positives": [1, 1, 0, 1],
        "retrieval_num_hard_negatives": [0, 0, 0, 0], "retrieval_num_distractors": [1, 1, 1, 1],
        "workbench_num_positives": [2, 1, 0, 1], "workbench_num_candidates": [4, 4, 4, 0],
        "workbench_verification_ap": [0.9, 0.6, 0.0, np.nan],  # v_c: no +1 -> 0; x_d: empty list -> NaN
        "workbench_verification_ap_optimistic": [1.0, 0.6, 0.0, np.nan],
        "workbench_verification_ap_pessimistic": [0.8, 0.6, 0.0, np.nan],
        "workbench_retrieval_ap": [0.9, 0.6, 0.0, np.nan],
    })
    out = verification_summary(rows, "step", "negative", float("nan"))
    assert out["workbench_verification_map"] == pytest.approx(0.5)  # (0.9 + 0.6 + 0) / 3
    assert out["workbench_verification_viewpoint_map"] == pytest.approx(0.3)
    assert out["workbench_verification_illumination_map"] == pytest.approx(0.9)
    assert out["workbench_retrieval_map"] == pytest.approx(0.5)
    assert out["workbench_verification_map_optimistic"] == pytest.approx(1.6 / 3)
    assert out["workbench_num_positives"] == 4
    assert out["workbench_verification_map_pessimistic"] == pytest.approx(1.4 / 3)
    assert out["workbench_retrieval_viewpoint_map"] == pytest.approx(0.3)
    assert out["workbench_retrieval_illumination_map"] == pytest.approx(0.9)
    assert out["workbench_num_candidates"] == 12
    # the workbench's own retrieval counts: its positives, and every other keypoint of images 2..6 per query
    assert out["retrieval_num_true_positives"] == 4 and out["retrieval_num_hard_negatives"] == (3 + 2 + 2 + 1) - 4
    per_scene = verification_scene_values(rows, "step", "negative")
    np.testing.assert_array_equal(per_scene.workbench_verification_ap, [0.9, 0.6, 0.0, np.nan])
    np.testing.assert_array_equal(per_scene.workbench_retrieval_ap, [0.9, 0.6, 0.0, np.nan])
    plain = verification_summary(rows.drop(columns=[c for c in rows.columns if c.startswith("workbench")]), "step", "negative", 0.0)
    assert not any(k.startswith("workbench") for k in plain)


# ----------------------------------------------------------------------------- half with several positives


def test_half_tie_rule_with_several_positives_matches_placement():
    # a tie group of n = 5 items holding p = 2 positives after N = 3 items with P = 1 positive:
    # ceil(3 / 2) = 2 negatives first -> positives at ranks 3+2+1 = 6 and 7: (2/6 + 3/7)
    assert kernels._group_ap_sum(3, 3, 1, 5, 2) == pytest.approx(2 / 6 + 3 / 7)
    # one positive: the workbench's rank N + 1 + ceil((n-1)/2), unchanged
    assert kernels._group_ap_sum(3, 3, 0, 4, 1) == pytest.approx(1 / (3 + 1 + 2))
    assert kernels._first_hit_prob(3, 3, 5, 2, 6) == 1.0 and kernels._first_hit_prob(3, 3, 5, 2, 5) == 0.0
    assert kernels._group_recall_count(3, 3, 5, 2, 6) == 1.0 and kernels._group_recall_count(3, 3, 5, 2, 9) == 2.0


# ----------------------------------------------------------------------------- order-independent ground truth


def duplicate_scene():
    """One query whose projection lands on three duplicates (same position, different angles and
    descriptors) in image k, which is image 1 rotated by 90 degrees about (50, 50)."""
    H = np.array([[0.0, -1.0, 100.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # (x, y) -> (100 - y, x)
    q_xy = np.array([[30.0, 40.0]])  # -> (60, 30)
    q_angle, q_size = np.array([10.0]), np.array([8.0])  # projected angle 100, size 8
    t_xy = np.array([[60.0, 30.0], [60.0, 30.0], [60.0, 30.0], [20.0, 20.0], [80.0, 70.0]])
    t_angle = np.array([250.0, 100.5, 10.0, 0.0, 0.0])
    t_size = np.array([8.0, 8.0, 8.0, 8.0, 8.0])
    q_desc = np.array([[0.0, 0.0]], np.float32)
    # squared distances to the query: dup0 9, dup1 4, dup2 1, others 2 and 16
    t_desc = np.array([[3.0, 0.0], [2.0, 0.0], [1.0, 0.0], [1.0, 1.0], [4.0, 0.0]], np.float32)
    return q_xy, q_desc, (q_angle, q_size), t_xy, t_desc, (t_angle, t_size), H


def run(gt, perm, policy="expected"):
    q_xy, q_desc, qf, t_xy, t_desc, tf, H = duplicate_scene()
    res = score_pair(q_xy, q_desc, t_xy[perm], t_desc[perm], H, (100, 100), RetrievalParams(gt=gt, tie_policy=policy),
                     qf, (tf[0][perm], tf[1][perm]))
    return res, perm


def test_closest_depends_on_keypoint_order_and_the_new_modes_do_not():
    perms = [np.array(p) for p in itertools.permutations(range(5))]
    ap = {gt: {round(float(run(gt, p)[0].ap[0]), 12) for p in perms} for gt in ("closest", "closest_group", "closest_oriented")}
    # closest: the lowest-index duplicate is relevant, so its rank (1, 3 or 4) follows the order
    # (dup2 ranks 1; dup1 has dup2 and index 3 closer: 3; dup0 has those and dup1 closer: 4)
    assert ap["closest"] == {1.0, round(1 / 3, 12), round(1 / 4, 12)}
    # closest_group: the best-ranked duplicate (dup2, squared distance 1) ranks first
    assert ap["closest_group"] == {1.0}
    # closest_oriented: dup1 (angle 100.5 vs projected 100) is the one, at rank 3
    assert ap["closest_oriented"] == {round(1 / 3, 12)}
    for p in perms:
        res, _ = run("closest_oriented", p)
        assert p[res.gt_index[0]] == 1


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic", "half"])
def test_closest_group_ties_follow_the_tie_policy(policy):
    # dup2's distance tied with another candidate (index 3 gets dup2's descriptor) and with dup0:
    q_xy, q_desc, qf, t_xy, t_desc, tf, H = duplicate_scene()
    t_desc = t_desc.copy()
    t_desc[3] = t_desc[2]
    t_desc[0] = t_desc[2]  # two members and one non-member at squared distance 1: n = 3, g = 2, L = 0
    res = score_pair(q_xy, q_desc, t_xy, t_desc, H, (100, 100), RetrievalParams(gt="closest_group", tie_policy=policy), qf, tf)
    # orderings of {m, m, x}: first member at rank 1 (2/3 of orderings) or 2 (1/3)
    want = {"optimistic": 1.0, "pessimistic": 1 / 2, "half": 1 / 2, "expected": 2 / 3 * 1 + 1 / 3 * 1 / 2}[policy]
    assert res.ap[0] == pytest.approx(want)
    assert res.n_relevant[0] == 1 and res.n_closer[0] == 0 and res.n_tied[0] == 1
    assert res.hit[0, 0] == pytest.approx({"optimistic": 1.0, "pessimistic": 0.0, "half": 0.0, "expected": 2 / 3}[policy])


def test_new_modes_keep_closest_without_duplicates():
    rng = np.random.default_rng(5)
    q_xy = rng.uniform(10, 90, (30, 2))
    t_xy = np.concatenate([q_xy + rng.normal(0, 1, q_xy.shape), rng.uniform(0, 100, (20, 2))])
    qd = rng.standard_normal((30, 8)).astype(np.float32)
    td = rng.standard_normal((50, 8)).astype(np.float32)
    frames = (rng.uniform(0, 360, 30), rng.uniform(2, 9, 30)), (rng.uniform(0, 360, 50), rng.uniform(2, 9, 50))
    ref = score_pair(q_xy, qd, t_xy, td, np.eye(3), (100, 100), RetrievalParams(gt="closest"))
    for gt in ("closest_group", "closest_oriented"):
        res = score_pair(q_xy, qd, t_xy, td, np.eye(3), (100, 100), RetrievalParams(gt=gt), *frames)
        np.testing.assert_array_equal(res.gt_index, ref.gt_index)
        np.testing.assert_array_equal(np.isnan(res.ap), np.isnan(ref.ap))
        np.testing.assert_allclose(res.ap[~np.isnan(ref.ap)], ref.ap[~np.isnan(ref.ap)], rtol=0, atol=1e-15)


def test_closest_oriented_in_the_verification_tasks_is_order_free():
    q_xy, q_desc, qf, t_xy, t_desc, tf, H = duplicate_scene()
    out = set()
    for p in itertools.permutations(range(5)):
        p = np.array(p)
        t = Target(t_xy[p], t_desc[p], H, (100, 100), tf[0][p], tf[1][p])
        st = score_scene_tasks(q_xy, q_desc, [t], [], BojanicParams(gt="closest_oriented"), q_frame=qf)
        out.add((round(float(np.nansum(st.r_ap_negative)), 12), st.stats["verification_num_positives"]))
    assert out == {(round(1 / 3, 12), 0)}  # the nearest neighbour (dup2) is not the oriented ground truth (dup1)


# ----------------------------------------------------------------------------- configuration


def base():
    return {"keypoint_sets": {"sift": {"detector": "sift"}}, "descriptors": {"sift": {"family": "sift"}}}


def test_config_accepts_the_new_keys():
    cfg = validate_config(base(), SCHEMA)
    assert cfg["verification"]["convention"] == "descbench" and cfg["scoring"]["gt"] == "closest_oriented"
    c = base()
    c["verification"] = {"convention": "workbench"}
    c["scoring"] = {"tie_policy": "half"}  # allowed under the workbench convention
    assert validate_config(c, SCHEMA)["verification"]["convention"] == "workbench"
    for gt in ("closest_group", "closest_oriented"):
        c = base()
        c["scoring"] = {"gt": gt, "tie_policy": "half"}
        c["verification"] = {"enabled": False}
        assert validate_config(c, SCHEMA)["scoring"]["gt"] == gt


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda c: c.setdefault("verification", {}).update(convention="cpp"), "verification.convention"),
        (lambda c: c.setdefault("verification", {}).update(conventions="workbench"), "did you mean 'verification.convention'"),
        (lambda c: c.setdefault("scoring", {}).update(gt="closest_position"), "scoring.gt"),
        (lambda c: c.setdefault("scoring", {}).update(tie_policy="half"), "verification.convention: workbench"),
        (lambda c: c.setdefault("scoring", {}).update(tie_policy="half", gt="all_within_tau"), "scoring.gt 'closest'"),
    ],
)
def test_config_errors_name_the_key(mutate, needle):
    c = base()
    mutate(c)
    with pytest.raises(ConfigError) as exc:
        validate_config(c, SCHEMA)
    assert needle in str(exc.value)
