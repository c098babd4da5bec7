"""descbench.patches.layout: strip I/O, header-only counts, dataset validation, patch names."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.errors import DataError
from descbench.patches import PATCH_SIZE, PATCH_TYPES
from descbench.patches.layout import (
    list_patch_sequences,
    parse_patch_name,
    parse_strip_name,
    patch_name,
    png_size,
    read_sequence,
    read_strip,
    sequence_patch_count,
    source_type,
    strip_name,
    strip_patch_count,
    type_source,
    validate_patch_dataset,
    write_strip,
)


def random_patches(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, PATCH_SIZE, PATCH_SIZE), dtype=np.uint8)


def write_sequence(seq_dir: Path, n: int, counts: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """16 strips of ``n`` random patches (``counts`` overrides N per type)."""
    out = {}
    for i, t in enumerate(PATCH_TYPES):
        out[t] = random_patches((counts or {}).get(t, n), seed=i)
        write_strip(seq_dir / f"{t}.png", out[t])
    return out


def raises_naming(path: Path, *fragments: str):
    """pytest.raises(DataError) whose message names ``path`` and every fragment."""
    pattern = re.escape(str(path)) + "".join(f"(?s:.*){re.escape(f)}" for f in fragments)
    return pytest.raises(DataError, match=pattern)


# --------------------------------------------------------------------------- round trip


def test_write_read_round_trip_is_exact_and_reproducible(tmp_path: Path) -> None:
    patches = random_patches(7)
    write_strip(tmp_path / "a.png", patches)
    write_strip(tmp_path / "b.png", patches.copy())
    back = read_strip(tmp_path / "a.png")
    assert back.dtype == np.uint8 and back.shape == (7, PATCH_SIZE, PATCH_SIZE)
    np.testing.assert_array_equal(back, patches)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    # the file is the vertical stack, readable by any PNG reader (hpatches-benchmark: imread(path, 0))
    strip = cv2.imread(str(tmp_path / "a.png"), cv2.IMREAD_GRAYSCALE)
    assert strip.shape == (7 * PATCH_SIZE, PATCH_SIZE)
    np.testing.assert_array_equal(strip[3 * PATCH_SIZE : 4 * PATCH_SIZE], patches[3])
    # atomic write: no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png"]


@pytest.mark.bad_input
def test_write_strip_rejects_bad_arrays(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_strip(tmp_path / "x.png", np.zeros((0, PATCH_SIZE, PATCH_SIZE), np.uint8))
    with pytest.raises(ValueError):
        write_strip(tmp_path / "x.png", np.zeros((2, 64, 65), np.uint8))
    with pytest.raises(ValueError):
        write_strip(tmp_path / "x.png", np.zeros((2, 65, 65), np.float32))
    assert not (tmp_path / "x.png").exists()


# --------------------------------------------------------------------------- bad strips


@pytest.mark.bad_input
def test_missing_and_empty_strip(tmp_path: Path) -> None:
    with raises_naming(tmp_path / "ref.png", "does not exist", "hpatches-release"):
        read_strip(tmp_path / "ref.png")
    (tmp_path / "e1.png").write_bytes(b"")
    with raises_naming(tmp_path / "e1.png", "empty"):
        read_strip(tmp_path / "e1.png")


def test_height_not_multiple_of_65(tmp_path: Path) -> None:
    path = tmp_path / "h1.png"
    cv2.imwrite(str(path), np.zeros((131, 65), np.uint8))
    with raises_naming(path, "height 131 is not a multiple of 65"):
        read_strip(path)
    with raises_naming(path, "height 131 is not a multiple of 65"):
        strip_patch_count(path)


def test_width_not_65(tmp_path: Path) -> None:
    path = tmp_path / "t1.png"
    cv2.imwrite(str(path), np.zeros((130, 64), np.uint8))
    with raises_naming(path, "width 64", "expected 65"):
        read_strip(path)
    with raises_naming(path, "width 64"):
        strip_patch_count(path)


@pytest.mark.bad_input
def test_colour_png_with_different_channels_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "ref.png"
    img = np.zeros((130, 65, 3), np.uint8)
    img[..., 2] = 200  # red differs from blue and green
    cv2.imwrite(str(path), img)
    with raises_naming(path, "colour", "channels differ"):
        read_strip(path)


def test_colour_png_with_equal_channels_is_read_as_gray(tmp_path: Path) -> None:
    path = tmp_path / "ref.png"
    gray = random_patches(2).reshape(-1, PATCH_SIZE)
    cv2.imwrite(str(path), cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR))
    assert cv2.imread(str(path), cv2.IMREAD_UNCHANGED).ndim == 3  # really a 3-channel file
    np.testing.assert_array_equal(read_strip(path).reshape(-1, PATCH_SIZE), gray)


@pytest.mark.bad_input
def test_alpha_and_16_bit_pngs_are_errors(tmp_path: Path) -> None:
    rgba = tmp_path / "e2.png"
    cv2.imwrite(str(rgba), np.full((65, 65, 4), 100, np.uint8))
    with raises_naming(rgba, "4 channels"):
        read_strip(rgba)
    deep = tmp_path / "e3.png"
    cv2.imwrite(str(deep), np.full((65, 65), 1000, np.uint16))
    with raises_naming(deep, "uint16"):
        read_strip(deep)


@pytest.mark.bad_input
def test_truncated_png(tmp_path: Path) -> None:
    path = tmp_path / "e4.png"
    write_strip(path, random_patches(4))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with raises_naming(path, "cannot be decoded", "truncated"):
        read_strip(path)


@pytest.mark.bad_input
def test_not_a_png_header(tmp_path: Path) -> None:
    path = tmp_path / "e5.png"
    path.write_bytes(b"this is not a png file at all, just text")
    with raises_naming(path, "not a PNG"):
        png_size(path)
    with raises_naming(path, "cannot be decoded"):
        read_strip(path)


# --------------------------------------------------------------------------- sequences


def test_header_count_equals_decoded_count(tmp_path: Path) -> None:
    for n in (1, 2, 13):
        path = tmp_path / f"s{n}.png"
        write_strip(path, random_patches(n))
        assert png_size(path) == (PATCH_SIZE, n * PATCH_SIZE)
        assert strip_patch_count(path) == len(read_strip(path)) == n
    seq = tmp_path / "v_x"
    written = write_sequence(seq, 9)
    assert sequence_patch_count(seq) == 9
    got = read_sequence(seq)
    assert list(got) == list(PATCH_TYPES)
    for t in PATCH_TYPES:
        np.testing.assert_array_equal(got[t], written[t])


@pytest.mark.bad_input
def test_strips_with_different_counts(tmp_path: Path) -> None:
    seq = tmp_path / "i_y"
    write_sequence(seq, 5, counts={"h3": 6})
    pattern = rf"{re.escape(str(seq / 'ref.png'))} holds 5 patches but {re.escape(str(seq / 'h3.png'))} holds 6"
    with pytest.raises(DataError, match=pattern):
        sequence_patch_count(seq)
    with pytest.raises(DataError, match=r"ref\.png holds 5 patches but .*h3\.png holds 6"):
        read_sequence(seq)


@pytest.mark.bad_input
def test_list_and_validate_dataset(tmp_path: Path) -> None:
    root = tmp_path / "hpatches-release"
    write_sequence(root / "v_b", 3)
    write_sequence(root / "i_a", 4)
    (root / "notes").mkdir()  # no ref.png: not a sequence
    (root / "README.txt").write_text("x")
    assert list_patch_sequences(root) == ["i_a", "v_b"]
    assert validate_patch_dataset(root, ["i_a", "v_b"]) == {"i_a": 4, "v_b": 3}

    (root / "v_b" / "t4.png").unlink()
    (root / "i_a" / "e1.png").unlink()
    with pytest.raises(DataError) as err:
        validate_patch_dataset(root, ["i_a", "v_b", "v_missing"])
    msg = str(err.value)
    for fragment in ("i_a/e1.png", "v_b/t4.png", "v_missing/", str(root), "hpatches-release.tar.gz"):
        assert fragment in msg
    with raises_naming(root / "v_b", "missing t4.png"):
        sequence_patch_count(root / "v_b")
    with raises_naming(tmp_path / "nowhere", "does not exist"):
        list_patch_sequences(tmp_path / "nowhere")


# --------------------------------------------------------------------------- names


def test_patch_and_strip_names_round_trip() -> None:
    assert strip_name("v_boat", "e3") == "v_boat.e3"
    assert patch_name("v_boat", "e3", 125) == "v_boat.e3.125"
    assert parse_patch_name("v_boat.e3.125") == ("v_boat", "e3", 125)
    assert parse_patch_name("i_ajuntament.ref.0") == ("i_ajuntament", "ref", 0)
    assert parse_strip_name("i_dc.t5") == ("i_dc", "t5")
    for seq in ("i_ajuntament", "v_x-y"):
        for t in PATCH_TYPES:
            assert parse_patch_name(patch_name(seq, t, 42)) == (seq, t, 42)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "bad", ["v_boat.e3", "v_boat.e6.1", "v_boat.x.1", "v_boat.e3.-1", "v_boat.e3.01", "v_boat.e3.1.2",
            ".e3.1", "v boat.e3.1", "v_boat.e3.", "v_boat.e3. 1", ""],
)
def test_malformed_patch_names(bad: str) -> None:
    with pytest.raises(DataError, match="patch name|sequence name|patch type"):
        parse_patch_name(bad)


@pytest.mark.bad_input
def test_malformed_name_parts() -> None:
    with pytest.raises(DataError, match="sequence name"):
        patch_name("v.boat", "e1", 0)
    with pytest.raises(DataError, match="patch type"):
        patch_name("v_boat", "e0", 0)
    with pytest.raises(DataError, match="patch index"):
        patch_name("v_boat", "e1", -1)
    with pytest.raises(DataError, match="patch index"):
        patch_name("v_boat", "e1", True)
    with pytest.raises(DataError, match="strip name"):
        parse_strip_name("v_boat")


def test_hpatches_type_convention() -> None:
    # ref = image 1 un-jittered; e/h/t<n> = image n+1 with easy/hard/tough jitter
    assert type_source("ref") == (1, None)
    assert type_source("e1") == (2, "e")
    assert type_source("h3") == (4, "h")
    assert type_source("t5") == (6, "t")
    assert sorted(type_source(t) for t in PATCH_TYPES[1:]) == sorted((k, j) for j in "eht" for k in range(2, 7))
    for t in PATCH_TYPES[1:]:
        k, j = type_source(t)
        assert source_type(k, j) == t
