"""Build ``dlt_kornia.npz``: kornia's own ``find_homography_dlt`` (the DLT glue-factory's
``eval/utils.py:eval_homography_dlt`` calls) on a few float64 cases, for
tests/descbench/estimators/test_homography.py to compare descbench's implementation with.

Run with a kornia source tree on the path, e.g. kornia v0.8.3 (its find_homography_dlt is the one of
v0.6.8 to its main branch):

    git -C <kornia repo> archive v0.8.3 kornia | tar x -C /tmp/k083
    PYTHONPATH=/tmp/k083 python tests/data/gluefactory/make_dlt_fixture.py

Each case ``<name>`` stores ``<name>_src``, ``<name>_dst`` [M, 2], ``<name>_weights`` [M] (absent:
unweighted), ``<name>_solver`` and ``<name>_H`` (kornia's 3x3 result).
"""

from pathlib import Path

import numpy as np
import torch
import kornia
from kornia.geometry.homography import find_homography_dlt

OUT = Path(__file__).with_name("dlt_kornia.npz")


def project(H, p):
    q = np.c_[p, np.ones(len(p))] @ H.T
    return q[:, :2] / q[:, 2:]


def main():
    rng = np.random.default_rng(20261127)
    H = np.array([[0.9, 0.12, 35.0], [-0.08, 1.1, -12.0], [2e-4, -1.5e-4, 1.0]])
    cases = {}
    src = rng.uniform(0, 640, (60, 2))
    dst = project(H, src) + rng.normal(0, 1.0, (60, 2))
    w = rng.uniform(0.05, 1.0, 60)
    cases["noisy_weighted"] = (src, dst, w, "lu")
    cases["noisy_unweighted"] = (src, dst, None, "lu")
    cases["noisy_weighted_svd"] = (src, dst, w, "svd")
    out = rng.random(60) < 0.3
    dst_o = dst.copy()
    dst_o[out] = rng.uniform(0, 640, (int(out.sum()), 2))
    cases["outliers_zero_weight"] = (src, dst_o, np.where(out, 0.0, w), "lu")
    cases["outliers_weighted"] = (src, dst_o, w, "lu")
    src4 = rng.uniform(0, 480, (4, 2))
    cases["exact_four"] = (src4, project(H, src4), np.ones(4), "lu")
    data = {"kornia_version": np.array(kornia.__version__)}
    for name, (s, d, wt, solver) in cases.items():
        t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))[None]
        Hk = find_homography_dlt(t(s), t(d), None if wt is None else t(wt), solver=solver)[0].numpy()
        data[f"{name}_src"], data[f"{name}_dst"], data[f"{name}_solver"], data[f"{name}_H"] = s, d, np.array(solver), Hk
        if wt is not None:
            data[f"{name}_weights"] = wt
    np.savez_compressed(OUT, **data)
    print(f"wrote {OUT} ({len(cases)} cases, kornia {kornia.__version__})")


if __name__ == "__main__":
    main()
