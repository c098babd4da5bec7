"""Keypoint verification and keypoint retrieval with distractors (folder ``verification/``,
section ``verification``), as Balntas et al.'s HPatches protocol and the C++ DescriptorWorkbench
define them for keypoints (:mod:`descbench.metrics.bojanic`): each query of image a against its
pairs' images b and the keypoints of other scenes' images drawn as distractors
(:mod:`descbench.metrics.distractors`, from the distractor bank).

Per scene it writes ``list.parquet`` (:data:`VERIFICATION_LIST`, the pooled ranked list of
``candidates: nearest``), ``queries.parquet`` (:data:`KEYPOINT_RETRIEVAL`, three-tier keypoint
retrieval per query), ``scene.parquet`` (:func:`scene_schema`, the scene's sufficient statistics)
and ``timing.json``. A scene whose pairs have several query images pools their lists into one
(:func:`pooled_scene_stats`); the statistics that have no such pooling are refused by name
(:func:`check_groups`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.layout import scene_files
from descbench.errors import ConfigError, DataError
from descbench.tasks.base import (
    ScoringTask, TaskSummary, labelled, load_rows, pair_target, query_groups, scene_pairs, write_timing,
)

# Keypoint verification (protocols section 4, candidates: nearest): the pooled list of one scene,
# query-major then segment order (the query image's targets b, images 2..6 in HPatches, then the
# distractor sets) -- the "stable order" that the vlfeat/trapezoid AP conventions use for ties. A
# scene with several query images holds one such list per query image, in the order of each one's
# first pair (rows with query_image).
VERIFICATION_LIST = pa.schema(
    [
        ("query", pa.int32()),
        ("target_scene", pa.string()),  # the scene itself (its targets b) or a distractor scene
        ("target_image", pa.int8()),
        ("candidate", pa.int32()),  # keypoint row in that image
        ("distance", pa.float64()),  # exact ranking key: squared L2 (float) or Hamming (binary)
        ("label", pa.int8()),  # +1 ground truth, -1 otherwise
    ]
)

# Keypoint retrieval (three-tier labels), per query of the query image a (image 1 in HPatches).
KEYPOINT_RETRIEVAL = pa.schema(
    [
        ("scene", pa.string()),
        ("query", pa.int32()),
        ("n_positives", pa.int32()),  # R: relevant keypoints over the targets b (images 2..6 in HPatches)
        ("ap_negative", pa.float64()),  # hard negatives (label 0) count as non-relevant; NaN if R = 0
        ("ap_ignore", pa.float64()),  # hard negatives removed (HPatches MATLAB); NaN if R = 0
    ]
)

# ``verification.convention: workbench`` appends the C++ workbench's per-scene values
# (descbench.metrics.bojanic.workbench_scene_stats) to scene_schema's columns.
WORKBENCH_SCENE_FIELDS = [
    ("workbench_num_positives", pa.int64()),
    ("workbench_num_candidates", pa.int64()),
    ("workbench_verification_ap", pa.float64()),  # pooled list AP under scoring.tie_policy; 0 if no +1
    ("workbench_verification_ap_optimistic", pa.float64()),  # bounds over tie orders
    ("workbench_verification_ap_pessimistic", pa.float64()),
    ("workbench_retrieval_ap", pa.float64()),  # the workbench's keypoint retrieval (same pooled list)
]


def scene_schema(ap_columns: Sequence[str] | None = None, workbench: bool = False) -> pa.Schema:
    """Per-scene sufficient statistics of keypoint verification and keypoint retrieval.

    ``ap_columns``: the pooled list's AP columns (float64), one per AP convention and the quantised
    estimate, in order (None: :func:`descbench.metrics.ap.verification_ap_columns`). With the
    workbench columns (:data:`WORKBENCH_SCENE_FIELDS`) when ``workbench``."""
    if ap_columns is None:
        from descbench.metrics.ap import verification_ap_columns

        ap_columns = verification_ap_columns()
    fields = [
        ("scene", pa.string()),
        ("n_queries", pa.int64()),
        ("n_target_keypoints", pa.int64()),
        ("n_distractor_scenes", pa.int64()),
        ("n_distractors", pa.int64()),
        ("verification_num_positives", pa.int64()),
        ("verification_num_negatives", pa.int64()),
        *[(c, pa.float64()) for c in ap_columns],
        ("retrieval_n_queries_with_positive", pa.int64()),
        ("retrieval_sum_ap_negative", pa.float64()),
        ("retrieval_sum_ap_ignore", pa.float64()),
        ("retrieval_num_true_positives", pa.int64()),
        ("retrieval_num_hard_negatives", pa.int64()),
        ("retrieval_num_distractors", pa.int64()),
    ]
    return pa.schema(fields + (WORKBENCH_SCENE_FIELDS if workbench else []))


def check_groups(scene: str, groups: list, verification: dict) -> None:
    """Verification of a scene with several query images pools their lists into the scene's one
    list (:func:`pooled_scene_stats`); the statistics that are not computed from that list
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


