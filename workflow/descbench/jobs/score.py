"""The scoring job (``score``): every enabled scoring task on every scene of a batch, one screen
pass per scene shared by the built-in tasks (keypoint retrieval, verification, matching), each
task's writer then writing its files; and the same tasks on one scene's files.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.geometry import Pair
from descbench.datasets.layout import load_pairs, scene_files
from descbench.errors import ConfigError, DataError
from descbench.jobs.common import SceneFeatures, SceneJob, batch_args, json_arg, read_features, result_paths, write_timing
from descbench.jobs.distractors import distractors_from_files, read_distractor_bank
from descbench.paths import ResultPaths


def _groups(pairs: list[Pair]) -> list[tuple[int, list[Pair]]]:
    """The pairs by query image ``a``: one group per image, in order of first appearance, each
    group's pairs in listing order. A group shares its query keypoints (one screen pass)."""
    out: dict[int, list[Pair]] = {}
    for p in pairs:
        out.setdefault(p.a, []).append(p)
    return list(out.items())


def _labelled(pairs: list[Pair]) -> bool:
    """Whether a scene's rows carry ``query_image``: only when some pair's query image is not 1.
    A scene of (1, k) pairs (HPatches, the demo) keeps the schema and bytes it always had, where
    ``pair`` = k names the pair."""
    return any(p.a != 1 for p in pairs)


def _scene_pairs(files, pairs: list[Pair] | None) -> list[Pair]:
    """``pairs`` or, when None (the single-scene entry points), the scene's pairs under the
    default ``pairs: reference`` (its ``pairs.txt`` when it has one)."""
    return load_pairs(files) if pairs is None else pairs


def _target(f: SceneFeatures, p: Pair, what: str):
    """The :class:`descbench.metrics.bojanic.Target` of pair ``p``'s image b."""
    from descbench.metrics.bojanic import Target

    kb = f.per_image[p.b]
    return Target(kb.xy, f.by_image[p.b], p.homography(what), tuple(f.kmeta["image_sizes"][str(p.b)]), kb.angle, kb.size)


