"""Keypoint verification and keypoint retrieval with distractors (Bojanić et al. 2019; protocols
section 4; the seed's three-tier labels), for one scene.

Queries are the keypoints of image 1; the scene's *targets* are images 2..6 and its
*distractors* are keypoints of other scenes (:mod:`descbench.metrics.distractors`). Ground truth
is the retrieval ground truth of :func:`descbench.metrics.retrieval.relevance` (``gt`` closest or
all_within_tau, ``tau_px``). The ranking key is the exact descriptor distance: squared L2 in
float64 for float descriptors (same order as L2), Hamming for packed bits.

**Keypoint verification** (a pooled list per scene, score = -distance):

- ``candidates: nearest`` (Bojanić's definition, default): for every query, its nearest
  neighbour in each target image k (label +1 iff it is relevant to the query in image k, else
  -1) and in each distractor scene's set (-1). At most 5 + n_distractor_scenes entries per query.
- ``candidates: all`` (the seed's C++ workbench): every (query, candidate) pair over all
  keypoints of images 2..6 (+1 iff relevant, else -1) and all distractors (-1); this list is
  never materialised: AP comes from exact tie-group counts (:func:`descbench.metrics.classifier.
  threshold_histogram`), so only the conventions defined by tie-group counts are (``tie_groups`` of
  :data:`descbench.metrics.ap.AP_CONVENTIONS`: step, tie_aware); the others are NaN.

AP of the pooled list under the configured convention (:mod:`descbench.metrics.ap`; ``step``,
scikit-learn's, is the default), plus the quantised estimator with ``quantized_bins`` bins.

**Keypoint retrieval** (per query): candidates are all keypoints of images 2..6 and all
distractors; label +1 for the query's relevant keypoint(s) in each image (R <= 5 with
``gt: closest``), 0 for every other keypoint of images 2..6 (hard negatives), -1 for distractors.
AP over the query's R positives with the scoring tie policy (:func:`descbench.metrics.kernels.
_group_ap_sum`); label 0 counts as non-relevant (``hard_negatives: negative``) or is removed
(``ignore``, the HPatches MATLAB convention). Both are computed; queries with R = 0 have AP NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from descbench.errors import DataError
from descbench.metrics import kernels
from descbench.metrics.ap import AP_CONVENTIONS, QUANTIZED_COLUMN, verification_ap_columns
from descbench.params import ConfigParams, config_field
from descbench.metrics.retrieval import (
    _need_frame, pack_bits_to_words, prepare_l2_screen, project, projected_frames, query_blocks, relevance,
    workbench_positives,
)


@dataclass(frozen=True)
class BojanicParams(ConfigParams):
    """Keypoint verification's settings: ``scoring`` and ``verification`` keys of the config
    (defaults: the schema's; ``BojanicParams.from_config(scoring=..., verification=...)``)."""

    tau_px: float = config_field("scoring.tau_px", float)
    gt: str = config_field("scoring.gt")
    tie_policy: str = config_field("scoring.tie_policy")
    candidates: str = config_field("verification.candidates")  # nearest | all
    hard_negatives: str = config_field("verification.hard_negatives")  # negative | ignore (the headline AP)
    ap_convention: str = config_field("verification.ap_convention")
    quantized_bins: int = config_field("verification.quantized_bins", int)
    chunk_mb: float = config_field("scoring.chunk_mb", float)
    convention: str = config_field("verification.convention")  # descbench | workbench (adds workbench_* statistics)


@dataclass(frozen=True)
class Target:
    """Image k of the scene: keypoint positions ``xy`` [Nk, 2], descriptors ``desc`` [Nk, D],
    the homography ``H`` [3, 3] from image 1 to image k and the image's (width, height)
    ``size``; the keypoints' angles (degrees) and sizes [Nk] (``gt: closest_oriented`` only)."""

    xy: np.ndarray
    desc: np.ndarray
    H: np.ndarray
    size: tuple[int, int]
    angle: np.ndarray | None = None
    kp_size: np.ndarray | None = None


@dataclass(frozen=True)
class Distractors:
    """A distractor set: keypoints of image ``image`` of another scene ``scene`` (their ``rows``
    in that image's keypoint file, int [M]) and their descriptors ``desc`` [M, D] (the queries'
    dtype and width). Every entry is a negative for every query."""

    scene: str
    image: int
    rows: np.ndarray  # keypoint rows of that image
    desc: np.ndarray  # their descriptors


@dataclass
class SceneTaskResult:
    """What :func:`score_scene_tasks` returns for one scene (field by field below)."""

    # verification list (nearest): one entry per (query, non-empty segment), query-major
    v_query: np.ndarray
    v_segment: np.ndarray  # int32: 0..4 = images 2..6, 5.. = distractor sets
    v_candidate: np.ndarray  # keypoint row in that image
    v_distance: np.ndarray  # exact ranking key
    v_label: np.ndarray  # +1 / -1
    # keypoint retrieval, per query
    r_positives: np.ndarray  # R
    r_ap_negative: np.ndarray
    r_ap_ignore: np.ndarray
    stats: dict = field(default_factory=dict)


def _positive_csr(q_xy, targets: list[Target], params: BojanicParams, q_frame=None, workbench: bool = False):
    """Relevant candidates of every query over the concatenated targets (CSR, ascending).

    ``workbench``: the C++ workbench's +1 labels instead
    (:func:`descbench.metrics.retrieval.workbench_positives`)."""
    nq = q_xy.shape[0]
    rows, cols, per_image = [], [], []
    offset = 0
    for t in targets:
        if workbench:
            indptr, indices = workbench_positives(t.H, q_xy, t.xy, params.tau_px)
        else:
            proj, inside = project(t.H, q_xy, *t.size)
            frames = None
            if params.gt == "closest_oriented":
                frames = (*projected_frames(t.H, q_xy, *_need_frame(q_frame, "image 1")),
                          *_need_frame(None if t.angle is None else (t.angle, t.kp_size), "images 2..6"))
            _, _, indptr, indices = relevance(proj, inside, np.asarray(t.xy, np.float64).reshape(-1, 2), params.tau_px,
                                              params.gt, frames)
        r = np.repeat(np.arange(nq, dtype=np.int64), np.diff(indptr))
        per_image.append((indptr, indices))
        rows.append(r)
        cols.append(indices + offset)
        offset += t.xy.shape[0]
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    order = np.lexsort((c, r))
    indptr = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=nq), out=indptr[1:])
    return indptr, c[order].astype(np.int64), per_image


