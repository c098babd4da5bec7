"""descbench.jobs.common: what the job modules share (settings arguments, result paths, the
scene a scoring task's writer gets)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from descbench.errors import DescbenchError
from descbench import jobtiming
from descbench.config import score_job_sections
from descbench import cli
from descbench.jobs.common import POOLS, JobCommand, batch_args, job_timing, json_arg, limit_threads, read_features, result_paths
from descbench.tasks import score_tasks_on
from descbench.tasks.base import SceneJob
from jobcli import SCENES, features, ok, scored


@pytest.mark.bad_input
def test_json_arg_reads_json_or_a_spec_file(tmp_path):
    (tmp_path / "s.json").write_text('{"b": 2}')
    assert json_arg('{"a": 1}') == {"a": 1} and json_arg(f"@{tmp_path / 's.json'}") == {"b": 2}
    with pytest.raises(DescbenchError, match="cannot read the settings file"):
        json_arg(f"@{tmp_path / 'missing.json'}")


@pytest.mark.bad_input
def test_result_paths_check_the_batch():
    p = argparse.ArgumentParser()
    batch_args(p)
    a = p.parse_args(["--results-root", "r", "--scene-root", "s", "--batches", json.dumps({"b0": ["x"], "b1": ["y"]}), "--batch", "b1"])
    assert result_paths(a).keypoints("k", "y") == str(Path("r") / "keypoints" / "k" / "b1" / "y.parquet")
    a.batch = "b2"
    with pytest.raises(DescbenchError, match=r"--batch 'b2' is not among --batches \(b0, b1\)"):
        result_paths(a)


def test_a_scene_job_times_a_task_from_its_share_of_the_pass(tmp_path):
    run = features(tmp_path)
    f = read_features(Path(run.paths.keypoints("kp", SCENES[0])), Path(run.paths.descriptors("kp", "desc", SCENES[0])))
    job = SceneJob(run.scene_root / SCENES[0], f, {"scoring": {}}, argparse.Namespace(seconds={"retrieval": 5.0}))
    import time

    assert 4.9 < time.perf_counter() - job.t0_of("retrieval") < 60
    job.write_timing(tmp_path / "t.json", job.t0_of("retrieval"))
    assert json.loads((tmp_path / "t.json").read_text())["scene"] == SCENES[0]


def _declared() -> dict[str, JobCommand]:
    """Every subcommand's declaration (its job module's), as the command line holds it."""
    action = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {cmd: p.get_default("job") for cmd, p in action.choices.items()}


def test_each_command_declares_its_pools_pandas_and_timing_once():
    """What each job process needs, as the job modules declare it (JobCommand): the thread pools
    its --threads sizes, running without pandas, the timing file; every other command keeps the
    defaults (BLAS and torch only, pandas allowed, no timing file)."""
    declared = _declared()
    assert all(isinstance(j, JobCommand) and j.run.__module__.startswith("descbench.jobs.") for j in declared.values())
    special = {cmd: (j.pools, j.pandas, j.timing) for cmd, j in declared.items() if (j.pools, j.pandas, j.timing) != ((), True, None)}
    assert special == {
        "demo-scene": (("opencv",), True, None),
        "resize-scene": (("opencv",), True, None),
        "keypoints": (("opencv",), False, ("keypoints", "name", None)),
        "descriptors": (("opencv",), False, ("descriptors", "keypoint_set", "name")),
        "match": ((), False, ("matches", "keypoint_set", "descriptor")),
        "score-pipelines": ((), False, ("pipelines", "keypoint_set", "descriptor")),
        "score-pose": ((), True, ("pose", "keypoint_set", "descriptor")),
        "score": (("numba",), False, ("scoring", "keypoint_set", "descriptor")),
        "distractors": ((), False, None),
        "patches": (("opencv",), True, None),
        "warmup": (("numba",), False, None),
    }
    # every timed command's arguments exist on its parser
    action = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for cmd, j in declared.items():
        if j.timing:
            dests = {a.dest for a in action.choices[cmd]._actions}
            assert {j.timing[1], j.timing[2] or "threads", "threads", "batch"} <= dests, cmd
    assert {j.timing[0] for j in declared.values() if j.timing} == set(jobtiming.STAGES + jobtiming.MATCHER_STAGES)
    assert JobCommand.of(print) == JobCommand(print) and JobCommand.of(declared["score"]) is declared["score"]


@pytest.mark.bad_input
def test_an_unknown_thread_pool_is_refused_where_it_is_declared_or_asked_for():
    with pytest.raises(ValueError, match=r"^builtins.print: unknown thread pools \['gpu'\]; a pool is one of opencv, numba$"):
        JobCommand(print, pools=("opencv", "gpu"))
    with pytest.raises(ValueError, match=r"^limit_threads: unknown thread pools \['c', 'd', 'e', 'i', 'o', 'p', 'r', 's', 't'\]"):
        limit_threads(1, "descriptors")  # a command's name is not its pools
    assert POOLS == ("opencv", "numba")


def test_limit_threads_sizes_only_the_pools_asked_for(monkeypatch):
    """BLAS and torch always; OpenCV's and numba's pools only when the command declares them."""
    import cv2
    import numba
    import threadpoolctl

    from descbench import torchrt

    calls = []
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda n: calls.append(("blas", n)))
    monkeypatch.setattr(torchrt, "set_job_threads", lambda n: calls.append(("torch", n)))
    monkeypatch.setattr(cv2, "setNumThreads", lambda n: calls.append(("opencv", n)))
    monkeypatch.setattr(numba, "set_num_threads", lambda n: calls.append(("numba", n)))
    limit_threads(1)
    assert calls == [("blas", 1), ("torch", 1)]
    calls.clear()
    limit_threads(1, ("opencv", "numba"))
    assert calls == [("blas", 1), ("torch", 1), ("opencv", 1), ("numba", 1)]
    calls.clear()  # a command run from the command line: the pools its job module declares
    cli.run(argparse.Namespace(cmd="x", threads=2, job=JobCommand(lambda a: calls.append("ran"), pools=("numba",))))
    assert calls == [("blas", 2), ("torch", 2), ("numba", 2), "ran"]


def test_each_batch_job_writes_its_timing_file_into_its_folder(tmp_path):
    # the commands of the keypoint, descriptor and scoring rules (tests/jobcli.py, as the rules run them)
    run = scored(tmp_path)
    tasks = score_tasks_on(run.cfg)
    assert len(tasks) > 1  # a scoring job writes the same file into every task folder it fills
    files = [run.paths.job_timing("keypoints", "kp", None, "batch000"), run.paths.job_timing("descriptors", "kp", "desc", "batch000"),
             *(run.paths.job_timing("scoring", "kp", "desc", "batch000", t) for t in tasks)]
    for f in files:
        r = jobtiming.read_timing(f)
        stage, desc = ("keypoints", None) if "keypoints" in f else ("descriptors", "desc") if "descriptors" in f else ("scoring", "desc")
        assert (r["stage"], r["keypoint_set"], r["descriptor"], r["batch"], r["scenes"]) == (stage, "kp", desc, "batch000", SCENES)
        assert r["wall_ms"] > 0 and r["cpu_time_ms"] > 0 and r["threads"] == 0 and r["device"] == "cpu" and r["device_name"]
    assert len({Path(f).read_text() for f in files[2:]}) == 1
    # a command that is not a batch job writes none
    assert isinstance(job_timing(argparse.Namespace(cmd="report", job=_declared()["report"])), nullcontext)
    assert {cmd for cmd, j in _declared().items() if j.timing} == {"keypoints", "descriptors", "score", "match", "score-pipelines", "score-pose"}


def test_the_matcher_stage_jobs_write_their_timing_file_into_their_folders(tmp_path):
    # the commands of the match and score_pipelines rules; pipelines-report (a report job) writes none
    run = features(tmp_path)
    common = [*run.batch_args(), "--keypoint-set", "kp", "--descriptor", "desc", "--matcher", "m", "--spec", json.dumps({"matcher": "mnn"})]
    ok("match", *common)
    ok("score-pipelines", *common, "--sections", json.dumps({k: run.cfg[k] for k in ("scoring", "matching", "pipelines")}))
    for stage, folder in (("matches", run.paths.matches_dir("kp", "desc", "m", "batch000")),
                          ("pipelines", run.paths.match_task_dir("pipelines", "kp", "desc", "m", "batch000"))):
        f = run.paths.job_timing(stage, "kp", "desc", "batch000", matcher="m")
        assert Path(f).parent == Path(folder)
        r = jobtiming.read_timing(f)
        assert (r["stage"], r["keypoint_set"], r["descriptor"], r["matcher"], r["batch"], r["scenes"]) == \
            (stage, "kp", "desc", "m", "batch000", SCENES)
        assert r["wall_ms"] > 0 and r["cpu_time_ms"] > 0 and r["threads"] == 0 and r["device"] == "cpu"
    report = argparse.Namespace(cmd="pipelines-report", job=_declared()["pipelines-report"])
    assert isinstance(job_timing(report), nullcontext)


def _job_process(*args, cwd=None) -> subprocess.CompletedProcess:
    """``python -X importtime -m descbench ARGS``: a job process as the workflow starts it."""
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "descbench", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def _imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` lists (a refused import is listed too, without its submodules)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_pandas_free_jobs_run_without_pandas_and_write_the_same_files(tmp_path):
    """The keypoint, descriptor, distractor and scoring commands as job processes: pandas is never
    imported (pyarrow would import it at its first conversion), and every file equals the one the
    same command wrote in this process, where pandas is loaded."""
    run = scored(tmp_path / "a")
    b = Path(tmp_path / "b")
    spec = {"kp": run.spec("keypoint_sets", "kp"), "desc": run.spec("descriptors", "desc")}
    batch = ["--results-root", b, "--scene-root", run.scene_root, "--batches", json.dumps(run.batches), "--batch", "batch000",
             "--threads", "1"]
    commands = [
        ["keypoints", *batch, "--name", "kp", "--spec", spec["kp"]],
        ["descriptors", *batch, "--keypoint-set", "kp", "--name", "desc", "--spec", spec["desc"], "--keypoint-set-spec", spec["kp"]],
        ["distractors", "--results-root", b, "--batches", json.dumps(run.batches), "--keypoint-set", "kp", "--descriptor", "desc",
         "--verification", json.dumps(run.cfg["verification"]), "--out", Path(b, "distractors", "kp", "desc.parquet")],
        ["score", *batch, "--keypoint-set", "kp", "--descriptor", "desc",
         "--sections", json.dumps(score_job_sections(run.cfg, "desc"), sort_keys=True)],
    ]
    declared = _declared()
    for cmd in commands:
        assert not declared[cmd[0]].pandas
        res = _job_process(*cmd)
        assert res.returncode == 0, res.stderr[-2000:]
        imported = _imported(res.stderr)
        assert "pyarrow.lib" in imported and not any(m.startswith("pandas.") for m in imported), cmd[0]
    files = sorted(p.relative_to(run.root) for p in run.root.rglob("*.parquet"))
    assert len(files) >= 10
    for rel in files:
        assert (b / rel).read_bytes() == (run.root / rel).read_bytes(), rel


def test_without_pandas_refuses_only_the_commands_declared_so():
    """In a fresh process: a command declared ``pandas=False`` makes ``import pandas`` fail with a
    message naming the declaration, while pyarrow converts numpy arrays and Python values as usual and a probe of
    ``importlib.util.find_spec`` (torch imports its dynamo module with such probes) gets a spec
    without a file; another command, or pandas already imported, changes nothing."""
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from descbench.jobs.common import JobCommand, without_pandas\n"
        "assert not without_pandas('report', JobCommand(print))\n"
        "assert 'pandas' not in sys.modules and not any(type(f).__name__ == '_PandasRefused' for f in sys.meta_path)\n"
        "assert without_pandas('score', JobCommand(print, pandas=False))\n"
        "t = pa.table({'x': np.arange(3), 's': np.array(['a', 'b', 'c'], dtype=object), 'n': pa.array([1.5, None, None])})\n"
        "assert t.column('s').to_pylist() == ['a', 'b', 'c'] and t.column('n').null_count == 2\n"
        "assert 'pandas' not in sys.modules\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('pandas').origin is None  # a probe (torch's dynamo) sees no file, no exception\n"
        "import torch._dynamo\n"
        "try:\n"
        "    import pandas\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ("descbench score jobs run without pandas (their job module declares JobCommand(pandas=False)); "
                                  "a score job that needs it must declare pandas=True")
    res = subprocess.run([sys.executable, "-c", "import sys, pandas\nfrom descbench.jobs.common import JobCommand, without_pandas\n"
                                                "assert not without_pandas('score', JobCommand(print, pandas=False))\nimport pandas.api"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
