"""The keypoint jobs: detect or derive a keypoint set on a scene batch (``keypoints``), a derived
set's dataset-wide size cutoff (``keypoint-cutoff``), every set's statistics (``keypoint-stats``) and
a set's export as a locked-keypoint file (``export-keypoints``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.layout import (check_homography_overlap, image_size, load_pairs, read_grey, read_homography,
                                       scene_files)
from descbench.errors import DataError
from descbench.fileops import file_sha256
from descbench.jobs.common import JobCommand, batch_args, json_arg, load_keypoints, result_paths
from descbench.keypoints import ImageKeypoints, border_upper_inclusive, filter_keypoints
from descbench.keypoints.sets import global_top_n, intersection_keep, set_sources
from descbench.paths import ResultPaths


def warn(msg: str) -> None:
    print(f"descbench: warning: {msg}", file=sys.stderr)


def scene_input_digests(files) -> dict[str, str]:
    """sha256 of each input file of a scene (images, homographies, ``pairs.txt`` and its pairs'
    files), by file name: two results with equal digests were computed from the same data."""
    return {Path(f).name: file_sha256(f) for f in files.all_paths()}


def dataset_digest(per_scene: dict[str, dict[str, str]]) -> str:
    """One sha256 over every scene's input digests (scene, file name, digest; sorted)."""
    h = hashlib.sha256()
    for scene in sorted(per_scene):
        for name in sorted(per_scene[scene]):
            h.update(f"{scene}/{name}:{per_scene[scene][name]}\n".encode())
    return h.hexdigest()


def detect_raw(image_path: Path, gray: np.ndarray, spec: dict, scene: str, image: int, kpset: str = "<set>",
               n_images: int | None = None) -> ImageKeypoints:
    """Image ``image`` (1..n) of ``scene``: the raw keypoints of the set's detector, in its order."""
    if spec["detector"] == "locked":
        from descbench.keypoints.locked import DUPLICATES, load_locked

        # the image's real size: a locked keypoint outside it is an error, not a border drop
        return load_locked(spec["params"]["path"], scene, image, gray.shape[1], gray.shape[0],
                           spec["params"].get("duplicates", DUPLICATES[0]), n_images)
    if spec["detector"] == "precomputed":
        from descbench.precomputed import check_cap_has_scores, load_features

        p = spec["params"]
        # image_size: a keypoint outside the image is an error (as for locked keypoints), not a border drop
        feats = load_features(image_path, p["method"], p.get("root"), p.get("default_size_px", 12.0),
                              p.get("descriptor_kind"), image_size=(gray.shape[1], gray.shape[0]))
        check_cap_has_scores(feats, spec.get("max_keypoints"), kpset)
        return feats.keypoints
    from descbench.keypoints.detectors import DETECTORS, detect

    if spec["detector"] not in DETECTORS:
        raise DataError(f"unknown detector {spec['detector']!r}")
    return detect(spec["detector"], gray, spec["params"])


