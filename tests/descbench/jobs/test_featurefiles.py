"""descbench.jobs.featurefiles: ``export-features`` and ``import-features`` on a tiny run, against
the run's own result files and hand-built hloc / glue-factory files (their layouts:
tests/descbench/test_featurefiles.py); and end to end, a SIFT set exported as D2-Net files and
evaluated again as a ``detector: precomputed`` set scores exactly what it scored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from descbench import cli
from descbench.datasets.layout import image_size
from descbench.featurefiles import (ImageFeatures, read_gluefactory_predictions, read_hloc_features,
                                    write_gluefactory_predictions, write_hloc_features)
from descbench.jobs.common import read_features
from descbench.jobs.featurefiles import export_features
from descbench.precomputed import load_features
from jobcli import SCENES, features, ok
from tests.descbench.test_featurefiles import brute_mutual_nn, h5_groups, hloc_group

h5py = pytest.importorskip("h5py", reason="the interop extra (pip install -e '.[interop]'); README's test command installs it")

RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return features(tmp_path_factory.mktemp("run"))


def fail(capsys, *args) -> str:
    assert cli.main([str(a) for a in args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("descbench: error: ") and err.count("\n") == 1, err
    return err


def test_d2net_export_is_read_by_precomputed_exactly(run, tmp_path):
    ok("export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc", "--format", "d2net",
       "--out", tmp_path / "d2", "--method", "m")
    for s in SCENES:
        f = read_features(Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s)))
        for k, kps in f.per_image.items():
            got = load_features(run.scene_root / s / f"{k}.ppm", "m", tmp_path / "d2")
            for field in ("x", "y", "size", "response"):
                assert np.array_equal(getattr(got.keypoints, field), getattr(kps, field)), (s, k, field)
            assert np.array_equal(got.descriptors, f.by_image[k]) and got.descriptors.dtype == f.by_image[k].dtype


def test_export_features_counts_what_it_wrote(run, tmp_path):
    """The function under the command: every image of every scene written, its pairs, nothing left out."""
    got = export_features(Path(run.root), "kp", "desc", "d2net", tmp_path / "d2", method="m")
    n_images = sum(len(read_features(Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s))).per_image)
                   for s in SCENES)
    assert got["images"] == n_images and not got["left_out"]
    assert sorted(p.relative_to(tmp_path / "d2").as_posix() for p in (tmp_path / "d2").rglob("*.m")) == \
        sorted(f"{s}/{k}.ppm.m" for s in SCENES for k in range(1, 7))


def test_hloc_export_holds_the_runs_features(run, tmp_path):
    out = tmp_path / "features.h5"
    ok("export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc", "--format", "hloc", "--out", out)
    got = read_hloc_features(out)
    assert sorted(got) == sorted(f"{s}/{k}.ppm" for s in SCENES for k in range(1, 7))
    for s in SCENES:
        f = read_features(Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s)))
        for k, kps in f.per_image.items():
            g = got[f"{s}/{k}.ppm"]
            assert np.array_equal(g.keypoints, np.stack([kps.x, kps.y], 1))  # same convention: no shift
            assert np.array_equal(g.descriptors, f.by_image[k]) and np.array_equal(g.scores, kps.response)
            assert g.image_size == image_size(run.scene_root / s / f"{k}.ppm")


def hloc_file(run, path: Path, names=None, as_half=True) -> dict:
    """An hloc features.h5 over the run's scenes, as hloc writes it (float16 by default)."""
    written = {}
    with h5py.File(path, "w") as f:
        for s in SCENES:
            for k in range(1, 7):
                name = (names or {}).get((s, k), f"{s}/{k}.ppm")
                w, h = image_size(run.scene_root / s / f"{k}.ppm")
                written[name] = hloc_group(f, name, 20 + k, d=16, as_half=as_half, w=w, h=h)
    return written


