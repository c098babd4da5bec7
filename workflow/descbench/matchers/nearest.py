"""Nearest-neighbour matchers on descriptor distances: ``mnn``, ``nn`` (with an optional Lowe ratio
test), ``snn`` and ``smnn``, with kornia's semantics (``kornia.feature.match_mnn``, ``match_nn``,
``match_snn``, ``match_smnn``, kornia 0.9).

Distances are descbench's exact ones (:mod:`descbench.metrics.nn`): L2 accumulated in float64 for
float32 descriptors, Hamming for packed bits; ties go to the lowest index. kornia computes
``torch.cdist`` in float32, so on float descriptors the two agree on every match except where two
candidates' distances are within float32 rounding of each other (then descbench's answer is the
float64 brute force's). Where kornia's rules are followed:

- ``mnn``: a and b are each other's nearest neighbour; score = their distance. This is the
  matching task's matcher (:func:`descbench.metrics.nn.mutual_nearest`), so the matches are the
  ones MMA and the homography of the matching task are computed from.
- ``nn``: every keypoint of a with its nearest neighbour in b; score = the distance. With
  ``ratio`` set, only those whose nearest distance d1 and second-nearest d2 satisfy
  ``d1 / d2 <= ratio`` (Lowe's test; kornia's ``ratio <= th``: a ratio equal to the threshold
  passes); image b then needs two keypoints, and ``d2 = 0`` (so ``d1 = 0``: 0/0) fails the test, as
  kornia's NaN ratio does.
- ``snn``: the ratio test as ``nn`` with ``ratio`` (default 0.8, kornia's), but the score is the
  ratio ``d1 / d2`` (kornia's ``match_snn``).
- ``smnn``: mutual nearest neighbours that pass the ratio test in both directions (default 0.95,
  kornia's); score = the larger of the two ratios. Both images need two keypoints.

Fewer keypoints than a rule needs gives no matches, not an error (as kornia).
"""

from __future__ import annotations

import numpy as np

from descbench.matchers import Matcher, Matches, MatchSide
from descbench.params import object_fragment

_RATIO = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}

PARAMS_SCHEMA = {
    "mnn": object_fragment(chunk_mb={"type": "number", "minimum": 1, "default": 64}),
    "nn": object_fragment(ratio={**_RATIO, "type": ["number", "null"], "default": None},
                          chunk_mb={"type": "number", "minimum": 1, "default": 64}),
    "snn": object_fragment(ratio={**_RATIO, "default": 0.8}, chunk_mb={"type": "number", "minimum": 1, "default": 64}),
    "smnn": object_fragment(ratio={**_RATIO, "default": 0.95}, chunk_mb={"type": "number", "minimum": 1, "default": 64}),
}


def _both_sides(a: MatchSide, b: MatchSide, need: int) -> bool:
    return len(a) >= 1 and len(b) >= need


def _ratios(dist1: np.ndarray, dist2: np.ndarray) -> np.ndarray:
    """``d1 / d2`` in float64; NaN where ``d2 = 0`` (then ``d1 = 0``: 0/0), which fails every test.
    Callers guarantee a second neighbour (image b has two keypoints)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return dist1 / dist2


def match_mnn(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """Mutual nearest neighbours; score = distance."""
    if not _both_sides(a, b, 1):
        return Matches.empty()
    from descbench.metrics.nn import mutual_nearest  # numba: imported by the job, not by config validation

    ia, ib, dist = mutual_nearest(a.descriptors, b.descriptors, params["chunk_mb"])
    return Matches(ia, ib, dist)


def _ratio_test(a: MatchSide, b: MatchSide, ratio: float, chunk_mb: float):
    """``(ia, ib, d1, r)`` of the keypoints of a passing ``d1 / d2 <= ratio``."""
    from descbench.metrics.nn import nearest_two

    i1, d1, _, d2 = nearest_two(a.descriptors, b.descriptors, chunk_mb)
    r = _ratios(d1, d2)
    with np.errstate(invalid="ignore"):
        keep = np.flatnonzero(r <= ratio)
    return keep.astype(np.int64), i1[keep], d1[keep], r[keep]


def match_nn(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """Nearest neighbour of every keypoint of a, optionally filtered by the ratio test; score = distance."""
    if params["ratio"] is None:
        if not _both_sides(a, b, 1):
            return Matches.empty()
        from descbench.metrics.nn import nearest_two

        i1, d1, _, _ = nearest_two(a.descriptors, b.descriptors, params["chunk_mb"])
        return Matches(np.arange(len(a), dtype=np.int64), i1, d1)
    if not _both_sides(a, b, 2):
        return Matches.empty()
    ia, ib, d1, _ = _ratio_test(a, b, params["ratio"], params["chunk_mb"])
    return Matches(ia, ib, d1)


def match_snn(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """The ratio test; score = the ratio ``d1 / d2``."""
    if not _both_sides(a, b, 2):
        return Matches.empty()
    ia, ib, _, r = _ratio_test(a, b, params["ratio"], params["chunk_mb"])
    return Matches(ia, ib, r)


def match_smnn(a: MatchSide, b: MatchSide, params: dict) -> Matches:
    """Mutual nearest neighbours passing the ratio test both ways; score = the larger ratio."""
    if len(a) < 2 or len(b) < 2:
        return Matches.empty()
    ia, ib, _, rab = _ratio_test(a, b, params["ratio"], params["chunk_mb"])
    jb, ja, _, rba = _ratio_test(b, a, params["ratio"], params["chunk_mb"])
    back = np.full(len(b), -1, np.int64)
    back[jb] = np.arange(jb.shape[0])
    pos = back[ib]
    mutual = np.flatnonzero((pos >= 0) & (ja[np.where(pos >= 0, pos, 0)] == ia))
    return Matches(ia[mutual], ib[mutual], np.maximum(rab[mutual], rba[pos[mutual]]))


MATCHERS = (
    Matcher("mnn", match_mnn, PARAMS_SCHEMA["mnn"]),
    Matcher("nn", match_nn, PARAMS_SCHEMA["nn"]),
    Matcher("snn", match_snn, PARAMS_SCHEMA["snn"]),
    Matcher("smnn", match_smnn, PARAMS_SCHEMA["smnn"]),
)
