"""descbench.featurefiles: hloc, glue-factory and D2-Net feature files, each built by hand here in
the tool's own layout (as its code writes them: hloc c13273bd extract_features.py /
match_features.py, glue-factory 2d17e3b3 export_predictions.py + eval/hpatches.py), read back and
compared exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import DEMO_SCENE, raises_naming
from descbench.errors import ConfigError
from descbench.errors import DataError
from descbench.featurefiles import (ImageFeatures, PairMatches, SceneImageNames, check_inside, d2net_path,
                                    from_gluefactory_xy, gluefactory_hpatches_blocks, gluefactory_hpatches_name,
                                    gluefactory_hpatches_pair, hloc_pair_name, read_gluefactory_predictions,
                                    read_hloc_features, read_hloc_matches, to_gluefactory_xy, write_d2net,
                                    write_gluefactory_predictions, write_hloc_features, write_hloc_matches)
from descbench.precomputed import load_features

h5py = pytest.importorskip("h5py", reason="the interop extra (pip install -e '.[interop]'); README's test command installs it")

RNG = np.random.default_rng(7)


def hloc_group(f, name: str, n: int, d: int = 8, as_half: bool = True, w: int = 200, h: int = 150, **extra):
    """One image's group as hloc's extract_features.main writes it: keypoints N x 2, descriptors D x N,
    scores N, image_size (W, H) of the original image (int64, from a tuple of ints), the extractor's
    other outputs; float32 arrays stored as float16 when as_half (hloc's default); the 'uncertainty'
    attribute on keypoints."""
    kp = np.stack([RNG.uniform(0, w - 1, n), RNG.uniform(0, h - 1, n)], 1).astype(np.float32)
    arrays = {"keypoints": kp, "descriptors": RNG.standard_normal((d, n)).astype(np.float32),
              "scores": RNG.uniform(0, 1, n).astype(np.float32), "image_size": np.array((w, h)), **extra}
    if as_half:
        arrays = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in arrays.items()}
    grp = f.create_group(name)
    for k, v in arrays.items():
        grp.create_dataset(k, data=v)
    grp["keypoints"].attrs["uncertainty"] = 1.0
    return arrays


def test_hloc_features_are_read_exactly_with_descriptors_transposed_back(tmp_path):
    path = tmp_path / "features.h5"
    with h5py.File(path, "w") as f:
        a = hloc_group(f, "i_rocket/1.ppm", 5, scales=np.ones(5, np.float32), oris=np.zeros(5, np.float32))
        b = hloc_group(f, "v_coins/2.ppm", 0, as_half=False)  # an image without keypoints
    got = read_hloc_features(path)
    assert sorted(got) == ["i_rocket/1.ppm", "v_coins/2.ppm"]
    r = got["i_rocket/1.ppm"]
    # float16 -> float32 is exact; hloc's x, y are descbench's (both: pixel centres at integers)
    assert r.keypoints.dtype == np.float32 and np.array_equal(r.keypoints, a["keypoints"].astype(np.float32))
    assert r.descriptors.shape == (5, 8) and np.array_equal(r.descriptors, a["descriptors"].T.astype(np.float32))
    assert np.array_equal(r.scores, a["scores"].astype(np.float32)) and r.image_size == (200, 150)
    e = got["v_coins/2.ppm"]
    assert e.keypoints.shape == (0, 2) and e.descriptors.shape == (0, 8) and e.scores.shape == (0,)
    assert np.array_equal(b["keypoints"], e.keypoints)


def test_hloc_features_written_are_hlocs_layout_and_read_back_exactly(tmp_path):
    feats = {"i_rocket/1.ppm": ImageFeatures(RNG.uniform(0, 99, (4, 2)).astype(np.float32),
                                             RNG.standard_normal((4, 16)).astype(np.float32),
                                             RNG.uniform(0, 1, 4).astype(np.float32), (100, 80)),
             "i_rocket/2.ppm": ImageFeatures(RNG.uniform(0, 99, (3, 2)).astype(np.float32),
                                             RNG.integers(0, 256, (3, 32)).astype(np.uint8))}
    path = tmp_path / "out.h5"
    write_hloc_features(path, feats)
    with h5py.File(path, "r") as f:  # what hloc's readers (utils/io.py get_keypoints) open
        g = f["i_rocket"]["1.ppm"]
        assert set(g) == {"keypoints", "descriptors", "scores", "image_size"}
        assert g["descriptors"].shape == (16, 4)  # D x N
        assert g["keypoints"].attrs["uncertainty"] == 1.0
        assert list(g["image_size"][()]) == [100, 80]
        assert np.array_equal(g["keypoints"][()], feats["i_rocket/1.ppm"].keypoints)
        assert set(f["i_rocket"]["2.ppm"]) == {"keypoints", "descriptors"}
    back = read_hloc_features(path)
    for name, feat in feats.items():
        for field in ("keypoints", "descriptors", "scores"):
            want, got = getattr(feat, field), getattr(back[name], field)
            assert (want is None and got is None) or (got.dtype == want.dtype and np.array_equal(got, want)), (name, field)
        assert back[name].image_size == feat.image_size


def test_hloc_pair_names_are_hlocs_and_both_layouts_of_matches_are_read(tmp_path):
    assert hloc_pair_name("i_rocket/1.ppm", "i_rocket/2.ppm") == "i_rocket-1.ppm/i_rocket-2.ppm"
    assert hloc_pair_name("a/b/c.jpg", "d.jpg", "_") == "a-b-c.jpg_d.jpg"
    names = ["i_rocket/1.ppm", "i_rocket/2.ppm", "i_rocket/3.ppm"]
    m12 = np.array([1, -1, 0, 2], dtype=np.int16)  # match_features.writer_fn: .short(), scores .half()
    s12 = np.array([0.5, 0, 0.25, 1], dtype=np.float16)
    path = tmp_path / "matches.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("i_rocket-1.ppm/i_rocket-2.ppm")
        g.create_dataset("matches0", data=m12)
        g.create_dataset("matching_scores0", data=s12)
        g = f.create_group("i_rocket-1.ppm_i_rocket-3.ppm")  # names_to_pair_old: '_' (and i_rocket has one too)
        g.create_dataset("matches0", data=np.array([-1, 0], dtype=np.int16))
    got = read_hloc_matches(path, names)
    assert sorted(got) == [("i_rocket/1.ppm", "i_rocket/2.ppm"), ("i_rocket/1.ppm", "i_rocket/3.ppm")]
    p = got[("i_rocket/1.ppm", "i_rocket/2.ppm")]
    assert p.matches0.tolist() == [1, -1, 0, 2] and np.array_equal(p.scores0, s12.astype(np.float32))
    assert got[("i_rocket/1.ppm", "i_rocket/3.ppm")].scores0 is None
    # written back in hloc's current layout, read back the same
    out = tmp_path / "back.h5"
    write_hloc_matches(out, got)
    with h5py.File(out, "r") as f:
        assert "i_rocket-1.ppm/i_rocket-3.ppm" in f and f["i_rocket-1.ppm/i_rocket-2.ppm/matches0"][()].tolist() == [1, -1, 0, 2]
    again = read_hloc_matches(out, names)
    assert again.keys() == got.keys()
    for k in got:
        assert np.array_equal(again[k].matches0, got[k].matches0)


def gf_pair(f, name: str, n0: int, n1: int, kp0=None, d: int = 4, descriptors: bool = True, w=200, h=150):
    """One pair's group as glue-factory's export_predictions writes it (keys of
    HPatchesPipeline.export_keys, float32, keypoints in the corner convention: >= 0.5)."""
    kp0 = kp0 if kp0 is not None else np.stack([RNG.uniform(0.5, w - 0.5, n0), RNG.uniform(0.5, h - 0.5, n0)], 1).astype(np.float32)
    kp1 = np.stack([RNG.uniform(0.5, w - 0.5, n1), RNG.uniform(0.5, h - 0.5, n1)], 1).astype(np.float32)
    m0 = np.full(n0, -1, np.int64)
    m0[: min(n0, n1)] = np.arange(min(n0, n1))[::-1]
    m1 = np.full(n1, -1, np.int64)
    m1[m0[m0 >= 0]] = np.flatnonzero(m0 >= 0)
    arrays = {"keypoints0": kp0, "keypoints1": kp1, "keypoint_scores0": np.ones(n0, np.float32),
              "keypoint_scores1": np.full(n1, 0.5, np.float32), "matches0": m0, "matches1": m1,
              "matching_scores0": (m0 >= 0).astype(np.float32), "matching_scores1": (m1 >= 0).astype(np.float32)}
    if descriptors:
        arrays["descriptors0"] = np.arange(n0 * d, dtype=np.float32).reshape(n0, d)
        arrays["descriptors1"] = -np.arange(n1 * d, dtype=np.float32).reshape(n1, d)
    grp = f.create_group(name)
    for k, v in arrays.items():
        grp.create_dataset(k, data=v)
    return arrays


def test_gluefactory_hpatches_pair_names_decode_the_item_index():
    # items: 5 per sequence, q = 2..6; sequence j's items are 5j .. 5j + 4
    assert gluefactory_hpatches_pair("i_ajuntament/0.ppm") == ("i_ajuntament", 1, 2, 0)
    assert gluefactory_hpatches_pair("v_coins/14.ppm") == ("v_coins", 1, 6, 2)
    assert gluefactory_hpatches_pair("v_coins/15.ppm") == ("v_coins", 1, 2, 3)
    assert gluefactory_hpatches_pair("v_coins/1.png") is None and gluefactory_hpatches_pair("1.ppm") is None


def test_gluefactory_predictions_are_read_exactly_in_descbenchs_convention(tmp_path):
    path = tmp_path / "predictions.h5"
    with h5py.File(path, "w") as f:
        a = gf_pair(f, "v_coins/10.ppm", 6, 4)
        gf_pair(f, "v_coins/11.ppm", 6, 3, descriptors=False)
    got = read_gluefactory_predictions(path)
    assert sorted(got) == ["v_coins/10.ppm", "v_coins/11.ppm"]
    p = got["v_coins/10.ppm"]
    # corner convention -> pixel centres at integers: minus 0.5, exact (hand: a float32 grid value - 0.5)
    assert np.array_equal(p.keypoints[0], np.float32(a["keypoints0"]) - np.float32(0.5))
    assert np.array_equal(from_gluefactory_xy(np.array([[0.5, 1.0], [3.25, 149.5]], np.float32)),
                          np.array([[0.0, 0.5], [2.75, 149.0]], np.float32))
    assert np.array_equal(p.descriptors[1], a["descriptors1"]) and np.array_equal(p.scores[1], a["keypoint_scores1"])
    assert np.array_equal(p.matches[0].matches0, a["matches0"]) and np.array_equal(p.matches[1].matches0, a["matches1"])
    assert got["v_coins/11.ppm"].descriptors == (None, None)


def brute_mutual_nn(d0: np.ndarray, d1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """matches0, matches1 (int64, -1 = unmatched) of mutual nearest neighbours by brute force: the
    full float64 L2 distance matrix, argmin (lowest index on ties), the mutual check of glue-factory's
    nearest_neighbor_matcher.mutual_check."""
    m0, m1 = np.full(len(d0), -1, np.int64), np.full(len(d1), -1, np.int64)
    if len(d0) and len(d1):
        dist = ((d0.astype(np.float64)[:, None, :] - d1.astype(np.float64)[None]) ** 2).sum(-1)
        nn0, nn1 = dist.argmin(1), dist.argmin(0)
        for i, j in enumerate(nn0):
            if nn1[j] == i:
                m0[i], m1[j] = j, i
    return m0, m1


def gf_hpatches_file(path: Path, blocks: dict, sizes=(7, 9, 0, 5, 8, 6), d: int = 16, mutual: bool = True) -> dict:
    """glue-factory's HPatches predictions.h5 built by hand (gluefactory 2d17e3b3: datasets/hpatches.py
    items, export_predictions.py arrays as its SuperPoint + NearestNeighborMatcher give them): per
    sequence (-> its block j) pairs (1, q), q = 2..6, as group '<seq>/<5j + q - 2>.ppm'; image 1's
    features the same in all five; keypoints float32 >= 0.5 (corner convention), unit-norm float32
    descriptors N x D, matches int64 and matching_scores float32 (1 matched, 0 not) of the mutual
    nearest neighbours (``mutual``), or of a fixed non-mutual rule. Returns {group: {key: array}}."""
    per_image = {}
    for seq in blocks:
        for k, n in enumerate(sizes, 1):
            xy = np.stack([RNG.uniform(0.5, 199.5, n), RNG.uniform(0.5, 149.5, n)], 1).astype(np.float32)
            desc = RNG.standard_normal((n, d))
            per_image[seq, k] = (xy, (desc / np.linalg.norm(desc, axis=1, keepdims=True)).astype(np.float32),
                                 RNG.uniform(0, 1, n).astype(np.float32))
    written = {}
    with h5py.File(path, "w") as f:
        for seq, j in blocks.items():
            for q in range(2, 7):
                arrays = {}
                for side, k in ((0, 1), (1, q)):
                    xy, desc, sc = per_image[seq, k]
                    arrays |= {f"keypoints{side}": xy, f"keypoint_scores{side}": sc, f"descriptors{side}": desc}
                if mutual:
                    m0, m1 = brute_mutual_nn(arrays["descriptors0"], arrays["descriptors1"])
                else:  # every keypoint of image 1 to keypoint 0 of image q: not a mutual-NN result
                    m0 = np.zeros(len(arrays["keypoints0"]), np.int64) if len(arrays["keypoints1"]) else \
                        np.full(len(arrays["keypoints0"]), -1, np.int64)
                    m1 = np.full(len(arrays["keypoints1"]), -1, np.int64)
                arrays |= {"matches0": m0, "matches1": m1, "matching_scores0": (m0 > -1).astype(np.float32),
                           "matching_scores1": (m1 > -1).astype(np.float32)}
                name = f"{seq}/{5 * j + q - 2}.ppm"
                g = f.create_group(name)
                for key, v in arrays.items():
                    g.create_dataset(key, data=v)
                written[name] = arrays
    return written


def h5_groups(path: Path) -> dict:
    """{group: {dataset: array}} of a predictions.h5, read with h5py alone."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.setdefault(obj.parent.name.strip("/"), {}).__setitem__(
            name.rsplit("/", 1)[-1], obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def sequences_of(preds: dict) -> dict:
    """descbench's per-image features of a read predictions.h5: {seq: {k: ImageFeatures}}."""
    out = {}
    for name, p in preds.items():
        seq, _, q, _ = gluefactory_hpatches_pair(name)
        for side, k in ((0, 1), (1, q)):
            out.setdefault(seq, {})[k] = ImageFeatures(p.keypoints[side], p.descriptors[side], p.scores[side])
    return out


