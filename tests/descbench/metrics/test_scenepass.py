"""The fused scene pass (one screen product per row block for retrieval, verification and
matching) equals the three separate computations value for value, and a float64 brute force."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from tests.descbench.metrics.test_bojanic import brute_force, random_scene, sqd
from tests.descbench.metrics.test_pairpass import assert_same_result, assert_same_stats

from descbench.metrics import pairpass, scenepass
from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
from descbench.metrics.classifier import MATCHERS, ClassifierParams
from descbench.metrics.matching import MatchingParams, evaluate_pair
from descbench.metrics.retrieval import RetrievalParams, score_pair

SIZE1 = (60, 50)


def same_array(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.dtype.kind == "f":
        assert np.array_equal(a, b, equal_nan=True), what
    else:
        assert np.array_equal(a, b), what


def scene_case(rng, kind, n_t=(10, 0, 14, 9, 11), n_dis=(5, 7, 0), nq=12):
    q_xy, q_desc, targets, distractors = random_scene(rng, nq=nq, n_t=n_t, n_dis=n_dis, dim=6, levels=3,
                                                      binary=kind == "binary")
    if kind == "real":  # not integer: the general (uncertified) path with float64 rechecks
        def jitter(d):
            return (d + rng.choice([0.0, 0.25, 1e-7], size=d.shape)).astype(np.float32)

        q_desc = jitter(q_desc)
        targets = [Target(t.xy, jitter(t.desc), t.H, t.size) for t in targets]
        distractors = [Distractors(d.scene, d.image, d.rows, jitter(d.desc)) for d in distractors]
    return q_xy, q_desc, targets, distractors


def run_both(q_xy, q_desc, targets, distractors, tasks, chunk_mb, gt="closest", matchers=MATCHERS):
    rp = RetrievalParams(tau_px=3.0, gt=gt, chunk_mb=chunk_mb)
    bp = BojanicParams(tau_px=3.0, gt=gt, chunk_mb=chunk_mb) if "verification" in tasks else None
    mm = (MatchingParams(chunk_mb=chunk_mb), ClassifierParams(epsilon_px=3.0, chunk_mb=chunk_mb), matchers) if "matching" in tasks else None
    fused = scenepass.score_scene(q_xy, q_desc, targets, rp, distractors if bp else None, bp, mm, SIZE1)
    sep_r = [score_pair(q_xy, q_desc, t.xy, t.desc, t.H, t.size, rp) for t in targets]
    sep_v = score_scene_tasks(q_xy, q_desc, targets, distractors, bp) if bp else None
    sep_m = [evaluate_pair(q_xy, q_desc, t.xy, t.desc, t.H, SIZE1, t.size, *mm) for t in targets] if mm else None
    return fused, sep_r, sep_v, sep_m


def assert_equal_to_separate(fused, sep_r, sep_v, sep_m):
    assert len(fused.retrieval) == len(sep_r)
    for a, b in zip(fused.retrieval, sep_r):
        for f in a.__dataclass_fields__:
            same_array(getattr(a, f), getattr(b, f), f"retrieval.{f}")
    if sep_v is None:
        assert fused.verification is None
    else:
        for f in sep_v.__dataclass_fields__:
            if f == "stats":
                assert_same_stats(fused.verification.stats, sep_v.stats)
            else:
                same_array(getattr(fused.verification, f), getattr(sep_v, f), f"verification.{f}")
    if sep_m is None:
        assert fused.matching is None
    else:
        for (s1, r1), (s2, r2) in zip(fused.matching, sep_m):
            assert_same_stats(s1, s2)
            assert_same_result(r1, r2)


def assert_retrieval_brute_force(q_desc, targets, results):
    """Closest-gt ranks from the float64 distances (sequential sums, the kernels' definition)."""
    for t, res in zip(targets, results):
        D = sqd(q_desc, t.desc) if len(t.desc) else np.zeros((len(q_desc), 0))
        for i in np.flatnonzero(res.n_relevant > 0):
            dj = D[i, res.gt_index[i]]
            assert res.n_closer[i] == int((D[i] < dj).sum())
            assert res.n_tied[i] == int((D[i] == dj).sum()) - 1


def mutual_count(q_desc, t_desc):
    if len(q_desc) == 0 or len(t_desc) == 0:
        return 0
    D = sqd(q_desc, t_desc)
    a = D.argmin(axis=1)  # lowest index on ties
    b = D.argmin(axis=0)
    return int((b[a] == np.arange(len(q_desc))).sum())


TASK_SETS = [("retrieval",), ("retrieval", "verification"), ("retrieval", "matching"), ("retrieval", "verification", "matching")]


@pytest.mark.parametrize("kind", ["integer", "real", "binary"])
@pytest.mark.parametrize("tasks", TASK_SETS)
def test_fused_pass_equals_separate_tasks_and_brute_force(kind, tasks):
    rng = np.random.default_rng(["integer", "real", "binary"].index(kind) * 10 + TASK_SETS.index(tasks))
    for trial in range(4):
        chunk = [0.0001, 0.0003, 64.0, 0.00002][trial]  # several row blocks (even one row), and one
        gt = "closest" if trial % 2 == 0 else "all_within_tau"
        q_xy, q_desc, targets, distractors = scene_case(rng, kind)
        fused, sep_r, sep_v, sep_m = run_both(q_xy, q_desc, targets, distractors, tasks, chunk, gt)
        assert_equal_to_separate(fused, sep_r, sep_v, sep_m)
        if gt == "closest":
            assert_retrieval_brute_force(q_desc, targets, fused.retrieval)
        assert any((r.n_tied > 0).any() for r in fused.retrieval) or kind == "real"  # ties really occur
        if sep_v is not None:
            bp = BojanicParams(tau_px=3.0, gt=gt)
            v_dist, v_label, ap_neg, ap_ign, _, _ = brute_force(q_xy, q_desc, targets, distractors, bp)
            np.testing.assert_array_equal(fused.verification.v_distance, v_dist)
            np.testing.assert_array_equal(fused.verification.v_label, v_label)
            np.testing.assert_allclose(fused.verification.r_ap_negative, ap_neg, rtol=0, atol=1e-12)
            np.testing.assert_allclose(fused.verification.r_ap_ignore, ap_ign, rtol=0, atol=1e-12)
        if sep_m is not None:
            for t, (stats, _) in zip(targets, fused.matching):
                assert stats["n_matches"] == mutual_count(q_desc, t.desc)


@pytest.mark.parametrize("shape", ["no_queries", "all_targets_empty", "one_query", "no_distractors", "one_candidate"])
def test_fused_pass_on_empty_images(shape):
    """Empty images, one query, no distractors, and a scene with a single candidate in all
    (one keypoint in image 2, no other keypoint, no distractor: its one column is still consumed
    by every task)."""
    rng = np.random.default_rng(3)
    n_t, n_dis, nq = (10, 0, 14, 9, 11), (5, 7, 0), 12
    if shape == "no_queries":
        nq = 0
    elif shape == "all_targets_empty":
        n_t = (0, 0, 0, 0, 0)
    elif shape == "one_query":
        nq = 1
    elif shape == "one_candidate":
        n_t, n_dis = (1, 0, 0, 0, 0), ()
    else:
        n_dis = ()
    q_xy, q_desc, targets, distractors = scene_case(rng, "integer", n_t=n_t, n_dis=n_dis, nq=nq)
    fused, sep_r, sep_v, sep_m = run_both(q_xy, q_desc, targets, distractors, TASK_SETS[-1], 0.0001)
    assert_equal_to_separate(fused, sep_r, sep_v, sep_m)


def test_retrieval_only_pass_uses_only_rows_with_a_relevant_item(monkeypatch):
    rng = np.random.default_rng(5)
    q_xy, q_desc, targets, distractors = scene_case(rng, "real", nq=30)
    counter = SceneProductCounter(monkeypatch)
    fused, sep_r, sep_v, sep_m = run_both(q_xy, q_desc, targets, distractors, ("retrieval",), 0.0002)
    assert_equal_to_separate(fused, sep_r, sep_v, sep_m)
    has_rel = np.zeros(30, bool)
    for r in fused.retrieval:
        has_rel |= r.n_relevant > 0
    assert 0 < has_rel.sum() < 30
    # the products were computed for exactly those rows (in blocks, each row once)
    used = np.concatenate([rows for _, rows in counter.products])
    np.testing.assert_array_equal(used, np.flatnonzero(has_rel))


class SceneProductCounter:
    """Records every product of the scene pass and every pairpass.screen_block call."""

    def __init__(self, monkeypatch):
        self.products, self.screen_blocks = [], 0
        orig_block, orig_screen = scenepass.block_product, pairpass.screen_block

        def block(qaug, caug, rows):
            self.products.append((caug.shape[0], rows.copy()))
            return orig_block(qaug, caug, rows)

        def screen(qaug, caug, r0, r1):
            self.screen_blocks += 1
            return orig_screen(qaug, caug, r0, r1)

        monkeypatch.setattr(scenepass, "block_product", block)
        monkeypatch.setattr(pairpass, "screen_block", screen)


@pytest.mark.parametrize("tasks", TASK_SETS[1:])
def test_one_product_per_row_block_for_the_whole_scene(monkeypatch, tasks):
    rng = np.random.default_rng(11)
    q_xy, q_desc, targets, distractors = scene_case(rng, "real", nq=40)
    chunk = 0.0005
    rp = RetrievalParams(gt="closest", tau_px=3.0, chunk_mb=chunk)
    bp = BojanicParams(gt="closest", tau_px=3.0, chunk_mb=chunk) if "verification" in tasks else None
    mm = (MatchingParams(chunk_mb=chunk), ClassifierParams(chunk_mb=chunk), MATCHERS) if "matching" in tasks else None
    counter = SceneProductCounter(monkeypatch)
    fused = scenepass.score_scene(q_xy, q_desc, targets, rp, distractors if bp else None, bp, mm, SIZE1)
    n = sum(len(t.desc) for t in targets) + (sum(len(d.desc) for d in distractors) if bp else 0)
    step = pairpass.block_rows(n, chunk)
    assert fused.n_products == len(counter.products) == math.ceil(40 / step) > 3
    # each row block once, against every candidate of the scene; no other product was made
    assert [c for c, _ in counter.products] == [n] * len(counter.products)
    np.testing.assert_array_equal(np.concatenate([r for _, r in counter.products]), np.arange(40))
    assert counter.screen_blocks == len(counter.products)


class Recorder:
    """A scene-pass consumer that keeps what it was fed (and can take its time doing so)."""

    def __init__(self, sleep_s: float = 0.0):
        self.calls, self.sleep_s = [], sleep_s

    def __call__(self, screen, rows, col0):
        self.calls.append((screen.copy(), rows.copy(), col0))
        if self.sleep_s:
            time.sleep(self.sleep_s)


def test_run_feeds_every_consumer_its_columns_and_checks_chunk_mb():
    """One candidate only (N = 1) is still fed; a consumer of no columns is never called; every
    consumer gets the block's whole screen [q, 1] . [c, -|c|^2/2] (C-contiguous, no copy of its
    columns) and where its columns start; chunk_mb must be > 0."""
    q = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, 0.0]], np.float32)
    c = np.array([[1.0, 1.0]], np.float32)
    full, empty = Recorder(), Recorder()
    scenepass.run(q, c, [scenepass.Feed(0, 1, full), scenepass.Feed(1, 1, empty)], 64.0)
    assert empty.calls == [] and len(full.calls) == 1
    screen, rows, col0 = full.calls[0]
    np.testing.assert_array_equal(rows, [0, 1, 2])
    assert col0 == 0
    np.testing.assert_array_equal(screen, (q @ c.T - (c * c).sum(axis=1) / 2).astype(np.float32))
    c3 = np.array([[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]], np.float32)
    seen = []
    scenepass.run(q, c3, [scenepass.Feed(1, 3, lambda screen, rows, col0: seen.append((screen, col0)))], 64.0)
    (screen, col0), = seen
    assert col0 == 1 and screen.shape == (3, 3) and screen.flags.c_contiguous
    np.testing.assert_array_equal(screen[:, 1:], (q @ c3[1:].T - (c3[1:] * c3[1:]).sum(axis=1) / 2).astype(np.float32))
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"chunk_mb must be > 0, got {bad}"):
            scenepass.run(q, c, [scenepass.Feed(0, 1, Recorder())], bad)


