"""Uncertainty of dataset-level metrics: seeded bootstrap over scenes, and paired comparisons.

Scenes are the unit of resampling (queries within a scene share an image pair and are not
independent). A metric is given per scene as a numerator and a denominator, and its dataset
value is ``sum(num) / sum(den)`` over the scenes:

- micro averages: ``num`` = the scene's sum (e.g. of per-query AP), ``den`` = its count (queries
  with R = 1): ``true_map_micro``;
- macro averages: ``num`` = the scene's value, ``den`` = 1: ``true_map_macro_by_scene``.

:func:`two_stage_ci` (opt-in, ``statistics.resample_queries``) also resamples the queries
inside each drawn scene, for the one metric that is a mean over queries, ``true_map_micro``. It
answers "what if other scenes *and other keypoints in them* had been drawn": its interval is
wider than the scene bootstrap's, because the within-scene variance is then counted twice (once
through the scene totals, once through the redraw; Davison & Hinkley 1997, sec. 3.8; Ren et al.
2010 recommend resampling the top level only). The scene bootstrap stays the default; the other
metrics are per pair or per scene list (5 pairs per scene are too few to resample).

:func:`bootstrap_ci`: the percentile interval of the metric over ``resamples`` draws of
``n_scenes`` scenes with replacement (Efron's percentile bootstrap; level 0.95 -> the 2.5 % and
97.5 % quantiles, numpy's linear interpolation). A draw whose denominator is 0 is left out.

:func:`paired_comparison` of descriptors A and B on the same keypoint set and scenes:

- the difference ``d = metric(A) - metric(B)``;
- its percentile interval from the paired bootstrap (the same scene draws for A and B);
- a two-sided p-value from the paired permutation test: under H0 (A and B are exchangeable
  within each scene) each scene's (A, B) values are swapped with probability 1/2. With
  ``2^n_scenes <= resamples`` every swap pattern is enumerated once (exact test:
  ``p = #{|d*| >= |d|} / 2^n``; 8 scenes: p >= 2/256); otherwise ``resamples`` random patterns
  (scene i of pattern b swapped where ``numpy.random.default_rng(seed + 1).random((resamples,
  n_scenes))[b, i] < 0.5``), ``p = (1 + #{|d*| >= |d|}) / (1 + resamples)`` (Phipson & Smyth
  2010: never 0).

Every draw comes from ``numpy.random.default_rng(seed)``, so the same inputs and seed give the
same intervals and p-values on every platform. The coverage of the intervals and the size of the
test are checked by simulation in ``tests/descbench/metrics/test_bootstrap.py``.

Why not ``scipy.stats.bootstrap`` / ``permutation_test``: where they compute the same quantity
they give the same numbers, and ``tests/descbench/metrics/test_bootstrap.py`` checks it (the
percentile interval of :func:`bootstrap_ci` and of :func:`paired_comparison` equal
``bootstrap(method='percentile')`` seeded with the same generator, value for value; the exact
permutation p-value equals ``permutation_test(permutation_type='samples')``'s exact p-value).
The code here stays because (1) one matrix of scene draws (:func:`scene_draws`) is shared by the
interval of each descriptor, the paired difference and the first stage of :func:`two_stage_ci`,
whose second stage (queries within drawn scenes) scipy's one-level bootstrap cannot do; (2) a
draw whose denominator is 0 is left out here, where scipy returns a NaN interval; (3) the
sampled permutation test (``2^n > resamples``) draws its swap patterns from our own seeded stream
and counts ``|d*| >= |d|`` (scipy draws through its own generator calls, which may change between
versions, and its two-sided p is ``2 min(P(T* <= t), P(T* >= t))``: a different estimate of the
same p), so the report's Parquet files stay bit-identical across scipy versions; (4) a ratio
metric is recomputed from per-scene sums over a 2-D index array in one numpy call, which scipy's
statistic interface reaches only through an index-array trick.

:func:`adjust_p_values` corrects the paired tests' p-values for multiple comparisons
(:func:`holm_adjust`, :func:`bh_adjust`); the report applies it once over all rows of the
significance table (``descbench.report.table.significance_table`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from descbench.params import ConfigParams, config_field


@dataclass(frozen=True)
class BootstrapParams(ConfigParams):
    """The ``statistics`` section's resampling settings (defaults: the schema's;
    ``BootstrapParams.from_config(statistics)``)."""

    resamples: int = config_field("statistics.bootstrap_resamples", int)
    level: float = config_field("statistics.ci_level", float)
    seed: int = config_field("statistics.seed", int)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where den > 0, NaN where den = 0 (a draw without data); nothing is divided by 0."""
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def _check(num, den) -> tuple[np.ndarray, np.ndarray]:
    num = np.asarray(num, dtype=np.float64).ravel()
    den = np.asarray(den, dtype=np.float64).ravel()
    if num.shape != den.shape:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape} differ in length")
    if not (np.all(np.isfinite(num)) and np.all(np.isfinite(den)) and np.all(den >= 0)):
        raise ValueError("per-scene numerators/denominators must be finite and denominators >= 0")
    return num, den


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    lo, hi = np.percentile(v, [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


def scene_draws(n_scenes: int, params: BootstrapParams) -> np.ndarray:
    """int [resamples, n_scenes]: scene indices drawn with replacement."""
    rng = np.random.default_rng(params.seed)
    return rng.integers(0, n_scenes, size=(params.resamples, n_scenes))


def bootstrap_ci(num, den, params: BootstrapParams = BootstrapParams()) -> tuple[float, float]:
    """Percentile bootstrap interval over scenes of ``sum(num) / sum(den)`` (NaN without scenes)."""
    num, den = _check(num, den)
    if num.size == 0 or den.sum() == 0:
        return float("nan"), float("nan")
    idx = scene_draws(num.size, params)
    return _percentiles(_ratio(num[idx].sum(axis=1), den[idx].sum(axis=1)), params.level)


def two_stage_ci(values_per_scene, params: BootstrapParams = BootstrapParams()) -> tuple[float, float]:
    """Percentile interval of the micro mean ``sum(values) / count(values)`` by a two-stage
    bootstrap: draw scenes with replacement (the draws of :func:`scene_draws`, as in
    :func:`bootstrap_ci`), then, in every drawn scene, its n_s values with replacement (numba
    Mersenne Twister seeded with ``seed + 2``). ``values_per_scene``: one 1-D array of finite
    values per scene (e.g. the APs of its queries with R = 1; a scene may have none)."""
    vals = [np.asarray(v, dtype=np.float64).ravel() for v in values_per_scene]
    if any(not np.all(np.isfinite(v)) for v in vals):
        raise ValueError("per-query values must be finite (leave out queries without a value)")
    counts = np.array([v.size for v in vals], dtype=np.int64)
    if counts.sum() == 0:
        return float("nan"), float("nan")
    from descbench.metrics.kernels import two_stage_sums  # numba: imported only when used

    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    num, den = two_stage_sums(np.concatenate(vals), offsets, scene_draws(len(vals), params), params.seed + 2)
    return _percentiles(_ratio(num, den), params.level)


def paired_comparison(num_a, den_a, num_b, den_b, params: BootstrapParams = BootstrapParams()) -> dict:
    """A - B on the same scenes (row i of each array = scene i): difference, bootstrap interval,
    permutation p-value (module docstring)."""
    num_a, den_a = _check(num_a, den_a)
    num_b, den_b = _check(num_b, den_b)
    if num_a.shape != num_b.shape:
        raise ValueError("A and B must be given on the same scenes")
    n = num_a.size
    out = {"n_scenes": n, "resamples": params.resamples, "level": params.level, "seed": params.seed}
    if n == 0 or den_a.sum() == 0 or den_b.sum() == 0:
        return {**out, "value_a": np.nan, "value_b": np.nan, "difference": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                "p_value": np.nan}
    va, vb = num_a.sum() / den_a.sum(), num_b.sum() / den_b.sum()
    d = va - vb
    idx = scene_draws(n, params)
    boot = _ratio(num_a[idx].sum(1), den_a[idx].sum(1)) - _ratio(num_b[idx].sum(1), den_b[idx].sum(1))
    lo, hi = _percentiles(boot, params.level)
    exact = 2 ** n <= params.resamples
    if exact:  # every swap pattern once (the identity included): the exact permutation p-value
        swap = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    else:
        swap = np.random.default_rng(params.seed + 1).random((params.resamples, n)) < 0.5
    pa = _ratio(np.where(swap, num_b, num_a).sum(1), np.where(swap, den_b, den_a).sum(1))
    pb = _ratio(np.where(swap, num_a, num_b).sum(1), np.where(swap, den_a, den_b).sum(1))
    extreme = np.abs(pa - pb) >= abs(d) - 1e-12 * max(1.0, abs(d))  # ties with the observed count as extreme
    p = int(extreme.sum()) / len(swap) if exact else (1 + int(extreme.sum())) / (1 + params.resamples)
    return {**out, "value_a": float(va), "value_b": float(vb), "difference": float(d), "ci_low": lo, "ci_high": hi,
            "p_value": float(p)}


# ----------------------------------------------------------------------------- multiple comparisons

CORRECTIONS = ("holm", "bh", "none")
CORRECTION_NAMES = {"holm": "Holm step-down (family-wise error rate)",
                    "bh": "Benjamini-Hochberg (false discovery rate)",
                    "none": "none (p_adjusted = p_value)"}


def _family(p) -> tuple[np.ndarray, np.ndarray]:
    """(p as float array, mask of its finite entries = the family); finite p must lie in [0, 1]."""
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p-values must be a 1-D array, got shape {p.shape}")
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1] (NaN = no test)")
    return p, ok


def holm_adjust(p) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values; they control the family-wise error rate (the
    probability of at least one false rejection in the family) under any dependence.

    With the m finite p-values sorted ascending, p_(1) <= ... <= p_(m):

        p~_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))

    The running maximum enforces monotonicity (a larger raw p never gets a smaller adjusted p;
    tied raw p's get the same adjusted p, whatever their order), the cap keeps it a probability.
    Rejecting where ``p~ <= alpha`` is Holm's procedure at level alpha. NaN entries (no test) are
    left out of the family (not counted in m) and stay NaN; one test (m = 1) is unchanged."""
    # (m - j + 1) p_(j), j = 1..m, then the running maximum
    return _over_family(p, lambda q, m: np.maximum.accumulate((m - np.arange(m)) * q))


def bh_adjust(p) -> np.ndarray:
    """Benjamini-Hochberg (1995) adjusted p-values ("q-values" of the step-up procedure); they
    control the false discovery rate (the expected share of false rejections among the
    rejections) for independent or positively dependent (PRDS) tests.

    With the m finite p-values sorted ascending, p_(1) <= ... <= p_(m):

        p~_(i) = min(1, min_{j >= i} p_(j) m / j)

    The running minimum from the largest p down enforces monotonicity (a larger raw p never gets a
    smaller adjusted p; tied raw p's all get the value of the highest rank among them), the cap
    keeps it a probability (it never binds here: p~ <= p_(m) <= 1; kept as in the definition).
    Rejecting where ``p~ <= q`` is the BH step-up procedure at FDR level q. NaN entries (no
    test) are left out of the family (not counted in m) and stay NaN; one test (m = 1) is
    unchanged."""
    # p_(j) m / j, then the running minimum from the largest p down
    return _over_family(p, lambda q, m: np.minimum.accumulate((q * (m / np.arange(1, m + 1)))[::-1])[::-1])


def _over_family(p, adjust_sorted) -> np.ndarray:
    """Apply ``adjust_sorted(p_sorted, m)`` (adjusted values of the ascending finite p-values) to
    the family of ``p``'s finite entries, capped at 1, back in input order; NaN stays NaN."""
    p, ok = _family(p)
    out = np.full(p.shape, np.nan)
    q = p[ok]
    m = q.size
    if m == 0:
        return out
    order = np.argsort(q, kind="stable")
    adj = np.empty(m)
    adj[order] = np.minimum(1.0, adjust_sorted(q[order], m))
    out[ok] = adj
    return out


def adjust_p_values(p, method: str) -> np.ndarray:
    """The p-values of one family adjusted by ``method``: ``holm`` (:func:`holm_adjust`, FWER),
    ``bh`` (:func:`bh_adjust`, FDR) or ``none`` (a copy of ``p``). NaN = no test: not in the family,
    stays NaN."""
    if method == "holm":
        return holm_adjust(p)
    if method == "bh":
        return bh_adjust(p)
    if method == "none":
        return _family(p)[0].copy()
    raise ValueError(f"unknown multiple-comparison correction {method!r}; one of {', '.join(CORRECTIONS)}")