def _check(q_desc, arrays, where):
    for name, d in arrays:
        if d.shape[1:] != q_desc.shape[1:] or d.dtype != q_desc.dtype:
            raise DataError(
                f"{where}: {name} has {d.dtype} x {d.shape[1:]} descriptors, image 1 has "
                f"{q_desc.dtype} x {q_desc.shape[1:]}; every scene must use the same descriptor"
            )


class SegmentStats:
    """:func:`segment_statistics` in steps, so a scene pass can feed it screen blocks it computed
    once for several consumers (:mod:`descbench.metrics.scenepass`).

    ``needs_screen``: float32 descriptors, queries and candidates; then :meth:`consume` takes the
    screen ``[q_i, 1] . [c_j, -|c_j|^2/2]`` of query rows ``rows`` against ALL of ``cands`` (in
    candidate order), whichever BLAS call made it: ``tol`` (from max |c| over ``cands``) bounds
    the error of any summation order, so the results are exact for any such screen. Every query
    row must be consumed exactly once. Hamming descriptors are done at construction.
    """

    def __init__(self, q_desc, cands, seg_start, n_image, indptr, indices):
        nq, n_seg, nnz = q_desc.shape[0], seg_start.shape[0] - 1, indices.shape[0]
        self.seg_start, self.n_image, self.indptr, self.indices = seg_start, n_image, indptr, indices
        self.nn_idx = np.full((nq, n_seg), -1, dtype=np.int64)
        self.nn_d = np.full((nq, n_seg), np.inf)
        self.less_img, self.equal_img, self.less_dis, self.equal_dis = (np.zeros(nnz, np.int64) for _ in range(4))
        self.dexact = np.zeros(nnz)
        self.needs_screen = False
        if nq == 0:
            return
        if q_desc.dtype == np.uint8:
            kernels.segment_stats_hamming(pack_bits_to_words(q_desc), pack_bits_to_words(cands), seg_start, n_image,
                                          indptr, indices, *self._outputs())
            return
        if cands.shape[0] == 0:
            return
        self.needs_screen = True
        self.qd, self.cd, self.qaug, self.caug, self.tol = prepare_l2_screen(q_desc, cands)

    def _outputs(self):
        return (self.nn_idx, self.nn_d, self.less_img, self.equal_img, self.less_dis, self.equal_dis, self.dexact)

    def consume(self, screen, rows):
        """One screen block: ``screen[t]`` is query ``rows[t]`` against every candidate."""
        kernels.segment_stats_l2(screen, rows, self.qd, self.cd, self.tol, self.seg_start, self.n_image,
                                 self.indptr, self.indices, *self._outputs())

    def result(self):
        return self._outputs()


