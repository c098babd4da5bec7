"""Locked keypoints: keypoints another tool produced, imported with every OpenCV field, and any
keypoint set exported in the same format (the seed's "locked keypoints": every descriptor is
computed on exactly the same keypoints).

The format (one place, :data:`FIELDS`): one row per keypoint with the OpenCV ``KeyPoint`` fields
``x, y, size, angle, response, octave, class_id`` (x right, y down, pixel centres at integers,
size = diameter in px, angle in degrees or -1, octave/class_id as the producing tool wrote
them). Three layouts:

- one file for the whole dataset with two more columns, ``scene`` (the scene folder name) and
  ``image``: the image number 1..n (n: the scene's image count) or the image's file name ``<k>.<ext>`` (``1.ppm``, ``3.png``:
  the C++ DescriptorWorkbench's ``image_name``); the workbench's database column names
  ``scene_name`` / ``image_name`` are read as ``scene`` / ``image``, and its bookkeeping columns
  ``id``, ``keypoint_set_id`` (one value per file), ``valid_bounds``, ``created_at`` are ignored,
  so ``sqlite3 -header -csv experiments.db "SELECT * FROM locked_keypoints WHERE keypoint_set_id
  = 3"`` is read as it is;
- one file per image: a path pattern containing ``{scene}`` and ``{image}``;
- a folder (:data:`DW_IMAGE_FILES`): the workbench's ``keypoint_manager export-csv`` output,
  ``<folder>/<scene>/<k>ppm.csv`` (or ``<k>.csv``, what its ``import-csv`` reads), header
  ``x,y,size,angle,response,octave,class_id``; it writes no file for an image without keypoints,
  so a missing image file is an empty image (a missing scene folder is an error).

Files: ``.parquet``, ``.csv`` or gzip-compressed ``.csv.gz`` (:func:`file_format`). Rows keep
their file order within an image (that order is the set's row order, and ``source_index`` = the
row's index among the image's rows). ``x``, ``y`` and ``size`` are required; ``angle`` (default
-1), ``response`` (0), ``octave`` (0) and ``class_id`` (-1) may be omitted. CSV floats are parsed
straight to float32 (correctly rounded, as the workbench's ``std::stof``: no double rounding
through float64). Exports store float32 (Parquet) or print 9 significant digits (CSV), both of
which read back bit-exactly.

The ``octave`` field (:func:`octave_mode`, ``params.octave``): SIFT descriptors either use it as
OpenCV SIFT's packed octave (``sift``: keypoints SIFT detected) or derive SIFT's octave from the
size (``from_size``: any other detector's field, e.g. KeyNet's 0 or ORB's pyramid level).
An export records which one its set needs in the column ``octave_mode`` (:data:`OCTAVE_COLUMN`,
one value in every row) and the default ``octave: auto`` follows that record (no record:
``from_size``), so export then import gives the same descriptors without settings. A column, not
a comment line: every CSV reader keeps it, and the workbench's per-image reader
(``readKeypointsFromCSV``: skips one header line, parses the first seven fields, ``std::stoi``
stops at the comma after class_id) still reads a per-image file that ends with it, where a
leading comment line would break it.
Files of other tools carry no record: for the workbench's SIFT sets (and intersections keeping a
SIFT side) set ``octave: sift``.

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
import glob
import gzip
import re
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
OCTAVE_MODES = ("auto", "from_size", "sift")  # params.octave (schema: locked_params; first = the default)
RECORDED_MODES = ("from_size", "sift")  # the values of an export's OCTAVE_COLUMN
OCTAVE_COLUMN = "octave_mode"
FORMATS = {".parquet": "parquet", ".csv": "csv", ".csv.gz": "csv"}  # file name ending -> reader
# the C++ DescriptorWorkbench's locked_keypoints table: its names for scene/image, and the
# columns that are its database's bookkeeping, not keypoint fields (read and ignored)
ALIASES = {"scene_name": "scene", "image_name": "image"}
DW_BOOKKEEPING = ("id", "keypoint_set_id", "valid_bounds", "created_at")
# one image's file in the workbench's export-csv folder (<folder>/<scene>/<name>), in the order tried
DW_IMAGE_FILES = ("{k}ppm.csv", "{k}.csv", "{k}ppm.csv.gz", "{k}.csv.gz")
_IMAGE_NAME = re.compile(r"^\s*([1-9][0-9]*)(?:\.[A-Za-z][A-Za-z0-9]*)?\s*$")  # 1, 1.ppm, 12.png (not 1.5, not 0)
_SHOW = 5  # offending rows listed in an error message
_FIX = ("; write the file with columns scene, image, x, y, size[, angle, response, octave, class_id] "
        "(see `descbench export-keypoints`)")


def is_per_image(path: str) -> bool:
    return "{scene}" in path and "{image}" in path


def is_folder(path: str) -> bool:
    """Whether ``path`` is a folder in the workbench's export-csv layout (module docstring)."""
    return not is_per_image(path) and Path(path).is_dir()


