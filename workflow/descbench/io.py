"""Parquet schemas of the features (keypoints, descriptors), provenance metadata and atomic writes.

Each scoring task's own files have their schemas in its module (:mod:`descbench.tasks`).

Every file carries, under the metadata key ``descbench``, a JSON object with the stage, the
parameters that produced it and the versions of descbench, OpenCV, NumPy, numba and pyarrow.
Nothing time- or host-dependent is written, so the same inputs give bit-identical files.
Files are written to a temporary name and renamed, so an interrupted job never leaves a file
under its final name.
"""

from __future__ import annotations

import json
import os
import platform
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from descbench.errors import DataError
from descbench.fileops import atomic_path, bytes_sha256

META_KEY = b"descbench"

KEYPOINTS = pa.schema(
    [
        ("image", pa.int8()),
        ("x", pa.float32()),
        ("y", pa.float32()),
        ("size", pa.float32()),
        ("angle", pa.float32()),
        ("response", pa.float32()),
        ("octave", pa.int32()),
        ("class_id", pa.int32()),
        ("source_index", pa.int32()),
    ]
)

# Image pairs: a pair (a, b) scores image a's keypoints (the queries) against image b's. Every
# per-pair table names the pair by ``pair`` = b, its target image, the HPatches key (pairs (1, k)).
# A scene with a pair whose query image is not 1 (a folder dataset's pairs.txt, ``pairs: all``)
# writes its tables with the extra column ``query_image`` = a before ``pair`` (before ``query`` in
# the tables without ``pair``): with_query_image. A scene of (1, k) pairs keeps its task's schemas
# (descbench.tasks) exactly, so HPatches and demo results stay bit for bit what they were; readers
# take a table without ``query_image`` as query image 1 (descbench.tasks.base.concat_rows).
QUERY_IMAGE = "query_image"