def detect_scene(scene_dir: Path, kpset: str, spec: dict, out: Path) -> None:
    """Detect, border-filter and cap keypoints on the images of a scene; write one Parquet."""
    files = scene_files(scene_dir)
    for k in sorted(files.homographies):  # fail fast on a malformed homography, before any heavy work
        read_homography(files.homographies[k])
    own = {(p.a, p.b): (p.file, read_homography(p.file)) for p in files.listed if p.file is not None}
    projected = spec.get("mode", "independent") == "projected"
    per_image, sizes, raw_counts, empty = {}, {}, {}, []
    from descbench.keypoints.detectors import DETECTORS

    det = DETECTORS.get(spec["detector"])
    joint = det.create(spec["params"]) if det is not None and det.network else None  # one run: keypoints and rows
    side = {}
    for k, image_path in enumerate(files.images, start=1):
        if projected and k > 1:  # image 1's keypoints mapped through H_1_k, border rule in image k
            from descbench.keypoints.projected import project_keypoints

            w, h = image_size(image_path)  # read and validated like any detected image
            H = read_homography(files.homography_file(k, f"keypoint set '{kpset}' (mode: projected, image 1's keypoints "
                                                          f"mapped into image {k})"))
            kept = project_keypoints(per_image[1], H, w, h, spec["border_px"],
                                     sift_octave=spec["detector"] == "sift", upper_inclusive=border_upper_inclusive(spec))
            n_raw = len(per_image[1])
        else:
            gray = read_grey(image_path, spec.get("grey", "imread"))
            h, w = gray.shape[:2]
            if joint is not None:
                raw, rows = joint.detect(image_path, gray)
            else:
                raw = detect_raw(image_path, gray, spec, files.scene, k, kpset, files.n_images)
            kept = filter_keypoints(raw, w, h, spec["border_px"], spec["max_keypoints"], border_upper_inclusive(spec))
            n_raw = len(raw)
            if joint is not None:
                side[k] = (kept, rows[kept.source_index])
        sizes[str(k)] = [w, h]
        if k in files.homographies:  # image sizes known: H_1_k must map image 1 (at least partly) into image k
            check_homography_overlap(files.homographies[k], read_homography(files.homographies[k]), tuple(sizes["1"]), (w, h), k)
        raw_counts[str(k)] = n_raw
        if len(kept) == 0:
            empty.append(k)
            warn(f"{image_path}: no keypoint left after the border filter ({n_raw} {'projected' if projected and k > 1 else 'detected'}); "
                 "recorded as an empty image")
        per_image[k] = kept
    for (a, b), (path, H) in own.items():  # a pairs.txt pair's own file: image a (at least partly) into image b
        check_homography_overlap(path, H, tuple(sizes[str(a)]), tuple(sizes[str(b)]), b)
    extra = {}
    if spec["detector"] == "keynet":  # a learned detector: its weights' sha256 and the torch runtime
        from descbench.keypoints.keynet import cached_detector

        extra["runtime"] = cached_detector(spec["params"]).provenance
    if joint is not None:  # a joint network: its runtime, and its rows of the kept keypoints (side file)
        extra["runtime"] = joint.provenance()
    meta = io.provenance(
        "keypoints", {"keypoint_set": kpset, **spec}, scene=files.scene, image_sizes=sizes,
        raw_counts=raw_counts, empty_images=empty, inputs_sha256=scene_input_digests(files), **extra,
    )
    _write_keypoints(per_image, out, meta)
    if joint is not None and not projected:  # (projected: images 2..n are not the network's keypoints)
        from descbench.keypoints.joint import side_path, write_side_file

        write_side_file(side_path(out), side, {"identity": joint.identity, "weights": joint.label,
                                               "runtime": extra["runtime"]})


def _write_keypoints(per_image: dict[int, ImageKeypoints], out: Path, meta: dict) -> None:
    """One scene's keypoint file (schema ``io.KEYPOINTS``), images in order, rows in set order."""
    cols: dict[str, list] = {f: [] for f in io.KEYPOINTS.names}
    for k in sorted(per_image):
        kept = per_image[k]
        cols["image"].append(np.full(len(kept), k, dtype=np.int8))
        for f in ImageKeypoints.__dataclass_fields__:
            cols[f].append(getattr(kept, f))
    table = pa.table({f: pa.array(np.concatenate(v), type=io.KEYPOINTS.field(f).type) for f, v in cols.items()}, schema=io.KEYPOINTS)
    io.write_table(table, out, meta)


def _per_image_filters(kps: ImageKeypoints, filters: list[dict]) -> ImageKeypoints:
    """The per-image filters of a set, in order (a global filter, always last, is applied apart)."""
    from descbench.keypoints.filters import min_size, per_image_top_n_by_size

    for f in filters:
        if "min_size" in f:
            kps = kps.take(min_size(kps.size, f["min_size"]))
        elif "per_image_top_n_by_size" in f:
            kps = kps.take(per_image_top_n_by_size(kps.size, f["per_image_top_n_by_size"]))
    return kps


def keypoint_cutoff(paths: ResultPaths, name: str, spec: dict, out: Path) -> None:
    """The dataset-wide cutoff of a set's ``global_top_n_by_size`` filter, from its source's
    keypoints of every scene after the set's per-image filters
    (:func:`descbench.keypoints.filters.global_size_cutoff`); one small JSON file."""
    from descbench.keypoints.filters import global_size_cutoff

    n = global_top_n(spec)
    entries = []
    for scene in paths.scenes:
        per_image, _ = load_keypoints(Path(paths.keypoints(spec["source"], scene)))
        for k, kps in per_image.items():
            entries.append((scene, k, _per_image_filters(kps, spec.get("filters") or []).size))
    cutoff = global_size_cutoff(entries, n)
    total = int(sum(len(e[2]) for e in entries))
    io.write_text(out, json.dumps({"keypoint_set": name, "n": n, "candidates": total,
                                   "cutoff": list(cutoff) if cutoff else None}, sort_keys=True) + "\n")