def test_hloc_import_then_export_round_trips_exactly(run, tmp_path):
    src = tmp_path / "features.h5"
    hloc_file(run, src)
    pairs = tmp_path / "matches.h5"
    with h5py.File(pairs, "w") as f:
        g = f.create_group(f"{SCENES[0]}-1.ppm/{SCENES[0]}-2.ppm")
        g.create_dataset("matches0", data=np.r_[np.arange(20), -1].astype(np.int16))  # 21 -> 22 keypoints
        g.create_dataset("matching_scores0", data=np.ones(21, np.float16))
    ok("import-features", "--format", "hloc", "--features", src, "--matches", pairs, "--scene-root", run.scene_root,
       "--out-root", tmp_path / "npz", "--method", "hl")
    before = read_hloc_features(src)
    # descbench's reading of the npz files (the precomputed keypoint set and family) -> hloc again
    back = {}
    for name, feat in before.items():
        scene, image = name.split("/")
        got = load_features(run.scene_root / scene / image, "hl", tmp_path / "npz")
        back[name] = ImageFeatures(np.stack([got.keypoints.x, got.keypoints.y], 1), got.descriptors,
                                   got.keypoints.response, image_size(run.scene_root / scene / image))
    write_hloc_features(tmp_path / "again.h5", back)
    again = read_hloc_features(tmp_path / "again.h5")
    assert sorted(again) == sorted(before)
    for name in before:
        for field in ("keypoints", "descriptors", "scores"):
            assert np.array_equal(getattr(again[name], field), getattr(before[name], field)), (name, field)
        assert again[name].image_size == before[name].image_size


def test_hloc_names_without_extension_or_with_another_map_to_the_scene_images(run, tmp_path, capsys):
    src = tmp_path / "features.h5"
    hloc_file(run, src, names={(SCENES[0], 1): f"{SCENES[0]}/1", (SCENES[1], 2): f"{SCENES[1]}/2.png"}, as_half=False)
    ok("import-features", "--format", "hloc", "--features", src, "--scene-root", run.scene_root,
       "--out-root", tmp_path / "npz", "--method", "hl")
    out = capsys.readouterr().out
    assert "wrote 12 feature file(s) of 2 scene(s)" in out and "detector: precomputed" in out
    with h5py.File(src, "r") as f:
        kp = f[f"{SCENES[1]}/2.png/keypoints"][()]
    assert np.array_equal(np.load(tmp_path / "npz" / SCENES[1] / "2.ppm.hl")["keypoints"], kp)
    # a scene with an image missing from the file: written, and said on stderr
    with h5py.File(src, "a") as f:
        del f[f"{SCENES[0]}/6.ppm"]
    ok("import-features", "--format", "hloc", "--features", src, "--scene-root", run.scene_root,
       "--out-root", tmp_path / "npz2", "--method", "hl")
    err = capsys.readouterr().err
    assert f"warning: scene {SCENES[0]}: no features for image(s) [6] in the file" in err and SCENES[1] not in err


def gf_predictions(run, path: Path, block: dict, differ: bool = False) -> dict:
    """glue-factory's predictions.h5 of HPatches pairs (1, 2..6) of the run's scenes, the sequences
    at item blocks ``block`` (scene -> j: items 5j .. 5j+4), keypoints in the corner convention."""
    per_image = {}
    for s in SCENES:
        for k in range(1, 7):
            w, h = image_size(run.scene_root / s / f"{k}.ppm")
            n = 10 + k
            per_image[s, k] = (np.stack([RNG.uniform(0.5, w - 0.5, n), RNG.uniform(0.5, h - 0.5, n)], 1).astype(np.float32),
                               RNG.standard_normal((n, 8)).astype(np.float32), RNG.uniform(0, 1, n).astype(np.float32))
    with h5py.File(path, "w") as f:
        for s in SCENES:
            for q in range(2, 7):
                g = f.create_group(f"{s}/{5 * block[s] + q - 2}.ppm")
                for side, k in ((0, 1), (1, q)):
                    kp, d, sc = per_image[s, k]
                    if differ and side == 0 and q == 4:
                        kp = kp + np.float32(1)
                    g.create_dataset(f"keypoints{side}", data=kp)
                    g.create_dataset(f"descriptors{side}", data=d)
                    g.create_dataset(f"keypoint_scores{side}", data=sc)
                n0, n1 = len(per_image[s, 1][0]), len(per_image[s, q][0])
                g.create_dataset("matches0", data=np.r_[np.arange(n0 - 1), -1][:n0] % n1)
                g.create_dataset("matching_scores0", data=np.ones(n0, np.float32))
    return per_image