def with_query_image(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the int8 column ``query_image`` (image a of the pair) before ``pair``, or
    before ``query`` when the table has no ``pair`` column."""
    names = schema.names
    at = names.index("pair") if "pair" in names else names.index("query")
    return schema.insert(at, pa.field(QUERY_IMAGE, pa.int8()))


# The k of precision/hit at k that keypoint retrieval records per query (descbench.metrics.retrieval)
# and sums per pair (descbench.tasks.retrieval.PAIRS).
HIT_KS = (1, 2, 3, 4, 5, 10, 20, 50, 100, 1000)


@lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version()}
    for dist in ("descbench", "numpy", "numba", "pyarrow", "pandas"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            # descbench reached through PYTHONPATH (the conda deployment), not installed: its own version
            out[dist] = __import__("descbench").__version__ if dist == "descbench" else "not-installed"
    import cv2

    out["opencv"] = cv2.__version__
    return tuple(out.items())


def versions() -> dict[str, str]:
    """Versions recorded in every file's provenance (looked up once per process)."""
    return dict(_versions())


@lru_cache(maxsize=1)
def lock_sha256(root: Path | None = None) -> str | None:
    """sha256 of the pinned, hashed lock of the dependency set, ``envs/lock-py311-linux-x86_64.txt``
    of the checkout this package runs from (``root``: that checkout, by default the one holding this
    file, ``workflow/descbench/io.py``); None when there is none (the package was installed from a
    wheel). It names the lock the checkout carries: whether the environment was installed from it
    is for README's install command to ensure, and ``versions`` records what actually ran."""
    import hashlib

    lock = (root or Path(__file__).resolve().parents[2]) / "envs" / "lock-py311-linux-x86_64.txt"
    try:
        return hashlib.sha256(lock.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def provenance(stage: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Every result file's metadata: the stage, its parameters, the package versions that ran and the
    sha256 of the checkout's dependency lock (:func:`lock_sha256`, None without one), then ``extra``."""
    return {"stage": stage, "params": params, "versions": versions(), "lock_sha256": lock_sha256(), **extra}


def table_from_rows(rows: list[dict[str, Any]], schema: pa.Schema, what: str) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)`` that refuses rows whose keys are not exactly
    the schema's columns (``from_pylist`` alone drops unknown keys and fills missing ones with
    nulls, so a column deleted from a schema or misspelled in the code vanishes silently).

    ``what`` names the table in the error. A mismatch is a programming error (the code that
    computes the rows and the schema in this module disagree), not bad input: it raises
    ``ValueError`` naming the table, the row and the missing / unknown columns.
    """
    names = schema.names
    expected = set(names)
    for i, row in enumerate(rows):
        if row.keys() != expected:
            missing = [n for n in names if n not in row]
            unknown = sorted(set(row) - expected)
            raise ValueError(
                f"{what}: row {i} does not match its schema (missing columns: {missing or 'none'}; "
                f"columns not in the schema: {unknown or 'none'}); make the code that builds the rows and "
                f"the schema in descbench/io.py agree"
            )
    return pa.Table.from_pylist(rows, schema=schema)


def write_table(table: pa.Table, path: Path | str, meta: dict[str, Any]) -> None:
    """Write ``table`` with ``meta`` as JSON provenance, atomically and reproducibly."""
    path = Path(path)
    md = dict(table.schema.metadata or {})
    md[META_KEY] = json.dumps(meta, sort_keys=True, default=_json_default).encode()
    table = table.replace_schema_metadata(md)
    try:
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd", compression_level=3)
    except OSError as exc:
        raise _named_write_error(exc, path) from exc


def write_text(path: Path | str, text: str) -> None:
    """Write ``text`` atomically (temporary name, then rename; no partial file under either name)."""
    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(text)
    except OSError as exc:
        raise _named_write_error(exc, path) from exc


def _named_write_error(exc: OSError, path: Path) -> OSError:
    """``exc`` naming the file being written (pyarrow's errors name no file, ``os.replace``'s
    name the temporary one), so that the job's one-line message (descbench.cli) names it."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, os.strerror(exc.errno), str(path))  # OSError picks the subclass (PermissionError, ...)


def rebuild_hint(path: Path | str) -> str:
    """How to rebuild a broken or missing result file so that the rerun really rebuilds it.

    Snakemake's outputs are per job: a scene batch folder (``.../batch000/``) or another folder
    or file. Deleting only a file inside an output folder leaves the folder, which Snakemake
    counts as complete, so the rerun would fail again on the same file. Deleting the folder
    that holds the file always works (at worst it rebuilds that folder's other outputs too).
    """
    import shlex

    folder = Path(path).parent
    try:  # never `rm -r` the working folder or one of its parents (a file passed by hand)
        risky = Path.cwd().resolve().is_relative_to(folder.resolve())
    except OSError:
        risky = True
    if risky:
        return f"delete it, `rm {shlex.quote(str(path))}`, and rerun the command that wrote it"
    what = "the job output it belongs to" if folder.name.startswith("batch") and folder.name[5:].isdigit() else "the folder that holds it"
    return (f"delete {what}, `rm -r {shlex.quote(str(folder))}`, and rerun the same snakemake command: "
            "it rebuilds that folder and what depends on it (deleting only the file is not enough)")


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


def read_table(path: Path | str, schema: pa.Schema | None = None, with_meta: bool = True) -> tuple[pa.Table, dict[str, Any] | None]:
    """Read a descbench Parquet file and its provenance; check columns against ``schema``.
    ``with_meta=False`` skips parsing the provenance JSON (returned as None; the report reads
    thousands of per-scene files and needs only their rows)."""
    return _read_table(Path(path), None, schema, with_meta)


def read_table_sha256(path: Path | str, schema: pa.Schema | None = None) -> tuple[pa.Table, dict[str, Any], str]:
    """:func:`read_table` of a file read once, with the hex SHA-256 of the bytes it read (what
    :func:`descbench.fileops.file_sha256` gives for the file): for a job that records the digest
    of a file it reads, without reading it a second time."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path} ({exc}); {rebuild_hint(path)}") from exc
    table, meta = _read_table(path, pa.BufferReader(data), schema, True)
    return table, meta, bytes_sha256(data)


def _read_table(path: Path, source, schema: pa.Schema | None, with_meta: bool):
    """:func:`read_table` of ``path``, read from ``source`` (its bytes) when given."""
    try:
        # ParquetFile, not pq.read_table: the latter imports pyarrow.dataset and pandas (~0.15 s
        # of every job's start-up) for features descbench does not use.
        with pq.ParquetFile(path if source is None else source) as fh:
            table = fh.read()
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read {path} ({exc}); {rebuild_hint(path)}") from exc
    md = table.schema.metadata or {}
    if META_KEY not in md:
        raise DataError(f"{path} has no descbench provenance metadata (it was not written by descbench); {rebuild_hint(path)}")
    if schema is not None:
        for f in schema:
            if f.name not in table.column_names or table.schema.field(f.name).type != f.type:
                raise DataError(f"{path}: column '{f.name}' missing or of the wrong type; {rebuild_hint(path)}")
    return table, json.loads(md[META_KEY]) if with_meta else None


def read_meta(path: Path | str) -> dict[str, Any]:
    try:
        md = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"cannot read {path} ({exc}); {rebuild_hint(path)}") from exc
    if META_KEY not in md:
        raise DataError(f"{path} has no descbench provenance metadata; {rebuild_hint(path)}")
    return json.loads(md[META_KEY])


def descriptors_table(image: np.ndarray, desc: np.ndarray) -> pa.Table:
    """Descriptor rows as a FixedSizeList column (float32 for L2, uint8 packed bits for Hamming)."""
    n, d = desc.shape
    value_type = pa.uint8() if desc.dtype == np.uint8 else pa.float32()
    values = pa.array(np.ascontiguousarray(desc).reshape(-1), type=value_type)
    col = pa.FixedSizeListArray.from_arrays(values, d)
    return pa.table({"image": pa.array(image, type=pa.int8()), "descriptor": col})


_PRIMITIVE = {
    pa.int8(): np.int8, pa.int32(): np.int32, pa.int64(): np.int64, pa.uint8(): np.uint8,
    pa.float32(): np.float32, pa.float64(): np.float64,
}


def column_array(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column as a NumPy array: numbers from the Arrow data buffer (read-only views), strings as
    an object array.

    Why not ``to_numpy()``: in pyarrow it imports pandas, ~0.15 s of every job's start-up, for
    columns that are plain null-free buffers here.
    """
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return column_array(col.chunk(0))
        col = col.combine_chunks()
    if col.null_count:
        raise DataError(f"unexpected nulls in a {col.type} column ({col.null_count} of {len(col)})")
    if pa.types.is_string(col.type):
        return np.array(col.to_pylist(), dtype=object)
    dtype = _PRIMITIVE.get(col.type)
    if dtype is None:
        return col.to_numpy(zero_copy_only=False)
    itemsize = np.dtype(dtype).itemsize
    out = np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * itemsize)
    out.flags.writeable = False  # a view of the table's memory: writing to it would change the table
    return out


