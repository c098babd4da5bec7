import os
import resource
import signal
import sys
import time

_T0 = time.perf_counter()
# OpenBLAS worker threads otherwise busy-wait ~100 ms after every product, sharing the cores with
# the numba kernel that reads the product next (measured in benchmarks/README.md). Must be set
# before numpy is imported; a value already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from descbench.cli import fix_malloc_thresholds, main  # noqa: E402

fix_malloc_thresholds()  # every job, whatever it imported: the same allocation behaviour (descbench.cli)

# SIGINT / SIGTERM: one line, exit 128 + signal (descbench.cli.Interrupted); from the command's end
# on they stay ignored: the process only reports and exits (and so a pandas-free command may run
# without pandas: descbench.jobs.common.without_pandas).
code = main(restore_signals=False, job_process=True)
# The job's own exact resource use, as the last line of its log (Snakemake's `benchmark:` files
# sample the process tree and miss the end of a job's CPU time); not after an interrupt, whose
# one line is the log's last.
_ru = resource.getrusage(resource.RUSAGE_SELF)
_args = sys.argv[1:]
if _args[:1] == ["--error-fd"]:
    _args = _args[2:]
if code not in (128 + signal.SIGINT, 128 + signal.SIGTERM):
    print(
        f"descbench: {_args[0] if _args else ''} {'done' if code == 0 else f'failed (exit {code})'} "
        f"in {time.perf_counter() - _T0:.2f} s wall, "
        f"{_ru.ru_utime + _ru.ru_stime:.2f} s CPU, max RSS {_ru.ru_maxrss / 1024:.0f} MiB",
        file=sys.stderr,
    )
# Every output is written atomically and closed by now. Skipping the interpreter's teardown
# (module clean-up plus a full garbage collection of numba's and pandas' object graphs, ~0.3 s)
# is a fixed saving on every job; buffered output is flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
