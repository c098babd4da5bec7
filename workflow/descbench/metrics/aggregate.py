"""Aggregates of keypoint retrieval (protocols section 4), computed from per-pair sufficient
statistics (sums and counts, schema ``PAIRS``), so merging scenes gives the exact dataset value.

Let, for a set of pairs, ``S = sum sum_ap``, ``R1 = sum n_relevant_queries`` (queries with R >= 1)
and ``Q = sum n_queries`` (all image-1 keypoints, R = 0 included).

- ``true_map_micro = S / R1``; ``true_map_micro_including_zeros = S / Q`` (R = 0 counts as AP 0).
- scene value ``S_s / R1_s``; ``true_map_macro_by_scene`` = mean of scene values over scenes with
  R1_s > 0 (scenes without any relevant query are counted in ``scenes_without_relevant``);
  ``true_map_macro_by_scene_including_zeros`` = mean of ``S_s / Q_s`` over scenes with Q_s > 0.
- ``viewpoint_map`` / ``illumination_map``: the macro over ``v_`` / ``i_`` scenes; ``*_micro``
  the micro over their pairs.
- ``viewpoint_map_including_zeros`` / ``illumination_map_including_zeros`` (the C++ workbench's
  ``viewpoint_map_with_zeros`` / ``illumination_map_with_zeros``, its ``ExperimentMetrics``
  ``computeCategoryIncludingZeros``): the mean over the ``v_`` / ``i_`` scenes with Q_s > 0 of
  ``S_s / Q_s``, so an R = 0 query counts as AP 0 and a scene whose queries all have R = 0
  counts as 0 (``viewpoint_map`` leaves such a scene out). The workbench leaves out a pair whose
  image k has no keypoint; descbench counts its queries with R = 0 (the one difference).
- ``precision_at_K = sum sum_hit_at_K / R1`` (fraction of R >= 1 queries whose first relevant
  item ranks within K, the seed's definition); ``recall_at_K = sum sum_recall_at_K / R1``.
- ``rank_hist_*``: number of R >= 1 queries whose first relevant item has rank in the bin
  (fractional under the ``expected`` tie policy).
An undefined ratio (0/0) is NaN, never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.io import HIT_KS
from descbench.metrics.ap import AP_CONVENTIONS, QUANTIZED_COLUMN

REPORT_KS = (1, 5, 10)


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den > 0 else float("nan")


def scene_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per-scene sums and values (one row per scene, sorted by name)."""
    sums = pairs.drop(columns=["pair", "query_image"], errors="ignore").groupby("scene", sort=True).sum(numeric_only=True)
    out = pd.DataFrame(index=sums.index)
    out["true_map"] = [_ratio(s, r) for s, r in zip(sums.sum_ap, sums.n_relevant_queries)]
    out["true_map_including_zeros"] = [_ratio(s, q) for s, q in zip(sums.sum_ap, sums.n_queries)]
    for k in REPORT_KS:
        out[f"precision_at_{k}"] = [_ratio(h, r) for h, r in zip(sums[f"sum_hit_at_{k}"], sums.n_relevant_queries)]
    out["sum_ap"] = sums.sum_ap.astype(np.float64)  # with n_relevant_queries: the scene's share of the micro mAP
    for c in ("n_queries", "n_relevant_queries", "n_outside", "n_target_keypoints"):
        out[c] = sums[c].astype(np.int64)
    # a query image's keypoints are the same in each of its pairs: not a sum over pairs, a sum over query images
    if "query_image" in pairs.columns:
        per_query = pairs.groupby(["scene", "query_image"], sort=True)["n_query_keypoints"].max()
        out["n_query_keypoints"] = per_query.groupby(level="scene").sum().astype(np.int64)
    else:
        out["n_query_keypoints"] = pairs.groupby("scene", sort=True)["n_query_keypoints"].max().astype(np.int64)
    return out.reset_index()


def _macro(values: pd.Series) -> float:
    v = values.dropna()
    return float(v.mean()) if len(v) else float("nan")


