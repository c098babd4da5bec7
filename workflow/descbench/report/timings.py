"""The run's timings table (``report/timings.{csv,md,html}``): one row per (descriptor, keypoint
set), added up from its jobs' timing files (:mod:`descbench.jobtiming`: ``job_timing.json`` in
each job's batch directory).

**Which jobs a row counts** (:func:`job_files`), for descriptor ``d`` on keypoint set ``k``:

- ``keypoints``: every keypoint job of ``k`` (one per scene batch), which detects ``k`` or, for a
  set derived from others (filters, intersection), derives it from their files. A derived set
  counts its own jobs only: its source sets' jobs are on their own rows. The same jobs are on the
  row of every descriptor of ``k``, so a sum of the column over descriptors counts them once per
  descriptor.
- ``descriptors``: every descriptor job, on ``k``, of the descriptor whose files ``d``'s scoring
  reads: ``d`` itself, or its base when it sets ``features_of`` (a scoring variant computes no
  descriptor of its own, so its row repeats its base's time). A composite counts its own jobs
  (reading and aggregating its components' files), not its components' (their own rows).
- ``scoring``: every scoring job of (``k``, ``d``), one per batch (every enabled scoring task); its
  timing file is read from the folder of the first enabled task (:func:`descbench.tasks.score_tasks_on`).

**Jobs without a timing file.** A job directory without one holds results made before descbench
recorded times: they are complete (nothing reruns on upgrade) but not timed. Such a job counts in
``<stage>_jobs`` and not in ``<stage>_jobs_timed``, and its stage's times on the row are NaN (NULL
in the database), also when only some of the stage's jobs lack one: a sum over part of the jobs
would read as the stage's time. The report job prints one line in its log saying how many jobs are
not timed and how to time them (:func:`untimed_note`: rerun them,
:data:`descbench.jobtiming.TIME_THEM`), and the end-of-run summary says it too
(:func:`descbench.report.summary.untimed_rows_note`). A timing file that is unreadable or lacks a
field is an error naming it and the fix (:func:`descbench.jobtiming.read_timing`), and so is a job
folder that is not there at all.

**Columns** (:data:`COLUMNS`): ``descriptor``, ``keypoint_set``; per stage (``keypoints``,
``descriptors``, ``scoring``): ``<stage>_wall_ms`` and ``<stage>_cpu_time_ms`` (sums over the
stage's jobs of their wall time and of their process CPU time), ``<stage>_jobs`` (every job of the
stage), ``<stage>_jobs_timed`` (those with a timing file), ``<stage>_gpu_jobs`` (timed jobs that
ran on a GPU) and ``<stage>_gpu_wall_ms`` (their wall time; NaN when none did); ``total_wall_ms``
and ``total_cpu_time_ms`` (the three stages; NaN when one is), ``n_jobs``, ``n_jobs_timed`` and
``device`` (the distinct ``device_name`` of the row's timed jobs, stage order, joined by ``; ``).

A stage's wall time is a sum over jobs: the time they take one after another (jobs that ran in
parallel finished sooner). Times vary from run to run, so they are in no Parquet file; the
comparison table's ``processing_time_ms`` stays what it was (the scoring tasks' wall time summed
over scenes, a part of ``scoring_wall_ms``). The database (:mod:`descbench.report.database`)
stores this table as ``timings`` and fills the C++ workbench's timing columns from it
(:func:`on_device`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from descbench import io
from descbench.jobtiming import STAGES, TIME_THEM, read_timing
from descbench.paths import ResultPaths
from descbench.tasks import score_tasks_on

if TYPE_CHECKING:
    import pandas as pd

STAGE_RULES = {"keypoints": "keypoints", "descriptors": "descriptors", "scoring": "score"}  # the rule writing each file
STAGE_COLUMNS = ("wall_ms", "cpu_time_ms", "jobs", "jobs_timed", "gpu_jobs", "gpu_wall_ms")
COLUMNS = (["descriptor", "keypoint_set"] + [f"{s}_{c}" for s in STAGES for c in STAGE_COLUMNS]
           + ["total_wall_ms", "total_cpu_time_ms", "n_jobs", "n_jobs_timed", "device"])


def job_files(paths: ResultPaths, keypoint_set: str, descriptor: str, features_of: str | None = None,
              score_task: str | None = None) -> dict[str, list[Path]]:
    """``{stage: [timing file of every batch]}`` of one row (the module's definition);
    ``features_of``: the descriptor whose files ``descriptor``'s scoring reads (default: itself);
    ``score_task``: the first enabled scoring task, whose folder holds the scoring jobs' files
    (None: no scoring jobs)."""
    base = features_of or descriptor
    batches = list(paths.batches)
    return {"keypoints": [Path(paths.job_timing("keypoints", keypoint_set, None, b)) for b in batches],
            "descriptors": [Path(paths.job_timing("descriptors", keypoint_set, base, b)) for b in batches],
            "scoring": [Path(paths.job_timing("scoring", keypoint_set, descriptor, b, score_task)) for b in batches]
            if score_task is not None else []}


def not_timed(path: Path) -> bool:
    """Whether timing file ``path``'s job folder is there without it (results made before
    descbench recorded times)."""
    path = Path(path)
    return path.parent.is_dir() and not path.exists()


def timing_of(path: Path, stage: str) -> dict | None:
    """The job's timing record (:func:`descbench.jobtiming.read_timing`), or None when the job is
    :func:`not_timed`. A missing job folder, or an unreadable file, is an error naming it."""
    return None if not_timed(path) else read_timing(path, STAGE_RULES[stage])


def row(descriptor: str, keypoint_set: str, files: dict[str, list[Path]]) -> dict:
    """One row of the table from ``files`` (:func:`job_files`), every file checked (:func:`timing_of`)."""
    nan = float("nan")
    out: dict = {"descriptor": descriptor, "keypoint_set": keypoint_set}
    names: list[str] = []
    for stage in STAGES:
        found = [timing_of(f, stage) for f in files[stage]]
        recs = [r for r in found if r is not None]
        every = len(recs) == len(found)  # times of part of a stage's jobs are not its time
        gpu = [r for r in recs if r["device"] == "cuda"]
        out[f"{stage}_wall_ms"] = float(sum(r["wall_ms"] for r in recs)) if every else nan
        out[f"{stage}_cpu_time_ms"] = float(sum(r["cpu_time_ms"] for r in recs)) if every else nan
        out[f"{stage}_jobs"] = len(found)
        out[f"{stage}_jobs_timed"] = len(recs)
        out[f"{stage}_gpu_jobs"] = len(gpu)
        out[f"{stage}_gpu_wall_ms"] = float(sum(r["wall_ms"] for r in gpu)) if gpu and every else nan
        names += [r["device_name"] for r in recs]
    out["total_wall_ms"] = float(sum(out[f"{s}_wall_ms"] for s in STAGES))  # NaN when a stage's is
    out["total_cpu_time_ms"] = float(sum(out[f"{s}_cpu_time_ms"] for s in STAGES))
    out["n_jobs"] = sum(out[f"{s}_jobs"] for s in STAGES)
    out["n_jobs_timed"] = sum(out[f"{s}_jobs_timed"] for s in STAGES)
    out["device"] = "; ".join(dict.fromkeys(names))
    return out


def row_files(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict) -> list[dict[str, list[Path]]]:
    """:func:`job_files` of each (keypoint set, descriptor) of ``combos``, under the validated config ``cfg``."""
    descs = cfg.get("descriptors", {})
    tasks = score_tasks_on(cfg)
    task = tasks[0] if tasks else None
    return [job_files(paths, k, d, (descs.get(d) or {}).get("features_of"), task) for k, d in combos]


def build(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict) -> pd.DataFrame:
    """The table, one row per (keypoint set, descriptor) of ``combos``, in that order."""
    import pandas as pd  # not at import: only the report and database jobs build tables

    rows = [row(d, k, files) for (k, d), files in zip(combos, row_files(paths, combos, cfg))]
    return pd.DataFrame(rows, columns=COLUMNS)


def untimed(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict) -> list[Path]:
    """Every job of the table's rows that is :func:`not_timed` (its timing file's path, each job once)."""
    files = dict.fromkeys(f for fs in row_files(paths, combos, cfg) for stage in STAGES for f in fs[stage])
    return [f for f in files if not_timed(f)]


def untimed_note(missing: list[Path]) -> str | None:
    """The report job's line about jobs without a timing file (:func:`untimed`); None when every job has one."""
    if not missing:
        return None
    return (f"descbench: {len(missing)} keypoint, descriptor or scoring job(s) have no timing file ({missing[0].name} in their "
            f"folder, e.g. {missing[0].parent}): their results were made before descbench recorded times, so the timings "
            "table counts them in <stage>_jobs but not <stage>_jobs_timed and leaves their times NaN. To time them, rerun "
            f"them: {TIME_THEM}")


