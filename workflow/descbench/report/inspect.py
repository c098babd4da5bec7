"""The inspector: one self-contained HTML page showing, per image pair of a finished run, what the
matching task saw (``descbench inspect``, :mod:`descbench.jobs.inspect`).

Per pair (a, b) of a scene (HPatches' reference pairs are (1, k), k = 2..6) and per descriptor:

- the two images side by side, each downscaled to at most :data:`MAX_PANEL_WIDTH` px wide, with
  every keypoint (orange dot) and the matches as lines, green when correct and red when not;
- the true homography's image of image a's border in image b (blue) and the estimated one's
  (magenta) when an estimate was found;
- the pair's row of the matching task's ``<scene>.pairs.parquet`` as a table.

The matches are recomputed here with the matching task's own definitions
(:mod:`descbench.metrics.matching`, read at the working tree of this change): mutual nearest
neighbours of the two descriptor sets (:func:`descbench.metrics.nn.mutual_nearest`), a match
(i, j) being correct iff its reprojection error ``|H p_a,i - p_b,j|`` in image-b pixels
(:func:`descbench.metrics.matching.reprojection_errors`, inf for a point mapped behind the camera)
is at most ``scoring.tau_px``. The estimated homography is not stored in the pairs file (it holds
the corner error only), so it is recomputed with the same function and settings
(:func:`descbench.metrics.matching.estimate_homography`, ``matching.ransac_px`` and
``matching.ransac_seed``). A recomputed match count, correct count or corner error that differs
from the stored row is shown as a warning on the pair (the files would then not be the run's).

Besides the pairs, the page has a scene index, a "where it fails" summary (the chosen metric per
pair against the target image's index b for the reference pairs (1, b), mean per descriptor over
the ``i_`` (illumination) and ``v_`` (viewpoint) scenes, an inline SVG) and, for two descriptors,
the pairs sorted by the absolute difference of the metric (:func:`diff_table`; glue-factory's
``diff_only`` idea of looking at the pairs where two methods differ most). Everything is embedded:
images as base64 JPEG, the plots as SVG; the page loads nothing else. The output depends only on
the inputs (no time stamp, fixed orders, OpenCV's deterministic JPEG encoder).
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field

import cv2
import numpy as np
import pandas as pd

from descbench.metrics.matching import MatchingParams, corner_error, estimate_homography, image_corners, reprojection_errors
from descbench.metrics.nn import mutual_nearest
from descbench.metrics.retrieval import project

#: The widest an image is drawn (px); a wider image is downscaled (cv2.INTER_AREA), never enlarged.
MAX_PANEL_WIDTH = 640
#: Pixels of white between the two images of a pair.
PANEL_GAP = 8
JPEG_QUALITY = 85

# BGR colours of the drawing (OpenCV order); the page's legend names them.
KEYPOINT_BGR = (0, 165, 255)  # orange
CORRECT_BGR = (0, 190, 0)  # green
WRONG_BGR = (0, 0, 230)  # red
TRUE_BORDER_BGR = (230, 90, 0)  # blue
ESTIMATED_BORDER_BGR = (200, 0, 200)  # magenta

# Line colours of the summary plot, one per descriptor in the page's order (matplotlib's tab10).
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")

# Key columns of a pairs file (``query_image`` only when the run evaluated pairs other than (1, k)).
KEY_COLUMNS = ("scene", "query_image", "pair")


# ----------------------------------------------------------------------------- per-pair data


@dataclass(frozen=True)
class PairMatches:
    """The mutual-NN matches of one pair: image-a keypoint ``ia[m]`` with image-b keypoint
    ``ib[m]`` (int64 [M], sorted by ia), their reprojection errors ``error`` (float64 [M], image-b
    px, inf behind the camera) and ``correct = error <= tau_px`` (bool [M])."""

    ia: np.ndarray
    ib: np.ndarray
    error: np.ndarray
    correct: np.ndarray


def pair_matches(xy_a: np.ndarray, desc_a: np.ndarray, xy_b: np.ndarray, desc_b: np.ndarray, H: np.ndarray, tau_px: float,
                 chunk_mb: float = 64.0) -> PairMatches:
    """The matching task's matches of one pair and their correctness (module docstring).

    ``xy_a`` [Na, 2], ``xy_b`` [Nb, 2]: keypoints (x, y) in pixels; ``desc_a`` [Na, D], ``desc_b``
    [Nb, D]: descriptors of one dtype; ``H`` 3x3 maps image a to image b."""
    xy_a = np.asarray(xy_a, np.float64).reshape(-1, 2)
    xy_b = np.asarray(xy_b, np.float64).reshape(-1, 2)
    if len(xy_a) == 0 or len(xy_b) == 0:  # no keypoint on one side: no match (mutual_nearest needs rows)
        empty = np.zeros(0, np.int64)
        return PairMatches(empty, empty, np.zeros(0), np.zeros(0, bool))
    ia, ib, _ = mutual_nearest(desc_a, desc_b, chunk_mb=chunk_mb)
    error = reprojection_errors(np.asarray(H, np.float64), xy_a[ia], xy_b[ib])
    return PairMatches(ia, ib, error, error <= float(tau_px))


@dataclass
class PairView:
    """What the page shows of one pair (a, b) of a scene for one descriptor: keypoints, matches,
    true and estimated homography (None: no estimate found), the stored metrics row and the
    warnings of the recomputation (empty when it agrees with the row)."""

    scene: str
    a: int
    b: int
    descriptor: str
    xy_a: np.ndarray
    xy_b: np.ndarray
    size_a: tuple[int, int]
    size_b: tuple[int, int]
    matches: PairMatches
    H_true: np.ndarray
    H_est: np.ndarray | None
    metrics: dict
    warnings: list[str] = field(default_factory=list)


def _same(x, y) -> bool:
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)


def inspect_pair(scene: str, a: int, b: int, descriptor: str, xy_a, desc_a, xy_b, desc_b, H, size_a, size_b,
                 metrics: dict, params: MatchingParams) -> PairView:
    """The :class:`PairView` of one pair: its matches (:func:`pair_matches` at ``params.tau_px``),
    the estimated homography (:func:`descbench.metrics.matching.estimate_homography` on the
    matches), and a warning for each of ``n_matches``, ``n_correct`` and ``corner_error`` of the
    stored ``metrics`` row that the recomputation does not reproduce. ``size_a``, ``size_b``:
    (width, height)."""
    xy_a = np.asarray(xy_a, np.float64).reshape(-1, 2)
    xy_b = np.asarray(xy_b, np.float64).reshape(-1, 2)
    H = np.asarray(H, np.float64)
    m = pair_matches(xy_a, desc_a, xy_b, desc_b, H, params.tau_px, params.chunk_mb)
    H_est, _ = estimate_homography(xy_a[m.ia], xy_b[m.ib], params.ransac_px, params.ransac_seed)
    recomputed = {"n_matches": len(m.ia), "n_correct": int(m.correct.sum())}
    if len(xy_a) and len(xy_b):  # without keypoints the stored corner error is NaN (no data)
        recomputed["corner_error"] = corner_error(H_est, H, tuple(size_a))
    warnings = [f"recomputed {k} = {v:g} but the pairs file has {float(metrics[k]):g}"
                for k, v in recomputed.items() if k in metrics and not _same(v, metrics[k])]
    return PairView(scene, int(a), int(b), descriptor, xy_a, xy_b, tuple(size_a), tuple(size_b), m, H, H_est, dict(metrics), warnings)


# ----------------------------------------------------------------------------- drawing


def _bgr(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR) if img.ndim == 2 else img[:, :, :3]


def panel_scale(width: int, max_width: int = MAX_PANEL_WIDTH) -> float:
    """The factor an image of ``width`` px is drawn at: ``min(1, max_width / width)``."""
    return min(1.0, max_width / float(width))


def _polygon(H: np.ndarray, size_a, scale: float, dx: int) -> np.ndarray | None:
    """Image a's border (its four outer pixel edges) mapped by H into the drawn image b, int32
    [4, 1, 2]; None when a corner maps behind the camera."""
    p, _ = project(np.asarray(H, np.float64), image_corners(size_a, "image_edges"), 1, 1)
    if not np.isfinite(p).all():
        return None
    p = p * scale + [dx, 0]
    return np.round(np.clip(p, -1e5, 1e5)).astype(np.int32).reshape(-1, 1, 2)


def draw_pair(img_a: np.ndarray, img_b: np.ndarray, view: PairView, max_width: int = MAX_PANEL_WIDTH) -> np.ndarray:
    """Image a (left) and image b (right), each scaled by :func:`panel_scale`, on a white canvas
    [H, W, 3] uint8 BGR: keypoints as dots, the wrong matches (red) under the correct ones
    (green), then the true (blue) and estimated (magenta) images of image a's border in image b."""
    sa, sb = panel_scale(img_a.shape[1], max_width), panel_scale(img_b.shape[1], max_width)
    pa = cv2.resize(_bgr(img_a), None, fx=sa, fy=sa, interpolation=cv2.INTER_AREA) if sa < 1 else _bgr(img_a).copy()
    pb = cv2.resize(_bgr(img_b), None, fx=sb, fy=sb, interpolation=cv2.INTER_AREA) if sb < 1 else _bgr(img_b).copy()
    dx = pa.shape[1] + PANEL_GAP
    canvas = np.full((max(pa.shape[0], pb.shape[0]), dx + pb.shape[1], 3), 255, np.uint8)
    canvas[: pa.shape[0], : pa.shape[1]] = pa
    canvas[: pb.shape[0], dx:] = pb
    qa = np.round(view.xy_a * sa).astype(np.int32)
    qb = np.round(view.xy_b * sb).astype(np.int32) + [dx, 0]
    for x, y in np.concatenate([qa, qb]):
        cv2.circle(canvas, (int(x), int(y)), 2, KEYPOINT_BGR, -1, cv2.LINE_AA)
    m = view.matches
    for wanted, colour in ((False, WRONG_BGR), (True, CORRECT_BGR)):
        for i, j in zip(m.ia[m.correct == wanted], m.ib[m.correct == wanted]):
            cv2.line(canvas, (int(qa[i, 0]), int(qa[i, 1])), (int(qb[j, 0]), int(qb[j, 1])), colour, 1, cv2.LINE_AA)
    # the true border wider, so that a good estimate drawn over it leaves it visible on both sides
    for H, colour, width in ((view.H_true, TRUE_BORDER_BGR, 5), (view.H_est, ESTIMATED_BORDER_BGR, 1)):
        poly = _polygon(H, view.size_a, sb, dx) if H is not None else None
        if poly is not None:
            cv2.polylines(canvas, [poly], True, colour, width, cv2.LINE_AA)
    return canvas


