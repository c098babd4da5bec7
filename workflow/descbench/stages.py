"""The workflow's stages as plain functions (one per Snakemake rule kind): file in, file out.

They orchestrate I/O and call the pure functions of :mod:`descbench.keypoints`,
:mod:`descbench.descriptors` and :mod:`descbench.metrics`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.geometry import Pair
from descbench.datasets.layout import (check_homography_overlap, image_size, load_pairs, read_homography, read_image,
                                       scene_files)
from descbench.descriptors import compute_descriptors, get_family
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints, filter_keypoints
from descbench.keypoints.sets import global_top_n, intersection_keep, set_sources
from descbench.fileops import file_sha256
from descbench.paths import ResultPaths

def warn(msg: str) -> None:
    print(f"descbench: warning: {msg}", file=sys.stderr)


def write_timing(path: Path, scene: str, t0: float) -> None:
    """Wall time since ``t0``: not reproducible, so it lives outside the bit-identical Parquet files."""
    io.write_text(path, json.dumps({"scene": scene, "processing_time_ms": 1000 * (time.perf_counter() - t0)}) + "\n")


# ----------------------------------------------------------------------------- keypoints


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
    for k, image_path in enumerate(files.images, start=1):
        if projected and k > 1:  # image 1's keypoints mapped through H_1_k, border rule in image k
            from descbench.keypoints.projected import project_keypoints

            w, h = image_size(image_path)  # read and validated like any detected image
            H = read_homography(files.homography_file(k, f"keypoint set '{kpset}' (mode: projected, image 1's keypoints "
                                                          f"mapped into image {k})"))
            kept = project_keypoints(per_image[1], H, w, h, spec["border_px"],
                                     sift_octave=spec["detector"] == "sift")
            n_raw = len(per_image[1])
        else:
            gray = read_image(image_path)
            h, w = gray.shape[:2]
            raw = detect_raw(image_path, gray, spec, files.scene, k, kpset, files.n_images)
            kept = filter_keypoints(raw, w, h, spec["border_px"], spec["max_keypoints"])
            n_raw = len(raw)
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
    meta = io.provenance(
        "keypoints", {"keypoint_set": kpset, **spec}, scene=files.scene, image_sizes=sizes,
        raw_counts=raw_counts, empty_images=empty, inputs_sha256=scene_input_digests(files), **extra,
    )
    _write_keypoints(per_image, out, meta)


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
    empty = [k for k, kps in per_image.items() if len(kps) == 0]
    for k in empty:
        warn(f"keypoint set '{name}', scene {scene}, image {k}: no keypoint left after its filters; recorded as an empty image")
    meta = io.provenance(
        "keypoints", {"keypoint_set": name, **spec}, scene=scene, image_sizes=src_meta["image_sizes"],
        raw_counts=src_meta["raw_counts"], source_counts={str(k): len(v) for k, v in src.items()},
        empty_images=empty, sources={s: m["params"] for s, (_, m) in sources.items()},
    )
    _write_keypoints(per_image, out, meta)


def load_keypoints(path: Path) -> tuple[dict[int, ImageKeypoints], dict]:
    table, meta = io.read_table(path, io.KEYPOINTS)
    image = io.column_array(table.column("image"))
    arrays = {f: io.column_array(table.column(f)) for f in ImageKeypoints.__dataclass_fields__}
    per_image = {}
    for k in range(1, len(meta["image_sizes"]) + 1):  # every image of the scene, an empty one too
        sel = np.flatnonzero(image == k)
        per_image[k] = ImageKeypoints(**{f: a[sel] for f, a in arrays.items()})
    return per_image, meta


# ----------------------------------------------------------------------------- descriptors


def describe_scene(scene_dir: Path, keypoints: Path, name: str, spec: dict, kpset_spec: dict, out: Path) -> None:
    """Compute one descriptor for every keypoint of a scene; rows aligned with the keypoint file."""
    files = scene_files(scene_dir)
    per_image, kmeta = load_keypoints(keypoints)
    blocks, images = [], []
    for k, image_path in enumerate(files.images, start=1):
        where = f"descriptor '{name}', scene {files.scene}, image {k}"
        d = compute_descriptors(spec["family"], spec["params"], image_path, per_image[k], kpset_spec, where)
        if blocks and (d.shape[1] != blocks[0].shape[1] or d.dtype != blocks[0].dtype):
            raise DataError(
                f"{where} ({image_path}): {d.dtype} x {d.shape[1]} descriptors, but image 1 has "
                f"{blocks[0].dtype} x {blocks[0].shape[1]}; all images must use one descriptor "
                "dimension and type (check the descriptor's input files for this image)"
            )
        blocks.append(d)
        images.append(np.full(d.shape[0], k, dtype=np.int8))
    runtime = fam.runtime_provenance(spec["params"]) if (fam := get_family(spec["family"])).runtime_provenance else None
    _write_descriptors(blocks, images, name, spec, files.scene, keypoints, kmeta, out,
                       **({"runtime": runtime} if runtime else {}))  # learned families: how they ran


def _write_descriptors(blocks: list[np.ndarray], images: list[np.ndarray], name: str, spec: dict, scene: str,
                       keypoints: Path, kmeta: dict, out: Path, **extra) -> None:
    """One scene's descriptor file: the per-image rows ``blocks`` and their image numbers, with
    the provenance (spec, dimension, distance, the keypoint file's sha256, ``extra``)."""
    desc = np.concatenate(blocks)
    binary = desc.dtype == np.uint8
    fam = get_family(spec["family"])
    if fam.binary is not None and fam.binary != binary:
        raise DataError(f"descriptor '{name}': family {spec['family']} produced {desc.dtype}, expected {'uint8' if fam.binary else 'float32'}")
    meta = io.provenance(
        "descriptors", {"descriptor": name, **spec}, scene=scene, descriptor=name,
        dimension=int(desc.shape[1]) * (8 if binary else 1), dtype=str(desc.dtype),
        distance="hamming" if binary else "l2", packed_bits=binary,
        keypoints_sha256=file_sha256(keypoints), keypoint_set=kmeta["params"]["keypoint_set"], **extra,
    )
    io.write_table(io.descriptors_table(np.concatenate(images), desc), out, meta)


def describe_composite_scene(paths: ResultPaths, scene: str, kpset: str, name: str, spec: dict, out: Path) -> None:
    """A composite descriptor (descbench.descriptors.composite) of one scene: its components'
    descriptor files, each checked row-aligned with the scored set ``kpset`` image by image, then
    aggregated. ``spec["components"]``: :func:`descbench.descriptors.composite.resolve_components`."""
    from descbench.descriptors.composite import aggregate, check_alignment

    keypoints = Path(paths.keypoints(kpset, scene))
    per_image, kmeta = load_keypoints(keypoints)
    comps = spec["components"]
    names = [f"{i} ('{c['descriptor']}' on '{c['keypoint_set']}')" for i, c in enumerate(comps)]
    files = [(Path(paths.keypoints(c["keypoint_set"], scene)), Path(paths.descriptors(c["keypoint_set"], c["descriptor"], scene)))
             for c in comps]
    feats = [read_features(k, d) for k, d in files]
    blocks, images = [], []
    for k in per_image:
        where = f"descriptor '{name}', scene {scene}, image {k}"
        for c, f, n in zip(comps, feats, names):
            check_alignment(per_image[k], f.per_image[k], c["tol_px"], f"{where}, component {n}")
        d = aggregate([f.by_image[k] for f in feats], spec["params"], names, where)
        if blocks and d.shape[1] != blocks[0].shape[1]:
            raise DataError(f"{where}: {d.shape[1]}-D rows, but image 1 has {blocks[0].shape[1]}-D; rebuild the components' descriptor files")
        blocks.append(d)
        images.append(np.full(d.shape[0], k, dtype=np.int8))
    _write_descriptors(blocks, images, name, spec, scene, keypoints, kmeta, out,
                       component_files_sha256=[file_sha256(d) for _, d in files])


# ----------------------------------------------------------------------------- scoring


@dataclass
class SceneFeatures:
    """Keypoints and descriptors of one scene, per image 1..n, checked to belong together."""

    scene: str
    per_image: dict[int, ImageKeypoints]
    by_image: dict[int, np.ndarray]
    kmeta: dict
    dmeta: dict


def read_features(keypoints: Path, descriptors: Path) -> SceneFeatures:
    """Load one scene's keypoint and descriptor files; fail if they do not belong together."""
    per_image, kmeta = load_keypoints(keypoints)
    dtable, dmeta = io.read_table(descriptors)
    if dmeta.get("keypoints_sha256") != file_sha256(keypoints):
        raise DataError(f"{descriptors} was computed from a different version of {keypoints}; rerun its descriptor job")
    desc = io.descriptors_array(dtable)
    dimage = io.column_array(dtable.column("image"))
    if desc.shape[0] != sum(len(v) for v in per_image.values()):
        raise DataError(f"{descriptors}: {desc.shape[0]} descriptors for {sum(len(v) for v in per_image.values())} keypoints "
                        f"of images 1..{len(per_image)}; rebuild it")
    by_image = {k: desc[dimage == k] for k in per_image}
    for k in per_image:
        if by_image[k].shape[0] != len(per_image[k]):
            raise DataError(f"{descriptors}: image {k} has {by_image[k].shape[0]} descriptors for {len(per_image[k])} keypoints; rebuild it")
    return SceneFeatures(kmeta.get("scene", Path(keypoints).stem), per_image, by_image, kmeta, dmeta)


def _groups(pairs: list[Pair]) -> list[tuple[int, list[Pair]]]:
    """The pairs by query image ``a``: one group per image, in order of first appearance, each
    group's pairs in listing order. A group shares its query keypoints (one screen pass)."""
    out: dict[int, list[Pair]] = {}
    for p in pairs:
        out.setdefault(p.a, []).append(p)
    return list(out.items())


def _labelled(pairs: list[Pair]) -> bool:
    """Whether a scene's rows carry ``query_image``: only when some pair's query image is not 1.
    A scene of (1, k) pairs (HPatches, the demo) keeps the schema and bytes it always had, where
    ``pair`` = k names the pair."""
    return any(p.a != 1 for p in pairs)


def _scene_pairs(files, pairs: list[Pair] | None) -> list[Pair]:
    """``pairs`` or, when None (the single-scene entry points), the scene's pairs under the
    default ``pairs: reference`` (its ``pairs.txt`` when it has one)."""
    return load_pairs(files) if pairs is None else pairs


def _target(f: SceneFeatures, p: Pair, what: str):
    """The :class:`descbench.metrics.bojanic.Target` of pair ``p``'s image b."""
    from descbench.metrics.bojanic import Target

    kb = f.per_image[p.b]
    return Target(kb.xy, f.by_image[p.b], p.homography(what), tuple(f.kmeta["image_sizes"][str(p.b)]), kb.angle, kb.size)


def retrieval_task(scene_dir: Path, f: SceneFeatures, scoring: dict, out_queries: Path, out_pairs: Path, out_timing: Path,
                   results: dict | None = None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Keypoint retrieval scores of one scene: per-query records and per-pair statistics.

    ``pairs``: the scene's :class:`~descbench.datasets.geometry.Pair` list (None: its default
    pairs); each pair's queries are image a's keypoints, its candidates image b's. ``results``:
    ``{(a, b): PairResult}`` already computed by :func:`scene_pass` (None: computed here);
    ``t0``: start of the timing.
    """
    # metrics (numba) imported here, not at the top: keypoint/descriptor jobs never load numba
    from descbench.metrics.retrieval import RetrievalParams, pair_statistics, policy_rank, score_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    params = RetrievalParams.from_config(scoring)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    qschema = io.with_query_image(io.QUERIES) if labelled else io.QUERIES
    qcols: dict[str, list] = {n: [] for n in qschema.names}
    prows = []
    for p in pairs:
        a, k = p.a, p.b
        q = per_image[a]
        size = tuple(kmeta["image_sizes"][str(k)])
        res = results[(a, k)] if results is not None else score_pair(
            q.xy, by_image[a], per_image[k].xy, by_image[k], p.homography("keypoint retrieval"), size, params,
            (q.angle, q.size), (per_image[k].angle, per_image[k].size))
        nq = q.xy.shape[0]
        qcols["scene"].append(np.full(nq, files.scene, dtype=object))
        if labelled:
            qcols["query_image"].append(np.full(nq, a, dtype=np.int8))
        qcols["pair"].append(np.full(nq, k, dtype=np.int8))
        qcols["query"].append(np.arange(nq, dtype=np.int32))
        for n in ("inside", "n_relevant", "gt_index", "gt_px", "n_closer", "n_tied", "ap"):
            qcols[n].append(getattr(res, n))
        qcols["rank"].append(res.rank if res.rank is not None else policy_rank(res.n_closer, res.n_tied, params.tie_policy))
        prows.append({"scene": files.scene, **({"query_image": a} if labelled else {}), "pair": k,
                      **pair_statistics(res, len(per_image[k]))})
    queries = pa.table({n: pa.array(np.concatenate(v), type=qschema.field(n).type) for n, v in qcols.items()}, schema=qschema)
    pschema = io.with_query_image(io.PAIRS) if labelled else io.PAIRS
    pairs_table = io.table_from_rows(prows, pschema, f"scene {files.scene}: retrieval pairs table (io.PAIRS)")
    prov = io.provenance(
        "scoring", {"task": "keypoint_retrieval", **scoring}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance=dmeta["distance"], empty_images=kmeta["empty_images"],
    )
    io.write_table(queries, out_queries, prov)
    io.write_table(pairs_table, out_pairs, prov)
    write_timing(out_timing, files.scene, t0)


def _check_verification_groups(scene: str, groups: list, verification: dict) -> None:
    """Verification of a scene with several query images pools their lists into the scene's one
    list (:func:`_pooled_scene_stats`); the statistics that are not computed from that list
    (``candidates: all``, ``convention: workbench``) have no such pooling: refused by name."""
    if len(groups) < 2:
        return
    bad = [f"verification.{k}: {verification[k]}" for k, ok in (("candidates", "nearest"), ("convention", "descbench"))
           if verification[k] != ok]
    if bad:
        raise ConfigError(
            f"scene {scene}: its pairs have {len(groups)} query images ({', '.join(str(a) for a, _ in groups)}), and "
            f"{' and '.join(bad)} is defined for one query image per scene (HPatches' image 1); use "
            "verification.candidates: nearest and verification.convention: descbench, or give the scene pairs with "
            "one query image (pairs.txt, or pairs: reference)")


def _pooled_scene_stats(results: list, quantized_bins: int) -> dict:
    """One scene row from several query images' :class:`~descbench.metrics.bojanic.SceneTaskResult`:
    the scene's list is their lists one after the other, so its AP columns are the AP of that
    list (:func:`descbench.metrics.bojanic.verification_ap`); counts and AP sums add up; the
    distractor draw is the scene's, the same for every query image."""
    from descbench.metrics.bojanic import verification_ap

    st = [r.stats for r in results]
    out = verification_ap(np.concatenate([r.v_distance for r in results]), np.concatenate([r.v_label for r in results]),
                          quantized_bins)
    for key in ("n_queries", "n_target_keypoints", "verification_num_positives", "verification_num_negatives",
                "retrieval_n_queries_with_positive", "retrieval_sum_ap_negative", "retrieval_sum_ap_ignore",
                "retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors"):
        out[key] = sum(s[key] for s in st)
    out["n_distractor_scenes"], out["n_distractors"] = st[0]["n_distractor_scenes"], st[0]["n_distractors"]
    return out


def _verification_inputs(files, f: SceneFeatures, draws: list, scoring: dict, verification: dict, group: list[Pair]):
    """``(targets, BojanicParams)`` of one query image's pairs ``group`` (DataError for foreign distractors)."""
    from descbench.metrics.bojanic import BojanicParams

    by_image = f.by_image
    for d in draws:
        if d.desc.dtype != by_image[1].dtype or d.desc.shape[1] != by_image[1].shape[1]:
            raise DataError(
                f"scene {files.scene}: distractors from scene {d.scene} are {d.desc.dtype} x {d.desc.shape[1]}, "
                f"the scene's descriptors {by_image[1].dtype} x {by_image[1].shape[1]}; rebuild the distractor bank"
            )
    targets = [_target(f, p, "keypoint verification") for p in group]
    return targets, BojanicParams.from_config(scoring=scoring, verification=verification)


def _matching_params(scoring: dict, matching: dict):
    """``(MatchingParams, ClassifierParams)`` from the validated scoring and matching sections."""
    from descbench.metrics.classifier import ClassifierParams
    from descbench.metrics.matching import MatchingParams
    sections = {"scoring": scoring, "matching": matching}
    return MatchingParams.from_config(**sections), ClassifierParams.from_config(**sections)


def verification_task(scene_dir: Path, f: SceneFeatures, distractors: list, scoring: dict, verification: dict,
                      out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path,
                      result=None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Keypoint verification and keypoint retrieval of one scene, with distractors of other scenes.

    Each query image a of the scene's ``pairs`` (None: its default pairs) is scored against its
    pairs' images b and the distractors; with several query images, the list and query rows
    carry ``query_image`` and the scene row pools them (:func:`_pooled_scene_stats`).
    ``distractors``: the scene's :class:`descbench.metrics.bojanic.Distractors`, in draw order
    (:func:`descbench.metrics.distractors.draw_distractors`; from the distractor bank in the
    workflow, :func:`distractors_from_files` otherwise). ``result``: ``[(a, group, SceneTaskResult)]``
    per query image already computed by :func:`scene_pass` (None: computed here); ``t0``: start
    of the timing.
    """
    from descbench.metrics.ap import verification_ap_columns
    from descbench.metrics.bojanic import score_scene_tasks

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    draws = distractors
    groups = _groups(pairs)
    _check_verification_groups(files.scene, groups, verification)
    if result is None:
        result = []
        for a, group in groups:
            targets, params = _verification_inputs(files, f, draws, scoring, verification, group)
            result.append((a, group, score_scene_tasks(per_image[a].xy, by_image[a], targets, list(draws), params,
                                                       where=f"scene {files.scene}", q_frame=(per_image[a].angle, per_image[a].size))))
    vparts, qparts = [], []
    for a, group, res in result:
        seg_scene = [files.scene] * len(group) + [d.scene for d in draws]
        seg_image = [p.b for p in group] + [d.image for d in draws]
        vcols = {
            "query": pa.array(res.v_query, pa.int32()),
            "target_scene": pa.array([seg_scene[s] for s in res.v_segment], pa.string()),
            "target_image": pa.array(np.array(seg_image, dtype=np.int8)[res.v_segment.astype(np.int64)] if len(res.v_segment) else np.zeros(0, np.int8), pa.int8()),
            "candidate": pa.array(res.v_candidate, pa.int32()),
            "distance": pa.array(res.v_distance, pa.float64()),
            "label": pa.array(res.v_label, pa.int8()),
        }
        nq = len(per_image[a])
        qcols = {
            "scene": pa.array([files.scene] * nq, pa.string()),
            "query": pa.array(np.arange(nq), pa.int32()),
            "n_positives": pa.array(res.r_positives, pa.int32()),
            "ap_negative": pa.array(res.r_ap_negative, pa.float64()),
            "ap_ignore": pa.array(res.r_ap_ignore, pa.float64()),
        }
        if labelled:
            vcols["query_image"] = pa.array(np.full(len(res.v_query), a, np.int8), pa.int8())
            qcols["query_image"] = pa.array(np.full(nq, a, np.int8), pa.int8())
        vparts.append(vcols)
        qparts.append(qcols)
    lschema = io.with_query_image(io.VERIFICATION_LIST) if labelled else io.VERIFICATION_LIST
    rschema = io.with_query_image(io.KEYPOINT_RETRIEVAL) if labelled else io.KEYPOINT_RETRIEVAL
    vlist = pa.concat_tables([pa.table({n: c[n] for n in lschema.names}, schema=lschema) for c in vparts])
    queries = pa.concat_tables([pa.table({n: c[n] for n in rschema.names}, schema=rschema) for c in qparts])
    if len(result) == 1:
        stats = result[0][2].stats
    else:
        from descbench.metrics.bojanic import BojanicParams

        stats = _pooled_scene_stats([r for _, _, r in result],
                                    BojanicParams.from_config(scoring=scoring, verification=verification).quantized_bins)
    scene_schema = io.verification_scene_schema(verification_ap_columns(), verification["convention"] == "workbench")
    scene_row = io.table_from_rows([{"scene": files.scene, **stats}], scene_schema,
                                   f"scene {files.scene}: verification scene table (io.verification_scene_schema)")
    prov = io.provenance(
        "verification", {"task": "keypoint_verification+keypoint_retrieval", "scoring": scoring, "verification": verification},
        scene=files.scene, descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance="l2_squared" if dmeta["distance"] == "l2" else dmeta["distance"],
        distractors=[{"scene": d.scene, "image": d.image, "rows": d.rows.tolist()} for d in draws],
        empty_images=kmeta["empty_images"],
    )
    io.write_table(vlist, out_list, prov)
    io.write_table(queries, out_queries, prov)
    io.write_table(scene_row, out_scene, prov)
    write_timing(out_timing, files.scene, t0)


def matching_task(scene_dir: Path, f: SceneFeatures, scoring: dict, matching: dict,
                  out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path,
                  results: dict | None = None, t0: float | None = None, pairs: list[Pair] | None = None) -> None:
    """Matching metrics (mutual NN: legacy precision, MMA, matching score, homography accuracy,
    repeatability) and matching as a binary classifier, for every pair (a, b) of one scene
    (``pairs``; None: its default pairs).

    ``results``: ``{(a, b): (stats, ClassifierResult)}`` already computed by :func:`scene_pass`
    (None: computed here); ``t0``: start of the timing.
    """
    from descbench.metrics.matching import evaluate_pair

    t0 = time.perf_counter() if t0 is None else t0
    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    labelled = _labelled(pairs)
    per_image, by_image, kmeta, dmeta = f.per_image, f.by_image, f.kmeta, f.dmeta
    mparams, cparams = _matching_params(scoring, matching)
    prows, crows, roc_cols = [], [], []
    for p in pairs:
        a, k = p.a, p.b
        key = {"scene": files.scene, **({"query_image": a} if labelled else {}), "pair": k}
        if results is not None:
            stats, res = results[(a, k)]
        else:
            stats, res = evaluate_pair(per_image[a].xy, by_image[a], per_image[k].xy, by_image[k], p.homography("matching"),
                                       tuple(kmeta["image_sizes"][str(a)]), tuple(kmeta["image_sizes"][str(k)]), mparams,
                                       cparams, tuple(matching["classifier_matchers"]))
        prows.append({**key, **stats})
        crows += [{**key, **r} for r in res.summary_rows()]
        rr = res.roc_rows()
        n = rr["tp"].shape[0]
        roc_cols.append({"scene": np.full(n, files.scene, dtype=object), **({"query_image": np.full(n, a, dtype=np.int8)} if labelled else {}),
                         "pair": np.full(n, k, dtype=np.int8), **rr})
    label = io.with_query_image if labelled else (lambda schema: schema)
    pairs_table = io.table_from_rows(prows, label(io.matching_pairs_schema(mparams.mma_thresholds)),
                                     f"scene {files.scene}: matching pairs table (io.matching_pairs_schema)")
    classifier = io.table_from_rows(crows, label(io.CLASSIFIER), f"scene {files.scene}: classifier table (io.CLASSIFIER)")
    roc_schema = label(io.ROC_POINTS)
    roc = pa.table({c.name: pa.array(np.concatenate([r[c.name] for r in roc_cols]), type=c.type) for c in roc_schema}, schema=roc_schema)
    prov = io.provenance(
        "matching", {"task": "matching+binary_classifier", "scoring": scoring, "matching": matching}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"], distance=dmeta["distance"],
        empty_images=kmeta["empty_images"], image_sizes=kmeta["image_sizes"],
    )
    io.write_table(pairs_table, out_pairs, prov)
    io.write_table(classifier, out_classifier, prov)
    io.write_table(roc, out_roc, prov)
    write_timing(out_timing, files.scene, t0)


@dataclass
class ScenePass:
    """The built-in tasks' results of one scene's pairs (None: task disabled), keyed by pair, and
    each task's seconds summed over the scene's query images (:func:`scene_pass`)."""

    retrieval: dict | None  # {(a, b): PairResult}
    verification: list | None  # [(a, its pairs, SceneTaskResult)] per query image
    matching: dict | None  # {(a, b): (stats, ClassifierResult)}
    seconds: dict


def scene_pass(scene_dir: Path, f: SceneFeatures, scoring: dict, distractors: list | None,
               verification: dict | None, matching: dict | None, pairs: list[Pair] | None = None) -> ScenePass:
    """Keypoint retrieval, verification (when ``verification`` and ``distractors`` are given) and
    matching (when ``matching`` is given) of one scene's ``pairs`` (None: its default pairs) with
    ONE float32 screen product per block of query rows for all of them, per query image:
    :func:`descbench.metrics.scenepass.score_scene` on each query image a and its pairs' images b."""
    from descbench.metrics import scenepass
    from descbench.metrics.retrieval import RetrievalParams

    files = scene_files(scene_dir)
    pairs = _scene_pairs(files, pairs)
    per_image, by_image, kmeta = f.per_image, f.by_image, f.kmeta
    groups = _groups(pairs)
    with_ver = verification is not None and distractors is not None
    if with_ver:
        _check_verification_groups(files.scene, groups, verification)
    mm = (*_matching_params(scoring, matching), tuple(matching["classifier_matchers"])) if matching is not None else None
    out = ScenePass({}, [] if with_ver else None, {} if matching is not None else None, {})
    for a, group in groups:
        bparams = None
        if with_ver:
            targets, bparams = _verification_inputs(files, f, distractors, scoring, verification, group)
        else:
            targets = [_target(f, p, "keypoint retrieval") for p in group]
        q = per_image[a]
        sr = scenepass.score_scene(q.xy, by_image[a], targets, RetrievalParams.from_config(scoring),
                                   distractors if with_ver else None, bparams, mm, tuple(kmeta["image_sizes"][str(a)]),
                                   where=f"scene {files.scene}", q_frame=(q.angle, q.size))
        out.retrieval.update({(a, p.b): r for p, r in zip(group, sr.retrieval)})
        if with_ver:
            out.verification.append((a, group, sr.verification))
        if sr.matching is not None:
            out.matching.update({(a, p.b): r for p, r in zip(group, sr.matching)})
        for key, s in sr.seconds.items():
            out.seconds[key] = out.seconds.get(key, 0.0) + s
    return out


# Single-scene entry points on files (tests, scripts): the same task functions.


def score_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict,
                out_queries: Path, out_pairs: Path, out_timing: Path) -> None:
    """Keypoint retrieval scores of one scene from its files (see :func:`retrieval_task`)."""
    retrieval_task(scene_dir, read_features(keypoints, descriptors), scoring, out_queries, out_pairs, out_timing)


def score_verification_scene(scene_dir: Path, keypoints: Path, descriptors: Path, distractor_files: dict[str, tuple[Path, Path]],
                             all_scenes: list[str], scoring: dict, verification: dict,
                             out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path) -> None:
    """Keypoint verification of one scene from its files; ``distractor_files`` maps each distractor
    scene to its (keypoints, descriptors) files."""
    f = read_features(keypoints, descriptors)
    draws = distractors_from_files(f.scene, all_scenes, verification, distractor_files, f.dmeta["descriptor"])
    verification_task(scene_dir, f, draws, scoring, verification, out_list, out_queries, out_scene, out_timing)


def score_matching_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict, matching: dict,
                         out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path) -> None:
    """Matching metrics of one scene from its files (see :func:`matching_task`)."""
    matching_task(scene_dir, read_features(keypoints, descriptors), scoring, matching, out_pairs, out_classifier, out_roc, out_timing)


