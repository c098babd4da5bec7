"""Command line used by the Snakemake rules: ``python -m descbench <stage> ...``.

Each subcommand is a thin wrapper around one function of :mod:`descbench.stages` (or the
dataset modules). Errors on bad input exit with status 1 and a one-line message naming the file
or key and the fix; so do outputs that cannot be written (permission denied, read-only
filesystem, disk full). SIGINT (Ctrl-C) and SIGTERM end a command at once with one line and exit
status 130 / 143 (128 + the signal), no traceback; outputs are written atomically (descbench.io),
so no partial file is left under an output's name.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from pathlib import Path

from descbench import jobrecord
from descbench.errors import DescbenchError


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived. A BaseException, so that no ``except Exception`` of a stage
    catches it: it unwinds the stage (whose ``finally`` clauses remove temporary files)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, frame) -> None:
    # One message per job: Ctrl-C reaches a job twice (from the terminal and passed on by
    # Snakemake); later signals are ignored while the stage unwinds (SIGKILL still ends it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signum)


# Writing an output failed for a reason the user fixes outside descbench: the fix per errno
# ({folder}: the folder concerned, the nearest existing one of the file's).
_ELSEWHERE = "or set results_dir (or data_dir) in config.yaml to a folder you can write"
WRITE_ERRORS = {
    errno.EACCES: f"give your user write permission on it (ls -ld {{folder}}; chmod u+w {{folder}}) {_ELSEWHERE}",
    errno.EPERM: f"give your user write permission on it (ls -ld {{folder}}; chmod u+w {{folder}}) {_ELSEWHERE}",
    errno.EROFS: f"its filesystem is mounted read-only: {_ELSEWHERE[3:]}",
    errno.ENOSPC: "free space on its disk (df -h {folder}) or point results_dir at a disk with room",
    errno.EDQUOT: "your disk quota there is used up: free space (quota -s) or point results_dir at another disk",
}


def write_error_message(exc: OSError, what: str) -> str:
    """The one-line message of an OSError in ``WRITE_ERRORS``: the path, the OS error, the fix."""
    path = exc.filename2 if exc.filename2 is not None else exc.filename  # os.replace: the final name
    if path is None:
        where, folder = f"an output of {what}", "."
    else:
        where = os.fsdecode(path)
        folder = next((p for p in Path(where).parents if p.is_dir()), Path("."))
        if exc.errno in (errno.EACCES, errno.EPERM) and os.path.isfile(where) and not os.access(where, os.R_OK):
            return (f"descbench: error: cannot read {where}: {os.strerror(exc.errno)} ({errno.errorcode[exc.errno]}); "
                    f"give your user read permission on it (ls -l {where}; chmod u+r {where}), then rerun the same command")
    return (f"descbench: error: cannot write {where}: {os.strerror(exc.errno)} ({errno.errorcode[exc.errno]}) "
            f"in the folder {folder}; {WRITE_ERRORS[exc.errno].format(folder=folder)}; then rerun the same command "
            "(finished jobs are kept)")


def _job_name(argv: list[str] | None, a: argparse.Namespace | None) -> str:
    """What a command was doing, for the interrupt message: `score` of batch000 (sift, rootsift)."""
    if a is None:
        return f"`{(argv or sys.argv[1:] or ['descbench'])[0]}`"
    cmd = a.cmd + (f" {a.step}" if getattr(a, "step", None) else "")
    parts = [str(getattr(a, k)) for k in ("keypoint_set", "descriptor", "name", "scene") if getattr(a, k, None)]
    batch = f" of {a.batch}" if getattr(a, "batch", None) else ""
    return f"`{cmd}`{batch}" + (f" ({', '.join(parts)})" if parts else "")


_SCIPY_BLAS = "scipy.linalg.cython_blas"


def import_numba_without_blas_probe():
    """Import numba so that its numpy support does not import SciPy's linear algebra.

    When ``numba.np.arraymath`` is first imported (at a process's first numba dispatch), numba
    imports ``scipy.linalg.cython_blas`` to see whether jitted code may call BLAS (``np.dot``,
    ``np.linalg``). With SciPy installed that import is ~0.2 s of every scoring job's CPU. descbench's
    kernels never call BLAS inside numba (every product is a numpy ``@`` on a bounded row block,
    outside the kernels), so the probe is answered "no BLAS": a kernel that did call it would fail
    to compile with numba's "scipy 0.16+ is required for linear algebra", loudly, in the
    ``numba_warmup`` job. Only that one import is blocked, only while numba's module loads;
    ``import scipy.linalg`` works as usual afterwards. If numpy support is already loaded, nothing
    changes.
    """
    import numba

    if "numba.np.arraymath" not in sys.modules and _SCIPY_BLAS not in sys.modules:
        sys.modules[_SCIPY_BLAS] = None  # makes `import scipy.linalg.cython_blas` raise ImportError
        try:
            import numba.np.arraymath  # noqa: F401
        finally:
            del sys.modules[_SCIPY_BLAS]
    return numba


def limit_threads(n: int, cmd: str) -> None:
    """Keep each job within its Snakemake ``threads``: numba, BLAS and OpenCV pools.

    Only the libraries the command uses are imported (an import costs a job 0.05-0.15 s):
    OpenCV for detection/description, numba for scoring. ``NUMBA_NUM_THREADS`` (set by the
    rules to the job's threads) already sizes numba's pool; this also covers direct calls.
    """
    import numpy  # noqa: F401  (BLAS must be loaded for threadpoolctl to find it)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)
    if cmd in ("keypoints", "descriptors", "demo-scene", "patches"):  # patches: only `describe` takes --threads
        import cv2

        cv2.setNumThreads(n)
    if cmd in ("score", "warmup"):
        numba = import_numba_without_blas_probe()
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def warmup(out: Path) -> None:
    """Compile (and cache on disk) every numba kernel once, before parallel jobs use them."""
    import numpy as np

    from descbench.metrics import scenepass
    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
    from descbench.metrics.classifier import ClassifierParams, classify_pair
    from descbench.metrics.matching import MatchingParams, match_pair
    from descbench.metrics.retrieval import GT_MODES, RetrievalParams, score_pair

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (20, 2))
    real = rng.standard_normal((20, 8)).astype(np.float32)
    integer = rng.integers(0, 255, (20, 8)).astype(np.float32)  # SIFT-like: the exact-screen path
    binary = rng.integers(0, 255, (20, 4), dtype=np.uint8)
    frame = (rng.uniform(0, 360, 20).astype(np.float32), rng.uniform(1, 9, 20).astype(np.float32))  # angle, size
    for desc in (real, integer, binary):
        for gt in GT_MODES:
            score_pair(xy, desc, xy, desc, np.eye(3), (60, 60), RetrievalParams(gt=gt), frame, frame)
        t = Target(xy, desc, np.eye(3), (60, 60), *frame)
        dis = [Distractors("x", 1, np.arange(5), desc[:5])]
        for gt in GT_MODES:
            score_scene_tasks(xy, desc, [t, t], dis, BojanicParams(gt=gt), q_frame=frame)
        score_scene_tasks(xy, desc, [t, t], dis, BojanicParams(convention="workbench"), q_frame=frame)
        match_pair(xy, desc, xy, desc, np.eye(3), (60, 60), (60, 60))
        classify_pair(xy, desc, xy, desc, np.eye(3))
        # the scoring job's path: one screen per row block for every task (tiny blocks: several)
        for ver, gt in ((True, "closest"), (False, "closest"), (True, "closest_oriented")):
            scenepass.score_scene(xy, desc, [t, t], RetrievalParams(gt=gt), dis if ver else None, BojanicParams(gt=gt) if ver else None,
                                  (MatchingParams(), ClassifierParams(), ("threshold", "nn", "ratio", "mutual_nn")), (60, 60),
                                  chunk_mb=1e-4, q_frame=frame)
    from descbench import io

    io.write_text(out, "numba kernels compiled\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="descbench")
    ap.add_argument("--error-fd", type=int, default=None,
                    help="also write a failure's one-line message to this file descriptor (the workflow's jobs: "
                         "the terminal, while their output goes to the job's log)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("demo-scene", help="generate one scene of the offline demo dataset")
    p.add_argument("--scene", required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("hpatches", help="download (resumable), extract and validate HPatches sequences")
    p.add_argument("--urls", nargs="+", required=True)
    p.add_argument("--sha256", default=None)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--flag", type=Path, required=True, help="written once the layout is validated")

    def batch_args(p):
        """Which scene batch a job works on (descbench.paths.scene_batches of the scene list)."""
        p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
        p.add_argument("--scene-root", type=Path, required=True, help="the folder holding the scene folders")
        p.add_argument("--batches", required=True,
                       help="JSON {batch: [scenes]}: this job's batch, plus (score) every other batch, whose scenes give distractors")
        p.add_argument("--batch", required=True, help="this job's batch, e.g. batch000")
        p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("keypoints", help="detect and filter the keypoints of one scene batch")
    batch_args(p)
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--cutoff", type=Path, default=None, help="the set's global_top_n_by_size cutoff (keypoint-cutoff)")

    p = sub.add_parser("keypoint-cutoff", help="dataset-wide cutoff of a keypoint set's global_top_n_by_size filter")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("keypoint-stats", help="statistics of every keypoint set (counts, sizes, coverage, repeatability)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--scene-root", type=Path, required=True, help="the folder holding the scene folders")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--keypoint-sets", required=True, help="the validated keypoint_sets config as JSON [[name, spec], ...] (row order)")
    p.add_argument("--repeatability-px", type=float, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--pairs", default="reference",
                   help="the config's pairs option: each scene's pairs without a pairs.txt (descbench.datasets.layout)")

    p = sub.add_parser("export-keypoints", help="one keypoint set of every scene as a locked-keypoint file (.parquet/.csv/.csv.gz)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--out", type=Path, required=True, help="<file>.parquet, <file>.csv or <file>.csv.gz")

    p = sub.add_parser("descriptors", help="compute one descriptor on one scene batch")
    batch_args(p)
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--name", required=True, help="descriptor name")
    p.add_argument("--spec", required=True, help="descriptor spec (JSON)")
    p.add_argument("--keypoint-set-spec", required=True, help="keypoint set spec (JSON)")

    p = sub.add_parser("score", help="every enabled scoring task (retrieval, verification, matching, ...) of one scene batch")
    batch_args(p)
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--sections", required=True,
                   help="JSON {section: settings}: scoring and the section of every task to run (descbench.paths.SCORE_TASK_REGISTRY; "
                        "the workflow passes descbench.config.score_job_sections); a task whose section is absent does not run")
    p.add_argument("--features-of", default=None, help="read this descriptor's files (a scoring variant's base)")
    p.add_argument("--pairs", default="reference",
                   help="the config's pairs option: each scene's pairs without a pairs.txt (descbench.datasets.layout)")

    p = sub.add_parser("distractors", help="draw every scene's distractor keypoints of one descriptor into one file")
    p.add_argument("--features-of", default=None, help="read this descriptor's files (a scoring variant's base)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--verification", required=True, help="the draw: JSON {seed, distractor_scenes, distractors_per_scene}")
    p.add_argument("--out", type=Path, required=True)

    def run_args(p):
        """The whole run a report-stage command reads: every combination on every scene."""
        p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<experiment>")
        p.add_argument("--combos", required=True, help="JSON list of [keypoint_set, descriptor]")
        p.add_argument("--scenes", required=True, help="JSON list of scenes")
        p.add_argument("--config", required=True, help="the validated config (JSON)")

    p = sub.add_parser("report", help="comparison table across descriptors and keypoint sets")
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
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("compare", help="one table across experiments (their report/comparison.parquet)")
    p.add_argument("experiments", type=Path, nargs="+", help="experiment folders (e.g. results/demo results/border20) or DescriptorWorkbench results .csv files")
    p.add_argument("--out", type=Path, default=None, help="write the table here (.csv or .md); default: print it")

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

    p = sub.add_parser("warmup", help="compile the numba kernels into the on-disk cache")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("check-config", help="check config files as the workflow reads them (YAML syntax with line and "
                                            "column, then every key); Snakemake's own error for a --configfile names no file")
    p.add_argument("files", type=Path, nargs="+", help="config.yaml, then each --configfile, in Snakemake's order")

    a = None
    record = None
    handlers = _install_interrupt_handlers()
    try:
        a = ap.parse_args(argv)
        record = jobrecord.register_job()  # a job of a workflow run: a later run can stop it if this run is killed
        run(a)
    except Interrupted as exc:
        print(f"descbench: interrupted ({exc}) while running {_job_name(argv, a)}; partial outputs removed", file=sys.stderr)
        return 128 + exc.signum
    except DescbenchError as exc:
        _report_error(f"descbench: error: {exc}", a)
        return 1
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        _report_error(write_error_message(exc, _job_name(argv, a)), a)
        return 1
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if record is not None:
            record.unlink(missing_ok=True)
    return 0


def _report_error(message: str, a: argparse.Namespace | None) -> None:
    """The one-line error: into the job's log (stderr) and, with ``--error-fd``, on the terminal,
    where it then stands right above Snakemake's error block for the job."""
    print(message, file=sys.stderr)
    fd = getattr(a, "error_fd", None)
    if fd is not None:
        try:
            os.write(fd, (message + "\n").encode("utf-8", "replace"))
        except OSError:
            pass  # not open (run by hand): the log has the message


def _install_interrupt_handlers() -> dict:
    """SIGINT / SIGTERM raise :class:`Interrupted` (main thread only); returns the handlers they replace."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, _raise_interrupted)
    return previous


def json_arg(text: str):
    """A JSON argument: the JSON itself, or ``@file``, a spec file holding it (the workflow's
    jobs get their settings as files: descbench.specfiles). A missing or malformed file is an
    error naming it."""
    if not text.startswith("@"):
        return json.loads(text)
    from descbench.specfiles import read_spec

    path = Path(text[1:])
    try:
        return read_spec(path)
    except OSError as exc:
        raise DescbenchError(f"cannot read the settings file {path} ({exc.strerror}); rerun the same snakemake command, "
                             "which writes it again") from None
    except ValueError as exc:
        raise DescbenchError(f"the settings file {path} is not valid JSON ({exc}); delete it and rerun the same "
                             "snakemake command, which writes it again") from None


def _paths(a: argparse.Namespace):
    from descbench.paths import ResultPaths

    batches = json_arg(a.batches)
    if getattr(a, "batch", None) is not None and a.batch not in batches:
        raise DescbenchError(f"--batch {a.batch!r} is not among --batches ({', '.join(batches)})")
    return ResultPaths(a.results_root, batches)


def run(a: argparse.Namespace) -> None:
    from descbench import stages

    if getattr(a, "threads", None):
        limit_threads(a.threads, a.cmd)
    if a.cmd == "demo-scene":
        from descbench.datasets.demo import generate_scene

        generate_scene(a.scene, a.out_dir, a.seed)
    elif a.cmd == "hpatches":
        from descbench.datasets.hpatches import obtain

        obtain(a.urls, a.sha256, a.data_dir, a.flag)
    elif a.cmd == "keypoints":
        stages.detect_batch(_paths(a), a.scene_root, a.batch, a.name, json_arg(a.spec), a.cutoff)
    elif a.cmd == "keypoint-cutoff":
        stages.keypoint_cutoff(_paths(a), a.name, json_arg(a.spec), a.out)
    elif a.cmd == "keypoint-stats":
        stages.keypoint_statistics(_paths(a), a.scene_root, dict(json_arg(a.keypoint_sets)), a.repeatability_px, a.out_dir,
                                   a.pairs)
    elif a.cmd == "export-keypoints":
        stages.export_keypoints(_paths(a), a.name, a.out)
    elif a.cmd == "descriptors":
        stages.describe_batch(_paths(a), a.scene_root, a.batch, a.keypoint_set, a.name, json_arg(a.spec),
                              json_arg(a.keypoint_set_spec))
    elif a.cmd == "score":
        stages.score_batch(_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, json_arg(a.sections), a.features_of,
                           a.pairs)
    elif a.cmd == "distractors":
        stages.build_distractor_bank(_paths(a), a.keypoint_set, a.descriptor, json_arg(a.verification), a.out, a.features_of)
    elif a.cmd == "report":
        from descbench.paths import ResultPaths, scene_batches
        from descbench.report.table import entry_files, write

        cfg, scenes = json_arg(a.config), json_arg(a.scenes)
        paths = ResultPaths(a.results_root, scene_batches(scenes, cfg["execution"]["scenes_per_job"]))
        entries = [entry_files(paths, ks, d, scenes, cfg) for ks, d in json_arg(a.combos)]
        table = write(entries, cfg, a.out_dir, json_arg(a.provenance))
        print(table.drop(columns=["metadata"]).to_string(index=False))
    elif a.cmd == "plots":
        from descbench.paths import ResultPaths, scene_batches
        from descbench.report.plots import make_figures

        cfg, scenes = json_arg(a.config), json_arg(a.scenes)
        paths = ResultPaths(a.results_root, scene_batches(scenes, cfg["execution"]["scenes_per_job"]))
        make_figures(paths, [tuple(c) for c in json_arg(a.combos)], cfg, a.report_dir, a.out_dir)
    elif a.cmd == "database":
        from descbench import io
        from descbench.report.database import build_database, git_commit

        cfg = json_arg(a.config)
        build_database(a.out, a.report_dir, {"name": a.name, "dataset": cfg["dataset"], "config": cfg, "versions": io.versions(),
                                              "git_commit": git_commit(a.workflow_dir), "n_scenes": a.n_scenes})
    elif a.cmd == "compare":
        from descbench.report.experiments import compare_experiments, to_markdown

        table = compare_experiments(a.experiments)
        if a.out is None:
            print(to_markdown(table), end="")
        elif a.out.suffix == ".md":
            a.out.write_text(to_markdown(table))
        else:
            table.to_csv(a.out, index=False)
    elif a.cmd == "patches":
        run_patches(a)
    elif a.cmd == "warmup":
        warmup(a.out)
    elif a.cmd == "check-config":
        check_config(a.files)


def check_config(files: list[Path]) -> None:
    """Read ``files`` as the workflow does (each one updating the previous ones' keys, nested
    mappings merged) and validate the result; print what was checked."""
    from descbench.config import check_yaml_file, validate_config

    merged: dict = {}

    def update(d: dict, u: dict) -> dict:
        for k, v in u.items():
            d[k] = update(d.get(k) if isinstance(d.get(k), dict) else {}, v) if isinstance(v, dict) else v
        return d

    for f in files:
        update(merged, check_yaml_file(f))
    validate_config(merged, Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml")
    print(f"descbench: {', '.join(map(str, files))}: valid YAML and a valid descbench config")


def run_patches(a: argparse.Namespace) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