def retrieval_task(scene_dir: Path, f: SceneFeatures, scoring: dict, out_queries: Path, out_pairs: Path, out_timing: Path,
                   results: dict | None = None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Keypoint retrieval scores of one scene: per-query records and per-pair statistics.

    ``pairs``: the scene's :class:`~descbench.datasets.geometry.Pair` list (None: its default
    pairs); each pair's queries are image a's keypoints, its candidates image b's. ``results``:
    ``{(a, b): PairResult}`` already computed by :func:`scene_pass` (None: computed here);
    ``t0``: start of the timing.
    """
    # metrics (numba) imported here, not at the top: keypoint/descriptor jobs never load numba
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, policy_rank, score_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    params = RetrievalParams.from_config(scoring)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    qschema = io.with_query_image(io.QUERIES) if labelled else io.QUERIES
    qcols: dict[str, list] = {n: [] for n in qschema.names}
    prows = []
    for p in pairs:
        a, k = p.a, p.b
        q = per_image[a]
        size = tuple(kmeta["image_sizes"][str(k)])
        res = results[(a, k)] if results is not None else score_pair(
            q.xy, by_image[a], per_image[k].xy, by_image[k], p.homography("keypoint retrieval"), size, params,
            (q.angle, q.size), (per_image[k].angle, per_image[k].size))
        nq = q.xy.shape[0]
        qcols["scene"].append(np.full(nq, files.scene, dtype=object))
        if labelled:
            qcols["query_image"].append(np.full(nq, a, dtype=np.int8))
        qcols["pair"].append(np.full(nq, k, dtype=np.int8))
        qcols["query"].append(np.arange(nq, dtype=np.int32))
        for n in ("inside", "n_relevant", "gt_index", "gt_px", "n_closer", "n_tied", "ap"):
            qcols[n].append(getattr(res, n))
        qcols["rank"].append(res.rank if res.rank is not None else policy_rank(res.n_closer, res.n_tied, params.tie_policy))
        prows.append({"scene": files.scene, **({"query_image": a} if labelled else {}), "pair": k,
                      **pair_statistics(res, len(per_image[k]))})
    queries = pa.table({n: pa.array(np.concatenate(v), type=qschema.field(n).type) for n, v in qcols.items()}, schema=qschema)
    pschema = io.with_query_image(io.PAIRS) if labelled else io.PAIRS
    pairs_table = io.table_from_rows(prows, pschema, f"scene {files.scene}: retrieval pairs table (io.PAIRS)")
    prov = io.provenance(
        "scoring", {"task": "keypoint_retrieval", **scoring}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance=dmeta["distance"], empty_images=kmeta["empty_images"],
    )
    io.write_table(queries, out_queries, prov)
    io.write_table(pairs_table, out_pairs, prov)
    write_timing(out_timing, files.scene, t0)


def _check_verification_groups(scene: str, groups: list, verification: dict) -> None:
    """Verification of a scene with several query images pools their lists into the scene's one
    list (:func:`_pooled_scene_stats`); the statistics that are not computed from that list
    (``candidates: all``, ``convention: workbench``) have no such pooling: refused by name."""
    if len(groups) < 2:
        return
    bad = [f"verification.{k}: {verification[k]}" for k, ok in (("candidates", "nearest"), ("convention", "descbench"))
           if verification[k] != ok]
    if bad:
        raise ConfigError(
            f"scene {scene}: its pairs have {len(groups)} query images ({', '.join(str(a) for a, _ in groups)}), and "
            f"{' and '.join(bad)} is defined for one query image per scene (HPatches' image 1); use "
            "verification.candidates: nearest and verification.convention: descbench, or give the scene pairs with "
            "one query image (pairs.txt, or pairs: reference)")


def _pooled_scene_stats(results: list, quantized_bins: int) -> dict:
    """One scene row from several query images' :class:`~descbench.metrics.bojanic.SceneTaskResult`:
    the scene's list is their lists one after the other, so its AP columns are the AP of that
    list (:func:`descbench.metrics.bojanic.verification_ap`); counts and AP sums add up; the
    distractor draw is the scene's, the same for every query image."""
    from descbench.metrics.bojanic import verification_ap

    st = [r.stats for r in results]
    out = verification_ap(np.concatenate([r.v_distance for r in results]), np.concatenate([r.v_label for r in results]),
                          quantized_bins)
    for key in ("n_queries", "n_target_keypoints", "verification_num_positives", "verification_num_negatives",
                "retrieval_n_queries_with_positive", "retrieval_sum_ap_negative", "retrieval_sum_ap_ignore",
                "retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors"):
        out[key] = sum(s[key] for s in st)
    out["n_distractor_scenes"], out["n_distractors"] = st[0]["n_distractor_scenes"], st[0]["n_distractors"]
    return out


def _verification_inputs(files, f: SceneFeatures, draws: list, scoring: dict, verification: dict, group: list[Pair]):
    """``(targets, BojanicParams)`` of one query image's pairs ``group`` (DataError for foreign distractors)."""
    from descbench.metrics.bojanic import BojanicParams

    by_image = f.by_image
    for d in draws:
        if d.desc.dtype != by_image[1].dtype or d.desc.shape[1] != by_image[1].shape[1]:
            raise DataError(
                f"scene {files.scene}: distractors from scene {d.scene} are {d.desc.dtype} x {d.desc.shape[1]}, "
                f"the scene's descriptors {by_image[1].dtype} x {by_image[1].shape[1]}; rebuild the distractor bank"
            )
    targets = [_target(f, p, "keypoint verification") for p in group]
    return targets, BojanicParams.from_config(scoring=scoring, verification=verification)


def _matching_params(scoring: dict, matching: dict):
    """``(MatchingParams, ClassifierParams)`` from the validated scoring and matching sections."""
    from descbench.metrics.classifier import ClassifierParams
    from descbench.metrics.matching import MatchingParams
    sections = {"scoring": scoring, "matching": matching}
    return MatchingParams.from_config(**sections), ClassifierParams.from_config(**sections)