# ----------------------------------------------------------------------------- distractors

# The draw parameters (descbench.metrics.distractors); the other verification options do not
# change which keypoints are drawn.
DRAW_KEYS = ("seed", "distractor_scenes", "distractors_per_scene")


def image_counts(descriptors: Path, keypoints: Path) -> dict[int, int]:
    """Keypoints per image 1..n of a scene, from its descriptor file's ``image`` column only; ``n``
    from its keypoint file's footer (an image without keypoints has no row to count)."""
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(descriptors) as fh:
            image = io.column_array(fh.read(columns=["image"]).column("image"))
    except (OSError, pa.ArrowInvalid, KeyError) as exc:
        raise DataError(f"cannot read {descriptors} ({exc}); {io.rebuild_hint(descriptors)}") from exc
    n = len(io.read_meta(keypoints)["image_sizes"])
    return {k: int(c) for k, c in zip(range(1, n + 1), np.bincount(image.astype(np.int64), minlength=n + 1)[1:])}


def draw_all(targets: list[str], all_scenes: list[str], verification: dict, counts_of) -> dict[str, list]:
    """The distractor draw of each target scene among ``all_scenes``
    (:func:`descbench.metrics.distractors.draw_distractors`); ``counts_of(scene)`` gives that
    scene's keypoints per image."""
    from descbench.metrics.distractors import distractor_scenes, draw_distractors

    seed, n_sc, per_sc = (verification[k] for k in DRAW_KEYS)
    return {
        s: draw_distractors(s, all_scenes, n_sc, per_sc, seed, {o: counts_of(o) for o in distractor_scenes(s, all_scenes, n_sc, seed)})
        for s in targets
    }


