"""The scoring job (``score``): every enabled scoring task (:mod:`descbench.tasks`) on every scene
of a batch, one screen pass per scene shared by the built-in tasks (keypoint retrieval,
verification, matching), each task then writing its files; and the same tasks on one scene's files.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from descbench.datasets.geometry import Pair
from descbench.datasets.layout import load_pairs, scene_files
from descbench.errors import ConfigError
from descbench.jobs.common import JobCommand, SceneFeatures, batch_args, json_arg, read_features, result_paths
from descbench.jobs.distractors import distractors_from_files, read_distractor_bank
from descbench.paths import ResultPaths
from descbench.tasks import score_job_tasks, scoring_sections
from descbench.tasks.base import SceneJob, pair_target, query_groups, scene_pairs
from descbench.tasks.matching import matching_params, score_matching
from descbench.tasks.retrieval import score_retrieval
from descbench.tasks.verification import check_groups, score_verification, verification_inputs


@dataclass
class ScenePass:
    """The built-in tasks' results of one scene's pairs (None: task disabled), keyed by pair, and
    each task's seconds summed over the scene's query images (:func:`scene_pass`)."""

    retrieval: dict | None  # {(a, b): PairResult}
    verification: list | None  # [(a, its pairs, SceneTaskResult)] per query image
    matching: dict | None  # {(a, b): (stats, ClassifierResult)}
    seconds: dict


def scene_pass(scene_dir: Path, f: SceneFeatures, scoring: dict, distractors: list | None,
               verification: dict | None, matching: dict | None, pairs: list[Pair] | None = None) -> ScenePass:
    """Keypoint retrieval, verification (when ``verification`` and ``distractors`` are given) and
    matching (when ``matching`` is given) of one scene's ``pairs`` (None: its default pairs) with
    ONE float32 screen product per block of query rows for all of them, per query image:
    :func:`descbench.metrics.scenepass.score_scene` on each query image a and its pairs' images b."""
    from descbench.metrics import scenepass
    from descbench.metrics.retrieval import RetrievalParams

    files = scene_files(scene_dir)
    pairs = scene_pairs(files, pairs)
    per_image, by_image, kmeta = f.per_image, f.by_image, f.kmeta
    groups = query_groups(pairs)
    with_ver = verification is not None and distractors is not None
    if with_ver:
        check_groups(files.scene, groups, verification)
    mm = (*matching_params(scoring, matching), tuple(matching["classifier_matchers"])) if matching is not None else None
    out = ScenePass({}, [] if with_ver else None, {} if matching is not None else None, {})
    for a, group in groups:
        bparams = None
        if with_ver:
            targets, bparams = verification_inputs(files.scene, f, distractors, scoring, verification, group)
        else:
            targets = [pair_target(f, p, "keypoint retrieval") for p in group]
        q = per_image[a]
        sr = scenepass.score_scene(q.xy, by_image[a], targets, RetrievalParams.from_config(scoring),
                                   distractors if with_ver else None, bparams, mm, tuple(kmeta["image_sizes"][str(a)]),
                                   where=f"scene {files.scene}", q_frame=(q.angle, q.size))
        out.retrieval.update({(a, p.b): r for p, r in zip(group, sr.retrieval)})
        if with_ver:
            out.verification.append((a, group, sr.verification))
        if sr.matching is not None:
            out.matching.update({(a, p.b): r for p, r in zip(group, sr.matching)})
        for key, s in sr.seconds.items():
            out.seconds[key] = out.seconds.get(key, 0.0) + s
    return out


# Single-scene entry points on files (tests, scripts): the same task functions.


def score_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict,
                out_queries: Path, out_pairs: Path, out_timing: Path) -> None:
    """Keypoint retrieval scores of one scene from its files (:func:`descbench.tasks.retrieval.score_retrieval`)."""
    score_retrieval(scene_dir, read_features(keypoints, descriptors), scoring, out_queries, out_pairs, out_timing)


