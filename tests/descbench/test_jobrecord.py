"""descbench.jobrecord: each job of a run records itself under the folder its run names."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from descbench.jobrecord import JOBS_ENV, JOBS_NAME, jobs_env_value, register_job


def test_env_value_names_the_jobs_folder_and_the_run(tmp_path):
    value = json.loads(jobs_env_value(tmp_path / "res", {"run_id": "abc", "pid": 1}))
    assert value == {"dir": str((tmp_path / "res").resolve() / JOBS_NAME), "run_id": "abc"}


def test_a_job_records_its_pid_host_and_run(tmp_path):
    env = {JOBS_ENV: jobs_env_value(tmp_path, {"run_id": "r1"})}
    record = register_job(env)
    assert record == tmp_path.resolve() / JOBS_NAME / f"{socket.gethostname()}.{os.getpid()}.json"
    assert json.loads(record.read_text()) == {"pid": os.getpid(), "host": socket.gethostname(), "run_id": "r1"}
    assert sorted(p.name for p in record.parent.iterdir()) == [record.name]  # no temporary left


@pytest.mark.bad_input
def test_no_record_without_the_variable_or_with_a_malformed_one(tmp_path):
    assert register_job({}) is None
    for raw in ["", "not json", json.dumps({"dir": str(tmp_path)}), json.dumps(["x"])]:
        assert register_job({JOBS_ENV: raw}) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.bad_input
def test_an_unwritable_folder_gives_no_record_and_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert register_job({JOBS_ENV: json.dumps({"dir": str(Path(blocker) / "jobs"), "run_id": "r"})}) is None