def test_run_times_products_and_consumers(monkeypatch):
    """PassTiming: the products' seconds summed over every row block, each label's consumers'
    seconds summed over their calls; all within the call's own wall time."""
    q = np.random.default_rng(0).random((40, 4)).astype(np.float32)
    c = np.random.default_rng(1).random((30, 4)).astype(np.float32)
    orig = scenepass.block_product

    def slow_product(qaug, caug, rows):
        time.sleep(0.005)
        return orig(qaug, caug, rows)

    monkeypatch.setattr(scenepass, "block_product", slow_product)
    a, b = Recorder(0.002), Recorder(0.002)
    t0 = time.perf_counter()
    timing = scenepass.run(q, c, [scenepass.Feed(0, 30, a, label="x"), scenepass.Feed(0, 10, b, label="y")], 0.0005)
    wall = time.perf_counter() - t0
    n = timing.n_products
    assert n == len(a.calls) == len(b.calls) > 3
    assert 0.005 * n <= timing.product_s <= wall
    assert 0.002 * n <= timing.consume_s["x"] <= wall and 0.002 * n <= timing.consume_s["y"] <= wall
    assert timing.product_s + timing.consume_s["x"] + timing.consume_s["y"] <= wall


def test_score_scene_seconds_are_shares_of_its_wall_time():
    """Each task's seconds (its own work plus a share of the products) are >= 0 and add up to at
    most the call's wall time."""
    rng = np.random.default_rng(21)
    q_xy, q_desc, targets, distractors = scene_case(rng, "real", nq=30)
    rp = RetrievalParams(tau_px=3.0, gt="closest", chunk_mb=0.0005)
    bp = BojanicParams(tau_px=3.0, gt="closest", chunk_mb=0.0005)
    mm = (MatchingParams(chunk_mb=0.0005), ClassifierParams(chunk_mb=0.0005), MATCHERS)
    t0 = time.perf_counter()
    res = scenepass.score_scene(q_xy, q_desc, targets, rp, distractors, bp, mm, SIZE1)
    wall = time.perf_counter() - t0
    assert set(res.seconds) == {"retrieval", "verification", "matching"}
    assert all(v > 0 for v in res.seconds.values()) and sum(res.seconds.values()) <= wall


