"""The workflow's stages as plain functions (one per Snakemake rule kind): file in, file out.

They orchestrate I/O and call the pure functions of :mod:`descbench.keypoints`,
:mod:`descbench.descriptors` and :mod:`descbench.metrics`.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from descbench import io
from descbench.datasets.layout import TARGET_IMAGES, read_homography, read_image, scene_files
from descbench.descriptors import compute_descriptors, get_family
from descbench.errors import DataError
from descbench.keypoints import ImageKeypoints, filter_keypoints
from descbench.metrics.retrieval import RetrievalParams, pair_statistics, policy_rank, score_pair

# Descriptor and keypoint files of one scene, checked to belong together.


def warn(msg: str) -> None:
    print(f"descbench: warning: {msg}", file=sys.stderr)


def file_sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_timing(path: Path, scene: str, t0: float) -> None:
    """Wall time since ``t0``: not reproducible, so it lives outside the bit-identical Parquet files."""
    io.write_text(path, json.dumps({"scene": scene, "processing_time_ms": 1000 * (time.perf_counter() - t0)}) + "\n")


# ----------------------------------------------------------------------------- keypoints


def detect_raw(image_path: Path, gray: np.ndarray, spec: dict) -> ImageKeypoints:
    if spec["detector"] == "sift":
        from descbench.keypoints.sift import detect_sift

        return detect_sift(gray, spec["params"])
    if spec["detector"] == "precomputed":
        from descbench.precomputed import load_features

        p = spec["params"]
        return load_features(image_path, p["method"], p.get("root"), p.get("default_size_px", 12.0)).keypoints
    raise DataError(f"unknown detector {spec['detector']!r}")


def detect_scene(scene_dir: Path, kpset: str, spec: dict, out: Path) -> None:
    """Detect, border-filter and cap keypoints on the 6 images of a scene; write one Parquet."""
    files = scene_files(scene_dir)
    for k in TARGET_IMAGES:  # fail fast on a malformed homography, before any heavy work
        read_homography(files.homographies[k])
    cols: dict[str, list] = {f: [] for f in io.KEYPOINTS.names}
    sizes, raw_counts, empty = {}, {}, []
    for k, image_path in enumerate(files.images, start=1):
        gray = read_image(image_path)
        h, w = gray.shape[:2]
        raw = detect_raw(image_path, gray, spec)
        kept = filter_keypoints(raw, w, h, spec["border_px"], spec["max_keypoints"])
        sizes[str(k)] = [w, h]
        raw_counts[str(k)] = len(raw)
        if len(kept) == 0:
            empty.append(k)
            warn(f"{image_path}: no keypoint left after the border filter ({len(raw)} detected); recorded as an empty image")
        cols["image"].append(np.full(len(kept), k, dtype=np.int8))
        for f in ImageKeypoints.__dataclass_fields__:
            cols[f].append(getattr(kept, f))
    table = pa.table({f: pa.array(np.concatenate(v), type=io.KEYPOINTS.field(f).type) for f, v in cols.items()}, schema=io.KEYPOINTS)
    meta = io.provenance(
        "keypoints", {"keypoint_set": kpset, **spec}, scene=files.scene, image_sizes=sizes,
        raw_counts=raw_counts, empty_images=empty,
    )
    io.write_table(table, out, meta)


def load_keypoints(path: Path) -> tuple[dict[int, ImageKeypoints], dict]:
    table, meta = io.read_table(path, io.KEYPOINTS)
    image = table.column("image").to_numpy()
    arrays = {f: table.column(f).to_numpy() for f in ImageKeypoints.__dataclass_fields__}
    per_image = {}
    for k in range(1, 7):
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
    desc = np.concatenate(blocks)
    binary = desc.dtype == np.uint8
    fam = get_family(spec["family"])
    if fam.binary is not None and fam.binary != binary:
        raise DataError(f"descriptor '{name}': family {spec['family']} produced {desc.dtype}, expected {'uint8' if fam.binary else 'float32'}")
    meta = io.provenance(
        "descriptors", {"descriptor": name, **spec}, scene=files.scene, descriptor=name,
        dimension=int(desc.shape[1]) * (8 if binary else 1), dtype=str(desc.dtype),
        distance="hamming" if binary else "l2", packed_bits=binary,
        keypoints_sha256=file_sha256(keypoints), keypoint_set=kmeta["params"]["keypoint_set"],
    )
    io.write_table(io.descriptors_table(np.concatenate(images), desc), out, meta)


# ----------------------------------------------------------------------------- scoring


def load_scene_features(keypoints: Path, descriptors: Path):
    """(keypoints per image, descriptors per image, keypoint meta, descriptor meta), checked."""
    per_image, kmeta = load_keypoints(keypoints)
    dtable, dmeta = io.read_table(descriptors)
    if dmeta.get("keypoints_sha256") != file_sha256(keypoints):
        raise DataError(f"{descriptors} was computed from a different version of {keypoints}; rerun its descriptor job")
    desc = io.descriptors_array(dtable)
    dimage = dtable.column("image").to_numpy()
    by_image = {k: desc[dimage == k] for k in range(1, 7)}
    for k in range(1, 7):
        if by_image[k].shape[0] != len(per_image[k]):
            raise DataError(f"{descriptors}: image {k} has {by_image[k].shape[0]} descriptors for {len(per_image[k])} keypoints; rebuild it")
    return per_image, by_image, kmeta, dmeta


def score_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict,
                out_queries: Path, out_pairs: Path, out_timing: Path) -> None:
    """Keypoint retrieval scores of one scene: per-query records and per-pair statistics."""
    t0 = time.perf_counter()
    files = scene_files(scene_dir)
    params = RetrievalParams.from_config(scoring)
    per_image, by_image, kmeta, dmeta = load_scene_features(keypoints, descriptors)
    q_xy = per_image[1].xy
    qcols: dict[str, list] = {f: [] for f in io.QUERIES.names}
    prows = []
    for k in TARGET_IMAGES:
        H = read_homography(files.homographies[k])
        size = tuple(kmeta["image_sizes"][str(k)])
        res = score_pair(q_xy, by_image[1], per_image[k].xy, by_image[k], H, size, params)
        nq = q_xy.shape[0]
        qcols["scene"].append(np.full(nq, files.scene, dtype=object))
        qcols["pair"].append(np.full(nq, k, dtype=np.int8))
        qcols["query"].append(np.arange(nq, dtype=np.int32))
        for f in ("inside", "n_relevant", "gt_index", "gt_px", "n_closer", "n_tied", "ap"):
            qcols[f].append(getattr(res, f))
        qcols["rank"].append(policy_rank(res.n_closer, res.n_tied, params.tie_policy))
        prows.append({"scene": files.scene, "pair": k, **pair_statistics(res, len(per_image[k]))})
    queries = pa.table({f: pa.array(np.concatenate(v), type=io.QUERIES.field(f).type) for f, v in qcols.items()}, schema=io.QUERIES)
    pairs = pa.Table.from_pylist(prows, schema=io.PAIRS)
    prov = io.provenance(
        "scoring", {"task": "keypoint_retrieval", **scoring}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"],
        distance=dmeta["distance"], empty_images=kmeta["empty_images"],
    )
    io.write_table(queries, out_queries, prov)
    io.write_table(pairs, out_pairs, prov)
    write_timing(out_timing, files.scene, t0)


def score_verification_scene(scene_dir: Path, keypoints: Path, descriptors: Path, distractor_files: dict[str, tuple[Path, Path]],
                             all_scenes: list[str], scoring: dict, verification: dict,
                             out_list: Path, out_queries: Path, out_scene: Path, out_timing: Path) -> None:
    """Keypoint verification and keypoint retrieval of one scene, with distractors of other scenes.

    ``distractor_files`` maps each distractor scene (the workflow's DAG input, from
    :func:`descbench.metrics.distractors.distractor_scenes`) to its (keypoints, descriptors) files.
    """
    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
    from descbench.metrics.distractors import distractor_scenes, draw_distractors

    t0 = time.perf_counter()
    files = scene_files(scene_dir)
    per_image, by_image, kmeta, dmeta = load_scene_features(keypoints, descriptors)
    seed, n_sc, per_sc = verification["seed"], verification["distractor_scenes"], verification["distractors_per_scene"]
    expected = distractor_scenes(files.scene, all_scenes, n_sc, seed)
    if sorted(expected) != sorted(distractor_files):
        raise DataError(
            f"scene {files.scene}: distractor scenes given {sorted(distractor_files)} but the draw for seed {seed} "
            f"is {sorted(expected)}; rerun through the workflow so the inputs match the config"
        )
    counts, loaded = {}, {}
    for other in expected:
        kp_path, desc_path = distractor_files[other]
        o_kp, o_desc, _, o_meta = load_scene_features(Path(kp_path), Path(desc_path))
        if o_meta["descriptor"] != dmeta["descriptor"]:
            raise DataError(f"{desc_path} holds descriptor '{o_meta['descriptor']}', expected '{dmeta['descriptor']}'")
        counts[other] = {k: len(o_kp[k]) for k in range(1, 7)}
        loaded[other] = o_desc
    draws = draw_distractors(files.scene, all_scenes, n_sc, per_sc, seed, counts)
    distractors = [Distractors(d.scene, d.image, d.rows, loaded[d.scene][d.image][d.rows]) for d in draws]
    targets = []
    for k in TARGET_IMAGES:
        H = read_homography(files.homographies[k])
        targets.append(Target(per_image[k].xy, by_image[k], H, tuple(kmeta["image_sizes"][str(k)])))
    params = BojanicParams(
        tau_px=float(scoring["tau_px"]), gt=scoring["gt"], tie_policy=scoring["tie_policy"],
        candidates=verification["candidates"], hard_negatives=verification["hard_negatives"],
        ap_convention=verification["ap_convention"], quantized_bins=int(verification["quantized_bins"]),
        chunk_mb=float(scoring["chunk_mb"]),
    )
    res = score_scene_tasks(per_image[1].xy, by_image[1], targets, distractors, params, where=f"scene {files.scene}")
    seg_scene = [files.scene] * len(targets) + [d.scene for d in draws]
    seg_image = list(TARGET_IMAGES) + [d.image for d in draws]
    vlist = pa.table({
        "query": pa.array(res.v_query, pa.int32()),
        "target_scene": pa.array([seg_scene[s] for s in res.v_segment], pa.string()),
        "target_image": pa.array(np.array(seg_image, dtype=np.int8)[res.v_segment.astype(np.int64)] if len(res.v_segment) else np.zeros(0, np.int8), pa.int8()),
        "candidate": pa.array(res.v_candidate, pa.int32()),
        "distance": pa.array(res.v_distance, pa.float64()),
        "label": pa.array(res.v_label, pa.int8()),
    }, schema=io.VERIFICATION_LIST)
    nq = len(per_image[1])
    queries = pa.table({
        "scene": pa.array([files.scene] * nq, pa.string()),
        "query": pa.array(np.arange(nq), pa.int32()),
        "n_positives": pa.array(res.r_positives, pa.int32()),
        "ap_negative": pa.array(res.r_ap_negative, pa.float64()),
        "ap_ignore": pa.array(res.r_ap_ignore, pa.float64()),
    }, schema=io.KEYPOINT_RETRIEVAL)
    scene_row = pa.Table.from_pylist([{"scene": files.scene, **res.stats}], schema=io.VERIFICATION_SCENE)
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


def score_matching_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict, matching: dict,
                         out_pairs: Path, out_classifier: Path, out_roc: Path, out_timing: Path) -> None:
    """Matching metrics (mutual NN: legacy precision, MMA, matching score, homography accuracy,
    repeatability) and matching as a binary classifier, for every pair (1, k) of one scene."""
    from descbench.metrics.classifier import ClassifierParams
    from descbench.metrics.matching import MatchingParams, evaluate_pair

    t0 = time.perf_counter()
    files = scene_files(scene_dir)
    per_image, by_image, kmeta, dmeta = load_scene_features(keypoints, descriptors)
    mparams = MatchingParams(
        tau_px=float(scoring["tau_px"]), mma_thresholds=tuple(matching["mma_thresholds"]),
        repeatability_px=float(matching["repeatability_px"]), ransac_px=float(matching["ransac_px"]),
        ransac_seed=int(matching["ransac_seed"]), chunk_mb=float(scoring["chunk_mb"]),
    )
    cparams = ClassifierParams(epsilon_px=float(matching["classifier_epsilon_px"]), chunk_mb=float(scoring["chunk_mb"]))
    size1 = tuple(kmeta["image_sizes"]["1"])
    prows, crows, roc_cols = [], [], []
    for k in TARGET_IMAGES:
        H = read_homography(files.homographies[k])
        size = tuple(kmeta["image_sizes"][str(k)])
        stats, res = evaluate_pair(per_image[1].xy, by_image[1], per_image[k].xy, by_image[k], H, size1, size, mparams,
                                   cparams, tuple(matching["classifier_matchers"]))
        prows.append({"scene": files.scene, "pair": k, **stats})
        crows += [{"scene": files.scene, "pair": k, **r} for r in res.summary_rows()]
        rr = res.roc_rows()
        n = rr["tp"].shape[0]
        roc_cols.append({"scene": np.full(n, files.scene, dtype=object), "pair": np.full(n, k, dtype=np.int8), **rr})
    pairs = pa.Table.from_pylist(prows, schema=io.matching_pairs_schema(mparams.mma_thresholds))
    classifier = pa.Table.from_pylist(crows, schema=io.CLASSIFIER)
    roc = pa.table({f.name: pa.array(np.concatenate([c[f.name] for c in roc_cols]), type=f.type) for f in io.ROC_POINTS}, schema=io.ROC_POINTS)
    prov = io.provenance(
        "matching", {"task": "matching+binary_classifier", "scoring": scoring, "matching": matching}, scene=files.scene,
        descriptor=dmeta["descriptor"], keypoint_set=kmeta["params"]["keypoint_set"], distance=dmeta["distance"],
        empty_images=kmeta["empty_images"], image_sizes=kmeta["image_sizes"],
    )
    io.write_table(pairs, out_pairs, prov)
    io.write_table(classifier, out_classifier, prov)
    io.write_table(roc, out_roc, prov)
    write_timing(out_timing, files.scene, t0)
