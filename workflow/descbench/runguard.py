"""One run at a time per results folder, and no job of a killed run left writing into it.

Which jobs rerun is Snakemake's own decision, by content (:mod:`descbench.specfiles`); what
Snakemake cannot know is another run on the same results folder ``<results_dir>/<experiment>/``
(a second terminal, a second working directory) or the jobs a killed run left running. This
module provides what the workflow (workflow/rules/common.smk) uses against both:

* a lock file ``<results>/descbench.lock`` (pid, host, working directory, command), taken when a
  run starts jobs and released when it ends (:func:`acquire`, :func:`release`); a lock whose
  process is gone (same host) is taken over with a warning. ``<results>/.descbench_runs`` names
  the last run that took it; it also serialises the lock's updates (``fcntl.flock``).
* job records ``<results>/.descbench_jobs/<host>.<pid>.json``, written by each job of a run
  (:func:`descbench.jobrecord.register_job`, through the environment variable ``JOBS_ENV`` that
  the run sets),
  removed when the job ends. A run that takes over a dead run's lock first stops the jobs that
  run left behind (:func:`stop_stale_jobs`: SIGTERM, which makes a job remove its partial outputs,
  then SIGKILL after a grace period), so that they cannot write into outputs the new run redoes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import socket
import time
import uuid
from pathlib import Path

from descbench.jobrecord import JOBS_ENV, JOBS_NAME, jobs_env_value  # noqa: F401  (the workflow's names)

LOCK_NAME = "descbench.lock"
RUNS_NAME = ".descbench_runs"
# How long a stale job gets to exit after SIGTERM (it removes its partial files) before SIGKILL.
STALE_GRACE_S = 20.0


# ------------------------------------------------------------------------------------- the lock


class ResultsLocked(Exception):
    """Another live run holds the results folder's lock."""


def _host() -> str:
    return socket.gethostname()


def _pid_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # no psutil, no such process, no permission
        return None


def holder_info(workdir: Path | str, argv: list[str]) -> dict:
    """What the lock file and the runs file say about this run."""
    pid = os.getpid()
    return {"run_id": uuid.uuid4().hex, "pid": pid, "pid_started": _pid_started(pid), "host": _host(),
            "workdir": str(Path(workdir).resolve()), "command": " ".join(map(shlex.quote, ["snakemake", *argv[1:]])),
            "started": time.strftime("%Y-%m-%d %H:%M:%S")}


def alive(info: dict) -> bool | None:
    """Whether the lock's run is still going: True, False (its process is gone), or None (it
    ran on another host: unknown)."""
    if info.get("host") != _host():
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    started = info.get("pid_started")
    now = _pid_started(pid)
    if started is not None and now is not None and abs(now - started) > 1.0:
        return False  # the pid was reused by another process
    try:
        import psutil

        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return False  # ended, not yet reaped by its parent
    except Exception:  # no psutil, gone meanwhile, no permission
        pass
    return True


def describe(info: dict) -> str:
    return (f"pid {info.get('pid')} on {info.get('host')}, working directory {info.get('workdir')}, started "
            f"{info.get('started')}: {info.get('command')}")