def descriptors_array(table: pa.Table) -> np.ndarray:
    col = table.column("descriptor").combine_chunks()
    d = col.type.list_size
    return column_array(col.flatten()).reshape(len(col), d)


# HPatches patch descriptors (descbench.patches.describe): one file per (descriptor, sequence), rows
# sorted by (type, index); ``type`` indexes descbench.patches.PATCH_TYPES (0 = ref, 1..5 = e1..e5,
# 6..10 = h1..h5, 11..15 = t1..t5), ``index`` is the patch's row in its strip; plus the column
# ``descriptor`` (FixedSizeList of float32, or of uint8 packed bits, as descriptors_table).
PATCH_DESCRIPTORS = pa.schema([("type", pa.int8()), ("index", pa.int32())])


def patch_descriptors_table(type_index: np.ndarray, index: np.ndarray, desc: np.ndarray) -> pa.Table:
    """Patch descriptor rows (schema :data:`PATCH_DESCRIPTORS` + ``descriptor``)."""
    d = desc.shape[1]
    value_type = pa.uint8() if desc.dtype == np.uint8 else pa.float32()
    values = pa.array(np.ascontiguousarray(desc).reshape(-1), type=value_type)
    return pa.table({"type": pa.array(type_index, type=pa.int8()), "index": pa.array(index, type=pa.int32()),
                     "descriptor": pa.FixedSizeListArray.from_arrays(values, d)})
