"""The results database (SQLite): the seed's ``results`` table, plus experiments and keypoint sets.

Tables (rebuilt from the report files every time, so the database is a pure function of them):

- ``experiments``: one row per run configuration: ``experiment_id``, ``name``, ``dataset``,
  ``config_json`` (the validated config), ``versions_json`` (Python packages), ``git_commit``
  (of the workflow's checkout, ``+dirty`` with uncommitted changes, ``unknown`` outside git),
  ``inputs_sha256`` (one digest over the sha256 of every evaluated image and homography; per
  file in the keypoint files' provenance), ``n_scenes``.
- ``results``: one row per (descriptor, keypoint set) with the seed's columns
  (shared/seeds/000: ``true_map_micro``, ``true_map_macro``, ``viewpoint_map``,
  ``illumination_map``, ``keypoint_verification_ap``, ``keypoint_retrieval_ap``,
  ``precision_at_1``, ``precision_at_5``, ``mean_average_precision``, ``processing_time_ms``,
  ``metadata`` (the seed's ``key=value;`` string)) first, then ``experiment_id``, ``descriptor``,
  ``keypoint_set``, the sweep settings (``sweep``, ``sweep:<path>``), the C++ DescriptorWorkbench's
  other result columns that descbench computes (:data:`DW_ALIASES`), the workbench's own numbers
  when ``verification.convention: workbench`` (``workbench_*`` and the workbench's retrieval
  counts, :data:`WORKBENCH_FIRST`), and every other column of ``comparison.csv`` (intervals
  included).

  **A column named like one of the workbench's ``results`` columns holds the workbench's quantity**
  (:data:`DW_COLUMNS` lists each such column and what it holds): ``mean_average_precision`` is the
  workbench's (``recordResults``: ``true_map_macro_by_scene``, or ``true_map_micro`` where that is
  not > 0), not the legacy matching precision it held until issue 18 (that one is
  ``mean_precision``; README's demo: sift 0.9076 -> 0.8968, rootsift 0.9185 -> 0.9084);
  ``retrieval_num_true_positives`` / ``retrieval_num_hard_negatives`` are the workbench's counts
  (only with ``verification.convention: workbench``; descbench's own are ``*_descbench``); so are
  ``keypoint_verification_ap`` / ``keypoint_retrieval_ap`` and their viewpoint / illumination
  columns (:data:`DW_BOJANIC`: the workbench's pooled per-scene APs, NULL unless
  ``verification.convention: workbench``; descbench's own, Bojanic's definition, are
  ``keypoint_verification_ap_descbench`` etc., since issue 18).
  The workbench's timing columns (:data:`DW_TIMINGS`: ``descriptor_time_cpu_ms``,
  ``descriptor_time_gpu_ms``, ``match_time_cpu_ms``, ``match_time_gpu_ms``,
  ``total_pipeline_cpu_ms``, ``total_pipeline_gpu_ms``) hold wall time, as the workbench's do
  (``std::chrono::high_resolution_clock`` around each call, whole milliseconds, summed over images and scenes:
  src/cli/experiment_runner/processing.cpp:535-538 detection, 576-584 description, 722-727 matching;
  recorded in result_recording.cpp:60-65): ``_cpu`` / ``_gpu`` say on which device
  the jobs ran, not CPU time (that is the ``timings`` table's ``*_cpu_time_ms``). The workbench
  writes every ``_gpu`` column 0 and its ``descriptor_time_cpu_ms`` whatever the device; here a job
  on a GPU counts in ``_gpu`` and a device on which nothing ran is NULL. Its keypoint detection time
  is only in its ``total_pipeline_cpu_ms`` (and its metadata ``detect_time_ms``; 0 when it reads
  stored keypoints); here it is also the timings table's ``keypoints_*``.
- ``timings``: ``timings.csv`` (each row's keypoint, descriptor and scoring jobs: wall and CPU
  time, jobs and timed jobs, device; :mod:`descbench.report.timings`). Jobs whose results were made
  before descbench recorded times have no timing file: their stage's times are NULL there and in
  the workbench's timing columns, and ``<stage>_jobs_timed`` < ``<stage>_jobs``.
- ``keypoint_sets``: ``keypoint_stats.csv`` (counts, sizes, coverage, repeatability, spec).
- ``significance``: ``significance.csv`` (paired comparisons).
- ``patch_benchmark_results`` (only when the patch benchmark ran: ``patches.workbench.enabled``):
  the C++ workbench's table of that name (``src/core/database/DatabaseManager.cpp:119-143``), one
  row per patch descriptor from ``report/patches/workbench_patch_benchmark.csv``
  (:func:`descbench.report.patches.workbench_table` says what each column holds), its columns in
  its order: ``id`` (1, 2, .. in the table's row order), ``experiment_id`` (this database's
  experiment), ``descriptor_name`` .. ``metadata`` (:data:`PATCH_BENCHMARK_COLUMNS`), and
  ``created_at``: when the evaluation job finished (UTC, ``YYYY-MM-DD HH:MM:SS`` as SQLite's
  ``CURRENT_TIMESTAMP``; the workbench's default is the time of the insert, descbench takes it
  from the report file so that the database stays a function of the report files); then
  descbench's ``precision`` and ``grouping``.

NaN (a metric without data) is stored as SQL NULL. Query it from ``sqlite3``, pandas
(``pd.read_sql``) or DuckDB (``sqlite_scan``).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from descbench.errors import DataError
from descbench.fileops import atomic_path
from descbench.jobtiming import STAGES
from descbench.report.experiments import DW_POOLED
from descbench.report.timings import on_device

SEED_COLUMNS = ["true_map_micro", "true_map_macro", "viewpoint_map", "illumination_map", "keypoint_verification_ap",
                "keypoint_retrieval_ap", "precision_at_1", "precision_at_5", "mean_average_precision",
                "processing_time_ms", "metadata"]

# The workbench's (F-Sossi/DescriptorWorkbench, src/database/schema.sql, table ``results``) column
# names that descbench fills from a column of its own table of the same quantity (its definition
# in descbench.metrics.aggregate): workbench name -> comparison.csv column.
DW_ALIASES = {
    "true_map_macro": "true_map_macro_by_scene",
    "true_map_micro_with_zeros": "true_map_micro_including_zeros",
    # the workbench leaves out a scene whose queries all have R = 0 here (and only here); descbench counts it as 0
    "true_map_macro_with_zeros": "true_map_macro_by_scene_including_zeros",
    "viewpoint_map_with_zeros": "viewpoint_map_including_zeros",
    "illumination_map_with_zeros": "illumination_map_including_zeros",
}

# The workbench's keypoint verification / retrieval columns (seed 000's Bojanic columns) and the
# descbench column that holds the workbench's quantity (computed only with verification.convention:
# workbench; NULL otherwise). descbench's own values of another definition (Bojanic's nearest-
# neighbour candidates, per-query retrieval AP; descbench.metrics.aggregate.verification_summary)
# keep their comparison.csv name with the suffix _descbench here (their intervals too), so no
# column of this table holds a workbench name with another meaning.
DW_BOJANIC = {dw: ours for dw, (ours, _) in DW_POOLED.items()}  # the one map: descbench.report.experiments
DESCBENCH_SUFFIX = "_descbench"

# With verification.convention: workbench, right after the identification: the workbench's own
# numbers, where a reader of the database looks first (present ones only, in this order).
WORKBENCH_FIRST = ["workbench_verification_map", "workbench_retrieval_map", "workbench_verification_viewpoint_map",
                   "workbench_verification_illumination_map", "workbench_retrieval_viewpoint_map",
                   "workbench_retrieval_illumination_map", "retrieval_num_true_positives", "retrieval_num_hard_negatives"]

# Every column of the workbench's ``results`` table (schema v3.4) that descbench's ``results`` may
# hold, with what it holds here. A name of the workbench's schema not listed here must not appear
# in descbench's table (build_database raises): a workbench name means the workbench's quantity.
DW_RESULTS_SCHEMA = (
    "id", "experiment_id", "true_map_macro", "true_map_micro", "true_map_macro_with_zeros", "true_map_micro_with_zeros",
    "image_retrieval_map", "viewpoint_map", "illumination_map", "viewpoint_map_with_zeros", "illumination_map_with_zeros",
    "keypoint_verification_ap", "verification_viewpoint_ap", "verification_illumination_ap", "keypoint_retrieval_ap",
    "retrieval_viewpoint_ap", "retrieval_illumination_ap", "retrieval_num_true_positives", "retrieval_num_hard_negatives",
    "retrieval_num_distractors", "mean_average_precision", "legacy_mean_precision", "precision_at_1", "precision_at_5",
    "recall_at_1", "recall_at_5", "total_matches", "total_keypoints", "processing_time_ms", "timestamp",
    "descriptor_time_cpu_ms", "descriptor_time_gpu_ms", "match_time_cpu_ms", "match_time_gpu_ms", "total_pipeline_cpu_ms",
    "total_pipeline_gpu_ms", "metadata",
)
DW_COLUMNS = {
    "experiment_id": "this database's experiments.experiment_id",
    "true_map_micro": "mean AP over queries with R >= 1",
    "true_map_macro": "= true_map_macro_by_scene",
    **{k: f"= {v}" for k, v in DW_ALIASES.items() if k != "true_map_macro"},
    "viewpoint_map": "macro over v_ scenes", "illumination_map": "macro over i_ scenes",
    **{k: f"= {v} (verification.convention: workbench; NULL otherwise; descbench's own: {k}{DESCBENCH_SUFFIX})"
       for k, v in DW_BOJANIC.items()},
    "retrieval_num_true_positives": "the workbench's +1 count (verification.convention: workbench only)",
    "retrieval_num_hard_negatives": "the workbench's 0 count (verification.convention: workbench only)",
    "retrieval_num_distractors": "-1 count: queries x drawn distractors",
    "mean_average_precision": "the workbench's rule: true_map_macro_by_scene, true_map_micro where that is not > 0",
    "precision_at_1": "fraction of R >= 1 queries ranked first", "precision_at_5": "the same within 5",
    "recall_at_1": "= precision_at_1 (R = 1)", "recall_at_5": "= precision_at_5 (R = 1)",
    "processing_time_ms": "the scoring tasks' wall time summed over scenes (comparison.csv's; the workbench's "
                          "experiment runner leaves it 0, result_recording.cpp:24)",
    "metadata": "the seed's key=value; string",
    "descriptor_time_cpu_ms": "wall time of the row's descriptor jobs that ran on the CPU; NULL when all ran on a GPU "
                              "(the workbench: wall time of its descriptor computation, whatever the device)",
    "descriptor_time_gpu_ms": "wall time of the row's descriptor jobs that ran on a GPU; NULL when none did (the workbench "
                              "writes 0)",
    "match_time_cpu_ms": "wall time of the row's scoring jobs: the one screen pass matching every pair's descriptors, and "
                         "every scoring task's metrics and files (the workbench: its pairwise matching only)",
    "match_time_gpu_ms": "NULL: scoring never runs on a GPU (the workbench writes 0)",
    "total_pipeline_cpu_ms": "keypoint + descriptor + scoring jobs' wall time on the CPU (the workbench: detect + compute "
                             "+ match); NULL when none ran on the CPU",
    "total_pipeline_gpu_ms": "the same for the jobs that ran on a GPU; NULL when none did (the workbench writes 0)",
}


# The workbench's patch_benchmark_results table: its CREATE TABLE (DatabaseManager.cpp:119-143)
# with descbench's precision and grouping added and without its foreign key (this database's
# experiments table is keyed by experiment_id, not id); the columns from descriptor_name to metadata are
# descbench.patches.workbench.TABLE_COLUMNS (checked by patch_benchmark_rows).
PATCH_BENCHMARK_SQL = """CREATE TABLE patch_benchmark_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id INTEGER NOT NULL,
    descriptor_name TEXT NOT NULL,
    descriptor_dimension INTEGER DEFAULT 0,
    map_overall REAL, accuracy_overall REAL,
    map_easy REAL, map_hard REAL, map_tough REAL,
    map_illumination REAL, map_viewpoint REAL,
    map_illumination_easy REAL, map_illumination_hard REAL, map_viewpoint_easy REAL, map_viewpoint_hard REAL,
    num_scenes INTEGER, num_patches INTEGER, processing_time_ms REAL, metadata TEXT,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    precision TEXT, grouping TEXT
)"""


def patch_benchmark_rows(table: pd.DataFrame, experiment_id: int, where: str) -> pd.DataFrame:
    """The ``patch_benchmark_results`` rows from the report's workbench table (``where`` names its
    file in errors): ``id``, ``experiment_id``, the workbench's columns, ``created_at``,
    ``precision``, ``grouping``."""
    from descbench.patches.workbench import TABLE_COLUMNS

    cols = list(TABLE_COLUMNS) + ["created_at", "precision", "grouping"]
    missing = [c for c in cols if c not in table.columns]
    if missing:
        raise DataError(f"{where} lacks the columns {missing}; rebuild the patch report (snakemake --forcerun patch_report)")
    out = table[cols].copy()
    out["metadata"] = out["metadata"].fillna("")  # an empty key=value; string reads back from CSV as NaN
    out.insert(0, "experiment_id", experiment_id)
    out.insert(0, "id", np.arange(1, len(out) + 1))
    return out


# The workbench's timing columns, from the timings table (descbench.report.timings: which jobs a
# row counts): column -> (the stages it adds up, on a GPU or on the CPU).
DW_TIMINGS = {
    "descriptor_time_cpu_ms": (("descriptors",), False), "descriptor_time_gpu_ms": (("descriptors",), True),
    "match_time_cpu_ms": (("scoring",), False), "match_time_gpu_ms": (("scoring",), True),
    "total_pipeline_cpu_ms": (STAGES, False), "total_pipeline_gpu_ms": (STAGES, True),
}


def timing_columns(timings: pd.DataFrame) -> pd.DataFrame:
    """:data:`DW_TIMINGS`' columns of each row of ``timings`` (with its ``descriptor`` and
    ``keypoint_set``): a sum over its stages of :func:`descbench.report.timings.on_device`, NULL
    where none of those stages' jobs ran on that device, or where some of their jobs are not timed
    (results made before descbench recorded times)."""
    out = timings[["descriptor", "keypoint_set"]].copy()
    for col, (stages, gpu) in DW_TIMINGS.items():
        parts = pd.concat([on_device(timings, s, gpu) for s in stages], axis=1)
        timed = np.logical_and.reduce([timings[f"{s}_jobs_timed"] == timings[f"{s}_jobs"] for s in stages])
        out[col] = parts.sum(axis=1, min_count=1).where(timed, np.nan)
    return out


def git_commit(directory: Path) -> str:
    """The checkout's commit (``+dirty`` if tracked files differ), or ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def workbench_bojanic_columns(comparison: pd.DataFrame) -> pd.DataFrame:
    """``comparison`` with :data:`DW_BOJANIC`'s names holding the workbench's quantity: descbench's
    column ``<name>`` (and ``<name>_ci_low`` / ``_ci_high``) renamed ``<name>_descbench`` (``..._ci_low``),
    then ``<name>`` = the workbench's column, NaN (NULL) where the run did not compute it."""
    renamed = {}
    for dw in DW_BOJANIC:
        for tail in ("", "_ci_low", "_ci_high"):
            if dw + tail in comparison.columns:
                renamed[dw + tail] = dw + DESCBENCH_SUFFIX + tail
    t = comparison.rename(columns=renamed)
    for dw, workbench in DW_BOJANIC.items():
        t[dw] = t[workbench] if workbench in t.columns else float("nan")
    return t


