"""Locked keypoints: keypoints another tool produced, imported with every OpenCV field, and any
keypoint set exported in the same format (the seed's "locked keypoints": every descriptor is
computed on exactly the same keypoints).

The format (one place, :data:`FIELDS`): one row per keypoint with the OpenCV ``KeyPoint`` fields
``x, y, size, angle, response, octave, class_id`` (x right, y down, pixel centres at integers,
size = diameter in px, angle in degrees or -1, octave/class_id as the producing tool wrote
them). Two layouts:

- one file for the whole dataset (``.parquet`` or ``.csv``) with two more columns, ``scene``
  (the scene folder name) and ``image`` (1..6);
- one file per image: a path pattern containing ``{scene}`` and ``{image}``.

Rows keep their file order within an image (that order is the set's row order, and
``source_index`` = the row's index among the image's rows). ``x``, ``y`` and ``size`` are
required; ``angle`` (default -1), ``response`` (0), ``octave`` (0) and ``class_id`` (-1) may be
omitted. Floats are stored as float32 (Parquet) or printed with 9 significant digits (CSV), both
of which read back bit-exactly.

Checks against the image (:func:`load_locked`, which is given the image's real size):

- every keypoint must lie in its image, ``0 <= x < W`` and ``0 <= y < H`` (the border rule with
  ``b = 0``, :func:`descbench.keypoints.border_mask`); one outside is a wrong coordinate frame
  (scaled, 1-based, x/y swapped, another image), not a keypoint to drop, so it is a DataError.
  Keypoints inside the image but within ``border_px`` of its edge are then dropped by the border
  rule, as for any detector;
- duplicates: two rows of one image with the same ``(x, y, size, angle)`` (float32 values, so
  ``-0.0 == 0.0``) are the same keypoint twice: described and matched twice, they skew every
  metric. ``angle`` is part of the key because SIFT legitimately emits several keypoints at one
  position and scale with different orientations (OpenCV's own ``removeDuplicated`` uses the
  same four fields). ``response``, ``octave`` and ``class_id`` are not: they are scores and
  bookkeeping of the producing tool, not where or how the keypoint is measured. Duplicates are
  an error unless ``params.duplicates: keep`` (:data:`DUPLICATES`) says they are intended.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench.errors import ConfigError, DataError
from descbench.fileops import atomic_path
from descbench.keypoints import ImageKeypoints, border_mask

FIELDS = {"x": np.float32, "y": np.float32, "size": np.float32, "angle": np.float32, "response": np.float32,
          "octave": np.int32, "class_id": np.int32}
REQUIRED = ("x", "y", "size")
DEFAULTS = {"angle": -1.0, "response": 0.0, "octave": 0, "class_id": -1}
DUPLICATE_KEY = ("x", "y", "size", "angle")  # what makes two rows of one image the same keypoint
DUPLICATES = ("error", "keep")  # params.duplicates (schema: locked_params; first = the default)
_SHOW = 5  # offending rows listed in an error message
_FIX = "; write the file with columns scene, image, x, y, size[, angle, response, octave, class_id] (see `descbench export-keypoints`)"


def is_per_image(path: str) -> bool:
    return "{scene}" in path and "{image}" in path


def locked_file(path: str, scene: str, image: int) -> Path:
    """The file holding ``scene``/``image``'s keypoints (the pattern filled in, or the one file)."""
    return Path(path.format(scene=scene, image=image) if is_per_image(path) else path)


def _read_table(path: Path) -> pa.Table:
    if not path.exists():
        raise DataError(f"locked keypoint file {path} does not exist; check keypoint_sets.<set>.params.path")
    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        if path.suffix.lower() == ".csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types={"scene": pa.string()}))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"locked keypoint file {path} cannot be read ({exc}){_FIX}") from exc
    raise DataError(f"locked keypoint file {path}: unknown format '{path.suffix}'; use .parquet or .csv")


