"""Input provenance: the sha256 of every image and homography goes with the results."""

from __future__ import annotations

import hashlib

from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import dataset_digest, detect_scene, scene_input_digests
from descbench.datasets.layout import scene_files

SIFT = {"detector": "sift", "border_px": 40, "max_keypoints": 50,
        "params": {"n_features": 0, "n_octave_layers": 3, "contrast_threshold": 0.04, "edge_threshold": 10, "sigma": 1.6}}


def test_keypoint_files_record_the_digest_of_every_input(scene, tmp_path):
    out = tmp_path / "k.parquet"
    detect_scene(scene, "sift", SIFT, out)
    _, meta = load_keypoints(out)
    files = scene_files(scene).all_paths()
    assert meta["inputs_sha256"] == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    assert len(meta["inputs_sha256"]) == 11


def test_dataset_digest_changes_with_any_input_and_not_with_order(scene):
    d = {"a": scene_input_digests(scene_files(scene)), "b": {"1.ppm": "00"}}
    same = dataset_digest(dict(reversed(list(d.items()))))
    assert dataset_digest(d) == same
    (scene / "H_1_4").write_text((scene / "H_1_4").read_text() + "\n")
    d2 = {**d, "a": scene_input_digests(scene_files(scene))}
    assert dataset_digest(d2) != same