@contextlib.contextmanager
def _guarded(res: Path, exclusive: bool):
    """The runs file, opened and flock-ed: every update of the lock happens under it."""
    res.mkdir(parents=True, exist_ok=True)
    with open(res / RUNS_NAME, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_lock(res: Path | str) -> dict | None:
    """The lock file's content (None: no lock, or an unreadable one)."""
    path = Path(res) / LOCK_NAME
    if not path.exists():
        return None
    return _read_json(path) or {"pid": None, "host": "?", "workdir": "?", "started": "?",
                                "command": f"(unreadable lock file {path})"}


def last_run(res: Path | str) -> dict | None:
    """The last run that took the folder's lock (``holder_info``), or None."""
    res = Path(res)
    if not (res / RUNS_NAME).exists():
        return None
    with _guarded(res, exclusive=False) as fh:
        fh.seek(0)
        try:
            value = json.loads(fh.read() or "null")
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def locked_message(res: Path | str, other: dict) -> str:
    lock = Path(res) / LOCK_NAME
    where = ("that process is still running" if alive(other) else
             f"it ran on another host ({other.get('host')}); whether it still runs cannot be checked from here")
    return (f"descbench: another run is writing to {res}: {describe(other)}; {where}. Two runs writing one "
            f"results folder mix their outputs. Wait for it to finish, or give this run another experiment name "
            f"(`experiment: <name>` in the config, or experiment=<name> among the --config values). If that run is "
            f"gone, delete {lock}.")


def acquire(res: Path | str, me: dict, last_run_id: str | None) -> str | None:
    """Take the folder's lock for ``me`` (``holder_info``). ``last_run_id``: the run id of
    ``last_run`` when this run read the folder's state (at its start); a different one now means
    another run wrote to the folder in between, and raises ResultsLocked (rerun to see its
    results). Returns a warning when a dead run's lock was taken over."""
    res = Path(res)
    with _guarded(res, exclusive=True) as fh:
        warning = None
        other = read_lock(res)
        if other is not None and not (other.get("pid") == me["pid"] and other.get("host") == me["host"]):
            if alive(other) is not False:
                raise ResultsLocked(locked_message(res, other))
            stopped = stop_stale_jobs(res, other)
            warning = (f"descbench: took over the lock of a run that ended without releasing it ({describe(other)})"
                       + (f"; stopped {stopped} job(s) it had left running in {res}" if stopped else "")
                       + "; this run goes on")
        fh.seek(0)
        try:
            previous = json.loads(fh.read() or "null")
        except ValueError:
            previous = None
        now_id = previous.get("run_id") if isinstance(previous, dict) else None
        if now_id != last_run_id:
            raise ResultsLocked(
                f"descbench: another run wrote to {res} while this one was starting"
                + (f" ({describe(previous)})" if isinstance(previous, dict) else "")
                + "; what this run decided to (not) recompute is out of date. Run the same command again.")
        _write_json(res / LOCK_NAME, me)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(me, indent=1, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
        return warning


def release(res: Path | str, me: dict) -> bool:
    """Remove the lock if ``me`` holds it; True if it did."""
    res = Path(res)
    if not (res / LOCK_NAME).exists():
        return False
    with _guarded(res, exclusive=True):
        other = read_lock(res)
        if other is None or other.get("run_id") != me["run_id"]:
            return False
        (res / LOCK_NAME).unlink(missing_ok=True)
        return True


# ------------------------------------------------------------------------------------ job records


def stop_stale_jobs(res: Path | str, dead_run: dict, grace_s: float = STALE_GRACE_S) -> int:
    """Stop the jobs that the run ``dead_run`` (its lock's content) left running on this host:
    SIGTERM, then SIGKILL after ``grace_s`` seconds; wait until they are gone. Returns how many
    were running. Records of jobs that already ended are removed."""
    folder = Path(res) / JOBS_NAME
    if not folder.is_dir():
        return 0
    running = []
    for record in sorted(folder.glob("*.json")):
        info = _read_json(record)
        if not info or info.get("host") != _host():
            continue
        try:
            # the job wrote its record after it started: a process started later reuses its pid
            info["pid_started"] = min(_pid_started(info["pid"]) or 0.0, record.stat().st_mtime + 1.0)
        except (OSError, KeyError, TypeError):
            continue
        if info.get("run_id") == dead_run.get("run_id") and alive(info):
            running.append((record, info))
        elif not alive(info):
            record.unlink(missing_ok=True)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for _record, info in running:
            with contextlib.suppress(OSError):
                os.kill(info["pid"], sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 10.0)
        while time.monotonic() < deadline and any(alive(info) for _r, info in running):
            time.sleep(0.1)
        if not any(alive(info) for _r, info in running):
            break
    for record, _info in running:
        record.unlink(missing_ok=True)
    return len(running)
