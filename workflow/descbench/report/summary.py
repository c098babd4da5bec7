"""What the terminal shows at the end of a run (the workflow's ``onsuccess``): the headline table,
the cases that are not plain results (empty images, metrics without data, fewer distractor scenes
than configured, pairs without matches, jobs made before descbench recorded times), and where every
output is.

Pure text from the report files; nothing is recomputed, so the summary says exactly what the
files say. Sweep variants are shown with their settings (``sweep``, ``sweep:<path>``) and, with
``verification.convention: workbench``, the C++ workbench's own numbers (``workbench_*``) after
descbench's, each group explained by a legend line (:func:`column_notes`, shared with comparison.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from descbench.jobtiming import TIME_THEM

SUMMARY_COLUMNS = ["descriptor", "keypoint_set", "true_map_micro", "viewpoint_map", "illumination_map",
                   "keypoint_verification_ap", "mma_at_3", "homography_accuracy_at_3"]

# With verification.convention: workbench, the C++ DescriptorWorkbench's own numbers are shown too
# (terminal and comparison.md), after descbench's, under their own names and with a legend line.
WORKBENCH_COLUMNS = ["workbench_verification_map", "workbench_retrieval_map"]


def sweep_column_names(columns) -> list[str]:
    """The sweep columns of a table (descbench.sweeps.sweep_columns: ``sweep`` and
    ``sweep:<path>``), in table order."""
    return [c for c in columns if c == "sweep" or str(c).startswith("sweep:")]


def sweep_cell(v) -> str:
    """A sweep setting as written in the config: ``-`` where the row is no sweep's variant."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def column_notes(columns) -> list[str]:
    """One line per column group shown beside descbench's own metrics (sweep settings, the
    workbench's numbers): what it is, so that a reader of the terminal or comparison.md needs no
    other file."""
    notes = []
    if sweep_column_names(columns):
        notes.append("sweep, sweep:<path>: the sweep (config `sweeps:`) that made the row's variant and the "
                     "setting it gives each swept path; - = not a sweep variant")
    if any(c in columns for c in WORKBENCH_COLUMNS):
        notes.append("workbench_*: the C++ DescriptorWorkbench's own keypoint verification / retrieval numbers "
                     "(verification.convention: workbench: one pooled list per scene, every keypoint of images 2..6 "
                     "and the distractors, +1 for every keypoint at the nearest distance to H q within tau_px, mean over "
                     "scenes); "
                     "keypoint_verification_ap and keypoint_retrieval_ap stay descbench's definitions")
    return notes


def _fmt(v) -> str:
    if isinstance(v, float):
        return "n/a (no data)" if math.isnan(v) else f"{v:.4f}"
    return str(v)


def _count(r, key: str) -> int:
    """An integer column of a table row; 0 when absent (task disabled) or empty."""
    v = r.get(key, 0)
    return 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def degenerate_notes(table: pd.DataFrame, distractor_scenes: int | None) -> list[str]:
    """One line per (descriptor, keypoint set) whose numbers are not plain results."""
    notes = []
    if "weights" in table.columns:  # learned networks with weights: random, said once, before the rest
        rows = [f"{r['descriptor']} on {r['keypoint_set']}" for _, r in table.iterrows() if "RANDOM(" in str(r["weights"])]
        if rows:
            notes.append(f"RANDOM WEIGHTS: {len(rows)} of {len(table)} row(s) use randomly initialised networks, not a published "
                         f"model (their `weights` column says which): {', '.join(rows)}; point weights: at the published files "
                         "for real numbers")
    for _, r in table.iterrows():
        who = f"{r['descriptor']} on {r['keypoint_set']}"
        if r.get("empty_images", 0):
            notes.append(f"{who}: {int(r['empty_images'])} image(s) had no keypoint after the filters (scored as empty)")
        missing = [c for c in SUMMARY_COLUMNS[2:] if c in table.columns and isinstance(r[c], float) and math.isnan(r[c])]
        n_pairs, n_empty_pairs = _count(r, "matching_pairs"), _count(r, "pairs_without_keypoints")
        if missing:
            # every pair without keypoints: no query has a ground truth, no pair has a match, so no
            # metric has data (the cause, named; otherwise the table's own counts tell it)
            why = (f": every one of the {n_pairs} pair(s) has an image without keypoints" if n_pairs and n_empty_pairs == n_pairs
                   else "")
            notes.append(f"{who}: no data for {', '.join(missing)} (shown as n/a: nothing to average, not 0){why}")
        if distractor_scenes and "n_distractor_scenes_min" in table.columns and r["n_distractor_scenes_min"] < distractor_scenes:
            notes.append(f"{who}: verification used only {int(r['n_distractor_scenes_min'])} distractor scene(s) for some "
                         f"scene (configured {distractor_scenes}; too few other scenes)")
        if r.get("pairs_without_keypoints", 0):
            notes.append(f"{who}: {int(r['pairs_without_keypoints'])} pair(s) with an image without keypoints "
                         "(no data: left out of every matching and homography mean, shown as n/a if no pair is left)")
        if r.get("pairs_without_matches", 0):
            notes.append(f"{who}: {int(r['pairs_without_matches'])} of {int(r['matching_pairs'])} pair(s) without any "
                         "mutual-nearest-neighbour match (their precision and MMA count as 0, their homography as failed)")
    return notes


