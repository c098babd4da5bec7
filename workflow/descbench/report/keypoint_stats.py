"""Keypoint statistics per keypoint set (one row per set), written next to the comparison table.

Definitions (each computed over every evaluated image of every scene):

- counts per image: mean, min, max of the number of keypoints (an empty image counts as 0);
  ``n_empty_images`` of them have none;
- size (OpenCV diameter, px) over all keypoints: mean, min, p10, median, p90, max
  (``numpy.percentile``, linear interpolation);
- coverage of an image: the fraction of its ``COVERAGE_CELL_PX`` x ``COVERAGE_CELL_PX`` grid
  cells (cells start at (0, 0); partial cells at the right/bottom edge count) holding at least
  one keypoint; ``coverage_mean`` is the mean over images. The border rule empties the outer
  ``border_px`` band, so coverage below 1 is expected even for a dense detector;
- repeatability at ``repeatability_px`` (default 3) for the scene's pairs (a, b) (the dataset's,
  (1, k) for HPatches):
  :func:`descbench.metrics.matching.pair_repeatability` (SuperPoint / KP2D definition, the same
  as the matching metrics'); ``repeatability`` pools the counts of every pair
  (sum of repeated / sum of shared), ``repeatability_pair_mean`` is the mean of the pairs' own
  values (pairs with no shared keypoint, NaN, are left out and counted in
  ``repeatability_pairs_undefined``). A pair whose image a or image b has no keypoint has no
  data (the matching metrics' rule): it adds nothing to either and counts as undefined.

Each row also carries the set's provenance: its kind (detector / source / intersection), root
detector, mode, and the whole set spec as JSON (detector params, filters, sources).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from descbench.keypoints import ImageKeypoints

COVERAGE_CELL_PX = 16


def coverage(x: np.ndarray, y: np.ndarray, width: int, height: int, cell_px: int = COVERAGE_CELL_PX) -> float:
    """Fraction of the ``ceil(W / c) x ceil(H / c)`` grid cells holding at least one keypoint."""
    nx, ny = -(-int(width) // cell_px), -(-int(height) // cell_px)
    if len(x) == 0:
        return 0.0
    cx = np.clip(np.floor(np.asarray(x, np.float64) / cell_px).astype(np.int64), 0, nx - 1)
    cy = np.clip(np.floor(np.asarray(y, np.float64) / cell_px).astype(np.int64), 0, ny - 1)
    return float(np.unique(cy * nx + cx).size) / (nx * ny)


def set_statistics(scenes: list[tuple[str, dict[int, ImageKeypoints], dict, list]], repeatability_px: float) -> dict:
    """One set's statistics. ``scenes``: ``(scene, per_image, image_sizes {"k": [w, h]}, pairs)``,
    ``pairs`` a list of ``(a, b, H_ab)`` (H_ab: image a -> image b) in the scene's pair order."""
    from descbench.metrics.matching import pair_repeatability

    counts, sizes, cover = [], [], []
    shared = repeated = 0
    pair_values, undefined = [], 0
    for _, per_image, image_sizes, hom in scenes:
        for k, kps in per_image.items():
            w, h = image_sizes[str(k)]
            counts.append(len(kps))
            sizes.append(kps.size)
            cover.append(coverage(kps.x, kps.y, w, h))
        for a, k, H in hom:
            if len(per_image[a]) == 0 or len(per_image[k]) == 0:
                undefined += 1  # no data (the pairs-without-keypoints rule of the matching metrics)
                continue
            s1, sk, r1, rk = pair_repeatability(per_image[a].xy, per_image[k].xy, H, image_sizes[str(a)],
                                                image_sizes[str(k)], repeatability_px)
            shared += s1 + sk
            repeated += r1 + rk
            if s1 + sk:
                pair_values.append((r1 + rk) / (s1 + sk))
            else:
                undefined += 1
    size = np.concatenate(sizes).astype(np.float64) if sizes else np.zeros(0)
    counts = np.asarray(counts)
    pct = np.percentile(size, [10, 50, 90]) if size.size else [np.nan] * 3
    return {
        "n_scenes": len(scenes), "n_images": int(counts.size), "n_empty_images": int((counts == 0).sum()),
        "keypoints_total": int(counts.sum()), "keypoints_per_image_mean": float(counts.mean()) if counts.size else np.nan,
        "keypoints_per_image_min": int(counts.min()) if counts.size else 0,
        "keypoints_per_image_max": int(counts.max()) if counts.size else 0,
        "size_mean": float(size.mean()) if size.size else np.nan, "size_min": float(size.min()) if size.size else np.nan,
        "size_p10": float(pct[0]), "size_median": float(pct[1]), "size_p90": float(pct[2]),
        "size_max": float(size.max()) if size.size else np.nan,
        "coverage_mean": float(np.mean(cover)) if cover else np.nan, "coverage_cell_px": COVERAGE_CELL_PX,
        "repeatability": repeated / shared if shared else np.nan,
        "repeatability_pair_mean": float(np.mean(pair_values)) if pair_values else np.nan,
        "repeatability_pairs_undefined": undefined, "repeatability_px": float(repeatability_px),
    }


def provenance_columns(name: str, kpsets: dict) -> dict:
    from descbench.keypoints.sets import root_detector_spec

    spec = kpsets[name]
    kind = "detector" if "detector" in spec else "intersection" if "intersection" in spec else "source"
    root = root_detector_spec(kpsets, name)
    return {"keypoint_set": name, "kind": kind, "root_detector": root["detector"], "mode": root.get("mode", "independent"),
            "spec": json.dumps(spec, sort_keys=True)}


def to_markdown(table: pd.DataFrame) -> str:
    cols = ["keypoint_set", "kind", "root_detector", "mode", "keypoints_per_image_mean", "keypoints_per_image_min",
            "keypoints_per_image_max", "size_median", "size_p90", "coverage_mean", "repeatability"]
    t = table[cols]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in t.iterrows():
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines) + "\n"
