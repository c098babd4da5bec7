"""Keypoint retrieval on sequences (protocols section 4): ground truth, exact ranks, per-query AP.

For a pair (1, k) and a query q (a keypoint of image 1):

- ground truth: ``p = H q``; ``j* = argmin_j |p - x_j|`` over image-k keypoints (lowest index
  wins a tie). ``gt: closest``: q's one relevant item is j* iff ``|p - x_j*| <= tau_px``.
  ``gt: all_within_tau``: every keypoint within ``tau_px`` of p is relevant. A projection outside
  image k (``0 <= x < W``, ``0 <= y < H`` fails, or the point maps behind the camera) has R = 0.
  Order-independent variants of ``closest`` (SIFT emits several keypoints, one per orientation,
  at one location, so "the lowest index among the nearest" depends on keypoint order): let
  ``D = {j: |p - x_j|^2 == |p - x_j*|^2}`` (exact float64; in practice j*'s same-position
  duplicates), used iff ``|p - x_j*| <= tau_px``.
  ``gt: closest_oriented``: the one member of D whose frame agrees best with q's frame mapped
  through H (:func:`projected_frames`: angle through the local Jacobian J of H at q, size times
  sqrt|det J|): smallest angular difference, then smallest ``|log(size_j / size_proj)|``, then
  lowest index (reached only by members with identical position, angle and size).
  ``gt: closest_group``: D as ONE relevant group: the query is a hit at the rank of D's
  best-ranked member (AP = 1/rank of the first member, ties by the tie policy,
  :func:`descbench.metrics.kernels.group_query_scores`); unlike ``all_within_tau`` the members are
  not separate relevant items.
- ranking: all image-k descriptors by increasing distance to q's descriptor (squared L2 in
  float64 for float descriptors, Hamming for packed bits). With ``L`` the number strictly closer
  than the relevant item and ``t`` the number of other candidates at exactly its distance, the tie
  policies give AP = 1/(L+1) (``optimistic``), 1/(L+t+1) (``pessimistic``), 1/(L+1+ceil(t/2))
  (``half``) or ``(1/(t+1)) sum_{r=L+1}^{L+t+1} 1/r`` (``expected``, the default); for several
  relevant items the general tie-aware AP of :func:`descbench.metrics.kernels._group_ap_sum`.
- hit@K: probability (under the tie policy) that the first relevant item ranks within the top K
  (the seed's precision@K); recall@K: expected fraction of relevant items within the top K.
  Both equal each other when R = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from descbench.errors import DataError
from descbench.io import HIT_KS
from descbench.metrics import kernels
from descbench.params import ConfigParams, config_field

if TYPE_CHECKING:  # annotations only (postponed): no import at run time
    from numpy.typing import ArrayLike

RECALL_KS = (1, 5, 10)


@dataclass(frozen=True)
class RetrievalParams(ConfigParams):
    """Keypoint retrieval's settings: the ``scoring`` keys of the config (defaults: the schema's;
    ``RetrievalParams.from_config(scoring)`` builds it from the validated section)."""

    tau_px: float = config_field("scoring.tau_px", float)
    gt: str = config_field("scoring.gt")  # closest | all_within_tau | closest_group | closest_oriented
    tie_policy: str = config_field("scoring.tie_policy")  # expected | optimistic | pessimistic | half
    chunk_mb: float = config_field("scoring.chunk_mb", float)  # bound on the float32 screen block held in memory


@dataclass(frozen=True)
class PairResult:
    """Per-query outputs for one pair (arrays of length Q = number of image-1 keypoints)."""

    inside: np.ndarray  # bool
    n_relevant: np.ndarray  # int32
    gt_index: np.ndarray  # int64
    gt_px: np.ndarray  # float64
    n_closer: np.ndarray  # int64 (-1 where R = 0)
    n_tied: np.ndarray  # int64 (-1 where R = 0)
    ap: np.ndarray  # float64 (NaN where R = 0)
    hit: np.ndarray  # float64 [Q, len(HIT_KS)]
    recall: np.ndarray  # float64 [Q, len(RECALL_KS)]
    rank: np.ndarray | None = None  # float64 rank of the first relevant item (closest_group only)


def project(H: np.ndarray, xy: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """``p ~ H [x, y, 1]^T`` divided by the third coordinate; ``inside`` = lands in the W x H image."""
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    h = np.column_stack([xy, np.ones(len(xy))]) @ H.T
    w = h[:, 2]
    front = w > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        p = h[:, :2] / np.where(front, w, 1.0)[:, None]
    inside = front & (p[:, 0] >= 0) & (p[:, 0] < width) & (p[:, 1] >= 0) & (p[:, 1] < height)
    p[~front] = np.inf
    return p, inside


GT_MODES = ("closest", "all_within_tau", "closest_group", "closest_oriented")


def projected_frames(H: np.ndarray, q_xy: np.ndarray, q_angle: np.ndarray, q_size: np.ndarray):
    """q's frame mapped through H: (angle in degrees [0, 360), size) per query
    (:func:`descbench.keypoints.projected.map_frames`, the one definition)."""
    from descbench.keypoints.projected import map_frames

    return map_frames(H, q_xy, q_angle, q_size)


def nearest_sets(proj: np.ndarray, target_xy: np.ndarray, nn_idx: np.ndarray, active: np.ndarray, tau_px: float):
    """CSR (indptr, indices ascending) of ``D`` per active query: every target at exactly the
    nearest one's squared distance (``dx*dx + dy*dy`` in float64, dx = x_target - x_p)."""
    proj = np.ascontiguousarray(proj, dtype=np.float64)
    target_xy = np.ascontiguousarray(target_xy, dtype=np.float64)
    indptr, indices = kernels.within_radius_csr(proj, target_xy, float(tau_px) * (1 + 1e-9) + 1e-12, active)
    row = np.repeat(np.arange(proj.shape[0], dtype=np.int64), np.diff(indptr))

    def d2(r, j):
        dx = target_xy[j, 0] - proj[r, 0]
        dy = target_xy[j, 1] - proj[r, 1]
        return dx * dx + dy * dy

    keep = d2(row, indices) == d2(row, np.maximum(nn_idx[row], 0))
    cnt = np.bincount(row[keep], minlength=proj.shape[0])
    return np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64), indices[keep].astype(np.int64)


