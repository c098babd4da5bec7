"""End to end: the matcher stage and the pipelines task on the demo (two scenes). The mnn pipeline's
matching columns equal the comparison table's (one definition, two routes); the pipelines table
has one row per (keypoint set, descriptor, matcher); a change of the estimators reruns the pipelines
jobs and their table only (the matches are reused), a new matcher only its own jobs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from descbench.jobtiming import read_timing
from smkrun import job_counts, snakemake, write_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipelines")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["matchers"] = {"mnn": {"matcher": "mnn"}, "ratio": {"matcher": "nn", "params": {"ratio": 0.8}, "descriptors": ["sift"]}}
    cfg["pipelines"] = {"estimators": {"dlt": {}, "ransac": {"ransac_th": [1.0, 3.0]}}}
    write_config(work, cfg)
    out = snakemake(work, "--cores", "2")
    return work, cfg, out


def test_one_row_per_pipeline_and_mnn_equals_the_comparison_table(run):
    work, cfg, out = run
    report = work / "results" / "demo" / "report"
    t = pd.read_parquet(report / "pipelines.parquet")
    assert list(zip(t.keypoint_set, t.descriptor, t.matcher)) == [("sift", "sift", "mnn"), ("sift", "rootsift", "mnn"),
                                                                  ("sift", "sift", "ratio")]
    comp = pd.read_parquet(report / "comparison.parquet").set_index("descriptor")
    for _, r in t[t.matcher == "mnn"].iterrows():
        for c in ("mean_precision", "mma_at_3", "matching_score", "mean_matches", "true_map_micro"):
            assert r[c] == comp.loc[r.descriptor, c], c
    assert np.all((t.ransac_auc_at_5 > 0.5) & (t.ransac_auc_at_5 <= 1)) and set(t.ransac_ransac_th) <= {1.0, 3.0}
    assert (report / "pipelines.md").read_text().count("| sift |") == 3
    assert (report / "plots" / "pipelines_corner_error.png").stat().st_size > 10_000
    assert "pipelines          " in out  # the end of the run names the table


def test_the_matcher_stage_and_pipelines_jobs_record_their_times(run):
    """As the keypoint, descriptor and scoring jobs: each log's last line has the job's wall and CPU
    time (what benchmarks/bench_workflow.py reads), and the match and score_pipelines jobs leave
    job_timing.json in their batch folders; the report job has its log line."""
    work, _, _ = run
    res = work / "results" / "demo"
    logs = [res / "logs" / "match" / "sift" / "rootsift" / "mnn" / "batch000.log",
            res / "logs" / "pipelines" / "sift" / "sift" / "ratio" / "batch000.log", res / "logs" / "pipelines_report.log"]
    for log, cmd in zip(logs, ("match", "score-pipelines", "pipelines-report")):
        last = log.read_text().splitlines()[-1]
        assert re.fullmatch(rf"descbench: {cmd} done in [0-9.]+ s wall, [0-9.]+ s CPU, max RSS [0-9]+ MiB", last), last
    for stage in ("matches", "pipelines"):
        for d, m in (("sift", "mnn"), ("rootsift", "mnn"), ("sift", "ratio")):
            r = read_timing(res / stage / "sift" / d / m / "batch000" / "job_timing.json")
            assert (r["stage"], r["descriptor"], r["matcher"], r["scenes"]) == (stage, d, m, ["i_rocket", "v_coins"])


def test_estimator_change_reruns_only_the_pipelines(run):
    work, cfg, _ = run
    cfg2 = {**cfg, "pipelines": {"estimators": {"dlt": {}, "usac_magsac": {"ransac_th": [1.0]}}}}
    write_config(work, cfg2)
    counts = job_counts(snakemake(work, "-n"))
    assert counts.get("score_pipelines") == 3 and counts.get("pipelines_report") == 1
    assert "match" not in counts and "score" not in counts and "descriptors" not in counts
    cfg3 = {**cfg, "matchers": {**cfg["matchers"], "smnn": {"matcher": "smnn", "descriptors": ["rootsift"]}}}
    write_config(work, cfg3)
    counts = job_counts(snakemake(work, "-n"))
    assert counts.get("match") == 1 and counts.get("score_pipelines") == 1 and "score" not in counts
    write_config(work, cfg)