def summarize(pairs: pd.DataFrame) -> dict:
    """Every retrieval aggregate of one (keypoint set, descriptor) from its per-pair rows."""
    t = pairs.sum(numeric_only=True)
    S, R1, Q = t.sum_ap, t.n_relevant_queries, t.n_queries
    scenes = scene_table(pairs)
    is_v = scenes.scene.str.startswith("v_")
    is_i = scenes.scene.str.startswith("i_")
    pv = pairs[pairs.scene.str.startswith("v_")].sum(numeric_only=True)
    pi = pairs[pairs.scene.str.startswith("i_")].sum(numeric_only=True)
    out = {
        "true_map_micro": _ratio(S, R1),
        "true_map_macro_by_scene": _macro(scenes.true_map),
        "true_map_micro_including_zeros": _ratio(S, Q),
        "true_map_macro_by_scene_including_zeros": _macro(scenes.true_map_including_zeros),
        "viewpoint_map": _macro(scenes.true_map[is_v]),
        "illumination_map": _macro(scenes.true_map[is_i]),
        "viewpoint_map_micro": _ratio(pv.get("sum_ap", 0), pv.get("n_relevant_queries", 0)),
        "illumination_map_micro": _ratio(pi.get("sum_ap", 0), pi.get("n_relevant_queries", 0)),
        "viewpoint_map_including_zeros": _macro(scenes.true_map_including_zeros[is_v]),
        "illumination_map_including_zeros": _macro(scenes.true_map_including_zeros[is_i]),
    }
    for k in REPORT_KS:
        out[f"precision_at_{k}"] = _ratio(t[f"sum_hit_at_{k}"], R1)
    for k in REPORT_KS:
        out[f"recall_at_{k}"] = _ratio(t[f"sum_recall_at_{k}"], R1)
    out.update(
        total_queries_processed=int(R1),
        total_queries_excluded=int(Q - R1),
        total_queries=int(Q),
        queries_outside_target=int(t.n_outside),
        n_scenes=int(len(scenes)),
        scenes_without_relevant=int((scenes.n_relevant_queries == 0).sum()),
        n_pairs=int(len(pairs)),
    )
    prev, lo = 0.0, 1
    for k in HIT_KS:
        cum = float(t[f"sum_hit_at_{k}"])
        out[f"rank_hist_{lo}" if lo == k else f"rank_hist_{lo}_{k}"] = cum - prev
        prev, lo = cum, k + 1
    out[f"rank_hist_gt_{HIT_KS[-1]}"] = float(R1) - prev
    return out


def metadata_string(summary: dict, scenes: pd.DataFrame) -> str:
    """The seed's ``key=value;`` metadata string (4 decimals), scene values as ``<scene>_true_map``."""
    parts = [f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items() if not k.startswith("rank_hist")]
    parts += [f"{s}_true_map={v:.4f}" for s, v in zip(scenes.scene, scenes.true_map)]
    return ";".join(parts) + ";"


