# Config validation, paths, input functions and wildcard constraints.
import functools
import json
import shlex
import time
from pathlib import Path

from descbench.config import (check_folders, combinations, match_combinations, effective_config, job_resources, learned_weights, model_files,
                              shared_base, shared_parts, inspector_page,
                              needs_learned_extra,
                              score_job_sections,
                              type_command_line_values, validate_config)
from descbench.keypoints.sets import global_top_n, root_detector_spec, set_sources
from descbench.datasets import dataset_geometry, dataset_tag, experiment_name, list_scenes, scene_root, source_root
from descbench.datasets.resize import RESIZED_FLAG
from descbench.datasets.hpatches import N_IMAGES  # the shape of a demo / HPatches scene not there yet
from descbench.datasets.layout import pairs_mode, scene_files, scene_folder
from descbench.paths import ResultPaths, scene_batches
from descbench.tasks import score_tasks_on
from descbench.errors import DescbenchError
from descbench import smktuning
from descbench.torchrt import local_cuda_problem
from snakemake.logging import logger


# Ctrl-C (and, from onstart on, SIGTERM) stops the running jobs: handlers of the signal module,
# no Snakemake attribute touched (descbench.smktuning). What was installed goes into the report's
# provenance (SMK_TUNING); it changes neither which jobs run nor any output.
SMK_TUNING = smktuning.configure()
if SMK_TUNING["note"]:
    logger.warning(SMK_TUNING["note"])
