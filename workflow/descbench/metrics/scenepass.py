"""One float32 screen product per block of image-1 rows, shared by every task of a scene.

Keypoint retrieval (:class:`descbench.metrics.retrieval.RankCounts`, one per pair 1-k),
verification (:class:`descbench.metrics.bojanic.SegmentStats`, over images 2..6 and the
distractors) and matching (:class:`descbench.metrics.pairpass.PairPass`, one per pair 1-k) all
read the same values ``g_ij = fl32([q_i, 1] . [c_j, -|c_j|^2/2])`` of image 1's descriptors against
image k's. Here the candidates of the whole scene are concatenated, ``C = [c_2; ...; c_6;
distractors]``, and for each block of query rows ONE BLAS product ``[Q_block, 1] . C_aug^T`` is
made; each consumer then reads its own column slice of that block in place (no copy).

Why the results are unchanged (bit for bit): every consumer decides from the screen only where
its own per-query tolerance proves the decision, and evaluates the exact float64 (or integer) key
otherwise. Each tolerance bounds the error of the screen value ``g_ij`` for ANY summation order
of its D + 1 products, from |q_i| and max |c| over the consumer's own candidates (which include
column j), and ``g_ij`` depends only on q_i and c_j: the same bound holds when the value comes
from a product over a wider candidate matrix or another row block. The exact-screen certificate
of :mod:`descbench.metrics.pairpass` (integer descriptors, bounded partial sums) holds for the
same reason. The consumers' outputs are exact definitions (counts, nearest neighbours with
lowest-index ties, exact keys), so they equal those of their own products.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from descbench.metrics import pairpass


@dataclass
class Feed:
    """A consumer of the scene's screen: its candidate columns ``col0 .. col1 - 1`` of the
    concatenated matrix, ``consume(screen, rows, col0)`` (screen C-contiguous float32
    [len(rows), N] over every candidate of the scene, the consumer's columns from ``col0``; rows
    int64 ascending query indices), the query rows it needs (None: every row, consecutive blocks
    guaranteed; else a bool mask) and a label for timing."""

    col0: int
    col1: int
    consume: Callable[[np.ndarray, np.ndarray, int], None]
    rows: np.ndarray | None = None
    label: str = ""


@dataclass
class PassTiming:
    """Seconds spent in the products and in each label's consumers (for the tasks' timing files)."""

    product_s: float = 0.0
    consume_s: dict = field(default_factory=dict)
    n_products: int = 0


def block_product(qaug: np.ndarray, caug: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The screen of query rows ``rows`` against every candidate: the scene pass's only product
    (tests count the calls). Consecutive rows use :func:`descbench.metrics.pairpass.screen_block`
    (a view of qaug, no copy)."""
    r0, r1 = int(rows[0]), int(rows[-1]) + 1
    if r1 - r0 == rows.shape[0]:
        return pairpass.screen_block(qaug, caug, r0, r1)
    return qaug[rows] @ caug.T


def augment(q: np.ndarray, c: np.ndarray):
    """``([q, 1], [c, -|c|^2/2])`` in float32, with |c|^2 in float64 exactly as every consumer
    builds its own (:func:`descbench.metrics.retrieval.augment_l2`)."""
    from descbench.metrics.retrieval import augment_l2

    _, _, qaug, caug, _ = augment_l2(q, c)
    return qaug, caug


def run(q_desc: np.ndarray, cands: np.ndarray, feeds: list[Feed], chunk_mb: float) -> PassTiming:
    """Feed every consumer every query row it needs, with ONE product per row block.

    ``cands``: the concatenated candidates (float32 [N, D]); row blocks hold at most ``chunk_mb``
    MiB of screen over all N columns, which every feed reads in place. Query rows are all rows if
    any feed needs them all, else the union of the feeds' masks.
    """
    if not chunk_mb > 0:
        raise ValueError(f"chunk_mb must be > 0, got {chunk_mb}")
    timing = PassTiming()
    feeds = [f for f in feeds if f.col1 > f.col0]
    nq, n = q_desc.shape[0], cands.shape[0]
    if not feeds or nq == 0 or n == 0:
        return timing
    if any(f.rows is None for f in feeds):
        rows_all = np.arange(nq, dtype=np.int64)
    else:
        mask = np.zeros(nq, dtype=bool)
        for f in feeds:
            mask |= f.rows
        rows_all = np.flatnonzero(mask).astype(np.int64)
    qaug, caug = augment(q_desc, cands)
    step = pairpass.block_rows(n, chunk_mb)
    for s in range(0, rows_all.shape[0], step):
        rows = rows_all[s : s + step]
        t = time.perf_counter()
        screen = block_product(qaug, caug, rows)
        timing.product_s += time.perf_counter() - t
        timing.n_products += 1
        for f in feeds:
            t = time.perf_counter()
            f.consume(screen, rows, f.col0)
            timing.consume_s[f.label] = timing.consume_s.get(f.label, 0.0) + time.perf_counter() - t
    return timing