def pooled_scene_stats(results: list, quantized_bins: int) -> dict:
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


def verification_inputs(scene: str, f, draws: list, scoring: dict, verification: dict, group: list):
    """``(targets, BojanicParams)`` of one query image's pairs ``group`` (DataError for
    distractors whose descriptors are not the scene's kind)."""
    from descbench.metrics.bojanic import BojanicParams

    by_image = f.by_image
    for d in draws:
        if d.desc.dtype != by_image[1].dtype or d.desc.shape[1] != by_image[1].shape[1]:
            raise DataError(
                f"scene {scene}: distractors from scene {d.scene} are {d.desc.dtype} x {d.desc.shape[1]}, "
                f"the scene's descriptors {by_image[1].dtype} x {by_image[1].shape[1]}; rebuild the distractor bank"
            )
    targets = [pair_target(f, p, "keypoint verification") for p in group]
    return targets, BojanicParams.from_config(scoring=scoring, verification=verification)


def score_verification(scene_dir: Path, f, distractors: list, scoring: dict, verification: dict,
                       out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path,
                       result=None, t0: float | None = None, pairs: list | None = None) -> None:
    """Keypoint verification and keypoint retrieval of one scene, with distractors of other scenes.

    Each query image a of the scene's ``pairs`` (None: its default pairs) is scored against its
    pairs' images b and the distractors; with several query images, the list and query rows
    carry ``query_image`` and the scene row pools them (:func:`pooled_scene_stats`).
    ``distractors``: the scene's :class:`descbench.metrics.bojanic.Distractors`, in draw order
    (:func:`descbench.metrics.distractors.draw_distractors`; from the distractor bank in the
    workflow, :func:`descbench.jobs.distractors.distractors_from_files` otherwise). ``result``:
    ``[(a, group, SceneTaskResult)]`` per query image already computed by the fused pass
    (:func:`descbench.jobs.score.scene_pass`; None: computed here); ``t0``: start of the timing.
    """
    from descbench.metrics.ap import verification_ap_columns
    from descbench.metrics.bojanic import score_scene_tasks

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = scene_pairs(files, pairs)
    with_query_image = labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    draws = distractors
    groups = query_groups(pairs)
    check_groups(files.scene, groups, verification)
    if result is None:
        result = []
        for a, group in groups:
            targets, params = verification_inputs(files.scene, f, draws, scoring, verification, group)
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
        if with_query_image:
            vcols["query_image"] = pa.array(np.full(len(res.v_query), a, np.int8), pa.int8())
            qcols["query_image"] = pa.array(np.full(nq, a, np.int8), pa.int8())
        vparts.append(vcols)
        qparts.append(qcols)
    lschema = io.with_query_image(VERIFICATION_LIST) if with_query_image else VERIFICATION_LIST
    rschema = io.with_query_image(KEYPOINT_RETRIEVAL) if with_query_image else KEYPOINT_RETRIEVAL
    vlist = pa.concat_tables([pa.table({n: c[n] for n in lschema.names}, schema=lschema) for c in vparts])
    queries = pa.concat_tables([pa.table({n: c[n] for n in rschema.names}, schema=rschema) for c in qparts])
    if len(result) == 1:
        stats = result[0][2].stats
    else:
        from descbench.metrics.bojanic import BojanicParams

        stats = pooled_scene_stats([r for _, _, r in result],
                                   BojanicParams.from_config(scoring=scoring, verification=verification).quantized_bins)
    sschema = scene_schema(verification_ap_columns(), verification["convention"] == "workbench")
    scene_row = io.table_from_rows([{"scene": files.scene, **stats}], sschema,
                                   f"scene {files.scene}: verification scene table (tasks.verification.scene_schema)")
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


