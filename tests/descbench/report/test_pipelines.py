"""descbench.report.pipelines: the pipelines table's Markdown columns (per estimator, the DLT without a
RANSAC threshold) and bit-identical files for the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_each_pipeline_file_is_read_once_for_the_table_and_the_figure(tmp_path, monkeypatch):
    """The figure's corner errors come from the estimates rows the table's row was made from: each
    per-scene file is read once, whatever the number of estimators (here two)."""
    from collections import Counter

    from descbench import io

    run = features(tmp_path)
    sections = {k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}
    assert len(run.cfg["pipelines"]["estimators"]) == 2
    run.cfg["matchers"] = {"s": {"matcher": "mnn", "params": {}}}
    ok("match", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "s", "--spec", json.dumps(run.cfg["matchers"]["s"]))
    ok("score-pipelines", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "s",
       "--spec", json.dumps(run.cfg["matchers"]["s"]), "--sections", json.dumps(sections))
    reads, read_table = Counter(), io.read_table
    monkeypatch.setattr(io, "read_table", lambda path, *a, **k: reads.update([Path(path).name]) or read_table(path, *a, **k))
    write(run.paths, [("kp", "desc", "s")], run.cfg, tmp_path / "out", {}, plots_dir=tmp_path / "out" / "plots")
    assert (tmp_path / "out" / "plots" / "pipelines_corner_error.svg").exists()
    assert reads == Counter({f"{s}.{k}": 1 for s in run.batches["batch000"] for k in ("pairs.parquet", "estimates.parquet")})


def test_the_estimator_settings_are_filled_once_for_every_pipeline(tmp_path, monkeypatch):
    from descbench.estimators import homography

    run = features(tmp_path)
    sections = {k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}
    run.cfg["matchers"] = {"s": {"matcher": "mnn", "params": {}}, "r": {"matcher": "nn", "params": {"ratio": 0.8}}}
    for name, spec in run.cfg["matchers"].items():
        ok("match", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", name, "--spec", json.dumps(spec))
        ok("score-pipelines", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", name,
           "--spec", json.dumps(spec), "--sections", json.dumps(sections))
    calls, check = [], homography.check_estimator
    monkeypatch.setattr(homography, "check_estimator", lambda name, *a, **k: calls.append(name) or check(name, *a, **k))
    t = write(run.paths, [("kp", "desc", "s"), ("kp", "desc", "r")], run.cfg, tmp_path / "out", {})
    assert calls == list(run.cfg["pipelines"]["estimators"]) and len(t) == 2