def _columns(table: pa.Table, path: Path, need_scene: bool) -> dict[str, np.ndarray]:
    names = set(table.column_names)
    missing = [c for c in (("scene", "image") if need_scene else ()) + REQUIRED if c not in names]
    if missing:
        raise DataError(f"locked keypoint file {path} lacks column(s) {', '.join(missing)}{_FIX}")
    unknown = sorted(names - set(FIELDS) - {"scene", "image"})
    if unknown:
        raise DataError(f"locked keypoint file {path} has unknown column(s) {', '.join(unknown)}{_FIX}")
    n = table.num_rows
    out = {}
    if n == 0:
        # No rows (a header-only CSV, what df.iloc[:0].to_csv writes for an image without keypoints):
        # the columns carry no values, hence no type (CSV: null), so they are empty, not "not numbers".
        out = {name: np.zeros(0, dtype=dtype) for name, dtype in FIELDS.items()}
        if need_scene:
            out["scene"] = np.zeros(0, dtype=object)
            out["image"] = np.zeros(0, dtype=np.int64)
        return out
    for name, dtype in FIELDS.items():
        if name not in names:
            out[name] = np.full(n, DEFAULTS[name], dtype=dtype)
            continue
        col = table.column(name)
        if col.null_count:
            raise DataError(f"locked keypoint file {path}: column '{name}' has {col.null_count} empty values{_FIX}")
        a = col.to_numpy()
        if a.dtype.kind not in "iuf":
            raise DataError(f"locked keypoint file {path}: column '{name}' is {col.type}, expected numbers{_FIX}")
        if dtype is np.int32:
            if a.dtype.kind == "f" and not np.all(a == np.round(a)):
                raise DataError(f"locked keypoint file {path}: column '{name}' must hold integers{_FIX}")
            a = a.astype(np.int64)
            if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
                raise DataError(f"locked keypoint file {path}: column '{name}' exceeds int32{_FIX}")
        elif not np.all(np.isfinite(a)):
            raise DataError(f"locked keypoint file {path}: column '{name}' has NaN or inf at row {int(np.flatnonzero(~np.isfinite(a))[0])}{_FIX}")
        out[name] = a.astype(dtype)
    if n and np.any(out["size"] <= 0):
        raise DataError(f"locked keypoint file {path}: 'size' must be > 0 (row {int(np.flatnonzero(out['size'] <= 0)[0])}){_FIX}")
    if need_scene:
        out["scene"] = np.asarray(table.column("scene").cast(pa.string()).to_pylist(), dtype=object)
        image = table.column("image").to_numpy()
        if image.dtype.kind not in "iu" or (image.size and (image.min() < 1 or image.max() > 6)):
            raise DataError(f"locked keypoint file {path}: column 'image' must hold integers 1..6{_FIX}")
        out["image"] = image.astype(np.int64)
    return out


@functools.lru_cache(maxsize=4)
def _dataset_file(path: str, mtime_ns: int) -> dict[str, np.ndarray]:
    return _columns(_read_table(Path(path)), Path(path), need_scene=True)


def load_locked(path: str, scene: str, image: int, width: int, height: int,
                duplicates: str = DUPLICATES[0]) -> ImageKeypoints:
    """``scene``/``image``'s keypoints from a locked keypoint file or per-image pattern, in file order.

    A dataset file with no row for ``scene`` at all is an error (a scene the other tool never
    saw, or a renamed scene); an image of a listed scene without rows is an empty image, and so is
    a per-image file with a header and no rows (recorded as empty by the keypoint stage, as any
    image without keypoints).
    ``width`` x ``height``: the real size of the image the keypoints belong to; a keypoint outside
    it is a DataError (module docstring), as are duplicates unless ``duplicates="keep"``.
    """
    if duplicates not in DUPLICATES:
        raise ConfigError(f"keypoint_sets.<set>.params.duplicates is {duplicates!r}; use one of {', '.join(DUPLICATES)}")
    if is_per_image(path):
        f = locked_file(path, scene, image)
        cols = _columns(_read_table(f), f, need_scene=False)
        sel = np.arange(len(cols["x"]))
    else:
        f = Path(path)
        if not f.exists():
            _read_table(f)  # raises the missing-file error
        cols = _dataset_file(str(f), f.stat().st_mtime_ns)
        in_scene = cols["scene"] == scene
        if not in_scene.any():
            raise DataError(f"locked keypoint file {f} has no keypoints for scene '{scene}'"
                            + (" (the file has no rows at all, only a header)" if len(cols["x"]) == 0 else "")
                            + "; add them, or restrict the run to the file's scenes with `scenes:`")
        sel = np.flatnonzero(in_scene & (cols["image"] == image))
    kps = ImageKeypoints(**{k: cols[k][sel] for k in FIELDS}, source_index=np.arange(len(sel), dtype=np.int32))
    where = f"locked keypoint file {f}, scene {scene}, image {image}"
    rows_note = "0-based data rows of the file" + (", header not counted: CSV line = row + 2" if f.suffix.lower() == ".csv" else "")
    check_inside(kps, sel, where, rows_note, width, height)
    if duplicates == "error":
        _check_duplicates(kps, sel, where, rows_note, per_image=is_per_image(path))
    return kps


