# Config validation, paths, input functions and wildcard constraints.
import json
from pathlib import Path

from descbench.config import combinations, validate_config
from descbench.datasets import dataset_tag, list_scenes, scene_root
from descbench.datasets.layout import TARGET_IMAGES, scene_files
from descbench.errors import DescbenchError


def _validated_config():
    try:
        return validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
    except DescbenchError as exc:
        raise WorkflowError(f"descbench config error: {exc}")


CFG = _validated_config()
DATA = scene_root(CFG)
RES = Path(CFG["results_dir"]) / dataset_tag(CFG)
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


def keypoints_path(kpset, scene):
    return str(RES / "keypoints" / kpset / f"{scene}.parquet")


def descriptors_path(kpset, descriptor, scene):
    return str(RES / "descriptors" / kpset / descriptor / f"{scene}.parquet")


def score_path(kpset, descriptor, scene, kind):
    return str(RES / "scores" / kpset / descriptor / f"{scene}.{kind}")


def report_outputs():
    return [str(RES / "report" / f) for f in ("comparison.csv", "comparison.md", "comparison.parquet", "per_scene.csv", "per_scene.parquet")]


def report_entries():
    return [
        {
            "keypoint_set": ks,
            "descriptor": d,
            "pairs": [score_path(ks, d, s, "pairs.parquet") for s in SCENES],
            "timings": [score_path(ks, d, s, "timing.json") for s in SCENES],
        }
        for ks, d in COMBOS
    ]
