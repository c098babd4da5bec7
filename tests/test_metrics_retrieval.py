"""Retrieval kernels against an independent brute-force float64 reference (full sort / enumeration)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from descbench.io import HIT_KS
from descbench.metrics.retrieval import RECALL_KS, RetrievalParams, pair_statistics, policy_rank, project, score_pair

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