def check_inside(kps: ImageKeypoints, rows: np.ndarray, where: str, rows_note: str, width: int, height: int) -> None:
    """DataError if a keypoint lies outside ``[0, width) x [0, height)`` (``rows``: file rows).

    The one rule for keypoints read from files (locked keypoints, precomputed features,
    :func:`descbench.precomputed.load_features`): one outside its image is a wrong coordinate
    frame, not a keypoint for the border rule to drop. ``where`` names the file (and image),
    ``rows_note`` says how ``rows`` count."""
    out = np.flatnonzero(~border_mask(kps.x, kps.y, width, height, 0))
    if out.size == 0:
        return
    shown = ", ".join(f"row {int(rows[i])} (x={float(kps.x[i]):.9g}, y={float(kps.y[i]):.9g})" for i in out[:_SHOW])
    more = f" and {out.size - _SHOW} more" if out.size > _SHOW else ""
    raise DataError(
        f"{where}: {out.size} keypoint(s) outside the image, which is {width} x {height} px (x must be in "
        f"[0, {width}) and y in [0, {height}), pixel centres at integers): {shown}{more} ({rows_note}); "
        "write the keypoints in this image's pixel coordinates (check for scaled or resized images, "
        "a 1-based origin, swapped x/y, or rows of another image) or remove these rows")


def duplicate_rows(kps: ImageKeypoints) -> tuple[np.ndarray, np.ndarray]:
    """(rows, earlier): the indices of the keypoints whose :data:`DUPLICATE_KEY` values equal
    those of an earlier keypoint (ascending), and the index of that keypoint's first occurrence."""
    n = len(kps)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key = np.stack([getattr(kps, k).astype(np.float32) for k in DUPLICATE_KEY], axis=1) + np.float32(0)  # -0.0 -> +0.0
    key = np.ascontiguousarray(key).view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    earlier = first[inverse.ravel()]
    rows = np.flatnonzero(earlier != np.arange(n))
    return rows, earlier[rows]


def _check_duplicates(kps: ImageKeypoints, rows: np.ndarray, where: str, rows_note: str, per_image: bool) -> None:
    dup, earlier = duplicate_rows(kps)
    if dup.size == 0:
        return
    shown = ", ".join(f"row {int(rows[i])} = row {int(rows[j])}" for i, j in zip(dup[:_SHOW], earlier[:_SHOW]))
    more = f" and {dup.size - _SHOW} more" if dup.size > _SHOW else ""
    subset = ", ".join(repr(c) for c in (() if per_image else ("scene", "image")) + DUPLICATE_KEY)
    raise DataError(
        f"{where}: {dup.size} row(s) repeat an earlier keypoint of this image (same {', '.join(DUPLICATE_KEY)}): "
        f"{shown}{more} ({rows_note}); every copy would be described and matched again, which skews the metrics. "
        f"Remove the repeated rows (pandas: df.drop_duplicates(subset=[{subset}])), or, if they are intended, "
        "set keypoint_sets.<set>.params.duplicates: keep")


def export_table(scenes: list[str], per_scene: list[dict[int, ImageKeypoints]]) -> pa.Table:
    """One dataset table (columns scene, image, then :data:`FIELDS`) of a set's keypoints."""
    cols = {"scene": [], "image": [], **{k: [] for k in FIELDS}}
    for scene, per_image in zip(scenes, per_scene):
        for k in sorted(per_image):
            kps = per_image[k]
            cols["scene"] += [scene] * len(kps)
            cols["image"].append(np.full(len(kps), k, dtype=np.int8))
            for f in FIELDS:
                cols[f].append(getattr(kps, f))
    arrays = {"scene": pa.array(cols["scene"], pa.string()), "image": pa.array(np.concatenate(cols["image"] or [np.zeros(0, np.int8)]))}
    for f, dtype in FIELDS.items():
        arrays[f] = pa.array(np.concatenate(cols[f]) if cols[f] else np.zeros(0, dtype))
    return pa.table(arrays)


def write_export(table: pa.Table, out: Path) -> None:
    """Write an :func:`export_table` as Parquet or CSV (by suffix; CSV floats with 9 significant
    digits, which read back to the same float32)."""
    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise DataError(f"cannot export keypoints to {out}: use a .parquet or .csv file name")
    with atomic_path(out) as tmp:
        if out.suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            table.to_pandas().to_csv(tmp, index=False, float_format="%.9g")
