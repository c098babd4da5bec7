"""Side files: descriptor rows a keypoint job computed with its keypoints, next to the scene's
keypoint file (``<scene>.<kind>``), so that the descriptor job of the same rows reads them
instead of computing them again.

Two kinds: a joint network's own rows (``joint.npz``, :mod:`descbench.keypoints.joint`) and
OpenCV SIFT's rows of a SIFT set (``sift_rows.npz``, :mod:`descbench.keypoints.sift`: SIFT's
detection and description share one scale-space pyramid). A side file holds, per image ``k``,
the kept keypoints' ``source_index_k`` (their row in the detector's output), ``x_k``, ``y_k`` and
``rows_k`` (float32, or uint8 where every value is an integer 0..255, as OpenCV SIFT's are), and
a JSON ``meta`` (version, what made the rows). Rows are found by ``source_index`` and checked equal
in ``x`` and ``y`` (:func:`lookup_rows`): rows of other keypoints are a DataError naming the file
and the fix, never used. A derived set (filters, an intersection) keeps the rows of the keypoints
it keeps from its source's side files (:func:`subset_side_file`).
"""

from __future__ import annotations

import io as _io
import json
from pathlib import Path

import numpy as np

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints

SIDE_VERSION = 1


def side_file_path(keypoint_file: Path | str, kind: str) -> Path:
    """``<scene>.<kind>`` next to a scene's keypoint file ``<scene>.parquet``."""
    p = Path(keypoint_file)
    return p.with_name(p.name.removesuffix(".parquet") + "." + kind)


def write_side_file(path: Path | str, per_image: dict[int, tuple[ImageKeypoints, np.ndarray]], meta: dict) -> None:
    """Per image ``k``: ``source_index_k``, ``x_k``, ``y_k`` of the kept keypoints and their rows
    ``rows_k`` (uint8 rows kept as uint8, any other as float32); ``meta`` (JSON: version and
    what made the rows) in ``meta``. Written atomically."""
    from descbench.fileops import write_bytes_atomic

    arrays = {"meta": np.array(json.dumps({"version": SIDE_VERSION, **meta}, sort_keys=True))}
    for k, (kps, rows) in per_image.items():
        rows = np.ascontiguousarray(rows) if np.asarray(rows).dtype == np.uint8 else np.ascontiguousarray(rows, dtype=np.float32)
        arrays.update({f"source_index_{k}": kps.source_index.astype(np.int32), f"x_{k}": kps.x, f"y_{k}": kps.y,
                       f"rows_{k}": rows})
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes_atomic(Path(path), buf.getvalue())


def read_side_file(path: Path | str) -> tuple[dict, dict]:
    """``(meta, arrays)`` of a side file (DataError naming it when missing or unreadable)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{path}: the keypoint job's side file is missing or unreadable ({exc}); fix: rerun the "
                        "keypoint job of its set (snakemake --forcerun keypoints)") from exc
    return meta, arrays


def lookup_rows(arrays: dict, k: int, kps: ImageKeypoints, path: Path) -> np.ndarray:
    """Image ``k``'s rows of ``kps`` from a side file's arrays (in their stored dtype), found by
    ``source_index`` and checked equal in ``x`` and ``y``; DataError naming the file otherwise."""
    try:
        si, xs, ys, rows = (arrays[f"{f}_{k}"] for f in ("source_index", "x", "y", "rows"))
    except KeyError:
        raise DataError(f"{path}: no rows for image {k}; fix: rerun the keypoint job of its set "
                        "(snakemake --forcerun keypoints)") from None
    order = np.argsort(si, kind="stable")
    pos = np.searchsorted(si[order], kps.source_index)
    pos = np.minimum(pos, max(len(si) - 1, 0))
    found = order[pos] if len(si) else np.zeros(0, dtype=np.int64)
    if len(kps) and (len(si) == 0 or not np.array_equal(si[found], kps.source_index)
                     or not np.array_equal(xs[found], kps.x) or not np.array_equal(ys[found], kps.y)):
        raise DataError(f"{path}: image {k}'s rows do not match the keypoint file (other keypoints or positions: the "
                        "files were written by different runs); fix: rerun the keypoint jobs of the set and its "
                        "sources (snakemake --forcerun keypoints)")
    return rows[found] if len(kps) else np.zeros((0, rows.shape[1] if rows.ndim == 2 else 0), dtype=rows.dtype)


def subset_side_file(source_keypoints: Path | str, out_keypoints: Path | str, per_image: dict[int, ImageKeypoints],
                     kind: str) -> None:
    """A derived set's side file of ``kind``: the source set's rows of the keypoints it keeps (by
    ``source_index``, checked in ``x``, ``y``). No such side file at the source: nothing is written."""
    src = side_file_path(source_keypoints, kind)
    if not src.exists():
        return
    meta, arrays = read_side_file(src)
    out = {k: (kps, lookup_rows(arrays, k, kps, src)) for k, kps in per_image.items()}
    write_side_file(side_file_path(out_keypoints, kind), out, {key: v for key, v in meta.items() if key != "version"})
