"""The run's timings table (``report/timings.{csv,md,html}``): one row per (descriptor, keypoint
set), added up from its jobs' timing files (:mod:`descbench.jobtiming`).

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
- ``scoring``: every scoring job of (``k``, ``d``), one per batch (every enabled scoring task).

**Columns** (:data:`COLUMNS`): ``descriptor``, ``keypoint_set``; per stage (``keypoints``,
``descriptors``, ``scoring``): ``<stage>_wall_ms`` and ``<stage>_cpu_time_ms`` (sums over the
stage's jobs of their wall time and of their process CPU time), ``<stage>_jobs``,
``<stage>_gpu_jobs`` (those that ran on a GPU) and ``<stage>_gpu_wall_ms`` (their wall time; NaN
when none did); ``total_wall_ms`` and ``total_cpu_time_ms`` (the three stages), ``n_jobs`` and
``device`` (the distinct ``device_name`` of the row's jobs, stage order, joined by ``; ``).

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
from descbench.jobtiming import STAGES, read_timing
from descbench.paths import ResultPaths

if TYPE_CHECKING:
    import pandas as pd

STAGE_RULES = {"keypoints": "keypoints", "descriptors": "descriptors", "scoring": "score"}  # the rule writing each file
STAGE_COLUMNS = ("wall_ms", "cpu_time_ms", "jobs", "gpu_jobs", "gpu_wall_ms")
COLUMNS = (["descriptor", "keypoint_set"] + [f"{s}_{c}" for s in STAGES for c in STAGE_COLUMNS]
           + ["total_wall_ms", "total_cpu_time_ms", "n_jobs", "device"])


def job_files(paths: ResultPaths, keypoint_set: str, descriptor: str, features_of: str | None = None) -> dict[str, list[Path]]:
    """``{stage: [timing file of every batch]}`` of one row (the module's definition);
    ``features_of``: the descriptor whose files ``descriptor``'s scoring reads (default: itself)."""
    base = features_of or descriptor
    batches = list(paths.batches)
    who = {"keypoints": (keypoint_set, None), "descriptors": (keypoint_set, base), "scoring": (keypoint_set, descriptor)}
    return {s: [Path(paths.job_timing(s, *who[s], b)) for b in batches] for s in STAGES}


def row(descriptor: str, keypoint_set: str, files: dict[str, list[Path]]) -> dict:
    """One row of the table from ``files`` (:func:`job_files`), every file checked (:func:`descbench.jobtiming.read_timing`)."""
    out: dict = {"descriptor": descriptor, "keypoint_set": keypoint_set}
    names: list[str] = []
    for stage in STAGES:
        recs = [read_timing(f, STAGE_RULES[stage]) for f in files[stage]]
        gpu = [r for r in recs if r["device"] == "cuda"]
        out[f"{stage}_wall_ms"] = float(sum(r["wall_ms"] for r in recs))
        out[f"{stage}_cpu_time_ms"] = float(sum(r["cpu_time_ms"] for r in recs))
        out[f"{stage}_jobs"] = len(recs)
        out[f"{stage}_gpu_jobs"] = len(gpu)
        out[f"{stage}_gpu_wall_ms"] = float(sum(r["wall_ms"] for r in gpu)) if gpu else float("nan")
        names += [r["device_name"] for r in recs]
    out["total_wall_ms"] = sum(out[f"{s}_wall_ms"] for s in STAGES)
    out["total_cpu_time_ms"] = sum(out[f"{s}_cpu_time_ms"] for s in STAGES)
    out["n_jobs"] = sum(out[f"{s}_jobs"] for s in STAGES)
    out["device"] = "; ".join(dict.fromkeys(names))
    return out


def build(paths: ResultPaths, combos: list[tuple[str, str]], cfg: dict) -> pd.DataFrame:
    """The table, one row per (keypoint set, descriptor) of ``combos``, in that order."""
    import pandas as pd  # not at import: the workflow reads job_files while it builds the job graph

    descs = cfg.get("descriptors", {})
    rows = [row(d, k, job_files(paths, k, d, (descs.get(d) or {}).get("features_of"))) for k, d in combos]
    return pd.DataFrame(rows, columns=COLUMNS)


def on_device(table: pd.DataFrame, stage: str, gpu: bool) -> pd.Series:
    """Wall time of ``stage``'s jobs that ran on a GPU (``gpu``) or on the CPU (not ``gpu``), per
    row of ``table``; NaN where none of its jobs did."""
    gpu_ms = table[f"{stage}_gpu_wall_ms"].fillna(0.0)
    if gpu:
        return gpu_ms.where(table[f"{stage}_gpu_jobs"] > 0, np.nan)
    return (table[f"{stage}_wall_ms"] - gpu_ms).where(table[f"{stage}_jobs"] > table[f"{stage}_gpu_jobs"], np.nan)


def to_markdown(table: pd.DataFrame) -> str:
    """The table's main columns (per stage wall and CPU time, totals, jobs, device), milliseconds rounded."""
    cols = (["descriptor", "keypoint_set"] + [f"{s}_{c}" for s in STAGES for c in ("wall_ms", "cpu_time_ms")]
            + ["total_wall_ms", "total_cpu_time_ms", "n_jobs", "device"])
    cell = lambda v: f"{v:.0f}" if isinstance(v, float) else str(v).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for _, r in table.iterrows()]
    return ("\n".join(lines) + "\n\nSums over each stage's jobs (wall: one after another); cpu_time: the jobs' process CPU "
            "time, every thread. Which jobs a row counts: descbench.report.timings.\n")


def write(table: pd.DataFrame, out_dir: Path) -> None:
    """``timings.csv``, ``timings.md`` and ``timings.html`` of ``table`` (:func:`build`) in ``out_dir``."""
    from descbench.report.table import html_page

    out_dir = Path(out_dir)
    io.write_text(out_dir / "timings.csv", table.to_csv(index=False))
    io.write_text(out_dir / "timings.md", to_markdown(table))
    io.write_text(out_dir / "timings.html", html_page("Timings (ms)", table))
