"""profiles/slurm on a real single-node SLURM: the tiny demo through SLURM equals a local run.

Starts munged/slurmctld/slurmd from tests/slurm/ in a scratch directory (root only; no
accounting, hence `--slurm-status-command squeue`: the README's command), runs the tiny demo of
tests/workflow/test_workflow.py (2 scenes, one per batch) with `snakemake --profile profiles/slurm` in one
copy of the project and with `snakemake --cores 2` in another, and compares every Parquet file
byte for byte.
Skips (with the install command) when SLURM, munge or the executor plugin is missing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "slurm"
pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

# Exactly the README's "Clusters" command (no accounting on the test cluster: squeue status).
SLURM_ARGS = ["--profile", "profiles/slurm", "--slurm-status-command", "squeue"]
LOCAL_ARGS = ["--cores", "2"]
TIMEOUT_S = 1200  # wall-clock limit of each snakemake run
BINARIES = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scancel", "sinfo")
INSTALL_HINT = (
    "as root on Debian/Ubuntu: apt-get update && DEBIAN_FRONTEND=noninteractive "
    "apt-get install -y slurmctld slurmd slurm-client munge; and "
    'pip install -e ".[test,cluster]" (snakemake-executor-plugin-slurm)'
)


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _skip_unless_runnable() -> None:
    missing = [b for b in BINARIES if _which(b) is None]
    if missing:
        pytest.skip(f"SLURM/munge not installed (missing {', '.join(missing)}): {INSTALL_HINT}")
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip(f"snakemake-executor-plugin-slurm not installed: {INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd must run as root (tests/slurm/start_slurm.sh)")


def _copy_project(dest: Path) -> Path:
    """The project without results, with tests/workflow/test_workflow.py's tiny demo in its config.yaml."""
    ignore = shutil.ignore_patterns(".git", "results", "data", ".snakemake", "__pycache__", ".pytest_cache", "*.egg-info")
    shutil.copytree(ROOT, dest, ignore=ignore)
    cfg = yaml.safe_load((dest / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["execution"]["scenes_per_job"] = 1  # two batches: two prep components, 4 score jobs
    (dest / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


def _run(cmd: list[str], cwd: Path, env: dict, procs: list, log: Path) -> tuple[int, str, float]:
    """Run in its own process group (so a timeout can kill it and its children); returns rc, output, wall s."""
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        try:
            rc = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
    out = log.read_text()
    if rc is None:
        pytest.fail(f"timeout after {TIMEOUT_S} s: {' '.join(cmd)}\n{out[-4000:]}")
    return rc, out, time.monotonic() - t0


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        for sig in (signal.SIGINT, signal.SIGKILL):  # SIGINT lets snakemake scancel its jobs
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=30)
                return
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                return


def parquet_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.parquet"))}


def test_demo_through_slurm_profile_equals_local_run(tmp_path):
    _skip_unless_runnable()
    # short path: the munge socket path must stay below 108 characters
    slurm_dir = Path(tempfile.mkdtemp(prefix="dbslurm-", dir="/tmp"))
    env = dict(os.environ, SLURM_TEST_DIR=str(slurm_dir), PATH=os.environ["PATH"] + ":/usr/sbin:/sbin")
    procs: list[subprocess.Popen] = []
    started = False
    try:
        started = True
        env["SLURM_CONF"] = str(slurm_dir / "slurm.conf")  # written by start_slurm.sh
        res = subprocess.run([str(HARNESS / "start_slurm.sh")], env=env, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stdout + res.stderr

        slurm_proj = _copy_project(tmp_path / "on_slurm")
        local_proj = _copy_project(tmp_path / "local")
        # each copy runs its own package (the rules' `python -m descbench` inherits PYTHONPATH)
        rc, out, wall_slurm = _run(
            [sys.executable, "-m", "snakemake", *SLURM_ARGS], slurm_proj,
            dict(env, PYTHONPATH=str(slurm_proj / "workflow")), procs, tmp_path / "slurm.log",
        )
        assert rc == 0, out[-6000:]

        # the jobs went through SLURM: submitted, run on the node and completed with exit code 0
        jobids = re.findall(r"has been submitted with SLURM jobid (\d+)", out)
        ctld_log = (slurm_dir / "log" / "slurmctld.log").read_text()
        assert len(jobids) >= 3, out[-4000:]
        for j in jobids:
            assert f"_slurm_rpc_submit_batch_job: JobId={j} " in ctld_log, j
            assert f"_job_complete: JobId={j} WEXITSTATUS 0" in ctld_log, j
        run_id = re.search(r"SLURM run ID: (\S+)", out).group(1)
        assert "group_prep" in out  # grouping is on (SLURM log directory of the prep group job)

        rc, out_local, wall_local = _run(
            [sys.executable, "-m", "snakemake", *LOCAL_ARGS], local_proj,
            dict(env, PYTHONPATH=str(local_proj / "workflow")), procs, tmp_path / "local.log",
        )
        assert rc == 0, out_local[-6000:]
        print(f"\nSLURM run {run_id}: {len(jobids)} SLURM jobs, {wall_slurm:.0f} s; local --cores 2: {wall_local:.0f} s")

        on_slurm = parquet_digests(slurm_proj / "results")
        local = parquet_digests(local_proj / "results")
        assert len(local) >= 20 and (slurm_proj / "results/demo/report/comparison.csv").exists()
        assert on_slurm == local
    finally:
        # also on failure or timeout: no snakemake, no job, no daemon of ours is left behind
        for proc in procs:
            _kill_group(proc)
        if started:
            try:  # our private cluster: every job in it is ours
                q = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30)
                if q.returncode == 0 and q.stdout.split():
                    subprocess.run(["scancel", *q.stdout.split()], env=env, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass
            subprocess.run([str(HARNESS / "stop_slurm.sh")], env=env, timeout=120)  # by recorded PIDs
        shutil.rmtree(slurm_dir, ignore_errors=True)
