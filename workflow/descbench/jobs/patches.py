"""The ``patches`` command: one step of the HPatches patch benchmarks, run by
:mod:`descbench.patches.stages` (generate, download, describe, tasks, evaluate, hbench-eval, report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from descbench.jobs.common import JobCommand, json_arg


def add_commands(sub) -> dict:
    """The ``patches`` subcommand and its steps; returns ``{command: function running it}``."""
    p = sub.add_parser("patches", help="HPatches patch benchmarks: one step (generate, download, describe, tasks, evaluate, report)")
    steps = p.add_subparsers(dest="step", required=True)
    q = steps.add_parser("generate", help="patches of one scene of a sequence dataset")
    q.add_argument("--scene-dir", type=Path, required=True)
    q.add_argument("--out-dir", type=Path, required=True)
    q.add_argument("--params", default="{}", help="patches.generate as JSON")
    q = steps.add_parser("download", help="download (resumable), extract and validate hpatches-release")
    q.add_argument("--urls", nargs="+", required=True)
    q.add_argument("--sha256", default=None)
    q.add_argument("--data-dir", type=Path, required=True)
    q.add_argument("--flag", type=Path, default=None)
    q = steps.add_parser("describe", help="one descriptor of one patch sequence (or its hpatches-benchmark CSV files)")
    q.add_argument("--patch-dir", type=Path, required=True)
    q.add_argument("--out", type=Path, required=True)
    q.add_argument("--name", required=True)
    q.add_argument("--spec", default=None, help="the descriptor's {family, params} as JSON")
    q.add_argument("--centre-keypoint", default="hpatches_benchmark")
    q.add_argument("--csv-root", type=Path, default=None)
    q.add_argument("--binary-packed", action="store_true")
    q.add_argument("--threads", type=int, default=1, help="the job's threads (OpenCV's and BLAS's pools, onnxruntime's)")
    q = steps.add_parser("tasks", help="the task files of every enabled patch benchmark")
    q.add_argument("--patch-root", type=Path, required=True)
    q.add_argument("--sequences", required=True, help="JSON list")
    q.add_argument("--config", required=True, help="the patches section as JSON")
    q.add_argument("--out-dir", type=Path, required=True)
    q = steps.add_parser("evaluate", help="every enabled patch benchmark for one descriptor")
    q.add_argument("--tasks", type=Path, required=True)
    q.add_argument("--name", required=True)
    q.add_argument("--config", required=True, help="the patches section as JSON")
    q.add_argument("--out-dir", type=Path, required=True)
    q.add_argument("files", type=Path, nargs="+", help="the descriptor's per-sequence Parquet files")
    q = steps.add_parser("hbench-eval", help="evaluate HBench .results files written by any tool (seeds 002/003 formats)")
    q.add_argument("--tasks", type=Path, required=True,
                   help="folder with matching/*.benchmark and retrieval/*.benchmark + .labels (a run's patches/tasks/hbench)")
    q.add_argument("--results", type=Path, required=True, help="folder with matching/<task>.results and retrieval/<task>.results")
    q.add_argument("--counts", type=Path, default=None, help="patches per sequence (a run's patches/tasks/counts.json): range checks")
    q.add_argument("--out", type=Path, default=None, help="write the table here (.csv); default: print it")
    q = steps.add_parser("report", help="the patch benchmarks' tables and plot across descriptors")
    q.add_argument("--names", required=True, help="JSON list of descriptor names, in the order of the folders")
    q.add_argument("--weights", default=None, help="JSON list: each descriptor's learned weights label ('' when none)")
    q.add_argument("--out-dir", type=Path, required=True)
    q.add_argument("eval_dirs", type=Path, nargs="+")
    return {"patches": JobCommand(run, pools=("opencv",))}  # only its describe step takes --threads


def run(a: argparse.Namespace) -> None:
    from descbench.patches import stages as ps

    if a.step == "generate":
        n = ps.generate(a.scene_dir, a.out_dir, json_arg(a.params))
        print(f"{a.scene_dir.name}: {n} patches per strip -> {a.out_dir}")
    elif a.step == "download":
        from descbench.patches.download import obtain_patches

        obtain_patches(a.urls, a.sha256, a.data_dir, a.flag)
    elif a.step == "describe":
        if a.csv_root is not None:
            ps.import_csv(a.csv_root, a.patch_dir, a.out, a.name, a.binary_packed)
        else:
            ps.describe(a.patch_dir, a.out, a.name, json_arg(a.spec), a.centre_keypoint)
    elif a.step == "tasks":
        ps.build_tasks(a.patch_root, json_arg(a.sequences), json_arg(a.config), a.out_dir)
    elif a.step == "evaluate":
        ps.evaluate(a.tasks, a.files, a.name, json_arg(a.config), a.out_dir)
    elif a.step == "hbench-eval":
        counts = json.loads(a.counts.read_text()) if a.counts else None
        table = ps.evaluate_hbench_files(a.tasks, a.results, counts)
        if a.out is None:
            print(table.to_string(index=False))
        else:
            table.to_csv(a.out, index=False)
    elif a.step == "report":
        from descbench.report.patches import write

        hb, hp = write(a.eval_dirs, json_arg(a.names), a.out_dir, json_arg(a.weights) if a.weights else None)
        print(hb.to_string(index=False))
        print(hp.to_string(index=False))