def _take_rows(draws: dict[str, list], descriptor: str, load) -> dict[str, list]:
    """Attach the drawn rows' descriptors: each distractor scene's file is loaded once (``load``)."""
    from descbench.metrics.bojanic import Distractors

    users: dict[str, list] = {}
    for target, ds in draws.items():
        for i, d in enumerate(ds):
            users.setdefault(d.scene, []).append((target, i))
    out = {t: [None] * len(ds) for t, ds in draws.items()}
    for other in sorted(users):
        by_image, dmeta, where = load(other)
        if dmeta["descriptor"] != descriptor:
            raise DataError(f"{where} holds descriptor '{dmeta['descriptor']}', expected '{descriptor}'")
        for target, i in users[other]:
            d = draws[target][i]
            out[target][i] = Distractors(d.scene, d.image, d.rows, np.ascontiguousarray(by_image[d.image][d.rows]))
    return out


def distractors_from_files(scene: str, all_scenes: list[str], verification: dict,
                           files: dict[str, tuple[Path, Path]], descriptor: str) -> list:
    """One scene's distractors read directly from the other scenes' (keypoints, descriptors) files."""
    from descbench.metrics.distractors import distractor_scenes

    needed = distractor_scenes(scene, all_scenes, verification["distractor_scenes"], verification["seed"])
    missing = [o for o in needed if o not in files]
    if missing:
        raise DataError(f"scene {scene}: distractor scenes {', '.join(missing)} were drawn but their features were not given")

    def load(o):
        f = read_features(Path(files[o][0]), Path(files[o][1]))
        return f.by_image, f.dmeta, files[o][1]

    draws = draw_all([scene], all_scenes, verification, lambda o: image_counts(Path(files[o][1]), Path(files[o][0])))
    return _take_rows(draws, descriptor, load)[scene]