def file_format(path: Path) -> str:
    """``parquet`` or ``csv`` by the file name's ending (:data:`FORMATS`, any letter case)."""
    name = Path(path).name.lower()
    for end in sorted(FORMATS, key=len, reverse=True):
        if name.endswith(end):
            return FORMATS[end]
    raise DataError(f"locked keypoint file {path}: unknown format '{''.join(Path(path).suffixes[-2:]) or Path(path).name}'; "
                    f"use {', '.join(FORMATS)}")


def _folder_file(folder: Path, scene: str, image: int) -> Path | None:
    """The workbench export-csv file of ``scene``/``image`` (None: it wrote none, no keypoints)."""
    found = [folder / scene / n.format(k=image) for n in DW_IMAGE_FILES if (folder / scene / n.format(k=image)).is_file()]
    if len(found) > 1:
        raise DataError(f"locked keypoint folder {folder}, scene {scene}, image {image}: two files for one image, "
                        f"{found[0]} and {found[1]}; keep one")
    return found[0] if found else None


def locked_file(path: str, scene: str, image: int) -> Path:
    """The file holding ``scene``/``image``'s keypoints (the pattern filled in, or the one file).
    A folder in the workbench's layout: the image's file, else (an image without keypoints) its
    scene folder, else the folder itself (the job then says that the scene is missing)."""
    if is_per_image(path):
        return Path(path.format(scene=scene, image=image))
    if is_folder(path):
        f = _folder_file(Path(path), scene, image)
        return f if f is not None else (Path(path) / scene if (Path(path) / scene).is_dir() else Path(path))
    return Path(path)


def _read_table(path: Path) -> pa.Table:
    if not path.exists():
        raise DataError(f"locked keypoint file {path} does not exist; check keypoint_sets.<set>.params.path")
    fmt = file_format(path)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pcsv

        # names as text (scene '001' stays '001', image '1.ppm' is a name); float fields parsed
        # straight to float32; a .gz ending is decompressed by pyarrow
        types = {c: pa.string() for c in ("scene", "image", *ALIASES, OCTAVE_COLUMN)}
        types.update({f: pa.float32() for f, t in FIELDS.items() if t is np.float32})
        return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True))
    except (pa.ArrowInvalid, OSError, EOFError) as exc:
        raise DataError(f"locked keypoint file {path} cannot be read ({exc}){_FIX}") from exc


def _empty_columns(need_scene: bool) -> dict[str, np.ndarray]:
    out = {name: np.zeros(0, dtype=dtype) for name, dtype in FIELDS.items()}
    if need_scene:
        out["scene"] = np.zeros(0, dtype=object)
        out["image"] = np.zeros(0, dtype=np.int64)
    return out


