# Config validation, paths, input functions and wildcard constraints.
import functools
import json
import shlex
import time
from pathlib import Path

from descbench.config import (check_folders, combinations, effective_config, job_resources, learned_weights, model_files,
                              needs_learned_extra,
                              score_job_sections,
                              type_command_line_values, validate_config)
from descbench.keypoints.sets import global_top_n, root_detector_spec, set_sources
from descbench.datasets import dataset_tag, experiment_name, list_scenes, scene_root
from descbench.datasets.hpatches import N_IMAGES  # the shape of a demo / HPatches scene not there yet
from descbench.datasets.layout import pairs_mode, scene_files
from descbench.paths import ResultPaths, scene_batches, score_tasks_on
from descbench.errors import DescbenchError
from descbench import smktuning
from snakemake.logging import logger


# Snakemake's own CPU on runs with many jobs (benchmark sampling every 5 s, one pending scheduler
# re-evaluation timer) and Ctrl-C / SIGTERM stopping the running jobs (then the onerror message says
# "interrupted"): descbench.smktuning, applied only on the Snakemake versions it was tested on
# (otherwise one warning line), off with DESCBENCH_SMK_TUNING=0; what was applied goes into the
# report's provenance (SMK_TUNING, rule report). None of it changes which jobs run or any output.
try:
    SMK_TUNING = smktuning.configure()
except ValueError as _exc:
    raise WorkflowError(f"descbench: {_exc}") from None
if SMK_TUNING["note"]:
    logger.warning(SMK_TUNING["note"])
SMK_TUNING = {k: v for k, v in SMK_TUNING.items() if k != "note"}

# How each job starts descbench (a rule param, used as `{params.descbench} <command>`). The interpreter that runs Snakemake
# (venv/bin/snakemake works without activating the venv; on a cluster node the same absolute path),
# or, under --software-deployment-method conda, the env's python with this checkout's workflow/ on
# PYTHONPATH (descbench.smktuning.job_command).
import sys as _sys

DESCBENCH = smktuning.job_command(
    getattr(getattr(workflow, "deployment_settings", None), "deployment_method", ()),
    _sys.executable,
    Path(workflow.basedir) / "workflow",
    in_container=bool(getattr(getattr(workflow, "modifier", None), "global_container_img", None)),
)


# Snakemake merges a --configfile into config.yaml key by key: config.yaml's keypoint sets,
# descriptors and sweeps join the file's own unless --replace-workflow-config. Said in one line at
# the start of the run (descbench.smktuning.merged_entries), not on the cluster's job nodes.
def _say_merged_entries():
    from descbench.smktuning import merge_message, merged_entries
    from snakemake.logging import logger
    from snakemake_interface_executor_plugins.settings import ExecMode

    settings = getattr(workflow, "config_settings", None)
    if settings is None or settings.replace_workflow_config or not settings.configfiles:
        return
    if getattr(workflow, "exec_mode", ExecMode.DEFAULT) != ExecMode.DEFAULT or not __import__("os").path.exists("config.yaml"):
        return
    import yaml

    with open("config.yaml") as fh:
        base = yaml.safe_load(fh) or {}
    message = merge_message(merged_entries(base, settings.overwrite_config or {}), settings.configfiles)
    if message:
        logger.warning(message)


_say_merged_entries()


def _validated_config():
    try:
        # `--config 'scoring={tau_px: 5}'`: Snakemake hands nested values over as strings
        type_command_line_values(config, getattr(getattr(workflow, "config_settings", None), "config", None))
        cfg = validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
        # a file where a folder must be: said now, not as NotADirectoryError in Snakemake or a job
        folders = {"data_dir": cfg["data_dir"], "results_dir": cfg["results_dir"]}
        if cfg["execution"]["numba_cache_dir"]:
            folders["execution.numba_cache_dir"] = cfg["execution"]["numba_cache_dir"]
        check_folders(folders)
        check_folders({"results_dir": Path(cfg["results_dir"]) / experiment_name(cfg)})
        return cfg
    except DescbenchError as exc:
        raise WorkflowError(f"descbench config error: {exc}")