def test_gluefactory_import_is_exact_in_descbenchs_convention(run, tmp_path, capsys):
    src = tmp_path / "predictions.h5"
    per_image = gf_predictions(run, src, {SCENES[0]: 7, SCENES[1]: 100})
    ok("import-features", "--format", "gluefactory", "--features", src, "--scene-root", run.scene_root,
       "--out-root", tmp_path / "npz", "--method", "gf")
    out = capsys.readouterr()
    assert "wrote 12 feature file(s) of 2 scene(s)" in out.out and "10 pair(s) of matches checked" in out.out
    assert "warning" not in out.err
    for (s, k), (kp, d, sc) in per_image.items():
        got = load_features(run.scene_root / s / f"{k}.ppm", "gf", tmp_path / "npz")
        assert np.array_equal(got.keypoints.x, kp[:, 0] - np.float32(0.5)), (s, k)
        assert np.array_equal(got.keypoints.y, kp[:, 1] - np.float32(0.5)), (s, k)
        assert np.array_equal(got.descriptors, d) and np.array_equal(got.keypoints.response, sc)


def test_gluefactory_export_holds_the_runs_features_in_its_item_order(run, tmp_path, capsys):
    out = tmp_path / "predictions.h5"
    ok("export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc", "--format", "gluefactory",
       "--out", out)
    assert "features of 12 image(s)" in capsys.readouterr().out
    got = h5_groups(out)
    # glue-factory's items over sorted(SCENES) = [i_rocket, v_coins]: blocks 0 and 1, pairs (1, 2..6)
    assert sorted(SCENES) == SCENES and sorted(got) == sorted(f"{s}/{5 * j + q - 2}.ppm" for j, s in enumerate(SCENES)
                                                               for q in range(2, 7))
    for j, s in enumerate(SCENES):
        f = read_features(Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s)))
        for q in range(2, 7):
            g = got[f"{s}/{5 * j + q - 2}.ppm"]
            for side, k in ((0, 1), (1, q)):
                kps = f.per_image[k]
                corner = (np.stack([kps.x, kps.y], 1).astype(np.float64) + 0.5).astype(np.float32)  # COLMAP's corner convention
                assert g[f"keypoints{side}"].dtype == np.float32 and np.array_equal(g[f"keypoints{side}"], corner)
                assert np.array_equal(g[f"keypoint_scores{side}"], kps.response)
                assert np.array_equal(g[f"descriptors{side}"], f.by_image[k])
            m0, m1 = brute_mutual_nn(f.by_image[1], f.by_image[q])
            assert (m0 >= 0).sum() > 10
            assert g["matches0"].dtype == np.int64 and np.array_equal(g["matches0"], m0) and np.array_equal(g["matches1"], m1)
            assert np.array_equal(g["matching_scores0"], (m0 > -1).astype(np.float32))
            assert np.array_equal(g["matching_scores1"], (m1 > -1).astype(np.float32))
    # the reader gives back the run's own coordinates wherever x + 0.5 is a float32 (else x + 0.5
    # was rounded to the nearest float32 on export: to_gluefactory_xy)
    back = read_gluefactory_predictions(out, require_descriptors=True)
    f = read_features(Path(run.paths.keypoints("kp", SCENES[1])), Path(run.paths.descriptors("kp", "desc", SCENES[1])))
    xy = np.stack([f.per_image[6].x, f.per_image[6].y], 1)
    representable = (xy.astype(np.float64) + 0.5) == (xy.astype(np.float64) + 0.5).astype(np.float32)
    assert representable.mean() > 0.99
    assert np.array_equal(back[f"{SCENES[1]}/9.ppm"].keypoints[1][representable], xy[representable])


def test_gluefactory_export_says_which_large_scenes_it_leaves_out(run, tmp_path, capsys, monkeypatch):
    from descbench import featurefiles

    monkeypatch.setattr(featurefiles, "GLUEFACTORY_HPATCHES_LARGE_SCENES", (SCENES[1],))  # as if v_coins were large
    args = ["export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc", "--format",
            "gluefactory", "--out", tmp_path / "p.h5"]
    ok(*args)
    out = capsys.readouterr()
    assert "features of 6 image(s)" in out.out and f"warning: scene(s) {SCENES[1]} left out" in out.err
    assert sorted(h5_groups(tmp_path / "p.h5")) == [f"{SCENES[0]}/{i}.ppm" for i in range(5)]
    ok(*args, "--keep-large-scenes")
    out = capsys.readouterr()
    assert "features of 12 image(s)" in out.out and "warning" not in out.err
    assert f"{SCENES[1]}/9.ppm" in h5_groups(tmp_path / "p.h5")


