"""The pose task's jobs (:mod:`descbench.tasks.pose`): ``score-pose`` (one (keypoint set,
descriptor, matcher, scene batch) of a posed dataset) and ``pose-report`` (the pose table and its
figure, :mod:`descbench.report.pose`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench import io
from descbench.jobs.common import json_arg, read_features, result_paths
from descbench.jobs.matches import pipeline_args
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
        if files.views is None:
            raise DataError(f"scene folder {Path(scene_root) / scene} is not a posed scene (no views.txt); the pose task "
                            "evaluates posed datasets (dataset: posed_demo or posed)")
        f = read_features(Path(paths.keypoints(kpset, scene)), Path(paths.descriptors(kpset, features or descriptor, scene)))
        mpath = Path(paths.matches(kpset, descriptor, name, scene))
        table, meta, matches_sha256 = io.read_table_sha256(mpath, MATCHES_SCHEMA)
        if meta.get("params", {}).get("matcher_name") != name or meta.get("keypoint_set") != kpset:
            raise DataError(f"{mpath} holds the matches of matcher {meta.get('params', {}).get('matcher_name')!r} on keypoint set "
                            f"{meta.get('keypoint_set')!r}, not {name!r} on {kpset!r}; rerun the matcher stage")
        pairs = load_pairs(files)
        names = [(files.views[p.a - 1].name, files.views[p.b - 1].name) for p in pairs]
        matches = split_matches(table, [(p.a, p.b) for p in pairs])
        outs = [Path(paths.match_task_file(NAME, kpset, descriptor, name, scene, k)) for k in KINDS]
        score_pose(f, matches, pairs, names, section, *outs,
                   {"descriptor": descriptor, "keypoint_set": kpset, "matcher_name": name, "matcher": spec["matcher"],
                    "matcher_params": meta["params"]["params"], "score_kind": score_kind, "matches_sha256": matches_sha256},
                   settings)


def add_commands(sub) -> dict:
    """The ``score-pose`` and ``pose-report`` subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("score-pose", help="the pose task (matches -> relative pose, epipolar precision) of one batch")
    pipeline_args(p)
    p.add_argument("--section", required=True, help="JSON: the config's pose section")
    r = sub.add_parser("pose-report", help="the pose table: one row per (keypoint set, descriptor, matcher)")
    r.add_argument("--results-root", type=Path, required=True)
    r.add_argument("--batches", required=True, help="JSON {batch: [scenes]}")
    r.add_argument("--combos", required=True, help="JSON list of [keypoint_set, descriptor, matcher]")
    r.add_argument("--config", required=True, help="the validated config (JSON)")
    r.add_argument("--out-dir", type=Path, required=True)
    r.add_argument("--plots-dir", type=Path, default=None, help="also draw the cumulative pose-error figure there")
    return {"score-pose": run_score, "pose-report": run_report}


def run_score(a: argparse.Namespace) -> None:
    score_pose_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, a.matcher, json_arg(a.spec),
                     json_arg(a.section), a.features_of)


def run_report(a: argparse.Namespace) -> None:
    from descbench.report.pose import write

    write(ResultPaths(a.results_root, json_arg(a.batches)), [tuple(c) for c in json_arg(a.combos)], json_arg(a.config),
          a.out_dir, {}, a.plots_dir)
