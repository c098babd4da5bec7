"""Compare the report tables of two runs (e.g. a GPU run and a CPU run of the same config).

    python benchmarks/compare_tables.py RUN_A/report RUN_B/report

For every ``*.parquet`` table present in either folder: its rows and columns in each run and, when
both have it with the same shape, per numeric column the largest absolute difference, and the text
columns whose cells differ (the device in a provenance column, say). Prints one block per table
and a last line with the largest numeric difference of all; exits 1 when a table is missing from
one run or its shape differs.
"""

from __future__ import annotations

import sys
from pathlib import Path


def compare(a: Path, b: Path) -> int:
    import numpy as np
    import pandas as pd

    names = sorted({p.relative_to(a) for p in a.rglob("*.parquet")} | {p.relative_to(b) for p in b.rglob("*.parquet")})
    worst, bad = 0.0, 0
    for name in names:
        pa, pb = a / name, b / name
        if not (pa.is_file() and pb.is_file()):
            print(f"{name}: only in {'A' if pa.is_file() else 'B'}")
            bad += 1
            continue
        ta, tb = pd.read_parquet(pa), pd.read_parquet(pb)
        if ta.shape != tb.shape or list(ta.columns) != list(tb.columns):
            print(f"{name}: shape A {ta.shape} B {tb.shape}; columns equal: {list(ta.columns) == list(tb.columns)}")
            bad += 1
            continue
        diffs, texts = {}, []
        for c in ta.columns:
            x, y = ta[c], tb[c]
            if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
                xv, yv = x.to_numpy(np.float64), y.to_numpy(np.float64)
                same = (xv == yv) | (np.isnan(xv) & np.isnan(yv))  # equal infinities (failures) too
                with np.errstate(invalid="ignore"):
                    d = np.where(same, 0.0, np.abs(xv - yv))
                # NaN or an infinity on one side only: infinitely far
                m = float(np.max(np.nan_to_num(d, nan=np.inf))) if len(d) else 0.0
                if m:
                    diffs[c] = m
            elif not x.astype(str).equals(y.astype(str)):
                texts.append(f"{c} ({int((x.astype(str) != y.astype(str)).sum())} cells)")
        top = max(diffs.values(), default=0.0)
        worst = max(worst, top)
        shown = ", ".join(f"{c} {v:.3g}" for c, v in sorted(diffs.items(), key=lambda kv: -kv[1])[:6])
        print(f"{name}: {ta.shape[0]} rows; {'identical numbers' if not diffs else 'largest differences: ' + shown}"
              f"{'; text differs: ' + ', '.join(texts) if texts else ''}")
    print(f"{len(names)} tables; largest numeric difference {worst:.3g}; {bad} missing or of another shape")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