SMK_TUNING = {k: v for k, v in SMK_TUNING.items() if k != "note"}
# Snakemake's pending re-evaluation timers never delay the end of a run, however it ends.
smktuning.cancel_timers_at_exit()

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
# A failing job's one-line error also goes to the terminal (fd 3: Snakemake's stderr, while the
# job's own output goes to its log), so that it stands right above Snakemake's error block.
DESCBENCH = f"3>&2 {DESCBENCH} --error-fd 3"


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
        if cfg.get("protocol"):  # what the preset set, and which of its keys the config overrides
            from descbench.config import load_schema
            from descbench.protocols import apply_protocol, describe

            schema = load_schema(Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
            logger.info(describe(cfg["protocol"], apply_protocol(dict(config), schema)[1]))
        return cfg
    except DescbenchError as exc:
        # the message alone: a WorkflowError raised here would add Snakemake's traceback lines
        # (this file, its line numbers) under it, which say nothing about the config
        logger.error(f"descbench config error: {exc}")
        raise SystemExit(1) from None


CFG = _validated_config()
SOURCE = source_root(CFG)  # the dataset's own scene folders
DATA = scene_root(CFG)  # the scene folders every stage reads: SOURCE, or their resized copies (rule resize_scene)
RES = Path(CFG["results_dir"]) / experiment_name(CFG)  # results/<experiment>/, default the dataset tag
SCENES = list_scenes(CFG)
PAIRS_MODE = pairs_mode(CFG)  # each scene's pairs without a pairs.txt (descbench.datasets.layout)
EXE = CFG["execution"]
# Jobs work on scene batches (descbench.paths); everything below is computed once, at parse time,
# so that building the DAG costs Snakemake no input-function work per job.
BATCHES = scene_batches(SCENES, EXE["scenes_per_job"])
PATHS = ResultPaths(RES, BATCHES)
COMBOS = combinations(CFG)
MATCH_COMBOS = match_combinations(CFG)


# (keypoint set, descriptor) -> the descriptor whose files it transforms, or None (descbench.config.shared_base);
# once per pair: a descriptor job also runs on sets it is not scored on (a composite's components)
@functools.lru_cache(maxsize=None)
def shared_base_of(kpset, descriptor):
    return shared_base(CFG, kpset, descriptor)  # (keypoint set, descriptor, matcher) of the matcher stage


# (keypoint set, descriptor) -> per part of a stack, the descriptor whose files give its rows, or None
# (descbench.config.shared_parts)
@functools.lru_cache(maxsize=None)
def shared_parts_of(kpset, descriptor):
    parts = shared_parts(CFG, kpset, descriptor)
    return tuple(parts) if parts else None
# The config of the sequence benchmarks' report rules: without the `patches` section, so that
# turning the patch benchmarks on or changing them never reruns (or replaces) the sequence report.
CFG_REPORT = {k: v for k, v in CFG.items() if k not in ("patches", "inspector")}  # their own rules read those
WARMUP_FLAG = Path(CFG["results_dir"]) / ".numba_warmup.done"
HPATCHES_FLAG = str(Path(CFG["data_dir"]) / "hpatches" / "validated.flag")
ENV = "../../envs/descbench.yaml"
# The env of the jobs that import the learned extra (torch, kornia, onnxruntime): the same pins plus
# those (tests/workflow/test_deployment.py); picked per job by descriptor_env / keypoint_env / patch_env.
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
# A posed dataset's pairs have calibrated relative poses, not homographies (descbench.datasets.DATASET_GEOMETRY):
# they are evaluated by the pose task from the matcher stage's matches (rules score_pose, pose_report),
# and the stages that need a homography (the scoring tasks, keypoint statistics, the comparison
# report, the inspector) do not run.
POSED = dataset_geometry(CFG) == "relative_pose"


def _pose_section():
    """The pose task's settings with ``depth`` resolved to true / false (descbench.tasks.pose.resolve_depth):
    the posed demo has depth maps; a posed folder's scenes are looked at."""
    from descbench.tasks.pose import extension_settings, resolve_depth

    missing = []
    if CFG["dataset"] == "posed":
        try:
            for s in SCENES:
                files = scene_files(SOURCE / s)
                missing += [f"{s}/{n}" for n, d in zip(files.image_names, files.depths) if d is None]
        except DescbenchError as exc:
            raise WorkflowError(f"descbench: {exc}") from None
    try:
        on, why = resolve_depth(CFG["pose"]["depth"], missing)
    except DescbenchError as exc:
        logger.error(f"descbench config error: {exc}")
        raise SystemExit(1) from None
    # with depth, descbench's extension (MMA, true mAP) reads its settings from matching and scoring
    return {**CFG["pose"], "depth": on, **({"extension": extension_settings(CFG)} if on else {})}, why


POSE_SECTION, POSE_DEPTH_WHY = _pose_section() if POSED else (None, "")
# Which tasks the scoring job runs, each into its own folder (scores/, verification/, matching/).
SCORE_TASKS_ON = [] if POSED else score_tasks_on(CFG)  # descbench.tasks.SCORING_TASKS


# ----------------------------------------------------------------------------- results integrity
# What reruns is decided by Snakemake's own job graph, by content (descbench.specfiles): every
# job reads its settings from spec files and every user-supplied file (weights, models, a folder
# dataset's images, precomputed features, patch CSVs) through a digest file, all declared as its
# inputs and rewritten only when their content changes. A changed setting or file then reruns
# exactly the jobs that read it, whether or not .snakemake still has its records (deleted, or a
# second working directory on the same results folder). The files are written while Snakemake
# builds the DAG (the input functions below), by the run's main process only (not on a cluster
# job's node, which reads what the main process wrote); a dry run writes the changed ones
# elsewhere (RES/specs/.dry-run/), so that it changes nothing a later run compares.
# A run that starts jobs also takes RES/descbench.lock (onstart; released by onsuccess/onerror):
# a second run on the same folder stops and names the first, before it writes any spec file.
import os as _os
import shutil
import sys as _sys

from descbench import runguard
from descbench.specfiles import digest_file, digest_files, spec_value_text, write_spec
from snakemake_interface_executor_plugins.settings import ExecMode as _ExecMode

WORKDIR = Path(_os.getcwd()).resolve()  # Snakemake changed into --directory before parsing
SPEC_DIR = RES / "specs"
_RUN = {}  # this run's lock holder (take_results_lock) and what the guard decided


def _main_process():
    """The run's own Snakemake process (not a cluster job's, which re-reads the workflow)."""
    return getattr(workflow, "exec_mode", _ExecMode.DEFAULT) == _ExecMode.DEFAULT


if POSED and _main_process():
    logger.info(f"descbench: dataset '{CFG['dataset']}' is posed (relative poses, no homographies): the pose task "
                f"evaluates {len(MATCH_COMBOS)} keypoint set + descriptor + matcher combination(s); the homography-based "
                f"stages (scoring tasks, keypoint statistics, comparison report, inspector) do not run; {POSE_DEPTH_WHY}")


def _write_mode():
    """At the first spec or digest file of the DAG build: ``write`` (a run's main process),
    ``preview`` (a dry run: changed files go to RES/specs/.dry-run/, so that its DAG shows what
    a run would redo while the files a later run compares stay as they are) or ``none`` (a
    cluster job's node, which reads what the main run wrote; or the folder is locked by another
    live run: a run stops, a dry run warns)."""
    if "mode" in _RUN:
        return _RUN["mode"]
    mode = "write" if _main_process() else "none"
    if mode == "write":
        other = runguard.read_lock(RES)
        if other is not None and other.get("pid") != _os.getpid() and runguard.alive(other) is not False:
            if workflow.executor_plugin is not None and not workflow.dryrun:
                _stop(runguard.locked_message(RES, other))
            logger.warning(runguard.locked_message(RES, other))
            mode = "none"
        elif workflow.dryrun:
            mode = "preview"
            shutil.rmtree(PREVIEW_DIR, ignore_errors=True)
    _RUN["mode"] = mode
    return mode


PREVIEW_DIR = SPEC_DIR / ".dry-run"
_SPEC_TEXT = {}  # spec file -> its text, as this run wrote (or found) it
_SPEC_PATHS = {}  # spec file -> the file handed to Snakemake (a dry run's preview of a changed one)


def spec_file(kind, name, value):
    """The spec file ``RES/specs/<kind>/<name>.json`` holding ``value`` (JSON), written now if
    its text changed; an input of every job that reads it (``--option @<file>``)."""
    path = str(SPEC_DIR / kind / f"{name}.json")
    text = as_json(value)
    if _SPEC_TEXT.get(path) != text:
        _SPEC_TEXT[path] = text
        _SPEC_PATHS[path] = path
        mode = _write_mode()
        if mode == "write":
            write_spec(path, text)
        elif mode == "preview":
            try:
                same = spec_value_text(Path(path).read_text(encoding="utf-8")) == text
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                preview = PREVIEW_DIR / kind / f"{name}.json"
                write_spec(preview, text)
                _SPEC_PATHS[path] = str(preview)
    return _SPEC_PATHS[path]


_DIGESTS = {}


def tracked(paths):
    """User-supplied files as digest files (rerun on a content change, whatever the date): one
    digest for one file, one for a group of several (specfiles.digest_files: Snakemake re-reads
    every input's size each time it schedules); a file that does not exist yet stays itself, so
    that Snakemake names it as missing."""
    paths = list(paths)
    missing = [p for p in paths if not _os.path.exists(p)]
    present = tuple(sorted(set(paths) - set(missing)))
    if not present:
        return missing
    if present not in _DIGESTS:
        mode = _write_mode()
        digest = digest_file if len(present) == 1 else digest_files
        try:
            _DIGESTS[present] = str(digest(present[0] if len(present) == 1 else present, SPEC_DIR / "files",
                                           write=mode != "none", preview=PREVIEW_DIR / "files" if mode == "preview" else None))
        except OSError as exc:
            raise WorkflowError(f"descbench: cannot read {exc.filename or present[0]} ({exc.strerror})") from None
    return missing + [_DIGESTS[present]]


def _stop(message):
    """End the run at DAG build or in the onstart with ``message`` alone: an exception from an input
    function would come wrapped in Snakemake's InputFunctionException (wildcards, traceback), a
    WorkflowError from the onstart under Snakemake's traceback lines; SystemExit is neither.
    Nothing of descbench's has been written or locked yet, and Snakemake's own lock is released by
    the context manager the onstart runs in."""
    logger.error(message)
    raise SystemExit(1)


LAST_RUN_ID = (runguard.last_run(RES) or {}).get("run_id") if RES.is_dir() else None


def check_until():
    """The workflow's onstart, first: Snakemake's --until never starts a job that needs another job
    of the --until, so a run it cannot finish stops now with the fix instead of with Snakemake's
    "BUG: Out of jobs ready" after the other jobs (descbench.smktuning.until_stuck reads the job
    graph built for this run, so a job whose needed job is complete already runs)."""
    problem = smktuning.until_message(smktuning.until_stuck(workflow.dag))
    if problem:
        _stop(f"descbench: {problem}")


def take_results_lock():
    """The workflow's onstart (a run that starts jobs; not -n, --lint, --report, --unlock): take
    the lock, stop what a killed run left running in the folder, and make sure the spec files
    hold this run's settings (a run that started at the same moment may have written its own)."""
    me = runguard.holder_info(WORKDIR, _sys.argv)
    try:
        warning = runguard.acquire(RES, me, LAST_RUN_ID)
    except runguard.ResultsLocked as exc:
        _stop(str(exc))
    except OSError as exc:  # e.g. a file system without file locks
        logger.warning(f"descbench: could not take the lock of {RES} ({exc}); this run is not kept apart from "
                       "other runs on the same results folder")
        return
    _RUN["holder"] = me
    if warning:
        logger.warning(warning)
    # SIGTERM stops the running jobs as Ctrl-C does; installed now, after Snakemake's scheduler set its own
    smktuning.stop_jobs_on_sigterm()
    for path, text in _SPEC_TEXT.items():
        write_spec(path, text)
    # the jobs record themselves under the folder (descbench.runguard.register_job), so that a
    # later run can stop them if this one is killed
    _os.environ[runguard.JOBS_ENV] = runguard.jobs_env_value(RES, me)


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
    matcher=r"[A-Za-z0-9][A-Za-z0-9_-]*",


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def posed_demo_scene_paths(folder):
    """The files of one posed demo scene (descbench.datasets.posed_demo, imported only for that dataset: it loads OpenCV)."""
    from descbench.datasets.posed_demo import scene_paths

    return scene_paths(folder)


def source_scene_inputs(scene):
    """The dataset's own files of a scene: its images, homographies and pair list (stat only, no
    image is read). HPatches is represented by its download rule's flag: the archive is immutable.
    """
    if CFG["dataset"] == "hpatches":
        return [HPATCHES_FLAG]
    if CFG["dataset"] == "posed_demo":
        return [str(p) for p in posed_demo_scene_paths(SOURCE / scene)]
    try:
        files = scene_files(SOURCE / scene, check_exists=CFG["dataset"] in ("folder", "posed"), n_images=N_IMAGES)
        if files.posed and not POSED:
            raise WorkflowError(f"descbench: scene folder {SOURCE / scene} is a posed scene (views.txt or pairs_calibrated.txt), but dataset "
                                f"'{CFG['dataset']}' evaluates image sequences with homographies; for posed scenes set "
                                "dataset: posed and posed.path")
        if POSED and not files.posed:
            raise WorkflowError(f"descbench: scene folder {SOURCE / scene} has no views.txt or pairs_calibrated.txt, so it is not "
                                "a posed scene (glue-factory's posed_images layout: views.txt, pairs.txt, images/)")
    except DescbenchError as exc:
        raise WorkflowError(str(exc))
    return [str(p) for p in files.all_paths()]


def _scene_inputs(scene):
    """What the stages read of a scene: its own files, or with resize its resized copy's flag (a
    part of a posed folder: the folder's)."""
    if CFG.get("resize"):
        return [str(DATA / scene_folder(scene) / RESIZED_FLAG)]
    return source_scene_inputs(scene)


def resize_inputs(folder):
    """The source files a scene folder's resized copy reads (the resize_scene job): a posed folder's
    parts' together; the user's own files tracked by content. A calibrated pairs file (its K per
    pair) cannot be resized: said here, at DAG build."""
    parts = [p for p in SCENES if scene_folder(p) == folder] or [folder]
    paths = sorted({p for part in parts for p in source_scene_inputs(part)})
    if POSED and CFG["dataset"] == "posed" and not scene_files(SOURCE / parts[0]).views:
        raise WorkflowError(f"descbench: resize {CFG['resize']}: scene folder {SOURCE / folder} is a calibrated "
                            "pairs file's scene, whose K cannot be resized (glue-factory resizes views.txt scenes, e.g. "
                            "MegaDepth-1500, not ScanNet-1500); remove resize (and protocol) for this dataset")
    return tracked(paths) if user_files(resized_source=True) else paths


# Only the keypoint jobs list the scene files (and precomputed feature files): descriptor and
# scoring jobs depend on the keypoint folder, which is rebuilt whenever a scene file changes, so
# their own copies of these inputs would add nothing but work: Snakemake re-stats every input of
# every ready job each time a job finishes, which cost 60 CPU-s of its own on 116 scenes.
SCENE_INPUTS = {b: sorted({p for s in ss for p in _scene_inputs(s)}) for b, ss in BATCHES.items()}


def batch_scene_inputs(wildcards):
    """Detector sets read the scene files; derived sets read other sets (keypoint_source_inputs).
    A folder dataset's files are the user's: tracked by content (the demo's and HPatches' come
    from this workflow's own rules)."""
    if "detector" not in CFG["keypoint_sets"][wildcards.kpset]:
        return []
    return tracked(SCENE_INPUTS[wildcards.batch]) if user_files() else SCENE_INPUTS[wildcards.batch]


def user_files(resized_source=False):
    """Whether the stages (with ``resized_source``: the resize jobs) read the user's own scene
    files (a folder or posed dataset), which are tracked by content; the demo's, HPatches' and the
    resized copies come from rules."""
    return CFG["dataset"] in ("folder", "posed") and (resized_source or not CFG.get("resize"))


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

        return tracked(sorted({str(locked_file(spec["params"]["path"], s, k)) for s in BATCHES[wildcards.batch]
                               for k in scene_files(DATA / s, check_exists=CFG["dataset"] == "folder", n_images=N_IMAGES).image_numbers}))
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
    return tracked(out)


def batch_spec(batch):
    """This batch only: keypoint and descriptor jobs touch nothing else."""
    return spec_file("batches", batch, {batch: BATCHES[batch]})


def pairs_spec():
    """The ``pairs`` option (passed as ``--pairs``; this file makes a change of it rerun the jobs it concerns)."""
    return spec_file("dataset", "pairs", PAIRS_MODE)


def all_batches_spec():
    """Every batch: the jobs that read every scene (or, scoring, draw distractors from them)."""
    return spec_file("batches", "all", BATCHES)


def keypoint_job_spec(wildcards):
    """A keypoint job's spec file: the set's config entry."""
    check_local_gpu(f"keypoint_sets.{wildcards.kpset}.params", _keypoint_run(wildcards.kpset))
    return spec_file("keypoint_sets", wildcards.kpset, CFG["keypoint_sets"][wildcards.kpset])


def descriptor_job_spec(wildcards):
    """A descriptor job's spec file: the descriptor's config entry; a composite's also lists what
    it reads on this set (descbench.descriptors.composite.resolve_components), so that a changed
    component reruns it."""
    check_local_gpu(f"descriptors.{wildcards.descriptor}.params", _descriptor_run(wildcards.descriptor))
    spec = CFG["descriptors"][wildcards.descriptor]
    if spec["family"] == "composite":
        from descbench.descriptors.composite import resolve_components

        spec = {**spec, "components": resolve_components(spec["params"], wildcards.kpset, CFG["descriptors"], CFG["keypoint_sets"])}
    base = shared_base_of(wildcards.kpset, wildcards.descriptor)
    if base:  # rows transformed from another descriptor's files (descbench.config.shared_base)
        spec = {**spec, "shared_base": base}
    parts = shared_parts_of(wildcards.kpset, wildcards.descriptor)
    if parts:  # parts' rows read from other descriptors' files (descbench.config.shared_parts)
        spec = {**spec, "shared_parts": list(parts)}
    return spec_file("descriptors", f"{wildcards.kpset}/{wildcards.descriptor}", spec)


def composite_inputs(wildcards):
    """A composite's inputs: each component's keypoint and descriptor folders of this batch; a
    family that transforms another descriptor's rows: that descriptor's folder (shared_base); a
    stack: the folders of the descriptors that give some of its parts' rows (shared_parts)."""
    spec = CFG["descriptors"][wildcards.descriptor]
    if spec["family"] != "composite":
        names = [shared_base_of(wildcards.kpset, wildcards.descriptor), *(shared_parts_of(wildcards.kpset, wildcards.descriptor) or ())]
        return sorted({PATHS.descriptors_dir(wildcards.kpset, n, wildcards.batch) for n in names if n})
    from descbench.descriptors.composite import resolve_components

    out = []
    for c in resolve_components(spec["params"], wildcards.kpset, CFG["descriptors"], CFG["keypoint_sets"]):
        out += [PATHS.keypoints_dir(c["keypoint_set"], wildcards.batch), PATHS.descriptors_dir(c["keypoint_set"], c["descriptor"], wildcards.batch)]
    return sorted(set(out))


def descriptor_model_files(wildcards):
    """The model / weight files of a descriptor (its family's facts), by content: replacing one
    reruns its jobs, whatever the new file's date."""
    return tracked(model_files(**_descriptor_run(wildcards.descriptor)))


def keypoint_model_files(wildcards):
    """The weight files of a learned detector (its detector's facts), by content."""
    return tracked(model_files(**_keypoint_run(wildcards.kpset)))


def patch_model_files(wildcards):
    """The model / weight files of a patch-describing job's descriptor, by content."""
    return tracked(model_files(**_patch_descriptor_run(wildcards.pdesc)))


def _patch_descriptor_run(descriptor):
    """:func:`_descriptor_run` of a patch-describing job: a composite runs its components there
    (as the parts of a stack would: their networks, threads and env)."""
    spec = CFG["descriptors"].get(descriptor)
    if spec and spec["family"] == "composite":
        from descbench.patches.checks import patch_components

        return {"family": "stack", "params": {"parts": list(patch_components(CFG, descriptor).values())}}
    return _descriptor_run(descriptor)


def _descriptor_run(descriptor):
    """{params, family} of a descriptor, the arguments of descbench.config's job facts (an
    hpatches-benchmark CSV import, not a descriptor of the config: no params, nothing to run)."""
    spec = CFG["descriptors"].get(descriptor)
    return {"params": spec.get("params", {}), "family": spec["family"]} if spec else {"params": {}}


def _keypoint_run(kpset):
    """{params, detector} of a keypoint set (a derived set: no params, nothing to run)."""
    spec = CFG["keypoint_sets"][kpset]
    return {"params": spec.get("params", {}), "detector": spec["detector"]} if "detector" in spec else {"params": {}}


def _env(run):
    """envs/learned.yaml for a job that imports the learned extra (descbench.config.needs_learned_extra), else envs/descbench.yaml."""
    return LEARNED_ENV if needs_learned_extra(**run) else ENV


_GPU_CHECKED = set()


def check_local_gpu(key, run):
    """A job asking for a GPU (device: cuda) in a run whose jobs run on this machine (Snakemake's
    local executor) stops the run at DAG build when this machine has none
    (descbench.torchrt.local_cuda_problem), instead of failing in the job. Called by the jobs'
    spec input functions (input functions run while the DAG is built, once the executor is known;
    resources and threads are evaluated later, when a job is scheduled). A dry run warns: it runs
    Snakemake's dry-run executor whichever executor the real run will use."""
    if key in _GPU_CHECKED:
        return
    _GPU_CHECKED.add(key)
    if job_resources(**run)["gpu"] and workflow.local_exec:
        problem = local_cuda_problem(key)
        if problem and workflow.dryrun:  # -n runs the dry-run executor whatever executor the real run names
            logger.warning(f"{problem} (a run with Snakemake's local executor stops here; a cluster executor, "
                           "e.g. --executor slurm, gives the job a GPU node)")
        elif problem:
            _stop(f"{problem} (a run with Snakemake's local executor runs its jobs on this machine; a cluster "
                  "executor, e.g. --executor slurm, gives the job a GPU node)")


def descriptor_resources(wildcards):
    return job_resources(**_descriptor_run(wildcards.descriptor))


def keypoint_resources(wildcards):
    return job_resources(**_keypoint_run(wildcards.kpset))


def descriptor_env(wildcards):
    return _env(_descriptor_run(wildcards.descriptor))


def _matcher_run(matcher):
    """{params, matcher} of a configured matcher, the arguments of descbench.config's job facts."""
    spec = CFG["matchers"][matcher]
    return {"params": spec.get("params", {}), "matcher": spec["matcher"]}


def matcher_job_spec(wildcards):
    """A matcher job's spec file: the matcher's config entry (a GPU it asks for checked first)."""
    check_local_gpu(f"matchers.{wildcards.matcher}.params", _matcher_run(wildcards.matcher))
    return spec_file("matchers", wildcards.matcher, CFG["matchers"][wildcards.matcher])


def matcher_resources(wildcards):
    return job_resources(**_matcher_run(wildcards.matcher))


def matcher_env(wildcards):
    return _env(_matcher_run(wildcards.matcher))


def matcher_model_files(wildcards):
    """The weight files a matcher's params name (its matcher's facts), by content."""
    return tracked(model_files(**_matcher_run(wildcards.matcher)))


def keypoint_env(wildcards):
    return _env(_keypoint_run(wildcards.kpset))


def patch_threads(wildcards):
    """A patch-describing job's threads: a learned descriptor's params.threads, else 1."""
    return job_resources(**_patch_descriptor_run(wildcards.pdesc))["threads"]


def patch_env(wildcards):
    return _env(_patch_descriptor_run(wildcards.pdesc))


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


def pipeline_sections(descriptor):
    """The pipelines task's settings under a descriptor's effective config: scoring, matching, pipelines."""
    eff = effective_config(CFG, descriptor)
    return {k: eff[k] for k in ("scoring", "matching", "pipelines")}


def results_root(levels):
    """Param: ``<results_dir>/<dataset tag>``, the ``levels``-th parent of the rule's first output."""
    return lambda wildcards, output: str(Path(output[0]).parents[levels])


REPORT_FILES = ("comparison.csv", "comparison.md", "comparison.parquet", "comparison.html", "per_scene.csv", "per_scene.parquet",
                "per_scene.html", "significance.csv", "significance.md", "significance.parquet", "significance.html",
                "provenance.json", "timings.csv", "timings.md", "timings.html")


RUN_STARTED = time.time()


def print_run_stopped():
    """The workflow's onerror: why the run stopped (a job failed, or Ctrl-C / SIGTERM) and what next."""
    from descbench.report.summary import run_stopped_hint

    print(run_stopped_hint(RES / "logs", smktuning.interrupted()), flush=True)


def print_run_summary():
    """The workflow's onsuccess (descbench.report.summary): the table when the report exists."""
    from descbench.report.summary import run_summary

    if POSED:
        pose_md = Path(PATHS.report("pose.md"))
        if pose_md.exists():
            when = "written by this run" if pose_md.stat().st_mtime >= RUN_STARTED else "up to date, unchanged by this run"
            print(f"descbench pose results, {when}:\n{pose_md.read_text()}\n  table: {pose_md} (.csv, .parquet beside it)\n"
                  f"  figure: {PATHS.report('plots/pose_error.png')}\n  per pair: {RES / 'pose'}", flush=True)
        return
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
                 "per_scene.html": "table_per_scene", "keypoint_stats.html": "table_keypoint_stats",
                 "timings.html": "table_timings"}


