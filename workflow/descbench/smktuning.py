"""Two adjustments of Snakemake's own bookkeeping, applied by ``workflow/rules/common.smk``.

Neither changes which jobs run, in which order they may run, or any output; both only cut the CPU
that Snakemake's main process spends on a run with many jobs (benchmarks/README.md, "Snakemake's
own CPU", has the measurements). Each is applied only if the Snakemake in use has exactly the
attribute it adjusts; otherwise Snakemake's own behaviour is kept and :func:`apply` says so in its
return value.

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
"""

from __future__ import annotations

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


def apply() -> dict[str, bool]:
    """Apply both adjustments to the imported Snakemake; return which ones were applied."""
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
