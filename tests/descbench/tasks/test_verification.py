"""Keypoint verification as a scoring task (descbench.tasks.verification): its scene schema, the
pooling of several query images' lists, the refusal of statistics that have no pooling, and the
files of a real run against the declared schemas."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from descbench.errors import ConfigError
from descbench.metrics.bojanic import verification_ap
from descbench.tasks.verification import (
    KEYPOINT_RETRIEVAL, TASK, VERIFICATION_LIST, WORKBENCH_SCENE_FIELDS, check_groups, pooled_scene_stats, scene_schema,
)

from jobcli import SCENES


def test_scene_schema_columns_and_workbench_extension():
    base = scene_schema(["verification_ap_x", "verification_ap_y"])
    assert base.names[:7] == ["scene", "n_queries", "n_target_keypoints", "n_distractor_scenes", "n_distractors",
                              "verification_num_positives", "verification_num_negatives"]
    assert base.names[7:9] == ["verification_ap_x", "verification_ap_y"]
    assert base.field("verification_ap_y").type == pa.float64()
    assert not any(n.startswith("workbench_") for n in base.names)
    wb = scene_schema(["verification_ap_x", "verification_ap_y"], workbench=True)
    assert wb.names == base.names + [n for n, _ in WORKBENCH_SCENE_FIELDS]
    for n, t in WORKBENCH_SCENE_FIELDS:
        assert wb.field(n).type == t
    assert scene_schema(["verification_ap_x", "verification_ap_y"], False) == base


def test_the_files_are_exactly_the_declared_schemas(run):
    declared = TASK.schemas(run.cfg)
    assert declared["list.parquet"] == VERIFICATION_LIST and declared["queries.parquet"] == KEYPOINT_RETRIEVAL
    for s in SCENES:
        for kind, want in declared.items():
            assert pq.read_schema(TASK.file(run.paths, "kp", "desc", s, kind)).remove_metadata().equals(want), (s, kind)


COUNTS = ("n_queries", "n_target_keypoints", "verification_num_positives", "verification_num_negatives",
          "retrieval_n_queries_with_positive", "retrieval_sum_ap_negative", "retrieval_sum_ap_ignore",
          "retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors")


def test_several_query_images_pool_into_one_list():
    """The scene's AP is the AP of the query images' lists one after the other; counts add up; the
    distractor draw is counted once."""
    rng = np.random.default_rng(3)
    results = []
    for i in range(2):
        d = rng.random(7)
        lab = np.where(rng.random(7) < 0.4, 1, -1).astype(np.int8)
        stats = {k: float(rng.integers(1, 9)) for k in COUNTS} | {"n_distractor_scenes": 4, "n_distractors": 40}
        results.append(SimpleNamespace(v_distance=d, v_label=lab, stats=stats))
    got = pooled_scene_stats(results, 25)
    want = verification_ap(np.concatenate([r.v_distance for r in results]), np.concatenate([r.v_label for r in results]), 25)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-15), k
    for k in COUNTS:
        assert got[k] == results[0].stats[k] + results[1].stats[k], k
    assert (got["n_distractor_scenes"], got["n_distractors"]) == (4, 40)


@pytest.mark.bad_input
def test_statistics_without_pooling_refuse_several_query_images():
    groups = [(2, []), (3, [])]
    ok = {"candidates": "nearest", "convention": "descbench"}
    check_groups("s", groups, ok)
    check_groups("s", groups[:1], {"candidates": "all", "convention": "workbench"})  # one query image: defined
    for bad in ({"candidates": "all"}, {"convention": "workbench"}):
        with pytest.raises(ConfigError, match=rf"scene s: its pairs have 2 query images \(2, 3\), and verification\."
                                              rf"{next(iter(bad))}: {next(iter(bad.values()))} is defined for one query image"):
            check_groups("s", groups, {**ok, **bad})