REPORT_PLOTS = {"patches/patches_map.png": "patches_map"}  # figures of other rules than `plots`
# The report's inspector page: (keypoint set, descriptors) of config `inspector`, or None (descbench.config)
INSPECTOR = None if POSED else inspector_page(CFG)


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
    """Where the patch sequences are, and which (descbench.patches.stages.patch_root_and_sequences)."""
    from descbench.patches.stages import patch_root_and_sequences

    try:
        return patch_root_and_sequences(CFG, RES, SCENES)
    except DescbenchError as exc:
        raise WorkflowError(f"descbench config error: {exc}") from None


PATCH_ROOT, PATCH_SEQS = _patch_root_and_sequences() if PATCHES_ON else (None, [])
PATCH_REPORT_FILES = ("hbench.csv", "hbench.md", "hbench.html", "hpatches_benchmark.csv", "hpatches_benchmark.md",
                      "hpatches_benchmark.html", "patches_map.png", "patches_map.svg", "patches_provenance.json")
# the workbench's patch benchmark (patches.workbench.enabled): its table, which the database reads
WORKBENCH_PATCHES_ON = PATCHES_ON and PATCH_CFG["workbench"]["enabled"]
if WORKBENCH_PATCHES_ON:
    from descbench.report.patches import WORKBENCH_FILES, WORKBENCH_STEM

    PATCH_REPORT_FILES = PATCH_REPORT_FILES + WORKBENCH_FILES
    REPORT_TABLES.update({f"patches/{WORKBENCH_STEM}.html": "table_patches_workbench"})