def test_gluefactory_hpatches_item_order_is_its_datasets():
    # gluefactory/datasets/hpatches.py: sorted folder entries, the 8 large scenes skipped by default
    seqs = ["v_coins", "i_dc", "i_ajuntament", "v_talent", "i_zion"]
    assert gluefactory_hpatches_blocks(seqs) == {"i_ajuntament": 0, "i_zion": 1, "v_coins": 2}
    assert gluefactory_hpatches_blocks(seqs, ignore_large_images=False) == {
        "i_ajuntament": 0, "i_dc": 1, "i_zion": 2, "v_coins": 3, "v_talent": 4}
    assert gluefactory_hpatches_name("v_coins", 2, 2) == "v_coins/10.ppm"
    assert gluefactory_hpatches_name("v_coins", 2, 6) == "v_coins/14.ppm"
    for j in (0, 3):
        for k in range(2, 7):
            assert gluefactory_hpatches_pair(gluefactory_hpatches_name("s", j, k)) == ("s", 1, k, j)
    # descbench -> corner convention: + 0.5 (hand values); back again is the identity on them
    xy = np.array([[0.0, -0.5], [2.75, 149.0]], np.float32)
    assert np.array_equal(to_gluefactory_xy(xy), np.array([[0.5, 0.0], [3.25, 149.5]], np.float32))
    assert np.array_equal(from_gluefactory_xy(to_gluefactory_xy(xy)), xy)


