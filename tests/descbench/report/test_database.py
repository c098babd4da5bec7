"""The SQLite results database: the seed's table and query, NULL for no data, idempotent rebuild."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
from conftest import raises_naming

from descbench.errors import DataError
from descbench.jobtiming import STAGES
from descbench.report.database import DW_COLUMNS, DW_RESULTS_SCHEMA, DW_TIMINGS, SEED_COLUMNS, build_database, git_commit
from descbench.report.timings import COLUMNS


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
    timings_table(d)
    return d


def timings_table(d, gpu_descriptor_jobs=(0, 0), untimed=()):
    """``timings.csv`` of the two rows (sift, orb on s): one batch per stage; orb's descriptor job
    ran on a GPU when ``gpu_descriptor_jobs[1]``; ``untimed``: (descriptor, stage) whose job has no
    timing file (made before descbench recorded times: NaN, descbench.report.timings)."""
    rows = []
    for i, (desc, n_gpu) in enumerate(zip(["sift", "orb"], gpu_descriptor_jobs)):
        r = {"descriptor": desc, "keypoint_set": "s"}
        for j, stage in enumerate(STAGES):
            wall = 100.0 * (j + 1) + i  # keypoints 100 / 101, descriptors 200 / 201, scoring 300 / 301
            gpu = n_gpu if stage == "descriptors" else 0
            timed = (desc, stage) not in untimed
            r.update({f"{stage}_wall_ms": wall if timed else np.nan, f"{stage}_cpu_time_ms": 2 * wall if timed else np.nan,
                      f"{stage}_jobs": 1, f"{stage}_jobs_timed": int(timed), f"{stage}_gpu_jobs": gpu if timed else 0,
                      f"{stage}_gpu_wall_ms": wall if gpu and timed else np.nan})
        n_timed = sum((desc, s) not in untimed for s in STAGES)
        r.update({"total_wall_ms": 600.0 + 3 * i if n_timed == 3 else np.nan,
                  "total_cpu_time_ms": 1200.0 + 6 * i if n_timed == 3 else np.nan, "n_jobs": 3, "n_jobs_timed": n_timed,
                  "device": "cpu x"})
        rows.append(r)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(d / "timings.csv", index=False)


EXPERIMENT = {"name": "demo", "dataset": "demo", "config": {"dataset": "demo"}, "versions": {"numpy": "2"},
              "git_commit": "abc", "n_scenes": 8}


def test_seed_table_and_query(report_dir, tmp_path):
    db = tmp_path / "r.sqlite"
    build_database(db, report_dir, EXPERIMENT)
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(results)")]
    assert cols[:len(SEED_COLUMNS)] == SEED_COLUMNS and {"descriptor", "keypoint_set", "mma_at_3"} <= set(cols)
    # the seed's kind of query, from sqlite3
    rows = con.execute("SELECT descriptor, true_map_micro, true_map_macro, mean_average_precision, mean_precision, metadata "
                       "FROM results ORDER BY true_map_micro DESC").fetchall()
    # mean_average_precision is the workbench's (= true_map_macro); the legacy precision is mean_precision
    assert rows[0] == ("sift", 0.8, 0.75, 0.75, 0.66, "true_map_micro=0.8000;")
    assert rows[1][1] is None and rows[1][3] is None  # NaN (no data) is NULL, not 0
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


# ----------------------------------------------------------------------------- the workbench's column names


def _comparison(report_dir, **columns):
    t = pd.read_csv(report_dir / "comparison.csv")
    for k, v in columns.items():
        t[k] = v
    t.to_csv(report_dir / "comparison.csv", index=False)


def _results(db):
    with sqlite3.connect(db) as con:
        out = pd.read_sql("SELECT * FROM results", con)
    return out


def test_mean_average_precision_follows_the_workbench_rule(report_dir, tmp_path):
    # the workbench's recordResults: true_map_macro_by_scene where it is > 0, else true_map_micro
    _comparison(report_dir, true_map_macro_by_scene=[0.0, 0.5], true_map_micro=[0.2, 0.4])
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    r = _results(tmp_path / "r.sqlite")
    assert r.mean_average_precision.tolist() == [0.2, 0.5]
    assert r.mean_precision.tolist() == [0.66, 0.0]  # the legacy matching precision, under its own name


def test_workbench_names_hold_the_workbench_quantities(report_dir, tmp_path):
    _comparison(report_dir, true_map_micro_including_zeros=[0.3, np.nan], true_map_macro_by_scene_including_zeros=[0.35, np.nan],
                viewpoint_map_including_zeros=[0.25, np.nan], illumination_map_including_zeros=[0.45, np.nan])
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    r = _results(tmp_path / "r.sqlite")
    # the workbench's "with zeros" columns (src/database/schema.sql) = descbench's "including zeros" ones
    assert r.viewpoint_map_with_zeros.iloc[0] == 0.25 and r.illumination_map_with_zeros.iloc[0] == 0.45
    assert r.true_map_micro_with_zeros.iloc[0] == 0.3 and r.true_map_macro_with_zeros.iloc[0] == 0.35
    assert r.viewpoint_map_with_zeros.isna().iloc[1]
    # no column of the workbench's schema without its declared meaning here
    assert set(r.columns) & set(DW_RESULTS_SCHEMA) <= set(DW_COLUMNS)
    # without verification.convention: workbench the workbench's counts are not there at all
    assert "retrieval_num_true_positives" not in r.columns


def test_workbench_convention_numbers_come_first(report_dir, tmp_path):
    _comparison(report_dir, retrieval_num_positives_descbench=[42345, 1], retrieval_num_hard_negatives_descbench=[9, 9],
                retrieval_num_distractors=[7, 7], workbench_num_positives=[58328, 1], retrieval_num_true_positives=[58328, 1],
                retrieval_num_hard_negatives=[5, 9], workbench_verification_map=[0.1, 0.2], workbench_retrieval_map=[0.1, 0.2])
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    r = _results(tmp_path / "r.sqlite")
    cols = r.columns.tolist()
    start = cols.index("keypoint_set") + 1
    assert cols[start:start + 4] == ["true_map_macro_by_scene", "workbench_verification_map", "workbench_retrieval_map",
                                     "retrieval_num_true_positives"]
    assert r.retrieval_num_true_positives.iloc[0] == 58328 and r.retrieval_num_positives_descbench.iloc[0] == 42345


def test_bojanic_workbench_names_hold_the_workbench_values_under_its_convention(report_dir, tmp_path):
    # verification.convention: workbench computed the workbench's pooled per-scene APs: its column
    # names hold them; descbench's own (Bojanic's nearest candidates, per-query retrieval AP) and
    # their intervals move to *_descbench
    _comparison(report_dir, workbench_verification_map=[0.11, 0.21], workbench_retrieval_map=[0.12, 0.22],
                workbench_verification_viewpoint_map=[0.13, 0.23], workbench_verification_illumination_map=[0.14, 0.24],
                workbench_retrieval_viewpoint_map=[0.15, 0.25], workbench_retrieval_illumination_map=[0.16, 0.26],
                verification_viewpoint_ap=[0.61, 0.51], retrieval_illumination_ap=[0.41, 0.31],
                keypoint_verification_ap_ci_low=[0.55, 0.45], keypoint_verification_ap_ci_high=[0.65, 0.55])
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    r = _results(tmp_path / "r.sqlite")
    assert r.keypoint_verification_ap.tolist() == [0.11, 0.21] and r.keypoint_retrieval_ap.tolist() == [0.12, 0.22]
    assert r.verification_viewpoint_ap.tolist() == [0.13, 0.23] and r.verification_illumination_ap.tolist() == [0.14, 0.24]
    assert r.retrieval_viewpoint_ap.tolist() == [0.15, 0.25] and r.retrieval_illumination_ap.tolist() == [0.16, 0.26]
    assert r.keypoint_verification_ap_descbench.tolist() == [0.6, 0.5]
    assert r.keypoint_retrieval_ap_descbench.tolist() == [0.4, 0.3]
    assert r.verification_viewpoint_ap_descbench.tolist() == [0.61, 0.51]
    assert r.retrieval_illumination_ap_descbench.tolist() == [0.41, 0.31]
    assert r.keypoint_verification_ap_descbench_ci_low.tolist() == [0.55, 0.45]
    assert r.keypoint_verification_ap_descbench_ci_high.tolist() == [0.65, 0.55]
    assert "keypoint_verification_ap_ci_low" not in r.columns  # an interval of descbench's value, not of the workbench's
    cols = r.columns.tolist()
    assert cols[:len(SEED_COLUMNS)] == SEED_COLUMNS
    # the workbench's viewpoint / illumination columns right after its own numbers, before descbench's other columns
    lead = cols.index("workbench_retrieval_illumination_map") + 1  # the last of WORKBENCH_FIRST given here
    assert cols[lead:lead + 4] == ["verification_viewpoint_ap", "verification_illumination_ap", "retrieval_viewpoint_ap",
                                   "retrieval_illumination_ap"]


def test_bojanic_workbench_names_are_null_without_its_convention(report_dir, tmp_path):
    # the default convention does not compute the workbench's quantity: its names are NULL, never descbench's value
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        rows = con.execute("SELECT keypoint_verification_ap, keypoint_retrieval_ap, verification_viewpoint_ap, "
                           "retrieval_illumination_ap, keypoint_verification_ap_descbench, keypoint_retrieval_ap_descbench "
                           "FROM results ORDER BY descriptor").fetchall()
    assert rows == [(None, None, None, None, 0.5, 0.3), (None, None, None, None, 0.6, 0.4)]


def test_sweep_settings_follow_the_identification(report_dir, tmp_path):
    _comparison(report_dir, sweep=[np.nan, "grid"], **{"sweep:border_px": [np.nan, 20]})
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    cols = _results(tmp_path / "r.sqlite").columns.tolist()
    start = cols.index("keypoint_set") + 1
    assert cols[start:start + 2] == ["sweep", "sweep:border_px"]


@pytest.mark.bad_input
def test_a_workbench_name_with_another_meaning_is_refused(report_dir, tmp_path):
    _comparison(report_dir, total_matches=[3, 4])  # a workbench column descbench does not define
    with pytest.raises(ValueError, match="total_matches"):
        build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)


@pytest.mark.bad_input
def test_a_report_from_before_the_renaming_is_refused_with_the_fix(report_dir, tmp_path):
    _comparison(report_dir, retrieval_num_true_positives=[42345, 1])  # descbench's count under the workbench's name
    with pytest.raises(DataError, match=r"comparison\.csv.*--forcerun report"):
        build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)


def test_patch_benchmark_results_rows_are_the_report_s_workbench_table(report_dir, tmp_path):
    """patch_benchmark_results: the workbench's columns in its order (id, experiment_id, ..,
    created_at), one row per descriptor of the report's workbench table, values as computed by
    descbench.patches.workbench on the descriptors; no such table without the benchmark."""
    from descbench.patches import stages as ps
    from descbench.patches import workbench as wb
    from descbench.report import patches as RP
    from tests.descbench.patches.test_stages_workbench import SEQS, pcfg, sequence_descriptors, write_descriptors

    files = write_descriptors(tmp_path / "desc")
    ps.evaluate(tmp_path / "tasks", files, "toy", pcfg(), tmp_path / "eval" / "toy")
    RP.write([tmp_path / "eval" / "toy"], ["toy"], report_dir / "patches")
    db = tmp_path / "r.sqlite"
    build_database(db, report_dir, EXPERIMENT, patch_benchmark=report_dir / "patches" / "workbench_patch_benchmark.csv")
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(patch_benchmark_results)")]
    assert cols == ["id", "experiment_id", *wb.TABLE_COLUMNS, "created_at", "precision", "grouping"]
    rows = pd.read_sql("SELECT * FROM patch_benchmark_results", con)
    (exp,) = con.execute("SELECT experiment_id FROM experiments").fetchone()
    con.close()
    assert rows.id.tolist() == [1] and rows.experiment_id.tolist() == [exp]
    descs = {s: sequence_descriptors(s) for s in SEQS}
    want = wb.aggregate(pd.concat([wb.score_sequence(s, descs[s], "toy", ["float32"]) for s in sorted(SEQS)]))
    for c in wb.TABLE_COLUMNS:
        if c.startswith(("map_", "accuracy_", "num_")) or c == "descriptor_dimension":
            assert rows[c][0] == want[c][0], c
    assert rows.metadata[0].startswith("difficulty_easy=true;") and rows.processing_time_ms[0] > 0
    assert rows.created_at[0] == pd.read_csv(report_dir / "patches" / "workbench_patch_benchmark.csv").created_at[0]
    build_database(db, report_dir, EXPERIMENT)
    con = sqlite3.connect(db)
    assert not con.execute("SELECT name FROM sqlite_master WHERE name = 'patch_benchmark_results'").fetchall()
    con.close()


@pytest.mark.bad_input
def test_a_patch_benchmark_table_without_its_columns_is_named(report_dir, tmp_path):
    bad = tmp_path / "workbench_patch_benchmark.csv"
    pd.DataFrame({"descriptor_name": ["x"], "map_overall": [0.5]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"workbench_patch_benchmark.csv lacks the columns \['descriptor_dimension'.*"
                                        r"rebuild the patch report \(snakemake --forcerun patch_report\)"):
        build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT, patch_benchmark=bad)


# ----------------------------------------------------------------------------- timings


def _timing_row(db, descriptor: str) -> list:
    """DW_TIMINGS' columns of a descriptor's row, as SQLite holds them (NULL: None)."""
    with sqlite3.connect(db) as con:
        return list(con.execute(f"SELECT {', '.join(DW_TIMINGS)} FROM results WHERE descriptor = ?", (descriptor,)).fetchone())


def test_workbench_timing_columns_are_wall_time_by_device(report_dir, tmp_path):
    # the workbench's *_cpu_ms / *_gpu_ms: wall time of the jobs that ran on that device; NULL where none did
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    assert _timing_row(tmp_path / "r.sqlite", "sift") == [200.0, None, 300.0, None, 600.0, None]
    assert _timing_row(tmp_path / "r.sqlite", "orb") == [201.0, None, 301.0, None, 603.0, None]
    r = _results(tmp_path / "r.sqlite")
    assert r.processing_time_ms.tolist() == [12.0, 8.0]  # unchanged: comparison.csv's
    cols = r.columns.tolist()
    assert cols[cols.index("descriptor_time_cpu_ms"):][:6] == list(DW_TIMINGS)
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        t = pd.read_sql("SELECT * FROM timings", con)
    assert t.columns.tolist() == ["experiment_id", *COLUMNS] and t.descriptor.tolist() == ["sift", "orb"]
    assert t.keypoints_wall_ms.tolist() == [100.0, 101.0] and t.device.tolist() == ["cpu x", "cpu x"]


def test_a_descriptor_on_a_gpu_counts_in_the_gpu_columns(report_dir, tmp_path):
    timings_table(report_dir, gpu_descriptor_jobs=(0, 1))
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    # orb's descriptor job on the GPU: its CPU column is NULL (no descriptor job ran there), its GPU columns hold it
    assert _timing_row(tmp_path / "r.sqlite", "orb") == [None, 201.0, 301.0, None, 101.0 + 301.0, 201.0]
    assert _timing_row(tmp_path / "r.sqlite", "sift") == [200.0, None, 300.0, None, 600.0, None]


def test_jobs_made_before_timings_leave_their_columns_null(report_dir, tmp_path):
    # results made before descbench recorded times: their rows are there, their times NULL, their counts say so
    timings_table(report_dir, untimed=[("sift", "scoring"), ("orb", "keypoints"), ("orb", "descriptors"), ("orb", "scoring")])
    build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT)
    assert _timing_row(tmp_path / "r.sqlite", "sift") == [200.0, None, None, None, None, None]
    assert _timing_row(tmp_path / "r.sqlite", "orb") == [None] * 6
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        t = pd.read_sql("SELECT descriptor, scoring_jobs, scoring_jobs_timed, n_jobs, n_jobs_timed, scoring_wall_ms FROM timings", con)
    assert t.values.tolist()[0][:5] == ["sift", 1, 0, 3, 2] and t.values.tolist()[1][:5] == ["orb", 1, 0, 3, 0]
    assert t.scoring_wall_ms.isna().all()


@pytest.mark.bad_input
def test_a_comparison_row_without_a_timings_row_is_refused(report_dir, tmp_path):
    t = pd.read_csv(report_dir / "timings.csv")
    t[t.descriptor == "sift"].to_csv(report_dir / "timings.csv", index=False)
    raises_naming(lambda: build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT), "timings.csv has no row",
                  "orb", "--forcerun report")


@pytest.mark.bad_input
def test_a_report_without_timings_is_refused_with_the_fix(report_dir, tmp_path):
    (report_dir / "timings.csv").unlink()
    raises_naming(lambda: build_database(tmp_path / "r.sqlite", report_dir, EXPERIMENT), str(report_dir / "timings.csv"),
                  "--forcerun report")
    assert not (tmp_path / "r.sqlite").exists()
