"""descbench.jobs.matches: the ``match`` command writes one matches file per scene whose rows are
the matcher's output on every pair, and whose mnn matches are the matching task's mutual nearest
neighbours (the pairs table's n_matches)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import raises_naming
from descbench import cli, io
from descbench.jobs.common import read_features
from descbench.jobs.matches import match_scene
from descbench.matchers import MATCHES_SCHEMA, split_matches
from descbench.metrics.nn import mutual_nearest, nearest_two
from jobcli import SCENES, features, ok


def match(run, name: str, spec: dict):
    ok("match", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", name, "--spec", json.dumps(spec))


def test_match_writes_every_pair_of_every_scene(tmp_path):
    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    match(run, "r07", {"matcher": "nn", "params": {"ratio": 0.7}})
    for s in SCENES:
        f = read_features(Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s)))
        pairs = [(1, k) for k in range(2, 7)]
        t_mnn, meta = io.read_table(run.paths.matches("kp", "desc", "mnn", s), MATCHES_SCHEMA)
        assert meta["params"]["matcher"] == "mnn" and meta["params"]["score_kind"] == "distance" and meta["keypoint_set"] == "kp"
        got = split_matches(t_mnn, pairs)
        r07 = split_matches(io.read_table(run.paths.matches("kp", "desc", "r07", s), MATCHES_SCHEMA)[0], pairs)
        assert io.read_table(run.paths.matches("kp", "desc", "r07", s))[1]["params"]["params"] == {"ratio": 0.7, "chunk_mb": 64}
        for a, b in pairs:
            ia, ib, dist = mutual_nearest(f.by_image[a], f.by_image[b])
            assert len(ia) > 0
            np.testing.assert_array_equal(got[(a, b)].idx_a, ia)
            np.testing.assert_array_equal(got[(a, b)].idx_b, ib)
            np.testing.assert_array_equal(got[(a, b)].score, dist)
            i1, d1, _, d2 = nearest_two(f.by_image[a], f.by_image[b])
            keep = np.flatnonzero(d1 <= 0.7 * d2)
            np.testing.assert_array_equal(r07[(a, b)].idx_a, keep)
            np.testing.assert_array_equal(r07[(a, b)].idx_b, i1[keep])


def test_same_input_same_bytes(tmp_path):
    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    path = Path(run.paths.matches("kp", "desc", "mnn", SCENES[0]))
    first = path.read_bytes()
    path.unlink()
    match(run, "mnn", {"matcher": "mnn"})
    assert path.read_bytes() == first and pq.ParquetFile(path).metadata.num_rows > 0


@pytest.mark.bad_input
def test_unknown_matcher_is_one_line_naming_the_key(tmp_path, capsys):
    run = features(tmp_path)
    capsys.readouterr()
    assert cli.main(["match", *map(str, run.batch_args()), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "x",
                     "--spec", json.dumps({"matcher": "lowe"})]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matchers.x.matcher" in err and "unknown matcher 'lowe'" in err


@pytest.mark.bad_input
def test_matches_of_other_pairs_are_refused(tmp_path):
    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    t = io.read_table(run.paths.matches("kp", "desc", "mnn", SCENES[0]), MATCHES_SCHEMA)[0]
    raises_naming(lambda: split_matches(t, [(1, 2), (1, 3)]), "pair (1, 4)", "not among the scene's pairs", "rerun the matcher stage")


def test_match_scene_equals_the_batch_job(tmp_path):
    run = features(tmp_path)
    match(run, "s", {"matcher": "smnn"})
    s = SCENES[1]
    out = tmp_path / "alone.parquet"
    match_scene(run.scene_root / s, Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s)), "s",
                {"matcher": "smnn"}, out, kpset="kp")
    assert io.read_table(out)[0].equals(io.read_table(run.paths.matches("kp", "desc", "s", s))[0])
