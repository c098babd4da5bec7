"""Keypoint retrieval as a scoring task (descbench.tasks.retrieval): its files are exactly its
schemas, and its summary equals what the per-query rows say, recomputed here by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from descbench.tasks.retrieval import PAIRS, QUERIES, TASK, query_aps

from jobcli import SCENES


def files_of(run):
    return {k: [TASK.file(run.paths, "kp", "desc", s, k) for s in SCENES] for k in TASK.kinds}


def test_the_files_are_exactly_the_declared_schemas(run):
    declared = TASK.schemas(run.cfg)
    assert declared == {"queries.parquet": QUERIES, "pairs.parquet": PAIRS}
    for kind, paths in files_of(run).items():
        for p in paths:
            assert p.exists()
            if kind in declared:
                assert pq.read_schema(p).remove_metadata().equals(declared[kind]), p


def test_the_summary_is_the_per_query_rows_by_hand(run):
    """true mAP (micro) = the mean AP of the queries with a relevant keypoint; precision at k under
    the default tie policy ``expected`` = the mean over those queries of min(1, max(0, (k - L) / (t + 1)))
    with L keypoints strictly closer than the first relevant one and t tied with it."""
    assert run.cfg["scoring"]["tie_policy"] == "expected"
    files = files_of(run)
    q = pd.concat([pd.read_parquet(p) for p in files["queries.parquet"]])
    rel = q[q.n_relevant > 0]
    s = TASK.summarize(files, run.cfg)
    assert len(rel) > 100
    assert s.values["true_map_micro"] == pytest.approx(rel.ap.mean(), rel=1e-12)
    for k in (1, 5, 10):
        hit = np.clip((k - rel.n_closer.to_numpy(float)) / (rel.n_tied.to_numpy(float) + 1), 0, 1)
        assert s.values[f"precision_at_{k}"] == pytest.approx(hit.mean(), rel=1e-12), k
    # per scene: one row each, the scene's own mean AP
    assert s.scenes.scene.tolist() == SCENES
    for scene, row in s.scenes.set_index("scene").iterrows():
        assert row.true_map == pytest.approx(rel[rel.scene == scene].ap.mean(), rel=1e-12)
    # the two-stage interval reads the same APs, per scene
    aps = query_aps(files["queries.parquet"])
    assert [len(a) for a in aps] == [int((rel.scene == s).sum()) for s in SCENES]


def test_every_pair_has_one_row_per_query_keypoint_in_order(run):
    """HPatches' pairs (1, k): per scene, the rows of pair k are image 1's keypoints in order, for
    k = 2..6, and the pairs file has one row per pair."""
    from pathlib import Path

    from descbench.jobs.common import load_keypoints

    for s in SCENES:
        q = pd.read_parquet(TASK.file(run.paths, "kp", "desc", s, "queries.parquet"))
        pairs = pd.read_parquet(TASK.file(run.paths, "kp", "desc", s, "pairs.parquet"))
        per_image, _ = load_keypoints(Path(run.paths.keypoints("kp", s)))
        n1 = len(per_image[1])
        assert pairs.pair.tolist() == [2, 3, 4, 5, 6] and (pairs.n_query_keypoints == n1).all()
        for k, g in q.groupby("pair", sort=True):
            assert g["query"].tolist() == list(range(n1)), (s, k)
        assert sorted(q.pair.unique()) == [2, 3, 4, 5, 6]