def test_gluefactory_predictions_read_and_written_again_are_the_same_file(tmp_path):
    src = tmp_path / "predictions.h5"
    # blocks as glue-factory numbers ['i_a', 'i_dc', 'v_b']: i_dc is one of its large scenes, left out
    before = gf_hpatches_file(src, {"i_a": 0, "v_b": 1})
    out = tmp_path / "again.h5"
    assert all((a["matches0"] >= 0).any() for a in before.values() if len(a["keypoints1"]))  # matches to keep
    names = write_gluefactory_predictions(out, sequences_of(read_gluefactory_predictions(src)))
    assert names == [f"i_a/{i}.ppm" for i in range(5)] + [f"v_b/{i}.ppm" for i in range(5, 10)]
    after = h5_groups(out)
    assert sorted(after) == sorted(before)
    for name, arrays in before.items():
        assert sorted(after[name]) == sorted(arrays), name
        for key, want in arrays.items():
            got = after[name][key]
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), (name, key)
    # and the existing reader reads back the same arrays
    again, first = read_gluefactory_predictions(out, require_descriptors=True), read_gluefactory_predictions(src)
    for name, p in first.items():
        q = again[name]
        for side in (0, 1):
            assert np.array_equal(q.keypoints[side], p.keypoints[side]) and np.array_equal(q.scores[side], p.scores[side])
            assert np.array_equal(q.descriptors[side], p.descriptors[side])
            assert np.array_equal(q.matches[side].matches0, p.matches[side].matches0)
            assert np.array_equal(q.matches[side].scores0, p.matches[side].scores0)


