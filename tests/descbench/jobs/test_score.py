"""descbench.jobs.score: the ``score`` command writes every enabled task's files of every scene
of its batch, and refuses sections it does not know with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from descbench import cli
from descbench.config import score_job_sections
from descbench.paths import score_tasks_on
from jobcli import SCENES, scored


def test_every_enabled_task_writes_its_files(tmp_path, capsys):
    run = scored(tmp_path)
    tasks = score_tasks_on(run.cfg)
    assert {"scores", "verification", "matching"} <= set(tasks)
    for task in tasks:
        for s in SCENES:
            for f in run.paths.task_files(task, "kp", "desc", s):
                assert Path(f).exists(), f
                if f.suffix == ".parquet":
                    assert pq.ParquetFile(f).metadata.num_rows > 0, f
    capsys.readouterr()
    sections = {**score_job_sections(run.cfg, "desc"), "nope": {}}
    args = [str(a) for a in run.batch_args()]
    assert cli.main(["score", *args, "--keypoint-set", "kp", "--descriptor", "desc", "--sections", json.dumps(sections)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("descbench: error: the scoring job's sections are ") and err.count("\n") == 1 and "unknown: nope" in err
