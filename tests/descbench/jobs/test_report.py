"""descbench.jobs.report: ``report``, ``plots``, ``database`` and ``compare`` on a tiny scored run;
the report-stage commands find the result files through ResultPaths (jobs.common.run_paths)."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from descbench.jobs import report as jobs_report
from descbench.jobs.common import run_paths
from descbench.paths import JOB_TIMING
from descbench.report.summary import run_summary
from jobcli import ROOT, SCENES, ok, scored


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return scored(tmp_path_factory.mktemp("run"))


def run_args(run) -> list:
    return ["--results-root", run.root, "--combos", json.dumps([["kp", "desc"]]), "--scenes", json.dumps(SCENES),
            "--config", json.dumps(run.cfg)]


def test_run_paths_are_the_jobs_batches():
    cfg = {"execution": {"scenes_per_job": 1}}
    a = argparse.Namespace(results_root=Path("r"), scenes=json.dumps(SCENES), config=json.dumps(cfg))
    paths, got_cfg, scenes = run_paths(a)
    assert paths.batches == {"batch000": ["i_rocket"], "batch001": ["v_coins"]} and got_cfg == cfg and scenes == SCENES
    assert paths.keypoints("kp", "v_coins") == str(Path("r") / "keypoints" / "kp" / "batch001" / "v_coins.parquet")


def test_report_plots_database_compare(run, tmp_path, capsys):
    report = run.root / "report"
    # the report reads the keypoint statistics its workflow job gets as an input
    ok("keypoint-stats", "--results-root", run.root, "--scene-root", run.scene_root, "--batches", json.dumps(run.batches),
       "--keypoint-sets", json.dumps([["kp", run.cfg["keypoint_sets"]["kp"]]]), "--repeatability-px", 3, "--out-dir", report)
    ok("report", *run_args(run), "--provenance", "{}", "--out-dir", report)
    table = pd.read_parquet(report / "comparison.parquet")
    assert list(table["descriptor"]) == ["desc"] and "desc" in capsys.readouterr().out

    ok("plots", *run_args(run), "--report-dir", report, "--out-dir", tmp_path / "figures")
    assert list((tmp_path / "figures").glob("*.png")) and list((tmp_path / "figures").glob("*.svg"))

    ok("database", "--report-dir", report, "--name", "tiny", "--config", json.dumps(run.cfg), "--n-scenes", len(SCENES),
       "--workflow-dir", ROOT, "--out", tmp_path / "results.sqlite")
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("select count(*) from sqlite_master where type = 'table'").fetchone()[0] > 0
        # every job's timing file, added up (descbench.report.timings), and the workbench's timing columns
        t = pd.read_sql("select * from timings", db)
        r = db.execute("select descriptor_time_cpu_ms, descriptor_time_gpu_ms, match_time_cpu_ms, total_pipeline_cpu_ms "
                       "from results").fetchone()
    assert t.n_jobs.tolist() == [3] and (t[["keypoints_wall_ms", "descriptors_wall_ms", "scoring_wall_ms"]] > 0).all(axis=None)
    assert r == (t.descriptors_wall_ms[0], None, t.scoring_wall_ms[0], pytest.approx(t.total_wall_ms[0]))
    assert pd.read_csv(report / "timings.csv").descriptor.tolist() == ["desc"]

    capsys.readouterr()
    ok("compare", run.root)
    assert "desc" in capsys.readouterr().out
    ok("compare", run.root, "--out", tmp_path / "c.md")
    ok("compare", run.root, "--out", tmp_path / "c.csv")
    assert (tmp_path / "c.md").read_text().startswith("|") and "desc" in (tmp_path / "c.csv").read_text()


def test_results_made_before_timings_are_reported_not_timed(tmp_path, capsys):
    # a run whose job folders lack their timing files (made before descbench recorded times): the report
    # says so in one line, its timings rows count the jobs and leave their times NaN (NULL in the database)
    run = scored(tmp_path)
    gone = sorted(run.root.rglob(JOB_TIMING))
    assert len(gone) >= 3
    for f in gone:
        f.unlink()
    report = run.root / "report"
    ok("keypoint-stats", "--results-root", run.root, "--scene-root", run.scene_root, "--batches", json.dumps(run.batches),
       "--keypoint-sets", json.dumps([["kp", run.cfg["keypoint_sets"]["kp"]]]), "--repeatability-px", 3, "--out-dir", report)
    capsys.readouterr()
    ok("report", *run_args(run), "--provenance", "{}", "--out-dir", report)
    notes = [line for line in capsys.readouterr().err.splitlines() if "timing file" in line]
    assert len(notes) == 1 and notes[0].startswith("descbench: 3 keypoint, descriptor or scoring job(s) have no timing file")
    assert "made before descbench recorded times" in notes[0] and "--forcerun keypoints descriptors score" in notes[0]
    t = pd.read_csv(report / "timings.csv")
    assert (t.n_jobs.tolist(), t.n_jobs_timed.tolist()) == ([3], [0]) and t.total_wall_ms.isna().all()
    assert "rows hold jobs without a timing file" in run_summary(report)  # the end-of-run summary says it too
    ok("database", "--report-dir", report, "--name", "tiny", "--config", json.dumps(run.cfg), "--n-scenes", len(SCENES),
       "--workflow-dir", ROOT, "--out", tmp_path / "results.sqlite")
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("select descriptor_time_cpu_ms, match_time_cpu_ms, total_pipeline_cpu_ms from results").fetchone() == \
            (None, None, None)


def test_add_commands_and_where_compare_writes(tmp_path, monkeypatch, capsys):
    sub = argparse.ArgumentParser().add_subparsers()
    assert jobs_report.add_commands(sub) == {"report": jobs_report.run_report, "plots": jobs_report.run_plots,
                                             "database": jobs_report.run_database, "compare": jobs_report.run_compare}
    import descbench.report.experiments as ex

    table = pd.DataFrame({"experiment": ["a", "b"], "mAP": [0.5, 0.25]})
    monkeypatch.setattr(ex, "compare_experiments", lambda folders: table.assign(n=len(folders)))
    monkeypatch.setattr(ex, "to_markdown", lambda t: f"| md {len(t)} rows |\n")
    a = sub.choices["compare"].parse_args(["x", "y"])
    jobs_report.run_compare(a)
    assert capsys.readouterr().out == "| md 2 rows |\n"
    jobs_report.run_compare(sub.choices["compare"].parse_args(["x", "--out", str(tmp_path / "t.md")]))
    assert (tmp_path / "t.md").read_text() == "| md 2 rows |\n"
    jobs_report.run_compare(sub.choices["compare"].parse_args(["x", "--out", str(tmp_path / "t.csv")]))
    assert pd.read_csv(tmp_path / "t.csv").to_dict("list") == {"experiment": ["a", "b"], "mAP": [0.5, 0.25], "n": [1, 1]}