def test_gluefactory_export_recomputes_matches_and_leaves_large_scenes_out_unless_kept(tmp_path):
    src = tmp_path / "predictions.h5"
    before = gf_hpatches_file(src, {"i_a": 0, "i_dc": 1}, mutual=False)
    seqs = sequences_of(read_gluefactory_predictions(src))
    out = tmp_path / "again.h5"
    assert write_gluefactory_predictions(out, seqs) == [f"i_a/{i}.ppm" for i in range(5)]  # i_dc: large
    after = h5_groups(out)
    g, b = after["i_a/0.ppm"], before["i_a/0.ppm"]  # pair (1, 2)
    assert np.array_equal(g["keypoints1"], b["keypoints1"]) and np.array_equal(g["descriptors1"], b["descriptors1"])
    m0, m1 = brute_mutual_nn(b["descriptors0"], b["descriptors1"])
    assert not np.array_equal(b["matches0"], m0)  # the input's were not mutual NN; export's are
    assert np.array_equal(g["matches0"], m0) and np.array_equal(g["matches1"], m1)
    assert np.array_equal(g["matching_scores0"], (m0 > -1).astype(np.float32))
    # image 3 has no keypoints: pair (1, 3) matches nothing
    empty = after["i_a/1.ppm"]
    assert empty["keypoints1"].shape == (0, 2) and empty["matches0"].shape == (7,) and np.all(empty["matches0"] == -1)
    names = write_gluefactory_predictions(out, seqs, ignore_large_images=False)
    assert names[5:] == [f"i_dc/{i}.ppm" for i in range(5, 10)]
    assert np.array_equal(h5_groups(out)["i_dc/9.ppm"]["keypoints1"], before["i_dc/9.ppm"]["keypoints1"])


