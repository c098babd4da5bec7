"""Scoring tasks as a registry of modules (descbench.tasks.SCORING_TASKS).

A toy task registered here, in the test only (its ScoringTask subclass below stands for its
module, its registry entry is patched in, its config section added to a copy of the schema: the
three files a new task touches), flows through every stage without any other module of the package
knowing it:
its section is validated, overridable per descriptor and sweepable; the scoring job (`descbench
score`, one JSON of sections) writes its per-scene file; the report (`descbench report`) gets its
summary column, its per-scene column, its interval and its paired comparison. And every
registered task's Parquet files match the schemas its entry declares.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from descbench import cli, io, jobtiming
from descbench.jobs.common import load_keypoints
from descbench.jobs.descriptors import describe_batch
from descbench.jobs.distractors import build_distractor_bank
from descbench.jobs.keypoints import detect_batch
from descbench.config import score_job_sections, validate_config
from descbench.datasets.demo import generate_scene
from descbench.errors import ConfigError
from descbench.paths import ResultPaths, scene_batches
from descbench.tasks import SCORING_TASKS, ScoringTask, TaskSummary, score_job_tasks

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SCENES = ["i_rocket", "v_coins"]

# ----------------------------------------------------------------------------- the toy task
# Per scene and image: how many keypoints are at least toy.min_size px large.

TOY_COUNTS = pa.schema([("scene", pa.string()), ("image", pa.int8()), ("n_keypoints", pa.int64())])
TOY_SECTION = {"type": "object", "additionalProperties": False, "default": {},
               "properties": {"enabled": {"type": "boolean", "default": True},
                              "min_size": {"type": "number", "minimum": 0, "default": 0}}}


class ToyTask(ScoringTask):
    name = "toy"
    section = "toy"
    kinds = ("counts.parquet", "timing.json")
    headline = ("toy_keypoints_per_image",)
    intervals = (("toy_keypoints_per_image", "toy_keypoints", "toy_images"),)

    def schemas(self, cfg: dict) -> dict:
        return {"counts.parquet": TOY_COUNTS}

    def write(self, job, outs) -> None:
        out_counts, out_timing = outs
        t0 = time.perf_counter()
        f, min_size = job.features, job.sections["toy"]["min_size"]
        rows = [{"scene": f.scene, "image": k, "n_keypoints": int((kp.size >= min_size).sum())} for k, kp in f.per_image.items()]
        prov = io.provenance("toy", {"scoring": job.sections["scoring"], "toy": job.sections["toy"]}, scene=f.scene)
        io.write_table(io.table_from_rows(rows, TOY_COUNTS, "toy counts"), out_counts, prov)
        job.write_timing(out_timing, t0)

    def summarize(self, files: dict, cfg: dict) -> TaskSummary:
        rows = pd.concat([io.read_table(p, TOY_COUNTS, with_meta=False)[0].to_pandas() for p in files["counts.parquet"]])
        g = rows.groupby("scene", sort=True).n_keypoints
        scenes = pd.DataFrame({"toy_keypoints": g.sum(), "toy_images": g.count()}).reset_index()
        return TaskSummary({"toy_keypoints_per_image": float(rows.n_keypoints.mean())}, scenes)


TOY = ToyTask()


@pytest.fixture(scope="module")
def toy_registered():
    """The toy task in the registry for this module's tests (the one change a new task makes to
    the package besides its own module), and the schema with its section."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SCORING_TASKS, "toy", TOY)
        yield


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> Path:
    s = yaml.safe_load(SCHEMA.read_text())
    s["properties"]["toy"] = TOY_SECTION
    out = tmp_path_factory.mktemp("schema") / "config.schema.yaml"
    out.write_text(yaml.safe_dump(s))
    return out


def raw_config(**extra) -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = list(SCENES)
    cfg["keypoint_sets"] = {"kp": {"detector": "sift", "max_keypoints": 150}}
    cfg["descriptors"] = {"desc": {"family": "sift"},
                          "desc5": {"family": "sift", "features_of": "desc", "overrides": {"toy": {"min_size": 5}}}}
    cfg["matching"]["mma_thresholds"] = [1, 3]
    cfg["statistics"]["bootstrap_resamples"] = 200
    cfg["toy"] = {"min_size": 2}
    cfg.update(extra)
    return cfg


# ----------------------------------------------------------------------------- config