def test_score_scene_names_the_scene_in_a_distractor_error():
    """A distractor set of another descriptor width: the error names the scene (``where``) and the set."""
    from descbench.errors import DataError

    rng = np.random.default_rng(4)
    q_xy, q_desc, targets, distractors = scene_case(rng, "integer")
    bad = Distractors("i_other", 2, np.array([0]), np.zeros((1, q_desc.shape[1] + 1), np.float32))
    with pytest.raises(DataError, match="v_where: distractor i_other/2 has"):
        scenepass.score_scene(q_xy, q_desc, targets, RetrievalParams(gt="closest"), [bad], BojanicParams(gt="closest"), None, SIZE1,
                              where="v_where")


class TickClock:
    """A clock that advances one second per call: every interval timed by two consecutive calls is 1 s."""

    def __init__(self):
        self.calls = 0

    def perf_counter(self):
        self.calls += 1
        return float(self.calls)


@pytest.mark.parametrize("tasks", TASK_SETS)
def test_score_scene_attributes_every_timed_interval_once(monkeypatch, tasks):
    """With a clock that ticks once per reading, every interval the scene pass times is 1 s; the
    tasks' seconds add up to exactly the number of intervals (each task's setup and finishing, each
    consumer call, and every product shared out among the tasks that fed on it): none dropped,
    none counted twice."""
    import types

    clock = TickClock()
    monkeypatch.setattr(scenepass, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    rng = np.random.default_rng(21)
    q_xy, q_desc, targets, distractors = scene_case(rng, "real", nq=30)
    fused, *_ = run_both(q_xy, q_desc, targets, distractors, tasks, 0.0005)
    assert fused.n_products > 3 and clock.calls % 2 == 0
    assert sum(fused.seconds.values()) == pytest.approx(clock.calls / 2, abs=1e-9)
    for name in ("retrieval", "verification", "matching"):
        assert (fused.seconds[name] >= 2) == (name in tasks)  # its setup and its finishing at least
        assert (fused.seconds[name] == 0) == (name not in tasks)


def test_score_scene_options_reach_the_pass():
    """``chunk_mb`` given to the call wins over the retrieval params' (more row blocks, the same
    results); a verification needs both its params and its distractors; the matchers asked for are
    the only ones scored; a scene without targets has no retrieval rows and no error; the default
    ``where`` of an error message is ``scene``."""
    from descbench.errors import DataError

    rng = np.random.default_rng(5)
    q_xy, q_desc, targets, distractors = scene_case(rng, "real", nq=30)
    rp = RetrievalParams(tau_px=3.0, gt="closest", chunk_mb=64)
    whole = scenepass.score_scene(q_xy, q_desc, targets, rp)
    blocks = scenepass.score_scene(q_xy, q_desc, targets, rp, chunk_mb=0.0005)
    assert whole.n_products == 1 and blocks.n_products > 3
    for a, b in zip(whole.retrieval, blocks.retrieval):
        for f in a.__dataclass_fields__:
            same_array(getattr(a, f), getattr(b, f), f)
    bp = BojanicParams(tau_px=3.0, gt="closest")
    assert scenepass.score_scene(q_xy, q_desc, targets, rp, distractors, None).verification is None
    assert scenepass.score_scene(q_xy, q_desc, targets, rp, None, bp).verification is None
    mm = (MatchingParams(), ClassifierParams(epsilon_px=3.0), ("nn", "ratio"))
    res = scenepass.score_scene(q_xy, q_desc, targets, rp, None, None, mm, SIZE1)
    assert all(tuple(result.curves) == ("nn", "ratio") for _, result in res.matching)
    empty = scenepass.score_scene(q_xy, q_desc, [], rp)
    assert empty.retrieval == [] and empty.n_products == 0
    bad = Distractors("i_other", 2, np.array([0]), np.zeros((1, q_desc.shape[1] + 1), np.float32))
    with pytest.raises(DataError, match="^scene: distractor i_other/2 has"):
        scenepass.score_scene(q_xy, q_desc, targets, rp, [bad], bp, None, SIZE1)


@pytest.mark.bad_input
def test_oriented_ground_truth_without_target_angles_is_refused_as_by_score_pair():
    """``gt: closest_oriented`` needs every target's angles and sizes: a target without them
    (``angle`` None) is refused as :func:`score_pair` refuses it, not given an empty frame."""
    rng = np.random.default_rng(6)
    q_xy, q_desc, targets, _ = scene_case(rng, "real", nq=10)
    q_frame = (rng.uniform(0, 360, 10), rng.uniform(2, 10, 10))
    rp = RetrievalParams(tau_px=3.0, gt="closest_oriented")
    t = targets[0]
    with pytest.raises(ValueError, match="needs the angles and sizes of the keypoints of") as want:
        score_pair(q_xy, q_desc, t.xy, t.desc, t.H, t.size, rp, q_frame, None)
    with pytest.raises(ValueError) as got:
        scenepass.score_scene(q_xy, q_desc, [t], rp, q_frame=q_frame)
    assert str(got.value) == str(want.value)