REPORT_TABLES.update({"patches/hbench.html": "table_patches_hbench",
                      "patches/hpatches_benchmark.html": "table_patches_hpatches_benchmark"})


def workbench_patch_table():
    """The workbench patch benchmark's CSV table for the results database (patches.workbench.enabled), else none."""
    return [PATHS.report(f"patches/{WORKBENCH_STEM}.csv")] if WORKBENCH_PATCHES_ON else []


def patch_sequence_files(seq):
    """The files a patch sequence is made of (generated: the generation job's outputs)."""
    if PATCH_CFG["source"] == "hpatches_release":
        return [PATCH_FLAG]
    files = [str(PATCH_ROOT / seq / f"{t}.png") for t in PATCH_TYPES]
    if PATCH_CFG["source"] == "generated":
        return files + [str(PATCH_ROOT / seq / "patches.json")]
    return tracked(files)  # your folder's patches, by content


def patch_sequence_inputs(wildcards):
    out = patch_sequence_files(wildcards.seq)
    csv = PATCH_CFG["csv"].get(wildcards.pdesc) if hasattr(wildcards, "pdesc") else None
    if csv:  # changed CSV files trigger a rerun (by content)
        out = out + tracked([str(Path(csv["path"]) / wildcards.seq / f"{t}.csv") for t in PATCH_TYPES])
    return out