CFG = _validated_config()
DATA = scene_root(CFG)
RES = Path(CFG["results_dir"]) / experiment_name(CFG)  # results/<experiment>/, default the dataset tag
SCENES = list_scenes(CFG)
PAIRS_MODE = pairs_mode(CFG)  # each scene's pairs without a pairs.txt (descbench.datasets.layout)
EXE = CFG["execution"]
# Jobs work on scene batches (descbench.paths); everything below is computed once, at parse time,
# so that building the DAG costs Snakemake no input-function work per job.
BATCHES = scene_batches(SCENES, EXE["scenes_per_job"])
PATHS = ResultPaths(RES, BATCHES)
COMBOS = combinations(CFG)
# The config of the sequence benchmarks' report rules: without the `patches` section, so that
# turning the patch benchmarks on or changing them never reruns (or replaces) the sequence report.
CFG_REPORT = {k: v for k, v in CFG.items() if k != "patches"}
WARMUP_FLAG = Path(CFG["results_dir"]) / ".numba_warmup.done"
HPATCHES_FLAG = str(Path(CFG["data_dir"]) / "hpatches" / "validated.flag")
ENV = "../../envs/descbench.yaml"
# The env of the jobs that import the learned extra (torch, kornia, onnxruntime): the same pins plus
# those (tests/test_deployment.py); picked per job by descriptor_env / keypoint_env / patch_env.
LEARNED_ENV = "../../envs/learned.yaml"
# The numba kernel cache may live elsewhere (clusters): an extra assignment for the rules'
# `export NUMBA_NUM_THREADS={threads} {params.numba_cache}` (numba's pool follows the job's threads).
NUMBA_CACHE = f"NUMBA_CACHE_DIR={shlex.quote(str(Path(EXE['numba_cache_dir']).resolve()))}" if EXE["numba_cache_dir"] else ""
# Settings changed in place since this experiment's last report: their results are about to be
# replaced, which the terminal says (descbench.report.changes).
def _warn_changed_settings():
    from descbench.report.changes import changed_settings, previous_config

    old = previous_config(PATHS.report("provenance.json"))
    changes = changed_settings(old, CFG_REPORT) if old else []
    if changes:
        logger.warning(
            f"descbench: these settings changed since {RES}'s last report; the results computed with the old "
            "values will be replaced:\n  " + "\n  ".join(changes[:20]) + ("\n  ..." if len(changes) > 20 else "")
            + "\nTo keep both, give the new setting a new name, a sweep, or another experiment (--config experiment=<name>)."
        )


_warn_changed_settings()
# Which tasks the scoring job runs, each into its own folder (scores/, verification/, matching/).
SCORE_TASKS_ON = score_tasks_on(CFG)  # descbench.paths.SCORE_TASK_REGISTRY


# ----------------------------------------------------------------------------- results integrity
# (descbench.runguard) Snakemake reruns a job whose settings changed only from its records in
# <workdir>/.snakemake; the results folder RES is not tied to one working directory. So:
# (1) while Snakemake builds the DAG (the report rule's input function results_guard, when
#     --forcerun, -n and Snakemake's records are known): if the folder's last report (or the last
#     run that wrote to it) used other settings and this working directory's Snakemake has no
#     record of the affected outputs' current versions, stop and name the --forcerun that works;
# (2) a run that starts jobs takes RES/descbench.lock (onstart; released by onsuccess/onerror):
#     a second run on the same folder stops and names the first.
import os as _os
import sys as _sys

from descbench import runguard

WORKDIR = Path(_os.getcwd()).resolve()  # Snakemake changed into --directory before parsing
RUN_STATE = runguard.normalized({"config": CFG_REPORT, "scenes": SCENES, "data": str(Path(DATA).resolve())})


def _previous_states():
    """The settings of the folder's last report (report/provenance.json) and of the last run that
    took its lock (which may have stopped before its report)."""
    out = []
    try:
        params = json.loads(Path(PATHS.report("provenance.json")).read_text()).get("params", {})
        if isinstance(params.get("config"), dict):
            out.append({"config": params["config"], "scenes": params.get("scenes")})
    except (OSError, ValueError, AttributeError):
        pass
    try:
        last = runguard.last_run(RES)
    except OSError:
        last = None
    if last and isinstance(last.get("state"), dict):
        out.append(last["state"])
    return out, (last or {}).get("run_id")


