"""The patch benchmarks' report: one table per benchmark across descriptors, and a plot of mAP
per task (``results/<exp>/report/patches/``).

* ``hbench.{csv,md,html}``: one row per descriptor. Image matching (seed 002): the mAP of each
  task file (``<split>_easy_illum`` ...: the mean over its pairs of the per-pair AP, vl_pr with
  NumPositives = patches) and their mean; patch and image retrieval (seed 003): the mAP (mean
  over queries) averaged over the task files of each jitter (pool sizes x seeds). Fractions.
* ``hpatches_benchmark.{csv,md,html}``: one row per (descriptor, split), in percent (x100 of
  what hpatches-benchmark's ``hpatches_results.py`` prints): verification ``avg_balanced`` (ROC
  AUC) and ``avg_imbalanced`` (AP) over the printed cases, matching ``matching_map`` (its printed
  mean: every sequence weighs the same), retrieval ``retrieval_map`` (its printed mean over the
  jitters at the largest pool size), every printed e/h/t cell, and the other aggregates under
  names that say what they are (:func:`hpbench_table`).
* ``workbench_patch_benchmark.{csv,md,html}`` (only with ``patches.workbench.enabled``): the C++
  DescriptorWorkbench's ``patch_benchmark`` (:mod:`descbench.patches.workbench`), one row per
  descriptor with the columns of its ``patch_benchmark_results`` table
  (:func:`workbench_table`).
* ``patches_map.{png,svg}``: the benchmarks' headline numbers per descriptor (colours as in
  the other figures: :func:`descbench.report.plots.descriptor_colours`); a third panel with the
  workbench's mAP when it ran.

The long tables (every task file and case) are the descriptors' ``eval/<name>/*.parquet`` files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from descbench import io
from descbench.errors import DataError
from descbench.fileops import atomic_path
from descbench.report.table import html_page

# eval/<desc>/: the workbench benchmark's wall time and finish time, written by the evaluation job
# (descbench.patches.stages.evaluate) outside the Parquet, whose content stays reproducible
WORKBENCH_TIMING = "workbench_timing.json"

JITTER = {"e": "easy", "h": "hard", "t": "tough"}


def _cell(v) -> str:
    if isinstance(v, (float, np.floating)):
        return "n/a" if np.isnan(v) else f"{v:.4f}" if abs(v) <= 1.0 else f"{v:.2f}"
    return str(v)


def markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def hbench_table(rows: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Descriptor -> its ``hbench.parquet`` rows (benchmark, task, metric, value, n) -> one row each."""
    out = []
    for name, df in rows.items():
        r = {"descriptor": name}
        m = df[(df.benchmark == "hbench_matching") & (df.metric == "map")]
        for t in m.itertuples():
            r[f"matching_{t.task}"] = t.value
        r["matching_map"] = float(m.value.mean()) if len(m) else np.nan
        ret = df[df.benchmark == "hbench_retrieval"]
        for metric in ("patch_map", "image_map"):
            for j, jname in (("e", "easy"), ("h", "hard")):
                sel = ret[(ret.metric == metric) & ret.task.str.contains(f"_{jname}_")]
                r[f"retrieval_{metric}_{jname}"] = float(sel.value.mean()) if len(sel) else np.nan
        out.append(r)
    return pd.DataFrame(out)


