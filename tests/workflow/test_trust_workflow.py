"""What a new user runs into around the workflow: a YAML typo, a nested --config value, a file
where a folder belongs, a read-only or full disk, a broken result file, Ctrl-C / SIGTERM.

Each case gives one line naming the file or key and the fix, and following that fix works.
The tests marked e2e run snakemake on one or two demo scenes.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
import yaml

from descbench import cli, io, smktuning
from descbench.config import check_folders, check_yaml_file, type_command_line_values, validate_config
from descbench.errors import ConfigError, DataError
from descbench.report.summary import run_stopped_hint
from conftest import job_settings
from smkrun import snakemake, snakemake_cmd, write_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def base_config(**changes) -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["v_coins"]
    cfg.update(changes)
    return cfg


def descbench_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("descbench")]


@pytest.mark.bad_input
def test_a_config_error_is_one_line_without_snakemakes_traceback(tmp_path: Path):
    """A bad value stops the run with its one-line message and exit status 1; no traceback lines
    into the workflow's own files (which say nothing about the config) follow it."""
    cfg = base_config()
    cfg["scoring"]["tau_px"] = -3
    write_config(tmp_path, cfg)
    out = snakemake(tmp_path, "-n", ok=False)
    assert descbench_lines(out) == ["descbench config error: invalid config value at 'scoring.tau_px': -3 is less than "
                                    "or equal to the minimum of 0"], out[-2000:]
    assert "common.smk" not in out and "WorkflowError" not in out and "Traceback" not in out


# ----------------------------------------------------------------------------- 1. YAML syntax


@pytest.mark.bad_input
def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path):
    f = tmp_path / "my.yaml"
    f.write_text("dataset: demo\nscoring:\n  tau_px: 3\n gt: closest\n")
    with pytest.raises(ConfigError) as info:
        check_yaml_file(f)
    msg = str(info.value)
    assert msg.startswith(f"{f}, line 4, column 2: YAML syntax error: ") and "\n" not in msg
    assert "fix the YAML there" in msg
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        check_yaml_file(f)
    f.write_text("dataset: demo\n")
    assert check_yaml_file(f) == {"dataset": "demo"}


@pytest.mark.bad_input
def test_yaml_syntax_error_in_config_yaml_through_snakemake(tmp_path: Path):
    """Snakemake's own message ("Config file is not valid JSON or YAML") names neither the file
    nor the line: the Snakefile reads config.yaml first."""
    text = yaml.safe_dump(base_config(), sort_keys=False).replace("dataset: demo", "dataset: [demo", 1)
    (tmp_path / "config.yaml").write_text(text)
    out = snakemake(tmp_path, "-n", ok=False)
    line = next(line for line in out.splitlines() if "descbench config error" in line)
    assert re.search(r"descbench config error: config\.yaml, line \d+, column \d+: YAML syntax error: .*"
                     r"while parsing a flow sequence started at line \d+, column 10", line), line
    assert "not valid JSON or YAML" not in out and "Traceback" not in out