def build_distractor_bank(paths: ResultPaths, kpset: str, descriptor: str, verification: dict, out: Path,
                          features: str | None = None) -> None:
    """The distractor keypoints of every scene of one (keypoint set, descriptor), in one file.

    One row per drawn keypoint: ``target_scene`` (whose distractor it is), ``distractor_scene``,
    ``image``, ``row`` (keypoint index in that image) and its ``descriptor``; targets in scene
    order, then draw order. Every scoring job reads this one file instead of other scenes'
    descriptor files (each is read once here, and the DAG gets one input instead of ~20).
    """
    all_scenes = [s for ss in paths.batches.values() for s in ss]
    files_of = features or descriptor  # a scoring variant reads its base descriptor's files
    draw_params = {k: verification[k] for k in DRAW_KEYS}

    def load(o):  # `features`: the descriptor whose files a scoring variant reuses (descriptors.<d>.features_of)
        f = read_features(Path(paths.keypoints(kpset, o)), Path(paths.descriptors(kpset, files_of, o)))
        return f.by_image, f.dmeta, paths.descriptors(kpset, files_of, o)

    draws = draw_all(all_scenes, all_scenes, draw_params,
                     lambda o: image_counts(Path(paths.descriptors(kpset, files_of, o)), Path(paths.keypoints(kpset, o))))
    taken = _take_rows(draws, files_of, load)
    cols: dict[str, list] = {"target_scene": [], "distractor_scene": [], "image": [], "row": []}
    blocks = []
    for target in all_scenes:
        for d in taken[target]:
            n = d.rows.shape[0]
            cols["target_scene"] += [target] * n
            cols["distractor_scene"] += [d.scene] * n
            cols["image"].append(np.full(n, d.image, np.int8))
            cols["row"].append(d.rows.astype(np.int32))
            blocks.append(d.desc)
    if blocks:
        desc = np.concatenate(blocks)
    else:  # no distractor at all (a single scene): keep the dtype/width of this descriptor
        first = read_features(Path(paths.keypoints(kpset, all_scenes[0])), Path(paths.descriptors(kpset, files_of, all_scenes[0])))
        desc = first.by_image[1][:0]
    table = io.descriptors_table(np.concatenate(cols["image"]) if cols["image"] else np.zeros(0, np.int8), desc)
    table = table.append_column("target_scene", pa.array(cols["target_scene"], pa.string()))
    table = table.append_column("distractor_scene", pa.array(cols["distractor_scene"], pa.string()))
    table = table.append_column("row", pa.array(np.concatenate(cols["row"]) if cols["row"] else np.zeros(0, np.int32), pa.int32()))
    table = table.select(["target_scene", "distractor_scene", "image", "row", "descriptor"])
    meta = io.provenance("distractors", {"keypoint_set": kpset, "descriptor": descriptor, **draw_params}, scenes=all_scenes)
    io.write_table(table, out, meta)