def patch_describe_spec(wildcards):
    """A registry family's spec file (editing the descriptor reruns only its jobs); none for a
    folder of hpatches-benchmark CSV files."""
    if PATCH_CFG["csv"].get(wildcards.pdesc):
        return []
    check_local_gpu(f"descriptors.{wildcards.pdesc}.params", _descriptor_run(wildcards.pdesc))
    spec = {k: v for k, v in CFG["descriptors"][wildcards.pdesc].items() if k in ("family", "params")}
    if spec["family"] == "composite":  # its components are described in the job (descbench.patches.stages.describe)
        from descbench.patches.checks import patch_components

        spec["components"] = patch_components(CFG, wildcards.pdesc)
    return spec_file("patch_descriptors", wildcards.pdesc, spec)


def patch_describe_args(wildcards, input):
    """The descriptor's definition as arguments: its spec file, or a folder of hpatches-benchmark CSV files."""
    csv = PATCH_CFG["csv"].get(wildcards.pdesc)
    if csv:
        return f"--csv-root {shlex.quote(csv['path'])}" + (" --binary-packed" if csv["binary_packed"] else "")
    return f"--spec @{shlex.quote(input.spec)} --centre-keypoint {PATCH_CFG['centre_keypoint']}"


def patch_outputs():
    return [PATHS.report(f"patches/{f}") for f in PATCH_REPORT_FILES] if PATCHES_ON else []


wildcard_constraints:
    seq=r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
    pdesc=r"[A-Za-z0-9][A-Za-z0-9_-]*",