def on_device(table: pd.DataFrame, stage: str, gpu: bool) -> pd.Series:
    """Wall time of ``stage``'s jobs that ran on a GPU (``gpu``) or on the CPU (not ``gpu``), per
    row of ``table``; NaN where none of its jobs did, or where some are not timed."""
    gpu_ms = table[f"{stage}_gpu_wall_ms"].fillna(0.0)
    timed = table[f"{stage}_jobs_timed"] == table[f"{stage}_jobs"]  # else unknown: NaN
    if gpu:
        return gpu_ms.where(timed & (table[f"{stage}_gpu_jobs"] > 0), np.nan)
    return (table[f"{stage}_wall_ms"] - gpu_ms).where(timed & (table[f"{stage}_jobs"] > table[f"{stage}_gpu_jobs"]), np.nan)


def to_markdown(table: pd.DataFrame) -> str:
    """The table's main columns (per stage wall and CPU time, totals, jobs, device), milliseconds rounded."""
    cols = (["descriptor", "keypoint_set"] + [f"{s}_{c}" for s in STAGES for c in ("wall_ms", "cpu_time_ms")]
            + ["total_wall_ms", "total_cpu_time_ms", "n_jobs", "n_jobs_timed", "device"])
    cell = lambda v: f"{v:.0f}" if isinstance(v, float) else str(v).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for _, r in table.iterrows()]
    return ("\n".join(lines) + "\n\nSums over each stage's jobs (wall: one after another); cpu_time: the jobs' process CPU "
            "time, every thread. nan: some of the stage's jobs have no timing file (made before descbench recorded times: "
            "n_jobs_timed < n_jobs). Which jobs a row counts: descbench.report.timings.\n")


def write(table: pd.DataFrame, out_dir: Path) -> None:
    """``timings.csv``, ``timings.md`` and ``timings.html`` of ``table`` (:func:`build`) in ``out_dir``."""
    from descbench.report.table import html_page

    out_dir = Path(out_dir)
    io.write_text(out_dir / "timings.csv", table.to_csv(index=False))
    io.write_text(out_dir / "timings.md", to_markdown(table))
    io.write_text(out_dir / "timings.html", html_page("Timings (ms)", table))
