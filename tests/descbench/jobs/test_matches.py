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


def pipelines(run, name: str, spec: dict, cfg_pipelines: dict | None = None):
    sections = {k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}
    if cfg_pipelines:
        sections["pipelines"] = {**sections["pipelines"], **cfg_pipelines}
    ok("score-pipelines", *run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", name,
       "--spec", json.dumps(spec), "--sections", json.dumps(sections))


def test_score_pipelines_and_report(tmp_path):
    """The pipelines task on every scene, then its table: one row per matcher, whose mnn row's
    matching columns are the mean over pairs of the matching task's definitions."""
    from descbench.tasks.pipelines import KINDS, NAME

    run = features(tmp_path)
    run.cfg["matchers"] = {"mnn": {"matcher": "mnn", "params": {}}, "r": {"matcher": "nn", "params": {"ratio": 0.8}}}
    for name, spec in run.cfg["matchers"].items():
        match(run, name, spec)
        pipelines(run, name, spec)
        for s in SCENES:
            for k in KINDS:
                assert Path(run.paths.match_task_file(NAME, "kp", "desc", name, s, k)).exists()
    out = tmp_path / "report"
    ok("pipelines-report", "--results-root", run.root, "--batches", json.dumps(run.batches),
       "--combos", json.dumps([["kp", "desc", "mnn"], ["kp", "desc", "r"]]), "--config", json.dumps(run.cfg), "--out-dir", out)
    t = pq.read_table(out / "pipelines.parquet").to_pandas()
    assert list(t.matcher) == ["mnn", "r"] and list(t.matcher_type) == ["mnn", "nn"]
    assert t.loc[1, "mean_prec_at_1"] >= t.loc[0, "mean_prec_at_1"]  # the ratio test keeps the better matches
    md = (out / "pipelines.md").read_text()
    assert "| kp | desc | mnn |" in md and "ransac_auc_at_1" in md and "dlt_auc_at_5" in md
    import pandas as pd

    rows = pd.concat([pq.read_table(run.paths.match_task_file(NAME, "kp", "desc", "mnn", s, "pairs.parquet")).to_pandas()
                      for s in SCENES])
    assert t.loc[0, "mma_at_3"] == rows.mma_at_3.mean() and t.loc[0, "mean_prec_at_3"] == rows.prec_at_3.mean()


def test_score_pipelines_reads_the_matches_file_once_and_records_its_digest(tmp_path, monkeypatch):
    """The digest in the provenance is the file's (fileops.file_sha256), of the bytes the job read:
    every reader of a descbench table or digest sees the matches file once."""
    from collections import Counter

    from descbench import fileops
    from descbench.fileops import file_sha256
    from descbench.jobs import matches as jobs_matches
    from descbench.tasks.pipelines import NAME

    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    reads = Counter()

    def spy(f):
        return lambda path, *a, **k: reads.update([Path(path)]) or f(path, *a, **k)

    for module in (io, fileops, jobs_matches):
        for name in ("read_table", "read_table_sha256", "file_sha256"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, spy(getattr(module, name)))
    pipelines(run, "mnn", {"matcher": "mnn"})
    monkeypatch.undo()
    for s in SCENES:
        mpath = Path(run.paths.matches("kp", "desc", "mnn", s))
        assert reads[mpath] == 1
        meta = io.read_meta(run.paths.match_task_file(NAME, "kp", "desc", "mnn", s, "estimates.parquet"))
        assert meta["matches_sha256"] == file_sha256(mpath)


def test_score_pipelines_fills_the_estimator_settings_once_per_job(tmp_path, monkeypatch):
    """Every scene of the batch gets the settings the job filled once (one check_estimator call per
    estimator), and records them in its provenance."""
    from descbench.estimators import homography
    from descbench.tasks.pipelines import NAME, estimator_settings

    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    estimators = run.cfg["pipelines"]["estimators"]
    assert len(estimators) == 2 and len(SCENES) == 2
    calls, check = [], homography.check_estimator
    monkeypatch.setattr(homography, "check_estimator", lambda name, *a, **k: calls.append(name) or check(name, *a, **k))
    pipelines(run, "mnn", {"matcher": "mnn"})
    assert calls == list(estimators)
    monkeypatch.undo()
    filled = {n: {k: list(v) if isinstance(v, tuple) else v for k, v in st.items()}
              for n, st in estimator_settings(run.cfg["pipelines"]).items()}
    for s in SCENES:
        meta = io.read_meta(run.paths.match_task_file(NAME, "kp", "desc", "mnn", s, "pairs.parquet"))
        assert meta["params"]["estimators"] == filled


@pytest.mark.bad_input
def test_score_pipelines_refuses_another_matchers_file(tmp_path, capsys):
    run = features(tmp_path)
    match(run, "mnn", {"matcher": "mnn"})
    other = Path(run.paths.matches("kp", "desc", "other", SCENES[0]))
    other.parent.mkdir(parents=True)
    import shutil

    shutil.copy(run.paths.matches("kp", "desc", "mnn", SCENES[0]), other)
    capsys.readouterr()
    sections = {k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}
    assert cli.main(["score-pipelines", *map(str, run.batch_args()), "--keypoint-set", "kp", "--descriptor", "desc",
                     "--matcher", "other", "--spec", json.dumps({"matcher": "mnn"}), "--sections", json.dumps(sections)]) == 1
    err = capsys.readouterr().err
    assert "holds the matches of matcher 'mnn'" in err and "not 'other'" in err and "rerun the matcher stage" in err


def test_torch_matcher_records_its_runtime(tmp_path):
    pytest.importorskip("kornia")
    run = features(tmp_path)
    match(run, "fg", {"matcher": "fginn", "params": {"device": "cpu"}})
    t, meta = io.read_table(run.paths.matches("kp", "desc", "fg", SCENES[0]), MATCHES_SCHEMA)
    rec = meta["params"]
    assert rec["score_kind"] == "distance" and rec["params"]["ratio"] == 0.8
    assert rec["runtime"]["device"] == "cpu" and rec["runtime"]["deterministic_algorithms"] is True
    assert "runtime" not in io.read_table(run.paths.matches("kp", "desc", "fg", SCENES[0]))[1]["params"]["params"]