def _orient_choice(indptr, indices, frames):
    """One member per row of D: the best frame agreement (module docstring, closest_oriented)."""
    p_angle, p_size, t_angle, t_size = frames
    row = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    ta = np.asarray(t_angle, dtype=np.float64)[indices]
    diff = np.abs((ta - p_angle[row] + 180.0) % 360.0 - 180.0)
    diff = np.where((ta < 0) | (p_angle[row] < 0), 0.0, diff)  # undefined angles do not decide
    with np.errstate(divide="ignore", invalid="ignore"):
        sdiff = np.abs(np.log(np.asarray(t_size, dtype=np.float64)[indices]) - np.log(p_size[row]))
    sdiff = np.where(np.isfinite(sdiff), sdiff, np.inf)
    order = np.lexsort((indices, sdiff, diff, row))  # by row, then angle, then size, then index
    rel = np.diff(indptr) > 0
    chosen = indices[order][indptr[:-1][rel]]  # sorting keeps each row's block in place
    return np.concatenate([[0], np.cumsum(rel)]).astype(np.int64), chosen.astype(np.int64)


def relevance(proj: np.ndarray, inside: np.ndarray, target_xy: np.ndarray, tau_px: float, gt: str, frames=None):
    """Ground truth: (nearest index, its pixel distance, CSR indptr, CSR indices of relevant items).

    ``frames`` (``gt: closest_oriented`` only): ``(projected angle [Q], projected size [Q], target
    angle [N], target size [N])`` (:func:`projected_frames`). For ``closest_oriented`` the returned
    nearest index is the chosen member.
    """
    nn_idx, nn_px = kernels.spatial_nearest(np.ascontiguousarray(proj), np.ascontiguousarray(target_xy))
    if gt == "closest":
        rel = inside & (nn_idx >= 0) & (nn_px <= tau_px)
        indptr = np.concatenate([[0], np.cumsum(rel)]).astype(np.int64)
        indices = nn_idx[rel].astype(np.int64)
    elif gt == "all_within_tau":
        indptr, indices = kernels.within_radius_csr(np.ascontiguousarray(proj), np.ascontiguousarray(target_xy), float(tau_px), inside)
    elif gt in ("closest_group", "closest_oriented"):
        rel = inside & (nn_idx >= 0) & (nn_px <= tau_px)
        indptr, indices = nearest_sets(proj, target_xy, nn_idx, rel, tau_px)
        if gt == "closest_oriented":
            if frames is None:
                raise ValueError("gt 'closest_oriented' needs the keypoints' angles and sizes (frames)")
            indptr, indices = _orient_choice(indptr, indices, frames)
            nn_idx = nn_idx.copy()
            nn_idx[np.diff(indptr) > 0] = indices
    else:
        raise ValueError(f"unknown ground truth mode {gt!r}")
    return nn_idx, nn_px, indptr, indices


