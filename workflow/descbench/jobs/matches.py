"""The matcher stage's job (``match``): one matcher on every pair of every scene of a batch, for one
(keypoint set, descriptor), written once per scene (:data:`descbench.matchers.MATCHES_SCHEMA`) for
every match-based task to read."""

from __future__ import annotations

import argparse
from pathlib import Path

from descbench import io
from descbench.datasets.layout import load_pairs, scene_files
from descbench.jobs.common import JobCommand, batch_args, json_arg, read_features, result_paths
from descbench.matchers import MatchSide, check_matcher_params, get_matcher, matches_table, run_matcher
from descbench.paths import ResultPaths


def match_scene(scene_dir: Path, keypoints: Path, descriptors: Path, name: str, spec: dict, out: Path,
                pairs: str = "reference", kpset: str | None = None) -> None:
    """Matches of every pair of one scene (the config's ``pairs`` option) with matcher ``name``
    (``spec``: its config entry ``{matcher, params}``, params filled), written to ``out``."""
    params = check_matcher_params(spec["matcher"], spec.get("params"), f"matchers.{name}.params")
    matcher = get_matcher(spec["matcher"])
    f = read_features(Path(keypoints), Path(descriptors))
    sides = {k: MatchSide(kp, f.by_image[k], tuple(f.kmeta["image_sizes"][str(k)])) for k, kp in f.per_image.items()}
    per_pair = []
    for p in load_pairs(scene_files(Path(scene_dir)), pairs):
        where = f"matcher '{name}', scene {f.scene}, pair ({p.a}, {p.b})"
        per_pair.append((p.a, p.b, run_matcher(spec["matcher"], params, sides[p.a], sides[p.b], where)))
    record = {"matcher_name": name, "matcher": spec["matcher"], "params": params, "score_kind": matcher.score_kind}
    if matcher.provenance is not None:  # how it ran (a torch matcher: device, versions, threads, weights)
        record["runtime"] = matcher.provenance(params)
    prov = io.provenance("matches", record,
                         scene=f.scene, descriptor=f.dmeta["descriptor"], keypoint_set=kpset or f.kmeta["params"]["keypoint_set"],
                         empty_images=f.kmeta["empty_images"], image_sizes=f.kmeta["image_sizes"])
    io.write_table(matches_table(f.scene, per_pair), out, prov)


def match_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str, name: str, spec: dict,
                features: str | None = None, pairs: str = "reference") -> None:
    """:func:`match_scene` on every scene of ``batch``; ``features``: the descriptor whose files are
    read (a scoring variant's base, ``descriptors.<d>.features_of``)."""
    for scene in paths.batches[batch]:
        match_scene(Path(scene_root) / scene, Path(paths.keypoints(kpset, scene)),
                    Path(paths.descriptors(kpset, features or descriptor, scene)), name, spec,
                    Path(paths.matches(kpset, descriptor, name, scene)), pairs, kpset)


def pipeline_args(p: argparse.ArgumentParser) -> None:
    """The arguments of a job of one (keypoint set, descriptor, matcher, scene batch)."""
    batch_args(p)
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--matcher", required=True, help="the matcher's name in the config (matchers.<name>)")
    p.add_argument("--spec", required=True, help="JSON: the matcher's config entry {matcher, params}")
    p.add_argument("--features-of", default=None, help="read this descriptor's files (a scoring variant's base)")
    p.add_argument("--pairs", default="reference", help="the config's pairs option")


