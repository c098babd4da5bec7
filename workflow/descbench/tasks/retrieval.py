"""Keypoint retrieval (folder ``scores/``): for every pair (a, b) of a scene, each keypoint of
image a queries image b's keypoints by descriptor distance; its relevant items are the keypoints
within ``scoring.tau_px`` of its projection (:mod:`descbench.metrics.retrieval`). Always on: its
settings are the ``scoring`` section's.

Per scene it writes ``queries.parquet`` (:data:`QUERIES`, one row per query and pair),
``pairs.parquet`` (:data:`PAIRS`, per-pair sufficient statistics) and ``timing.json``; the report
gets the true mAP family, precision at k and the scene split from
:func:`descbench.metrics.aggregate.summarize`, and its per-scene table is the base of every
task's per-scene columns.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.layout import scene_files
from descbench.tasks.base import ScoringTask, TaskSummary, concat_rows, labelled, scene_pairs, write_timing

# Per-query retrieval records (protocols section 4). Query = keypoint row of image a (image 1 in HPatches).
QUERIES = pa.schema(
    [
        ("scene", pa.string()),
        ("pair", pa.int8()),  # target image b of pair (a, b) (k of HPatches' (1, k))
        ("query", pa.int32()),  # index among image a's keypoints
        ("inside", pa.bool_()),  # projection H q lies inside image b
        ("n_relevant", pa.int32()),  # R
        ("gt_index", pa.int32()),  # nearest image-b keypoint to H q (-1 if image b has none)
        ("gt_px", pa.float64()),  # its pixel distance to H q (inf if none)
        ("n_closer", pa.int64()),  # L: candidates strictly closer than the first relevant item
        ("n_tied", pa.int64()),  # t: other candidates at exactly its distance
        ("rank", pa.float64()),  # its rank under the tie policy (retrieval.policy_rank); NaN when R = 0
        ("ap", pa.float64()),  # AP under the tie policy; NaN when R = 0
    ]
)

# Per-pair sufficient statistics: sums and counts, so any aggregate is exact after merging.
PAIRS = pa.schema(
    [
        ("scene", pa.string()),
        ("pair", pa.int8()),
        ("n_query_keypoints", pa.int64()),
        ("n_target_keypoints", pa.int64()),
        ("n_queries", pa.int64()),
        ("n_outside", pa.int64()),
        ("n_relevant_queries", pa.int64()),
        ("n_relevant_items", pa.int64()),
        ("sum_ap", pa.float64()),
        *[(f"sum_hit_at_{k}", pa.float64()) for k in io.HIT_KS],
        *[(f"sum_recall_at_{k}", pa.float64()) for k in (1, 5, 10)],
    ]
)


def score_retrieval(scene_dir: Path, f, scoring: dict, out_queries: Path, out_pairs: Path, out_timing: Path,
                    results: dict | None = None, t0: float | None = None, pairs: list | None = None) -> None:
    """Keypoint retrieval scores of one scene: per-query records and per-pair statistics.

    ``f``: the scene's features (:class:`descbench.jobs.common.SceneFeatures`); ``pairs``: the
    scene's :class:`~descbench.datasets.geometry.Pair` list (None: its default pairs); each pair's
    queries are image a's keypoints, its candidates image b's. ``results``: ``{(a, b): PairResult}``
    already computed by the fused pass (:func:`descbench.jobs.score.scene_pass`; None: computed
    here); ``t0``: start of the timing.
    """
    # metrics (numba) imported here, not at the top: keypoint/descriptor jobs never load numba
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, policy_rank, score_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = scene_pairs(files, pairs)
    with_query_image = labelled(pairs)
    params = RetrievalParams.from_config(scoring)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    qschema = io.with_query_image(QUERIES) if with_query_image else QUERIES
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
        if with_query_image:
            qcols["query_image"].append(np.full(nq, a, dtype=np.int8))
        qcols["pair"].append(np.full(nq, k, dtype=np.int8))
        qcols["query"].append(np.arange(nq, dtype=np.int32))
        for n in ("inside", "n_relevant", "gt_index", "gt_px", "n_closer", "n_tied", "ap"):
            qcols[n].append(getattr(res, n))
        qcols["rank"].append(res.rank if res.rank is not None else policy_rank(res.n_closer, res.n_tied, params.tie_policy))
        prows.append({"scene": files.scene, **({"query_image": a} if with_query_image else {}), "pair": k,
                      **pair_statistics(res, len(per_image[k]))})
    queries = pa.table({n: pa.array(np.concatenate(v), type=qschema.field(n).type) for n, v in qcols.items()}, schema=qschema)
    pschema = io.with_query_image(PAIRS) if with_query_image else PAIRS
    pairs_table = io.table_from_rows(prows, pschema, f"scene {files.scene}: retrieval pairs table (tasks.retrieval.PAIRS)")
    prov = io.provenance(
        "scoring", {"task": "keypoint_retrieval", **scoring}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance=dmeta["distance"], empty_images=kmeta["empty_images"],
    )
    io.write_table(queries, out_queries, prov)
    io.write_table(pairs_table, out_pairs, prov)
    write_timing(out_timing, files.scene, t0)


def load_pairs(paths: list[Path]):
    """Every scene's ``pairs.parquet`` as one DataFrame, and each file's metadata."""
    tables, metas = [], []
    for p in paths:
        table, meta = io.read_table(p, PAIRS)
        tables.append(table)
        metas.append(meta)
    return concat_rows(tables), metas


def query_aps(paths: list[Path]) -> list[np.ndarray]:
    """Per scene file (``queries.parquet``), the APs of its queries that have one (R >= 1; NaN =
    no relevant item)."""
    out = []
    for p in paths:
        ap = io.column_array(io.read_table(p, QUERIES)[0].column("ap"))
        out.append(ap[np.isfinite(ap)])
    return out


# ----------------------------------------------------------------------------- figures


def draw_per_scene_map(run, plt):
    """Each scene's keypoint-retrieval mean average precision: illumination (``i_``) and
    viewpoint (``v_``) scenes apart, and a third panel for scenes named otherwise (folder datasets)
    when there are any."""
    import pandas as pd

    from descbench.report.drawing import legend

    per_scene = pd.read_csv(run.report_dir / "per_scene.csv")
    order = per_scene.groupby("scene").true_map.mean().sort_values()
    groups = [(lambda s: s.startswith("i_"), "illumination scenes (i_)"), (lambda s: s.startswith("v_"), "viewpoint scenes (v_)")]
    if any(not s.startswith(("i_", "v_")) for s in order.index):
        groups.append((lambda s: not s.startswith(("i_", "v_")), "other scenes"))
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), max(3, 0.18 * len(order) / 2 + 1.5)))
    fig.suptitle("Keypoint retrieval per scene: mean average precision over the scene's queries", y=1.0, va="bottom")
    for ax, (member, title) in zip(axes, groups):
        names = [s for s in order.index if member(s)]
        for (d, ks), g in per_scene.groupby(["descriptor", "keypoint_set"], sort=False):
            g = g.set_index("scene").reindex(names)
            st = run.styles[(d, ks)]
            ax.plot(g.true_map, np.arange(len(names)), "o", color=st["color"], ms=4, label=st["label"],
                    fillstyle="full" if st["linestyle"] == "-" else "none")
        ax.set_yticks(np.arange(len(names)), names, fontsize=7)
        ax.set(title=title, xlabel="mean average precision", ylabel="scene", xlim=(0, 1))
    legend(axes[-1], run.styles)
    return fig


RANK_BINS = np.array([1, 2, 3, 4, 5, 6, 11, 21, 51, np.inf])
RANK_LABELS = ["1", "2", "3", "4", "5", "6-10", "11-20", "21-50", ">50"]


def draw_rank_histogram(run, plt):
    """Where the correct keypoint ranks, as a fraction of the queries that have one."""
    from descbench.report.drawing import legend, no_data

    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(1, len(run.combos))
    for i, (ks, d, q) in enumerate(run.rows(TASK, "queries.parquet")):
        r = q["rank"].to_numpy(float)
        r = r[np.isfinite(r)]
        st = run.styles[(d, ks)]
        ax.bar(np.arange(len(RANK_LABELS)) + i * width, np.histogram(r, bins=RANK_BINS)[0] / max(1, len(r)), width=width,
               color=st["color"], label=st["label"], hatch=None if st["linestyle"] == "-" else "//")
    ax.set_xticks(np.arange(len(RANK_LABELS)) + 0.4 - width / 2, RANK_LABELS)
    ax.set(title="Keypoint retrieval: where the correct keypoint ranks",
           xlabel="rank of the correct keypoint among image k's keypoints\n(1 = the nearest descriptor)",
           ylabel="fraction of the queries that have\na correct keypoint in image k")
    if not ax.patches:
        no_data(ax, "keypoint retrieval has no scenes")
    legend(ax, run.styles)
    return fig


# ----------------------------------------------------------------------------- the task


class RetrievalTask(ScoringTask):
    name = "scores"
    section = None
    kinds = ("queries.parquet", "pairs.parquet", "timing.json")
    headline = ("true_map_macro_by_scene", "precision_at_10")
    intervals = (("true_map_micro", "sum_ap", "n_relevant_queries"), ("true_map_macro_by_scene", "true_map", None))
    figures = {"per_scene_map": draw_per_scene_map, "rank_histogram": draw_rank_histogram}

    def schemas(self, cfg: dict) -> dict[str, pa.Schema]:
        return {"queries.parquet": QUERIES, "pairs.parquet": PAIRS}

    def write(self, job, outs: list[Path]) -> None:
        score_retrieval(job.scene_dir, job.features, job.sections["scoring"], *outs, results=job.fused.retrieval,
                        t0=job.t0_of("retrieval"), pairs=job.pairs)

    def summarize(self, files: dict[str, list[Path]], cfg: dict) -> TaskSummary:
        """The true mAP family and precision at k (descbench.metrics.aggregate.summarize); its
        per-scene table is the base of the report's per-scene table."""
        from descbench.metrics.aggregate import scene_table, summarize

        pairs, metas = load_pairs(files["pairs.parquet"])
        empty = tuple(f"{m['scene']}/{k}" for m in metas for k in m.get("empty_images", []))
        return TaskSummary(summarize(pairs), scene_table(pairs), empty)


TASK = RetrievalTask()