def test_the_toy_section_is_validated_overridable_and_sweepable(toy_registered, schema):
    cfg = validate_config(raw_config(), schema)
    assert cfg["toy"] == {"enabled": True, "min_size": 2}  # defaults filled
    with pytest.raises(ConfigError, match=r"unknown config key 'toy\.minsize' \(did you mean 'toy\.min_size'\?\)"):
        validate_config(raw_config(toy={"minsize": 2}), schema)
    bad = raw_config()
    bad["descriptors"]["desc5"]["overrides"]["toy"]["min_size"] = -1
    with pytest.raises(ConfigError, match=r"descriptors\.desc5\.overrides\.toy\.min_size"):
        validate_config(bad, schema)
    # the scoring job's sections: scoring (no threads), each enabled task's (no enabled), overrides merged
    sections = score_job_sections(cfg, "desc5")
    assert list(sections) == ["scoring", "verification", "matching", "toy"]
    assert sections["toy"] == {"min_size": 5} and "threads" not in sections["scoring"]
    assert score_job_sections(cfg, "desc")["toy"] == {"min_size": 2}
    off = validate_config(raw_config(toy={"enabled": False}, verification={"enabled": False}), schema)
    assert list(score_job_sections(off, "desc5")) == ["scoring", "matching"]
    # a descriptor sweep over toy.min_size: the values go into the variants' overrides, which
    # reuse the base's descriptor files (only their scoring jobs run)
    swept = validate_config(raw_config(sweeps={"m": {"descriptor": "desc", "grid": {"toy.min_size": [1, 7]}}}), schema)
    assert swept["descriptors"]["desc-m-1"]["overrides"] == {"toy": {"min_size": 7}}
    assert swept["descriptors"]["desc-m-1"]["features_of"] == "desc"
    assert score_job_sections(swept, "desc-m-0")["toy"] == {"min_size": 1}


@pytest.mark.bad_input
def test_without_its_registry_entry_the_section_is_not_a_scoring_section(schema, monkeypatch):
    monkeypatch.delitem(SCORING_TASKS, "toy", raising=False)
    with pytest.raises(ConfigError, match=r"unknown config key 'descriptors\.desc5\.overrides\.toy'; allowed: scoring, "
                                          r"verification, matching$"):
        validate_config(raw_config(), schema)


# ----------------------------------------------------------------------------- the scoring job and the report


@pytest.fixture(scope="module")
def toy_run(toy_registered, schema, tmp_path_factory):
    """Features of two demo scenes, then `descbench score` for desc and desc5 (desc5 reuses desc's
    files, toy.min_size overridden) and `descbench report`, in this process (the registry as
    patched above)."""
    cfg = validate_config(raw_config(), schema)
    scene_root, root = tmp_path_factory.mktemp("scenes"), tmp_path_factory.mktemp("results")
    for s in SCENES:
        generate_scene(s, scene_root, seed=0)
    paths = ResultPaths(root, scene_batches(SCENES, cfg["execution"]["scenes_per_job"]))
    kp_spec = cfg["keypoint_sets"]["kp"]
    with jobtiming.timed([paths.job_timing("keypoints", "kp", None, "batch000")], "keypoints", "kp", None, "batch000", SCENES, 1):
        detect_batch(paths, scene_root, "batch000", "kp", kp_spec)
    with jobtiming.timed([paths.job_timing("descriptors", "kp", "desc", "batch000")], "descriptors", "kp", "desc", "batch000", SCENES, 1):
        describe_batch(paths, scene_root, "batch000", "kp", "desc", cfg["descriptors"]["desc"], kp_spec)
    for d in ("desc", "desc5"):
        build_distractor_bank(paths, "kp", d, cfg["verification"], Path(paths.distractor_bank("kp", d)), features="desc")
        # --threads 0: leave this process's thread pools as they are
        args = ["score", "--results-root", str(root), "--scene-root", str(scene_root), "--batches", json.dumps(paths.batches),
                "--batch", "batch000", "--keypoint-set", "kp", "--descriptor", d, "--threads", "0",
                "--sections", json.dumps(score_job_sections(cfg, d), sort_keys=True)]
        assert cli.main(args + (["--features-of", "desc"] if d == "desc5" else [])) == 0
    report = root / "report"
    report.mkdir()
    assert cli.main(["report", "--results-root", str(root), "--combos", json.dumps([["kp", "desc"], ["kp", "desc5"]]),
                     "--scenes", json.dumps(SCENES), "--config", json.dumps(cfg), "--provenance", "{}",
                     "--out-dir", str(report)]) == 0
    return cfg, paths, scene_root, report


def expected_counts(paths: ResultPaths, scene: str, min_size: float) -> list[int]:
    per_image, _ = load_keypoints(Path(paths.keypoints("kp", scene)))
    return [int((kp.size >= min_size).sum()) for _, kp in sorted(per_image.items())]