# ----------------------------------------------------------------------------- figures


def draw_verification_pr(run, plt):
    """Precision-recall of the keypoint verification list (``verification.candidates: nearest``:
    each query's nearest keypoint in images 2-6 and in each distractor image), every scene's list
    pooled into one, sorted by descriptor distance."""
    from descbench.report.drawing import curve_points, legend, no_data, setting

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for ks, d, lst in run.rows(TASK, "list.parquet", columns=["distance", "label"]):
        order = np.argsort(lst.distance.to_numpy(), kind="stable")
        pos = (lst.label.to_numpy()[order] == 1).astype(float)
        if pos.sum():
            tp = np.cumsum(pos)
            precision = tp / np.arange(1, len(pos) + 1)
            at = curve_points(precision)
            ax.plot(tp[at] / pos.sum(), precision[at], **run.styles[(d, ks)])
    ax.set(title="Precision-recall of keypoint verification, one list of all scenes:\neach query's nearest keypoint "
                 "in images 2-6 and in the distractor images",
           xlabel="recall (fraction of the correct keypoints accepted)",
           ylabel="precision (fraction of the accepted\nkeypoints that are correct)", xlim=(0, 1), ylim=(0, 1.02))
    ax.title.set_fontsize(9)
    if not ax.lines:
        if not run.cfg["verification"]["enabled"]:
            why = "keypoint verification is disabled (verification.enabled: false)"
        elif "nearest" not in setting(run, "verification", "candidates"):
            why = "verification.candidates: all keeps no list\n(its AP is computed from counts; see the tables)"
        else:
            why = "no query has a correct keypoint in the lists"
        no_data(ax, why)
    legend(ax, run.styles)
    return fig


# ----------------------------------------------------------------------------- the task


class VerificationTask(ScoringTask):
    name = "verification"
    section = "verification"
    kinds = ("list.parquet", "queries.parquet", "scene.parquet", "timing.json")
    headline = ("keypoint_verification_ap", "keypoint_retrieval_ap")
    intervals = (("keypoint_verification_ap", "keypoint_verification_ap", None),)
    figures = {"verification_pr": draw_verification_pr}

    def schemas(self, cfg: dict) -> dict[str, pa.Schema]:
        return {"list.parquet": VERIFICATION_LIST, "queries.parquet": KEYPOINT_RETRIEVAL,
                "scene.parquet": scene_schema(None, cfg["verification"]["convention"] == "workbench")}

    def write(self, job, outs: list[Path]) -> None:
        score_verification(job.scene_dir, job.features, job.distractors, job.sections["scoring"],
                           job.sections["verification"], *outs, result=job.fused.verification,
                           t0=job.t0_of("verification"), pairs=job.pairs)

    def summarize(self, files: dict[str, list[Path]], cfg: dict) -> TaskSummary:
        """Verification AP (per scene and pooled over every scene's list) and keypoint retrieval
        AP (descbench.metrics.aggregate.verification_summary)."""
        from descbench.metrics.aggregate import pooled_verification_ap, verification_scene_values, verification_summary

        ver = cfg["verification"]
        rows = load_rows(files["scene.parquet"], self.schemas(cfg)["scene.parquet"])
        pooled = float("nan")
        if ver["candidates"] == "nearest":
            lists = []
            for p in sorted(files["list.parquet"], key=lambda p: Path(p).name):  # scene order
                t, _ = io.read_table(p, VERIFICATION_LIST, with_meta=False)
                lists.append((t.column("distance").to_numpy(), t.column("label").to_numpy()))
            pooled = pooled_verification_ap(lists, ver["ap_convention"])
        summary = verification_summary(rows, ver["ap_convention"], ver["hard_negatives"], pooled)
        return TaskSummary(summary, verification_scene_values(rows, ver["ap_convention"], ver["hard_negatives"]))


TASK = VerificationTask()