def test_check_config_names_the_configfile_and_line(tmp_path: Path):
    """A --configfile is read by Snakemake before the workflow (its error names no file), so the
    README points to `python -m descbench check-config`, which does."""
    (tmp_path / "config.yaml").write_text((ROOT / "config.yaml").read_text())
    (tmp_path / "mine.yaml").write_text("scoring:\n  tau_px: [5\n")
    res = subprocess.run([sys.executable, "-m", "descbench", "check-config", "config.yaml", "mine.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert descbench_lines(res.stderr)[0].startswith("descbench: error: mine.yaml, line 3, column 1: YAML syntax error")
    (tmp_path / "mine.yaml").write_text("scoring:\n  tau_pix: 5\n")
    assert cli.main(["check-config", str(tmp_path / "config.yaml"), str(tmp_path / "mine.yaml")]) == 1
    (tmp_path / "mine.yaml").write_text("scoring:\n  tau_px: 5\n")
    assert cli.main(["check-config", str(tmp_path / "config.yaml"), str(tmp_path / "mine.yaml")]) == 0


# ----------------------------------------------------------------------------- 2. nested --config


def test_nested_command_line_values_are_typed():
    merged = {"scoring": {"tau_px": "5", "gt": "closest", "chunk_mb": 64},
              "matching": {"enabled": "false", "mma_thresholds": ["1", "2.5"]}, "scenes": ["0001", "v_x"],
              "experiment": "5"}
    over = {"scoring": {"tau_px": "5", "gt": "closest"}, "matching": {"enabled": "false", "mma_thresholds": ["1", "2.5"]},
            "experiment": "5"}
    type_command_line_values(merged, over)
    assert merged["scoring"] == {"tau_px": 5, "gt": "closest", "chunk_mb": 64}
    assert merged["matching"] == {"enabled": False, "mma_thresholds": [1, 2.5]}
    assert merged["scenes"] == ["0001", "v_x"]  # not from the command line: untouched
    assert merged["experiment"] == "5"  # top level: Snakemake's own typing stands


@pytest.mark.e2e
def test_nested_config_on_the_command_line_reaches_the_jobs(tmp_path: Path):
    """The syntax config.yaml's header documents: `--config 'scoring={tau_px: 5}'` (Snakemake
    9 refuses `scoring.tau_px=5` before the workflow is read); other scoring keys stay."""
    write_config(tmp_path, base_config())
    header = (ROOT / "config.yaml").read_text().split("\n\n")[0]
    assert "--config 'scoring={tau_px: 5}'" in header
    out = snakemake(tmp_path, "-n", "-p", "--config", "scoring={tau_px: 5}", "matching={mma_thresholds: [1, 3]}")
    sections = job_settings(out, "--sections", tmp_path)
    assert sections and all(s["scoring"]["tau_px"] == 5 and s["scoring"]["gt"] == "closest_oriented" for s in sections), sections
    assert all(s["matching"]["mma_thresholds"] == [1, 3] for s in sections)


# ----------------------------------------------------------------------------- 3. file, not folder


@pytest.mark.bad_input
def test_check_folders(tmp_path: Path):
    (tmp_path / "afile").write_text("")
    check_folders({"results_dir": tmp_path / "new" / "deeper", "data_dir": tmp_path})
    with pytest.raises(ConfigError) as info:
        check_folders({"results_dir": tmp_path / "afile"})
    assert f"config key 'results_dir': {tmp_path / 'afile'} must be a folder, but it is a file" in str(info.value)
    assert "move that file away" in str(info.value)
    with pytest.raises(ConfigError, match=f"but {re.escape(str(tmp_path / 'afile'))} is a file"):
        check_folders({"data_dir": tmp_path / "afile" / "sub"})


@pytest.mark.bad_input
@pytest.mark.e2e
@pytest.mark.parametrize("key", ["results_dir", "data_dir"])
def test_a_file_as_results_or_data_dir_is_a_config_error(tmp_path: Path, key: str):
    write_config(tmp_path, base_config())
    (tmp_path / "afile").write_text("")
    out = snakemake(tmp_path, "-n", "--config", f"{key}=afile", ok=False)
    assert f"descbench config error: config key '{key}': afile must be a folder, but it is a file" in out
    assert "NotADirectoryError" not in out and "Traceback" not in out


# ----------------------------------------------------------------------------- 4. read-only, disk full


@pytest.fixture
def keypoint_job(pristine: Path, tmp_path: Path):
    """The argv of a keypoint job on the demo scene, writing under tmp_path/results."""
    import json

    cfg = validate_config(base_config(), SCHEMA)
    results = tmp_path / "results"
    results.mkdir()
    argv = ["keypoints", "--results-root", str(results), "--scene-root", str(pristine.parent), "--batches",
            json.dumps({"batch000": [pristine.name]}), "--batch", "batch000", "--name", "sift",
            "--spec", json.dumps(cfg["keypoint_sets"]["sift"])]
    return argv, results, results / "keypoints" / "sift" / "batch000" / f"{pristine.name}.parquet"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_permission_denied_in_a_job_is_one_line(keypoint_job, monkeypatch, capsys):
    argv, results, out = keypoint_job

    def denied(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), src, None, dst)

    monkeypatch.setattr(io.os, "replace", denied)
    assert cli.main(argv) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"descbench: error: cannot write {out}: Permission denied (EACCES) in the folder {out.parent}")
    assert f"chmod u+w {out.parent}" in line and "rerun the same command" in line
    assert [p.name for p in out.parent.iterdir()] == []  # neither the file nor its temporary name