def _adjustment(report_dir: Path) -> str:
    """How significance.csv's p_adjusted was computed, from its own columns ('' if not there)."""
    from descbench.metrics.bootstrap import CORRECTION_NAMES

    csv = report_dir / "significance.csv"
    sig = pd.read_csv(csv) if csv.exists() else pd.DataFrame()
    if "correction" not in sig.columns or not len(sig):
        return ""
    if sig.correction.iloc[0] == "none":
        return "; p-values not corrected for multiple comparisons"
    method = sig.correction.iloc[0]
    return (f"; p_adjusted: {CORRECTION_NAMES.get(method, method)} over all {int(sig.family_size.iloc[0])} tests "
            "of the table, p_value raw")


def untimed_rows_note(timings: pd.DataFrame) -> str | None:
    """The note on a timings table (``timings.csv``, descbench.report.timings) whose rows hold jobs
    without a timing file; None when every job has one."""
    n = int((timings["n_jobs_timed"] < timings["n_jobs"]).sum())
    if not n:
        return None
    return (f"{n} of {len(timings)} rows hold jobs without a timing file (results made before descbench recorded times): "
            f"their times are NaN in timings.csv; to time them: {TIME_THEM}")


def run_summary(report_dir: Path, distractor_scenes: int | None = None) -> str:
    """The end-of-run text for the report in ``report_dir`` (empty if there is no report yet)."""
    report_dir = Path(report_dir)
    csv = report_dir / "comparison.csv"
    if not csv.exists():
        return ""
    table = pd.read_csv(csv)
    sweeps = sweep_column_names(table.columns)
    cols = ([c for c in SUMMARY_COLUMNS[:2] if c in table.columns] + sweeps
            + [c for c in SUMMARY_COLUMNS[2:] + WORKBENCH_COLUMNS if c in table.columns])
    shown = table[cols]
    cell = {c: (sweep_cell if c in sweeps else _fmt) for c in cols}
    widths = {c: max(len(c), *(len(cell[c](v)) for v in shown[c])) for c in cols}
    lines = ["", "descbench results (" + str(csv) + "):", "  " + "  ".join(c.ljust(widths[c]) for c in cols)]
    for _, r in shown.iterrows():
        lines.append(("  " + "  ".join(cell[c](r[c]).ljust(widths[c]) for c in cols)).rstrip())
    legend = column_notes(cols)
    if legend:
        lines += [""] + [f"  {n}" for n in legend]
    notes = degenerate_notes(table, distractor_scenes)
    if (report_dir / "timings.csv").exists():  # jobs made before descbench recorded times (descbench.report.timings)
        notes += [n for n in [untimed_rows_note(pd.read_csv(report_dir / "timings.csv"))] if n]
    if notes:
        lines += ["", "Not plain results:"] + [f"  - {n}" for n in notes]
    lines += ["", "Outputs:",
              f"  comparison table   {report_dir / 'comparison.md'} (.csv, .parquet: every metric)",
              f"  per-scene values   {report_dir / 'per_scene.csv'}",
              f"  keypoint sets      {report_dir / 'keypoint_stats.md'}",
              *([f"  pipelines          {report_dir / 'pipelines.md'} (.csv, .parquet: matchers, homography AUC per estimator)"]
                if (report_dir / "pipelines.md").exists() else []),
              f"  significance       {report_dir / 'significance.md'} (paired tests between descriptors"
              f"{_adjustment(report_dir)})",
              f"  timings            {report_dir / 'timings.md'} (each stage's jobs: wall and CPU time, device)",
              f"  plots              {report_dir / 'plots'}/*.png (and .svg)",
              f"  results database   {report_dir.parent / 'results.sqlite'} (sqlite3: SELECT * FROM results)",
              "  HTML report        snakemake --report report.html (tables and captioned plots)",
              *([f"  inspector page     {report_dir / 'inspector.html'} (per-pair matches on the worst or most different pairs, "
                 "where it fails; in the HTML report too)"]
                if (report_dir / "inspector.html").exists() else []),
              *([f"  inspector          {inspect_command(report_dir.parent, table)}"] if "mma_at_3" in table.columns else [])]
    return "\n".join(lines) + "\n"


def inspect_command(results_dir: Path, table: pd.DataFrame) -> str:
    """The ``descbench inspect`` command for a run's first (keypoint set, descriptor) row of the
    comparison ``table``, against the next descriptor on the same keypoint set when there is one:
    the page of per-pair matches and where the method fails (:mod:`descbench.report.inspect`).
    Started by this process's interpreter (the one running Snakemake at the end of a run), which
    imports descbench even where its venv is not activated."""
    import shlex
    import sys

    kpset, desc = str(table.keypoint_set.iloc[0]), str(table.descriptor.iloc[0])
    others = [str(d) for d, k in zip(table.descriptor, table.keypoint_set) if str(k) == kpset and str(d) != desc]
    vs = f" --vs {shlex.quote(others[0])}" if others else ""
    return (f"{shlex.quote(sys.executable)} -m descbench inspect --results {shlex.quote(str(results_dir))} --keypoint-set {shlex.quote(kpset)} "
            f"--descriptor {shlex.quote(desc)}{vs} --out inspect.html (per-pair matches, where it fails)")


def run_stopped_hint(logs_dir: Path | str, interrupted_by: str | None = None) -> str:
    """The end-of-run text when the run did not finish (the workflow's ``onerror``): interrupted
    (``interrupted_by``: the signal's name, descbench.smktuning.interrupted) or a job failed."""
    if interrupted_by:
        return (f"\ndescbench: the run was interrupted ({interrupted_by}); its running jobs were stopped and their "
                "incomplete outputs removed. Rerun the same command to go on: finished jobs are kept.")
    return ("\ndescbench: the run stopped; the failing job's own message is above (its log under "
            f"{logs_dir}). Fix it and rerun the same command: finished jobs are kept and incomplete "
            "outputs are redone. After a hard kill, run `snakemake --unlock` first.")