@pytest.mark.bad_input
def test_gluefactory_export_of_non_hpatches_sequences_is_an_error(tmp_path):
    src = tmp_path / "predictions.h5"
    gf_hpatches_file(src, {"i_a": 0})
    seqs = sequences_of(read_gluefactory_predictions(src))
    out = tmp_path / "out.h5"
    five = {"i_a": {k: f for k, f in seqs["i_a"].items() if k != 6}}
    raises_naming(lambda: write_gluefactory_predictions(out, five), str(out), "sequence i_a has images [1, 2, 3, 4, 5]",
                  "exactly 6 images 1..6", exc=DataError)
    bare = {"i_a": {**seqs["i_a"], 4: ImageFeatures(seqs["i_a"][4].keypoints)}}
    raises_naming(lambda: write_gluefactory_predictions(out, bare), "sequence i_a, image 4 has no descriptors", exc=DataError)
    raises_naming(lambda: write_gluefactory_predictions(out, {"v_talent": seqs["i_a"]}), "['v_talent'] are all",
                  "--keep-large-scenes", exc=DataError)
    assert not out.exists()


def test_d2net_written_is_read_by_precomputed_exactly(tmp_path):
    image = tmp_path / "s" / "1.ppm"
    kp = np.array([[1.25, 2.5, 3.0], [0.0, 7.0, 12.5]], np.float32)
    desc = RNG.standard_normal((2, 8)).astype(np.float32)
    scores = np.array([0.5, 0.125], np.float32)
    path = d2net_path(tmp_path, "s", "1.ppm", "m")
    assert path == tmp_path / "s" / "1.ppm.m"
    write_d2net(path, kp, desc, scores)
    assert not path.with_name("1.ppm.m.npz").exists()  # np.savez into a file object: no suffix added
    f = load_features(image, "m", tmp_path)
    assert np.array_equal(f.keypoints.x, kp[:, 0]) and np.array_equal(f.keypoints.y, kp[:, 1])
    assert np.array_equal(f.keypoints.size, kp[:, 2]) and np.array_equal(f.keypoints.response, scores)
    assert np.array_equal(f.descriptors, desc) and f.has_scores