def test_disk_full_in_a_job_is_one_line(keypoint_job, monkeypatch, capsys):
    argv, results, out = keypoint_job

    def full(table, where, *args, **kwargs):  # as pyarrow raises it: errno, but no file name
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    assert cli.main(argv) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"descbench: error: cannot write {out}: No space left on device (ENOSPC)")
    assert f"df -h {out.parent}" in line
    assert [p.name for p in out.parent.iterdir()] == []


@pytest.mark.bad_input
@pytest.mark.parametrize("code, says, fix", [
    (errno.EACCES, "Permission denied (EACCES)", "chmod u+w"),
    (errno.EPERM, "(EPERM)", "chmod u+w"),
    (errno.EROFS, "Read-only file system (EROFS)", "mounted read-only: set results_dir"),
    (errno.ENOSPC, "No space left on device (ENOSPC)", "df -h"),
    (errno.EDQUOT, "(EDQUOT)", "quota"),
])
def test_write_error_messages(tmp_path: Path, code: int, says: str, fix: str):
    f = tmp_path / "a" / "b.parquet"
    msg = cli.write_error_message(OSError(code, os.strerror(code), str(f)), "`score`")
    assert msg.startswith(f"descbench: error: cannot write {f}: ") and says in msg and fix in msg
    assert f"in the folder {tmp_path};" in msg and "\n" not in msg  # the nearest existing folder
    assert "an output of `score`" in cli.write_error_message(OSError(code, os.strerror(code)), "`score`")


@pytest.mark.bad_input
def test_an_unreadable_input_is_not_called_unwritable(tmp_path: Path, monkeypatch):
    f = tmp_path / "H_1_2"
    f.write_text("1 0 0\n0 1 0\n0 0 1\n")
    monkeypatch.setattr(cli.os, "access", lambda *a, **k: False)  # root reads anything: simulate
    msg = cli.write_error_message(PermissionError(errno.EACCES, "Permission denied", str(f)), "`keypoints`")
    assert msg.startswith(f"descbench: error: cannot read {f}: Permission denied (EACCES)") and f"chmod u+r {f}" in msg


def test_write_text_leaves_no_temporary_file(tmp_path: Path, monkeypatch):
    def full(self, text, *args, **kwargs):
        Path.write_bytes(self, b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as info:
        io.write_text(tmp_path / "x.json", "{}")
    assert info.value.filename == str(tmp_path / "x.json") and info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_read_only_results_folder_for_real(keypoint_job, tmp_path: Path):
    """A real read-only folder: chmod, or as root (where chmod stops nothing) chmod plus a shell
    without the capabilities that let root write anyway."""
    argv, results, out = keypoint_job
    out.parent.parent.mkdir(parents=True)
    out.parent.parent.chmod(0o555)
    cmd = [sys.executable, "-m", "descbench", *argv]
    if os.geteuid() == 0:
        if not shutil.which("capsh"):
            pytest.skip("root without capsh: chmod does not stop root from writing")
        cmd = ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner", "--", "-c",
               " ".join(map(shlex_quote, cmd))]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        out.parent.parent.chmod(0o755)
    assert res.returncode == 1, res.stderr
    line = descbench_lines(res.stderr)[0]
    assert line.startswith(f"descbench: error: cannot write {out}: Permission denied (EACCES) in the folder {out.parent.parent}")
    assert "Traceback" not in res.stderr and not out.parent.exists()


def shlex_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


# ----------------------------------------------------------------------------- 5. broken result file


@pytest.mark.bad_input
def test_rebuild_hint_names_the_folder_to_delete(tmp_path: Path):
    batch = tmp_path / "results" / "demo" / "keypoints" / "sift" / "batch003"
    batch.mkdir(parents=True)
    f = batch / "v_coins.parquet"
    with pytest.raises(DataError) as info:  # deleted
        io.read_table(f)
    assert f"cannot read {f}" in str(info.value) and f"`rm -r {batch}`" in str(info.value)
    f.write_bytes(b"PAR1")  # truncated
    with pytest.raises(DataError, match=re.escape(f"`rm -r {batch}`")):
        io.read_table(f)
    with pytest.raises(DataError, match=re.escape(f"`rm -r {batch}`")):
        io.read_meta(f)
    bank = tmp_path / "distractors" / "sift" / "sift.parquet"  # a file output: its folder works too
    assert f"`rm -r {bank.parent}`" in io.rebuild_hint(bank)


