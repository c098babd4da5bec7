"""The descriptor job (``descriptors``): one descriptor on every scene of a batch, one file per
scene, rows aligned with the scene's keypoint file; a composite descriptor from its components' files.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from descbench import io
from descbench.datasets.layout import scene_files
from descbench.descriptors import compute_descriptors, get_family
from descbench.errors import DataError
from descbench.jobs.common import JobCommand, SceneKeypoints, batch_args, json_arg, read_features, read_keypoints, result_paths
from descbench.paths import ResultPaths


def describe_scene(scene_dir: Path, keypoints: Path, name: str, spec: dict, kpset_spec: dict, out: Path,
                   base_file: Path | None = None, part_files: list[Path | None] | None = None) -> None:
    """Compute one descriptor for every keypoint of a scene; rows aligned with the keypoint file.
    ``base_file``: the descriptor file of the same keypoints whose rows the family's ``derives``
    transforms (spec ``shared_base``), read instead of computing them. ``part_files``: per part
    of a family that ``combines`` its parts (spec ``shared_parts``), the descriptor file of the
    same keypoints that gives the part's rows, or None (computed)."""
    fam = get_family(spec["family"])
    # a joint network on its own keypoints: the keypoint job's rows (one network run), else compute
    own = fam.own_rows(spec["params"], kpset_spec, keypoints) if fam.own_rows else None
    kp = read_keypoints(keypoints)  # once: for the rows, the shared files' check and the provenance
    base = read_features(keypoints, base_file, with_sha256=True, keypoints_read=kp) if base_file is not None else None
    parts = [read_features(keypoints, f, with_sha256=True, keypoints_read=kp) if f is not None else None
             for f in part_files] if part_files else None

    def rows(k: int, image_path: Path, kps, where: str) -> np.ndarray:
        if own is not None:
            return own[0](k, kps)
        if base is not None:
            return fam.derives[2](base.by_image[k], spec["params"])
        given = [p.by_image[k] if p is not None else None for p in parts] if parts else None
        return compute_descriptors(spec["family"], spec["params"], image_path, kps, kpset_spec, where, given)

    files = scene_files(scene_dir)
    blocks, images = image_rows(files, kp.per_image, name, rows)
    runtime = own[1] if own is not None else fam.runtime_provenance(spec["params"]) if fam.runtime_provenance else None
    extra = {"runtime": runtime} if runtime else {}  # learned families: how they ran
    if base is not None:
        extra["base_file_sha256"] = base.descriptors_sha256
    if parts:
        extra["part_files_sha256"] = [p.descriptors_sha256 if p is not None else None for p in parts]
    write_descriptors(blocks, images, name, spec, files.scene, kp, out, **extra)


def image_rows(files, per_image: dict, name: str, rows) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(blocks, images)``: ``rows(k, image_path, keypoints, where)`` of every image k of a
    scene (``files``: its :class:`~descbench.datasets.layout.SceneFiles`; ``per_image``: its
    keypoints), checked to share one width and dtype, and each block's image numbers."""
    blocks, images = [], []
    for k, image_path in enumerate(files.images, start=1):
        where = f"descriptor '{name}', scene {files.scene}, image {k}"
        d = rows(k, image_path, per_image[k], where)
        if blocks and (d.shape[1] != blocks[0].shape[1] or d.dtype != blocks[0].dtype):
            raise DataError(
                f"{where} ({image_path}): {d.dtype} x {d.shape[1]} descriptors, but image 1 has "
                f"{blocks[0].dtype} x {blocks[0].shape[1]}; all images must use one descriptor "
                "dimension and type (check the descriptor's input files for this image)"
            )
        blocks.append(d)
        images.append(np.full(d.shape[0], k, dtype=np.int8))
    return blocks, images


