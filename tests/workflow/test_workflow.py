"""End to end: snakemake on a tiny demo (2 scenes), bit-identical reruns, incremental dry runs."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from descbench.io import read_meta
from descbench.paths import JOB_TIMING, ResultPaths, scene_batches
from smkrun import job_counts, snakemake, snakemake_cmd, snakemake_until_exit, write_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def parquet_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("e2e")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["execution"]["scenes_per_job"] = 1  # two batches: distractors cross batch folders
    write_config(work, cfg)
    out, exit_lag_s = snakemake_until_exit(work, "--cores", "2")
    (work / "terminal.txt").write_text(out)
    (work / "exit_lag_s.txt").write_text(f"{exit_lag_s:.3f}")
    return work, cfg


def test_run_ends_with_the_table_its_caveats_and_the_paths(run):
    work, _ = run
    out = (work / "terminal.txt").read_text()
    tail = out[out.index("descbench results, written by this run"):]
    table = pd.read_csv(work / "results" / "demo" / "report" / "comparison.csv")
    assert f"sift        sift          {table.true_map_micro[0]:.4f}" in tail
    # two scenes: one distractor scene instead of the configured 10, said on the terminal
    assert "sift on sift: verification used only 1 distractor scene(s) for some scene (configured 10" in tail
    assert "results/demo/report/comparison.md" in tail and "results/demo/report/keypoint_stats.md" in tail
    assert "inspector page     results/demo/report/inspector.html" in tail
    # and the report says it too
    md = (work / "results" / "demo" / "report" / "comparison.md").read_text()
    assert "Not plain results:" in md and "- sift on sift: verification used only 1 distractor scene(s)" in md


def test_the_run_exits_when_it_has_said_so(run):
    """Snakemake's re-evaluation timers (the profile's 600 s timespan) are cancelled at the end of
    the run (descbench.smktuning): the process exits right after its last line, not a timespan
    later."""
    work, _ = run
    assert float((work / "exit_lag_s.txt").read_text()) < 5.0


def result_paths(work: Path, cfg: dict) -> ResultPaths:
    return ResultPaths(work / "results" / "demo", scene_batches(cfg["scenes"], cfg["execution"]["scenes_per_job"]))


def test_demo_run_produces_the_comparison_table(run):
    work, cfg = run
    P = result_paths(work, cfg)
    report = work / "results" / "demo" / "report"
    table = pd.read_csv(report / "comparison.csv")
    assert table[["descriptor", "keypoint_set"]].values.tolist() == [["sift", "sift"], ["rootsift", "sift"]]
    assert table.columns[:9].tolist() == [
        "descriptor", "keypoint_set", "true_map_micro", "viewpoint_map", "illumination_map",
        "precision_at_1", "precision_at_5", "total_queries_processed", "total_queries_excluded",
    ]
    assert ((table.true_map_micro > 0.2) & (table.true_map_micro <= 1)).all()
    assert (table.total_queries_processed > 100).all() and (table.n_scenes == 2).all()
    assert (report / "comparison.md").read_text().startswith("| descriptor | keypoint_set | true_map_micro (95 % CI) |")
    # per-query records are consistent with the table: the micro mAP is their mean AP
    q = pd.read_parquet(P.task_file("scores", "sift", "sift", "v_coins", "queries.parquet"))
    p = pd.read_parquet(P.task_file("scores", "sift", "sift", "v_coins", "pairs.parquet"))
    assert q.ap.sum() == pytest.approx(p.sum_ap.sum()) and (q.n_relevant > 0).sum() == p.n_relevant_queries.sum()
    meta = read_meta(P.task_file("scores", "sift", "rootsift", "i_rocket", "pairs.parquet"))
    assert meta["params"]["tie_policy"] == "expected" and meta["descriptor"] == "rootsift"
    assert {"descbench", "opencv", "numpy", "numba"} <= set(meta["versions"])
    assert (work / "results/demo/logs/score/sift/sift/batch000.log").exists()
    # each job measures itself (no `benchmark:` sampler in Snakemake's process): the log's last line
    last = (work / "results/demo/logs/score/sift/sift/batch001.log").read_text().splitlines()[-1]
    assert re.fullmatch(r"descbench: score done in [0-9.]+ s wall, [0-9.]+ s CPU, max RSS [0-9]+ MiB", last), last
    assert not (work / "results/demo/benchmarks").exists()
    # and each keypoint, descriptor and scoring job writes its timing file (outside the Parquet files): the timings table
    tm = pd.read_csv(report / "timings.csv")
    assert tm[["descriptor", "keypoint_set"]].values.tolist() == table[["descriptor", "keypoint_set"]].values.tolist()
    assert (tm.n_jobs == 6).all() and (tm.total_wall_ms > 0).all() and (tm.device.str.len() > 0).all()  # 2 batches x 3 stages
    assert (tm.n_jobs_timed == tm.n_jobs).all()
    assert json.loads(Path(P.job_timing("scoring", "sift", "rootsift", "batch001", "matching")).read_text())["scenes"] == ["v_coins"]
    # keypoint verification / retrieval and matching columns, consistent with their per-scene files
    for c in ("keypoint_verification_ap", "keypoint_retrieval_ap", "mean_precision", "mma_at_3", "classifier_threshold_auc"):
        assert ((table[c] > 0) & (table[c] <= 1)).all(), c
    vq = pd.read_parquet(P.task_file("verification", "sift", "sift", "v_coins", "queries.parquet"))
    vs = pd.read_parquet(P.task_file("verification", "sift", "sift", "v_coins", "scene.parquet"))
    assert vq.ap_negative.sum() == pytest.approx(vs.retrieval_sum_ap_negative.sum())
    assert vs.n_distractor_scenes.tolist() == [1]  # one other scene in this 2-scene run
    vmeta = read_meta(P.task_file("verification", "sift", "sift", "v_coins", "list.parquet"))
    assert [d["scene"] for d in vmeta["distractors"]] == ["i_rocket"] and len(vmeta["distractors"][0]["rows"]) == 20
    mp = pd.read_parquet(P.task_file("matching", "sift", "sift", "v_coins", "pairs.parquet"))
    assert len(mp) == 5 and (mp.n_matches > 0).all()
    roc = pd.read_parquet(P.task_file("matching", "sift", "sift", "v_coins", "roc.parquet"))
    assert set(roc.matcher) == {"threshold", "nn", "ratio", "mutual_nn"}


def test_rerun_is_bit_identical(run):
    work, _ = run
    before = parquet_digests(work / "results")
    assert "Nothing to be done" in snakemake(work, "-n")
    # results made before descbench recorded times (no job_timing.json, no report/timings.*): only the
    # report side reruns, and its rows say the jobs are not timed
    timing_files = sorted((work / "results").rglob(JOB_TIMING))
    assert len(timing_files) == 2 * (1 + 2 + 2 * 3)  # 2 batches x (1 keypoint set, 2 descriptors, 2 x 3 scoring task folders)
    for f in timing_files + sorted((work / "results/demo/report").glob("timings.*")):
        f.unlink()
    counts = job_counts(snakemake(work, "-n"))
    assert not {"keypoints", "descriptors", "score", "distractors"} & set(counts) and counts.get("report") == 1, counts
    out = snakemake(work, "--cores", "2")
    assert "rows hold jobs without a timing file" in out and "--forcerun keypoints descriptors score" in out
    assert "descbench: 10 keypoint, descriptor or scoring job(s) have no timing file" in \
        (work / "results/demo/logs/report.log").read_text()  # 2 x (keypoints, 2 descriptors, 2 scoring)
    tm = pd.read_csv(work / "results/demo/report/timings.csv")
    assert (tm.n_jobs_timed == 0).all() and tm.total_wall_ms.isna().all()
    snakemake(work, "--cores", "2", "--forceall")
    assert parquet_digests(work / "results") == before


def test_adding_or_changing_one_descriptor_reruns_only_its_jobs(run):
    work, cfg = run
    # the inspector's settings rerun its page only
    page = copy.deepcopy(cfg)  # (yaml.safe_dump sorts the descriptors: another order reruns the report)
    page["inspector"] = {"max_pairs": 3, "metric": "corner_error"}
    write_config(work, page)
    assert job_counts(snakemake(work, "-n")) == {"inspector": 1, "all": 1}
    added = yaml.safe_load(yaml.safe_dump(cfg))
    added["descriptors"]["rootsift2"] = {"family": "rootsift"}
    write_config(work, added)
    counts = job_counts(snakemake(work, "-n"))
    # the inspector page too: it reads the run's list of (keypoint set, descriptor), which changed
    assert counts == {"descriptors": 2, "distractors": 1, "score": 2, "report": 1, "plots": 1, "results_db": 1, "inspector": 1,
                      "all": 1}, counts

    # a stack of parts the config evaluates anyway reads their folders: its jobs wait for theirs
    stacked = yaml.safe_load(yaml.safe_dump(cfg))
    stacked["descriptors"]["stacked"] = {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "rootsift"}]}}
    write_config(work, stacked)
    out = snakemake(work, "-n")
    jobs = [b for b in re.split(r"\n(?=(?:local)?rule )", out) if re.search(r"output: \S*descriptors/sift/stacked/batch000", b)]
    assert len(jobs) == 1 and all(f"descriptors/sift/{d}/batch000" in jobs[0].split("output:")[0] for d in ("sift", "rootsift"))
    assert job_counts(out)["descriptors"] == 2

    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["descriptors"]["rootsift"]["keypoint_sets"] = ["sift"]  # a change of rootsift's spec
    write_config(work, changed)
    out = snakemake(work, "-n")
    assert job_counts(out) == {"descriptors": 2, "distractors": 1, "score": 2, "report": 1, "plots": 1, "results_db": 1, "inspector": 1,
                               "all": 1}
    assert "sift/sift/" not in "".join(l for l in out.splitlines() if "output:" in l and "descriptors" in l)
    # a verification option reruns the scoring jobs (one job runs every task of a batch) and the
    # report, not the features nor the distractor draw
    ver = yaml.safe_load(yaml.safe_dump(cfg))
    ver["verification"]["hard_negatives"] = "ignore"
    write_config(work, ver)
    assert job_counts(snakemake(work, "-n")) == {"score": 4, "report": 1, "plots": 1, "results_db": 1, "inspector": 1, "all": 1}
    # the job structure is not a result: the batch size only moves files (and reruns jobs)
    assert "scenes_per_job" not in json.dumps(read_meta(result_paths(work, cfg).task_file("scores", "sift", "sift", "v_coins", "pairs.parquet")))
    write_config(work, cfg)
    out = snakemake(work, "-n")
    assert "Nothing to be done" in out, [l for l in out.splitlines() if "rule " in l or "reason:" in l][:20]


def test_verification_job_depends_on_its_distractor_scenes(run):
    """The DAG knows which scenes' descriptors a scene's verification job reads."""
    work, cfg = run
    P = result_paths(work, cfg)
    # forcing the descriptor jobs a target depends on: i_rocket's scoring job (batch000) reads
    # v_coins's descriptors (batch001) for its distractors
    target = P.task_dir("verification", "sift", "sift", P.batch_of("i_rocket"))
    counts = job_counts(snakemake(work, str(Path(target).relative_to(work)), "-n", "--forcerun", "descriptors"))
    assert counts["descriptors"] == 2 and counts["distractors"] == 1 and counts["score"] == 1, counts
    # a new distractor draw reruns the bank and every scoring job
    draw = yaml.safe_load(yaml.safe_dump(cfg))
    draw["verification"]["seed"] = 1
    write_config(work, draw)
    try:
        assert job_counts(snakemake(work, "-n")) == {"distractors": 2, "score": 4, "report": 1, "plots": 1, "results_db": 1,
                                                     "inspector": 1, "all": 1}
    finally:
        write_config(work, cfg)
    # without verification the scoring job reads only its own batch
    off = yaml.safe_load(yaml.safe_dump(cfg))
    off["verification"]["enabled"] = False
    write_config(work, off)
    try:
        out = snakemake(work, str(Path(target.replace("verification", "scores")).relative_to(work)), "-n", "--forcerun", "descriptors")
    finally:
        write_config(work, cfg)
    counts = job_counts(out)
    assert counts["descriptors"] == 1 and counts["score"] == 1, counts


def test_numba_threads_and_cache_dir_reach_every_kernel_job(run, tmp_path):
    """The scoring and warm-up jobs export NUMBA_NUM_THREADS = their threads and, when
    execution.numba_cache_dir is set, NUMBA_CACHE_DIR (shared by the nodes of a cluster)."""
    work, cfg = run
    moved = yaml.safe_load(yaml.safe_dump(cfg))
    moved["execution"]["numba_cache_dir"] = str(tmp_path / "numba cache")
    moved["scoring"]["threads"] = 2
    write_config(work, moved)
    try:
        out = snakemake(work, "-n", "-p", "--forceall", "--cores", "2")
    finally:
        write_config(work, cfg)
    shells = [l.strip().removeprefix("Shell command: ") for l in out.splitlines() if " -m descbench " in l]
    kernel_jobs = [s for s in shells if re.search(r" descbench (--error-fd \d+ )?(score|warmup) ", s)]
    assert len(kernel_jobs) == 2 * 2 + 1, shells  # 2 batches x 2 descriptors + warm-up
    quoted = f"NUMBA_CACHE_DIR='{tmp_path / 'numba cache'}'"
    assert all(s.startswith("export NUMBA_NUM_THREADS=") and quoted in s for s in kernel_jobs), kernel_jobs
    assert all("NUMBA_NUM_THREADS=2 " in s for s in kernel_jobs if " score " in s)


def test_a_failing_jobs_own_message_reaches_the_terminal(tmp_path):
    """profiles/default sets show-failed-logs: the descbench error, not only 'Error in rule'."""
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    write_config(tmp_path, cfg)
    snakemake(tmp_path, "--cores", "1", "--until", "demo_scene")
    (tmp_path / "data/demo/seed0/v_coins/H_1_3").write_text("garbage\n")
    out = snakemake(tmp_path, "--cores", "1", ok=False, timeout=600)
    assert "descbench: error: homography data/demo/seed0/v_coins/H_1_3 is malformed" in out


@pytest.mark.bad_input
def test_until_a_stage_whose_jobs_need_each_other_stops_before_any_job_with_the_fix(tmp_path):
    """The default config's rootsift reads sift's descriptor files; Snakemake's --until descriptors
    would never start it and end with its "BUG: Out of jobs ready": the run stops at its start.
    Once sift's files are complete, the same --until reruns rootsift's job."""
    import shutil

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    write_config(tmp_path, cfg)
    out = snakemake(tmp_path, "--cores", "1", "--until", "descriptors", ok=False, timeout=600)
    assert "descbench: --until: " in out and "(here descriptors jobs)" in out
    assert "descriptors/sift/rootsift/batch000 needs results/demo/descriptors/sift/sift/batch000" in out
    assert "--omit-from distractors score keypoint_stats match instead" in out
    assert "BUG" not in out and "Finished jobid" not in out
    assert "WorkflowError" not in out and "common.smk" not in out, out  # the message alone, no traceback lines
    snakemake(tmp_path, "--cores", "1", "--omit-from", "distractors", "score", "keypoint_stats", "match", timeout=600)
    shutil.rmtree(tmp_path / "results/demo/descriptors/sift/rootsift/batch000")
    out = snakemake(tmp_path, "--cores", "1", "--until", "descriptors", timeout=600)
    assert job_counts(out) == {"descriptors": 1}, out


@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_rerun_after_a_crash_just_works(tmp_path, how):
    """Ctrl-C (SIGINT) or a hard kill (SIGKILL of the whole process group) in the middle of a job;
    then the same command (after `--unlock` for the hard kill) finishes the run."""
    import os
    import shutil
    import signal
    import time

    shutil.copy(ROOT / "tests" / "data" / "my_descriptors.py", tmp_path)
    hold = tmp_path / "hold"
    hold.write_text("")
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    cfg["descriptors"] = {"slow": {"family": "python", "params": {"callable": "my_descriptors:waits_for_file",
                                                                    "kwargs": {"hold": str(hold)}}}}
    write_config(tmp_path, cfg)
    proc = subprocess.Popen(snakemake_cmd(tmp_path, "--cores", "1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = tmp_path / "results/demo/logs/descriptors/sift/slow/batch000.log"
    deadline = time.time() + 300
    while not log.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert log.exists(), "the descriptor job never started"
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT if how == "interrupt" else signal.SIGKILL)
    proc.wait(timeout=120)
    hold.unlink()
    if how == "kill":
        snakemake(tmp_path, "--unlock")
    out = snakemake(tmp_path, "--cores", "1")
    assert "descbench results, written by this run" in out
    assert (tmp_path / "results/demo/report/comparison.csv").exists()


def test_report_has_intervals_and_the_paired_comparison(run):
    work, cfg = run
    report = work / "results" / "demo" / "report"
    table = pd.read_csv(report / "comparison.csv")
    metrics = ("true_map_micro", "true_map_macro_by_scene", "keypoint_verification_ap", "mma_at_3", "homography_accuracy_at_3")
    for m in metrics:
        assert ((table[f"{m}_ci_low"] <= table[m] + 1e-12) & (table[m] <= table[f"{m}_ci_high"] + 1e-12)).all(), m
    sig = pd.read_csv(report / "significance.csv")
    assert set(sig.metric) == set(metrics)
    row = sig[sig.metric == "true_map_micro"].iloc[0]
    assert (row.descriptor_a, row.descriptor_b) == ("sift", "rootsift") and row.n_scenes == 2
    assert row.difference == pytest.approx(table.true_map_micro[0] - table.true_map_micro[1])
    assert row.p_value in (0.5, 1.0)  # two scenes: the exact test has 4 patterns, p in {2/4, 4/4}
    assert "true_map_micro (95 % CI)" in (report / "comparison.md").read_text()


def test_results_database_matches_the_table(run):
    import sqlite3

    work, _ = run
    table = pd.read_csv(work / "results" / "demo" / "report" / "comparison.csv")
    con = sqlite3.connect(work / "results" / "demo" / "results.sqlite")
    rows = con.execute("SELECT descriptor, keypoint_set, true_map_micro FROM results ORDER BY rowid").fetchall()
    assert rows == list(zip(table.descriptor, table.keypoint_set, table.true_map_micro))
    name, commit, digest = con.execute("SELECT name, git_commit, inputs_sha256 FROM experiments").fetchone()
    assert name == "demo" and len(digest) == 64 and commit != ""


def test_every_figure_is_written(run):
    from descbench.report.figures import CAPTIONS, FIGURES

    work, _ = run
    plots = work / "results" / "demo" / "report" / "plots"
    for name in FIGURES:
        png, svg = plots / f"{name}.png", plots / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, name
        assert "<svg" in svg.read_text()[:2000], name
        assert len(CAPTIONS[name]) > 40


def test_html_report_holds_the_tables_and_every_captioned_plot(run):
    """`snakemake --report report.html` (pygments is a declared dependency) on the tiny demo."""
    from descbench.report.figures import FIGURES

    work, _ = run
    snakemake(work, "--report", "report.html")
    html = (work / "report.html").read_text()
    for name in ("comparison.html", "significance.html", "per_scene.html", "keypoint_stats.html", "timings.html",
                 "inspector.html", *(f"{n}.png" for n in FIGURES)):
        assert name in html, name
    for phrase in ("vertical averaging", "Mean matching accuracy", "paired permutation p-value", "Tables", "Plots",
                   "Which jobs a row counts",  # the timings table's caption
                   "Inspector", "the mutual-nearest-neighbour matches, green when correct"):  # the inspector page's
        assert phrase in html, phrase


def test_the_reports_inspector_page_renders_in_headless_chromium(run, tmp_path):
    """report/inspector.html (config `inspector`: the first set, sift vs rootsift, at most 12 pairs):
    2 scenes x 5 pairs, all drawn, in a browser."""
    from chromium import render

    work, _ = run
    pixels, dom = render(work / "results" / "demo" / "report" / "inspector.html", tmp_path)
    assert pixels.std() > 20  # drawn, not a blank page
    assert "Pairs drawn: the 10 of 10 pairs where rootsift and sift differ most in mma_at_3." in dom
    assert dom.count("<img ") == 2 * 10 and 'id="diff-table"' in dom and dom.count('class="failure-plot"') == 2


def test_two_stage_interval_reads_the_query_files_of_the_run(run, tmp_path, monkeypatch):
    """statistics.resample_queries: the per-query APs the report would resample are exactly the
    queries behind true_map_micro (their mean is the table's value) and the interval holds it;
    with it off, the report reads no query file."""
    from descbench.metrics.bootstrap import BootstrapParams, two_stage_ci
    from descbench.report import table as report_table
    from descbench.report.table import entry_files
    from descbench.tasks.retrieval import query_aps

    work, cfg = run
    table = pd.read_csv(work / "results" / "demo" / "report" / "comparison.csv")
    entry = entry_files(result_paths(work, cfg), "sift", "sift", cfg["scenes"], cfg)
    assert not cfg["statistics"]["resample_queries"]
    with monkeypatch.context() as m:  # off: not read
        m.setattr(report_table.retrieval, "query_aps", lambda paths: pytest.fail("query files read with resample_queries off"))
        report_table.write([entry], cfg, tmp_path, {})
    aps = query_aps(entry.files["scores"]["queries.parquet"])
    assert len(aps) == 2 and all(a.size > 0 for a in aps)
    assert np.concatenate(aps).mean() == pytest.approx(table.true_map_micro[0], rel=1e-12)
    lo, hi = two_stage_ci(aps, BootstrapParams(resamples=500))
    assert lo <= table.true_map_micro[0] <= hi
