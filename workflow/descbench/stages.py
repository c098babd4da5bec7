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


def warn(msg: str) -> None:
    print(f"descbench: warning: {msg}", file=sys.stderr)


def file_sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def score_scene(scene_dir: Path, keypoints: Path, descriptors: Path, scoring: dict,
                out_queries: Path, out_pairs: Path, out_timing: Path) -> None:
    """Keypoint retrieval scores of one scene: per-query records and per-pair statistics."""
    t0 = time.perf_counter()
    files = scene_files(scene_dir)
    params = RetrievalParams.from_config(scoring)
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
    # Wall time is not reproducible, so it lives outside the (bit-identical) Parquet files.
    io.write_text(out_timing, json.dumps({"scene": files.scene, "processing_time_ms": 1000 * (time.perf_counter() - t0)}) + "\n")