def gf_mutual_predictions(run, path: Path) -> dict:
    """glue-factory's HPatches predictions.h5 over the run's scenes, by hand (gluefactory 2d17e3b3:
    datasets/hpatches.py item order over sorted(SCENES), export_predictions.py arrays): unit-norm
    float32 descriptors, keypoints in the corner convention, matches0/1 of the mutual nearest
    neighbours with NearestNeighborMatcher's matching_scores (1 matched, 0 not)."""
    per_image = {}
    for s in SCENES:
        for k in range(1, 7):
            w, h = image_size(run.scene_root / s / f"{k}.ppm")
            n = 12 + k
            d = RNG.standard_normal((n, 32))
            per_image[s, k] = (np.stack([RNG.uniform(0.5, w - 0.5, n), RNG.uniform(0.5, h - 0.5, n)], 1).astype(np.float32),
                               (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32),
                               RNG.uniform(0, 1, n).astype(np.float32))
    with h5py.File(path, "w") as f:
        for j, s in enumerate(sorted(SCENES)):
            for q in range(2, 7):
                g = f.create_group(f"{s}/{5 * j + q - 2}.ppm")
                for side, k in ((0, 1), (1, q)):
                    kp, d, sc = per_image[s, k]
                    g.create_dataset(f"keypoints{side}", data=kp)
                    g.create_dataset(f"descriptors{side}", data=d)
                    g.create_dataset(f"keypoint_scores{side}", data=sc)
                m0, m1 = brute_mutual_nn(per_image[s, 1][1], per_image[s, q][1])
                for side, m in ((0, m0), (1, m1)):
                    g.create_dataset(f"matches{side}", data=m)
                    g.create_dataset(f"matching_scores{side}", data=(m > -1).astype(np.float32))
    return per_image


def test_gluefactory_import_then_export_round_trips_exactly(run, tmp_path):
    """glue-factory h5 -> import-features (D2-Net files) -> descbench's reading of them (the
    precomputed set) -> write_gluefactory_predictions: every dataset of every group is the same."""
    src = tmp_path / "predictions.h5"
    gf_mutual_predictions(run, src)
    ok("import-features", "--format", "gluefactory", "--features", src, "--scene-root", run.scene_root,
       "--out-root", tmp_path / "npz", "--method", "gf")
    sequences = {}
    for s in SCENES:
        for k in range(1, 7):
            got = load_features(run.scene_root / s / f"{k}.ppm", "gf", tmp_path / "npz")
            sequences.setdefault(s, {})[k] = ImageFeatures(np.stack([got.keypoints.x, got.keypoints.y], 1),
                                                           got.descriptors, got.keypoints.response)
    write_gluefactory_predictions(tmp_path / "again.h5", sequences)
    before, after = h5_groups(src), h5_groups(tmp_path / "again.h5")
    assert sorted(after) == sorted(before)
    for name, arrays in before.items():
        assert sorted(after[name]) == sorted(arrays), name
        for key, want in arrays.items():
            got = after[name][key]
            assert got.dtype == want.dtype and np.array_equal(got, want), (name, key)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.bad_input
