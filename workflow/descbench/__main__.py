import os
import sys

# OpenBLAS worker threads otherwise busy-wait ~100 ms after every product, sharing the cores with
# the numba kernel that reads the product next (measured in benchmarks/README.md). Must be set
# before numpy is imported; a value already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from descbench.cli import main  # noqa: E402

code = main()
# Every output is written atomically and closed by now. Skipping the interpreter's teardown
# (module clean-up plus a full garbage collection of numba's and pandas' object graphs, ~0.3 s)
# is a fixed saving on every job; buffered output is flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