def _image_numbers(col: pa.ChunkedArray, path: Path) -> np.ndarray:
    """The ``image`` column as 1..n: integers, or names ``<k>.<ext>`` / ``<k>`` (text); whether
    ``n`` is the scene's image count is checked per scene (:func:`load_locked`)."""
    bad = f"locked keypoint file {path}: column 'image' must hold image numbers 1..N or image names such as 1.ppm"
    if pa.types.is_integer(col.type):
        a = col.to_numpy().astype(np.int64)
        wrong = np.flatnonzero(a < 1)
        if wrong.size:
            raise DataError(f"{bad} (row {int(wrong[0])}: {int(a[wrong[0]])}){_FIX}")
        return a
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_dictionary(col.type)):
        raise DataError(f"{bad} (it is {col.type}){_FIX}")
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col.cast(pa.string())).combine_chunks()  # each distinct name once
    idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    numbers = np.zeros(len(enc.dictionary), dtype=np.int64)
    for j, v in enumerate(enc.dictionary.to_pylist()):
        m = _IMAGE_NAME.match(v)
        if m is None:
            raise DataError(f"{bad} (row {int(np.flatnonzero(idx == j)[0])}: {v!r}){_FIX}")
        numbers[j] = int(m.group(1))
    return numbers[idx]


def _recorded_mode(table: pa.Table, path: Path) -> str | None:
    """The file's :data:`OCTAVE_COLUMN` value (one for the whole file), None without the column or rows."""
    if OCTAVE_COLUMN not in table.column_names:
        return None
    col = table.column(OCTAVE_COLUMN)
    if col.null_count and col.null_count < len(col):
        raise DataError(f"locked keypoint file {path}: column '{OCTAVE_COLUMN}' has {col.null_count} empty values; "
                        f"it must hold one of {', '.join(RECORDED_MODES)} in every row (or leave the column out)")
    values = sorted({v for v in col.cast(pa.string()).to_pylist() if v is not None})
    if len(values) > 1 or (values and values[0] not in RECORDED_MODES):
        raise DataError(f"locked keypoint file {path}: column '{OCTAVE_COLUMN}' holds {', '.join(map(repr, values))}; "
                        f"it must hold one of {', '.join(RECORDED_MODES)}, the same in every row (it says how the "
                        "file's octave column is read: descbench's export writes it), or leave the column out")
    return values[0] if values else None


def _columns(table: pa.Table, path: Path, need_scene: bool) -> tuple[dict[str, np.ndarray], str | None]:
    """The file's keypoint columns (``scene``/``image`` too when ``need_scene``) and its recorded
    octave mode (:data:`OCTAVE_COLUMN`; None if it records none)."""
    raw = list(table.column_names)
    both = [f"{a} and {b}" for a, b in ALIASES.items() if a in raw and b in raw]
    if both:
        raise DataError(f"locked keypoint file {path} has both columns {both[0]} (the same field twice); keep one{_FIX}")
    table = table.rename_columns([ALIASES.get(c, c) for c in raw])
    names = set(table.column_names)
    missing = [c for c in (("scene", "image") if need_scene else ()) + REQUIRED if c not in names]
    if missing:
        raise DataError(f"locked keypoint file {path} lacks column(s) {', '.join(missing)}{_FIX}")
    unknown = sorted(names - set(FIELDS) - {"scene", "image", OCTAVE_COLUMN} - set(DW_BOOKKEEPING))
    if unknown:
        raise DataError(f"locked keypoint file {path} has unknown column(s) {', '.join(unknown)}{_FIX}")
    mode = _recorded_mode(table, path)
    if "keypoint_set_id" in names:
        sets = sorted({v for v in table.column("keypoint_set_id").to_pylist() if v is not None})
        if len(sets) > 1:
            raise DataError(f"locked keypoint file {path} holds the keypoints of {len(sets)} workbench keypoint sets "
                            f"(keypoint_set_id {', '.join(map(str, sets[:_SHOW]))}); keep one set's rows (e.g. "
                            "SELECT ... FROM locked_keypoints WHERE keypoint_set_id = <id>), one file per keypoint set")
    n = table.num_rows
    if n == 0:
        # No rows (a header-only CSV, what df.iloc[:0].to_csv writes for an image without keypoints):
        # the columns carry no values, hence no type (CSV: null), so they are empty, not "not numbers".
        return _empty_columns(need_scene), mode
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
        for c in ("scene", "image"):
            if table.column(c).null_count:
                raise DataError(f"locked keypoint file {path}: column '{c}' has {table.column(c).null_count} empty values{_FIX}")
        out["scene"] = np.asarray(table.column("scene").cast(pa.string()).to_pylist(), dtype=object)
        out["image"] = _image_numbers(table.column("image"), path)
    return out, mode