def test_scene_image_names_accept_the_file_name_its_stem_or_another_extension(scene):
    names = SceneImageNames(scene.parent)
    for n in (f"{DEMO_SCENE}/3.ppm", f"{DEMO_SCENE}/3", f"{DEMO_SCENE}/3.png", f"/{DEMO_SCENE}/3.ppm"):
        s, k, p = names.resolve(n, "here")
        assert (s, k, p) == (DEMO_SCENE, 3, scene / "3.ppm"), n


# ----------------------------------------------------------------------------- bad input


@pytest.mark.bad_input
def test_scene_image_names_refuse_what_is_not_a_scene_image(scene):
    names = SceneImageNames(scene.parent)
    raises_naming(lambda: names.resolve(f"{DEMO_SCENE}/9.ppm", "f.h5, group 'x'"), "f.h5, group 'x'", "not an image of",
                  "its images: 1.ppm")
    raises_naming(lambda: names.resolve("nowhere/1.ppm", "f.h5, group 'x'"), "no scene folder", "--scene-root")
    raises_naming(lambda: names.resolve("1.ppm", "f.h5, group 'x'"), "is not <scene>/<image>", "e.g. i_rocket/1.ppm")
    raises_naming(lambda: names.resolve(f"a/{DEMO_SCENE}/1.ppm", "w"), "is not <scene>/<image>")


@pytest.mark.bad_input
def test_keypoints_outside_the_image_name_the_place_and_swapped_columns():
    check_inside(np.array([[0, 0], [199.4, 149.4]], np.float32), 200, 150, "w")  # inside
    raises_naming(lambda: check_inside(np.array([[10, 180], [5, 5]], np.float32), 200, 150, "f.h5, group 'g'"),
                  "f.h5, group 'g'", "1 keypoint(s) outside the 200 x 150 image", "row 0", "look swapped", "columns are x, y")
    # outside but not a swap: the resized-copy hint
    raises_naming(lambda: check_inside(np.array([[250, 10]], np.float32), 200, 150, "w"), "resized copy", "columns are x, y")
    raises_naming(lambda: check_inside(np.array([[-0.5, 10]], np.float32), 200, 150, "w"), "(-0.5, 10)")
    # the bounds: x = W or y = H is the first pixel outside (pixel centres at integers)
    raises_naming(lambda: check_inside(np.array([[200, 10]], np.float32), 200, 150, "w"), "(200, 10)")
    raises_naming(lambda: check_inside(np.array([[10, 150]], np.float32), 200, 150, "w"), "(10, 150)")


@pytest.mark.bad_input
def test_bad_hloc_features_name_the_file_and_group(tmp_path):
    def file(build) -> Path:
        p = tmp_path / f"f{len(list(tmp_path.iterdir()))}.h5"
        with h5py.File(p, "w") as f:
            build(f)
        return p

    def no_desc(f):
        f.create_group("s/1.ppm").create_dataset("keypoints", data=np.zeros((2, 2), np.float32))

    p = file(no_desc)
    raises_naming(lambda: read_hloc_features(p), str(p), "group 's/1.ppm'", "no dataset 'descriptors'", "D x N")
    assert read_hloc_features(p, require_descriptors=False)["s/1.ppm"].descriptors is None

    def untransposed(f):  # descriptors stored N x D, as another tool would
        g = f.create_group("s/1.ppm")
        g.create_dataset("keypoints", data=np.zeros((3, 2), np.float32))
        g.create_dataset("descriptors", data=np.zeros((3, 8), np.float32))

    p = file(untransposed)
    raises_naming(lambda: read_hloc_features(p), "group 's/1.ppm'", "shape (3, 8) for 3 keypoints", "transposed, D x N")

    def three_columns(f):
        g = f.create_group("s/1.ppm")
        g.create_dataset("keypoints", data=np.zeros((3, 3), np.float32))
        g.create_dataset("descriptors", data=np.zeros((8, 3), np.float32))

    raises_naming(lambda: read_hloc_features(file(three_columns)), "'keypoints' must be N x 2", "columns are x, y")

    def nan(f):
        g = f.create_group("s/1.ppm")
        g.create_dataset("keypoints", data=np.array([[1, np.nan]], np.float32))
        g.create_dataset("descriptors", data=np.zeros((8, 1), np.float32))

    raises_naming(lambda: read_hloc_features(file(nan)), "group 's/1.ppm'", "NaN or inf")

    def bad_scores(f):
        g = f.create_group("s/1.ppm")
        g.create_dataset("keypoints", data=np.zeros((2, 2), np.float32))
        g.create_dataset("descriptors", data=np.zeros((8, 2), np.float32))
        g.create_dataset("scores", data=np.zeros(3, np.float32))

    raises_naming(lambda: read_hloc_features(file(bad_scores)), "'scores' must hold one number per keypoint (2)")
    raises_naming(lambda: read_hloc_features(file(lambda f: f.create_group("empty"))), "holds no dataset")
    notes = tmp_path / "notes.h5"
    notes.write_text("not hdf5")
    raises_naming(lambda: read_hloc_features(notes), str(notes), "cannot be read as an HDF5 file")