def hpbench_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Descriptor -> its ``hpatches_benchmark.parquet`` (tidy, percent) -> one row per split.

    Columns, headline first (:mod:`descbench.patches.hpbench`, the ``summarise_*`` functions):
    ``verification_balanced_auc`` / ``verification_imbalanced_ap`` (mean of the 6 printed cases),
    ``matching_map`` (``hpatches_results.py``'s printed mean: all sequences weigh the same),
    ``retrieval_map`` (its printed ``mean`` row at the largest pool size); then the printed cells
    (``verification_<protocol>_<negatives>_<jitter>``, ``matching_map_<jitter>``,
    ``retrieval_map_<jitter>`` at the largest pool, ``retrieval_map_pool<k>`` = the ``mean`` row);
    then the other aggregates under their own names: ``matching_map_mean_of_types`` (the mean of
    ``matching_map_i`` and ``matching_map_v``, the headline before issue 18),
    ``matching_map_<i|v>[_<jitter>]`` (per sequence type, ``results.py``) and
    ``retrieval_map_mean_over_pools`` (the mean over the pool sizes, the headline before issue 18).
    """
    out = []
    for name, df in tables.items():
        for split in dict.fromkeys(df.split):
            d = df[df.split == split]
            r = {"descriptor": name, "split": split}
            v = d[d.task == "verification"]
            m = d[d.task == "matching"]
            rt = d[d.task == "retrieval"]
            for task, rows, named in (("matching", m, "map_mean_of_types"), ("retrieval", rt, "map_mean_over_pools")):
                if len(rows) and not (rows.metric == named).any():
                    raise DataError(f"the hpatches-benchmark {task} rows of descriptor {name!r} (split {split!r}) have "
                                    f"no '{named}' row: they were evaluated before issue 18 changed the headline "
                                    f"definitions, so their 'map' row means something else; re-evaluate them "
                                    f"(snakemake --forcerun patch_evaluate)")
            for row in v[v.level == "summary"].itertuples():
                r[f"verification_{row.protocol}_{row.metric}"] = row.value
            for row in m[(m.level == "summary") & (m.seq_type == "all") & (m.metric == "map")].itertuples():
                r["matching_map"] = row.value
            for row in rt[(rt.level == "summary") & (rt.metric == "map")].itertuples():
                r["retrieval_map"] = row.value
            for row in v[v.level == "case"].itertuples():
                r[f"verification_{row.protocol}_{row.negatives}_{JITTER[row.jitter]}"] = row.value
            for row in m[(m.level == "case") & (m.seq_type == "all")].itertuples():
                r[f"matching_map_{JITTER[row.jitter]}"] = row.value
            for row in rt[(rt.level == "case") & (rt.metric == "map")].itertuples():
                r[f"retrieval_map_{JITTER[row.jitter]}"] = row.value
            for row in rt[(rt.level == "detail") & (rt.jitter == "all")].itertuples():
                r[f"retrieval_map_pool{int(row.pool_size)}"] = row.value
            for row in m[(m.level == "summary") & (m.metric == "map_mean_of_types")].itertuples():
                r["matching_map_mean_of_types"] = row.value
            for row in m[(m.level == "summary") & (m.seq_type != "all")].itertuples():
                r[f"matching_map_{row.seq_type}"] = row.value
            for row in m[(m.level == "case") & (m.seq_type != "all")].itertuples():
                r[f"matching_map_{row.seq_type}_{JITTER[row.jitter]}"] = row.value
            for row in rt[(rt.level == "summary") & (rt.metric == "map_mean_over_pools")].itertuples():
                r["retrieval_map_mean_over_pools"] = row.value
            out.append(r)
    return pd.DataFrame(out)


WORKBENCH_STEM = "workbench_patch_benchmark"
WORKBENCH_FILES = tuple(f"{WORKBENCH_STEM}.{ext}" for ext in ("csv", "md", "html"))


def workbench_table(rows: dict[str, pd.DataFrame], timings: dict[str, dict]) -> pd.DataFrame:
    """Descriptor -> its ``workbench.parquet`` row -> one row each, the workbench's
    ``patch_benchmark_results`` columns (:data:`descbench.patches.workbench.TABLE_COLUMNS`):

    * ``descriptor_name``, ``descriptor_dimension`` (the descriptor's width);
    * ``map_overall`` / ``accuracy_overall``: the mean over every (sequence, split) result of its
      mAP / nearest-neighbour match accuracy (each result: the mean over the split's target files
      of the file's mAP, AP = 1 / rank of the true match among all that file's patches);
    * ``map_easy|hard|tough``: the mean over the sequences' results of that split;
      ``map_illumination|viewpoint``: over all splits of the ``i_`` / other sequences;
      ``map_{illumination,viewpoint}_{easy,hard}``: of one type and split;
    * ``num_scenes`` (sequences), ``num_patches`` (ref patches x target files scored);
    * ``processing_time_ms``: the measured wall time of descbench's evaluation job's workbench
      part (the workbench's includes describing the patches; descbench describes them in other
      jobs); ``metadata``: ``key=value;`` settings (:func:`descbench.patches.stages.workbench_metadata`);
    * ``created_at``: when the evaluation finished (UTC, SQLite's ``CURRENT_TIMESTAMP`` format;
      the workbench's is the insertion time);

    then descbench's ``precision`` and ``grouping`` (``patches.workbench``). Every mean is
    float32-rounded at ``precision: float32``, as the workbench stores them.
    """
    from descbench.patches.workbench import TABLE_COLUMNS

    out = []
    for name, df in rows.items():
        if len(df) != 1:
            raise DataError(f"the workbench patch benchmark of descriptor {name!r} has {len(df)} rows, not 1; "
                            "re-evaluate it (snakemake --forcerun patch_evaluate)")
        r = {c: df[c].iloc[0] for c in TABLE_COLUMNS}
        t = timings.get(name)
        if t is None:
            raise DataError(f"the workbench patch benchmark of descriptor {name!r} has no timing file; "
                            "re-evaluate it (snakemake --forcerun patch_evaluate)")
        r["processing_time_ms"] = float(t["processing_time_ms"])
        r["created_at"] = t["created_at"]
        r["precision"] = df["precision"].iloc[0]
        r["grouping"] = df["grouping"].iloc[0]
        out.append(r)
    return pd.DataFrame(out)


def draw(hb: pd.DataFrame, hp: pd.DataFrame, names: list[str], out_dir: Path, wb: pd.DataFrame | None = None) -> None:
    """Grouped bars: HBench matching mAP per task and retrieval mAP per jitter (left),
    hpatches-benchmark's three task averages on the first split (right), and when ``wb`` has rows
    the workbench's mAP overall and per split and its accuracy (third panel)."""
    from descbench.report.drawing import descriptor_colours, pyplot

    plt = pyplot()

    colours = descriptor_colours(names)
    panels = []
    if len(hb):
        cols = [c for c in hb.columns if c.startswith(("matching_", "retrieval_")) and c != "matching_map"]
        panels.append(("HBench (seeds 002/003): mAP", hb, cols, 1.0))
    if len(hp):
        first = hp[hp.split == hp.split.iloc[0]]
        cols = [c for c in ("verification_balanced_auc", "verification_imbalanced_ap", "matching_map", "retrieval_map")
                if c in first.columns]
        panels.append((f"hpatches-benchmark, split {hp.split.iloc[0]} (percent)", first, cols, 100.0))
    if wb is not None and len(wb):
        cols = ["map_overall", "map_easy", "map_hard", "map_tough", "accuracy_overall"]
        panels.append(("DescriptorWorkbench patch_benchmark (mAP, NN accuracy)",
                       wb.rename(columns={"descriptor_name": "descriptor"}), cols, 1.0))
    ncols = max(2, len(panels))
    fig, axes = plt.subplots(1, ncols, figsize=(6.5 * ncols, 4.2), squeeze=False)
    for ax, (title, df, cols, top) in zip(axes[0], panels):
        x = np.arange(len(cols))
        width = 0.8 / max(1, len(df))
        for i, row in enumerate(df.itertuples(index=False)):
            vals = [getattr(row, c) for c in cols]
            ax.bar(x + i * width - 0.4 + width / 2, vals, width, color=colours[row.descriptor],
                   label=row.descriptor)
        ax.set_xticks(x, [c.replace("matching_", "match ").replace("retrieval_", "retr ").replace("map_", "mAP ")
                          for c in cols],
                      rotation=35, ha="right", fontsize=8)
        ax.set_ylim(0, top)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", linestyle=":")
        ax.legend(fontsize=8)
    for ax in axes[0][len(panels):]:
        ax.set_visible(False)
    for ext in ("png", "svg"):
        with atomic_path(out_dir / f"patches_map.{ext}") as tmp:
            fig.savefig(tmp, format=ext, dpi=120, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
    plt.close(fig)


def write(eval_dirs: list[Path], names: list[str], out_dir: Path,
          weights: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The patch report files of :data:`descbench.report.patches` from the evaluation folders;
    ``weights``: each descriptor's learned weights label (descbench.config.learned_weights), shown
    as a ``weights`` column on every row when any descriptor has one."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hb_rows, hp_rows, wb_rows, wb_times, metas = {}, {}, {}, {}, {}
    for name, d in zip(names, eval_dirs):
        d = Path(d)
        if (d / "hbench.parquet").exists():
            t, meta = io.read_table(d / "hbench.parquet")
            hb_rows[name], metas[name] = t.to_pandas(), meta
        if (d / "hpatches_benchmark.parquet").exists():
            t, meta = io.read_table(d / "hpatches_benchmark.parquet")
            hp_rows[name], metas[name] = t.to_pandas(), meta
        if (d / "workbench.parquet").exists():
            t, meta = io.read_table(d / "workbench.parquet")
            wb_rows[name], metas[name] = t.to_pandas(), meta
            timing = d / WORKBENCH_TIMING
            if timing.exists():
                wb_times[name] = json.loads(timing.read_text())
    if wb_rows and len(wb_rows) != len(names):
        missing = [n for n in names if n not in wb_rows]
        raise DataError(f"the workbench patch benchmark ran for {sorted(wb_rows)} but not for {missing}; "
                        "re-evaluate them (snakemake --forcerun patch_evaluate)")
    hb, hp = hbench_table(hb_rows), hpbench_table(hp_rows)
    wb = workbench_table(wb_rows, wb_times)
    if weights and any(weights):
        label = {n: w or "none" for n, w in zip(names, weights)}
        for table in (hb, hp):
            if len(table):
                table.insert(1, "weights", table.descriptor.map(label))
    if len(wb):
        if weights and any(weights):
            wb.insert(2, "weights", [label[n] for n in wb.descriptor_name])
        io.write_text(out_dir / f"{WORKBENCH_STEM}.csv", wb.to_csv(index=False))
        io.write_text(out_dir / f"{WORKBENCH_STEM}.md", markdown(wb))
        io.write_text(out_dir / f"{WORKBENCH_STEM}.html",
                      html_page("DescriptorWorkbench patch_benchmark (patch_benchmark_results: mAP, NN accuracy)", wb))
    for stem, table, title in (("hbench", hb, "HBench image matching and patch / image retrieval (mAP)"),
                               ("hpatches_benchmark", hp, "hpatches-benchmark verification / matching / retrieval (percent)")):
        io.write_text(out_dir / f"{stem}.csv", table.to_csv(index=False))
        io.write_text(out_dir / f"{stem}.md", markdown(table) if len(table) else "(benchmark disabled)\n")
        io.write_text(out_dir / f"{stem}.html", html_page(title, table))
    draw(hb, hp, names, out_dir, wb)
    io.write_text(out_dir / "patches_provenance.json",
                  json.dumps({n: m for n, m in metas.items()}, sort_keys=True, indent=1, default=str) + "\n")
    return hb, hp
