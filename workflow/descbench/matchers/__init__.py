"""Matchers: which keypoint of image a goes with which keypoint of image b, from their descriptors
(and, for some matchers, their positions and image sizes).

A matcher lives in one module under ``descbench/matchers/`` that defines ``PARAMS_SCHEMA``
(matcher name -> its closed params fragment, :func:`descbench.params.object_fragment`: the one
place its parameters and defaults are declared) and ``MATCHERS``, a tuple of :class:`Matcher`.
The module's name is listed in :data:`MATCHER_MODULES`; nothing else is edited to add one.

The workflow's matcher stage (``matchers:`` in the config: name -> ``{matcher, params}``) runs one
matcher on every pair of a scene and writes the matches once per (keypoint set, descriptor,
matcher); every match-based task reads them (:mod:`descbench.tasks`).

What a matcher returns is checked here (:func:`run_matcher`), whoever wrote it: indices in range,
one match per keypoint of image a at most, sorted by that index, a finite score each. The score is
what the matcher ranks by: a distance (``score_kind = "distance"``, smaller is better) or a
confidence (``"confidence"``, larger is better).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from descbench.errors import ConfigError, DataError
from descbench.jobfacts import RuntimeFacts
from descbench.keypoints import ImageKeypoints
from descbench.params import check_params, fragment_defaults

__all__ = ["MATCHER_MODULES", "MATCHES_SCHEMA", "SCORE_KINDS", "matches_table", "split_matches", "MatchSide", "Matches", "Matcher", "check_matcher_params",
           "get_matcher", "matcher_names", "run_matcher"]

SCORE_KINDS = ("distance", "confidence")


@dataclass(frozen=True)
class MatchSide:
    """One image of a pair as a matcher sees it.

    ``keypoints``: its keypoints (:class:`descbench.keypoints.ImageKeypoints`, N of them);
    ``descriptors``: ``[N, D]`` float32 (compared by L2) or uint8 packed bits (Hamming), row i
    describing keypoint i; ``image_size``: ``(width, height)`` in pixels.
    """

    keypoints: ImageKeypoints
    descriptors: np.ndarray
    image_size: tuple[int, int]

    def __len__(self) -> int:
        return len(self.keypoints)


@dataclass(frozen=True)
class Matches:
    """Matches of one pair: keypoint ``idx_a[m]`` of image a with ``idx_b[m]`` of image b.

    ``idx_a``, ``idx_b``: int64 ``[M]``, ``idx_a`` strictly increasing (a keypoint of a is matched
    at most once; one of b may be matched by several keypoints of a when the matcher is not
    mutual); ``score``: float64 ``[M]``, finite, the matcher's :attr:`Matcher.score_kind`.
    """

    idx_a: np.ndarray
    idx_b: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return int(self.idx_a.shape[0])

    @staticmethod
    def empty() -> "Matches":
        return Matches(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))


@dataclass(frozen=True)
class Matcher(RuntimeFacts):
    """A matcher: ``match(a, b, params) -> Matches`` on two :class:`MatchSide`, its params fragment
    and its facts (as a descriptor family's: ``runtime``, ``files``, ``weights_labels``,
    ``torch_params``; ``check(params, where)`` for config-time rules across keys or against files,
    raising :class:`~descbench.errors.ConfigError` naming ``where.<key>``;
    ``check_in_config(name, spec, descriptors, width)`` for config-time rules against the config's
    descriptors it applies to (``spec``: its ``matchers.<name>`` entry, params filled;
    ``width(descriptor)``: the width its family declares, :func:`descbench.jobresources.descriptor_width`), raising
    ConfigError naming ``matchers.<name>...``; ``provenance(params)``: what the matches file records
    under ``runtime`` about how it ran, e.g. the torch runtime)."""

    name: str
    match: Callable[[MatchSide, MatchSide, dict], Matches]
    params_schema: dict
    score_kind: str = "distance"
    runtime: str | Callable[[dict], str] = "numpy"
    files: Callable[[dict], list[str]] | None = None
    weights_labels: Callable[[dict], list[str]] | None = None
    torch_params: Callable[[dict], list[dict]] | None = None
    check: Callable[[dict, str], dict] | None = None
    check_in_config: Callable[[str, dict, dict, Callable[[str], int]], None] | None = None
    provenance: Callable[[dict], dict] | None = None

    def __post_init__(self):
        if self.score_kind not in SCORE_KINDS:
            raise ValueError(f"matcher {self.name!r}: score_kind {self.score_kind!r} is not one of {SCORE_KINDS}")

    @property
    def defaults(self) -> dict:
        return fragment_defaults(self.params_schema)


# The matcher modules (``descbench.matchers.<module>``), each with ``PARAMS_SCHEMA`` and ``MATCHERS``.
MATCHER_MODULES = ("nearest", "kornia_matching", "lightglue")


@functools.cache
def _registry() -> dict[str, Matcher]:
    reg: dict[str, Matcher] = {}
    for module in MATCHER_MODULES:
        for m in importlib.import_module(f"descbench.matchers.{module}").MATCHERS:
            if m.name in reg:
                raise RuntimeError(f"matcher '{m.name}' is defined twice (module {module})")
            reg[m.name] = m
    return reg


def matcher_names() -> list[str]:
    return sorted(_registry())


def get_matcher(name: str) -> Matcher:
    reg = _registry()
    if name not in reg:
        raise ConfigError(f"unknown matcher '{name}'; known: {', '.join(sorted(reg))}")
    return reg[name]


def check_matcher_params(matcher: str, params: dict | None, where: str) -> dict:
    """A matcher's params checked against its fragment and filled with its defaults; ``where`` is
    the config key of the params (``matchers.<name>.params``). An unknown matcher names the
    ``matcher`` key and the known ones."""
    reg = _registry()
    if matcher not in reg:
        key = where.removesuffix(".params") + ".matcher"
        raise ConfigError(f"invalid config value at '{key}': unknown matcher '{matcher}'; known: {', '.join(sorted(reg))}")
    m = reg[matcher]
    params = check_params(m.params_schema, params, where, f"matcher '{matcher}'")
    return m.check(params, where) if m.check else params


def run_matcher(matcher: str, params: dict, a: MatchSide, b: MatchSide, where: str) -> Matches:
    """Run ``matcher`` on one pair and check what it returned (see the module docstring); a
    :class:`DataError` names ``where`` (matcher, scene, pair)."""
    out = get_matcher(matcher).match(a, b, params)
    if not isinstance(out, Matches):
        raise DataError(f"{where}: matcher '{matcher}' returned {type(out).__name__}, not Matches")
    ia, ib, score = (np.asarray(v) for v in (out.idx_a, out.idx_b, out.score))
    m = ia.shape[0]
    problem = None
    if ia.ndim != 1 or ib.shape != (m,) or score.shape != (m,):
        problem = f"shapes idx_a {ia.shape}, idx_b {ib.shape}, score {score.shape} (each [M])"
    elif m and (ia.min() < 0 or ia.max() >= len(a) or ib.min() < 0 or ib.max() >= len(b)):
        problem = f"an index out of range (image a has {len(a)} keypoints, image b {len(b)})"
    elif m and not (np.diff(ia) > 0).all():
        problem = "idx_a not strictly increasing (one match per keypoint of image a, in its order)"
    elif m and not np.isfinite(score).all():
        problem = "a score that is NaN or inf"
    if problem:
        raise DataError(f"{where}: matcher '{matcher}' returned {problem}")
    return Matches(ia.astype(np.int64), ib.astype(np.int64), score.astype(np.float64))


# ----------------------------------------------------------------------------- the matches file

# One scene's matches of one matcher (the matcher stage's file, one per scene): one row per match,
# pairs in the scene's pair order, each pair's matches by idx_a. A pair without matches has no row
# (its keypoints file says whether it had keypoints).
MATCHES_SCHEMA = pa.schema([
    ("scene", pa.string()),
    ("query_image", pa.int16()),  # image a of the pair
    ("pair", pa.int16()),  # image b of the pair
    ("idx_a", pa.int32()),  # row of the keypoint in image a's keypoints (the scene's keypoint file, that image)
    ("idx_b", pa.int32()),
    ("score", pa.float64()),  # the matcher's score_kind (recorded in the file's provenance)
])


def matches_table(scene: str, per_pair: list[tuple[int, int, Matches]]) -> pa.Table:
    """The matches file's table from ``[(a, b, Matches)]`` in pair order."""
    n = [len(m) for _, _, m in per_pair]
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    cols = {
        "scene": pa.array([scene] * sum(n), pa.string()),
        "query_image": pa.array(np.repeat([a for a, _, _ in per_pair], n).astype(np.int16)),
        "pair": pa.array(np.repeat([b for _, b, _ in per_pair], n).astype(np.int16)),
        "idx_a": pa.array(cat([m.idx_a for _, _, m in per_pair], np.int32)),
        "idx_b": pa.array(cat([m.idx_b for _, _, m in per_pair], np.int32)),
        "score": pa.array(cat([m.score for _, _, m in per_pair], np.float64)),
    }
    return pa.table(cols, schema=MATCHES_SCHEMA)


def split_matches(table: pa.Table, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], Matches]:
    """``{(a, b): Matches}`` for every pair of ``pairs`` from a matches table (a pair without rows:
    no matches). Rows of a pair not in ``pairs`` are an error (the file belongs to other pairs)."""
    a = np.asarray(table.column("query_image")).astype(np.int64)
    b = np.asarray(table.column("pair")).astype(np.int64)
    ia = np.asarray(table.column("idx_a")).astype(np.int64)
    ib = np.asarray(table.column("idx_b")).astype(np.int64)
    sc = np.asarray(table.column("score")).astype(np.float64)
    out = {}
    seen = np.zeros(a.shape[0], bool)
    for p in pairs:
        sel = (a == p[0]) & (b == p[1])
        seen |= sel
        out[tuple(p)] = Matches(ia[sel], ib[sel], sc[sel])
    if not seen.all():
        k = int(np.flatnonzero(~seen)[0])
        raise DataError(f"matches of pair ({a[k]}, {b[k]}), which is not among the scene's pairs; rerun the matcher stage")
    return out