FLT_EPSILON = float(np.finfo(np.float32).eps)


def workbench_positives(H: np.ndarray, q_xy: np.ndarray, t_xy: np.ndarray, tau_px: float = 3.0, eps: float = 1e-6):
    """The C++ DescriptorWorkbench's label +1 (CSR indptr, indices ascending) for one target image.

    Facts from F-Sossi/DescriptorWorkbench ``src/core/metrics/KeypointVerification.cpp``
    (``isCorrectMatch``, used by ``buildVerificationCandidates`` and ``buildRetrievalCandidates``):
    the query point (``cv::Point2f``, float32) is projected with ``cv::perspectiveTransform``
    (float32 in and out: OpenCV evaluates ``((x h00 + y h01) + h02) * (1/w)`` in double with
    ``w = (x h20 + y h21) + h22``, gives (0, 0) when ``|w| <= FLT_EPSILON``, and rounds to float);
    a non-finite projection labels nothing. The distance to a keypoint is ``cv::norm`` of the
    float32 difference, ``sqrt(double(dx)^2 + double(dy)^2)``. A target keypoint c is +1 iff
    ``d_c <= tau_px`` (the workbench hard-codes 3.0) and no keypoint of that image has
    ``d < d_c - 1e-6``: every keypoint within 1e-6 px of the minimum distance is +1, so all the
    same-position duplicates SIFT emits (one per orientation), not one of them; keypoints at other
    positions qualify only if equidistant to 1e-6 px. There is no inside-the-image test (a
    projection outside image k can only be +1 when a keypoint lies within tau of it, impossible
    with the 40 px border rule).
    Exact here: the same float32/double operations in numpy (assuming the C++ build does not
    contract ``a*b + c`` into FMA).
    """
    q32 = np.asarray(q_xy).reshape(-1, 2).astype(np.float32)
    t32 = np.asarray(t_xy).reshape(-1, 2).astype(np.float32)
    m = np.asarray(H, dtype=np.float64).reshape(9)
    x, y = q32[:, 0].astype(np.float64), q32[:, 1].astype(np.float64)
    w = x * m[6] + y * m[7] + m[8]
    ok = np.abs(w) > FLT_EPSILON
    winv = 1.0 / np.where(ok, w, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        px = np.where(ok, (x * m[0] + y * m[1] + m[2]) * winv, 0.0).astype(np.float32)
        py = np.where(ok, (x * m[3] + y * m[4] + m[5]) * winv, 0.0).astype(np.float32)
    active = np.isfinite(px) & np.isfinite(py)
    proj = np.ascontiguousarray(np.column_stack([px, py]).astype(np.float64))
    proj[~active] = 0.0
    # every keypoint with workbench distance <= tau lies within tau + 0.01 in float64 (float32
    # rounding of the coordinates moves a distance by far less than 0.01 px)
    indptr, indices = kernels.within_radius_csr(proj, np.ascontiguousarray(t32.astype(np.float64)), float(tau_px) + 0.01, active)
    row = np.repeat(np.arange(q32.shape[0], dtype=np.int64), np.diff(indptr))
    dx = (px[row] - t32[indices, 0]).astype(np.float64)  # float32 subtraction, as Point2f - Point2f
    dy = (py[row] - t32[indices, 1]).astype(np.float64)
    d = np.sqrt(dx * dx + dy * dy)
    rowmin = np.full(q32.shape[0], np.inf)
    np.minimum.at(rowmin, row, d)
    keep = (d <= tau_px) & ~(rowmin[row] < d - eps)
    cnt = np.bincount(row[keep], minlength=q32.shape[0])
    return np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64), indices[keep].astype(np.int64)


