"""descbench.jobs.descriptors: the ``descriptors`` command on a tiny run, settings given as a spec
file (``--spec @file``, as the workflow's jobs get them)."""

from __future__ import annotations

import json
from pathlib import Path

from descbench.jobs.common import read_features
from descbench.jobs.descriptors import describe_scene
from jobcli import SCENES, features, ok


def test_the_command_writes_what_describe_scene_writes(tmp_path):
    run = features(tmp_path)
    spec = tmp_path / "desc.json"
    spec.write_text(json.dumps({"family": "rootsift", "params": {}}))
    ok("descriptors", *run.batch_args(), "--keypoint-set", "kp", "--name", "root", "--spec", f"@{spec}",
       "--keypoint-set-spec", run.spec("keypoint_sets", "kp"))
    for s in SCENES:
        kp, got = Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "root", s))
        describe_scene(run.scene_root / s, kp, "root", {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"],
                       tmp_path / "direct.parquet")
        assert got.read_bytes() == (tmp_path / "direct.parquet").read_bytes()
        f = read_features(kp, got)
        assert f.dmeta["descriptor"] == "root" and all(f.by_image[k].shape == (len(f.per_image[k]), 128) for k in f.per_image)


def test_a_derived_family_reads_its_base_rows_and_equals_computing_them(tmp_path):
    """rootsift with ``shared_base``: the sift descriptor's files rooted, bit for bit the rows it
    computes itself, the base file's sha256 recorded; a base file of other keypoints is refused."""
    import numpy as np
    import pytest

    from descbench.errors import DataError

    run = features(tmp_path)  # descriptor 'desc' = sift at its defaults on 'kp'
    spec = tmp_path / "root.json"
    spec.write_text(json.dumps({"family": "rootsift", "params": {}, "shared_base": "desc"}))
    ok("descriptors", *run.batch_args(), "--keypoint-set", "kp", "--name", "root", "--spec", f"@{spec}",
       "--keypoint-set-spec", run.spec("keypoint_sets", "kp"))
    for s in SCENES:
        kp = Path(run.paths.keypoints("kp", s))
        shared = read_features(kp, Path(run.paths.descriptors("kp", "root", s)))
        describe_scene(run.scene_root / s, kp, "root", {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"],
                       tmp_path / f"{s}.computed.parquet")
        computed = read_features(kp, tmp_path / f"{s}.computed.parquet")
        assert all(np.array_equal(shared.by_image[k], computed.by_image[k]) for k in computed.per_image)
        assert shared.dmeta["base_file_sha256"] and "base_file_sha256" not in computed.dmeta
        sift = read_features(kp, Path(run.paths.descriptors("kp", "desc", s)))
        assert not np.array_equal(shared.by_image[1], sift.by_image[1])  # rooted, not copied
    with pytest.raises(DataError, match="different version"):
        describe_scene(run.scene_root / "i_rocket", Path(run.paths.keypoints("kp", "i_rocket")), "root",
                       {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"], tmp_path / "x.parquet",
                       base_file=Path(run.paths.descriptors("kp", "desc", "v_coins")))