@functools.lru_cache(maxsize=4)
def _dataset_file(path: str, mtime_ns: int) -> tuple[dict[str, np.ndarray], str | None]:
    return _columns(_read_table(Path(path)), Path(path), need_scene=True)


def _image_file(f: Path) -> tuple[dict[str, np.ndarray], str | None]:
    return _columns(_read_table(f), f, need_scene=False)


def _layout_files(path: str) -> list[Path]:
    """Every file a per-image pattern or a workbench folder holds (for their recorded octave mode)."""
    if is_per_image(path):
        parts = re.split(r"\{scene\}|\{image\}", path)
        return [Path(p) for p in sorted(glob.glob("*".join(glob.escape(s) for s in parts)))]
    folder = Path(path)
    return sorted(f for n in {n.format(k="*") for n in DW_IMAGE_FILES} for f in folder.glob(f"*/{n}") if f.is_file())


@functools.lru_cache(maxsize=16)
def _recorded_octave_mode(path: str, stamp: tuple) -> str | None:
    """(``stamp``: the files and their mtimes, so that a changed file is read again.)"""
    if not (is_per_image(path) or is_folder(path)):
        return _dataset_file(path, stamp[0][1])[1] if stamp else None
    modes: dict[str, Path] = {}
    for f, _ in stamp:
        m = _image_file(Path(f))[1]
        if m is not None:
            modes.setdefault(m, Path(f))
    if len(modes) > 1:
        (a, fa), (b, fb) = sorted(modes.items())[:2]
        raise DataError(f"locked keypoints {path}: the files record different octave modes ({fa}: {OCTAVE_COLUMN} {a}; "
                        f"{fb}: {OCTAVE_COLUMN} {b}); one keypoint set has one mode: fix the files, or set "
                        "keypoint_sets.<set>.params.octave explicitly")
    return next(iter(modes), None)


def recorded_octave_mode(path: str) -> str | None:
    """The octave mode the file(s) at ``path`` record in :data:`OCTAVE_COLUMN` (None: no record;
    a per-image pattern or a workbench folder: every file it holds, which must agree)."""
    if is_per_image(path) or is_folder(path):
        files = _layout_files(path)
    else:
        files = [Path(path)] if Path(path).is_file() else []
    return _recorded_octave_mode(path, tuple((str(f), f.stat().st_mtime_ns) for f in files))


def octave_mode(params: dict) -> str:
    """How a locked set's ``octave`` column is read by SIFT descriptors: ``sift`` (OpenCV SIFT's
    packed octave, used as is) or ``from_size`` (derived from the size). ``params.octave``:
    ``auto`` (the default) = the mode the file records (an export's :data:`OCTAVE_COLUMN`),
    ``from_size`` without a record; ``sift`` / ``from_size`` = that, whatever the file records."""
    mode = params.get("octave", OCTAVE_MODES[0])
    if mode not in OCTAVE_MODES:
        raise ConfigError(f"keypoint_sets.<set>.params.octave is {mode!r}; use one of {', '.join(OCTAVE_MODES)}")
    if mode != "auto":
        return mode
    return (recorded_octave_mode(params["path"]) if params.get("path") else None) or "from_size"