@pytest.mark.bad_input
def test_bad_hloc_matches_name_the_file_and_group(tmp_path):
    names = ["s/1.ppm", "s/2.ppm"]
    p = tmp_path / "m.h5"
    with h5py.File(p, "w") as f:
        f.create_group("s-1.ppm/t-2.ppm").create_dataset("matches0", data=np.zeros(2, np.int16))
    raises_naming(lambda: read_hloc_matches(p, names), "group 's-1.ppm/t-2.ppm'", "names no pair", "features file")
    with h5py.File(p, "w") as f:
        f.create_group("s-1.ppm/s-2.ppm").create_dataset("matching_scores0", data=np.zeros(2, np.float16))
    raises_naming(lambda: read_hloc_matches(p, names), "group 's-1.ppm/s-2.ppm'", "no dataset 'matches0'")
    with h5py.File(p, "w") as f:
        f.create_group("s-1.ppm/s-2.ppm").create_dataset("matches0", data=np.array([-2, 0], np.int16))
    raises_naming(lambda: read_hloc_matches(p, names), "'matches0' holds -2")
    raises_naming(lambda: read_hloc_matches(p, ["a/b", "a-b"]), "same hloc pair name part 'a-b'")


@pytest.mark.bad_input
def test_bad_gluefactory_predictions_name_the_file_and_group(tmp_path):
    p = tmp_path / "predictions.h5"
    with h5py.File(p, "w") as f:
        gf_pair(f, "v_coins/10.ppm", 3, 2, descriptors=False)
    raises_naming(lambda: read_gluefactory_predictions(p, require_descriptors=True), "group 'v_coins/10.ppm'",
                  "no dataset 'descriptors0'", "export_keys")
    with h5py.File(p, "w") as f:
        g = f.create_group("v_coins/10.ppm")
        g.create_dataset("keypoints0", data=np.zeros((2, 2), np.float32))
    raises_naming(lambda: read_gluefactory_predictions(p), "group 'v_coins/10.ppm'", "no dataset 'keypoints1'")
    with h5py.File(p, "w") as f:
        a = gf_pair(f, "v_coins/10.ppm", 3, 2)
        del f["v_coins/10.ppm/matches0"]
        f["v_coins/10.ppm"].create_dataset("matches0", data=np.array([0, 5, -1]))
    assert a["keypoints1"].shape[0] == 2
    raises_naming(lambda: read_gluefactory_predictions(p), "group 'v_coins/10.ppm' (matches0)", "index 5", "2 keypoints")
    with h5py.File(p, "w") as f:
        f.create_group("other").create_dataset("x", data=np.zeros(2))
    raises_naming(lambda: read_gluefactory_predictions(p), "not a glue-factory predictions.h5")


def test_a_missing_h5py_says_how_to_install_it(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_h5py(name, *a, **k):
        if name == "h5py":
            raise ImportError("No module named 'h5py'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_h5py)
    raises_naming(lambda: read_hloc_features(tmp_path / "f.h5"), "pip install descbench[interop]", exc=ConfigError)
    raises_naming(lambda: write_hloc_matches(tmp_path / "m.h5", {("a", "b"): PairMatches(np.zeros(1, np.int64))}),
                  "pip install descbench[interop]", exc=ConfigError)
    assert not (tmp_path / "m.h5").exists()