def keypoint_statistics(paths: ResultPaths, scene_root: Path, kpsets: dict, repeatability_px: float, out_dir: Path,
                        pairs: str = "reference") -> None:
    """``keypoint_stats.{parquet,csv,md}``: one row per keypoint set (descbench.report.keypoint_stats);
    repeatability over each scene's pairs under the config's ``pairs`` option."""
    import pandas as pd

    from descbench.report.keypoint_stats import provenance_columns, set_statistics, to_markdown

    homographies, digests = {}, {}
    for scene in paths.scenes:
        files = scene_files(Path(scene_root) / scene)
        homographies[scene] = [(p.a, p.b, p.homography("repeatability")) for p in load_pairs(files, pairs)]
        digests[scene] = scene_input_digests(files)
    rows = []
    for name in kpsets:
        scenes = []
        for scene in paths.scenes:
            per_image, meta = load_keypoints(Path(paths.keypoints(name, scene)))
            scenes.append((scene, per_image, meta["image_sizes"], homographies[scene]))
        rows.append({**provenance_columns(name, kpsets), **set_statistics(scenes, repeatability_px)})
    table = pd.DataFrame(rows)
    table["inputs_sha256"] = dataset_digest(digests)  # the evaluated images and homographies
    out_dir = Path(out_dir)
    meta = io.provenance("keypoint_stats", {"keypoint_sets": kpsets, "repeatability_px": repeatability_px, "scenes": paths.scenes},
                         inputs_sha256=digests)
    io.write_table(pa.Table.from_pandas(table, preserve_index=False), out_dir / "keypoint_stats.parquet", meta)
    io.write_text(out_dir / "keypoint_stats.csv", table.to_csv(index=False))
    io.write_text(out_dir / "keypoint_stats.md", to_markdown(table))
    from descbench.report.table import html_page

    io.write_text(out_dir / "keypoint_stats.html", html_page("Keypoint sets", table))


def export_keypoints(paths: ResultPaths, name: str, out: Path) -> None:
    """Every scene's keypoints of set ``name`` as one locked-keypoint file (.parquet, .csv or
    .csv.gz), the format :func:`descbench.keypoints.locked.load_locked` imports bit-exactly.

    The file records in its ``octave_mode`` column how SIFT descriptors read the set's octave
    field (:func:`descbench.keypoints.sift.has_sift_octaves` of the set's root detector set, found
    through the keypoint files' provenance: a derived set's ``source`` / kept intersection side),
    so that a ``detector: locked`` set with the default ``octave: auto`` gives the same descriptors."""
    from descbench.keypoints.locked import export_table, write_export
    from descbench.keypoints.sift import has_sift_octaves

    scenes = paths.scenes
    loaded = [load_keypoints(Path(paths.keypoints(name, s))) for s in scenes]
    meta, chain = loaded[0][1], [name]
    spec = {k: v for k, v in meta["params"].items() if k != "keypoint_set"}
    while "detector" not in spec:  # a derived set: follow its source to the detector set
        nxt = spec["source"] if "source" in spec else intersection_keep(spec)
        if nxt in chain:
            raise DataError(f"cannot export keypoint set '{name}': its sources form a cycle ({' -> '.join(chain + [nxt])})")
        f = Path(paths.keypoints(nxt, scenes[0]))
        recorded = (meta.get("sources") or {}).get(nxt)
        if f.exists():
            meta = io.read_meta(f)
            spec = {k: v for k, v in meta["params"].items() if k != "keypoint_set"}
        elif recorded is not None and "detector" in recorded:
            spec = {k: v for k, v in recorded.items() if k != "keypoint_set"}
        else:
            raise DataError(f"cannot export keypoint set '{name}': its source set '{nxt}' ({' -> '.join(chain)}) has no "
                            f"file {f}, which says whether its octave field is SIFT's; rebuild it "
                            f"(snakemake --cores N --forcerun keypoints) and export again")
        chain.append(nxt)
    mode = "sift" if has_sift_octaves(spec) else "from_size"
    write_export(export_table(scenes, [p for p, _ in loaded], mode), out)


