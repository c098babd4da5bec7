"""A tiny run through ``descbench.cli.main``, for the job modules' tests (test_jobs_*.py): two demo
scenes in one batch, one keypoint set and one descriptor, settings from the validated default
config. Each step is the command a workflow job runs (``--threads 0``: this process's thread
pools are left as they are); a keypoint, descriptor or scoring command writes its timing file into its
batch folder (descbench.jobtiming)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from descbench import cli
from descbench.config import score_job_sections, validate_config
from descbench.paths import ResultPaths

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SCENES = ["i_rocket", "v_coins"]


def config() -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = list(SCENES)
    cfg["keypoint_sets"] = {"kp": {"detector": "sift", "max_keypoints": 150}}
    cfg["descriptors"] = {"desc": {"family": "sift"}}
    cfg["statistics"]["bootstrap_resamples"] = 200
    return validate_config(cfg, SCHEMA)


def ok(*args) -> None:
    """Run one command; it must succeed."""
    assert cli.main([str(a) for a in args]) == 0


@dataclass
class Run:
    cfg: dict
    scene_root: Path
    root: Path

    @property
    def batches(self) -> dict:
        return {"batch000": list(SCENES)}

    @property
    def paths(self) -> ResultPaths:
        return ResultPaths(self.root, self.batches)

    def batch_args(self) -> list:
        return ["--results-root", self.root, "--scene-root", self.scene_root, "--batches", json.dumps(self.batches),
                "--batch", "batch000", "--threads", "0"]

    def spec(self, section: str, name: str) -> str:
        return json.dumps(self.cfg[section][name], sort_keys=True)

    def scenes(self) -> None:
        for s in SCENES:
            ok("demo-scene", "--scene", s, "--out-dir", self.scene_root)

    def keypoints(self) -> None:
        ok("keypoints", *self.batch_args(), "--name", "kp", "--spec", self.spec("keypoint_sets", "kp"))

    def descriptors(self) -> None:
        ok("descriptors", *self.batch_args(), "--keypoint-set", "kp", "--name", "desc", "--spec", self.spec("descriptors", "desc"),
           "--keypoint-set-spec", self.spec("keypoint_sets", "kp"))

    def distractors(self) -> None:
        ok("distractors", "--results-root", self.root, "--batches", json.dumps(self.batches), "--keypoint-set", "kp",
           "--descriptor", "desc", "--verification", json.dumps(self.cfg["verification"]),
           "--out", self.paths.distractor_bank("kp", "desc"))

    def score(self) -> None:
        ok("score", *self.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc",
           "--sections", json.dumps(score_job_sections(self.cfg, "desc"), sort_keys=True))


def features(tmp: Path) -> Run:
    """Scenes, keypoints and descriptors of a fresh run under ``tmp``."""
    run = Run(config(), tmp / "data", tmp / "results")
    run.scenes()
    run.keypoints()
    run.descriptors()
    return run


def scored(tmp: Path) -> Run:
    """:func:`features`, then the distractor bank and every enabled scoring task."""
    run = features(tmp)
    run.distractors()
    run.score()
    return run
