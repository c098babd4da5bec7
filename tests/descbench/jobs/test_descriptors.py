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
