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
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints

FIELDS = {"x": np.float32, "y": np.float32, "size": np.float32, "angle": np.float32, "response": np.float32,
          "octave": np.int32, "class_id": np.int32}
REQUIRED = ("x", "y", "size")
DEFAULTS = {"angle": -1.0, "response": 0.0, "octave": 0, "class_id": -1}
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


def load_locked(path: str, scene: str, image: int) -> ImageKeypoints:
    """``scene``/``image``'s keypoints from a locked keypoint file or per-image pattern, in file order.

    A dataset file with no row for ``scene`` at all is an error (a scene the other tool never
    saw, or a renamed scene); an image of a listed scene without rows is an empty image.
    """
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
            raise DataError(f"locked keypoint file {f} has no keypoints for scene '{scene}'; "
                            "add them, or restrict the run to the file's scenes with `scenes:`")
        sel = np.flatnonzero(in_scene & (cols["image"] == image))
    return ImageKeypoints(**{k: cols[k][sel] for k in FIELDS}, source_index=np.arange(len(sel), dtype=np.int32))


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
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if out.suffix == ".parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)
    elif out.suffix == ".csv":
        df = table.to_pandas()
        df.to_csv(tmp, index=False, float_format="%.9g")
    else:
        raise DataError(f"cannot export keypoints to {out}: use a .parquet or .csv file name")
    tmp.replace(out)