def load_locked(path: str, scene: str, image: int, width: int, height: int,
                duplicates: str = DUPLICATES[0], n_images: int | None = None) -> ImageKeypoints:
    """``scene``/``image``'s keypoints from a locked keypoint file, per-image pattern or workbench
    folder, in file order.

    A dataset file with no row for ``scene`` at all is an error (a scene the other tool never
    saw, or a renamed scene), and so is a workbench folder without the scene's folder; an image
    of a listed scene without rows is an empty image, and so is a per-image file with a header
    and no rows, and an image without a file in a workbench folder (recorded as empty by the
    keypoint stage, as any image without keypoints).
    ``width`` x ``height``: the real size of the image the keypoints belong to; a keypoint outside
    it is a DataError (module docstring), as are duplicates unless ``duplicates="keep"``.
    ``n_images``: the scene's image count; a dataset file's row for an image beyond it is a
    DataError (its keypoints would never be read).
    """
    if duplicates not in DUPLICATES:
        raise ConfigError(f"keypoint_sets.<set>.params.duplicates is {duplicates!r}; use one of {', '.join(DUPLICATES)}")
    per_image = is_per_image(path) or is_folder(path)
    if is_folder(path):
        folder = Path(path)
        if not (folder / scene).is_dir():
            raise DataError(f"locked keypoint folder {folder} has no folder for scene '{scene}' (the workbench's "
                            f"export-csv layout: {folder}/<scene>/<k>ppm.csv); add it, or restrict the run to the "
                            "folder's scenes with `scenes:`")
        f = _folder_file(folder, scene, image)
        cols = _image_file(f)[0] if f is not None else _empty_columns(False)
        f = f if f is not None else folder / scene
        sel = np.arange(len(cols["x"]))
    elif is_per_image(path):
        f = locked_file(path, scene, image)
        cols = _image_file(f)[0]
        sel = np.arange(len(cols["x"]))
    else:
        f = Path(path)
        if not f.exists():
            _read_table(f)  # raises the missing-file error
        cols = _dataset_file(str(f), f.stat().st_mtime_ns)[0]
        in_scene = cols["scene"] == scene
        if not in_scene.any():
            raise DataError(f"locked keypoint file {f} has no keypoints for scene '{scene}'"
                            + (" (the file has no rows at all, only a header)" if len(cols["x"]) == 0 else "")
                            + "; add them, or restrict the run to the file's scenes with `scenes:`")
        beyond = np.flatnonzero(in_scene & (cols["image"] > n_images)) if n_images is not None else []
        if len(beyond):
            raise DataError(f"locked keypoint file {f}: row {int(beyond[0])} is a keypoint of image {int(cols['image'][beyond[0]])} "
                            f"of scene '{scene}', which has images 1..{n_images}; fix the image numbers or remove the rows")
        sel = np.flatnonzero(in_scene & (cols["image"] == image))
    kps = ImageKeypoints(**{k: cols[k][sel] for k in FIELDS}, source_index=np.arange(len(sel), dtype=np.int32))
    where = f"locked keypoint file {f}, scene {scene}, image {image}"
    rows_note = "0-based data rows of the file" + (", header not counted: CSV line = row + 2" if _format_or_none(f) == "csv" else "")
    check_inside(kps, sel, where, rows_note, width, height)
    if duplicates == "error":
        _check_duplicates(kps, sel, where, rows_note, per_image=per_image)
    return kps


def _format_or_none(path: Path) -> str | None:
    try:
        return file_format(path)
    except DataError:
        return None


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


def export_table(scenes: list[str], per_scene: list[dict[int, ImageKeypoints]], octave_mode: str) -> pa.Table:
    """One dataset table (columns scene, image, then :data:`FIELDS`, then :data:`OCTAVE_COLUMN`)
    of a set's keypoints; ``octave_mode`` (:data:`RECORDED_MODES`): how the set's descriptors read
    its octave field, written in every row so that ``octave: auto`` imports it the same way."""
    if octave_mode not in RECORDED_MODES:
        raise ValueError(f"octave_mode {octave_mode!r} is not one of {RECORDED_MODES}")
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
    arrays[OCTAVE_COLUMN] = pa.array([octave_mode] * len(cols["scene"]), pa.string())
    return pa.table(arrays)


def write_export(table: pa.Table, out: Path) -> None:
    """Write an :func:`export_table` as Parquet, CSV or gzip-compressed CSV (by the name's ending,
    :data:`FORMATS`; CSV floats with 9 significant digits, which read back to the same float32).
    The same keypoints give the same bytes: ``.csv.gz`` is gzip with no file name and mtime 0."""
    out = Path(out)
    name = out.name.lower()
    if not any(name.endswith(e) for e in FORMATS):
        raise DataError(f"cannot export keypoints to {out}: use a file name ending in {', '.join(FORMATS)}")
    with atomic_path(out) as tmp:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
            return
        text = table.to_pandas().to_csv(index=False, float_format="%.9g", lineterminator="\n").encode()
        Path(tmp).write_bytes(gzip.compress(text, mtime=0) if name.endswith(".gz") else text)
