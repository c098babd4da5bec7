"""Each job of a workflow run records itself, so that a later run can stop it if this run is killed.

A run sets :data:`JOBS_ENV` for its jobs (``workflow/rules/common.smk``, when it takes the
results folder's lock); each ``python -m descbench`` job then writes
``<results>/.descbench_jobs/<host>.<pid>.json`` (:func:`register_job`) and removes it when it
ends. :func:`descbench.runguard.stop_stale_jobs` reads these records. Standard library only: the
jobs' environments have nothing of Snakemake's.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from descbench.fileops import atomic_path

JOBS_NAME = ".descbench_jobs"
# Set by the run for its jobs: where they record themselves and which run they belong to.
JOBS_ENV = "DESCBENCH_RUN_JOBS"


def jobs_env_value(res: Path | str, holder: dict) -> str:
    """The value of :data:`JOBS_ENV` for the jobs of the run ``holder`` (its lock's content) on the
    results folder ``res``."""
    return json.dumps({"dir": str(Path(res).resolve() / JOBS_NAME), "run_id": holder["run_id"]})


def register_job(environ: dict | None = None) -> Path | None:
    """Record this process as a job of the run named in :data:`JOBS_ENV` (nothing when it is not
    set: a command run by hand, or a cluster job, which runs on another host). Returns the record,
    which the caller removes when the job ends."""
    raw = (os.environ if environ is None else environ).get(JOBS_ENV)
    if not raw:
        return None
    try:
        where = json.loads(raw)
        folder, run_id = Path(where["dir"]), str(where["run_id"])
    except (ValueError, KeyError, TypeError):
        return None
    pid = os.getpid()
    record = folder / f"{socket.gethostname()}.{pid}.json"
    try:
        with atomic_path(record) as tmp:
            tmp.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "run_id": run_id}))
    except OSError:
        return None  # a read-only or full disk: the job itself says so when it writes
    return record
