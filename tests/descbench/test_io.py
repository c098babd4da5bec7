"""Parquet I/O (descbench.io): schemas, provenance, column reading and the errors that name the
broken file, each checked against pyarrow's own reading of the file or a hand-written
expectation.

Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
"Mutation testing").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import raises_naming
from descbench import io
from descbench.errors import DataError


def _table():
    return pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": pa.array([0.5, 1.5, 2.5], pa.float64())})


# ----------------------------------------------------------------------------- provenance and writing


def test_provenance_keys():
    p = io.provenance("score", {"tau_px": 3.0}, scene="v_x", n=2)
    assert p == {"stage": "score", "params": {"tau_px": 3.0}, "versions": io.versions(), "lock_sha256": io.lock_sha256(),
                 "scene": "v_x", "n": 2}
    assert {"python", "numpy", "pyarrow", "opencv"} <= set(p["versions"])


def test_write_table_creates_folders_and_stores_sorted_json_provenance(tmp_path: Path):
    path = tmp_path / "a" / "b" / "c.parquet"
    meta = {"z": 1, "a": {"y": 2, "b": 3}}
    io.write_table(_table(), path, meta)
    raw = pq.read_schema(path).metadata[io.META_KEY]
    assert raw == json.dumps(meta, sort_keys=True).encode()
    assert raw.index(b'"a"') < raw.index(b'"z"')
    # the same inputs give a byte-identical file, whatever the key order of the metadata
    io.write_table(_table(), tmp_path / "d.parquet", {"a": {"b": 3, "y": 2}, "z": 1})
    assert path.read_bytes() == (tmp_path / "d.parquet").read_bytes()
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
    assert sorted(p.name for p in path.parent.iterdir()) == ["c.parquet"]  # no temporary left


def test_write_table_converts_numpy_scalars_and_paths(tmp_path: Path):
    meta = {"i": np.int64(7), "f": np.float32(0.5), "p": Path("x") / "y.png", "l": [np.int32(1)]}
    io.write_table(_table(), tmp_path / "t.parquet", meta)
    got = io.read_meta(tmp_path / "t.parquet")
    assert got == {"i": 7, "f": 0.5, "p": str(Path("x") / "y.png"), "l": [1]}
    assert isinstance(got["i"], int) and isinstance(got["f"], float)
    with pytest.raises(TypeError, match=r"^not JSON serialisable: <class 'object'>$"):
        io.write_table(_table(), tmp_path / "u.parquet", {"o": object()})
    assert not (tmp_path / "u.parquet").exists()


def test_write_text_creates_folders(tmp_path: Path):
    io.write_text(tmp_path / "x" / "y" / "z.txt", "hello\n")
    assert (tmp_path / "x" / "y" / "z.txt").read_text() == "hello\n"


# ----------------------------------------------------------------------------- reading


@pytest.mark.bad_input
def test_read_table_checks_columns_and_names_the_file(tmp_path: Path):
    path = tmp_path / "t.parquet"
    io.write_table(_table(), path, {"k": 1})
    table, meta = io.read_table(path, pa.schema([("a", pa.int32()), ("b", pa.float64())]))
    assert table.column_names == ["a", "b"] and meta == {"k": 1}
    table, meta = io.read_table(path, with_meta=False)
    assert meta is None and table.num_rows == 3
    with pytest.raises(DataError, match=rf"^{path}: column 'c' missing or of the wrong type; "):
        io.read_table(path, pa.schema([("a", pa.int32()), ("c", pa.int32())]))
    with pytest.raises(DataError, match=rf"^{path}: column 'a' missing or of the wrong type; "):
        io.read_table(path, pa.schema([("a", pa.int64())]))


@pytest.mark.bad_input
def test_read_table_sha256_reads_once_what_read_table_and_file_sha256_read(tmp_path: Path):
    from descbench.fileops import file_sha256

    path = tmp_path / "t.parquet"
    io.write_table(_table(), path, {"k": 1})
    schema = pa.schema([("a", pa.int32()), ("b", pa.float64())])
    table, meta, digest = io.read_table_sha256(path, schema)
    assert table.equals(io.read_table(path)[0]) and meta == {"k": 1} and digest == file_sha256(path)
    with pytest.raises(DataError, match=rf"^{path}: column 'c' missing or of the wrong type; "):
        io.read_table_sha256(path, pa.schema([("c", pa.int32())]))
    (tmp_path / "t.txt").write_text("not parquet")
    for bad, what in ((tmp_path / "missing.parquet", "No such file"), (tmp_path / "t.txt", "magic bytes")):
        raises_naming(lambda: io.read_table_sha256(bad), f"cannot read {bad} (", what, "rerun the same snakemake command")


@pytest.mark.bad_input
def test_files_without_provenance_are_named(tmp_path: Path):
    path = tmp_path / "plain.parquet"
    pq.write_table(_table(), path)
    with pytest.raises(DataError, match=rf"^{path} has no descbench provenance metadata"):
        io.read_table(path)
    with pytest.raises(DataError, match=rf"^{path} has no descbench provenance metadata"):
        io.read_meta(path)


def test_column_array_equals_pyarrow_for_every_kind_of_column():
    ints = pa.array(np.arange(10, dtype=np.int32))
    np.testing.assert_array_equal(io.column_array(ints), np.arange(10))
    assert io.column_array(ints).dtype == np.int32
    # a slice: the data buffer starts before the column (offset)
    sliced = ints.slice(3, 4)
    assert io.column_array(sliced).tolist() == [3, 4, 5, 6]
    # several chunks
    chunked = pa.chunked_array([pa.array([1.5, 2.5]), pa.array([3.5])])
    got = io.column_array(chunked)
    assert got.tolist() == [1.5, 2.5, 3.5] and got.dtype == np.float64
    one = pa.chunked_array([pa.array([1, 2], pa.int8())])
    assert io.column_array(one).tolist() == [1, 2] and io.column_array(one).dtype == np.int8
    strings = io.column_array(pa.array(["v_a", "i_b"]))
    assert strings.dtype == object and strings.tolist() == ["v_a", "i_b"]
    # a type outside the fast path (bool, uint16) still reads correctly
    assert io.column_array(pa.array([True, False, True])).tolist() == [True, False, True]
    u16 = io.column_array(pa.array([7, 65535], pa.uint16()))
    assert u16.tolist() == [7, 65535]
    with pytest.raises(DataError, match=r"^unexpected nulls in a int32 column \(1 of 3\)$"):
        io.column_array(pa.array([1, None, 3], pa.int32()))


@pytest.mark.parametrize("dtype, arrow", [(np.float32, pa.float32()), (np.uint8, pa.uint8())])
def test_descriptor_tables_round_trip(tmp_path: Path, dtype, arrow):
    rng = np.random.default_rng(0)
    desc = rng.integers(0, 200, (5, 3)).astype(dtype)
    t = io.descriptors_table(np.array([1, 1, 2, 2, 3]), desc)
    assert t.column_names == ["image", "descriptor"]
    assert t.schema.field("image").type == pa.int8()
    assert t.schema.field("descriptor").type == pa.list_(arrow, 3)
    io.write_table(t, tmp_path / "d.parquet", {})
    back, _ = io.read_table(tmp_path / "d.parquet")
    got = io.descriptors_array(back)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, desc)
    assert io.column_array(back.column("image")).tolist() == [1, 1, 2, 2, 3]

    p = io.patch_descriptors_table(np.array([0, 0, 6, 6, 15]), np.array([0, 1, 0, 1, 0]), desc)
    assert p.column_names == ["type", "index", "descriptor"]
    assert p.schema.field("type").type == pa.int8() and p.schema.field("index").type == pa.int32()
    assert p.schema.field("descriptor").type == pa.list_(arrow, 3)
    np.testing.assert_array_equal(io.descriptors_array(p), desc)
    assert io.column_array(p.column("type")).tolist() == [0, 0, 6, 6, 15]
    assert io.column_array(p.column("index")).tolist() == [0, 1, 0, 1, 0]


def test_float64_descriptors_are_stored_as_float32():
    desc = np.array([[0.1, 0.2], [0.3, 0.4]])  # float64 in, the L2 kind is float32
    for t in (io.descriptors_table(np.array([1, 2]), desc), io.patch_descriptors_table(np.array([0, 1]), np.array([0, 0]), desc)):
        assert t.schema.field("descriptor").type == pa.list_(pa.float32(), 2)
        np.testing.assert_array_equal(io.descriptors_array(t), desc.astype(np.float32))


def test_reading_number_columns_does_not_import_pandas(tmp_path: Path):
    # column_array's reason to exist: to_numpy() imports pandas (~0.15 s of every job's start-up)
    import subprocess
    import sys

    path = tmp_path / "t.parquet"
    io.write_table(pa.table({"i": pa.array(np.arange(4, dtype=np.int8)), "f": pa.array(np.arange(4.0))}), path, {})
    code = ("import sys; from descbench import io; t, _ = io.read_table(sys.argv[1]); "
            "v = [io.column_array(t.column(c)).tolist() for c in ('i', 'f')]; "
            "print(v, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[[0, 1, 2, 3], [0.0, 1.0, 2.0, 3.0]] False"
    # the same values in this process (numbers straight from the data buffers, dtypes kept)
    t, _ = io.read_table(path)
    i, f = io.column_array(t.column("i")), io.column_array(t.column("f"))
    assert (i.dtype, f.dtype) == (np.int8, np.float64) and [i.tolist(), f.tolist()] == [[0, 1, 2, 3], [0.0, 1.0, 2.0, 3.0]]


# ----------------------------------------------------------------------------- errors naming files


def test_rebuild_hint_names_the_folder_to_delete(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    batch = tmp_path / "results" / "batch007" / "v_x.parquet"
    assert io.rebuild_hint(batch) == (
        f"delete the job output it belongs to, `rm -r {batch.parent}`, and rerun the same snakemake command: "
        "it rebuilds that folder and what depends on it (deleting only the file is not enough)")
    for name in ("scores", "batch", "batchx1"):  # not a batch folder: batch + digits only
        p = tmp_path / name / "f.parquet"
        assert io.rebuild_hint(p).startswith(f"delete the folder that holds it, `rm -r {p.parent}`, and rerun"), name
    spaced = tmp_path / "my results" / "f.parquet"
    assert f"`rm -r '{spaced.parent}'`" in io.rebuild_hint(spaced)
    # the file sits in the working folder (or above it): never suggest `rm -r` of it
    here = tmp_path / "f g.parquet"
    assert io.rebuild_hint(here) == f"delete it, `rm '{here}'`, and rerun the command that wrote it"
    monkeypatch.chdir(tmp_path / "..")
    assert io.rebuild_hint(here).startswith(f"delete the folder that holds it, `rm -r {tmp_path}`")


@pytest.mark.bad_input
def test_unreadable_files_are_named_with_the_rebuild_hint(tmp_path: Path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not a parquet file")
    hint = io.rebuild_hint(path)
    for call in (lambda: io.read_table(path), lambda: io.read_meta(path)):
        with pytest.raises(DataError, match=rf"^cannot read {path} \(") as exc:
            call()
        assert str(exc.value).endswith(f"); {hint}")


@pytest.mark.bad_input
def test_write_errors_name_the_file_being_written(tmp_path: Path):
    blocker = tmp_path / "plain_file"
    blocker.write_text("x")
    target = blocker / "sub" / "t.parquet"  # its folder cannot be made: a file is in the way
    try:
        (blocker / "sub").mkdir(parents=True)
    except OSError as e:
        expected_errno = e.errno
    for write in (lambda: io.write_table(_table(), target, {}), lambda: io.write_text(target, "x")):
        with pytest.raises(OSError) as exc:
            write()
        assert exc.value.filename == str(target)
        assert exc.value.errno == expected_errno and exc.value.strerror == os.strerror(expected_errno)
        assert type(exc.value) is type(OSError(expected_errno, "x"))  # the errno's subclass


@pytest.mark.bad_input
def test_write_errors_without_errno_pass_through(tmp_path: Path, monkeypatch):
    boom = OSError("disk said no")
    def fail(*args, **kwargs):
        raise boom
    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError) as exc:
        io.write_table(_table(), tmp_path / "t.parquet", {})
    assert exc.value is boom
    assert list(tmp_path.iterdir()) == []


def test_column_array_is_a_read_only_view_so_the_table_cannot_change_through_it():
    import pyarrow as pa

    from descbench.io import column_array

    t = pa.table({"a": pa.array([1.5, 2.5], pa.float64())})
    a = column_array(t.column("a"))
    with pytest.raises(ValueError):
        a[0] = 99.0
    assert t.column("a").to_pylist() == [1.5, 2.5]


def test_with_query_image_inserts_an_int8_column_before_pair_or_query():
    """Tables of pairs (a, b) get ``query_image`` (image a) right before ``pair``; tables without
    ``pair`` right before ``query``."""
    pairs = pa.schema([("scene", pa.string()), ("pair", pa.int8()), ("n", pa.int64())])
    queries = pa.schema([("scene", pa.string()), ("query", pa.int64()), ("ap", pa.float64())])
    a = io.with_query_image(pairs)
    assert a.names == ["scene", io.QUERY_IMAGE, "pair", "n"] and a.field(io.QUERY_IMAGE).type == pa.int8()
    assert io.with_query_image(queries).names == ["scene", io.QUERY_IMAGE, "query", "ap"]
    both = pa.schema([("query", pa.int64()), ("pair", pa.int8())])
    assert io.with_query_image(both).names == ["query", io.QUERY_IMAGE, "pair"]


def test_read_table_sha256_returns_the_table_of_the_bytes_it_hashed(tmp_path: Path, monkeypatch):
    """The table and the digest come from one read: a file replaced right after that read (a
    rerun writing its output) cannot give the new table with the old file's digest."""
    from descbench.fileops import bytes_sha256

    path, newer = tmp_path / "t.parquet", tmp_path / "n.parquet"
    io.write_table(_table(), path, {"run": 1})
    io.write_table(_table().slice(0, 1), newer, {"run": 2})
    first = path.read_bytes()
    read_bytes = Path.read_bytes

    def read_then_replaced(self):
        data = read_bytes(self)
        if self == path:
            os.replace(newer, path)
        return data

    monkeypatch.setattr(Path, "read_bytes", read_then_replaced)
    table, meta, digest = io.read_table_sha256(path)
    assert table.num_rows == 3 and meta["run"] == 1 and digest == bytes_sha256(first)


def test_write_table_compresses_with_zstd_level_3(tmp_path: Path):
    """Files are zstd level 3: the bytes equal pyarrow's own writing of the same table at that
    level and differ from its default level and level 4 (so a changed level, which would change
    every result file's bytes, fails here)."""
    rng = np.random.default_rng(0)
    table = pa.table({"a": pa.array(rng.integers(0, 50, 200_000), pa.int32()),
                      "b": pa.array(np.round(rng.normal(size=200_000), 2), pa.float64())})
    path = tmp_path / "t.parquet"
    io.write_table(table, path, {"k": 1})
    written = pq.ParquetFile(path).read()  # with descbench's metadata, as written
    for level, same in ((3, True), (None, False), (4, False)):
        other = tmp_path / f"level{level}.parquet"
        kw = {} if level is None else {"compression_level": level}
        pq.write_table(written, other, compression="zstd", **kw)
        assert (other.read_bytes() == path.read_bytes()) is same, level
