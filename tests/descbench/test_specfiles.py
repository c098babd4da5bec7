"""descbench.specfiles: settings as spec files and user files as digest files, rewritten only
when their content changes (the modification time is what Snakemake compares)."""

from __future__ import annotations

import hashlib
import json
import os

from descbench.specfiles import digest_file, digest_files, digest_name, group_digest_name, read_spec, spec_value_text, write_if_changed, write_spec


def test_spec_is_written_once_per_value_and_read_back(tmp_path):
    p = tmp_path / "s.json"
    assert write_spec(p, '{"a": [1, 2]}') is True
    first = p.read_text()
    assert spec_value_text(first) == '{"a": [1, 2]}' and read_spec(p) == {"a": [1, 2]}
    assert write_spec(p, '{"a": [1, 2]}') is False and p.read_text() == first
    assert write_spec(p, '{"a": [1, 3]}') is True and read_spec(p) == {"a": [1, 3]}
    assert json.loads(p.read_text())["written"] != json.loads(first)["written"]  # a new token per write


def test_plain_json_is_read_as_it_is_and_is_not_a_spec(tmp_path):
    p = tmp_path / "plain.json"
    p.write_text('{"value": 1}')
    assert read_spec(p) == {"value": 1}
    assert spec_value_text('{"value": 1}') is None and spec_value_text("[]") is None


def test_write_if_changed_keeps_an_unchanged_file_untouched(tmp_path):
    p = tmp_path / "t.txt"
    assert write_if_changed(p, "x") is True
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    assert write_if_changed(p, "x") is False and p.stat().st_mtime_ns == 1_000_000_000
    assert write_if_changed(p, "y") is True and p.read_text() == "y"


def test_digest_holds_the_sha256_and_changes_only_with_the_content(tmp_path):
    f = tmp_path / "w.pth"
    f.write_bytes(b"weights")
    d = digest_file(f, tmp_path / "digests")
    assert d.name == digest_name(f) and d.name.startswith("w.pth.") and d.name.endswith(".sha256")
    text = d.read_text()
    assert text.startswith(f"sha256 {hashlib.sha256(b'weights').hexdigest()}\npath {f.resolve()}\n")
    os.utime(f, ns=(5, 5))  # touched, same bytes: the digest stays as it was
    assert digest_file(f, tmp_path / "digests").read_text() == text
    f.write_bytes(b"other weights")
    assert hashlib.sha256(b"other weights").hexdigest() in digest_file(f, tmp_path / "digests").read_text()


def test_same_names_in_two_folders_get_two_digests_and_write_false_writes_nothing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert digest_name(tmp_path / "a" / "m.onnx") != digest_name(tmp_path / "b" / "m.onnx")
    out = digest_file(tmp_path / "a" / "missing.onnx", tmp_path / "d", write=False)
    assert out == tmp_path / "d" / digest_name(tmp_path / "a" / "missing.onnx") and not (tmp_path / "d").exists()


def test_a_dry_run_preview_leaves_the_digest_as_it_was(tmp_path):
    f = tmp_path / "w"
    f.write_bytes(b"1")
    d = digest_file(f, tmp_path / "digests")
    before = d.read_text()
    f.write_bytes(b"2")
    preview = digest_file(f, tmp_path / "digests", preview=tmp_path / "preview")
    assert d.read_text() == before and preview.parent == tmp_path / "preview"
    assert hashlib.sha256(b"2").hexdigest() in preview.read_text()


def test_one_digest_for_a_group_changes_only_with_some_files_content(tmp_path):
    files = [tmp_path / n for n in ("2.ppm", "1.ppm", "H_1_2")]
    for i, f in enumerate(files):
        f.write_bytes(bytes([i]) * 10)
    d = digest_files(files, tmp_path / "digests")
    assert d.name == group_digest_name(reversed(files)) and d.name.startswith("3-files.")
    expected = "".join(f"sha256 {hashlib.sha256(f.read_bytes()).hexdigest()}\npath {f.resolve()}\n"
                       for f in sorted(files))
    text = d.read_text()
    assert text.startswith(expected) and text.count("written ") == 1
    os.utime(files[0], ns=(5, 5))  # touched, same bytes: unchanged
    assert digest_files(files, tmp_path / "digests").read_text() == text
    files[2].write_bytes(b"another homography")
    changed = digest_files(files, tmp_path / "digests").read_text()
    assert changed != text and hashlib.sha256(b"another homography").hexdigest() in changed
    assert group_digest_name(files[:2]) != group_digest_name(files)
    assert digest_files(files[:2], tmp_path / "other", write=False) == tmp_path / "other" / group_digest_name(files[:2])
    assert not (tmp_path / "other").exists()
