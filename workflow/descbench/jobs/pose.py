"""The pose task's jobs (:mod:`descbench.tasks.pose`): ``score-pose`` (one (keypoint set,
descriptor, matcher, scene batch) of a posed dataset) and ``pose-report`` (the pose table and its
figure, :mod:`descbench.report.pose`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench import io
from descbench.jobs.common import JobCommand, json_arg, read_features, result_paths
from descbench.jobs.matches import match_report_args, pipeline_args
from descbench.paths import ResultPaths


def score_pose_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str, name: str,
                     spec: dict, section: dict, features: str | None = None) -> None:
    """The pose task on every scene of ``batch`` from the matcher stage's files of matcher ``name``
    (``spec``: its config entry); ``section``: the config's ``pose`` settings."""
    from descbench.datasets.layout import load_pairs, scene_files
    from descbench.errors import DataError
    from descbench.matchers import MATCHES_SCHEMA, get_matcher, split_matches
    from descbench.tasks.pose import KINDS, NAME, estimator_settings, score_pose

    settings = estimator_settings(section)  # once for every scene
    score_kind = get_matcher(spec["matcher"]).score_kind
    for scene in paths.batches[batch]:
        files = scene_files(Path(scene_root) / scene)
        if not files.posed:
            raise DataError(f"scene folder {Path(scene_root) / scene} is not a posed scene (no views.txt or pairs_calibrated.txt); the pose task "
                            "evaluates posed datasets (dataset: posed_demo or posed)")
        f = read_features(Path(paths.keypoints(kpset, scene)), Path(paths.descriptors(kpset, features or descriptor, scene)))
        mpath = Path(paths.matches(kpset, descriptor, name, scene))
        table, meta, matches_sha256 = io.read_table_sha256(mpath, MATCHES_SCHEMA)
        if meta.get("params", {}).get("matcher_name") != name or meta.get("keypoint_set") != kpset:
            raise DataError(f"{mpath} holds the matches of matcher {meta.get('params', {}).get('matcher_name')!r} on keypoint set "
                            f"{meta.get('keypoint_set')!r}, not {name!r} on {kpset!r}; rerun the matcher stage")
        pairs = load_pairs(files)
        names = [(files.image_names[p.a - 1], files.image_names[p.b - 1]) for p in pairs]
        matches = split_matches(table, [(p.a, p.b) for p in pairs])
        outs = [Path(paths.match_task_file(NAME, kpset, descriptor, name, scene, k)) for k in KINDS]
        score_pose(f, matches, pairs, names, section, *outs,
                   {"descriptor": descriptor, "keypoint_set": kpset, "matcher_name": name, "matcher": spec["matcher"],
                    "matcher_params": meta["params"]["params"], "score_kind": score_kind, "matches_sha256": matches_sha256},
                   settings, scene_depths(files) if section.get("depth") else None)


def scene_depths(files):
    """Image number -> its depth map (:func:`descbench.datasets.posed.read_depth`), each read once, on
    first use; a view without a depth map is a DataError (``pose.depth`` was resolved to true)."""
    from descbench.datasets.posed import read_depth
    from descbench.errors import DataError

    cache: dict = {}

    def depth_of(k: int):
        if k not in cache:
            path = files.depths[k - 1]
            if path is None:
                raise DataError(f"view {files.image_names[k - 1]!r} of {files.pairs_file.parent} has no depth map "
                                "(depths/<name>.h5 or .png), which the depth metrics need; add it, or set pose.depth: false")
            cache[k] = read_depth(path, files.views[k - 1])
        return cache[k]

    return depth_of


def add_commands(sub) -> dict:
    """The ``score-pose`` and ``pose-report`` subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("score-pose", help="the pose task (matches -> relative pose, epipolar precision) of one batch")
    pipeline_args(p)
    p.add_argument("--section", required=True, help="JSON: the config's pose section")
    r = sub.add_parser("pose-report", help="the pose table: one row per (keypoint set, descriptor, matcher)")
    match_report_args(r)
    return {"score-pose": JobCommand(run_score, timing=("pose", "keypoint_set", "descriptor")), "pose-report": run_report}


def run_score(a: argparse.Namespace) -> None:
    score_pose_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, a.matcher, json_arg(a.spec),
                     json_arg(a.section), a.features_of)


def run_report(a: argparse.Namespace) -> None:
    from descbench.report.pose import write

    write(ResultPaths(a.results_root, json_arg(a.batches)), [tuple(c) for c in json_arg(a.combos)], json_arg(a.config),
          a.out_dir, {}, a.plots_dir)