def score_verification_scene(scene_dir: Path, keypoints: Path, descriptors: Path, distractor_files: dict[str, tuple[Path, Path]],
                             all_scenes: list[str], scoring: dict, verification: dict,
                             out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path) -> None:
    """Keypoint verification of one scene from its files; ``distractor_files`` maps each distractor
    scene to its (keypoints, descriptors) files."""
    f = read_features(keypoints, descriptors)
    draws = distractors_from_files(f.scene, all_scenes, verification, distractor_files, f.dmeta["descriptor"])
    score_verification(scene_dir, f, draws, scoring, verification, out_list, out_queries, out_scene, out_timing)


def score_matching_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict, matching: dict,
                         out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path) -> None:
    """Matching metrics of one scene from its files (:func:`descbench.tasks.matching.score_matching`)."""
    score_matching(scene_dir, read_features(keypoints, descriptors), scoring, matching, out_pairs, out_classifier, out_roc, out_timing)


def score_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str,
                sections: dict, features: str | None = None, pairs: str = "reference") -> None:
    """Every enabled task of descbench.tasks.SCORING_TASKS on every scene of a batch, in one
    process: each scene's features are read once and shared by the tasks.

    ``sections``: ``{section: settings}``, ``scoring`` and the section of every task to run
    (descbench.config.score_job_sections); a task whose section is absent does not run. Keypoint
    retrieval, verification + keypoint retrieval with distractors (from the distractor bank) and
    matching + classifier share ONE screen pass per scene (:func:`scene_pass`); each task then
    writes its files (``ScoringTask.write``), in registry order. ``pairs``: the config's ``pairs`` option (each scene's
    pairs: :meth:`descbench.datasets.layout.SceneFiles.pairs`)."""
    sections = sections if isinstance(sections, dict) else {}
    unknown = sorted(set(sections) - set(scoring_sections()))
    if unknown or "scoring" not in sections:
        raise ConfigError(f"the scoring job's sections are {', '.join(sorted(sections)) or 'none'}; expected 'scoring' and any of "
                          f"the tasks' sections ({', '.join(scoring_sections()[1:])})" + (f"; unknown: {', '.join(unknown)}" * bool(unknown)))
    tasks = score_job_tasks(sections)
    scoring, verification, matching = sections["scoring"], sections.get("verification"), sections.get("matching")
    all_scenes = [s for ss in paths.batches.values() for s in ss]
    bank = None
    if verification is not None:
        bank = read_distractor_bank(Path(paths.distractor_bank(kpset, descriptor)), all_scenes, verification, descriptor)
    for scene in paths.batches[batch]:
        scene_dir = Path(scene_root) / scene
        # `features`: a scoring variant reads its base descriptor's files (descriptors.<d>.features_of)
        f = read_features(Path(paths.keypoints(kpset, scene)), Path(paths.descriptors(kpset, features or descriptor, scene)))
        draws = bank[scene] if bank is not None else None
        scene_pairs = load_pairs(scene_files(scene_dir), pairs)
        # one screen product per row block for the built-in tasks; each task's timing file gets its share
        sp = scene_pass(scene_dir, f, scoring, draws, verification, matching, scene_pairs)
        job = SceneJob(scene_dir, f, sections, sp, draws, scene_pairs)
        for task in tasks:
            task.write(job, task.files(paths, kpset, descriptor, scene))



# ----------------------------------------------------------------------------- command


def add_commands(sub) -> dict:
    """The ``score`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("score", help="every enabled scoring task (retrieval, verification, matching, ...) of one scene batch")
    batch_args(p)
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--sections", required=True,
                   help="JSON {section: settings}: scoring and the section of every task to run (descbench.tasks; "
                        "the workflow passes descbench.config.score_job_sections); a task whose section is absent does not run")
    p.add_argument("--features-of", default=None, help="read this descriptor's files (a scoring variant's base)")
    p.add_argument("--pairs", default="reference",
                   help="the config's pairs option: each scene's pairs without a pairs.txt (descbench.datasets.layout)")
    return {"score": JobCommand(run, pools=("numba",), pandas=False, timing=("scoring", "keypoint_set", "descriptor"))}


def run(a: argparse.Namespace) -> None:
    score_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, json_arg(a.sections), a.features_of, a.pairs)