# ----------------------------------------------------------------------------- keypoint verification / retrieval
#
# From the per-scene rows of schema io.verification_scene_schema (and, for the pooled variant, the per-scene
# lists of schema VERIFICATION_LIST):
# - ``keypoint_verification_ap`` = mean over scenes (with >= 1 positive) of the scene's pooled-list
#   AP under ``ap_convention``; ``verification_viewpoint_ap`` / ``verification_illumination_ap``:
#   the same over v_ / i_ scenes; ``keypoint_verification_ap_<convention>`` for every convention;
#   ``keypoint_verification_ap_pooled``: AP of the concatenation of all scenes' lists (scene
#   order, then each list's order), candidates 'nearest' only (NaN for 'all', whose per-scene
#   tie groups cannot be merged exactly).
# - ``keypoint_retrieval_ap`` = sum of per-query AP / number of queries with R >= 1 (micro over
#   queries), under ``hard_negatives``; ``_including_zeros`` divides by every query;
#   ``retrieval_viewpoint_ap`` / ``retrieval_illumination_ap``: micro over the queries of v_ / i_
#   scenes; both hard-negative policies are reported (``_hard_negative`` and ``_hard_ignored``).
# - ``verification.convention: workbench`` adds the C++ workbench's values (:func:`workbench_summary`):
#   ``workbench_verification_map`` / ``workbench_retrieval_map`` (pooled AP per scene, mean over
#   scenes), their ``_viewpoint_map`` / ``_illumination_map`` and the tie-order bounds
#   ``workbench_verification_map_optimistic`` / ``_pessimistic``.
# - The +1 / 0 / -1 counts of keypoint retrieval: ``retrieval_num_positives_descbench`` (+1: each
#   query's relevant keypoints under ``scoring.gt``, summed over queries; one per image with
#   ``gt: closest``), ``retrieval_num_hard_negatives_descbench`` (0: every other keypoint of images
#   2..6, per query) and ``retrieval_num_distractors`` (-1: queries x drawn distractors). The first
#   two were called ``retrieval_num_true_positives`` / ``retrieval_num_hard_negatives`` before
#   issue 18: those are the C++ workbench's column names for ITS counts, whose +1 is every
#   keypoint at the nearest distance to H q (all same-position SIFT duplicates): on the same
#   keypoints it counted 58,328 where descbench's ground truth (one keypoint per image) gave
#   42,345. The workbench's names now hold the workbench's counts and exist only with
#   ``verification.convention: workbench`` (:func:`workbench_summary`); ``retrieval_num_distractors``
#   is the same count in both.

# The conventions: descbench.metrics.ap.AP_CONVENTIONS (columns verification_ap_<name> per scene,
# keypoint_verification_ap_<name> here), in registry order.


def verification_scene_values(scenes: pd.DataFrame, convention: str, hard_negatives: str) -> pd.DataFrame:
    """Per-scene verification AP and keypoint retrieval AP (one row per scene, sorted)."""
    s = scenes.sort_values("scene").reset_index(drop=True)
    has_pos = s.verification_num_positives > 0
    out = pd.DataFrame({"scene": s.scene})
    out["keypoint_verification_ap"] = s[AP_CONVENTIONS[convention].column].where(has_pos)
    num = s[f"retrieval_sum_ap_{hard_negatives}"]
    out["keypoint_retrieval_ap"] = [_ratio(a, n) for a, n in zip(num, s.retrieval_n_queries_with_positive)]
    out["n_distractor_scenes"] = s.n_distractor_scenes.astype(np.int64)
    out["n_distractors"] = s.n_distractors.astype(np.int64)
    if "workbench_verification_ap" in s.columns:  # verification.convention: workbench
        out["workbench_verification_ap"] = s.workbench_verification_ap
        out["workbench_retrieval_ap"] = s.workbench_retrieval_ap
    return out


def workbench_summary(s: pd.DataFrame) -> dict:
    """The C++ workbench's dataset values (``verification.convention: workbench``; facts in
    :func:`descbench.metrics.bojanic.workbench_scene_stats`): the mean over scenes with a
    non-empty pooled list (a scene without +1 counts as AP 0), the viewpoint / illumination means
    over scenes whose name starts with ``v`` / ``i`` (the workbench tests the first character)."""
    is_v = s.scene.str.startswith("v")
    is_i = s.scene.str.startswith("i")
    out = {}
    for task in ("verification", "retrieval"):
        col = s[f"workbench_{task}_ap"]
        out[f"workbench_{task}_map"] = _macro(col)
        out[f"workbench_{task}_viewpoint_map"] = _macro(col[is_v])
        out[f"workbench_{task}_illumination_map"] = _macro(col[is_i])
    out["workbench_verification_map_optimistic"] = _macro(s.workbench_verification_ap_optimistic)
    out["workbench_verification_map_pessimistic"] = _macro(s.workbench_verification_ap_pessimistic)
    out["workbench_num_positives"] = int(s.workbench_num_positives.sum())
    out["workbench_num_candidates"] = int(s.workbench_num_candidates.sum())
    # the workbench's own keypoint-retrieval counts under its own column names (its
    # evaluateRetrieval): +1 = its positives, 0 = every other keypoint of images 2..6 per query
    out["retrieval_num_true_positives"] = out["workbench_num_positives"]
    out["retrieval_num_hard_negatives"] = int((s.n_queries * s.n_target_keypoints).sum()) - out["workbench_num_positives"]
    return out


