"""descbench.jobs.keypoints: the ``keypoints``, ``keypoint-cutoff``, ``keypoint-stats`` and
``export-keypoints`` commands on a tiny run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from descbench import cli
from descbench.datasets.layout import scene_files
from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import dataset_digest, detect_scene, scene_input_digests
from jobcli import SCENES, features, ok


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return features(tmp_path_factory.mktemp("run"))


def test_the_command_writes_what_detect_scene_writes(run, tmp_path):
    for s in SCENES:
        detect_scene(run.scene_root / s, "kp", run.cfg["keypoint_sets"]["kp"], tmp_path / f"{s}.parquet")
        assert Path(run.paths.keypoints("kp", s)).read_bytes() == (tmp_path / f"{s}.parquet").read_bytes()


def test_a_batch_outside_batches_is_one_line_and_exit_1(run, capsys):
    args = [str(a) for a in run.batch_args()]
    args[args.index("batch000", args.index("--batch"))] = "batch009"
    assert cli.main(["keypoints", *args, "--name", "kp", "--spec", run.spec("keypoint_sets", "kp")]) == 1
    assert capsys.readouterr().err == "descbench: error: --batch 'batch009' is not among --batches (batch000)\n"


def test_cutoff_stats_and_export(run, tmp_path):
    spec = {"source": "kp", "filters": [{"global_top_n_by_size": 100}]}
    ok("keypoint-cutoff", "--results-root", run.root, "--batches", json.dumps(run.batches), "--name", "top",
       "--spec", json.dumps(spec), "--out", tmp_path / "cutoff.json")
    cutoff = json.loads((tmp_path / "cutoff.json").read_text())
    assert cutoff["keypoint_set"] == "top" and cutoff["n"] == 100 and cutoff["cutoff"] is not None

    ok("keypoint-stats", "--results-root", run.root, "--scene-root", run.scene_root, "--batches", json.dumps(run.batches),
       "--keypoint-sets", json.dumps([["kp", run.cfg["keypoint_sets"]["kp"]]]), "--repeatability-px", 3, "--out-dir", tmp_path)
    stats = pd.read_parquet(tmp_path / "keypoint_stats.parquet")
    assert list(stats["keypoint_set"]) == ["kp"]
    assert all((tmp_path / f"keypoint_stats.{x}").exists() for x in ("csv", "md", "html"))

    ok("export-keypoints", "--results-root", run.root, "--batches", json.dumps(run.batches), "--name", "kp",
       "--out", tmp_path / "kp.parquet")
    exported = pd.read_parquet(tmp_path / "kp.parquet")
    n = sum(sum(len(k) for k in load_keypoints(Path(run.paths.keypoints("kp", s)))[0].values()) for s in SCENES)
    assert len(exported) == n and set(exported["scene"]) == set(SCENES)


# ------------------------------------------------------------------------------------------------
# Merged from test_provenance.py:
# Input provenance: the sha256 of every image and homography goes with the results.
# ------------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("border_upper, kept", [(None, [40.0]), ("exclusive", [40.0]), ("inclusive", [40.0, "W-40"])])
def test_a_sets_border_upper_reaches_the_border_rule(scene, tmp_path, monkeypatch, border_upper, kept):
    """Keypoints at x = 40 and x = W - 40 on every image: the protocol keeps the first only, the
    workbench's KeyNet rule (border_upper: inclusive) both."""
    import numpy as np

    from descbench.jobs import keypoints as J
    from descbench.keypoints import ImageKeypoints

    def at_the_edges(image_path, gray, spec, *args, **kw):
        x = np.array([40, gray.shape[1] - 40], np.float32)
        n = len(x)
        return ImageKeypoints(x, np.full(n, 60, np.float32), np.full(n, 4, np.float32), np.zeros(n, np.float32),
                              np.ones(n, np.float32), np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))

    monkeypatch.setattr(J, "detect_raw", at_the_edges)
    spec = {**SIFT, **({} if border_upper is None else {"border_upper": border_upper})}
    out = tmp_path / "k.parquet"
    detect_scene(scene, "sift", spec, out)
    per_image, meta = load_keypoints(out)
    for k, kps in per_image.items():
        w = meta["image_sizes"][str(k)][0] if isinstance(meta["image_sizes"], dict) else meta["image_sizes"][k - 1][0]
        assert kps.x.tolist() == [float(w - 40) if v == "W-40" else v for v in kept], k


@pytest.mark.parametrize("grey", [None, "imread", "bgr2gray"])
def test_a_sets_grey_reaches_the_detector(scene, tmp_path, monkeypatch, grey):
    import numpy as np

    from descbench.datasets.layout import read_grey
    from descbench.jobs import keypoints as J

    seen = {}
    real = J.detect_raw

    def spy(image_path, gray, spec, *args, **kw):
        seen[Path(image_path).name] = gray
        return real(image_path, gray, spec, *args, **kw)

    monkeypatch.setattr(J, "detect_raw", spy)
    spec = {**SIFT, **({} if grey is None else {"grey": grey})}
    detect_scene(scene, "sift", spec, tmp_path / "k.parquet")
    assert seen and all(np.array_equal(g, read_grey(scene / name, grey or "imread")) for name, g in seen.items())
