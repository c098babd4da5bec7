"""Datasets that must not be trusted blindly: extra or ambiguous files in a scene folder, badly
scaled homographies, repeated scenes, bad patch sequence names and archives whose links escape."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from descbench.datasets import list_scenes
from descbench.datasets.download import ARCHIVE_ROOT, extract_archive
from descbench.datasets.layout import read_homography, scene_files, write_homography
from descbench.errors import ConfigError, DataError

# --------------------------------------------------------------------------- scene folders


def _oxford(scene: Path) -> Path:
    """The scene renamed to the Oxford layout (img1.ppm .. img6.ppm, H1to2p .. H1to6p)."""
    for k in range(1, 7):
        (scene / f"{k}.ppm").rename(scene / f"img{k}.ppm")
    for k in range(2, 7):
        (scene / f"H_1_{k}").rename(scene / f"H1to{k}p")
    return scene


def test_a_seventh_image_with_its_homography_is_a_longer_scene(scene: Path):
    shutil.copy(scene / "6.ppm", scene / "7.ppm")
    shutil.copy(scene / "H_1_6", scene / "H_1_7")
    files = scene_files(scene)
    assert files.n_images == 7 and [p.name for p in files.images][-1] == "7.ppm" and sorted(files.homographies) == list(range(2, 8))


@pytest.mark.bad_input
def test_a_seventh_image_without_its_homography_names_the_missing_file(scene: Path):
    shutil.copy(scene / "6.ppm", scene / "7.ppm")
    with pytest.raises(DataError) as exc:
        scene_files(scene)
    msg = str(exc.value)
    assert str(scene) in msg and "missing H_1_7" in msg and "scene of 7 images" in msg and "pairs.txt" in msg


@pytest.mark.bad_input
@pytest.mark.parametrize("extra", ["0.ppm", "01.ppm", "img3.ppm", "H_1_1", "H_1_7", "H1to3p"])
def test_any_sequence_like_extra_file_is_an_error(scene: Path, extra: str):
    (scene / extra).write_bytes(b"x")
    with pytest.raises(DataError, match=rf"{scene}.*not among its images 1\.\.6 and homographies .*HPatches layout.*: "
                                        rf"{extra}\. .*move the extra files out"):
        scene_files(scene)


@pytest.mark.bad_input
@pytest.mark.parametrize("extra, missing", [("8.png", "7"), ("12.JPG", "7, 8, 9, 10, 11")])
def test_a_gap_in_the_numbering_names_the_missing_images(scene: Path, extra: str, missing: str):
    (scene / extra).write_bytes(b"x")
    with pytest.raises(DataError, match=rf"{scene} has images up to {extra} but no image {missing} \(7\.ppm.*"
                                        r"numbered 1\.\.N without gaps"):
        scene_files(scene)


@pytest.mark.bad_input
def test_a_single_image_is_not_a_scene(scene: Path):
    for k in range(2, 7):
        (scene / f"{k}.ppm").unlink()
        (scene / f"H_1_{k}").unlink()
    with pytest.raises(DataError, match=r"at least 2 images numbered from 1.*found 1\.ppm"):
        scene_files(scene)


@pytest.mark.bad_input
def test_oxford_layout_extra_files(scene: Path):
    _oxford(scene)
    assert [p.name for p in scene_files(scene).images] == [f"img{k}.ppm" for k in range(1, 7)]
    (scene / "img7.ppm").write_bytes(b"x")
    (scene / "H1to7p").write_text("1 0 0 0 1 0 0 0 1\n")
    assert scene_files(scene).n_images == 7  # a longer sequence in the Oxford layout
    (scene / "H_1_2").write_text("1 0 0 0 1 0 0 0 1\n")  # the other layout's name: not used
    (scene / "7.ppm").write_bytes(b"x")
    with pytest.raises(DataError, match=r"images 1\.\.7 and homographies \(img1\.\.imgN and H1to2p\.\.H1toNp \(Oxford "
                                        r"layout\)\): 7\.ppm, H_1_2\."):
        scene_files(scene)


def test_files_that_are_not_images_of_the_sequence_are_allowed(scene: Path):
    before = scene_files(scene)
    # D2-Net convention precomputed features (descbench.precomputed), notes, hidden files, folders
    for name in ("1.ppm.d2-net", "6.ppm.r2d2.npz", "7.ppm.sift", "README", "README.md", "notes.txt",
                 ".DS_Store", ".7.ppm", "._1.png", "H_1_2.txt", "H_1_2.bak", "thumb_1.ppm", "1.ppm~"):
        (scene / name).write_bytes(b"x")
    (scene / "features").mkdir()
    assert scene_files(scene) == before


@pytest.mark.bad_input
def test_missing_files_also_mention_extra_ones(scene: Path):
    (scene / "H_1_6").unlink()
    (scene / "H_1_2").rename(scene / "H_1_9")
    with pytest.raises(DataError, match=r"missing H_1_2, H_1_6.*also holds H_1_9"):
        scene_files(scene)


@pytest.mark.bad_input
@pytest.mark.parametrize("layout", ["hpatches", "oxford"])
def test_two_candidate_files_for_one_image(scene: Path, layout: str):
    stem = "img1" if layout == "oxford" else "1"
    if layout == "oxford":
        _oxford(scene)
    shutil.copy(scene / f"{stem.replace('1', '2')}.ppm", scene / f"{stem}.png")  # a different image
    with pytest.raises(DataError) as exc:
        scene_files(scene)
    msg = str(exc.value)
    assert str(scene) in msg and f"candidate files for image 1: {stem}.png, {stem}.ppm" in msg
    assert "Keep exactly one" in msg and "move the other(s) out" in msg


@pytest.mark.bad_input
def test_candidates_are_matched_whatever_the_extension_case(scene: Path):
    (scene / "3.PNG").write_bytes(b"x")
    with pytest.raises(DataError, match="candidate files for image 3: 3.PNG, 3.ppm"):
        scene_files(scene)


@pytest.mark.bad_input
def test_unchecked_scene_files_do_not_list_the_folder(tmp_path: Path):
    # check_exists=False is what a rule creating the scene uses: the folder need not exist
    files = scene_files(tmp_path / "nowhere" / "v_x", check_exists=False, n_images=6)
    assert files.images[0].name == "1.ppm" and len(files.images) == 6 and sorted(files.homographies) == [2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="needs n_images"):
        scene_files(tmp_path / "nowhere" / "v_x", check_exists=False)


# --------------------------------------------------------------------------- homographies


@pytest.mark.bad_input
def test_huge_translation_is_ill_conditioned_not_singular(tmp_path: Path):
    path = tmp_path / "H_1_2"
    path.write_text("1 0 1e9\n0 1 0\n0 0 1\n")
    with pytest.raises(DataError) as exc:
        read_homography(path)
    msg = str(exc.value)
    assert str(path) in msg and "ill-conditioned, not singular" in msg and "singular (" not in msg
    assert "condition number is 1e+18" in msg and "determinant 1 after" in msg
    assert "maps pixel (0, 0) to (1e+09, 0)" in msg and "far outside any plausible image" in msg
    assert "fix or regenerate it" in msg


@pytest.mark.bad_input
def test_tiny_scale_is_ill_conditioned_not_singular(tmp_path: Path):
    path = tmp_path / "H_1_2"
    path.write_text("1e-13 0 0\n0 1 0\n0 0 1\n")
    with pytest.raises(DataError, match=r"ill-conditioned, not singular.*singular values from 1e-13 to 1, an implausible squeeze"):
        read_homography(path)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "text, rank",
    [("0 0 0 0 0 0 0 0 0", 0), ("1 2 3 2 4 6 0 0 1", 2), ("1 0 0 0 0 0 0 0 1", 2),
     ("1 2 3 2 4.000000000001 6 0 0 1", 2), ("1 1 1 1 1 1 1 1 1", 1)],
)
def test_singular_matrices_are_still_reported_as_singular(tmp_path: Path, text: str, rank: int):
    path = tmp_path / "H_1_2"
    path.write_text(text)
    with pytest.raises(DataError) as exc:
        read_homography(path)
    msg = str(exc.value)
    assert str(path) in msg and f"is singular (not invertible: numerical rank {rank} of 3" in msg
    assert "ill-conditioned" not in msg and "fix or regenerate the file" in msg


def test_valid_homographies_are_read_unchanged(scene: Path, tmp_path: Path):
    H = read_homography(scene / "H_1_2")
    assert H[2, 2] == 1.0 and np.linalg.cond(H) < 1e12
    big = np.array([[0.5, 0.1, 2000.0], [0.02, 1.3, -900.0], [1e-4, 2e-5, 1.0]])  # a strong but valid one
    write_homography(tmp_path / "H", big * 3)
    np.testing.assert_allclose(read_homography(tmp_path / "H"), big, rtol=1e-9)


# --------------------------------------------------------------------------- config: scenes


@pytest.mark.bad_input
def test_repeated_scene_names_the_key_the_scene_and_the_positions():
    cfg = {"dataset": "demo", "demo": {"seed": 0}, "data_dir": "unused",
           "scenes": ["v_coins", "i_rocket", "v_coins", "v_coins"]}
    with pytest.raises(ConfigError) as exc:
        list_scenes(cfg)
    msg = str(exc.value)
    assert "scenes lists a scene more than once" in msg
    assert "'v_coins' at scenes[0] and scenes[2] and scenes[3]" in msg and "i_rocket" not in msg
    assert "remove the repeated entries" in msg
    cfg["scenes"] = ["v_coins", "i_rocket"]
    assert list_scenes(cfg) == ["v_coins", "i_rocket"]


# --------------------------------------------------------------------------- patch sequence names


def _patch_folder(root: Path, name: str) -> Path:
    seq = root / name
    seq.mkdir(parents=True)
    (seq / "ref.png").write_bytes(b"")  # only listed, never read
    return seq


@pytest.mark.bad_input
def test_patch_sequence_folder_with_a_dot_is_named_early(tmp_path: Path):
    from descbench.patches.layout import list_patch_sequences

    _patch_folder(tmp_path, "v_ok")
    assert list_patch_sequences(tmp_path) == ["v_ok"]
    bad = _patch_folder(tmp_path, "v_a.2")
    _patch_folder(tmp_path, "i_b c")
    with pytest.raises(DataError) as exc:
        list_patch_sequences(tmp_path)
    msg = str(exc.value)
    assert f"{tmp_path / 'i_b c'}, {bad} have invalid names" in msg
    assert "[^.,\\s]+" in msg and "no '.', ',' or whitespace" in msg and "rename the folder" in msg


def test_hidden_and_non_sequence_folders_are_not_checked(tmp_path: Path):
    from descbench.patches.layout import list_patch_sequences

    _patch_folder(tmp_path, "v_ok")
    _patch_folder(tmp_path, ".v_hidden.2")
    (tmp_path / "docs.v1").mkdir()  # no ref.png: not a sequence folder
    assert list_patch_sequences(tmp_path) == ["v_ok"]


# --------------------------------------------------------------------------- archives


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes | None = None, link: str | None = None,
             kind: bytes = tarfile.REGTYPE) -> None:
    info = tarfile.TarInfo(name)
    if link is not None:
        info.type, info.linkname = kind if kind != tarfile.REGTYPE else tarfile.SYMTYPE, link
        tar.addfile(info)
    elif kind == tarfile.DIRTYPE:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    else:
        info.size = len(data or b"")
        tar.addfile(info, io.BytesIO(data or b""))


CHAIN_DIR = f"{ARCHIVE_ROOT}/i_chain"
CHAIN = [("l", "m/k/n/o/p/../../../../.."), *[(c, ".") for c in "mknop"]]  # l first: harmless when created


def _chain_tar(path: Path, links=CHAIN, extra: tuple[tuple[str, bytes], ...] = ()) -> Path:
    with tarfile.open(path, "w:gz" if path.name.endswith(".gz") else "w") as tar:
        _tar_add(tar, CHAIN_DIR, kind=tarfile.DIRTYPE)
        _tar_add(tar, f"{CHAIN_DIR}/1.ppm", b"P5 1 1 255 x")
        for name, target in links:
            _tar_add(tar, f"{CHAIN_DIR}/{name}", link=target)
        for name, data in extra:
            _tar_add(tar, name, data)
    return path


def _nothing_left(out: Path) -> None:
    assert not (out / ARCHIVE_ROOT).exists() and not (out / f".{ARCHIVE_ROOT}.extracting").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("data_filter", [True, False], ids=["data_filter", "no_data_filter"])
@pytest.mark.parametrize("order", ["link_first", "link_last"])
def test_symlink_chain_escaping_the_data_dir_is_rejected(tmp_path: Path, monkeypatch, data_filter: bool, order: str):
    if not data_filter:  # Python < 3.11.4 has no tarfile.data_filter: descbench's own checks alone
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    links = CHAIN if order == "link_first" else CHAIN[1:] + CHAIN[:1]
    archive = _chain_tar(tmp_path / "chain.tar", links)
    out = tmp_path / "data" / "hpatches"
    with pytest.raises(DataError) as exc:
        extract_archive(archive, out)
    msg = str(exc.value)
    assert str(archive) in msg and f"symlink '{CHAIN_DIR}/l'" in msg and "outside" in msg
    assert f"delete {archive} and download it again" in msg
    _nothing_left(out)
    assert not any(os.path.islink(p) for p in (tmp_path / "data").rglob("*"))


@pytest.mark.bad_input
@pytest.mark.parametrize("data_filter", [True, False], ids=["data_filter", "no_data_filter"])
def test_nothing_is_written_through_the_chain(tmp_path: Path, monkeypatch, data_filter: bool):
    if not data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = _chain_tar(tmp_path / "chain.tar.gz", extra=((f"{CHAIN_DIR}/l/escaped", b"owned"),))
    out = tmp_path / "a" / "b" / "c" / "d"
    with pytest.raises(DataError, match=rf"file '{CHAIN_DIR}/l/escaped' .*outside the (extraction folder|destination)"):
        extract_archive(archive, out)
    assert not list(tmp_path.rglob("escaped"))
    _nothing_left(out)


@pytest.mark.bad_input
def test_escaping_link_outside_the_dataset_folder_is_rejected_too(tmp_path: Path):
    archive = _chain_tar(tmp_path / "a.tar", links=[], extra=(("__MACOSX/x", b"x"),))
    with tarfile.open(archive, "a") as tar:
        for name, target in CHAIN:
            _tar_add(tar, f"__MACOSX/{name}", link=target)
    with pytest.raises(DataError, match=r"symlink '__MACOSX/l' -> .* resolves outside the extraction folder once"):
        extract_archive(archive, tmp_path / "out")
    _nothing_left(tmp_path / "out")


@pytest.mark.bad_input
def test_direct_escape_is_caught_when_the_link_is_created(tmp_path: Path, monkeypatch):
    archive = _chain_tar(tmp_path / "a.tar", links=[("l", "../../../outside")])
    if hasattr(tarfile, "data_filter"):  # the standard library's filter sees it first
        with pytest.raises(DataError, match=rf"symlink '{CHAIN_DIR}/l' is refused by the tar 'data' extraction filter"):
            extract_archive(archive, tmp_path / "out")
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    with pytest.raises(DataError, match=r"-> '\.\./\.\./\.\./outside' points outside the extraction folder;"):
        extract_archive(archive, tmp_path / "out")


@pytest.mark.bad_input
@pytest.mark.parametrize("order", ["link_first", "link_last"])
def test_the_record_of_links_alone_catches_the_chain(tmp_path: Path, monkeypatch, order: str):
    """os.path.realpath resolves lexically where it gives up (loops, over-long paths); the data
    filter relies on it. Simulate that: the record of the links must still catch everything."""
    links = CHAIN if order == "link_first" else CHAIN[1:] + CHAIN[:1]
    archive = _chain_tar(tmp_path / "a.tar", links, extra=((f"{CHAIN_DIR}/l/escaped", b"owned"),))
    monkeypatch.setattr(os.path, "realpath", os.path.abspath)
    with pytest.raises(DataError, match=rf"'{CHAIN_DIR}/l(/escaped)?' .*outside the extraction folder"):
        extract_archive(archive, tmp_path / "a" / "b" / "c" / "d" / "e")
    monkeypatch.undo()
    assert not list(tmp_path.rglob("escaped"))


@pytest.mark.bad_input
def test_the_file_system_is_asked_too(tmp_path: Path, monkeypatch):
    """The second opinion: with a record that ignored links, realpath still catches the chain."""
    from descbench.datasets import download

    def lexical(self, parts, name):
        return tuple(p for p in os.path.normpath(os.path.join(*parts) if parts else ".").split(os.sep) if p != ".")

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    monkeypatch.setattr(download._Tree, "walk", lexical)
    archive = _chain_tar(tmp_path / "a.tar", extra=((f"{CHAIN_DIR}/l/escaped", b"owned"),))
    with pytest.raises(DataError, match=rf"file '{CHAIN_DIR}/l/escaped' leads outside the extraction folder"):
        extract_archive(archive, tmp_path / "a" / "b" / "c" / "d" / "e")
    assert not list(tmp_path.rglob("escaped"))
    archive = _chain_tar(tmp_path / "b.tar")
    with pytest.raises(DataError, match=rf"symlink '{CHAIN_DIR}/l' .* resolves outside the extraction folder once"):
        extract_archive(archive, tmp_path / "out")


@pytest.mark.bad_input
def test_link_inside_the_archive_but_outside_the_dataset_folder(tmp_path: Path):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        _tar_add(tar, "top/i_x/1.ppm", b"x")
        _tar_add(tar, "other/secret", b"x")  # extracted, then discarded with the temporary folder
        _tar_add(tar, "top/i_x/l", link="../../other/secret")
    with pytest.raises(DataError, match=r"symlink 'top/i_x/l' -> '\.\./\.\./other/secret' resolves outside the dataset folder"):
        extract_archive(archive, tmp_path / "out")
    _nothing_left(tmp_path / "out")


@pytest.mark.bad_input
def test_link_loop_is_rejected(tmp_path: Path):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        _tar_add(tar, "i_x/1.ppm", b"x")
        _tar_add(tar, "i_x/a", link="b")
        _tar_add(tar, "i_x/b", link="a")
    with pytest.raises(DataError, match="more than 40 symlinks"):
        extract_archive(archive, tmp_path / "out")


@pytest.mark.bad_input
@pytest.mark.parametrize("link", ["/etc", "a\\..\\..\\x", "C:x"])
def test_absolute_or_backslash_link_text_is_rejected(tmp_path: Path, monkeypatch, link: str):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)  # descbench's own check
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        _tar_add(tar, "i_x/1.ppm", b"x")
        _tar_add(tar, "i_x/l", link=link)
    with pytest.raises(DataError, match=r"symlink 'i_x/l' points to .*empty, absolute or with a backslash"):
        extract_archive(archive, tmp_path / "out")


@pytest.mark.parametrize("data_filter", [True, False], ids=["data_filter", "no_data_filter"])
def test_links_that_stay_inside_are_extracted(tmp_path: Path, monkeypatch, data_filter: bool):
    if not data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        _tar_add(tar, "./", kind=tarfile.DIRTYPE)
        _tar_add(tar, "./i_x/1.ppm", b"one")
        _tar_add(tar, "./i_x/same", link="1.ppm")
        _tar_add(tar, "./v_y/1.ppm", link="../i_x/./same")
        _tar_add(tar, "./v_y/copy", link="i_x/1.ppm", kind=tarfile.LNKTYPE)
    root = extract_archive(archive, tmp_path / "out")
    assert os.readlink(root / "v_y" / "1.ppm") == "../i_x/./same"
    assert (root / "v_y" / "1.ppm").read_bytes() == b"one" and (root / "v_y" / "copy").read_bytes() == b"one"
    assert not (root / "v_y" / "copy").is_symlink()


@pytest.mark.bad_input
def test_hard_link_to_a_missing_member_is_rejected(tmp_path: Path):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        _tar_add(tar, "i_x/1.ppm", b"x")
        _tar_add(tar, "i_x/h", link="i_x/nothing", kind=tarfile.LNKTYPE)
    with pytest.raises(DataError, match=r"hard link 'i_x/h' -> 'i_x/nothing' does not name a file"):
        extract_archive(archive, tmp_path / "out")


def _zip_symlink(zf: zipfile.ZipFile, name: str, target: str) -> None:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix: the high 16 bits of external_attr are the st_mode
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    zf.writestr(info, target)


def _chain_zip(path: Path, links, extra: tuple[tuple[str, bytes], ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{CHAIN_DIR}/1.ppm", b"P5 1 1 255 x")
        for name, target in links:
            _zip_symlink(zf, f"{CHAIN_DIR}/{name}", target)
        for name, data in extra:
            zf.writestr(name, data)
    return path


@pytest.mark.bad_input
@pytest.mark.parametrize("links", [CHAIN, CHAIN[1:] + CHAIN[:1], [("l", "../../../../outside")]],
                         ids=["chain_link_first", "chain_link_last", "direct"])
def test_zip_symlinks_cannot_escape(tmp_path: Path, links):
    archive = _chain_zip(tmp_path / "chain.zip", links)
    out = tmp_path / "data" / "hpatches"
    with pytest.raises(DataError, match=rf"{archive}: symlink '{CHAIN_DIR}/l' -> .* outside .*delete {archive}"):
        extract_archive(archive, out)
    _nothing_left(out)


@pytest.mark.bad_input
def test_nothing_is_written_through_a_zip_symlink(tmp_path: Path):
    archive = _chain_zip(tmp_path / "a.zip", CHAIN, extra=((f"{CHAIN_DIR}/l/escaped", b"owned"),))
    with pytest.raises(DataError, match="escaped' leads outside the extraction folder"):
        extract_archive(archive, tmp_path / "a" / "b" / "c" / "d" / "e")
    assert not list(tmp_path.rglob("escaped"))


def test_zip_symlink_inside_becomes_a_link(tmp_path: Path):
    archive = _chain_zip(tmp_path / "a.zip", [("same", "1.ppm")])
    root = extract_archive(archive, tmp_path / "out")
    link = root / "i_chain" / "same"
    assert link.is_symlink() and os.readlink(link) == "1.ppm" and link.read_bytes() == b"P5 1 1 255 x"


@pytest.mark.bad_input
def test_patch_archive_with_the_chain_is_rejected(tmp_path: Path):
    from descbench.patches.download import PATCHES_ROOT, obtain_patches

    base = tmp_path / "data" / "hpatches"
    base.mkdir(parents=True)
    archive = base / f"{PATCHES_ROOT}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        _tar_add(tar, f"{PATCHES_ROOT}/v_seq/ref.png", b"x")
        for name, target in CHAIN:
            _tar_add(tar, f"{PATCHES_ROOT}/v_seq/{name}", link=target)
    with pytest.raises(DataError, match=rf"{archive}: symlink '{PATCHES_ROOT}/v_seq/l'.*outside"):
        obtain_patches([], None, tmp_path / "data", sequences=["v_seq"])
    assert not (base / PATCHES_ROOT).exists()


def test_read_grey_is_opencvs_grey_decode_or_the_workbenchs_bgr2gray(pristine):
    import cv2
    import yaml

    from descbench.datasets.layout import GREY_METHODS, read_grey

    differ = 0
    for image in sorted(pristine.glob("*.ppm")):
        a, b = read_grey(image), read_grey(image, "bgr2gray")
        assert np.array_equal(a, cv2.imread(str(image), cv2.IMREAD_GRAYSCALE))
        assert np.array_equal(b, cv2.cvtColor(cv2.imread(str(image), cv2.IMREAD_COLOR), cv2.COLOR_BGR2GRAY))
        differ += int((a != b).sum())
    assert differ > 0  # not two names for one image
    with pytest.raises(ValueError, match="grey method must be one of imread, bgr2gray"):
        read_grey(image, "luma")
    schema = yaml.safe_load((Path(__file__).resolve().parents[3] / "workflow/schemas/config.schema.yaml").read_text())
    text = str(schema)
    assert "'grey': {'enum': ['imread', 'bgr2gray']}" in text and GREY_METHODS == ("imread", "bgr2gray")