def test_rebuild_hint_never_removes_the_working_folder(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path / ".")
    assert io.rebuild_hint("comparison.parquet").startswith("delete it, `rm comparison.parquet`")
    assert "rm -r" not in io.rebuild_hint(tmp_path / "x.parquet") and "rm -r" not in io.rebuild_hint(Path("/x.parquet"))
    assert "`rm -r 'my results/b'`" in io.rebuild_hint("my results/b/x.parquet")  # quoted for the shell


@pytest.mark.bad_input
@pytest.mark.e2e
def test_following_the_message_for_a_truncated_file_rebuilds_it(tmp_path: Path):
    """Truncate a per-scene keypoint file of a finished job; the next job that reads it fails with
    a message whose command, run literally, makes the same snakemake command succeed."""
    cfg = base_config(descriptors={"sift": {"family": "sift"}})
    write_config(tmp_path, cfg)
    snakemake(tmp_path, "--cores", "2", "results/demo/descriptors/sift/sift/batch000")
    kp = tmp_path / "results/demo/keypoints/sift/batch000/v_coins.parquet"
    kp.write_bytes(kp.read_bytes()[:200])
    cfg["descriptors"]["rootsift"] = {"family": "rootsift"}
    write_config(tmp_path, cfg)
    target = "results/demo/descriptors/sift/rootsift/batch000"
    out = snakemake(tmp_path, "--cores", "2", target, ok=False)
    msg = next(line for line in out.splitlines() if line.startswith("descbench: error: cannot read"))
    assert "results/demo/keypoints/sift/batch000/v_coins.parquet" in msg
    command = re.search(r"`(rm -r [^`]+)`", msg).group(1)
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    snakemake(tmp_path, "--cores", "2", target)
    assert len(pq.read_table(kp)) > 0 and (tmp_path / target / "v_coins.parquet").exists()


# ----------------------------------------------------------------------------- 6. interrupts


def test_run_stopped_hint_tells_interrupt_from_failure():
    failed = run_stopped_hint("results/demo/logs")
    assert "the failing job's own message is above" in failed and "results/demo/logs" in failed
    stopped = run_stopped_hint("results/demo/logs", "SIGTERM")
    assert "interrupted (SIGTERM)" in stopped and "failing job" not in stopped and "Rerun the same command" in stopped