def segment_statistics(q_desc, cands, seg_start, n_image, indptr, indices, chunk_mb):
    """Run the one-pass kernel: per-segment exact NN and class-split rank counts of positives."""
    st = SegmentStats(q_desc, cands, seg_start, n_image, indptr, indices)
    if st.needs_screen:
        nq = q_desc.shape[0]
        all_rows = np.ones(nq + 1, dtype=np.int64)  # every query needs its nearest neighbours
        all_rows[0] = 0
        for rows in query_blocks(np.cumsum(all_rows), st.cd.shape[0], chunk_mb):
            st.consume(st.qaug[rows] @ st.caug.T, rows)
    return st.result()


class SceneTasks:
    """:func:`score_scene_tasks` in steps: ground truth and candidates at construction, the
    screen consumer in ``segments`` (a :class:`SegmentStats`, fed by :func:`score_scene_tasks` or
    by a scene pass), :meth:`finish`."""

    def __init__(self, q_xy, q_desc, targets: list[Target], distractors: list[Distractors],
                 params: BojanicParams, where: str = "scene", q_frame=None):
        q_xy = np.asarray(q_xy, np.float64).reshape(-1, 2)
        _check(q_desc, [(f"image {k}", t.desc) for k, t in enumerate(targets, start=2)]
               + [(f"distractor {d.scene}/{d.image}", d.desc) for d in distractors], where)
        self.q_desc, self.targets, self.distractors, self.params = q_desc, targets, distractors, params
        self.nq = q_xy.shape[0]
        self.indptr, self.indices, self.per_image = _positive_csr(q_xy, targets, params, q_frame)
        self.wb = None
        if params.convention == "workbench":
            self.wb = _positive_csr(q_xy, targets, params, workbench=True)[:2]
        blocks = [t.desc for t in targets] + [d.desc for d in distractors]
        sizes = np.array([b.shape[0] for b in blocks], dtype=np.int64)
        self.seg_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_image = int(sizes[: len(targets)].sum())
        self.n_dis = int(sizes[len(targets):].sum())
        self.cands = np.concatenate(blocks) if blocks else q_desc[:0]
        self.segments = SegmentStats(q_desc, self.cands, self.seg_start, self.n_image, self.indptr, self.indices)

    def finish(self) -> SceneTaskResult:
        return _finish_scene_tasks(self)


