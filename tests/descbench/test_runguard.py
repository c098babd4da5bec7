"""descbench.runguard: one run at a time per results folder (the lock file and the runs file).
The workflow's use of it, and stopping a killed run's jobs, are in tests/workflow/test_results_integrity.py."""

from __future__ import annotations

import os

import pytest

from descbench import runguard
from descbench.runguard import LOCK_NAME, ResultsLocked, acquire, alive, holder_info, last_run, read_lock, release


def test_a_run_takes_and_releases_the_lock(tmp_path):
    me = holder_info(tmp_path, ["snakemake", "--cores", "2"])
    assert me["pid"] == os.getpid() and me["command"] == "snakemake --cores 2"
    assert read_lock(tmp_path) is None and last_run(tmp_path) is None
    assert acquire(tmp_path, me, None) is None
    assert read_lock(tmp_path) == me and last_run(tmp_path) == me and alive(me) is True
    assert release(tmp_path, me) is True and not (tmp_path / LOCK_NAME).exists()
    assert release(tmp_path, me) is False
    assert last_run(tmp_path) == me  # the runs file remembers who took it last


@pytest.mark.bad_input
def test_a_live_lock_of_another_run_is_refused_naming_it(tmp_path):
    other = holder_info(tmp_path, ["snakemake"])
    other["pid"] = os.getppid()  # a live process of this host that is not this one
    other["pid_started"] = None
    acquire(tmp_path, other, None)
    me = holder_info(tmp_path, ["snakemake"])
    with pytest.raises(ResultsLocked, match=f"another run is writing to {tmp_path}: pid {other['pid']}"):
        acquire(tmp_path, me, other["run_id"])
    assert release(tmp_path, me) is False and read_lock(tmp_path) == other


@pytest.mark.bad_input
def test_another_run_in_between_is_refused(tmp_path):
    first = holder_info(tmp_path, ["snakemake"])
    acquire(tmp_path, first, None)
    release(tmp_path, first)
    with pytest.raises(ResultsLocked, match="while this one was starting"):
        acquire(tmp_path, holder_info(tmp_path, ["snakemake"]), None)  # it read the folder before `first` ran


def test_a_dead_or_foreign_holder(tmp_path):
    assert alive({"host": "elsewhere.invalid", "pid": 1}) is None
    assert alive({"host": runguard._host(), "pid": None}) is False
    assert alive({"host": runguard._host(), "pid": 2 ** 22 + 12345}) is False
    (tmp_path / LOCK_NAME).write_text("{not json")
    assert "unreadable lock file" in read_lock(tmp_path)["command"]