@dataclass
class SceneResults:
    """The tasks' results of one scene (None: task disabled) and each task's share of the time in
    seconds (its own setup, consumers and finishing, plus an equal share of the products)."""

    retrieval: list | None  # PairResult per target image
    verification: object | None  # SceneTaskResult
    matching: list | None  # (stats, ClassifierResult) per target image
    seconds: dict
    n_products: int = 0


def score_scene(q_xy, q_desc, targets: list, rparams, distractors: list | None = None, bparams=None,
                matching: tuple | None = None, image1_size=None, chunk_mb: float | None = None,
                where: str = "scene", q_frame=None) -> SceneResults:
    """Every task of one scene from ONE screen product per block of image-1 rows.

    ``targets``: :class:`descbench.metrics.bojanic.Target` of images 2..6; keypoint retrieval
    (``rparams``, :class:`descbench.metrics.retrieval.RetrievalParams`) always; verification
    when ``bparams`` (:class:`descbench.metrics.bojanic.BojanicParams`) and ``distractors`` are
    given; matching when ``matching = (MatchingParams, ClassifierParams, matchers)`` (with
    ``image1_size``). The results equal, value for value, :func:`descbench.metrics.retrieval.
    score_pair` per target, :func:`descbench.metrics.bojanic.score_scene_tasks` and
    :func:`descbench.metrics.matching.evaluate_pair` per target (module docstring). The row
    blocks hold at most ``chunk_mb`` (default ``rparams.chunk_mb``) MiB of screen over all the
    scene's candidates. Binary descriptors need no screen (their consumers finish at setup).
    ``q_frame``: ``(angle, size)`` of image 1's keypoints, with the targets' ``angle`` /
    ``kp_size``, for ``gt: closest_oriented``.
    """
    from descbench.metrics.bojanic import SceneTasks
    from descbench.metrics.matching import PairEvaluation
    from descbench.metrics.retrieval import PairScoring

    chunk_mb = float(rparams.chunk_mb if chunk_mb is None else chunk_mb)
    start = np.concatenate([[0], np.cumsum([t.desc.shape[0] for t in targets])]).astype(np.int64)
    secs = {"retrieval": 0.0, "verification": 0.0, "matching": 0.0}
    feeds = []
    t = time.perf_counter()
    scorers = []
    for i, tg in enumerate(targets):
        t_frame = None if tg.angle is None else (tg.angle, tg.kp_size)
        ps = PairScoring(q_xy, q_desc, tg.xy, tg.desc, tg.H, tg.size, rparams, q_frame, t_frame)
        scorers.append(ps)
        if ps.ranks.needs_screen:  # only the rows with a relevant item
            feeds.append(Feed(int(start[i]), int(start[i + 1]), ps.ranks.consume, np.diff(ps.indptr) > 0, "retrieval"))
    secs["retrieval"] += time.perf_counter() - t
    tasks = None
    if bparams is not None and distractors is not None:
        t = time.perf_counter()
        tasks = SceneTasks(q_xy, q_desc, targets, list(distractors), bparams, where=where, q_frame=q_frame)
        if tasks.segments.needs_screen:  # its candidates [images 2..6, distractors] are the pass's columns
            feeds.append(Feed(0, int(tasks.cands.shape[0]), lambda screen, rows, col0: tasks.segments.consume(screen, rows),
                              None, "verification"))
        secs["verification"] += time.perf_counter() - t
    evals = None
    if matching is not None:
        t = time.perf_counter()
        mparams, cparams, matchers = matching
        evals = []
        for i, tg in enumerate(targets):
            ev = PairEvaluation(q_xy, q_desc, tg.xy, tg.desc, tg.H, image1_size, tg.size, mparams, cparams, matchers)
            evals.append(ev)
            pp = ev.pass_
            if pp is not None and pp.needs_screen:
                # PairPass reads consecutive rows from r0: a feed with rows=None makes every block consecutive
                feeds.append(Feed(int(start[i]), int(start[i + 1]),
                                  lambda screen, rows, col0, pp=pp: pp.consume(screen, int(rows[0]), col0), None, "matching"))
        secs["matching"] += time.perf_counter() - t
    if tasks is not None:
        cands = tasks.cands
    else:
        cands = np.concatenate([tg.desc for tg in targets]) if targets else np.asarray(q_desc)[:0]
    timing = run(q_desc, cands, feeds, chunk_mb)
    users = {f.label for f in feeds}
    for label in users:
        secs[label] += timing.consume_s.get(label, 0.0) + timing.product_s / len(users)
    t = time.perf_counter()
    retrieval = [ps.finish() for ps in scorers]
    secs["retrieval"] += time.perf_counter() - t
    ver = mat = None
    if tasks is not None:
        t = time.perf_counter()
        ver = tasks.finish()
        secs["verification"] += time.perf_counter() - t
    if evals is not None:
        t = time.perf_counter()
        mat = [ev.finish() for ev in evals]
        secs["matching"] += time.perf_counter() - t
    return SceneResults(retrieval, ver, mat, secs, timing.n_products)