def test_ctrl_c_handler_is_installed_with_the_signal_module_alone():
    """The SIGINT handler is the workflow's own (no Snakemake attribute is replaced for it)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers can only be installed from the main thread")
    before, before_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    from snakemake.scheduling.job_scheduler import JobScheduler

    original = JobScheduler.exit_gracefully
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert smktuning.stop_jobs_on_sigint() is True
        assert signal.getsignal(signal.SIGINT) is smktuning._on_interrupt
        assert JobScheduler.exit_gracefully is original
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's ignored SIGINT stays ignored
        assert smktuning.stop_jobs_on_sigint() is False
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert smktuning.stop_jobs_on_sigterm() is True
        assert signal.getsignal(signal.SIGTERM) is smktuning._on_interrupt
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGTERM, before_term)


def test_stop_local_jobs_signals_what_runs_under_each_job_shell():
    """The job's shell (a child of this process) is not signalled (a SIGTERM would end it before
    descbench has cleaned up); its children are, and the shell then exits with their status."""
    job = subprocess.Popen(["bash", "-c", "sleep 30; exit 7"])
    deadline = time.time() + 10
    while not psutil.Process(job.pid).children() and time.time() < deadline:
        time.sleep(0.05)
    t0 = time.time()
    assert smktuning.stop_local_jobs(signal.SIGTERM) >= 1
    assert job.wait(timeout=10) == 7 and time.time() - t0 < 5  # sleep ended, bash ran on to `exit 7`


def test_a_second_interrupt_kills_the_jobs(monkeypatch):
    sent = []
    monkeypatch.setattr(smktuning, "stop_local_jobs", sent.append)
    monkeypatch.setitem(smktuning._INTERRUPT, "signal", None)
    with pytest.raises(KeyboardInterrupt):
        smktuning._on_interrupt(signal.SIGINT)
    assert smktuning.interrupted() == "SIGINT" and sent == [signal.SIGINT]
    smktuning._on_interrupt(signal.SIGINT)  # the jobs did not stop: no second KeyboardInterrupt
    assert sent == [signal.SIGINT, signal.SIGKILL]


def test_a_job_interrupted_exits_with_one_line():
    """`python -m descbench` itself: SIGINT / SIGTERM end it with one line and 128 + signal."""
    code = ("import time, sys\nfrom descbench import cli\n"
            "cli.run = lambda a: (print('started', flush=True), time.sleep(60))\n"
            "sys.exit(cli.main(['warmup', '--out', 'x']))\n")
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "started\n"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 128 + sig
        assert _one_error_line(err) == (f"descbench: interrupted ({signal.Signals(sig).name}) while running `warmup`; "
                                        "partial outputs removed")


def _job_processes(workdir: Path, command: str = "") -> list[psutil.Process]:
    """The jobs (their shells and descbench processes) of a run in ``workdir``, not Snakemake
    itself; only those of the descbench ``command`` if given."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if "descbench" in cmd and "snakemake" not in cmd and f" {command} " in f" {cmd} " and Path(p.cwd()) == workdir:
                out.append(p)
        except psutil.Error:
            pass
    return out


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "ctrl-c"])
def test_interrupting_a_local_run_stops_every_job(tmp_path: Path, how: str):
    """SIGINT or SIGTERM to snakemake (or Ctrl-C: SIGINT to its whole process group) while two
    jobs run: both stop within seconds with one line each, no traceback, the end-of-run message
    says interrupted, and the same command then finishes the run."""
    shutil.copy(ROOT / "tests" / "data" / "my_descriptors.py", tmp_path)
    hold = tmp_path / "hold"
    hold.write_text("")
    cfg = base_config(scenes=["i_rocket", "v_coins"])
    cfg["execution"]["scenes_per_job"] = 1
    cfg["descriptors"] = {"slow": {"family": "python", "params": {"callable": "my_descriptors:waits_for_file",
                                                                    "kwargs": {"hold": str(hold)}}}}
    write_config(tmp_path, cfg)
    terminal = tmp_path / "terminal.txt"
    with open(terminal, "w") as fh:  # a file, not a pipe: a full pipe would block snakemake
        proc = subprocess.Popen(snakemake_cmd(tmp_path, "--cores", "2"), stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        logs = [tmp_path / f"results/demo/logs/descriptors/sift/slow/batch00{i}.log" for i in (0, 1)]
        deadline = time.time() + 300

        def running() -> list[str]:
            out = []
            for p in _job_processes(tmp_path, "descriptors"):
                try:
                    if p.name() != "bash":
                        out.append(" ".join(p.cmdline()))
                except psutil.Error:  # it ended between the scan and now
                    pass
            return out

        # both conditions: a process seen running need not have its log yet when the scan and the
        # shell's redirection interleave (CI once saw two processes and one log)
        while not (len(running()) >= 2 and all(log.exists() for log in logs)) and time.time() < deadline:
            assert proc.poll() is None, terminal.read_text()[-3000:]
            time.sleep(0.2)
        assert all(log.exists() for log in logs), (
            f"the two descriptor jobs never started: logs {[log.name for log in logs if log.exists()]}, "
            f"processes {running()}, terminal: {terminal.read_text()[-2000:]}")
        time.sleep(1.0)  # inside the descriptor: waiting for `hold`
        sig = signal.SIGTERM if how == "SIGTERM" else signal.SIGINT
        t0 = time.time()
        if how == "ctrl-c":
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        proc.wait(timeout=30)
        took = time.time() - t0
        out = terminal.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.5)
        left = _job_processes(tmp_path)
        for p in left:
            p.kill()
    assert not left, f"jobs still running after the interrupt: {[p.pid for p in left]}"
    assert took < 15, f"snakemake took {took:.1f} s to stop"
    assert proc.returncode != 0
    name = signal.Signals(sig).name
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-4000:]
    assert f"descbench: the run was interrupted ({name}); its running jobs were stopped" in out
    assert "failing job's own message" not in out
    for log in logs:
        assert log.read_text().strip() == (f"descbench: interrupted ({name}) while running `descriptors` of "
                                           f"{log.stem} (sift, slow); partial outputs removed")
    assert not (tmp_path / "results/demo/descriptors/sift/slow").exists()  # incomplete outputs removed
    # the same command goes on
    hold.unlink()
    out = snakemake(tmp_path, "--cores", "2")
    assert "descbench results, written by this run" in out