def derive_scene(paths: ResultPaths, scene: str, name: str, spec: dict, out: Path, cutoff_file: Path | None) -> None:
    """A set defined by ``source`` + ``filters`` (or by ``intersection``) on one scene."""
    from descbench.keypoints.filters import keep_by_cutoff, mutual_nearest_within

    sources = {s: load_keypoints(Path(paths.keypoints(s, scene))) for s in set_sources(spec)}
    first, (src, src_meta) = next(iter(sources.items()))  # an intersection's counts: its first source
    per_image = {}
    if "intersection" in spec:
        (a_name, (a, _)), (_, (b, _)) = sources.items()
        keep_a = intersection_keep(spec) == a_name
        for k in a:
            ia, ib = mutual_nearest_within(a[k].xy, b[k].xy, spec["intersection"]["tol_px"])
            per_image[k] = a[k].take(ia) if keep_a else b[k].take(ib)
    else:
        n = global_top_n(spec)
        cutoff = ()
        if n is not None:
            c = json.loads(Path(cutoff_file).read_text())["cutoff"]
            cutoff = tuple(c) if c else ()
        for k, kps in src.items():
            kps = _per_image_filters(kps, spec.get("filters") or [])
            per_image[k] = kps if n is None else kps.take(keep_by_cutoff(kps.size, scene, k, cutoff))
    from descbench.keypoints.joint import subset_side_file

    kept_from = intersection_keep(spec) if "intersection" in spec else spec["source"]
    subset_side_file(paths.keypoints(kept_from, scene), out, per_image)  # a joint network's rows, if its source has them
    empty = [k for k, kps in per_image.items() if len(kps) == 0]
    for k in empty:
        warn(f"keypoint set '{name}', scene {scene}, image {k}: no keypoint left after its filters; recorded as an empty image")
    meta = io.provenance(
        "keypoints", {"keypoint_set": name, **spec}, scene=scene, image_sizes=src_meta["image_sizes"],
        raw_counts=src_meta["raw_counts"], source_counts={str(k): len(v) for k, v in src.items()},
        empty_images=empty, sources={s: m["params"] for s, (_, m) in sources.items()},
    )
    _write_keypoints(per_image, out, meta)


def detect_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, spec: dict,
                 cutoff_file: Path | None = None) -> None:
    """Keypoints of every scene of a batch, one file per scene: detected (:func:`detect_scene`) or
    derived from other sets (:func:`derive_scene`)."""
    for scene in paths.batches[batch]:
        out = Path(paths.keypoints(kpset, scene))
        if "detector" in spec:
            detect_scene(Path(scene_root) / scene, kpset, spec, out)
        else:
            derive_scene(paths, scene, kpset, spec, out, cutoff_file)



# ----------------------------------------------------------------------------- commands


def add_commands(sub) -> dict:
    """The keypoint jobs' subcommands; returns ``{command: function running it}``."""
    p = sub.add_parser("keypoints", help="detect and filter the keypoints of one scene batch")
    batch_args(p)
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--cutoff", type=Path, default=None, help="the set's global_top_n_by_size cutoff (keypoint-cutoff)")

    p = sub.add_parser("keypoint-cutoff", help="dataset-wide cutoff of a keypoint set's global_top_n_by_size filter")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("keypoint-stats", help="statistics of every keypoint set (counts, sizes, coverage, repeatability)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--scene-root", type=Path, required=True, help="the folder holding the scene folders")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--keypoint-sets", required=True, help="the validated keypoint_sets config as JSON [[name, spec], ...] (row order)")
    p.add_argument("--repeatability-px", type=float, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--pairs", default="reference",
                   help="the config's pairs option: each scene's pairs without a pairs.txt (descbench.datasets.layout)")

    p = sub.add_parser("export-keypoints", help="one keypoint set of every scene as a locked-keypoint file (.parquet/.csv/.csv.gz)")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--batches", required=True, help="JSON {batch: [scenes]} of every evaluated scene")
    p.add_argument("--name", required=True, help="keypoint set name")
    p.add_argument("--out", type=Path, required=True, help="<file>.parquet, <file>.csv or <file>.csv.gz")
    return {"keypoints": JobCommand(run_keypoints, pools=("opencv",), pandas=False, timing=("keypoints", "name", None)), "keypoint-cutoff": run_cutoff, "keypoint-stats": run_stats, "export-keypoints": run_export}


def run_keypoints(a: argparse.Namespace) -> None:
    detect_batch(result_paths(a), a.scene_root, a.batch, a.name, json_arg(a.spec), a.cutoff)


def run_cutoff(a: argparse.Namespace) -> None:
    keypoint_cutoff(result_paths(a), a.name, json_arg(a.spec), a.out)


def run_stats(a: argparse.Namespace) -> None:
    keypoint_statistics(result_paths(a), a.scene_root, dict(json_arg(a.keypoint_sets)), a.repeatability_px, a.out_dir, a.pairs)


def run_export(a: argparse.Namespace) -> None:
    export_keypoints(result_paths(a), a.name, a.out)
