"""A SIFT set's keypoint job describes its keypoints with its detection (descbench.keypoints.sift:
``detectAndCompute``, one scale-space pyramid) and keeps the rows of the kept keypoints in a side
file; the ``sift`` descriptor job on the set reads them where they are ``compute``'s bits (an
image whose kept keypoints reach octave -1) and computes the other images, as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from descbench.config import validate_config
from descbench.datasets.layout import read_grey
from descbench.descriptors import compute_descriptors
from descbench.descriptors.sift import sift_own_rows
from descbench.io import read_meta
from descbench.jobs.common import load_keypoints, read_features
from descbench.jobs.descriptors import describe_scene
from descbench.jobs.keypoints import detect_scene
from descbench.keypoints.detectors import detect
from descbench.keypoints.sidefile import lookup_rows, read_side_file, write_side_file
from descbench.keypoints.sift import detect_with_rows, in_first_octave, sift_rows_path
from descbench.paths import ResultPaths

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


def configured(grey: str = "imread", convention: str = "opencv", **set_keys) -> tuple[dict, dict]:
    cfg = validate_config({"keypoint_sets": {"s": {"detector": "sift", "max_keypoints": 400, "grey": grey, **set_keys}},
                           "descriptors": {"d": {"family": "sift", "params": {"convention": convention}}}}, SCHEMA)
    return cfg["keypoint_sets"]["s"], cfg["descriptors"]["d"]


def keypoints_of(scene: Path, tmp_path: Path, kp_spec: dict) -> Path:
    kp = Path(ResultPaths(tmp_path / "res", {"b0": [scene.name]}).keypoints("s", scene.name))
    detect_scene(scene, "s", kp_spec, kp)
    return kp


def computed(scene: Path, kp: Path, spec: dict, kp_spec: dict) -> dict[int, np.ndarray]:
    per_image, _ = load_keypoints(kp)
    return {k: compute_descriptors("sift", spec["params"], scene / f"{k}.ppm", kps, kp_spec, "t") for k, kps in per_image.items()}


def test_detection_with_rows_gives_detects_keypoints_and_computes_rows(scene):
    gray = read_grey(scene / "1.ppm")
    kps, rows = detect_with_rows(gray, {})
    ref = detect("sift", gray, {})
    for f in ("x", "y", "size", "angle", "response", "octave"):
        assert np.array_equal(getattr(kps, f), getattr(ref, f)), f
    assert rows.dtype == np.uint8 and rows.shape == (len(kps), 128)
    assert in_first_octave(kps)


@pytest.mark.parametrize("grey, convention", [("imread", "opencv"), ("bgr2gray", "workbench")])
def test_the_descriptor_job_reads_the_keypoint_jobs_rows_bit_for_bit(scene, tmp_path, grey, convention):
    kp_spec, spec = configured(grey, convention)
    kp = keypoints_of(scene, tmp_path, kp_spec)
    meta, arrays = read_side_file(sift_rows_path(kp))
    assert meta["grey"] == grey and meta["detector"] == "sift"
    want = computed(scene, kp, spec, kp_spec)
    out = tmp_path / "d.parquet"
    describe_scene(scene, kp, "d", spec, kp_spec, out)
    feats = read_features(kp, out)
    per_image, _ = load_keypoints(kp)
    assert all(in_first_octave(kps) for kps in per_image.values())  # every image read from the side file
    for k in per_image:
        assert feats.by_image[k].dtype == np.float32 and np.array_equal(feats.by_image[k], want[k]), k
    assert read_meta(out)["runtime"]["side_file"] == sift_rows_path(kp).name
    # the same file as the computed path's, provenance apart
    sift_rows_path(kp).unlink()
    describe_scene(scene, kp, "d", spec, kp_spec, tmp_path / "c.parquet")
    assert all(np.array_equal(read_features(kp, tmp_path / "c.parquet").by_image[k], feats.by_image[k]) for k in per_image)
    assert "runtime" not in read_meta(tmp_path / "c.parquet")


def test_an_image_without_a_first_octave_keypoint_is_computed(scene, tmp_path):
    """compute() starts its pyramid at octave 0 there, detectAndCompute at -1: the rows differ, so
    the side file's are not read for that image."""
    kp_spec, spec = configured()
    kp = keypoints_of(scene, tmp_path, kp_spec)
    per_image, _ = load_keypoints(kp)
    k = 2
    above = per_image[k].take(np.flatnonzero((per_image[k].octave & 255) != 255))
    read, _ = sift_own_rows(spec["params"], kp_spec, kp)
    assert read(k, above) is None and read(k, per_image[k]) is not None
    direct = compute_descriptors("sift", spec["params"], scene / f"{k}.ppm", above, kp_spec, "t")
    _, arrays = read_side_file(sift_rows_path(kp))
    side = lookup_rows(arrays, k, above, sift_rows_path(kp)).astype(np.float32)
    assert len(above) > 0 and not np.array_equal(direct, side)  # why: a different pyramid


