import os
import sys

# OpenBLAS worker threads otherwise busy-wait ~100 ms after every product, sharing the cores with
# the numba kernel that reads the product next (measured in benchmarks/README.md). Must be set
# before numpy is imported; a value already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from descbench.cli import main  # noqa: E402

sys.exit(main())
