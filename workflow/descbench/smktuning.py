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
"""

from __future__ import annotations

import signal
import threading

BENCHMARK_INTERVAL_S = 5


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