def read_distractor_bank(path: Path, all_scenes: list[str], verification: dict, descriptor: str) -> dict[str, list]:
    """{target scene: its Distractors in draw order} from a bank; fails if it was built for
    another scene list, draw or descriptor."""
    from descbench.metrics.bojanic import Distractors

    table, meta = io.read_table(path)
    want = {k: verification[k] for k in DRAW_KEYS}
    got = {k: meta["params"].get(k) for k in DRAW_KEYS}
    if got != want or meta.get("scenes") != list(all_scenes) or meta["params"].get("descriptor") != descriptor:
        raise DataError(
            f"{path} was drawn for another configuration (draw {got}, {len(meta.get('scenes', []))} scenes, "
            f"descriptor {meta['params'].get('descriptor')!r}; this job: draw {want}, {len(all_scenes)} scenes, "
            f"descriptor {descriptor!r}); rerun its `distractors` job through the workflow"
        )
    desc = io.descriptors_array(table)
    target, other, image, row = (io.column_array(table.column(c)) for c in ("target_scene", "distractor_scene", "image", "row"))
    out: dict[str, list] = {s: [] for s in all_scenes}
    n = len(target)
    i = 0
    while i < n:  # runs of one (target, distractor scene): one Distractors each, in file order
        j = i + 1
        while j < n and target[j] == target[i] and other[j] == other[i]:
            j += 1
        out[target[i]].append(Distractors(other[i], int(image[i]), row[i:j].astype(np.int64), np.ascontiguousarray(desc[i:j])))
        i = j
    return out