def verification_summary(scenes: pd.DataFrame, convention: str, hard_negatives: str, pooled_ap: float) -> dict:
    """Dataset aggregates of keypoint verification and keypoint retrieval (see above)."""
    s = scenes.sort_values("scene").reset_index(drop=True)
    has_pos = s.verification_num_positives > 0
    is_v = s.scene.str.startswith("v_")
    is_i = s.scene.str.startswith("i_")
    out = {
        "keypoint_verification_ap": _macro(s[AP_CONVENTIONS[convention].column][has_pos]),
        "verification_viewpoint_ap": _macro(s[AP_CONVENTIONS[convention].column][has_pos & is_v]),
        "verification_illumination_ap": _macro(s[AP_CONVENTIONS[convention].column][has_pos & is_i]),
        "keypoint_verification_ap_pooled": pooled_ap,
    }
    for c in AP_CONVENTIONS.values():
        out[c.report_column] = _macro(s[c.column][has_pos])
    out["keypoint_verification_ap_quantized"] = _macro(s[QUANTIZED_COLUMN][has_pos])
    out["keypoint_verification_quantized_gap"] = out["keypoint_verification_ap_quantized"] - out["keypoint_verification_ap_step"]
    nq = s.retrieval_n_queries_with_positive
    for name, key in (("", hard_negatives), ("_hard_negative", "negative"), ("_hard_ignored", "ignore")):
        out[f"keypoint_retrieval_ap{name}"] = _ratio(s[f"retrieval_sum_ap_{key}"].sum(), nq.sum())
    out["keypoint_retrieval_ap_including_zeros"] = _ratio(s[f"retrieval_sum_ap_{hard_negatives}"].sum(), s.n_queries.sum())
    out["retrieval_viewpoint_ap"] = _ratio(s[f"retrieval_sum_ap_{hard_negatives}"][is_v].sum(), nq[is_v].sum())
    out["retrieval_illumination_ap"] = _ratio(s[f"retrieval_sum_ap_{hard_negatives}"][is_i].sum(), nq[is_i].sum())
    out.update(
        verification_num_positives=int(s.verification_num_positives.sum()),
        verification_num_negatives=int(s.verification_num_negatives.sum()),
        verification_scenes_without_positive=int((~has_pos).sum()),
        retrieval_num_positives_descbench=int(s.retrieval_num_true_positives.sum()),  # per-scene files keep the old name
        retrieval_num_hard_negatives_descbench=int(s.retrieval_num_hard_negatives.sum()),
        retrieval_num_distractors=int(s.retrieval_num_distractors.sum()),
        retrieval_queries_with_positive=int(nq.sum()),
        n_distractor_scenes_min=int(s.n_distractor_scenes.min()) if len(s) else 0,
    )
    if "workbench_verification_ap" in s.columns:  # verification.convention: workbench
        out.update(workbench_summary(s))
    return out


def pooled_verification_ap(lists: list[tuple[np.ndarray, np.ndarray]], convention: str) -> float:
    """AP of the concatenated (distance, label) lists of every scene, in the given order."""
    if not lists:
        return float("nan")
    d = np.concatenate([x[0] for x in lists])
    lab = np.concatenate([x[1] for x in lists])
    if d.shape[0] == 0 or not (lab == 1).any():
        return float("nan")
    return AP_CONVENTIONS[convention].ap(d, lab)