def score_scene_tasks(q_xy: np.ndarray, q_desc: np.ndarray, targets: list[Target], distractors: list[Distractors],
                      params: BojanicParams, where: str = "scene", q_frame: tuple | None = None) -> SceneTaskResult:
    """Keypoint verification and keypoint retrieval with distractors of one scene (the module
    docstring has the definitions): the workflow's ``verification`` task on arrays.

    Args:
        q_xy: float [Nq, 2], image 1's keypoints (x, y) in pixels: the queries.
        q_desc: [Nq, D] float32 (L2) or uint8 packed bits (Hamming): their descriptors.
        targets: the scene's other images (:class:`Target`: keypoints [Nk, 2], descriptors
            [Nk, D] of the same dtype and width, the 3x3 homography from image 1 to image k, its
            (width, height)).
        distractors: keypoint sets of other scenes (:class:`Distractors`; may be empty).
        params: :class:`BojanicParams` (the config's ``scoring`` and ``verification`` keys).
        where: names the scene in errors.
        q_frame: ``(angles [Nq] in degrees, sizes [Nq])`` of the queries; needed by
            ``gt: closest_oriented`` (the default) together with each target's ``angle`` and
            ``kp_size``.

    Returns:
        :class:`SceneTaskResult`: the verification list (one entry per query and image or
        distractor set: ``v_query``, ``v_segment``, ``v_candidate``, ``v_distance``, ``v_label``),
        the per-query retrieval APs (``r_ap_negative``: hard negatives count as non-relevant;
        ``r_ap_ignore``: removed; NaN for a query without a relevant keypoint) and ``stats``
        (the list's AP under every convention, counts, the retrieval AP sums).

    Examples:
        Three queries; image 2 is image 1 shifted 10 px right with the descriptors of its first
        two keypoints swapped; one distractor set of two keypoints, all at squared distance 1:

        >>> q_xy = np.array([[50.0, 50.0], [80.0, 60.0], [120.0, 90.0]])
        >>> q_desc = np.eye(3, 4, dtype=np.float32)
        >>> shift = np.array([[1.0, 0.0, 10.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        >>> image2 = Target(q_xy + [10.0, 0.0], q_desc[[1, 0, 2]], shift, (200, 200))
        >>> other = Distractors("other_scene", 1, np.array([5, 7]), np.full((2, 4), 0.5, np.float32))
        >>> r = score_scene_tasks(q_xy, q_desc, [image2], [other], BojanicParams(gt="closest"))

        Verification: each query's nearest neighbour in image 2 (distance 0; right only for
        query 2) and in the distractor set (distance 1, wrong): one positive among the three
        entries tied at distance 0, so scikit-learn's step AP is 1/3 and the tie-aware
        (expected) AP is (1 + 1/2 + 1/3) / 3:

        >>> r.v_label.tolist(), r.v_distance.tolist()
        ([-1, -1, -1, -1, 1, -1], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
        >>> round(r.stats["verification_ap_step"], 6), round(r.stats["verification_ap_tie_aware"], 6)
        (0.333333, 0.611111)

        Retrieval: query 1's relevant keypoint (image 2's first, distance 2) comes after the
        swapped one (0) and both distractors (1), tied with the third keypoint (2): rank 4 or 5,
        AP (1/4 + 1/5) / 2; with the hard negatives removed it is third: 1/3:

        >>> r.r_ap_negative.round(6).tolist(), r.r_ap_ignore.round(6).tolist()
        ([0.225, 0.225, 1.0], [0.333333, 0.333333, 1.0])
    """
    st = SceneTasks(q_xy, q_desc, targets, distractors, params, where, q_frame)
    seg = st.segments
    if seg.needs_screen:
        nq = st.nq
        all_rows = np.ones(nq + 1, dtype=np.int64)  # every query needs its nearest neighbours
        all_rows[0] = 0
        for rows in query_blocks(np.cumsum(all_rows), seg.cd.shape[0], params.chunk_mb):
            seg.consume(seg.qaug[rows] @ seg.caug.T, rows)
    return st.finish()


def _finish_scene_tasks(st: SceneTasks) -> SceneTaskResult:
    from descbench.metrics import ap as apmod

    q_desc, targets, distractors, params = st.q_desc, st.targets, st.distractors, st.params
    nq, indptr, indices, per_image = st.nq, st.indptr, st.indices, st.per_image
    n_image, n_dis, cands = st.n_image, st.n_dis, st.cands
    nn_idx, nn_d, less_img, equal_img, less_dis, equal_dis, dexact = st.segments.result()

    # ---- keypoint retrieval: per-query AP with hard negatives counted (negative) or removed (ignore)
    policy = kernels.POLICY_CODES[params.tie_policy]
    one = np.array([1], dtype=np.int64)
    ap_neg = kernels.query_scores(indptr, dexact, less_img + less_dis, equal_img + equal_dis, policy, one, one)[0]
    pos_less, pos_equal = kernels.within_row_counts(indptr, dexact)
    ap_ign = kernels.query_scores(indptr, dexact, pos_less + less_dis, pos_equal + equal_dis, policy, one, one)[0]
    n_pos = np.diff(indptr).astype(np.int64)

    # ---- keypoint verification
    v_query = v_seg = v_cand = v_dist = v_label = np.zeros(0)
    conv = {}
    if params.candidates == "nearest":
        labels = np.full(nn_idx.shape, -1, dtype=np.int8)
        for s, (iptr, ind) in enumerate(per_image):
            nk = targets[s].xy.shape[0]
            rel_keys = np.repeat(np.arange(nq, dtype=np.int64), np.diff(iptr)) * max(nk, 1) + ind
            keys = np.arange(nq, dtype=np.int64) * max(nk, 1) + nn_idx[:, s]
            labels[:, s] = np.where((nn_idx[:, s] >= 0) & np.isin(keys, rel_keys), 1, -1)
        present = nn_idx >= 0
        qq, ss = np.nonzero(present)  # row-major: query-major, then segment order
        v_query, v_seg = qq.astype(np.int32), ss.astype(np.int32)
        cand = nn_idx[qq, ss]
        if distractors:  # distractor entries: index within the drawn set -> keypoint row, one gather
            rows_all = np.concatenate([np.asarray(d.rows, np.int64) for d in distractors])
            start = np.concatenate([[0], np.cumsum([len(d.rows) for d in distractors])[:-1]]).astype(np.int64)
            m = ss >= len(targets)
            cand[m] = rows_all[start[ss[m] - len(targets)] + cand[m]]
        v_cand, v_dist, v_label = cand.astype(np.int32), nn_d[qq, ss], labels[qq, ss]
        conv = verification_ap(v_dist, v_label, params.quantized_bins)
    else:
        conv = _verification_all(q_desc, cands, indptr, dexact, apmod)
    stats = {
        "n_queries": nq,
        "n_target_keypoints": n_image,
        "n_distractor_scenes": len(distractors),
        "n_distractors": n_dis,
        "verification_num_positives": int((v_label == 1).sum()) if params.candidates == "nearest" else int(indices.shape[0]),
        "verification_num_negatives": int((v_label == -1).sum()) if params.candidates == "nearest" else int(nq * (n_image + n_dis) - indices.shape[0]),
        **conv,
        "retrieval_n_queries_with_positive": int((n_pos > 0).sum()),
        "retrieval_sum_ap_negative": float(np.nansum(ap_neg)),
        "retrieval_sum_ap_ignore": float(np.nansum(ap_ign)),
        "retrieval_num_true_positives": int(n_pos.sum()),
        "retrieval_num_hard_negatives": int(nq * n_image - n_pos.sum()),
        "retrieval_num_distractors": int(nq * n_dis),
    }
    if st.wb is not None:
        stats.update(workbench_scene_stats(q_desc, cands, *st.wb, params.tie_policy, params.chunk_mb))
    return SceneTaskResult(v_query, v_seg, v_cand, v_dist, v_label, n_pos.astype(np.int32), ap_neg, ap_ign, stats)