# ----------------------------------------------------------------------------- scene batches (one job each)


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


def describe_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, name: str, spec: dict, kpset_spec: dict) -> None:
    """One descriptor on every scene of a batch (:func:`describe_scene`), one file per scene."""
    for scene in paths.batches[batch]:
        out = Path(paths.descriptors(kpset, name, scene))
        if spec["family"] == "composite":
            describe_composite_scene(paths, scene, kpset, name, spec, out)
        else:
            describe_scene(Path(scene_root) / scene, Path(paths.keypoints(kpset, scene)), name, spec, kpset_spec, out)


@dataclass
class SceneJob:
    """One scene of a scoring job, as each task's writer gets it (descbench.paths.ScoreTask.writer).

    ``sections``: this job's settings, ``{section: settings}`` for ``scoring`` and every enabled
    task's section (the descriptor's effective values); ``fused``: the built-in tasks' results of
    the one screen pass over the scene (:func:`scene_pass`); ``distractors``: the scene's drawn
    distractors (verification on) or None; ``pairs``: the scene's pairs
    (:class:`~descbench.datasets.geometry.Pair`, the dataset's list under the config's ``pairs``)."""

    scene_dir: Path
    features: SceneFeatures
    sections: dict
    fused: object = None
    distractors: list | None = None
    pairs: list | None = None

    def t0_of(self, key: str) -> float:
        """Start of a fused task's timing: now minus its share of the fused pass."""
        return time.perf_counter() - self.fused.seconds[key]

    def write_timing(self, path: Path, t0: float) -> None:
        write_timing(path, self.features.scene, t0)