# ----------------------------------------------------------------------------- matching
#
# From per-pair rows (schema io.matching_pairs_schema). One rule for pairs without keypoints
# (image 1 or image k has none: ``n_keypoints_1 == 0`` or ``n_keypoints_2 == 0``): no data for
# every matching and homography metric below, left out of every mean, numerator and denominator
# alike (:func:`with_data` enforces it from the keypoint counts, whatever the per-pair values say),
# and counted once as ``pairs_without_keypoints``. A pair with keypoints but no match counts:
# precision 0, MMA 0, homography failure (``pairs_without_matches``). Keypoint counts are not
# metrics of a pair: an empty image counts with 0 keypoints in ``features_per_image_d2net`` and
# ``mean_keypoints_per_pair``.
# - ``mean_precision`` = mean over pairs of the legacy precision; ``legacy_macro_precision_by_scene``
#   = mean of scene means. (Until issue 18 the table also had ``mean_average_precision`` = the same
#   value; in the C++ workbench that name means the true mAP, macro over scenes, so it is gone from
#   here and the results database fills it with ``true_map_macro_by_scene``,
#   descbench.report.database.)
# - ``mma_at_<t>`` = mean over pairs of the fraction of mutual-NN matches within t px (D2-Net);
#   ``mma_i_at_<t>`` / ``mma_v_at_<t>`` over i_ / v_ pairs.
# - ``matching_score`` = mean over pairs; ``mean_matches`` = mean over pairs of the mutual-NN matches.
#   (Every "mean over pairs" here is over the pairs with keypoints in both images.)
# - ``features_per_image_d2net`` = D2-Net's "features per image" (its HPatches notebook appends
#   image 1's count once per sequence and each image k's once): the mean over images, each image
#   once. ``mean_keypoints_per_pair`` = mean over pairs of (N1 + N2) / 2, in which image 1 weighs
#   five times (it is in every pair); not D2-Net's number.
# - ``repeatability`` = mean over pairs where it is defined (shared region non-empty).
# - ``homography_accuracy_at_<t>`` = fraction of pairs with corner error <= t (failures count);
#   ``homography_auc_at_<t>`` = LoFTR's error AUC (metrics.matching.homography_auc);
#   ``homography_failures`` = pairs with keypoints whose estimation failed (corner error inf).
# From per-(pair, matcher) classifier rows: ``classifier_<matcher>_auc`` and ``..._best_j`` = means
# over pairs with both classes present.


# per-pair metric columns that a pair without keypoints leaves out (NaN); "mma_at_*" added per file
NO_DATA_COLUMNS = ("precision", "matching_score", "repeatability", "corner_error", "n_matches")


def has_keypoints(pairs: pd.DataFrame) -> pd.Series:
    """Per pair: image 1 and image k both have at least one keypoint (the pair has data)."""
    return (pairs.n_keypoints_1 > 0) & (pairs.n_keypoints_2 > 0)


def with_data(pairs: pd.DataFrame) -> pd.DataFrame:
    """``pairs`` with every per-pair metric (precision, MMA, matching score, repeatability, corner
    error, n_matches) NaN where the pair has no keypoint in image 1 or image k: the one rule above,
    applied from the keypoint counts so that no aggregate can count such a pair."""
    ok = has_keypoints(pairs)
    if ok.all():
        return pairs
    out = pairs.copy()
    cols = [c for c in out.columns if c in NO_DATA_COLUMNS or c.startswith("mma_at_")]
    for c in cols:
        out[c] = out[c].astype(np.float64).where(ok)
    return out