def test_swapped_columns_and_foreign_images_are_errors_naming_file_and_group(run, tmp_path, capsys):
    src = tmp_path / "features.h5"
    hloc_file(run, src, as_half=False)
    s = SCENES[0]
    w, h = image_size(run.scene_root / s / "3.ppm")
    with h5py.File(src, "a") as f:
        kp = f[f"{s}/3.ppm/keypoints"]
        kp[0] = (w / 2, h + 10)  # x < W, y >= H
        kp[1] = (w / 2, h + 20)
    args = ["import-features", "--format", "hloc", "--features", src, "--scene-root", run.scene_root,
            "--out-root", tmp_path / "npz", "--method", "hl"]
    err = fail(capsys, *args)
    assert f"{src}, group '{s}/3.ppm'" in err and "2 keypoint(s) outside" in err and "columns are x, y" in err
    hloc_file(run, src, as_half=False)
    with h5py.File(src, "a") as f:
        kp = f[f"{s}/3.ppm/keypoints"]
        kp[...] = np.array([[10, w - 5], [20, 30]], np.float32)[np.arange(kp.shape[0]) % 2]  # (y, x) rows: fit only swapped
    err = fail(capsys, *args)
    assert "look swapped" in err and "columns are x, y" in err
    hloc_file(run, src)
    with h5py.File(src, "a") as f:
        f[f"{s}/2.ppm/image_size"][...] = (w // 2, h // 2)
    err = fail(capsys, *args)
    assert f"group '{s}/2.ppm'" in err and "'image_size' is" in err and "--scene-root" in err
    hloc_file(run, src, names={(s, 4): f"{s}/7.ppm"})
    err = fail(capsys, *args)
    assert f"group '{s}/7.ppm'" in err and "not an image of scene" in err
    hloc_file(run, src, names={(s, 4): f"{s}/1"})  # two groups for image 1
    err = fail(capsys, *args)
    assert "both name image 1 of scene" in err
    with h5py.File(src, "a") as f:
        del f[f"{s}/1/descriptors"]
    err = fail(capsys, *args)
    assert f"group '{s}/1'" in err and "no dataset 'descriptors'" in err


@pytest.mark.bad_input
def test_hloc_matches_that_do_not_fit_the_features_are_errors(run, tmp_path, capsys):
    src, pairs = tmp_path / "features.h5", tmp_path / "matches.h5"
    hloc_file(run, src)
    with h5py.File(pairs, "w") as f:
        f.create_group(f"{SCENES[0]}-1.ppm/{SCENES[0]}-2.ppm").create_dataset("matches0", data=np.full(21, 22, np.int16))
    err = fail(capsys, "import-features", "--format", "hloc", "--features", src, "--matches", pairs, "--scene-root",
               run.scene_root, "--out-root", tmp_path / "npz", "--method", "hl")
    assert str(pairs) in err and "index 22 but the second image has 22 keypoints" in err
    err = fail(capsys, "import-features", "--format", "gluefactory", "--features", src, "--matches", pairs, "--scene-root",
               run.scene_root, "--out-root", tmp_path / "npz", "--method", "hl")
    assert "--matches is hloc's" in err


@pytest.mark.bad_input
def test_gluefactory_files_that_descbench_cannot_map_are_errors(run, tmp_path, capsys):
    src = tmp_path / "predictions.h5"
    args = ["import-features", "--format", "gluefactory", "--features", src, "--scene-root", run.scene_root,
            "--out-root", tmp_path / "npz", "--method", "gf"]
    gf_predictions(run, src, {SCENES[0]: 0, SCENES[1]: 1}, differ=True)
    err = fail(capsys, *args)
    assert f"image 1 of sequence {SCENES[0]} has different features in groups '{SCENES[0]}/0.ppm' and '{SCENES[0]}/2.ppm'" in err
    gf_predictions(run, src, {SCENES[0]: 0, SCENES[1]: 1})
    with h5py.File(src, "a") as f:
        f.move(f"{SCENES[0]}/3.ppm", f"{SCENES[0]}/8.ppm")  # an item of another block
    err = fail(capsys, *args)
    assert "two\ndifferent" not in err and "different sequences' blocks" in err
    with h5py.File(src, "a") as f:
        f.move(f"{SCENES[0]}/8.ppm", f"{SCENES[0]}/pair.ppm")
    err = fail(capsys, *args)
    assert f"group '{SCENES[0]}/pair.ppm'" in err and "not a pair of glue-factory's HPatches evaluation" in err


@pytest.mark.bad_input
def test_export_of_a_missing_set_or_descriptor_names_the_folder(run, tmp_path, capsys):
    err = fail(capsys, "export-features", "--results", run.root, "--keypoint-set", "nope", "--descriptor", "desc",
               "--format", "hloc", "--out", tmp_path / "f.h5")
    assert "no keypoint file of keypoint set 'nope'" in err and str(run.root / "keypoints" / "nope") in err
    err = fail(capsys, "export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "nope",
               "--format", "d2net", "--out", tmp_path / "d2")
    assert "no descriptor file" in err and "descriptor 'nope'" in err
    err = fail(capsys, "export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "nope",
               "--format", "gluefactory", "--out", tmp_path / "p.h5")
    assert "no descriptor file" in err and "descriptor 'nope'" in err and not (tmp_path / "p.h5").exists()
    err = fail(capsys, "export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc",
               "--format", "hloc", "--out", tmp_path / "f.h5", "--keep-large-scenes")
    assert "--keep-large-scenes is for --format gluefactory" in err


@pytest.mark.bad_input
def test_gluefactory_export_of_scenes_not_in_hpatches_layout_names_the_scene(run, tmp_path, capsys):
    import shutil

    # the run's scenes in the Oxford layout (img1.ppm, H1to2p): glue-factory's dataset reads k.ppm
    root = tmp_path / "oxford"
    for s in SCENES:
        (root / s).mkdir(parents=True)
        for k in range(1, 7):
            shutil.copy(run.scene_root / s / f"{k}.ppm", root / s / f"img{k}.ppm")
            if k > 1:
                shutil.copy(run.scene_root / s / f"H_1_{k}", root / s / f"H1to{k}p")
    out = tmp_path / "p.h5"
    err = fail(capsys, "export-features", "--results", run.root, "--keypoint-set", "kp", "--descriptor", "desc",
               "--format", "gluefactory", "--out", out, "--scene-root", root)
    assert f"scene {SCENES[0]}" in err and "not an HPatches sequence" in err and "img1.ppm" in err and "--format hloc" in err
    assert not out.exists()


# ----------------------------------------------------------------------------- end to end


@pytest.mark.e2e
def test_sift_exported_as_d2net_and_evaluated_as_precomputed_scores_the_same(tmp_path):
    """snakemake on two demo scenes; the sift set + sift descriptor exported as D2-Net files; a
    second run evaluates them as a ``detector: precomputed`` set with the ``precomputed`` family:
    every metric of the comparison table is the same. ``scoring.gt: closest`` because D2-Net files
    carry no keypoint angle (the precomputed set's angles are -1), and ``closest_oriented``, the
    default, reads the angle to choose among keypoints at one position (SIFT's several
    orientations); every other field the scores read (x, y, size, response, descriptors) is exact."""
    from smkrun import ROOT, snakemake, write_config

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["scoring"]["gt"] = "closest"
    cfg["descriptors"] = {"sift": {"family": "sift", "keypoint_sets": ["sift"]}}
    cfg["statistics"] = {"bootstrap_resamples": 200}
    write_config(tmp_path, cfg)
    snakemake(tmp_path, "--cores", "2")
    feats = tmp_path / "feats"
    ok("export-features", "--results", tmp_path / "results" / "demo", "--keypoint-set", "sift", "--descriptor", "sift",
       "--format", "d2net", "--out", feats)
    cfg["keypoint_sets"]["imported"] = {"detector": "precomputed", "border_px": 40,
                                        "params": {"method": "sift", "root": str(feats)}}
    cfg["descriptors"]["imported"] = {"family": "precomputed", "keypoint_sets": ["imported"]}
    write_config(tmp_path, cfg)
    snakemake(tmp_path, "--cores", "2")
    table = pd.read_csv(tmp_path / "results" / "demo" / "report" / "comparison.csv")
    orig = table[(table.keypoint_set == "sift") & (table.descriptor == "sift")]
    imp = table[(table.keypoint_set == "imported") & (table.descriptor == "imported")]
    assert len(orig) == len(imp) == 1
    skip = {"keypoint_set", "descriptor", "processing_time_ms"}
    cols = [c for c in table.columns if c not in skip and "time" not in c]
    assert "true_map_micro" in cols and "mma_at_3" in cols
    differ = {c: (orig[c].iloc[0], imp[c].iloc[0]) for c in cols
              if not (orig[c].iloc[0] == imp[c].iloc[0] or (pd.isna(orig[c].iloc[0]) and pd.isna(imp[c].iloc[0])))}
    assert not differ, differ
