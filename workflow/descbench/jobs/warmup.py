"""The ``warmup`` job: every numba kernel compiled once (and cached on disk) before the parallel
scoring jobs use them."""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench.jobs.common import JobCommand


def add_commands(sub) -> dict:
    """The ``warmup`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("warmup", help="compile the numba kernels into the on-disk cache")
    p.add_argument("--out", type=Path, required=True)
    return {"warmup": JobCommand(run, pools=("numba",), pandas=False)}


def run(a: argparse.Namespace) -> None:
    warmup(a.out)


def warmup(out: Path) -> None:
    """Compile (and cache on disk) every numba kernel once, before parallel jobs use them."""
    import numpy as np

    from descbench.metrics import scenepass
    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
    from descbench.metrics.classifier import ClassifierParams, classify_pair
    from descbench.metrics.matching import MatchingParams, match_pair
    from descbench.metrics.retrieval import GT_MODES, RetrievalParams, score_pair

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (20, 2))
    real = rng.standard_normal((20, 8)).astype(np.float32)
    integer = rng.integers(0, 255, (20, 8)).astype(np.float32)  # SIFT-like: the exact-screen path
    binary = rng.integers(0, 255, (20, 4), dtype=np.uint8)
    frame = (rng.uniform(0, 360, 20).astype(np.float32), rng.uniform(1, 9, 20).astype(np.float32))  # angle, size
    for desc in (real, integer, binary):
        for gt in GT_MODES:
            score_pair(xy, desc, xy, desc, np.eye(3), (60, 60), RetrievalParams(gt=gt), frame, frame)
        t = Target(xy, desc, np.eye(3), (60, 60), *frame)
        dis = [Distractors("x", 1, np.arange(5), desc[:5])]
        for gt in GT_MODES:
            score_scene_tasks(xy, desc, [t, t], dis, BojanicParams(gt=gt), q_frame=frame)
        score_scene_tasks(xy, desc, [t, t], dis, BojanicParams(convention="workbench"), q_frame=frame)
        match_pair(xy, desc, xy, desc, np.eye(3), (60, 60), (60, 60))
        classify_pair(xy, desc, xy, desc, np.eye(3))
        # the scoring job's path: one screen per row block for every task (tiny blocks: several)
        for ver, gt in ((True, "closest"), (False, "closest"), (True, "closest_oriented")):
            scenepass.score_scene(xy, desc, [t, t], RetrievalParams(gt=gt), dis if ver else None, BojanicParams(gt=gt) if ver else None,
                                  (MatchingParams(), ClassifierParams(), ("threshold", "nn", "ratio", "mutual_nn")), (60, 60),
                                  chunk_mb=1e-4, q_frame=frame)
    from descbench import io

    io.write_text(out, "numba kernels compiled\n")