def jpeg_data_uri(img: np.ndarray, quality: int = JPEG_QUALITY) -> str:
    """``data:image/jpeg;base64,...`` of a BGR uint8 image."""
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError("OpenCV could not encode the pair's drawing as JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


# ----------------------------------------------------------------------------- tables over pairs


def pair_keys(table: pd.DataFrame) -> pd.DataFrame:
    """A pairs table with columns ``a`` (query image: ``query_image``, 1 when the file has none) and
    ``b`` (``pair``) added. Tables of several scenes may mix both kinds of file (a scene with its
    own ``pairs.txt`` beside one with the reference pairs): a row without a query image is 1."""
    out = table.copy()
    out["a"] = out["query_image"].fillna(1).astype(int) if "query_image" in out else 1
    out["b"] = out["pair"].astype(int)
    return out


#: Decimals the absolute differences of :func:`diff_table` are compared at (float noise is no order).
DIFF_DECIMALS = 9


def diff_table(first: pd.DataFrame, second: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The pairs present in both pairs tables, sorted by ``|second - first|`` of ``metric``,
    largest first; ties by scene, a, b ascending (differences are compared rounded to
    :data:`DIFF_DECIMALS` decimals, so that 0.9 - 0.6 and 0.7 - 0.4 tie); pairs whose difference
    is undefined (NaN, or inf - inf) last, in the same key order.

    Columns: ``scene, a, b, first, second, difference`` (= second - first)."""
    cols = ["scene", "a", "b"]
    x = pair_keys(first)[cols + [metric]].rename(columns={metric: "first"})
    y = pair_keys(second)[cols + [metric]].rename(columns={metric: "second"})
    t = x.merge(y, on=cols, how="inner")
    with np.errstate(invalid="ignore"):
        t["difference"] = t["second"].astype(float) - t["first"].astype(float)
    size = t["difference"].abs()
    t["_undefined"] = size.isna()
    t["_size"] = size.fillna(0.0).round(DIFF_DECIMALS)
    t = t.sort_values(["_undefined", "_size", "scene", "a", "b"], ascending=[True, False, True, True, True], kind="mergesort")
    return t.drop(columns=["_undefined", "_size"]).reset_index(drop=True)


#: Pairs-file metrics for which a smaller value is better (for every other metric a larger one is).
LOWER_IS_BETTER = frozenset({"corner_error"})


def worst_pairs(table: pd.DataFrame, metric: str, n: int) -> pd.DataFrame:
    """The ``n`` pairs of one descriptor's pairs table where ``metric`` is worst: undefined values
    first (NaN: nothing was measured, e.g. a pair without a match), then the lowest values (the
    highest, inf first, for a metric in :data:`LOWER_IS_BETTER`); ties by scene, a, b ascending.

    Columns: ``scene, a, b, value``.

    >>> t = pd.DataFrame({"scene": ["s", "s", "s", "t"], "pair": [2, 3, 4, 2], "mma_at_3": [0.9, float("nan"), 0.2, 0.2]})
    >>> worst_pairs(t, "mma_at_3", 3)[["scene", "b"]].values.tolist()
    [['s', 3], ['s', 4], ['t', 2]]
    """
    t = pair_keys(table)[["scene", "a", "b", metric]].rename(columns={metric: "value"})
    v = t["value"].astype(float)
    t["_undefined"] = v.isna()
    t["_key"] = (-v if metric in LOWER_IS_BETTER else v).fillna(0.0)
    t = t.sort_values(["_undefined", "_key", "scene", "a", "b"], ascending=[False, True, True, True, True], kind="mergesort")
    return t.drop(columns=["_undefined", "_key"]).head(n).reset_index(drop=True)


def select_pairs(tables: dict[str, pd.DataFrame], metric: str, max_pairs: int | None) -> tuple[list[tuple[str, int, int]] | None, str]:
    """The pairs a page draws, as ``(scene, a, b)`` in page order, and the sentence saying which.

    ``max_pairs`` None: every pair (``None`` is returned: the caller keeps its own order). Else
    at most ``max_pairs`` pairs: with one descriptor the worst (:func:`worst_pairs`), with two
    those where they differ most (:func:`diff_table`)."""
    if max_pairs is None:
        return None, "every pair"
    if max_pairs < 1:
        raise ValueError(f"max_pairs={max_pairs}: draw at least one pair (or None: every pair)")
    descriptors = list(tables)
    if len(descriptors) == 2:
        picked = diff_table(tables[descriptors[0]], tables[descriptors[1]], metric).head(max_pairs)
        why = f"where {descriptors[1]} and {descriptors[0]} differ most in {metric}"
    else:
        picked = worst_pairs(tables[descriptors[0]], metric, max_pairs)
        why = f"where {descriptors[0]} has the worst {metric} (no value first)"
    total = len(pair_keys(tables[descriptors[0]]))
    keys = [(str(r.scene), int(r.a), int(r.b)) for r in picked.itertuples()]
    return keys, f"the {len(keys)} of {total} pairs {why}"


def scene_group(scene: str) -> str:
    """HPatches' kind of a scene from its name: ``illumination`` (``i_``), ``viewpoint`` (``v_``), else ``other``."""
    return {"i_": "illumination", "v_": "viewpoint"}.get(scene[:2], "other")


def failure_summary(tables: dict[str, pd.DataFrame], metric: str) -> pd.DataFrame:
    """Mean of ``metric`` per (descriptor, scene group, b) over the reference pairs (1, b) with a
    finite value; columns ``descriptor, group, b, mean, n`` (n: pairs averaged), descriptors in
    the given order, then group and b ascending."""
    rows = []
    for d, table in tables.items():
        t = pair_keys(table)
        t = t[(t["a"] == 1)]
        v = t[metric].astype(float)
        t = t[np.isfinite(v)].assign(value=v[np.isfinite(v)], group=lambda s: s["scene"].map(scene_group))
        for (g, b), part in t.groupby(["group", "b"], sort=True):
            rows.append({"descriptor": d, "group": g, "b": int(b), "mean": float(part["value"].mean()), "n": len(part)})
    return pd.DataFrame(rows, columns=["descriptor", "group", "b", "mean", "n"])


def _num(v: float) -> str:
    return f"{v:.4g}"


def failure_svg(summary: pd.DataFrame, metric: str, descriptors: list[str], width: int = 300, height: int = 200) -> str:
    """One small inline SVG line plot per scene group of :func:`failure_summary`: the mean metric
    against b, one polyline (with dots) per descriptor. y runs over [0, 1] when every mean lies
    there, else over the means' range."""
    if summary.empty:
        return "<p>No reference pair (1, b) has a finite value of this metric.</p>"
    lo, hi = float(summary["mean"].min()), float(summary["mean"].max())
    lo, hi = (0.0, 1.0) if lo >= 0 and hi <= 1 else (lo, hi if hi > lo else lo + 1)
    bs = sorted(summary["b"].unique())
    left, right, top, bottom = 44, 10, 22, 30
    pw, ph = width - left - right, height - top - bottom

    def x(b):
        return left + (pw * (bs.index(b) / (len(bs) - 1)) if len(bs) > 1 else pw / 2)

    def y(v):
        return top + ph * (1 - (v - lo) / (hi - lo))

    out = []
    for g in sorted(summary["group"].unique()):
        part = summary[summary["group"] == g]
        s = [f'<svg class="failure-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{html.escape(metric)} against b, {g} scenes</title>',
             f'<text x="{left}" y="14" font-size="12">{g} scenes</text>',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
        for v in (lo, (lo + hi) / 2, hi):
            s.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{_num(v)}</text>')
        for b in bs:
            s.append(f'<text x="{x(b):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{b}</text>')
        s.append(f'<text x="{left + pw / 2:.1f}" y="{height - 2}" font-size="10" text-anchor="middle">image b of pair (1, b)</text>')
        for i, d in enumerate(descriptors):
            pts = part[part["descriptor"] == d].sort_values("b")
            if pts.empty:
                continue
            colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
            xy = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in zip(pts["b"], pts["mean"]))
            s.append(f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="2"/>')
            s += [f'<circle cx="{x(b):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"><title>{html.escape(d)}: b={b}, '
                  f'mean {_num(v)} over {n} scenes</title></circle>' for b, v, n in zip(pts["b"], pts["mean"], pts["n"])]
        s.append("</svg>")
        out.append("".join(s))
    legend = " ".join(f'<span style="color:{SERIES_COLOURS[i % len(SERIES_COLOURS)]}">&#9632; {html.escape(d)}</span>'
                      for i, d in enumerate(descriptors))
    return f'<div class="legend">{legend}</div>' + "".join(out)


# ----------------------------------------------------------------------------- the page


def pair_anchor(scene: str, a: int, b: int) -> str:
    """The HTML id of a pair's section: ``pair-<scene>-<a>-<b>``."""
    return f"pair-{scene}-{a}-{b}"


def format_value(v) -> str:
    """A metric for the table: integers as such, other numbers to 4 significant digits, NaN as
    ``no data``, inf as ``inf`` (a failed homography's corner error)."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "no data"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{float(v):.4g}"
    return html.escape(str(v))


def shown_metrics(columns) -> list[str]:
    """The pairs-file columns a pair's table shows: all but the keys and the ``mma_correct_at_*``
    counts (their fractions ``mma_at_*`` are shown)."""
    return [c for c in columns if c not in KEY_COLUMNS and not c.startswith("mma_correct_at_")]


@dataclass
class PairSection:
    """One pair's part of the page: per descriptor its drawing (a data URI) and :class:`PairView`."""

    scene: str
    a: int
    b: int
    drawings: dict[str, tuple[str, PairView]]


def pair_section(img_a: np.ndarray, img_b: np.ndarray, views: dict[str, PairView], max_width: int = MAX_PANEL_WIDTH) -> PairSection:
    """Draw and encode one pair's views (one per descriptor, same scene and pair)."""
    first = next(iter(views.values()))
    return PairSection(first.scene, first.a, first.b,
                       {d: (jpeg_data_uri(draw_pair(img_a, img_b, v, max_width)), v) for d, v in views.items()})


STYLE = """
body { font-family: sans-serif; margin: 1em 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f0f0f0; }
td.name, th.name { text-align: left; }
.pair { border-top: 2px solid #888; margin-top: 1.5em; padding-top: 0.5em; }
.drawing { display: inline-block; vertical-align: top; margin-right: 1em; }
.drawing img { display: block; max-width: 100%; }
.warning { color: #b00; font-weight: bold; }
.legend span { margin-right: 1em; }
svg.failure-plot { margin-right: 1em; background: #fff; }
"""


def _metrics_table(section: PairSection) -> str:
    ds = list(section.drawings)
    cols = shown_metrics(next(iter(section.drawings.values()))[1].metrics)
    head = "".join(f"<th>{html.escape(d)}</th>" for d in ds)
    body = "".join(f'<tr><td class="name">{html.escape(c)}</td>'
                   + "".join(f"<td>{format_value(section.drawings[d][1].metrics.get(c, float('nan')))}</td>" for d in ds)
                   + "</tr>" for c in cols)
    return f'<table class="metrics"><tr><th class="name">metric</th>{head}</tr>{body}</table>'


def render_page(run: dict, sections: list[PairSection], tables: dict[str, pd.DataFrame], metric: str) -> str:
    """The whole page (a string of HTML). ``run``: what the header states (``results``,
    ``keypoint_set``, ``tau_px``, ``ransac_px``); ``sections``: the pairs in page order;
    ``tables``: each descriptor's pairs rows (all inspected scenes, the pairs files' columns), in
    page order; with two descriptors the diff table (:func:`diff_table`) of ``metric`` is added
    (a pair links to its drawing when it has one). ``run["selection"]`` (optional) says which
    pairs are drawn (:func:`select_pairs`)."""
    descriptors = list(tables)
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>descbench inspect: {e(run['keypoint_set'])} / {e(' vs '.join(descriptors))}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>Where {e(' vs '.join(descriptors))} fails</h1>",
           f"<p>Run <code>{e(str(run['results']))}</code>, keypoint set <b>{e(run['keypoint_set'])}</b>. "
           f"Matches: mutual nearest neighbours of the descriptors; <span style='color:#00be00'>green</span>: correct "
           f"(reprojection error under the true homography &le; {run['tau_px']:g} px, scoring.tau_px), "
           f"<span style='color:#e60000'>red</span>: not. Orange dots: keypoints. Borders in the right image: "
           f"<span style='color:#005ae6'>blue</span> the true homography's image of the left image's border, "
           f"<span style='color:#c800c8'>magenta</span> the estimated one's (RANSAC, {run['ransac_px']:g} px; recomputed, "
           f"the pairs file stores only its corner error). Images are drawn at most {MAX_PANEL_WIDTH} px wide.</p>",
           '<h2 id="where-it-fails">Where it fails</h2>',
           f"<p>Mean <b>{e(metric)}</b> over the scenes per image b of the reference pairs (1, b); in HPatches the change "
           "(illumination or viewpoint) grows with b.</p>",
           failure_svg(failure_summary(tables, metric), metric, descriptors)]
    if len(descriptors) == 2:
        d1, d2 = descriptors
        diff = diff_table(tables[d1], tables[d2], metric)
        drawn = {(s.scene, s.a, s.b) for s in sections}

        def name(r) -> str:
            label = f"{e(r.scene)} ({r.a}, {r.b})"
            return f'<a href="#{pair_anchor(r.scene, r.a, r.b)}">{label}</a>' if (r.scene, r.a, r.b) in drawn else label

        rows = "".join(f'<tr><td class="name">{name(r)}</td>'
                       f"<td>{format_value(r.first)}</td><td>{format_value(r.second)}</td><td>{format_value(r.difference)}</td></tr>"
                       for r in diff.itertuples())
        out += ['<h2 id="differences">Pairs by difference</h2>',
                f"<p>{e(metric)} of {e(d2)} minus that of {e(d1)}, largest absolute difference first.</p>",
                f'<table id="diff-table"><tr><th class="name">pair</th><th>{e(d1)}</th><th>{e(d2)}</th><th>difference</th></tr>{rows}</table>']
    out.append(f'<h2 id="scenes">Scenes</h2><p id="selection">Pairs drawn: {e(run.get("selection", "every pair"))}.</p>'
               '<ul id="scene-index">')
    for scene in dict.fromkeys(s.scene for s in sections):
        links = " ".join(f'<a href="#{pair_anchor(s.scene, s.a, s.b)}">({s.a}, {s.b})</a>' for s in sections if s.scene == scene)
        out.append(f"<li><b>{e(scene)}</b> ({scene_group(scene)}): {links}</li>")
    out.append("</ul>")
    for s in sections:
        out.append(f'<div class="pair" id="{pair_anchor(s.scene, s.a, s.b)}"><h3>{e(s.scene)}: pair ({s.a}, {s.b})</h3>')
        for d, (uri, v) in s.drawings.items():
            note = "" if v.H_est is not None else " No homography estimated (fewer than 4 matches or RANSAC found none)."
            warn = "".join(f'<p class="warning">{e(w)}</p>' for w in v.warnings)
            out.append(f'<div class="drawing"><p><b>{e(d)}</b>: {int(v.matches.correct.sum())} correct of {len(v.matches.ia)} '
                       f'matches.{note}</p>{warn}<img src="{uri}" alt="{e(s.scene)} pair ({s.a}, {s.b}), {e(d)}"></div>')
        out.append(_metrics_table(s) + "</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