def write_descriptors(blocks: list[np.ndarray], images: list[np.ndarray], name: str, spec: dict, scene: str,
                      keypoints: SceneKeypoints, out: Path, **extra) -> None:
    """One scene's descriptor file: the per-image rows ``blocks`` and their image numbers, with
    the provenance (spec, dimension, distance, the sha256 of the keypoint file ``keypoints`` was
    read from, ``extra``)."""
    desc = np.concatenate(blocks)
    binary = desc.dtype == np.uint8
    fam = get_family(spec["family"])
    if fam.binary is not None and fam.binary != binary:
        raise DataError(f"descriptor '{name}': family {spec['family']} produced {desc.dtype}, expected {'uint8' if fam.binary else 'float32'}")
    meta = io.provenance(
        "descriptors", {"descriptor": name, **spec}, scene=scene, descriptor=name,
        dimension=int(desc.shape[1]) * (8 if binary else 1), dtype=str(desc.dtype),
        distance="hamming" if binary else "l2", packed_bits=binary,
        keypoints_sha256=keypoints.sha256, keypoint_set=keypoints.meta["params"]["keypoint_set"], **extra,
    )
    io.write_table(io.descriptors_table(np.concatenate(images), desc), out, meta)


def describe_composite_scene(paths: ResultPaths, scene: str, kpset: str, name: str, spec: dict, out: Path) -> None:
    """A composite descriptor (descbench.descriptors.composite) of one scene: its components'
    descriptor files, each checked row-aligned with the scored set ``kpset`` image by image, then
    aggregated. ``spec["components"]``: :func:`descbench.descriptors.composite.resolve_components`."""
    from descbench.descriptors.composite import aggregate, check_alignment

    keypoints = Path(paths.keypoints(kpset, scene))
    kp = read_keypoints(keypoints)
    per_image = kp.per_image
    comps = spec["components"]
    names = [f"{i} ('{c['descriptor']}' on '{c['keypoint_set']}')" for i, c in enumerate(comps)]
    files = [(Path(paths.keypoints(c["keypoint_set"], scene)), Path(paths.descriptors(c["keypoint_set"], c["descriptor"], scene)))
             for c in comps]
    feats = [read_features(k, d, with_sha256=True, keypoints_read=kp if k == keypoints else None) for k, d in files]
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
    write_descriptors(blocks, images, name, spec, scene, kp, out,
                      component_files_sha256=[f.descriptors_sha256 for f in feats])


def describe_batch(paths: ResultPaths, scene_root: Path, batch: str, kpset: str, name: str, spec: dict, kpset_spec: dict) -> None:
    """One descriptor on every scene of a batch (:func:`describe_scene`), one file per scene."""
    for scene in paths.batches[batch]:
        out = Path(paths.descriptors(kpset, name, scene))
        if spec["family"] == "composite":
            describe_composite_scene(paths, scene, kpset, name, spec, out)
        else:
            base = spec.get("shared_base")
            parts = [Path(paths.descriptors(kpset, p, scene)) if p else None for p in spec["shared_parts"]] \
                if spec.get("shared_parts") else None
            describe_scene(Path(scene_root) / scene, Path(paths.keypoints(kpset, scene)), name, spec, kpset_spec, out,
                           Path(paths.descriptors(kpset, base, scene)) if base else None, parts)



# ----------------------------------------------------------------------------- command


def add_commands(sub) -> dict:
    """The ``descriptors`` subcommand; returns ``{command: function running it}``."""
    p = sub.add_parser("descriptors", help="compute one descriptor on one scene batch")
    batch_args(p)
    p.add_argument("--keypoint-set", required=True)
    p.add_argument("--name", required=True, help="descriptor name")
    p.add_argument("--spec", required=True, help="descriptor spec (JSON)")
    p.add_argument("--keypoint-set-spec", required=True, help="keypoint set spec (JSON)")
    return {"descriptors": JobCommand(run, pools=("opencv",), pandas=False, timing=("descriptors", "keypoint_set", "name"))}


def run(a: argparse.Namespace) -> None:
    describe_batch(result_paths(a), a.scene_root, a.batch, a.keypoint_set, a.name, json_arg(a.spec), json_arg(a.keypoint_set_spec))