PREVIOUS_STATES, LAST_RUN_ID = _previous_states()
_RUN = {}  # this run's lock holder (take_results_lock)


def _outputs_of(name):
    """The outputs of every job of the rule ``name`` in this config (the rules a settings change
    concerns)."""
    outputs = {
        "keypoints": lambda: [PATHS.keypoints_dir(ks, b) for ks in CFG["keypoint_sets"] for b in BATCHES],
        "keypoint_stats": lambda: [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
        "descriptors": lambda: sorted({PATHS.descriptors_dir(ks, features_of(d), b) for ks, d in COMBOS for b in BATCHES}),
        "distractors": lambda: ([PATHS.distractor_bank(ks, d) for ks, d in COMBOS]
                                if CFG["verification"]["enabled"] else []),
        "score": lambda: [PATHS.task_dir(t, ks, d, b) for ks, d in COMBOS for b in BATCHES for t in SCORE_TASKS_ON],
        "report": lambda: [PATHS.report(f) for f in REPORT_FILES],
    }
    return outputs[name]() if name in outputs else []


def _required_reruns():
    required = {}
    for old in PREVIOUS_STATES:
        for rule, changes in runguard.rules_to_rerun(old, RUN_STATE, CFG["verification"]["enabled"]).items():
            known = required.setdefault(rule, [])
            known += [c for c in changes if c not in known]
    return {r: required[r] for r in runguard.stage_sorted(required)}


def results_guard(wildcards):
    """The report's input function, which adds no input (the checks (1) and (2) above, at DAG
    build). A run or dry run stops with the error; --summary, --report and the like only warn."""
    from snakemake.io import IOFile
    from snakemake.settings.types import RerunTrigger
    from snakemake_interface_executor_plugins.settings import ExecMode

    if _RUN.get("guarded") or getattr(workflow, "persistence", None) is None or workflow.dag_settings is None:
        return []
    _RUN["guarded"] = True
    if workflow.exec_mode != ExecMode.DEFAULT:  # a job of a cluster run: its main run checked
        return []
    executing = workflow.executor_plugin is not None  # a run or a dry run
    other = runguard.read_lock(RES)
    if other is not None and other.get("pid") != _os.getpid() and runguard.alive(other) is not False:
        if executing and not workflow.dryrun:
            _stop(runguard.locked_message(RES, other))
        logger.warning(runguard.locked_message(RES, other))
    required = _required_reruns()
    if not required:
        return []
    dag = workflow.dag_settings
    why = []
    if RerunTrigger.PARAMS not in set(dag.rerun_triggers):
        why.append("--rerun-triggers leaves out params: Snakemake does not compare the settings it recorded")

    def record(path):
        return workflow.persistence.metadata(IOFile(path))

    why += runguard.unrecorded_outputs([p for r in required for p in _outputs_of(r)], record)
    if not why:
        return []  # this working directory's records: Snakemake reruns the affected jobs itself
    rule_names = {r.name for r in workflow.rules}
    forcerun = {x for x in dag.forcerun if x in rule_names}
    if dag.forcetargets:
        forcerun |= {x for x in dag.targets if x in rule_names}
    if runguard.forced(required, forcerun, dag.forceall, CFG["verification"]["enabled"]):
        return []
    try:
        last = runguard.last_run(RES) or {}
    except OSError:
        last = {}
    message = runguard.unrecorded_changes_message(RES, required, why, _sys.argv, sorted(forcerun), str(WORKDIR),
                                                  last.get("workdir"))
    if executing:
        _stop(message)
    logger.warning(message)
    return []


def _stop(message):
    """End the run at DAG build with ``message`` alone: an exception from an input function would
    come wrapped in Snakemake's InputFunctionException (wildcards, traceback); SystemExit is not.
    Nothing has been written or locked yet."""
    logger.error(message)
    raise SystemExit(1)


def take_results_lock():
    """The workflow's onstart (a run that starts jobs; not -n, --lint, --report, --unlock)."""
    me = runguard.holder_info(WORKDIR, _sys.argv, RUN_STATE)
    try:
        warning = runguard.acquire(RES, me, LAST_RUN_ID)
    except runguard.ResultsLocked as exc:
        raise WorkflowError(str(exc)) from None
    except OSError as exc:  # e.g. a file system without file locks
        logger.warning(f"descbench: could not take the lock of {RES} ({exc}); this run is not kept apart from "
                       "other runs on the same results folder")
        return
    _RUN["holder"] = me
    if warning:
        logger.warning(warning)


def release_results_lock():
    """The workflow's onsuccess / onerror."""
    if "holder" in _RUN:
        try:
            runguard.release(RES, _RUN.pop("holder"))
        except OSError as exc:
            logger.warning(f"descbench: could not release the lock {RES / runguard.LOCK_NAME} ({exc}); delete it")


wildcard_constraints:
    scene=r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
    kpset=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    descriptor=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    batch=r"batch[0-9]+",


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def _scene_inputs(scene):
    """The 6 images and 5 homographies of a scene (stat only, no image is read).

    HPatches is represented by its download rule's flag: the archive is immutable.
    """
    if CFG["dataset"] == "hpatches":
        return [HPATCHES_FLAG]
    try:
        files = scene_files(DATA / scene, check_exists=CFG["dataset"] == "folder", n_images=N_IMAGES)
    except DescbenchError as exc:
        raise WorkflowError(str(exc))
    return [str(p) for p in files.all_paths()]


# Only the keypoint jobs list the scene files (and precomputed feature files): descriptor and
# scoring jobs depend on the keypoint folder, which is rebuilt whenever a scene file changes, so
# their own copies of these inputs would add nothing but work: Snakemake re-stats every input of
# every ready job each time a job finishes, which cost 60 CPU-s of its own on 116 scenes.
SCENE_INPUTS = {b: sorted({p for s in ss for p in _scene_inputs(s)}) for b, ss in BATCHES.items()}


def batch_scene_inputs(wildcards):
    """Detector sets read the scene files; derived sets read other sets (keypoint_source_inputs)."""
    if "detector" not in CFG["keypoint_sets"][wildcards.kpset]:
        return []
    return SCENE_INPUTS[wildcards.batch]


def has_global_filter(kpset):
    return global_top_n(CFG["keypoint_sets"][kpset]) is not None


def keypoint_source_inputs(wildcards):
    """A derived set's inputs: its sources' folders of the same batch, and (global_top_n_by_size)
    the set's dataset-wide cutoff. The DAG follows a chain of sets through these."""
    out = [PATHS.keypoints_dir(src, wildcards.batch) for src in set_sources(CFG["keypoint_sets"][wildcards.kpset])]
    if has_global_filter(wildcards.kpset):
        out.append(PATHS.keypoint_cutoff(wildcards.kpset))
    return out


def keypoint_cutoff_arg(wildcards):
    return f"--cutoff {shlex.quote(PATHS.keypoint_cutoff(wildcards.kpset))}" if has_global_filter(wildcards.kpset) else ""


def precomputed_inputs(wildcards):
    """Feature files of a precomputed or locked keypoint set, so that new files trigger a rerun."""
    spec = CFG["keypoint_sets"][wildcards.kpset]
    if spec.get("detector") == "locked":
        from descbench.keypoints.locked import locked_file

        return sorted({str(locked_file(spec["params"]["path"], s, k)) for s in BATCHES[wildcards.batch]
                       for k in scene_files(DATA / s, check_exists=CFG["dataset"] == "folder", n_images=N_IMAGES).image_numbers})
    if spec.get("detector") != "precomputed":
        return []
    from descbench.precomputed import feature_path

    out = []
    for scene in BATCHES[wildcards.batch]:
        files = scene_files(DATA / scene, check_exists=CFG["dataset"] == "folder", n_images=N_IMAGES)
        if CFG["dataset"] != "folder" and not files.images[0].exists():
            continue  # images not there yet (download/demo rule): checked again when the job runs
        try:
            out += [str(feature_path(p, spec["params"]["method"], spec["params"]["root"])) for p in files.images]
        except DescbenchError as exc:
            raise WorkflowError(str(exc))
    return out


def batch_json(wildcards):
    """This batch only: keypoint and descriptor jobs touch nothing else."""
    return as_json({wildcards.batch: BATCHES[wildcards.batch]})


def descriptor_job_spec(wildcards):
    """A descriptor job's spec: the descriptor's config entry; a composite's also lists what it
    reads on this set (descbench.descriptors.composite.resolve_components), so that a changed
    component reruns it."""
    spec = CFG["descriptors"][wildcards.descriptor]
    if spec["family"] == "composite":
        from descbench.descriptors.composite import resolve_components

        spec = {**spec, "components": resolve_components(spec["params"], wildcards.kpset, CFG["descriptors"], CFG["keypoint_sets"])}
    return as_json(spec)


def composite_inputs(wildcards):
    """A composite's inputs: each component's keypoint and descriptor folders of this batch."""
    spec = CFG["descriptors"][wildcards.descriptor]
    if spec["family"] != "composite":
        return []
    from descbench.descriptors.composite import resolve_components

    out = []
    for c in resolve_components(spec["params"], wildcards.kpset, CFG["descriptors"], CFG["keypoint_sets"]):
        out += [PATHS.keypoints_dir(c["keypoint_set"], wildcards.batch), PATHS.descriptors_dir(c["keypoint_set"], c["descriptor"], wildcards.batch)]
    return sorted(set(out))


def descriptor_model_files(wildcards):
    """The model / weight files of a descriptor (onnx, torch families): replacing one reruns its jobs."""
    return model_files(CFG["descriptors"][wildcards.descriptor].get("params", {}))


def keypoint_model_files(wildcards):
    """The weight files of a learned detector (keynet)."""
    spec = CFG["keypoint_sets"][wildcards.kpset]
    return model_files(spec.get("params", {})) if "detector" in spec else []


def _descriptor_params(wildcards):
    return CFG["descriptors"][wildcards.descriptor].get("params", {})


def _keypoint_params(wildcards):
    return CFG["keypoint_sets"][wildcards.kpset].get("params", {})


def _patch_params(wildcards):
    """A patch-describing job's descriptor params ({} for an hpatches-benchmark CSV import)."""
    return (CFG["descriptors"].get(wildcards.pdesc) or {}).get("params", {})


def _env(params):
    """envs/learned.yaml for a job that imports the learned extra (descbench.config.needs_learned_extra), else envs/descbench.yaml."""
    return LEARNED_ENV if needs_learned_extra(params) else ENV


def descriptor_resources(wildcards):
    return job_resources(_descriptor_params(wildcards))


def keypoint_resources(wildcards):
    return job_resources(_keypoint_params(wildcards))


def descriptor_env(wildcards):
    return _env(_descriptor_params(wildcards))


def keypoint_env(wildcards):
    return _env(_keypoint_params(wildcards))


def patch_threads(wildcards):
    """A patch-describing job's threads: a learned descriptor's params.threads, else 1."""
    return job_resources(_patch_params(wildcards))["threads"]


def patch_env(wildcards):
    return _env(_patch_params(wildcards))


# Cluster resources of the heavy jobs (descbench.jobresources: mem_mb and runtime in minutes from the
# batch's image sizes, read from the file headers, and keypoint counts; documented default sizes
# for images not there yet). Not cached here: Snakemake evaluates them again when a job is about
# to run, when the images and keypoint files exist. A retried job (the cluster profiles' retries: 1,
# e.g. after SLURM killed it for memory or time) asks for `attempt` times as much.
from descbench import jobresources  # noqa: E402


def _batch_dirs(batch):
    return [DATA / s for s in BATCHES[batch]]


def _sized(estimate, *args):
    try:
        return estimate(CFG, *args)
    except DescbenchError as exc:
        raise WorkflowError(f"descbench: {exc}")


def keypoint_job(wildcards):
    return _sized(jobresources.keypoint_job, wildcards.kpset, _batch_dirs(wildcards.batch))


def descriptor_job(wildcards):
    return _sized(jobresources.descriptor_job, wildcards.kpset, wildcards.descriptor, _batch_dirs(wildcards.batch))


def score_job(wildcards):
    return _sized(jobresources.score_job, wildcards.kpset, wildcards.descriptor, _batch_dirs(wildcards.batch))


def patch_job(wildcards):
    return _sized(jobresources.patch_job, wildcards.pdesc)


def features_of(descriptor):
    """The descriptor whose files a descriptor's scoring reads: itself, or its base (features_of)."""
    return CFG["descriptors"][descriptor].get("features_of") or descriptor


def features_arg(wildcards):
    base = CFG["descriptors"][wildcards.descriptor].get("features_of")
    return f"--features-of {shlex.quote(base)}" if base else ""


@functools.cache  # one JSON per descriptor, not one per scoring job at DAG build
def sections_json(descriptor):
    """A descriptor's effective scoring section and the section of every enabled scoring task (its
    overrides merged; descbench.config.score_job_sections), as the scoring job's one JSON."""
    return as_json(score_job_sections(CFG, descriptor))


def score_feature_inputs(wildcards):
    """The batch's keypoints and descriptors, and (verification) the distractor bank of its
    (keypoint set, descriptor), which is built from every scene's descriptors."""
    out = {
        "keypoints": PATHS.keypoints_dir(wildcards.kpset, wildcards.batch),
        "descriptors": PATHS.descriptors_dir(wildcards.kpset, features_of(wildcards.descriptor), wildcards.batch),
    }
    if CFG["verification"]["enabled"]:
        out["distractors"] = PATHS.distractor_bank(wildcards.kpset, wildcards.descriptor)
    return out


def results_root(levels):
    """Param: ``<results_dir>/<dataset tag>``, the ``levels``-th parent of the rule's first output."""
    return lambda wildcards, output: str(Path(output[0]).parents[levels])


REPORT_FILES = ("comparison.csv", "comparison.md", "comparison.parquet", "comparison.html", "per_scene.csv", "per_scene.parquet",
                "per_scene.html", "significance.csv", "significance.md", "significance.parquet", "significance.html",
                "provenance.json")


RUN_STARTED = time.time()


def print_run_stopped():
    """The workflow's onerror: why the run stopped (a job failed, or Ctrl-C / SIGTERM) and what next."""
    from descbench.report.summary import run_stopped_hint

    print(run_stopped_hint(RES / "logs", smktuning.interrupted()), flush=True)


def print_run_summary():
    """The workflow's onsuccess (descbench.report.summary): the table when the report exists."""
    from descbench.report.summary import run_summary

    table_csv = Path(PATHS.report("comparison.csv"))
    if not table_csv.exists():
        return
    text = run_summary(table_csv.parent, CFG["verification"]["distractor_scenes"] if CFG["verification"]["enabled"] else None)
    when = "written by this run" if table_csv.stat().st_mtime >= RUN_STARTED else "up to date, unchanged by this run"
    print(text.replace("descbench results (", f"descbench results, {when} (", 1), flush=True)


from descbench.report.figures import FIGURES as PLOTS  # noqa: E402  (names only: plotting imports are the job's)

KEYPOINT_STATS_FILES = ("keypoint_stats.csv", "keypoint_stats.md", "keypoint_stats.parquet", "keypoint_stats.html")


# Files shown in `snakemake --report` (Tables, Plots), with their captions (absolute: the rules
# that list them live in several files).
CAPTIONS_DIR = Path(workflow.basedir) / "workflow" / "descbench" / "report" / "captions"
# Files shown in `snakemake --report` (Tables), with their captions.
REPORT_TABLES = {"comparison.html": "table_comparison", "significance.html": "table_significance",
                 "per_scene.html": "table_per_scene", "keypoint_stats.html": "table_keypoint_stats"}


REPORT_PLOTS = {"patches/patches_map.png": "patches_map"}  # figures of other rules than `plots`


def _in_report(name):
    path = PATHS.report(name)
    if name in REPORT_TABLES:
        return report(path, caption=str(CAPTIONS_DIR / f"{REPORT_TABLES[name]}.rst"), category="Tables")
    if name in REPORT_PLOTS:
        return report(path, caption=str(CAPTIONS_DIR / f"{REPORT_PLOTS[name]}.rst"), category="Plots")
    return path


def report_outputs():
    return [_in_report(f) for f in REPORT_FILES]


def report_inputs():
    """Every scoring job's task folders (the report reads their per-scene files, same paths)."""
    return [PATHS.task_dir(t, ks, d, b) for ks, d in COMBOS for b in BATCHES for t in SCORE_TASKS_ON]


# ----------------------------------------------------------------------------- patch benchmarks
# (workflow/rules/patches.smk; descbench.patches)
from descbench.patches import PATCH_TYPES  # noqa: E402

PATCH_CFG = CFG["patches"]
PATCHES_ON = PATCH_CFG["enabled"]
PATCH_FLAG = str(Path(CFG["data_dir"]) / "hpatches" / "patches_validated.flag")


def _patch_root_and_sequences():
    """Where the patch sequences are, and which (`patches.sequences`, default all of the source's):
    generated from this run's scenes (one folder per scene under the experiment), hpatches-release
    (116), or your folder's."""
    src, chosen = PATCH_CFG["source"], PATCH_CFG["sequences"]
    if src == "generated":
        root, available = RES / "patches" / "dataset", list(SCENES)
    elif src == "hpatches_release":
        from descbench.datasets import hpatches_scenes
        from descbench.patches.download import PATCHES_ROOT

        root, available = Path(CFG["data_dir"]) / "hpatches" / PATCHES_ROOT, hpatches_scenes("full")
    else:
        from descbench.patches.layout import list_patch_sequences

        root = Path(PATCH_CFG["path"])
        available = list_patch_sequences(root) if root.is_dir() else []
        if not available:
            raise WorkflowError(f"descbench config error: patches.path {root} holds no patch sequence folder "
                                "(hpatches-release layout: <seq>/ref.png, e1.png .. t5.png)")
    missing = [s for s in (chosen or []) if s not in available]
    if missing:
        raise WorkflowError(f"descbench config error: patches.sequences {missing} are not among the {src} patch "
                            f"sequences ({', '.join(available[:8])}{' ...' if len(available) > 8 else ''})")
    return root, list(chosen or available)


PATCH_ROOT, PATCH_SEQS = _patch_root_and_sequences() if PATCHES_ON else (None, [])
PATCH_REPORT_FILES = ("hbench.csv", "hbench.md", "hbench.html", "hpatches_benchmark.csv", "hpatches_benchmark.md",
                      "hpatches_benchmark.html", "patches_map.png", "patches_map.svg", "patches_provenance.json")
REPORT_TABLES.update({"patches/hbench.html": "table_patches_hbench",
                      "patches/hpatches_benchmark.html": "table_patches_hpatches_benchmark"})


def patch_sequence_files(seq):
    """The files a patch sequence is made of (generated: the generation job's outputs)."""
    if PATCH_CFG["source"] == "hpatches_release":
        return [PATCH_FLAG]
    files = [str(PATCH_ROOT / seq / f"{t}.png") for t in PATCH_TYPES]
    return files + [str(PATCH_ROOT / seq / "patches.json")] if PATCH_CFG["source"] == "generated" else files


def patch_sequence_inputs(wildcards):
    out = patch_sequence_files(wildcards.seq)
    csv = PATCH_CFG["csv"].get(wildcards.pdesc) if hasattr(wildcards, "pdesc") else None
    if csv:  # new CSV files trigger a rerun
        out = out + [str(Path(csv["path"]) / wildcards.seq / f"{t}.csv") for t in PATCH_TYPES]
    return out


def patch_describe_args(wildcards):
    """The descriptor's definition as arguments: a registry family (its spec, so that editing it
    reruns only its jobs) or a folder of hpatches-benchmark CSV files."""
    csv = PATCH_CFG["csv"].get(wildcards.pdesc)
    if csv:
        return f"--csv-root {shlex.quote(csv['path'])}" + (" --binary-packed" if csv["binary_packed"] else "")
    spec = {k: v for k, v in CFG["descriptors"][wildcards.pdesc].items() if k in ("family", "params")}
    return f"--spec {shlex.quote(as_json(spec))} --centre-keypoint {PATCH_CFG['centre_keypoint']}"


def patch_outputs():
    return [PATHS.report(f"patches/{f}") for f in PATCH_REPORT_FILES] if PATCHES_ON else []


wildcard_constraints:
    seq=r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
    pdesc=r"[A-Za-z0-9][A-Za-z0-9_-]*",
