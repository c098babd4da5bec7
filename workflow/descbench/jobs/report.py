"""The report jobs: the comparison table (``report``), the figures (``plots``), the SQLite results
database (``database``) and one table across experiments (``compare``), over the run's result
files as :class:`descbench.paths.ResultPaths` names them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from descbench.jobs.common import json_arg, run_args, run_paths


def add_commands(sub) -> dict:
    """The report jobs' subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("report", help="comparison table across descriptors and keypoint sets, and the jobs' timings")
    run_args(p)
    p.add_argument("--provenance", required=True)
    p.add_argument("--out-dir", type=Path, required=True)

    p = sub.add_parser("plots", help="the run's figures (PNG + SVG) from the result files")
    run_args(p)
    p.add_argument("--report-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)

    p = sub.add_parser("database", help="(re)build the SQLite results database from the report files")
    p.add_argument("--report-dir", type=Path, required=True)
    p.add_argument("--name", required=True, help="experiment name")
    p.add_argument("--config", required=True, help="the validated config (JSON)")
    p.add_argument("--n-scenes", type=int, required=True)
    p.add_argument("--workflow-dir", type=Path, required=True, help="for the git commit")
    p.add_argument("--patch-benchmark", type=Path, default=None,
                   help="the workbench patch benchmark's table (report/patches/workbench_patch_benchmark.csv)")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("compare", help="one table across experiments (their report/comparison.parquet)")
    p.add_argument("experiments", type=Path, nargs="+", help="experiment folders (e.g. results/demo results/border20) or DescriptorWorkbench results .csv files")
    p.add_argument("--out", type=Path, default=None, help="write the table here (.csv or .md); default: print it")
    return {"report": run_report, "plots": run_plots, "database": run_database, "compare": run_compare}


def run_report(a: argparse.Namespace) -> None:
    """Write the comparison table (descbench.report.table.write) and the timings table
    (descbench.report.timings), print the first, and one line when some jobs are not timed."""
    from descbench.report import timings
    from descbench.report.table import entry_files, write

    paths, cfg, scenes = run_paths(a)
    combos = [tuple(c) for c in json_arg(a.combos)]
    entries = [entry_files(paths, ks, d, scenes, cfg) for ks, d in combos]
    times = timings.build(paths, combos, cfg)  # every job's timing file, read and checked before anything is written
    table = write(entries, cfg, a.out_dir, json_arg(a.provenance))
    timings.write(times, a.out_dir)
    print(table.drop(columns=["metadata"]).to_string(index=False))
    note = timings.untimed_note(timings.untimed(paths, combos, cfg))  # jobs made before descbench timed them
    if note:
        print(note, file=sys.stderr)


def run_plots(a: argparse.Namespace) -> None:
    from descbench.report.plots import make_figures

    paths, cfg, _ = run_paths(a)
    make_figures(paths, [tuple(c) for c in json_arg(a.combos)], cfg, a.report_dir, a.out_dir)


def run_database(a: argparse.Namespace) -> None:
    from descbench import io
    from descbench.report.database import build_database, git_commit

    cfg = json_arg(a.config)
    build_database(a.out, a.report_dir, {"name": a.name, "dataset": cfg["dataset"], "config": cfg, "versions": io.versions(),
                                          "git_commit": git_commit(a.workflow_dir), "n_scenes": a.n_scenes},
                   patch_benchmark=a.patch_benchmark)


def run_compare(a: argparse.Namespace) -> None:
    """The table to ``--out`` (.md: Markdown, else CSV) or, without it, printed as Markdown."""
    from descbench.report.experiments import compare_experiments, to_markdown

    table = compare_experiments(a.experiments)
    if a.out is None:
        print(to_markdown(table), end="")
    elif a.out.suffix == ".md":
        a.out.write_text(to_markdown(table))
    else:
        table.to_csv(a.out, index=False)