def verification_task(scene_dir: Path, f: SceneFeatures, distractors: list, scoring: dict, verification: dict,
                      out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path,
                      result=None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Keypoint verification and keypoint retrieval of one scene, with distractors of other scenes.

    Each query image a of the scene's ``pairs`` (None: its default pairs) is scored against its
    pairs' images b and the distractors; with several query images, the list and query rows
    carry ``query_image`` and the scene row pools them (:func:`_pooled_scene_stats`).
    ``distractors``: the scene's :class:`descbench.metrics.bojanic.Distractors`, in draw order
    (:func:`descbench.metrics.distractors.draw_distractors`; from the distractor bank in the
    workflow, :func:`distractors_from_files` otherwise). ``result``: ``[(a, group, SceneTaskResult)]``
    per query image already computed by :func:`scene_pass` (None: computed here); ``t0``: start
    of the timing.
    """
    from descbench.metrics.ap import verification_ap_columns
    from descbench.metrics.bojanic import score_scene_tasks

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    draws = distractors
    groups = _groups(pairs)
    _check_verification_groups(files.scene, groups, verification)
    if result is None:
        result = []
        for a, group in groups:
            targets, params = _verification_inputs(files, f, draws, scoring, verification, group)
            result.append((a, group, score_scene_tasks(per_image[a].xy, by_image[a], targets, list(draws), params,
                                                       where=f"scene {files.scene}", q_frame=(per_image[a].angle, per_image[a].size))))
    vparts, qparts = [], []
    for a, group, res in result:
        seg_scene = [files.scene] * len(group) + [d.scene for d in draws]
        seg_image = [p.b for p in group] + [d.image for d in draws]
        vcols = {
            "query": pa.array(res.v_query, pa.int32()),
            "target_scene": pa.array([seg_scene[s] for s in res.v_segment], pa.string()),
            "target_image": pa.array(np.array(seg_image, dtype=np.int8)[res.v_segment.astype(np.int64)] if len(res.v_segment) else np.zeros(0, np.int8), pa.int8()),
            "candidate": pa.array(res.v_candidate, pa.int32()),
            "distance": pa.array(res.v_distance, pa.float64()),
            "label": pa.array(res.v_label, pa.int8()),
        }
        nq = len(per_image[a])
        qcols = {
            "scene": pa.array([files.scene] * nq, pa.string()),
            "query": pa.array(np.arange(nq), pa.int32()),
            "n_positives": pa.array(res.r_positives, pa.int32()),
            "ap_negative": pa.array(res.r_ap_negative, pa.float64()),
            "ap_ignore": pa.array(res.r_ap_ignore, pa.float64()),
        }
        if labelled:
            vcols["query_image"] = pa.array(np.full(len(res.v_query), a, np.int8), pa.int8())
            qcols["query_image"] = pa.array(np.full(nq, a, np.int8), pa.int8())
        vparts.append(vcols)
        qparts.append(qcols)
    lschema = io.with_query_image(io.VERIFICATION_LIST) if labelled else io.VERIFICATION_LIST
    rschema = io.with_query_image(io.KEYPOINT_RETRIEVAL) if labelled else io.KEYPOINT_RETRIEVAL
    vlist = pa.concat_tables([pa.table({n: c[n] for n in lschema.names}, schema=lschema) for c in vparts])
    queries = pa.concat_tables([pa.table({n: c[n] for n in rschema.names}, schema=rschema) for c in qparts])
    if len(result) == 1:
        stats = result[0][2].stats
    else:
        from descbench.metrics.bojanic import BojanicParams

        stats = _pooled_scene_stats([r for _, _, r in result],
                                    BojanicParams.from_config(scoring=scoring, verification=verification).quantized_bins)
    scene_schema = io.verification_scene_schema(verification_ap_columns(), verification["convention"] == "workbench")
    scene_row = io.table_from_rows([{"scene": files.scene, **stats}], scene_schema,
                                   f"scene {files.scene}: verification scene table (io.verification_scene_schema)")
    prov = io.provenance(
        "verification", {"task": "keypoint_verification+keypoint_retrieval", "scoring": scoring, "verification": verification},
        scene=files.scene, descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance="l2_squared" if dmeta["distance"] == "l2" else dmeta["distance"],
        distractors=[{"scene": d.scene, "image": d.image, "rows": d.rows.tolist()} for d in draws],
        empty_images=kmeta["empty_images"],
    )
    io.write_table(vlist, out_list, prov)
    io.write_table(queries, out_queries, prov)
    io.write_table(scene_row, out_scene, prov)
    write_timing(out_timing, files.scene, t0)


def matching_task(scene_dir: Path, f: SceneFeatures, scoring: dict, matching: dict,
                  out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path,
                  results: dict | None = None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Matching metrics (mutual NN: legacy precision, MMA, matching score, homography accuracy,
    repeatability) and matching as a binary classifier, for every pair (a, b) of one scene
    (``pairs``; None: its default pairs).

    ``results``: ``{(a, b): (stats, ClassifierResult)}`` already computed by :func:`scene_pass`
    (None: computed here); ``t0``: start of the timing.
    """
    from descbench.metrics.matching import evaluate_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    mparams, cparams = _matching_params(scoring, matching)
    prows, crows, roc_cols = [], [], []
    for p in pairs:
        a, k = p.a, p.b
        key = {"scene": files.scene, **({"query_image": a} if labelled else {}), "pair": k}
        if results is not None:
            stats, res = results[(a, k)]
        else:
            stats, res = evaluate_pair(per_image[a].xy, by_image[a], per_image[k].xy, by_image[k], p.homography("matching"),
                                       tuple(kmeta["image_sizes"][str(a)]), tuple(kmeta["image_sizes"][str(k)]), mparams,
                                       cparams, tuple(matching["classifier_matchers"]))
        prows.append({**key, **stats})
        crows += [{**key, **r} for r in res.summary_rows()]
        rr = res.roc_rows()
        n = rr["tp"].shape[0]
        roc_cols.append({"scene": np.full(n, files.scene, dtype=object), **({"query_image": np.full(n, a, dtype=np.int8)} if labelled else {}),
                         "pair": np.full(n, k, dtype=np.int8), **rr})
    label = io.with_query_image if labelled else (lambda schema: schema)
    pairs_table = io.table_from_rows(prows, label(io.matching_pairs_schema(mparams.mma_thresholds)),
                                     f"scene {files.scene}: matching pairs table (io.matching_pairs_schema)")
    classifier = io.table_from_rows(crows, label(io.CLASSIFIER), f"scene {files.scene}: classifier table (io.CLASSIFIER)")
    roc_schema = label(io.ROC_POINTS)
    roc = pa.table({c.name: pa.array(np.concatenate([r[c.name] for r in roc_cols]), type=c.type) for c in roc_schema}, schema=roc_schema)
    prov = io.provenance(
        "matching", {"task": "matching+binary_classifier", "scoring": scoring, "matching": matching}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"], distance=dmeta["distance"],
        empty_images=kmeta["empty_images"], image_sizes=kmeta["image_sizes"],
    )
    io.write_table(pairs_table, out_pairs, prov)
    io.write_table(classifier, out_classifier, prov)
    io.write_table(roc, out_roc, prov)
    write_timing(out_timing, files.scene, t0)


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
    pairs = _scene_pairs(files, pairs)
    per_image, by_image, kmeta = f.per_image, f.by_image, f.kmeta
    groups = _groups(pairs)
    with_ver = verification is not None and distractors is not None
    if with_ver:
        _check_verification_groups(files.scene, groups, verification)
    mm = (*_matching_params(scoring, matching), tuple(matching["classifier_matchers"])) if matching is not None else None
    out = ScenePass({}, [] if with_ver else None, {} if matching is not None else None, {})
    for a, group in groups:
        bparams = None
        if with_ver:
            targets, bparams = _verification_inputs(files, f, distractors, scoring, verification, group)
        else:
            targets = [_target(f, p, "keypoint retrieval") for p in group]
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
    """Keypoint retrieval scores of one scene from its files (see :func:`retrieval_task`)."""
    retrieval_task(scene_dir, read_features(keypoints, descriptors), scoring, out_queries, out_pairs, out_timing)


def score_verification_scene(scene_dir: Path, keypoints: Path, descriptors: Path, distractor_files: dict[str, tuple[Path, Path]],
                             all_scenes: list[str], scoring: dict, verification: dict,
                             out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path) -> None:
    """Keypoint verification of one scene from its files; ``distractor_files`` maps each distractor
    scene to its (keypoints, descriptors) files."""
    f = read_features(keypoints, descriptors)
    draws = distractors_from_files(f.scene, all_scenes, verification, distractor_files, f.dmeta["descriptor"])
    verification_task(scene_dir, f, draws, scoring, verification, out_list, out_queries, out_scene, out_timing)


def score_matching_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict, matching: dict,
                         out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path) -> None:
    """Matching metrics of one scene from its files (see :func:`matching_task`)."""
    matching_task(scene_dir, read_features(keypoints, descriptors), scoring, matching, out_pairs, out_classifier, out_roc, out_timing)


