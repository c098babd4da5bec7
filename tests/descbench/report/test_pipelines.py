"""descbench.report.pipelines: the pipelines table's Markdown columns (per estimator, the DLT without a
RANSAC threshold) and bit-identical files for the same inputs."""

from __future__ import annotations

import json

import pandas as pd

from descbench.report.pipelines import markdown_columns, write
from jobcli import features, ok


def test_markdown_columns_per_estimator():
    cfg = {"pipelines": {"estimators": {"dlt": {}, "usac_magsac": {"ransac_th": [1.0]}}}}
    cols = ["keypoint_set", "descriptor", "matcher", "mma_at_3", "dlt_auc_at_1", "dlt_ransac_th", "usac_magsac_auc_at_5",
            "usac_magsac_ransac_th", "usac_magsac_mean_corner_error"]
    assert markdown_columns(pd.DataFrame(columns=cols), cfg) == ["keypoint_set", "descriptor", "matcher", "mma_at_3", "dlt_auc_at_1",
                                                                 "usac_magsac_auc_at_5", "usac_magsac_ransac_th"]


def test_same_input_same_bytes(tmp_path):
    run = features(tmp_path)
    sections = {k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}
    run.cfg["matchers"] = {"s": {"matcher": "snn", "params": {"ratio": 0.8, "chunk_mb": 64}}}
    ok("match", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "s", "--spec", json.dumps(run.cfg["matchers"]["s"]))
    ok("score-pipelines", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "s",
       "--spec", json.dumps(run.cfg["matchers"]["s"]), "--sections", json.dumps(sections))
    a = write(run.paths, [("kp", "desc", "s")], run.cfg, tmp_path / "a", {}, plots_dir=tmp_path / "a" / "plots")
    write(run.paths, [("kp", "desc", "s")], run.cfg, tmp_path / "b", {}, plots_dir=tmp_path / "b" / "plots")
    for f in ("pipelines.parquet", "pipelines.csv", "pipelines.md", "plots/pipelines_corner_error.svg"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / "plots" / "pipelines_corner_error.png").stat().st_size > 10_000
    assert len(a) == 1 and a.matcher_type[0] == "snn" and 0 < a.ransac_auc_at_5[0] <= 1