# The built-in tasks' writers (descbench.paths.SCORE_TASK_REGISTRY): their share of the fused pass.


def write_retrieval(job: SceneJob, outs: list[Path]) -> None:
    retrieval_task(job.scene_dir, job.features, job.sections["scoring"], *outs, results=job.fused.retrieval,
                   t0=job.t0_of("retrieval"), pairs=job.pairs)


def write_verification(job: SceneJob, outs: list[Path]) -> None:
    verification_task(job.scene_dir, job.features, job.distractors, job.sections["scoring"], job.sections["verification"],
                      *outs, result=job.fused.verification, t0=job.t0_of("verification"), pairs=job.pairs)


def write_matching(job: SceneJob, outs: list[Path]) -> None:
    matching_task(job.scene_dir, job.features, job.sections["scoring"], job.sections["matching"], *outs,
                  results=job.fused.matching, t0=job.t0_of("matching"), pairs=job.pairs)


def score_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, descriptor: str,
                sections: dict, features: str | None = None, pairs: str = "reference") -> None:
    """Every enabled task of descbench.paths.SCORE_TASK_REGISTRY on every scene of a batch, in one
    process: each scene's features are read once and shared by the tasks.

    ``sections``: ``{section: settings}``, ``scoring`` and the section of every task to run
    (descbench.config.score_job_sections); a task whose section is absent does not run. Keypoint
    retrieval, verification + keypoint retrieval with distractors (from the distractor bank) and
    matching + classifier share ONE screen pass per scene (:func:`scene_pass`); each task's writer
    then writes its files, in registry order. ``pairs``: the config's ``pairs`` option (each scene's
    pairs: :meth:`descbench.datasets.layout.SceneFiles.pairs`)."""
    from descbench.paths import SCORE_TASK_REGISTRY, scoring_sections, task_hook

    sections = sections if isinstance(sections, dict) else {}
    unknown = sorted(set(sections) - set(scoring_sections()))
    if unknown or "scoring" not in sections:
        raise ConfigError(f"the scoring job's sections are {', '.join(sorted(sections)) or 'none'}; expected 'scoring' and any of "
                          f"the tasks' sections ({', '.join(scoring_sections()[1:])})" + (f"; unknown: {', '.join(unknown)}" * bool(unknown)))
    tasks = [(t.name, task_hook(t.writer)) for t in SCORE_TASK_REGISTRY.values() if t.section is None or t.section in sections]
    scoring, verification, matching = sections["scoring"], sections.get("verification"), sections.get("matching")
    all_scenes = [s for ss in paths.batches.values() for s in ss]
    bank = None
    if verification is not None:
        bank = read_distractor_bank(Path(paths.distractor_bank(kpset, descriptor)), all_scenes, verification, descriptor)
    for scene in paths.batches[batch]:
        scene_dir = Path(scene_root) / scene
        # `features`: a scoring variant reads its base descriptor's files (descriptors.<d>.features_of)
        f = read_features(Path(paths.keypoints(kpset, scene)), Path(paths.descriptors(kpset, features or descriptor, scene)))
        draws = bank[scene] if bank is not None else None
        scene_pairs = load_pairs(scene_files(scene_dir), pairs)
        # one screen product per row block for the built-in tasks; each task's timing file gets its share
        sp = scene_pass(scene_dir, f, scoring, draws, verification, matching, scene_pairs)
        job = SceneJob(scene_dir, f, sections, sp, draws, scene_pairs)
        for name, write in tasks:
            write(job, paths.task_files(name, kpset, descriptor, scene))