def verification_ap(distance: np.ndarray, label: np.ndarray, quantized_bins: int) -> dict:
    """AP of a materialised pooled list under every convention, and the quantised estimate."""
    from descbench.metrics import ap as apmod

    if distance.shape[0] == 0 or not (label == 1).any():
        return {c: float("nan") for c in verification_ap_columns()}
    order = np.argsort(distance, kind="stable")  # sort once; every convention's own stable sort keeps it
    distance, label = distance[order], label[order]  # the list has +1 / -1 labels only
    out = {c.column: c.ap(distance, label) for c in AP_CONVENTIONS.values()}
    out[QUANTIZED_COLUMN] = apmod.ap_quantized(distance, (label == 1).astype(np.int8), quantized_bins)
    return out


def _verification_all(q_desc, cands, indptr, dexact, apmod) -> dict:
    """``candidates: all``: AP from exact tie-group counts over every (query, candidate) pair."""
    from descbench.metrics.classifier import threshold_histogram

    out = {c: float("nan") for c in verification_ap_columns()}  # conventions without tie_groups stay NaN
    if dexact.shape[0] == 0:
        return out
    thr, n_pos = np.unique(dexact, return_counts=True)
    n_less, n_equal, _ = threshold_histogram(q_desc, cands, thr)
    # groups in increasing distance: the negatives strictly between thresholds, then the tie group
    gp = np.zeros(2 * thr.shape[0], dtype=np.int64)
    gn = np.zeros(2 * thr.shape[0], dtype=np.int64)
    gp[1::2] = n_pos
    gn[0::2] = n_less
    gn[1::2] = n_equal - n_pos
    for c in AP_CONVENTIONS.values():
        if c.tie_groups is not None:
            out[c.column] = apmod.ap_from_tie_groups(gp, gn, c.tie_groups)
    return out


# --------------------------------------------------------------------------- the C++ workbench's convention

WORKBENCH_TIE_CONVENTION = {"expected": "tie_aware", "optimistic": "optimistic", "pessimistic": "pessimistic", "half": "half"}