def results_rows(comparison: pd.DataFrame, experiment_id: int, timings: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ``results`` table: the seed's columns first, then identification and sweep settings, the
    workbench's other columns (:data:`DW_ALIASES`), its own numbers (:data:`WORKBENCH_FIRST`), its
    timing columns from ``timings`` (:data:`DW_TIMINGS`; none without it), then everything else."""
    t = workbench_bojanic_columns(comparison)
    if timings is not None:
        times = timing_columns(timings)
        # a row whose jobs have no timing files is there, its times NULL; a row that is not there is an error
        lost = [k for k in zip(t.descriptor, t.keypoint_set) if k not in set(zip(times.descriptor, times.keypoint_set))]
        if lost:
            raise DataError(f"timings.csv has no row of {lost}, which comparison.csv has; rebuild the report: "
                            "snakemake --cores N --forcerun report")
        t = t.merge(times, on=["descriptor", "keypoint_set"], how="left", validate="one_to_one")
    t["true_map_macro"] = t["true_map_macro_by_scene"]
    macro, micro = t["true_map_macro_by_scene"], t.get("true_map_micro", pd.Series(np.nan, index=t.index))
    t["mean_average_precision"] = macro.where(macro > 0, micro)  # the workbench's recordResults
    for c in SEED_COLUMNS:
        if c not in t.columns:
            t[c] = float("nan")
    for dw, ours in DW_ALIASES.items():
        if dw not in SEED_COLUMNS and ours in t.columns:
            t[dw] = t[ours]
    t.insert(0, "experiment_id", experiment_id)
    ident = ["experiment_id", "descriptor", "keypoint_set"]
    aliases = [c for c in DW_ALIASES if c not in SEED_COLUMNS and c in t.columns]
    bojanic = [c for c in DW_BOJANIC if c not in SEED_COLUMNS]
    first = [c for c in WORKBENCH_FIRST if c in t.columns]
    sweeps = [c for c in t.columns if c == "sweep" or c.startswith("sweep:")]  # descbench.sweeps.sweep_columns
    timing = [c for c in DW_TIMINGS if c in t.columns]
    lead = SEED_COLUMNS + ident + sweeps + ["true_map_macro_by_scene"] + aliases + first + bojanic + timing
    out = t[lead + [c for c in t.columns if c not in lead]]
    foreign = sorted(set(out.columns) & set(DW_RESULTS_SCHEMA) - set(DW_COLUMNS))
    if foreign:
        raise ValueError(f"results table: {foreign} are the C++ workbench's column names for its own quantities; "
                         "give descbench's column another name or declare it in descbench.report.database.DW_COLUMNS")
    return out


def build_database(out: Path, report_dir: Path, experiment: dict, patch_benchmark: Path | None = None) -> None:
    """Write ``out`` (SQLite) from the report files in ``report_dir``; ``experiment``: name,
    dataset, config, versions, git_commit, n_scenes (inputs_sha256 is read from keypoint_stats).
    ``patch_benchmark``: the workbench patch benchmark's table (``workbench_patch_benchmark.csv``)
    when it ran, the ``patch_benchmark_results`` table's rows; None: no such table."""
    report_dir = Path(report_dir)
    comparison = pd.read_csv(report_dir / "comparison.csv")
    if "retrieval_num_true_positives" in comparison.columns and "retrieval_num_positives_descbench" not in comparison.columns:
        # written before issue 18: that name held descbench's count, not the workbench's
        raise DataError(f"{report_dir / 'comparison.csv'} was written by an older descbench (its retrieval_num_true_positives "
                        "is descbench's count, not the workbench's); rebuild the report first: snakemake --forcerun report")
    timings_csv = report_dir / "timings.csv"
    if not timings_csv.is_file():
        raise DataError(f"{timings_csv} is missing (a report written by an older descbench); rebuild the report first: "
                        "snakemake --cores N --forcerun report")
    timings = pd.read_csv(timings_csv)
    stats = pd.read_csv(report_dir / "keypoint_stats.csv")
    sig = pd.read_csv(report_dir / "significance.csv")
    exp = pd.DataFrame([{
        "experiment_id": 1, "name": experiment["name"], "dataset": experiment["dataset"],
        "config_json": json.dumps(experiment["config"], sort_keys=True), "versions_json": json.dumps(experiment["versions"], sort_keys=True),
        "git_commit": experiment["git_commit"],
        "inputs_sha256": str(stats["inputs_sha256"].iloc[0]) if len(stats) and "inputs_sha256" in stats else None,
        "n_scenes": int(experiment["n_scenes"]),
    }])
    patch_rows = None
    if patch_benchmark is not None:
        patch_rows = patch_benchmark_rows(pd.read_csv(patch_benchmark), 1, str(patch_benchmark))
    stats.insert(0, "experiment_id", 1)
    sig.insert(0, "experiment_id", 1)
    with atomic_path(out) as tmp:  # a partial database never has the final name
        with sqlite3.connect(tmp) as con:
            exp.to_sql("experiments", con, index=False)
            results_rows(comparison, 1, timings).to_sql("results", con, index=False)
            timings.insert(0, "experiment_id", 1)
            timings.to_sql("timings", con, index=False)
            stats.to_sql("keypoint_sets", con, index=False)
            sig.to_sql("significance", con, index=False)
            con.execute("CREATE INDEX results_by_name ON results (descriptor, keypoint_set)")
            if patch_rows is not None:
                con.execute(PATCH_BENCHMARK_SQL)
                con.execute("CREATE INDEX idx_patch_benchmark_experiment ON patch_benchmark_results (experiment_id)")
                patch_rows.to_sql("patch_benchmark_results", con, index=False, if_exists="append")
        con.close()