def test_rows_of_another_grey_image_or_opencv_are_not_read(scene, tmp_path):
    kp_spec, spec = configured()
    kp = keypoints_of(scene, tmp_path, kp_spec)
    meta, arrays = read_side_file(sift_rows_path(kp))
    per_image, _ = load_keypoints(kp)
    assert sift_own_rows({"convention": "workbench"}, kp_spec, kp) is None  # rows of the imread grey
    assert sift_own_rows({"convention": "vsift"}, kp_spec, kp) is None
    assert sift_own_rows(spec["params"], {**kp_spec, "mode": "projected"}, kp) is None
    side = {k: (per_image[k], lookup_rows(arrays, k, per_image[k], sift_rows_path(kp))) for k in per_image}
    write_side_file(sift_rows_path(kp), side, {**{k: v for k, v in meta.items() if k != "version"}, "opencv": "0.0.0"})
    assert sift_own_rows(spec["params"], kp_spec, kp) is None


def test_projected_sets_and_other_detectors_write_no_sift_rows(scene, tmp_path):
    kp_spec, _ = configured(mode="projected")
    assert not sift_rows_path(keypoints_of(scene, tmp_path, kp_spec)).exists()


def test_a_derived_set_keeps_its_sources_rows_and_describes_as_compute(scene, tmp_path):
    """Filtered sets of a SIFT set: their own rows files; images still reaching octave -1 read
    them, the others are computed; every row equals compute's."""
    from descbench.jobs.keypoints import derive_scene

    cfg = validate_config({"keypoint_sets": {"s": {"detector": "sift", "max_keypoints": 400},
                                             "many": {"source": "s", "filters": [{"per_image_top_n_by_size": 300}]},
                                             "few": {"source": "s", "filters": [{"per_image_top_n_by_size": 30}]}},
                           "descriptors": {"d": {"family": "sift"}}}, SCHEMA)
    paths = ResultPaths(tmp_path / "res", {"b0": [scene.name]})
    kp = Path(paths.keypoints("s", scene.name))
    detect_scene(scene, "s", cfg["keypoint_sets"]["s"], kp)
    spec, root = cfg["descriptors"]["d"], cfg["keypoint_sets"]["s"]
    reads = []
    for name in ("many", "few"):
        derived = Path(paths.keypoints(name, scene.name))
        derive_scene(paths, scene.name, name, cfg["keypoint_sets"][name], derived, None)
        assert sift_rows_path(derived).exists()
        per_image, _ = load_keypoints(derived)
        reads += [in_first_octave(kps) for kps in per_image.values()]
        out = tmp_path / f"{name}.parquet"
        describe_scene(scene, derived, "d", spec, root, out)
        want = computed(scene, derived, spec, root)
        assert all(np.array_equal(read_features(derived, out).by_image[k], want[k]) for k in per_image), name
    assert any(reads) and not all(reads)  # both paths taken