def workbench_scene_stats(q_desc, cands, indptr, indices, tie_policy: str, chunk_mb: float = 64.0) -> dict:
    """The C++ DescriptorWorkbench's keypoint verification and keypoint retrieval AP of one scene.

    Facts from F-Sossi/DescriptorWorkbench ``src/core/metrics/KeypointVerification.cpp``
    (``buildVerificationCandidates`` + ``evaluateVerification``, ``buildRetrievalCandidates`` +
    ``evaluateRetrieval``, ``computeDatasetVerification`` / ``computeDatasetRetrieval``) and
    ``src/cli/experiment_runner/processing.cpp`` (``VerificationAccumulator``,
    ``RetrievalAccumulator``):

    - one pooled list per scene: for every query (keypoint of image 1) every keypoint of every
      target image with a homography (images 2..6) and every sampled distractor keypoint; score =
      ``cv::norm(NORM_L2)`` descriptor distance (a monotone function of the squared L2 key used
      here, so the order is the same); label +1 per ``isCorrectMatch``
      (:func:`descbench.metrics.retrieval.workbench_positives`: every keypoint within 1e-6 px of
      the nearest distance to the projection, within 3 px), -1 (verification) / 0 (retrieval)
      every other same-scene keypoint, -1 every distractor;
    - ``std::sort`` by ascending distance (comparator on the distance only: the order inside a
      tie is unspecified), then AP = (1 / #positives) sum over positives of hits / position (no
      interpolation, no tie grouping); a scene with a non-empty list but no positive has AP 0;
    - keypoint retrieval uses the same list (its label 0 and -1 are both non-relevant in
      ``evaluateRetrieval``), so with the same distractors it is the same number as verification
      (the workbench draws the distractors of each query anew from one ``std::mt19937`` per scene,
      in a different scene order for the two tasks, so its two numbers differ only by that draw);
    - dataset value: the mean over scenes whose list is non-empty; ``viewpoint_ap`` /
      ``illumination_ap`` over scenes whose name starts with ``v`` / ``i``
      (:func:`descbench.metrics.aggregate.verification_summary`).

    Not reproduced: the workbench's distractor draw (``std::hash`` + ``std::mt19937`` +
    libstdc++'s ``std::shuffle``, re-drawn per query; descbench draws once per scene,
    :mod:`descbench.metrics.distractors`), and ``std::sort``'s unspecified tie order: ties are
    resolved by ``tie_policy`` (``expected`` = He et al.'s mean over orderings, ``half`` = the
    positives of a tie group after ceil(#negatives / 2) of them, ...), and the optimistic /
    pessimistic values bound the workbench's number for any tie order. Binary descriptors: the
    workbench's ``NORM_L2`` on bytes is not Hamming; descbench ranks them by Hamming distance.

    Computed exactly without materialising the Q x N list: the positives' keys, then one
    :func:`descbench.metrics.classifier.threshold_histogram` pass for the negatives per tie group.
    """
    from descbench.metrics import ap as apmod
    from descbench.metrics.classifier import threshold_histogram

    nq, n = q_desc.shape[0], cands.shape[0]
    n_pos = int(indices.shape[0])
    out = {"workbench_num_positives": n_pos, "workbench_num_candidates": int(nq * n)}
    names = ("workbench_verification_ap", "workbench_verification_ap_optimistic",
             "workbench_verification_ap_pessimistic", "workbench_retrieval_ap")
    if nq * n == 0:
        return {**out, **{k: float("nan") for k in names}}
    if n_pos == 0:
        return {**out, **{k: 0.0 for k in names}}
    rows = np.repeat(np.arange(nq, dtype=np.int64), np.diff(indptr))
    if q_desc.dtype == np.uint8:
        keys = kernels.pair_keys_hamming(pack_bits_to_words(q_desc), pack_bits_to_words(cands), rows, indices)
    else:
        keys = kernels.pair_keys_l2(np.ascontiguousarray(q_desc, np.float32), np.ascontiguousarray(cands, np.float32),
                                    rows, indices)
    thr, pos = np.unique(keys, return_counts=True)
    n_less, n_equal, _ = threshold_histogram(q_desc, cands, thr, chunk_mb)
    gp = np.zeros(2 * thr.shape[0], dtype=np.int64)
    gn = np.zeros(2 * thr.shape[0], dtype=np.int64)
    gp[1::2] = pos
    gn[0::2] = n_less
    gn[1::2] = n_equal - pos
    main = apmod.ap_from_tie_groups(gp, gn, WORKBENCH_TIE_CONVENTION[tie_policy])
    out["workbench_verification_ap"] = main
    out["workbench_verification_ap_optimistic"] = apmod.ap_from_tie_groups(gp, gn, "optimistic")
    out["workbench_verification_ap_pessimistic"] = apmod.ap_from_tie_groups(gp, gn, "pessimistic")
    out["workbench_retrieval_ap"] = main
    return out
