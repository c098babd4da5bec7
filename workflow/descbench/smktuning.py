"""Adjustments of Snakemake's own behaviour, applied by ``workflow/rules/common.smk``.

The first two (:func:`apply`) change neither which jobs run, in which order they may run, nor any
output; both only cut the CPU that Snakemake's main process spends on a run with many jobs
(benchmarks/README.md, "Snakemake's own CPU", has the measurements). The third
(:func:`stop_jobs_on_interrupt`) makes Ctrl-C and SIGTERM stop the run's jobs. Each is applied
only if the Snakemake in use has exactly the attribute it adjusts; otherwise Snakemake's own
behaviour is kept and the function says so in its return value.

1. ``benchmark:`` sampling every 5 s instead of 0.5 s (``snakemake.benchmark.BENCHMARK_INTERVAL_SHORT``).
   Snakemake samples each job's process tree with psutil ``memory_full_info`` (it parses
   ``/proc/<pid>/smaps_rollup``) in its own process: 45 % of its CPU on a 48-scene run, for jobs of
   10-60 s. The wall time ``s`` of a benchmark file is exact either way; ``max_rss`` and
   ``cpu_time`` are sampled values in any case.

2. At most one pending re-evaluation timer (``JobScheduler._schedule_reevalutation``, sic).
   Snakemake 9 starts a ``threading.Timer`` of ``--max-jobs-per-timespan``'s timespan (1 s) after
   every scheduling round while jobs are ready, and every timer that fires runs another round,
   which starts another timer. Each finished job starts a round, so every finished job adds a
   timer chain that lives as long as any job is ready: in a 20-descriptor sweep, hundreds of
   threads, hundreds of rounds per second over hundreds of ready jobs. A re-evaluation only has
   to happen *some time* within the timespan after it was asked for (it lets the job-rate limiter
   release jobs; a finished job triggers its own round anyway), so one pending timer serves every
   request made while it waits. The timer is a daemon thread, so Snakemake's exit no longer waits
   for timers left over from the last rounds.

3. Interrupts stop the run's jobs (:func:`stop_local_jobs`). Snakemake 9's local executor, on
   SIGINT, only stops scheduling and then waits for its running jobs to finish (a job may take
   minutes), and on SIGTERM ("graceful") does the same on purpose. Here both signals are passed on
   to every running local job (the processes under each job's shell: ``python -m descbench``
   exits at once with one line, removing its partial files) and then end the run as Ctrl-C does
   (SIGTERM included: remote executors cancel their jobs then). A second signal kills the jobs
   (SIGKILL). :func:`interrupted` tells the end-of-run message (``onerror``) that the run was
   interrupted, not failed. A SIGINT that the shell ignores (a background ``&`` job) stays ignored.
   Unlike the two above, this changes what a signal does, never what a finished run computes.

All three reach into Snakemake's internals (a private method among them), so :func:`configure`,
which the workflow calls, applies them only on the Snakemake versions they were tested on
(:data:`TESTED_SNAKEMAKE`); on another version it applies none and says so in one warning line.
``DESCBENCH_SMK_TUNING=0`` turns all three off (Snakemake's own behaviour), ``=force`` applies them
on an untested version too (each still only where Snakemake has exactly the attribute it adjusts).
What was applied goes into the report's provenance (``report/provenance.json``,
``params.snakemake``).

Two more things the workflow needs from Snakemake live here, both pure functions:
:func:`job_command`, how every rule starts ``python -m descbench`` (the interpreter that runs
Snakemake, or a conda env's ``python``), and :func:`merged_entries` / :func:`merge_message`, the
start-of-run line about Snakemake merging ``config.yaml`` into a ``--configfile``.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

BENCHMARK_INTERVAL_S = 5

# The Snakemake versions the adjustments were tested on: [first, last) (tests/test_smktuning.py and
# the end-to-end tests run on the installed 9.27.1). A new Snakemake gets Snakemake's own behaviour
# until someone reruns those tests on it and moves the bound.
TESTED_SNAKEMAKE = ("9.27.1", "9.28")
TUNING_ENV = "DESCBENCH_SMK_TUNING"


def _coalesced_reevaluation(scheduler, delay) -> None:
    """Replacement of ``JobScheduler._schedule_reevalutation``: one pending timer at most.

    Requests made while a timer is pending are served by that timer (it fires no later than the
    request's own delay would have, since delays are the same timespan).
    """
    lock = scheduler.__dict__.setdefault("_descbench_reeval_lock", threading.Lock())
    with lock:
        if scheduler.__dict__.get("_descbench_reeval_pending"):
            return
        scheduler._descbench_reeval_pending = True

    def fire():
        with lock:
            scheduler._descbench_reeval_pending = False
        scheduler._open_jobs.release()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()


_INTERRUPT: dict[str, str | None] = {"signal": None}


def interrupted() -> str | None:
    """The name of the signal (SIGINT, SIGTERM) that interrupted this Snakemake run, or None."""
    return _INTERRUPT["signal"]


def stop_local_jobs(signum: int) -> int:
    """Send ``signum`` to the processes of every job this Snakemake process runs locally; return
    how many jobs were signalled.

    A job is ``bash -c '...; python -m descbench ...'`` (``snakemake.shell.shell._processes``):
    its descendants get the signal, not the shell itself, which a SIGTERM would end at once (the
    job would look finished to Snakemake while descbench is still removing its partial files);
    the shell then exits with descbench's status. A shell without a child yet gets the signal.
    """
    import psutil
    from snakemake.shell import shell

    n = 0
    for proc in list(dict(getattr(shell, "_processes", {})).values()):
        try:
            root = psutil.Process(proc.pid)
            targets = root.children(recursive=True) or [root]
        except psutil.Error:
            continue
        for p in targets:
            try:
                p.send_signal(signum)
            except psutil.Error:
                pass
        n += 1
    return n


def _on_interrupt(signum, frame=None) -> None:
    """SIGINT / SIGTERM in Snakemake's main process: stop the local jobs, end the run like Ctrl-C."""
    if _INTERRUPT["signal"] is not None:  # a second signal: the jobs did not stop, kill them
        stop_local_jobs(signal.SIGKILL)
        return
    _INTERRUPT["signal"] = signal.Signals(signum).name
    stop_local_jobs(signum)
    raise KeyboardInterrupt


def _exit_stopping_jobs(scheduler, *args) -> None:
    """Replacement of ``JobScheduler.exit_gracefully`` (Snakemake's SIGTERM handler)."""
    _on_interrupt(signal.SIGTERM)


def stop_jobs_on_interrupt() -> bool:
    """Adjustment 3: SIGINT and SIGTERM stop the run's local jobs. Installs the SIGINT handler (in
    the main thread, unless SIGINT is ignored or already handled by someone else) and replaces
    Snakemake's SIGTERM handler; returns whether this Snakemake allowed it."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
        from snakemake.shell import shell
    except ImportError:  # pragma: no cover - another Snakemake layout: keep its behaviour
        return False
    if not hasattr(JobScheduler, "exit_gracefully") or not isinstance(getattr(shell, "_processes", None), dict):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    JobScheduler.exit_gracefully = _exit_stopping_jobs  # the scheduler installs it as its SIGTERM handler
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _on_interrupt):
        signal.signal(signal.SIGINT, _on_interrupt)
    return True


def apply() -> dict[str, bool]:
    """Apply adjustments 1 and 2 to the imported Snakemake; return which ones were applied."""
    applied = {"benchmark_interval": False, "single_reevaluation_timer": False}
    try:
        import snakemake.benchmark as smk_benchmark
    except ImportError:  # pragma: no cover - Snakemake without this module: keep its default
        smk_benchmark = None
    if smk_benchmark is not None and hasattr(smk_benchmark, "BENCHMARK_INTERVAL_SHORT"):
        if smk_benchmark.BENCHMARK_INTERVAL_SHORT < BENCHMARK_INTERVAL_S:
            smk_benchmark.BENCHMARK_INTERVAL_SHORT = BENCHMARK_INTERVAL_S
        applied["benchmark_interval"] = True
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:  # pragma: no cover - another Snakemake layout: keep its scheduler as is
        JobScheduler = None
    if JobScheduler is not None and hasattr(JobScheduler, "_schedule_reevalutation"):
        JobScheduler._schedule_reevalutation = _coalesced_reevaluation
        applied["single_reevaluation_timer"] = True
    return applied


def tested_range() -> str:
    """:data:`TESTED_SNAKEMAKE` as a version specifier, ``>=9.27.1,<9.28``."""
    return f">={TESTED_SNAKEMAKE[0]},<{TESTED_SNAKEMAKE[1]}"


def is_tested(version: str) -> bool:
    """Whether ``version`` lies in :data:`TESTED_SNAKEMAKE` (a pre-release of the first does not)."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return Version(TESTED_SNAKEMAKE[0]) <= v < Version(TESTED_SNAKEMAKE[1])


def tuning_mode(environ: Mapping[str, str] | None = None) -> str:
    """``DESCBENCH_SMK_TUNING``: ``on`` (unset, ``1``, ``on``: the tested versions only), ``off``
    (``0``, ``off``) or ``force`` (any version). Another value is an error naming the variable."""
    raw = (os.environ if environ is None else environ).get(TUNING_ENV)
    value = "on" if raw is None else raw.strip().lower()
    modes = {"": "on", "1": "on", "on": "on", "0": "off", "off": "off", "force": "force"}
    if value not in modes:
        raise ValueError(f"environment variable {TUNING_ENV}={raw!r}: expected 0 (Snakemake's own behaviour), "
                         "1 (default: descbench's adjustments on the tested Snakemake versions) or force")
    return modes[value]


def configure(version: str | None = None, environ: Mapping[str, str] | None = None) -> dict:
    """Apply adjustments 1-3 if this Snakemake ``version`` (default: the imported one) is a tested
    one and ``DESCBENCH_SMK_TUNING`` allows it; return the record for the provenance:
    ``{"version", "tested", "mode", "applied": {name: bool}, "note"}``, where ``note`` is the
    one warning line to print (None when everything was applied as tested)."""
    if version is None:
        from snakemake import __version__ as version
    mode = tuning_mode(environ)
    applied = {"benchmark_interval": False, "single_reevaluation_timer": False, "stop_jobs_on_interrupt": False}
    note = None
    if mode == "off":
        note = (f"descbench: {TUNING_ENV}=0: Snakemake's own scheduler, benchmark sampling and interrupt "
                "handling (descbench.smktuning not applied)")
    elif mode == "on" and not is_tested(version):
        note = (f"descbench: Snakemake {version} is not among the versions descbench.smktuning was tested on "
                f"({tested_range()}): not applied (Snakemake's own behaviour: Snakemake's process may use more CPU, "
                f"Ctrl-C waits for running jobs); {TUNING_ENV}=force applies it anyway")
    else:
        applied.update(apply())
        applied["stop_jobs_on_interrupt"] = stop_jobs_on_interrupt()
        if not all(applied.values()):
            missing = ", ".join(k for k, v in applied.items() if not v)
            note = (f"descbench: this Snakemake ({version}) lacks what descbench.smktuning adjusts for {missing}: "
                    "Snakemake's own behaviour there (more CPU in Snakemake's process, or Ctrl-C waits for running jobs)")
    return {"version": version, "tested": tested_range(), "mode": mode, "applied": applied, "note": note}


# ----------------------------------------------------------------------------- the jobs' interpreter


def job_command(deployment_methods: Iterable, executable: str, workflow_dir: Path | str, in_container: bool = False) -> str:
    """How every rule starts descbench (``{DESCBENCH} <command> ...`` in workflow/rules/*.smk).

    Locally and on a cluster's nodes: the interpreter that runs Snakemake (``sys.executable``),
    quoted, so that ``venv/bin/snakemake`` works without activating the venv (a bare ``python``
    would be whatever ``python`` is first on PATH). A cluster job runs ``<sys.executable> -m
    snakemake`` on the node (the executor plugins do, on a shared filesystem), so the same absolute
    path is used there.

    Under ``--software-deployment-method conda`` (``deployment_methods`` holds CONDA; or
    APPTAINER where the rules run in a container, ``in_container``), a job runs in its env, whose ``python`` has
    the dependencies but not descbench: the package is reached by ``workflow_dir`` (the checkout's
    ``workflow/``, absolute) on PYTHONPATH, a path that does not depend on where Snakemake copies
    the env file. A PYTHONPATH the job has is kept after it (Snakemake clears an inherited one in
    conda jobs unless ``--conda-not-block-search-path-envvars``).
    """
    names = {getattr(m, "name", str(m)).upper() for m in deployment_methods}
    if "CONDA" in names or ("APPTAINER" in names and in_container):
        path = shlex.quote(str(Path(workflow_dir).resolve()))
        return f"PYTHONPATH={path}${{PYTHONPATH:+:$PYTHONPATH}} python -m descbench"
    return f"{shlex.quote(executable)} -m descbench"


# ----------------------------------------------------------------------------- config merging

# Sections whose entries are names (a set, a descriptor, a sweep): Snakemake merges mappings key by
# key, so config.yaml's entries join those of a --configfile, unlike a list, which is replaced.
NAMED_SECTIONS = ("keypoint_sets", "descriptors", "sweeps")


def merged_entries(workflow_config: Mapping, command_line_config: Mapping) -> dict[str, list[str]]:
    """The entries of ``workflow_config`` (config.yaml) that Snakemake's merge adds to a named
    section that ``command_line_config`` (the --configfile files and --config, merged) defines too:
    ``{section: [names]}``; sections the command line leaves out are config.yaml's as intended."""
    out = {}
    for section in NAMED_SECTIONS:
        base, mine = workflow_config.get(section), command_line_config.get(section)
        if isinstance(base, Mapping) and isinstance(mine, Mapping):
            extra = [name for name in base if name not in mine]
            if extra:
                out[section] = extra
    return out


def merge_message(merged: Mapping[str, list[str]], configfiles: Iterable) -> str | None:
    """The one start-of-run line about ``merged`` (:func:`merged_entries`), or None."""
    configfiles = list(configfiles)
    if not merged or not configfiles:
        return None  # --config alone: merging into config.yaml is what it is for
    what = "; ".join(f"{section} {', '.join(names)}" for section, names in merged.items())
    files = " ".join(f"--configfile {f}" for f in configfiles)
    return (f"descbench: Snakemake merges {files} into config.yaml, so this run also has config.yaml's {what}; "
            "to run the file's entries alone add --replace-workflow-config")