# The built-in tasks' writers (descbench.paths.SCORE_TASK_REGISTRY): their share of the fused pass.


def write_retrieval(job: SceneJob, outs: list[Path]) -> None:
    retrieval_task(job.scene_dir, job.features, job.sections["scoring"], *outs, results=job.fused.retrieval,
                   t0=job.t0_of("retrieval"), pairs=job.pairs)


def write_verification(job: SceneJob, outs: list[Path]) -> None:
    verification_task(job.scene_dir, job.features, job.distractors, job.sections["scoring"], job.sections["verification"],
                      *outs, result=job.fused.verification, t0=job.t0_of("verification"), pairs=job.pairs)


def write_matching(job: SceneJob, outs: list[Path]) -> None:
    matching_task(job.scene_dir, job.features, job.sections["scoring"], job.sections["matching"], *outs,
                  results=job.fused.matching, t0=job.t0_of("matching"), pairs=job.pairs)


def score_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str,
                sections: dict, features: str | None = None, pairs: str = "reference") -> None:
    """Every enabled task of descbench.paths.SCORE_TASK_REGISTRY on every scene of a batch, in one
    process: each scene's features are read once and shared by the tasks.

    ``sections``: ``{section: settings}``, ``scoring`` and the section of every task to run
    (descbench.config.score_job_sections); a task whose section is absent does not run. Keypoint
    retrieval, verification + keypoint retrieval with distractors (from the distractor bank) and
    matching + classifier share ONE screen pass per scene (:func:`scene_pass`); each task's writer
    then writes its files, in registry order. ``pairs``: the config's ``pairs`` option (each scene's
    pairs: :meth:`descbench.datasets.layout.SceneFiles.pairs`)."""
    from descbench.paths import SCORE_TASK_REGISTRY, scoring_sections, task_hook

    sections = sections if isinstance(sections, dict) else {}
    unknown = sorted(set(sections) - set(scoring_sections()))
    if unknown or "scoring" not in sections:
        raise ConfigError(f"the scoring job's sections are {', '.join(sorted(sections)) or 'none'}; expected 'scoring' and any of "
                          f"the tasks' sections ({', '.join(scoring_sections()[1:])})" + (f"; unknown: {', '.join(unknown)}" * bool(unknown)))
    tasks = [(t.name, task_hook(t.writer)) for t in SCORE_TASK_REGISTRY.values() if t.section is None or t.section in sections]
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
        for name, write in tasks:
            write(job, paths.task_files(name, kpset, descriptor, scene))



# ----------------------------------------------------------------------------- command


def add_commands(sub) -> dict:
    """The ``score`` subcommand; returns ``{command: function running it}``."""
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
    return {"score": run}


def run(a: argparse.Namespace) -> None:
    score_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.descriptor, json_arg(a.sections), a.features_of, a.pairs)
