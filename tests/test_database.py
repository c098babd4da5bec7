"""The SQLite results database: the seed's table and query, NULL for no data, idempotent rebuild."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from descbench.report.database import SEED_COLUMNS, build_database, git_commit


@pytest.fixture
def report_dir(tmp_path):
    d = tmp_path / "report"
    d.mkdir()
    pd.DataFrame({
        "descriptor": ["sift", "orb"], "keypoint_set": ["s", "s"], "true_map_micro": [0.8, np.nan],
        "true_map_macro_by_scene": [0.75, np.nan], "viewpoint_map": [0.7, np.nan], "illumination_map": [0.9, np.nan],
        "keypoint_verification_ap": [0.6, 0.5], "keypoint_retrieval_ap": [0.4, 0.3], "precision_at_1": [0.7, 0.1],
        "precision_at_5": [0.8, 0.2], "mean_precision": [0.66, 0.0], "processing_time_ms": [12.0, 8.0],
        "metadata": ["true_map_micro=0.8000;", "true_map_micro=nan;"], "mma_at_3": [0.5, 0.0],
    }).to_csv(d / "comparison.csv", index=False)
    pd.DataFrame({"keypoint_set": ["s"], "kind": ["detector"], "keypoints_total": [100], "inputs_sha256": ["ab" * 32]}).to_csv(
        d / "keypoint_stats.csv", index=False)
    pd.DataFrame({"keypoint_set": ["s"], "metric": ["true_map_micro"], "descriptor_a": ["sift"], "descriptor_b": ["orb"],
                  "difference": [np.nan], "p_value": [np.nan]}).to_csv(d / "significance.csv", index=False)
    return d


EXPERIMENT = {"name": "demo", "dataset": "demo", "config": {"dataset": "demo"}, "versions": {"numpy": "2"},
              "git_commit": "abc", "n_scenes": 8}


def test_seed_table_and_query(report_dir, tmp_path):
    db = tmp_path / "r.sqlite"
    build_database(db, report_dir, EXPERIMENT)
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(results)")]
    assert cols[:len(SEED_COLUMNS)] == SEED_COLUMNS and {"descriptor", "keypoint_set", "mma_at_3"} <= set(cols)
    # the seed's kind of query, from sqlite3
    rows = con.execute("SELECT descriptor, true_map_micro, true_map_macro, mean_average_precision, metadata FROM results "
                       "ORDER BY true_map_micro DESC").fetchall()
    assert rows[0] == ("sift", 0.8, 0.75, 0.66, "true_map_micro=0.8000;")
    assert rows[1][1] is None  # NaN (no data) is NULL, not 0
    exp = con.execute("SELECT name, git_commit, inputs_sha256, n_scenes FROM experiments").fetchone()
    assert exp == ("demo", "abc", "ab" * 32, 8)
    con.close()
    # and from pandas
    df = pd.read_sql("SELECT r.descriptor, k.keypoints_total FROM results r JOIN keypoint_sets k USING (experiment_id, keypoint_set)",
                     sqlite3.connect(db))
    assert df.keypoints_total.tolist() == [100, 100]


def test_rebuild_is_idempotent(report_dir, tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    build_database(a, report_dir, EXPERIMENT)
    build_database(a, report_dir, EXPERIMENT)  # over an existing file
    build_database(b, report_dir, EXPERIMENT)
    dump = lambda p: "\n".join(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(a) == dump(b)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary left


def test_git_commit_outside_git(tmp_path):
    assert git_commit(tmp_path) == "unknown"
