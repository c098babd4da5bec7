"""Column names that depend on parameters, in one place, below both :mod:`descbench.io` (the
Parquet schemas) and :mod:`descbench.metrics` (which fill those columns)."""

from __future__ import annotations


def threshold_key(t) -> str:
    """Key suffix of a pixel threshold: 1 -> '1', 1.5 -> '1.5' (as in ``mma_at_1.5``)."""
    return f"{float(t):g}"