def matching_scene_values(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per-scene means over pairs, and per scene the sums behind the dataset's mean over pairs of
    MMA at 3 px and homography accuracy at 3 px (``mma_at_3_sum`` / ``n_mma_pairs`` and
    ``homography_accurate_at_3`` / ``n_matching_pairs``: the bootstrap over scenes recomputes those
    means exactly). Pairs without keypoints count in no numerator and no denominator:
    ``n_mma_pairs`` and ``n_matching_pairs`` are the scene's pairs with keypoints in both images."""
    has_kp = has_keypoints(pairs)
    pairs = with_data(pairs)
    g = pairs.groupby("scene", sort=True)
    out = pd.DataFrame({
        "mean_precision": g.precision.mean(),
        "matching_score": g.matching_score.mean(),
        "repeatability": g.repeatability.mean(),
        "mean_matches": g.n_matches.mean(),
    })
    if "mma_at_3" in pairs.columns:
        out["mma_at_3_sum"] = g.mma_at_3.sum()  # pandas' sum skips NaN
        out["n_mma_pairs"] = g.mma_at_3.count()
    out["homography_accurate_at_3"] = g.corner_error.apply(lambda e: int((e <= 3.0).sum()))  # NaN <= 3 is False
    out["n_matching_pairs"] = has_kp.groupby(pairs.scene, sort=True).sum().astype(np.int64)
    return out.reset_index()


def features_per_image(pairs: pd.DataFrame) -> float:
    """Mean keypoint count over images, each image once (D2-Net's "features per image"): per
    scene image 1's count (the same in every pair of the scene) and each image k's count."""
    if len(pairs) == 0:
        return float("nan")
    if "query_image" in pairs.columns:  # pairs (a, b): every image of a scene once, on either side
        counts = pd.concat([pairs[["scene", "query_image", "n_keypoints_1"]].set_axis(["scene", "image", "n"], axis=1),
                            pairs[["scene", "pair", "n_keypoints_2"]].set_axis(["scene", "image", "n"], axis=1)])
        return float(counts.drop_duplicates(["scene", "image"]).n.mean())
    first = pairs.groupby("scene", sort=True).n_keypoints_1.first()
    return float((first.sum() + pairs.n_keypoints_2.sum()) / (len(first) + len(pairs)))


def matching_summary(pairs: pd.DataFrame, classifier: pd.DataFrame | None, mma_thresholds, hom_thresholds, auc_thresholds) -> dict:
    from descbench.columns import threshold_key
    from descbench.metrics.matching import homography_accuracy, homography_auc

    has_kp = has_keypoints(pairs)
    scenes = matching_scene_values(pairs)
    counts = pairs  # keypoint counts: every image, an empty one with 0
    pairs = with_data(pairs)  # every matching / homography metric: pairs without keypoints NaN
    is_i = pairs.scene.str.startswith("i_")
    is_v = pairs.scene.str.startswith("v_")
    out = {
        "mean_precision": _macro(pairs.precision),
        "legacy_macro_precision_by_scene": _macro(scenes.mean_precision),
    }
    for t in mma_thresholds:
        k = threshold_key(t)
        out[f"mma_at_{k}"] = _macro(pairs[f"mma_at_{k}"])
        out[f"mma_i_at_{k}"] = _macro(pairs[f"mma_at_{k}"][is_i])
        out[f"mma_v_at_{k}"] = _macro(pairs[f"mma_at_{k}"][is_v])
    out["matching_score"] = _macro(pairs.matching_score)
    out["mean_keypoints_per_pair"] = _macro((counts.n_keypoints_1 + counts.n_keypoints_2) / 2)
    out["features_per_image_d2net"] = features_per_image(counts)
    out["mean_matches"] = _macro(pairs.n_matches.astype(np.float64))
    out["pairs_without_keypoints"] = int((~has_kp).sum())  # no data: NaN, left out of every mean
    out["pairs_without_matches"] = int(((counts.n_matches == 0) & has_kp).sum())  # their precision/MMA count as 0
    out["repeatability"] = _macro(pairs.repeatability)
    err = pairs.corner_error.to_numpy(np.float64)  # NaN (no data) left out by homography_accuracy / _auc
    for t, v in zip(hom_thresholds, homography_accuracy(err, hom_thresholds)):
        out[f"homography_accuracy_at_{threshold_key(t)}"] = float(v)
    for t, v in zip(auc_thresholds, homography_auc(err, auc_thresholds)):
        out[f"homography_auc_at_{threshold_key(t)}"] = float(v)
    out["homography_failures"] = int(np.isinf(err).sum())  # pairs with keypoints whose estimation failed
    out["matching_pairs"] = int(len(pairs))
    if classifier is not None:
        for m, g in classifier.groupby("matcher", sort=False):
            out[f"classifier_{m}_auc"] = _macro(g.auc)
            out[f"classifier_{m}_best_j"] = _macro(g.best_j)
            out[f"classifier_{m}_best_j_tpr"] = _macro(g.best_j_tpr)
            out[f"classifier_{m}_best_j_fpr"] = _macro(g.best_j_fpr)
    return out