def pack_bits_to_words(desc: np.ndarray) -> np.ndarray:
    """uint8 packed bits [N, B] -> uint64 words [N, ceil(B/8)] (zero padding adds no distance)."""
    n, b = desc.shape
    w = -(-b // 8)
    buf = np.zeros((n, w * 8), dtype=np.uint8)
    buf[:, :b] = desc
    return buf.view(np.uint64)


class RankCounts:
    """:func:`rank_statistics` in steps, so a scene pass can feed it screen blocks it computed once
    for several consumers (:mod:`descbench.metrics.scenepass`).

    ``needs_screen``: float32 descriptors with relevant entries; then :meth:`consume` takes the
    screen ``[q_i, 1] . [c_j, -|c_j|^2/2]`` of query rows ``rows`` against ALL of ``cdesc``
    (columns in candidate order), whichever BLAS call made it: ``tol`` bounds the screen error
    of any summation order (:func:`screen_tolerance`), so the counts are exact for any such screen.
    Every query row with R >= 1 must be consumed exactly once; rows with R = 0 are skipped.
    Hamming descriptors are counted at construction (exact integers, no screen).
    """

    def __init__(self, qdesc, cdesc, indptr, indices):
        nnz = indices.shape[0]
        self.indptr, self.indices = indptr, indices
        self.less = np.zeros(nnz, dtype=np.int64)
        self.equal = np.zeros(nnz, dtype=np.int64)
        self.dexact = np.zeros(nnz, dtype=np.float64)
        self.needs_screen = False
        if nnz == 0:
            return
        if qdesc.dtype == np.uint8:
            kernels.rank_counts_hamming(pack_bits_to_words(qdesc), pack_bits_to_words(cdesc), indptr, indices,
                                        self.less, self.equal, self.dexact)
            return
        self.needs_screen = True
        self.qdesc, self.cdesc, self.qaug, self.caug, self.tol = prepare_l2_screen(qdesc, cdesc)

    def consume(self, screen, rows, col0: int = 0):
        """Count one screen block: ``screen[t, col0:col0 + N]`` is query ``rows[t]`` against every
        candidate (C-contiguous float32; wider when a scene's product covers more candidates)."""
        check_screen(screen, rows.shape[0], col0, self.cdesc.shape[0])
        kernels.rank_counts_l2(screen, col0, rows, self.qdesc, self.cdesc, self.tol, self.indptr, self.indices,
                               self.less, self.equal, self.dexact)

    def result(self):
        return self.less, self.equal, self.dexact


def check_screen(screen: np.ndarray, n_rows: int, col0: int, n: int) -> None:
    """A screen block handed to a consumer: C-contiguous float32 with ``n_rows`` rows and the
    consumer's ``n`` columns from ``col0`` (the kernels index it without bounds checks)."""
    if not (screen.dtype == np.float32 and screen.ndim == 2 and screen.flags.c_contiguous):
        raise ValueError(f"screen must be a C-contiguous float32 matrix, got {screen.dtype} with shape {screen.shape}")
    if screen.shape[0] != n_rows or not 0 <= col0 <= screen.shape[1] - n:
        raise ValueError(f"screen of shape {screen.shape} does not hold {n_rows} rows and columns {col0}..{col0 + n - 1}")


def rank_statistics(qdesc, cdesc, indptr, indices, chunk_mb: float = 64.0):
    """Exact (less, equal, dexact) for every relevant entry; float32 -> L2, uint8 -> Hamming.

    The float32 screen is computed by BLAS in blocks of query rows holding at most ``chunk_mb``
    MiB, and only for queries with R >= 1, so memory is bounded whatever N is.
    """
    rc = RankCounts(qdesc, cdesc, indptr, indices)
    if rc.needs_screen:
        for rows in query_blocks(indptr, rc.cdesc.shape[0], chunk_mb):
            rc.consume(rc.qaug[rows] @ rc.caug.T, rows)  # BLAS reads the transposed view, no copy
    return rc.result()


def prepare_l2_screen(qdesc: np.ndarray, cdesc: np.ndarray):
    """float32 descriptors, their augmented forms and per-query screen tolerances.

    ``[q, 1] . [c_j, -|c_j|^2/2] = q.c_j - |c_j|^2/2``: one BLAS product gives the screen value,
    so the kernel only compares floats.
    """
    qdesc, cdesc, qaug, caug, cnorm2 = augment_l2(qdesc, cdesc)
    return qdesc, cdesc, qaug, caug, screen_tolerance(qdesc, cnorm2)


def augment_l2(qdesc: np.ndarray, cdesc: np.ndarray):
    """``(q, c, [q, 1], [c, -|c|^2/2], |c|^2)``: float32 descriptors and their augmented forms,
    with ``|c|^2`` accumulated in float64 (the one definition every screen uses)."""
    qdesc = np.ascontiguousarray(qdesc, dtype=np.float32)
    cdesc = np.ascontiguousarray(cdesc, dtype=np.float32)
    c64 = cdesc.astype(np.float64)
    cnorm2 = np.einsum("ij,ij->i", c64, c64)
    caug = np.empty((cdesc.shape[0], cdesc.shape[1] + 1), dtype=np.float32)
    caug[:, :-1] = cdesc
    caug[:, -1] = -0.5 * cnorm2
    qaug = np.empty((qdesc.shape[0], qdesc.shape[1] + 1), dtype=np.float32)
    qaug[:, :-1] = qdesc
    qaug[:, -1] = 1.0
    return qdesc, cdesc, qaug, caug, cnorm2


def query_blocks(indptr: np.ndarray, n_candidates: int, chunk_mb: float):
    """Blocks of query rows with R >= 1 whose float32 screen holds at most ``chunk_mb`` MiB."""
    rows_all = np.flatnonzero(np.diff(indptr) > 0).astype(np.int64)
    block = max(1, int(chunk_mb * 2**20 // (4 * max(1, n_candidates))))
    for s in range(0, rows_all.shape[0], block):
        yield rows_all[s : s + block]


def screen_tolerance(qdesc: np.ndarray, cnorm2: np.ndarray) -> np.ndarray:
    """Per query, a rigorous bound on the difference of two float32 screen errors (safety x2).

    The screen value ``fl(sum_k q_k c_jk + 1 * fl32(-|c_j|^2/2))`` is a dot product of length D+1,
    so for any summation order (blocked, FMA, threaded) its error is at most
    ``gamma_{D+1} (|q| |c_j| + |c_j|^2/2)`` plus the float32 rounding of the stored ``|c_j|^2/2``
    (``u |c_j|^2/2``), with u = 2^-24 and gamma_m = m u / (1 - m u) (Higham, Accuracy and
    Stability of Numerical Algorithms, 3.1). Two candidates' errors add; we double the sum.
    """
    dim = qdesc.shape[1] + 1
    u = 2.0**-24
    gamma = dim * u / (1 - dim * u)
    cmax = float(np.sqrt(cnorm2.max())) if cnorm2.size else 0.0
    qn = np.sqrt(np.einsum("ij,ij->i", qdesc, qdesc, dtype=np.float64))  # no float64 copies
    one = gamma * (qn * cmax + 0.5 * cmax**2) + u * 0.5 * cmax**2
    return 4.0 * one + 1e-300


class PairScoring:
    """:func:`score_pair` in steps: ground truth at construction, the rank counts in ``ranks``
    (a :class:`RankCounts`, fed by :func:`score_pair` or by a scene pass), :meth:`finish`."""

    def __init__(self, q_xy, q_desc, t_xy, t_desc, H, target_size, params: RetrievalParams, q_frame=None, t_frame=None,
                 projected: tuple[np.ndarray, np.ndarray] | None = None):
        if q_desc.shape[1:] != t_desc.shape[1:] or q_desc.dtype != t_desc.dtype:
            raise DataError(
                f"descriptor mismatch: image 1 has {q_desc.dtype} x {q_desc.shape[1:]}, image k has "
                f"{t_desc.dtype} x {t_desc.shape[1:]}; every image of a scene must use one descriptor"
            )
        self.params = params
        if projected is None:
            width, height = target_size
            proj, self.inside = project(H, q_xy, width, height)
        else:  # the ground truth's projections given (score_projected): no H
            if params.gt == "closest_oriented":
                raise ValueError("gt 'closest_oriented' maps the query's frame through H; with given projections use "
                                 "closest, all_within_tau or closest_group")
            proj = np.asarray(projected[0], dtype=np.float64).reshape(-1, 2)
            self.inside = np.asarray(projected[1], dtype=bool).reshape(-1)
            if proj.shape[0] != len(q_desc) or self.inside.shape[0] != len(q_desc):
                raise ValueError(f"projected: one projection and one flag per query, got {proj.shape[0]} and "
                                 f"{self.inside.shape[0]} for {len(q_desc)} queries")
        frames = None
        if params.gt == "closest_oriented":
            frames = (*projected_frames(H, q_xy, *_need_frame(q_frame, "image 1")), *_need_frame(t_frame, "image k"))
        self.nn_idx, self.nn_px, self.indptr, indices = relevance(
            proj, self.inside, np.asarray(t_xy, dtype=np.float64).reshape(-1, 2), params.tau_px, params.gt, frames)
        self.ranks = RankCounts(q_desc, t_desc, self.indptr, indices)

    def finish(self) -> PairResult:
        less, equal, dexact = self.ranks.result()
        params = self.params
        if params.gt == "closest_group":  # one relevant group per query (R = 1)
            ap, hit, rec, n_closer, n_tied, rank = kernels.group_query_scores(
                self.indptr, dexact, less, equal, kernels.POLICY_CODES[params.tie_policy],
                np.array(HIT_KS, dtype=np.int64), np.array(RECALL_KS, dtype=np.int64),
            )
            n_rel = (np.diff(self.indptr) > 0).astype(np.int32)
            return PairResult(self.inside, n_rel, self.nn_idx, self.nn_px, n_closer, n_tied, ap, hit, rec, rank)
        ap, hit, rec, n_closer, n_tied = kernels.query_scores(
            self.indptr, dexact, less, equal, kernels.POLICY_CODES[params.tie_policy],
            np.array(HIT_KS, dtype=np.int64), np.array(RECALL_KS, dtype=np.int64),
        )
        return PairResult(self.inside, np.diff(self.indptr).astype(np.int32), self.nn_idx, self.nn_px, n_closer, n_tied, ap, hit, rec)


def _need_frame(frame, where):
    if frame is None:
        raise ValueError(f"gt 'closest_oriented' needs the angles and sizes of the keypoints of {where}")
    angle, size = frame
    return np.asarray(angle, dtype=np.float64), np.asarray(size, dtype=np.float64)


def score_pair(q_xy: ArrayLike, q_desc: np.ndarray, t_xy: ArrayLike, t_desc: np.ndarray, H: ArrayLike, target_size: tuple[int, int],
               params: RetrievalParams, q_frame: tuple | None = None, t_frame: tuple | None = None) -> PairResult:
    """Score every query of image 1 against image k (see the module docstring for definitions).

    ``q_frame`` / ``t_frame``: ``(angle, size)`` arrays of the keypoints (``gt: closest_oriented``).

    Three keypoints seen again at the same places (H = identity). The second query's relevant
    item (squared distance 121) has two candidates closer (100 and 1), the third query's one
    (121) has one (1):

    >>> xy = np.array([[10.0, 10.0], [30.0, 10.0], [10.0, 30.0]])
    >>> q = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]], dtype=np.float32)
    >>> t = np.array([[0.0, 0.0], [21.0, 0.0], [9.0, 0.0]], dtype=np.float32)
    >>> res = score_pair(xy, q, xy, t, np.eye(3), (64, 48), RetrievalParams(gt="closest"))
    >>> res.n_closer.tolist(), res.ap.round(4).tolist()
    ([0, 2, 1], [1.0, 0.3333, 0.5])
    """
    ps = PairScoring(q_xy, q_desc, t_xy, t_desc, H, target_size, params, q_frame, t_frame)
    return _ranked(ps)


def _ranked(ps: PairScoring) -> PairResult:
    """The rank counts of a :class:`PairScoring` in bounded query blocks, then its result."""
    rc = ps.ranks
    if rc.needs_screen:
        for rows in query_blocks(ps.indptr, rc.cdesc.shape[0], ps.params.chunk_mb):
            rc.consume(rc.qaug[rows] @ rc.caug.T, rows)
    return ps.finish()


def score_projected(proj: ArrayLike, inside: ArrayLike, q_desc: np.ndarray, t_xy: ArrayLike, t_desc: np.ndarray,
                    params: RetrievalParams) -> PairResult:
    """:func:`score_pair` with the ground truth's projections given instead of a homography:
    ``proj`` [Q, 2] where each query lands in the target image, ``inside`` [Q] whether it has a
    projection there (a query without one has R = 0, as a query projected outside). Any ``gt`` but
    ``closest_oriented`` (which maps frames through H). Used on posed pairs, where the projection
    comes from depth (:func:`descbench.metrics.depth.project`).

    The example of :func:`score_pair` with its identity projection given, the third query without one:

    >>> xy = np.array([[10.0, 10.0], [30.0, 10.0], [10.0, 30.0]])
    >>> q = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]], dtype=np.float32)
    >>> t = np.array([[0.0, 0.0], [21.0, 0.0], [9.0, 0.0]], dtype=np.float32)
    >>> res = score_projected(xy, [True, True, False], q, xy, t, RetrievalParams(gt="closest"))
    >>> res.n_relevant.tolist(), res.ap.round(4).tolist()[:2]
    ([1, 1, 0], [1.0, 0.3333])
    """
    ps = PairScoring(None, q_desc, t_xy, t_desc, None, None, params, projected=(proj, inside))
    return _ranked(ps)


def policy_rank(n_closer: np.ndarray, n_tied: np.ndarray, tie_policy: str) -> np.ndarray:
    """Rank of the first relevant item under the tie policy (NaN where R = 0, i.e. L = -1).

    optimistic L+1, pessimistic L+t+1, half L+1+ceil(t/2), expected L+1+t/2 (the mean rank over
    the tie's orderings; note AP uses the mean of 1/rank, not 1/mean rank).
    """
    L = n_closer.astype(np.float64)
    t = n_tied.astype(np.float64)
    rank = {
        "optimistic": L + 1, "pessimistic": L + t + 1, "half": L + 1 + np.ceil(t / 2), "expected": L + 1 + t / 2,
    }[tie_policy]
    return np.where(n_closer >= 0, rank, np.nan)


def pair_statistics(res: PairResult, n_target_keypoints: int) -> dict:
    """Sufficient statistics of one pair (schema ``PAIRS``): merging them gives exact aggregates."""
    r1 = res.n_relevant > 0
    out = {
        "n_query_keypoints": int(res.inside.shape[0]),
        "n_target_keypoints": int(n_target_keypoints),
        "n_queries": int(res.inside.shape[0]),
        "n_outside": int((~res.inside).sum()),
        "n_relevant_queries": int(r1.sum()),
        "n_relevant_items": int(res.n_relevant.sum()),
        "sum_ap": float(res.ap[r1].sum()) if r1.any() else 0.0,
    }
    for t, k in enumerate(HIT_KS):
        out[f"sum_hit_at_{k}"] = float(res.hit[r1, t].sum())
    for t, k in enumerate(RECALL_KS):
        out[f"sum_recall_at_{k}"] = float(res.recall[r1, t].sum())
    return out