def test_the_scoring_job_writes_the_toy_file_of_every_scene(toy_run):
    cfg, paths, _, _ = toy_run
    for d, min_size in (("desc", 2), ("desc5", 5)):
        for s in SCENES:
            counts, timing = TOY.files(paths, "kp", d, s)
            table, meta = io.read_table(counts, TOY_COUNTS)
            assert table.column("n_keypoints").to_pylist() == expected_counts(paths, s, min_size)
            assert meta["params"]["toy"] == {"min_size": min_size} and meta["params"]["scoring"]["tau_px"] == 3.0
            assert json.loads(timing.read_text())["processing_time_ms"] >= 0
            for t in ("scores", "verification", "matching"):  # the built-in tasks ran beside it
                assert all(p.exists() for p in SCORING_TASKS[t].files(paths, "kp", d, s))
        # the job's timing file lands in the folder of every task it ran, the new task's too (descbench.jobtiming)
        assert [t.name for t in score_job_tasks(score_job_sections(cfg, d))] == [*SCORING_TASKS]
        assert jobtiming.read_timing(paths.job_timing("scoring", "kp", d, "batch000", TOY.name))["descriptor"] == d
    assert expected_counts(paths, "v_coins", 5) != expected_counts(paths, "v_coins", 2)  # the override matters


def test_the_report_has_the_toy_summary_its_interval_and_comparison(toy_run):
    cfg, paths, _, report = toy_run
    table = pq.read_table(report / "comparison.parquet").to_pandas()
    for d, min_size in (("desc", 2), ("desc5", 5)):
        counts = [c for s in SCENES for c in expected_counts(paths, s, min_size)]
        row = table[table.descriptor == d].iloc[0]
        assert row.toy_keypoints_per_image == pytest.approx(sum(counts) / len(counts), rel=1e-12)
        assert row.toy_keypoints_per_image_ci_low <= row.toy_keypoints_per_image <= row.toy_keypoints_per_image_ci_high
        assert f"toy_keypoints_per_image={row.toy_keypoints_per_image:.4f};" in row.metadata
    # after the built-in tasks' columns, in registry order; shown in the Markdown table
    cols = list(table.columns)
    assert cols.index("toy_keypoints_per_image") > cols.index("classifier_mutual_nn_auc")
    assert "toy_keypoints_per_image" in (report / "comparison.md").read_text().splitlines()[0]
    per_scene = pq.read_table(report / "per_scene.parquet").to_pandas()
    assert per_scene[per_scene.descriptor == "desc"].toy_keypoints.tolist() == [sum(expected_counts(paths, s, 2)) for s in SCENES]
    sig = pq.read_table(report / "significance.parquet").to_pandas()
    toy = sig[sig.metric == "toy_keypoints_per_image"]
    assert len(toy) == 1 and toy.iloc[0].descriptor_a == "desc" and toy.iloc[0].difference > 0
    # the wall time of the CSV: every task's timing files, the toy's included
    csv = pd.read_csv(report / "comparison.csv")
    timings = [paths.task_file(t, "kp", "desc", s, "timing.json") for t in SCORING_TASKS for s in SCENES]
    assert len(timings) == 8
    assert csv.processing_time_ms[0] == pytest.approx(sum(json.loads(Path(p).read_text())["processing_time_ms"] for p in timings),
                                                      rel=1e-12)


def test_every_task_writes_exactly_its_declared_schemas(toy_run):
    """Each registered task's Parquet files hold exactly the columns and types its ``schemas``
    declares under the descriptor's effective config (the built-in tasks and the toy)."""
    from descbench.config import effective_config

    cfg, paths, _, _ = toy_run
    assert "toy" in SCORING_TASKS
    for d in ("desc", "desc5"):
        ecfg = effective_config(cfg, d)
        for t in SCORING_TASKS.values():
            declared = t.schemas(ecfg)
            assert set(declared) == {k for k in t.kinds if k.endswith(".parquet")}, t.name
            for s in SCENES:
                for kind, want in declared.items():
                    got = pq.read_schema(paths.task_file(t.name, "kp", d, s, kind)).remove_metadata()
                    assert got.equals(want), (t.name, kind, got, want)


@pytest.mark.bad_input
def test_the_scoring_job_refuses_sections_of_no_task(toy_run, capsys):
    cfg, paths, scene_root, _ = toy_run
    args = ["score", "--results-root", str(paths.root), "--scene-root", str(scene_root), "--batches", json.dumps(paths.batches),
            "--batch", "batch000", "--keypoint-set", "kp", "--descriptor", "desc", "--threads", "0", "--sections"]
    assert cli.main(args + [json.dumps({"scoring": score_job_sections(cfg, "desc")["scoring"], "nope": {}})]) == 1
    assert "unknown: nope" in capsys.readouterr().err
    assert cli.main(args + ["{}"]) == 1
    assert "expected 'scoring'" in capsys.readouterr().err


def test_a_changed_toy_setting_is_announced(toy_registered):
    from descbench.report.changes import changed_settings

    old = {"toy": {"enabled": True, "min_size": 2}, "scoring": {"tau_px": 3.0}}
    assert changed_settings(old, {**old, "toy": {"enabled": True, "min_size": 4}}) == ["toy.min_size: 2 -> 4"]
