# Config validation, paths, input functions and wildcard constraints.
import json
from pathlib import Path

from descbench.config import combinations, validate_config
from descbench.datasets import dataset_tag, list_scenes, scene_root
from descbench.datasets.layout import TARGET_IMAGES, scene_files
from descbench.metrics.distractors import distractor_scenes
from descbench.paths import ResultPaths
from descbench.errors import DescbenchError


def _validated_config():
    try:
        return validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
    except DescbenchError as exc:
        raise WorkflowError(f"descbench config error: {exc}")


CFG = _validated_config()
DATA = scene_root(CFG)
RES = Path(CFG["results_dir"]) / dataset_tag(CFG)
PATHS = ResultPaths(RES)
SCENES = list_scenes(CFG)
COMBOS = combinations(CFG)
WARMUP_FLAG = Path(CFG["results_dir"]) / ".numba_warmup.done"
HPATCHES_FLAG = str(Path(CFG["data_dir"]) / "hpatches" / "validated.flag")
ENV = "../../envs/descbench.yaml"


wildcard_constraints:
    scene=r"[A-Za-z0-9][A-Za-z0-9_.+-]*",
    kpset=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    descriptor=r"[A-Za-z0-9][A-Za-z0-9_-]*",


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def scene_dir(wildcards):
    return str(DATA / wildcards.scene)


def scene_inputs(wildcards):
    """The 6 images and 5 homographies of a scene (stat only, no image is read).

    HPatches is represented by its download rule's flag: the archive is immutable.
    """
    if CFG["dataset"] == "hpatches":
        return [HPATCHES_FLAG]
    try:
        files = scene_files(DATA / wildcards.scene, check_exists=CFG["dataset"] == "folder")
    except DescbenchError as exc:
        raise WorkflowError(str(exc))
    return [str(p) for p in files.all_paths()]


def precomputed_inputs(wildcards):
    """Feature files of a precomputed keypoint set, so that new features trigger a rerun."""
    spec = CFG["keypoint_sets"][wildcards.kpset]
    if spec["detector"] != "precomputed":
        return []
    from descbench.precomputed import feature_path

    files = scene_files(DATA / wildcards.scene, check_exists=CFG["dataset"] == "folder")
    if CFG["dataset"] != "folder" and not files.images[0].exists():
        return []  # images not there yet (download/demo rule): checked again when the job runs
    try:
        return [str(feature_path(p, spec["params"]["method"], spec["params"]["root"])) for p in files.images]
    except DescbenchError as exc:
        raise WorkflowError(str(exc))


keypoints_path = PATHS.keypoints
descriptors_path = PATHS.descriptors
score_path = PATHS.score
verification_path = PATHS.verification
matching_path = PATHS.matching


def scene_distractors(scene):
    """Scenes whose features provide ``scene``'s distractors (fixed by seed and scene list)."""
    v = CFG["verification"]
    return distractor_scenes(scene, SCENES, v["distractor_scenes"], v["seed"])


def distractor_inputs(wildcards):
    """Keypoints and descriptors of the distractor scenes, so the DAG orders the jobs."""
    out = {}
    for s in scene_distractors(wildcards.scene):
        out[f"kp_{s}"] = keypoints_path(wildcards.kpset, s)
        out[f"desc_{s}"] = descriptors_path(wildcards.kpset, wildcards.descriptor, s)
    return out


def distractor_arg(wildcards):
    return as_json({
        s: [keypoints_path(wildcards.kpset, s), descriptors_path(wildcards.kpset, wildcards.descriptor, s)]
        for s in scene_distractors(wildcards.scene)
    })


REPORT_FILES = ("comparison.csv", "comparison.md", "comparison.parquet", "per_scene.csv", "per_scene.parquet")


def report_outputs():
    return [PATHS.report(f) for f in REPORT_FILES]


def report_inputs():
    """Every per-scene result file the report reads (it derives the same paths from descbench.paths)."""
    from descbench.report.table import entry_files

    return [p for ks, d in COMBOS for p in entry_files(PATHS, ks, d, SCENES, CFG).all_files()]
