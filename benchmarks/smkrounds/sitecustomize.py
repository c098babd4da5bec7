"""Counts Snakemake's scheduling rounds, for ``bench_workflow.py --count-rounds`` (measurement
only: the workflow never loads this).

On the ``PYTHONPATH`` of a ``snakemake`` run with ``DESCBENCH_COUNT_ROUNDS=<file.json>`` set, it
wraps, once ``snakemake.scheduling.job_scheduler`` is imported, the scheduler's methods that
mark a round (Snakemake 9.27):

* ``_finish_jobs``: called on every wake-up of the scheduling loop (a finished job or a
  re-evaluation timer); counted as ``wakeups``, with the ``threading.Timer`` threads alive then
  (``timers_alive_max``);
* ``job_selector``: called once per round that has ready jobs; counted as ``rounds``, with its
  seconds (``selection_s``) and the ready jobs it was given (``ready_sum``, ``ready_max``);
* ``_schedule_reevalutation`` (sic): each re-evaluation timer started (``timers``).

``series`` holds the same per minute of the run. The file is written at the exit of the process
whose scheduler was created (a job's interpreter that imports Snakemake writes nothing).
"""

import os
import sys

_OUT = os.environ.get("DESCBENCH_COUNT_ROUNDS")

if _OUT:
    import atexit
    import importlib.abc
    import importlib.util
    import json
    import resource
    import threading
    import time

    _T0 = time.time()
    _STATE = {"wakeups": 0, "rounds": 0, "selection_s": 0.0, "ready_sum": 0, "ready_max": 0, "timers": 0,
              "timers_alive_max": 0, "series": {}}
    _CREATED = []

    def _minute() -> dict:
        key = str(int((time.time() - _T0) // 60))
        return _STATE["series"].setdefault(key, {"wakeups": 0, "rounds": 0, "selection_s": 0.0, "ready_sum": 0,
                                                 "timers_alive_max": 0})

    def _patch(module) -> None:
        cls = module.JobScheduler
        init, finish, select, reevaluate = cls.__init__, cls._finish_jobs, cls.job_selector, cls._schedule_reevalutation

        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            if not _CREATED:
                _CREATED.append(True)
                atexit.register(_dump)

        def _finish_jobs(self):
            alive = sum(isinstance(t, threading.Timer) for t in threading.enumerate())
            m = _minute()
            _STATE["wakeups"] += 1
            m["wakeups"] += 1
            _STATE["timers_alive_max"] = max(_STATE["timers_alive_max"], alive)
            m["timers_alive_max"] = max(m["timers_alive_max"], alive)
            return finish(self)

        def job_selector(self, jobs):
            start = time.perf_counter()
            selected = select(self, jobs)
            seconds, m = time.perf_counter() - start, _minute()
            for d in (_STATE, m):
                d["rounds"] += 1
                d["selection_s"] += seconds
                d["ready_sum"] += len(jobs)
            _STATE["ready_max"] = max(_STATE["ready_max"], len(jobs))
            return selected

        def _schedule_reevalutation(self, delay):
            _STATE["timers"] += 1
            return reevaluate(self, delay)

        cls.__init__, cls._finish_jobs, cls.job_selector = __init__, _finish_jobs, job_selector
        cls._schedule_reevalutation = _schedule_reevalutation

    def _dump() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _STATE["own_cpu_s"] = usage.ru_utime + usage.ru_stime
        _STATE["elapsed_s"] = time.time() - _T0
        with open(_OUT, "w") as fh:
            json.dump(_STATE, fh, indent=1)

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "snakemake.scheduling.job_scheduler":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run_module = spec.loader.exec_module

            def exec_module(module):
                run_module(module)
                _patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Finder())