def add_commands(sub) -> dict:
    """The ``match`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("match", help="the matcher stage: one matcher on every pair of one scene batch")
    pipeline_args(p)
    return {"match": JobCommand(run, pandas=False, timing=("matches", "keypoint_set", "descriptor")), **add_pipeline_commands(sub)}


def run(a: argparse.Namespace) -> None:
    match_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, a.matcher, json_arg(a.spec),
                a.features_of, a.pairs)


# ----------------------------------------------------------------------------- the pipelines task


def score_pipelines_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str, name: str,
                          spec: dict, sections: dict, features: str | None = None, pairs: str = "reference") -> None:
    """The pipelines task (:mod:`descbench.tasks.pipelines`) on every scene of ``batch`` from the
    matcher stage's files of matcher ``name`` (``spec``: its config entry); ``sections``:
    ``scoring``, ``matching`` and ``pipelines`` settings."""
    from descbench.errors import DataError
    from descbench.matchers import MATCHES_SCHEMA, split_matches
    from descbench.tasks.pipelines import KINDS, NAME, estimator_settings, score_pipelines

    score_kind = get_matcher(spec["matcher"]).score_kind
    settings = estimator_settings(sections["pipelines"])  # once for every scene
    for scene in paths.batches[batch]:
        scene_dir = Path(scene_root) / scene
        f = read_features(Path(paths.keypoints(kpset, scene)), Path(paths.descriptors(kpset, features or descriptor, scene)))
        mpath = Path(paths.matches(kpset, descriptor, name, scene))
        table, meta, matches_sha256 = io.read_table_sha256(mpath, MATCHES_SCHEMA)  # the file read once
        if meta.get("params", {}).get("matcher_name") != name or meta.get("keypoint_set") != kpset:
            raise DataError(f"{mpath} holds the matches of matcher {meta.get('params', {}).get('matcher_name')!r} on keypoint set "
                            f"{meta.get('keypoint_set')!r}, not {name!r} on {kpset!r}; rerun the matcher stage")
        scene_pairs = load_pairs(scene_files(scene_dir), pairs)
        matches = split_matches(table, [(p.a, p.b) for p in scene_pairs])
        outs = [Path(paths.match_task_file(NAME, kpset, descriptor, name, scene, k)) for k in KINDS]
        score_pipelines(scene_dir, f, matches, score_kind, sections["scoring"], sections["matching"], sections["pipelines"],
                        *outs, scene_pairs, {"descriptor": descriptor, "keypoint_set": kpset, "matcher_name": name,
                                              "matcher": spec["matcher"], "matcher_params": meta["params"]["params"],
                                              "matches_sha256": matches_sha256}, settings)


def match_report_args(r: argparse.ArgumentParser) -> None:
    """The arguments of a match-based task's report job (pipelines, pose): the results, batches,
    (keypoint set, descriptor, matcher) combinations, config, output folder and the folder of its
    cumulative figure."""
    r.add_argument("--results-root", type=Path, required=True)
    r.add_argument("--batches", required=True, help="JSON {batch: [scenes]}")
    r.add_argument("--combos", required=True, help="JSON list of [keypoint_set, descriptor, matcher]")
    r.add_argument("--config", required=True, help="the validated config (JSON)")
    r.add_argument("--out-dir", type=Path, required=True)
    r.add_argument("--plots-dir", type=Path, default=None, help="also draw the task's cumulative error figure there")


def add_pipeline_commands(sub) -> dict:
    p = sub.add_parser("score-pipelines", help="the pipelines task (matches -> match accuracy, homography estimation) of one batch")
    pipeline_args(p)
    p.add_argument("--sections", required=True, help="JSON {scoring, matching, pipelines}: the settings")
    r = sub.add_parser("pipelines-report", help="the pipelines table: one row per (keypoint set, descriptor, matcher)")
    match_report_args(r)
    r.add_argument("--comparison", type=Path, default=None, help="the comparison table (Parquet): its descriptor metrics join each row")
    return {"score-pipelines": JobCommand(run_pipelines, pandas=False, timing=("pipelines", "keypoint_set", "descriptor")), "pipelines-report": run_report}


def run_pipelines(a: argparse.Namespace) -> None:
    score_pipelines_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, a.matcher, json_arg(a.spec),
                          json_arg(a.sections), a.features_of, a.pairs)


def run_report(a: argparse.Namespace) -> None:
    from descbench.report.pipelines import write

    cfg = json_arg(a.config)
    paths = ResultPaths(a.results_root, json_arg(a.batches))
    write(paths, [tuple(c) for c in json_arg(a.combos)], cfg, a.out_dir, {}, a.comparison, a.plots_dir)
