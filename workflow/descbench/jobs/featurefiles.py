"""Feature files of other tools (``export-features``, ``import-features``): a keypoint set and
descriptor of a descbench run as hloc's ``features.h5``, glue-factory's HPatches
``predictions.h5`` or D2-Net npz files, and hloc's or
glue-factory's HDF5 files as D2-Net npz files, which the ``detector: precomputed`` keypoint set and
the ``precomputed`` descriptor family evaluate (the formats and conventions:
:mod:`descbench.featurefiles`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from descbench.datasets.layout import image_size, scene_files
from descbench.errors import DataError
from descbench.featurefiles import (GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE, ImageFeatures, SceneImageNames, check_inside,
                                    check_matches, d2net_path, gluefactory_hpatches_blocks, gluefactory_hpatches_pair,
                                    read_gluefactory_predictions, read_hloc_features, read_hloc_matches, write_d2net,
                                    write_gluefactory_predictions, write_hloc_features)
from descbench.jobs.common import read_features

EXPORT_FORMATS = ("hloc", "d2net", "gluefactory")
IMPORT_FORMATS = ("hloc", "gluefactory")


def result_scenes(results: Path, kpset: str, descriptor: str) -> list[tuple[str, Path, Path]]:
    """(scene, keypoint file, descriptor file) of every scene of keypoint set ``kpset`` in the run
    ``results`` (``keypoints/<set>/<batch>/<scene>.parquet`` and
    ``descriptors/<set>/<descriptor>/<batch>/<scene>.parquet``), by scene name. DataError naming
    the folder or file when the set has no keypoint file, a scene has no descriptor file, or a scene
    is in two batches."""
    kp_root = Path(results) / "keypoints" / kpset
    kp_files = sorted(kp_root.glob("*/*.parquet"))
    if not kp_files:
        raise DataError(f"no keypoint file of keypoint set '{kpset}' under {kp_root} (<batch>/<scene>.parquet); give "
                        "--results the experiment folder of a finished run (results/<experiment>) and a keypoint set it has")
    out: dict[str, tuple[str, Path, Path]] = {}
    for kp in kp_files:
        batch, scene = kp.parent.name, kp.stem
        desc = Path(results) / "descriptors" / kpset / descriptor / batch / f"{scene}.parquet"
        if not desc.is_file():
            raise DataError(f"keypoint set '{kpset}', scene {scene}: no descriptor file {desc}; run descriptor "
                            f"'{descriptor}' on this set first (snakemake --cores N), or name a descriptor it has")
        if scene in out:
            raise DataError(f"scene {scene} of keypoint set '{kpset}' has keypoint files in two batches ({out[scene][1]} "
                            f"and {kp}); remove the stale batch folder (the run's scenes_per_job changed)")
        out[scene] = (scene, kp, desc)
    return [out[s] for s in sorted(out)]


def export_features(results: Path, kpset: str, descriptor: str, fmt: str, out: Path, method: str | None = None,
                    scene_root: Path | None = None, keep_large_scenes: bool = False) -> dict:
    """Write keypoint set ``kpset`` with descriptor ``descriptor`` of a run as ``fmt``; returns
    ``{"images": n, "pairs": n (gluefactory; else 0), "left_out": [scene, ...]}``.

    Image names are ``<scene>/<k>.ppm`` (the HPatches layout), or with ``scene_root`` the images'
    own file names. ``hloc``: one ``features.h5`` at ``out`` (keypoints x, y; descriptors [D, N];
    scores = the keypoints' response; image_size (W, H)). ``d2net``: ``<out>/<scene>/<image>.<method>``
    (``method`` defaults to the descriptor's name) with keypoints [N, 3] = x, y, size (px), the
    descriptors [N, D] and scores = the response, all float32 as stored. ``gluefactory``: one
    HPatches ``predictions.h5`` at ``out``
    (:func:`descbench.featurefiles.write_gluefactory_predictions`: pairs (1, 2..6) of every scene,
    keypoint scores = the response, matches = descbench's mutual nearest neighbours), items
    numbered over the run's scenes as glue-factory's HPatches dataset numbers its sequences;
    glue-factory's large scenes are left out (``left_out``) unless ``keep_large_scenes``. Every
    scene must have images 1..6 (with ``scene_root``: files ``1.ppm`` .. ``6.ppm``), else a
    DataError naming it."""
    method = method or descriptor
    features: dict[str, ImageFeatures] = {}
    sequences: dict[str, dict[int, ImageFeatures]] = {}
    n = 0
    for scene, kp_file, desc_file in result_scenes(results, kpset, descriptor):
        f = read_features(kp_file, desc_file)
        images = scene_files(Path(scene_root) / scene).images if scene_root is not None else None
        if fmt == "gluefactory":
            _check_hpatches_scene(scene, sorted(f.per_image), images, kp_file)
        for k, kps in f.per_image.items():
            image_name = images[k - 1].name if images is not None else f"{k}.ppm"
            desc = f.by_image[k]
            if fmt == "gluefactory":
                sequences.setdefault(scene, {})[k] = ImageFeatures(np.stack([kps.x, kps.y], 1), desc, kps.response)
            elif fmt == "hloc":
                w, h = f.kmeta["image_sizes"][str(k)]
                features[f"{scene}/{image_name}"] = ImageFeatures(np.stack([kps.x, kps.y], 1), desc, kps.response, (int(w), int(h)))
            else:
                write_d2net(d2net_path(out, scene, image_name, method), np.stack([kps.x, kps.y, kps.size], 1), desc, kps.response)
            n += 1
    if fmt == "hloc":
        write_hloc_features(out, features)
    pairs, left_out = 0, []
    if fmt == "gluefactory":
        pairs = len(write_gluefactory_predictions(out, sequences, ignore_large_images=not keep_large_scenes))
        kept = gluefactory_hpatches_blocks(sequences, ignore_large_images=not keep_large_scenes)
        left_out = sorted(set(sequences) - set(kept))
        n -= sum(len(sequences[s]) for s in left_out)
    return {"images": n, "pairs": pairs, "left_out": left_out}


def _check_hpatches_scene(scene: str, ks: list[int], images, kp_file: Path) -> None:
    """DataError unless a scene is an HPatches sequence as glue-factory's dataset reads it: images
    1..6 (``images``: the scene folder's files, which must be ``1.ppm`` .. ``6.ppm``)."""
    n = GLUEFACTORY_HPATCHES_PAIRS_PER_SEQUENCE + 1
    names = [p.name for p in images] if images is not None else None
    if ks != list(range(1, n + 1)) or (names is not None and names != [f"{k}.ppm" for k in range(1, n + 1)]):
        have = ", ".join(names) if names is not None else f"images {ks[0]}..{ks[-1]}" if ks else "no image"
        raise DataError(f"scene {scene} ({kp_file}) is not an HPatches sequence as glue-factory's HPatches dataset "
                        f"reads it ({have}; it needs exactly 1.ppm .. 6.ppm, pairs (1, 2) .. (1, 6)); export only "
                        "HPatches scenes with --format gluefactory, or use --format hloc / d2net")


def _write_npz(out_root: Path, method: str, scene: str, image: Path, feat: ImageFeatures, where: str) -> None:
    w, h = image_size(image)
    if feat.image_size is not None and tuple(feat.image_size) != (w, h):
        raise DataError(f"{where}: 'image_size' is {feat.image_size[0]} x {feat.image_size[1]} but {image} is {w} x {h}; "
                        "these features are of another image (or a resized copy): give --scene-root the images they "
                        "were computed on")
    check_inside(feat.keypoints, w, h, where)
    write_d2net(d2net_path(out_root, scene, image.name, method), feat.keypoints, feat.descriptors, feat.scores)


def import_features(fmt: str, features: Path, scene_root: Path, out_root: Path, method: str,
                    matches: Path | None = None) -> dict:
    """Write the features of ``features`` (hloc ``features.h5`` or glue-factory ``predictions.h5``)
    as D2-Net npz files ``<out_root>/<scene>/<image>.<method>``, each image's keypoints checked to
    lie in its image; returns ``{"images": {scene: [k, ...]}, "pairs": n}`` (``pairs``: pairs of
    matches checked against the keypoints: hloc ``--matches``, glue-factory's own).

    Image names map to scenes by :class:`descbench.featurefiles.SceneImageNames`; glue-factory's
    pairs by :func:`descbench.featurefiles.gluefactory_hpatches_pair`. The first image of
    glue-factory's pairs appears in each pair of its scene: its features must be the same in all
    (else DataError naming two groups)."""
    features, names = Path(features), SceneImageNames(scene_root)
    written: dict[str, dict[int, str]] = {}
    pairs = 0

    def claim(scene: str, k: int, source: str) -> None:
        other = written.setdefault(scene, {}).setdefault(k, source)
        if other != source:
            raise DataError(f"{features}: groups '{other}' and '{source}' both name image {k} of scene {scene}; "
                            "keep one of them")

    if fmt == "hloc":
        feats = read_hloc_features(features)
        where_of = {}
        for name, feat in feats.items():
            where = f"{features}, group '{name}'"
            scene, k, image = names.resolve(name, where)
            claim(scene, k, name)
            _write_npz(out_root, method, scene, image, feat, where)
            where_of[name] = where
        if matches is not None:
            for (n0, n1), pm in read_hloc_matches(matches, list(feats)).items():
                check_matches(pm, len(feats[n0].keypoints), len(feats[n1].keypoints), f"{matches}, pair ({n0}, {n1})")
                pairs += 1
    else:
        preds = read_gluefactory_predictions(features, require_descriptors=True)
        blocks: dict[str, tuple[int, str]] = {}
        first: dict[str, tuple[str, ImageFeatures]] = {}
        for name, p in preds.items():
            parsed = gluefactory_hpatches_pair(name)
            if parsed is None:
                raise DataError(f"{features}, group '{name}': not a pair of glue-factory's HPatches evaluation "
                                "(<sequence>/<item index>.ppm, gluefactory/datasets/hpatches.py); descbench maps only "
                                "those groups to its scenes")
            scene, a, b, block = parsed
            seen = blocks.setdefault(scene, (block, name))
            if seen[0] != block:
                raise DataError(f"{features}: groups '{seen[1]}' and '{name}' of sequence {scene} are items of two "
                                "different sequences' blocks (5 items per sequence); the file mixes two evaluations")
            sides = [ImageFeatures(p.keypoints[i], p.descriptors[i], p.scores[i]) for i in (0, 1)]
            for side, k in ((0, a), (1, b)):
                where = f"{features}, group '{name}' (keypoints{side})"
                sc, kk, image = names.resolve(f"{scene}/{k}", where)
                if side == 0 and scene in first:
                    prev_name, prev = first[scene]
                    if not all(_same(getattr(prev, f), getattr(sides[0], f)) for f in ("keypoints", "descriptors", "scores")):
                        raise DataError(f"{features}: image 1 of sequence {scene} has different features in groups "
                                        f"'{prev_name}' and '{name}' (keypoints0/descriptors0/keypoint_scores0); descbench "
                                        "needs one set of features per image: extract them deterministically")
                    continue
                if side == 0:
                    first[scene] = (name, sides[0])
                claim(sc, kk, name)
                _write_npz(out_root, method, sc, image, sides[side], where)
            if p.matches[0] is not None:
                pairs += 1
    return {"images": {s: sorted(ks) for s, ks in sorted(written.items())}, "pairs": pairs}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and np.array_equal(a, b)


def _report_import(summary: dict, scene_root: Path, out_root: Path, method: str) -> None:
    n = sum(len(v) for v in summary["images"].values())
    print(f"descbench: wrote {n} feature file(s) of {len(summary['images'])} scene(s) under {out_root} "
          f"(<scene>/<image>.{method})" + (f"; {summary['pairs']} pair(s) of matches checked against them "
                                            "(descbench matches the descriptors itself)" if summary["pairs"] else ""))
    for scene, ks in summary["images"].items():
        have = scene_files(Path(scene_root) / scene).n_images
        missing = sorted(set(range(1, have + 1)) - set(ks))
        if missing:
            print(f"descbench: warning: scene {scene}: no features for image(s) {missing} in the file; evaluating "
                  "this scene will fail until they exist", file=sys.stderr)
    print("Evaluate them with these config entries (a precomputed keypoint set and its descriptor):\n"
          f"keypoint_sets:\n  {method}:\n    detector: precomputed\n    params: {{method: {method}, root: {out_root}}}\n"
          f"descriptors:\n  {method}:\n    family: precomputed\n    keypoint_sets: [{method}]")


# ----------------------------------------------------------------------------- commands


def add_commands(sub) -> dict:
    """The feature-file commands; returns ``{command: function running it}``."""
    p = sub.add_parser("export-features", help="a keypoint set + descriptor of a run as hloc features.h5, glue-factory "
                                               "HPatches predictions.h5 or D2-Net npz files")
    p.add_argument("--results", type=Path, required=True, help="the run's experiment folder, results/<experiment>")
    p.add_argument("--keypoint-set", required=True, help="keypoint set name")
    p.add_argument("--descriptor", required=True, help="descriptor name")
    p.add_argument("--format", choices=EXPORT_FORMATS, required=True)
    p.add_argument("--out", type=Path, required=True, help="hloc: the features.h5 file; gluefactory: the predictions.h5 "
                                                           "file; d2net: the folder of <scene>/<image>.<method>")
    p.add_argument("--method", default=None, help="d2net: the files' suffix (default: the descriptor name)")
    p.add_argument("--scene-root", type=Path, default=None,
                   help="the dataset folder: image names from its files (default <scene>/<k>.ppm, HPatches)")
    p.add_argument("--keep-large-scenes", action="store_true",
                   help="gluefactory: write its 8 large HPatches scenes too, numbered as its dataset with "
                        "ignore_large_images: false (default: left out, as its default)")

    p = sub.add_parser("import-features", help="hloc or glue-factory HDF5 features as D2-Net npz files for detector: precomputed")
    p.add_argument("--format", choices=IMPORT_FORMATS, required=True)
    p.add_argument("--features", type=Path, required=True, help="hloc features.h5 or glue-factory predictions.h5")
    p.add_argument("--matches", type=Path, default=None, help="hloc matches.h5: checked against the features")
    p.add_argument("--scene-root", type=Path, required=True, help="the dataset folder holding the scene folders")
    p.add_argument("--out-root", type=Path, required=True, help="where the npz files go (<out-root>/<scene>/<image>.<method>)")
    p.add_argument("--method", required=True, help="the npz files' suffix = the precomputed set's params.method")
    return {"export-features": run_export, "import-features": run_import}


def run_export(a: argparse.Namespace) -> None:
    if a.keep_large_scenes and a.format != "gluefactory":
        raise DataError("--keep-large-scenes is for --format gluefactory (glue-factory's HPatches dataset leaves its "
                        "large scenes out); hloc and d2net exports write every scene")
    done = export_features(a.results, a.keypoint_set, a.descriptor, a.format, a.out, a.method, a.scene_root,
                           a.keep_large_scenes)
    print(f"descbench: wrote {a.format} features of {done['images']} image(s) to {a.out}"
          + (f" ({done['pairs']} pair(s); matches: descbench's mutual nearest neighbours)" if a.format == "gluefactory" else ""))
    if done["left_out"]:
        print(f"descbench: warning: scene(s) {', '.join(done['left_out'])} left out: glue-factory's HPatches dataset "
              "ignores its large scenes by default (ignore_large_images); --keep-large-scenes writes them, numbered "
              "as it does with ignore_large_images: false", file=sys.stderr)


def run_import(a: argparse.Namespace) -> None:
    if a.matches is not None and a.format != "hloc":
        raise DataError("--matches is hloc's matches.h5; glue-factory's predictions.h5 hold their matches themselves")
    summary = import_features(a.format, a.features, a.scene_root, a.out_root, a.method, a.matches)
    _report_import(summary, a.scene_root, a.out_root, a.method)
