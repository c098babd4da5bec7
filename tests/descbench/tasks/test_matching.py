"""Matching as a scoring task (descbench.tasks.matching): the pairs schema against what
match_pair computes, the files of a real run, the summary from the per-pair counts by hand, and the
ROC averaging of its figure by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from descbench.tasks.matching import CLASSIFIER, ROC_POINTS, TASK, mean_roc, pairs_schema

from jobcli import SCENES


def test_pairs_schema_holds_exactly_what_match_pair_computes():
    from descbench.metrics.matching import MatchingParams, match_pair

    xy = np.array([[1.0, 1.0], [5.0, 5.0], [9.0, 2.0], [3.0, 8.0]])
    desc = np.eye(4, dtype=np.float32)
    st = match_pair(xy, desc, xy, desc, np.eye(3), (10, 10), (10, 10), MatchingParams(mma_thresholds=(1, 2.5)))
    s = pairs_schema([1, 2.5])
    assert s.names[:2] == ["scene", "pair"]
    assert set(s.names[2:]) == set(st)
    for k, v in st.items():
        assert s.field(k).type == (pa.int64() if isinstance(v, int) else pa.float64()), k


def test_the_files_are_exactly_the_declared_schemas(run):
    declared = TASK.schemas(run.cfg)
    assert declared["classifier.parquet"] == CLASSIFIER and declared["roc.parquet"] == ROC_POINTS
    for s in SCENES:
        for kind, want in declared.items():
            assert pq.read_schema(TASK.file(run.paths, "kp", "desc", s, kind)).remove_metadata().equals(want), (s, kind)


def test_the_summary_is_the_per_pair_counts_by_hand(run):
    """MMA at 3 px = the mean over image pairs (with keypoints in both images) of the share of
    mutual-NN matches within 3 px; the legacy mean precision likewise with tau_px."""
    files = {k: [TASK.file(run.paths, "kp", "desc", s, k) for s in SCENES] for k in TASK.kinds}
    p = pd.concat([pd.read_parquet(f) for f in files["pairs.parquet"]])
    p = p[(p.n_keypoints_1 > 0) & (p.n_keypoints_2 > 0)]
    assert len(p) == 10 and (p.n_matches > 0).all()
    s = TASK.summarize(files, run.cfg).values
    assert s["mma_at_3"] == pytest.approx((p.mma_correct_at_3 / p.n_matches).mean(), rel=1e-12)
    assert s["mean_precision"] == pytest.approx((p.n_correct / p.n_matches).mean(), rel=1e-12)


def test_mean_roc_is_the_vertical_average_of_step_curves():
    roc = pd.DataFrame({
        "scene": ["a"] * 3 + ["b"] * 3, "pair": [2] * 6, "point": [0, 1, 2] * 2,
        "fpr": [0.0, 0.5, 1.0, 0.0, 0.2, 1.0], "tpr": [0.0, 0.8, 1.0, 0.4, 0.6, 1.0],
    })
    got = mean_roc(roc, np.array([0.0, 0.1, 0.2, 0.5, 0.9, 1.0]))
    # a: 0, 0, 0, .8, .8, 1   b: .4, .4, .6, .6, .6, 1
    np.testing.assert_allclose(got, [0.2, 0.2, 0.3, 0.7, 0.7, 1.0])
    assert mean_roc(roc.iloc[:0], np.array([0.5])) is None
