"""Bootstrap intervals and paired tests: hand-checked values, a direct resampling loop, scipy's
``bootstrap`` / ``permutation_test`` where they compute the same quantity, and coverage / size by
simulation; the multiple-comparison corrections (Holm, Benjamini-Hochberg) against hand-worked
examples and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from descbench.metrics.bootstrap import (
    CORRECTIONS, BootstrapParams, adjust_p_values, bh_adjust, bootstrap_ci, holm_adjust, paired_comparison, scene_draws,
    two_stage_ci,
)

NAN = np.nan

FAST = BootstrapParams(resamples=400, level=0.95, seed=3)


def test_interval_against_a_direct_resampling_loop():
    rng = np.random.default_rng(0)
    num, den = rng.uniform(0, 50, 12), rng.integers(1, 60, 12).astype(float)
    idx = scene_draws(12, FAST)
    direct = [num[i].sum() / den[i].sum() for i in idx]  # the definition, one draw at a time
    assert bootstrap_ci(num, den, FAST) == pytest.approx(tuple(np.percentile(direct, [2.5, 97.5])))
    assert bootstrap_ci(num, den, FAST) == bootstrap_ci(num, den, FAST)  # seeded
    assert np.isnan(bootstrap_ci([], [], FAST)[0])


def test_permutation_p_value_by_hand_on_two_scenes():
    # scenes: A = (1/1, 3/1), B = (0/1, 1/1): d = 2 - 0.5 = 1.5. The 4 swap patterns give |d*| =
    # 1.5 (none), 0.5 (swap 1), 0.5 (swap 2), 1.5 (both): half of the draws are as extreme
    res = paired_comparison([1, 3], [1, 1], [0, 1], [1, 1], BootstrapParams(resamples=4000, seed=1))
    assert res["difference"] == pytest.approx(1.5)  # ratios: A 4/2 = 2, B 1/2 = 0.5
    assert res["p_value"] == 0.5  # 2^2 <= resamples: the 4 patterns enumerated, exactly
    # 14 scenes (2^14 > resamples): sampled patterns, p = (1 + #extreme) / (1 + B) > 0
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 1, 14), rng.uniform(0.5, 1, 14)
    sampled = paired_comparison(a, np.ones(14), a + 1, np.ones(14), BootstrapParams(resamples=500, seed=1))
    assert sampled["p_value"] == pytest.approx(1 / 501)  # every scene better in B: nothing as extreme
    same = paired_comparison(a, np.ones(14), b, np.ones(14), BootstrapParams(resamples=500, seed=1))
    assert 0 < same["p_value"] <= 1


def _simulated_scenes(rng, n, mean, sd):
    den = rng.integers(50, 400, n).astype(float)  # queries per scene
    value = rng.normal(mean, sd, n)  # scene-level true mAP
    return value * den, den


@pytest.mark.parametrize("n_scenes, min_coverage", [(8, 0.84), (30, 0.90)])
def test_coverage_of_the_difference_interval_and_size_of_the_test(n_scenes, min_coverage):
    """A known true difference delta = 0.02 between two descriptors, scene effects shared (paired),
    scene-level noise: over 300 simulated datasets the 95 % interval covers delta in 90-99 % of
    them on 30 scenes; on 8 scenes the percentile bootstrap undercovers (its spread is that of
    the plug-in, without the n/(n-1) correction: measured 0.877), which README states. Under
    delta = 0 the test rejects at 5 % in 1-10 % of them."""
    rng = np.random.default_rng(42 + n_scenes)
    trials, delta = 300, 0.02
    covered = rejected = 0
    for t in range(trials):
        base_num, den = _simulated_scenes(rng, n_scenes, 0.7, 0.08)
        scene_effect = base_num / den
        noise_a, noise_b = rng.normal(0, 0.01, n_scenes), rng.normal(0, 0.01, n_scenes)
        a = (scene_effect + delta + noise_a) * den
        b = (scene_effect + noise_b) * den
        true_d = delta  # the population difference (the noise has mean 0)
        res = paired_comparison(a, den, b, den, BootstrapParams(resamples=400, seed=t))
        covered += res["ci_low"] <= true_d <= res["ci_high"]
        null = paired_comparison((scene_effect + noise_a) * den, den, b, den, BootstrapParams(resamples=400, seed=t))
        rejected += null["p_value"] < 0.05
    coverage, size = covered / trials, rejected / trials
    print(f"n_scenes={n_scenes}: coverage {coverage:.3f}, type-I error {size:.3f}")
    assert min_coverage <= coverage <= 0.99, coverage
    assert 0.01 <= size <= 0.10, size


def test_single_metric_interval_coverage():
    rng = np.random.default_rng(7)
    covered = 0
    for t in range(300):
        num, den = _simulated_scenes(rng, 30, 0.6, 0.1)
        lo, hi = bootstrap_ci(num, den, BootstrapParams(resamples=400, seed=t))
        covered += lo <= 0.6 <= hi
    assert 0.88 <= covered / 300 <= 0.99, covered / 300


def test_two_stage_interval_against_a_direct_loop_and_by_simulation():
    from descbench.metrics.bootstrap import two_stage_ci
    from descbench.metrics.kernels import two_stage_sums

    rng = np.random.default_rng(5)
    vals = [rng.uniform(0, 1, n) for n in (3, 0, 7, 5)]
    p = BootstrapParams(resamples=300, level=0.9, seed=4)
    draws = scene_draws(4, p)
    offsets = np.array([0, 3, 3, 10, 15])
    num, den = two_stage_sums(np.concatenate(vals), offsets, draws, 6)
    # the definition for draw b: the drawn scenes' values redrawn; den = sum of their sizes
    assert np.array_equal(den, np.array([sum(len(vals[s]) for s in row) for row in draws], float))
    assert np.all(num <= den + 1e-12) and np.all(num >= 0)
    lo, hi = two_stage_ci(vals, p)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(num[den > 0] / den[den > 0], [5, 95])))
    assert two_stage_ci(vals, p) == (lo, hi)  # seeded
    # a scene with one query per draw: the within-scene redraw changes nothing
    one = [np.array([0.2]), np.array([0.9]), np.array([0.4])]
    assert two_stage_ci(one, p) == pytest.approx(bootstrap_ci([0.2, 0.9, 0.4], [1, 1, 1], p))
    # hierarchical data, 30 scenes: scene means ~ N(0.6, tau), queries ~ N(scene mean, 0.2). The
    # two-stage interval covers the true 0.6 like the scene interval (the percentile bootstrap
    # undercovers a little on 30 scenes: ~0.92 both, measured over 600 datasets) and is wider on
    # average; with tau = 0 (all variance within scenes) it counts that variance twice: ~sqrt(2)x
    for tau, min_ratio in ((0.08, 1.0), (0.0, 1.25)):
        covered, w1, w2 = 0, [], []
        for t in range(150):
            sims = [rng.normal(m, 0.2, rng.integers(5, 40)) for m in rng.normal(0.6, tau, 30)]
            q = BootstrapParams(resamples=300, seed=t)
            lo2, hi2 = two_stage_ci(sims, q)
            lo1, hi1 = bootstrap_ci([s.sum() for s in sims], [s.size for s in sims], q)
            covered += lo2 <= 0.6 <= hi2
            w1.append(hi1 - lo1)
            w2.append(hi2 - lo2)
        ratio = np.mean(w2) / np.mean(w1)
        print(f"tau={tau}: two-stage coverage {covered / 150:.3f}, width ratio {ratio:.2f}")
        assert 0.86 <= covered / 150 <= 1.0
        assert min_ratio <= ratio <= 1.6


# ----------------------------------------------------------------------------- scipy's resampling


def _ratio_stat(num, den):
    """Index-array statistic for scipy: the dataset ratio sum(num) / sum(den) of the drawn scenes."""
    def stat(i, axis=-1):
        d = den[i].sum(axis=axis)
        return np.where(d > 0, num[i].sum(axis=axis) / np.where(d > 0, d, 1.0), np.nan)
    return stat


@pytest.mark.parametrize("n, level, seed", [(8, 0.95, 0), (23, 0.9, 7)])
def test_bootstrap_intervals_equal_scipy_percentile_bootstrap(n, level, seed):
    """Same generator, same draws (scipy's single batch of rng.integers(0, n, (B, n))), same
    linear-interpolation percentiles: the intervals are equal (to rounding)."""
    rng = np.random.default_rng(100 + n)
    num_a, den = rng.uniform(0, 40, n), rng.integers(1, 60, n).astype(float)
    num_b = num_a * rng.uniform(0.9, 1.1, n)
    p = BootstrapParams(resamples=1000, level=level, seed=seed)
    ours = bootstrap_ci(num_a, den, p)
    theirs = stats.bootstrap((np.arange(n),), _ratio_stat(num_a, den), vectorized=True, method="percentile",
                             n_resamples=p.resamples, confidence_level=level, rng=np.random.default_rng(seed))
    assert ours == pytest.approx(tuple(theirs.confidence_interval), rel=1e-12, abs=1e-15)
    sa, sb = _ratio_stat(num_a, den), _ratio_stat(num_b, den)
    theirs_d = stats.bootstrap((np.arange(n),), lambda i, axis=-1: sa(i, axis) - sb(i, axis), vectorized=True,
                               method="percentile", n_resamples=p.resamples, confidence_level=level,
                               rng=np.random.default_rng(seed))
    res = paired_comparison(num_a, den, num_b, den, p)
    assert (res["ci_low"], res["ci_high"]) == pytest.approx(tuple(theirs_d.confidence_interval), rel=1e-12, abs=1e-15)


def _scipy_permutation_p(num_a, den_a, num_b, den_b, n_resamples, seed=0):
    """scipy's paired permutation test (permutation_type='samples': A_i and B_i swapped) of the
    difference of ratio metrics, through scene indices into the concatenated (A, B) arrays."""
    n = len(num_a)
    num, den = np.concatenate([num_a, num_b]), np.concatenate([den_a, den_b])
    r = _ratio_stat(num, den)
    res = stats.permutation_test((np.arange(n), np.arange(n) + n), lambda x, y, axis=-1: r(x, axis) - r(y, axis),
                                 permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                                 alternative="two-sided", rng=np.random.default_rng(seed))
    return float(res.pvalue)


@pytest.mark.parametrize("case", range(6))
def test_exact_permutation_p_value_equals_scipy(case):
    """2^n <= resamples: both enumerate the 2^n swap patterns. Our two-sided p counts |d*| >= |d|,
    scipy's is 2 min(P(T* <= d), P(T* >= d)); the null distribution of a swap test is symmetric
    (the complement pattern gives -d*), so both are the same number, exactly."""
    rng = np.random.default_rng(case)
    n = 5 + case % 5  # 5..9 scenes: 32..512 patterns
    den_a, den_b = rng.integers(1, 50, n).astype(float), rng.integers(1, 50, n).astype(float)
    num_a = den_a * rng.uniform(0.5, 0.9, n)
    num_b = den_b * np.clip(num_a / den_a + rng.normal(0.03 * (case % 3), 0.05, n), 0, 1)
    if case == 5:  # no difference at all: p = 1 for both
        num_b, den_b = num_a.copy(), den_a.copy()
    ours = paired_comparison(num_a, den_a, num_b, den_b, BootstrapParams(resamples=2000, seed=case))["p_value"]
    assert ours == _scipy_permutation_p(num_a, den_a, num_b, den_b, n_resamples=2000)
    if case == 5:
        assert ours == 1.0


def test_sampled_permutation_p_value_agrees_with_scipys_exact_one():
    """2^12 = 4096 > 2000 resamples: our sampled p (own seeded stream, (1 + #extreme) / (1 + B))
    estimates scipy's exact p (4096 patterns enumerated) within Monte Carlo error."""
    rng = np.random.default_rng(21)
    n = 12
    den = rng.integers(5, 50, n).astype(float)
    num_a = den * rng.uniform(0.5, 0.9, n)
    num_b = den * np.clip(num_a / den + rng.normal(0.015, 0.04, n), 0, 1)
    exact = _scipy_permutation_p(num_a, den, num_b, den, n_resamples=2 ** n)
    assert 0.02 < exact < 0.5  # a p-value in the interesting range
    for seed in range(3):
        sampled = paired_comparison(num_a, den, num_b, den, BootstrapParams(resamples=2000, seed=seed))["p_value"]
        se = np.sqrt(exact * (1 - exact) / 2000)
        assert abs(sampled - exact) <= 4 * se + 1 / 2001, (sampled, exact)


# ----------------------------------------------------------------------------- Holm


def test_holm_by_hand():
    # p = (0.01, 0.04, 0.03, 0.005), m = 4; sorted 0.005, 0.01, 0.03, 0.04
    # (m - j + 1) p_(j):  4 * 0.005 = 0.02, 3 * 0.01 = 0.03, 2 * 0.03 = 0.06, 1 * 0.04 = 0.04
    # running max:        0.02,             0.03,            0.06,            0.06 (monotone: 0.04 -> 0.06)
    # back in input order: 0.01 -> 0.03, 0.04 -> 0.06, 0.03 -> 0.06, 0.005 -> 0.02
    np.testing.assert_allclose(holm_adjust([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], rtol=1e-15)
    # capped at 1: (0.3, 0.5): 2 * 0.3 = 0.6, max(0.6, 1 * 0.5) = 0.6; (0.6, 0.9): 1.2 -> 1, max(1.2, 0.9) -> 1
    np.testing.assert_allclose(holm_adjust([0.3, 0.5]), [0.6, 0.6], rtol=1e-15)
    assert holm_adjust([0.6, 0.9]).tolist() == [1.0, 1.0]


def test_holm_on_the_demo_p_values_exactly():
    # the 8-scene demo (sift vs rootsift, 5 metrics): exact permutation p-values 2/256, 2/256,
    # 2/256, 6/256, 1. m = 5: 5 * 2/256 = 10/256, 4 * 2/256 = 8/256 -> max 10/256, 3 * 2/256 ->
    # 10/256, 2 * 6/256 = 12/256, 1 * 1 = 1 (binary fractions: exact)
    p = [2 / 256, 2 / 256, 2 / 256, 6 / 256, 1.0]
    assert holm_adjust(p).tolist() == [10 / 256, 10 / 256, 10 / 256, 12 / 256, 1.0]
    # BH: m p_(j) / j = 10/256, 5/256, 10/3/256, 7.5/256, 1; running min from the end:
    # j = 3: 10/3/256 for j = 1..3, j = 4: 7.5/256, j = 5: 1
    np.testing.assert_allclose(bh_adjust(p), [10 / 3 / 256] * 3 + [7.5 / 256, 1.0], rtol=1e-15)


# ----------------------------------------------------------------------------- Benjamini-Hochberg


def test_bh_by_hand():
    # p = (0.01, 0.04, 0.03, 0.005), m = 4; sorted 0.005, 0.01, 0.03, 0.04
    # p_(j) m / j: 0.005 * 4 = 0.02, 0.01 * 2 = 0.02, 0.03 * 4/3 = 0.04, 0.04 * 1 = 0.04
    # running min from the end: 0.02, 0.02, 0.04, 0.04
    np.testing.assert_allclose(bh_adjust([0.01, 0.04, 0.03, 0.005]), [0.02, 0.04, 0.04, 0.02], rtol=1e-15)
    # monotonicity enforced: (0.02, 0.021, 0.9): 0.06, 0.0315, 0.9 -> min(0.06, 0.0315) = 0.0315
    np.testing.assert_allclose(bh_adjust([0.02, 0.021, 0.9]), [0.0315, 0.0315, 0.9], rtol=1e-15)


def test_bh_equals_scipy_false_discovery_control():
    rng = np.random.default_rng(11)
    for m in (2, 3, 7, 50, 950):
        p = np.concatenate([rng.uniform(0, 1, m - m // 3), rng.uniform(0, 0.01, m // 3)])
        p[rng.integers(0, m, m // 5)] = p[0]  # ties
        rng.shuffle(p)
        np.testing.assert_allclose(bh_adjust(p), stats.false_discovery_control(p, method="bh"), rtol=1e-15, atol=0)
    p = np.array([2 / 256] * 3 + [6 / 256, 1.0])
    np.testing.assert_allclose(bh_adjust(p), stats.false_discovery_control(p, method="bh"), rtol=1e-15, atol=0)


# ----------------------------------------------------------------------------- ties, NaN, one test


def test_ties_get_one_adjusted_value_whatever_their_order():
    # Holm (0.01, 0.01, 0.04): 3 * 0.01 = 0.03, 2 * 0.01 = 0.02 -> 0.03, 1 * 0.04 = 0.04
    np.testing.assert_allclose(holm_adjust([0.01, 0.01, 0.04]), [0.03, 0.03, 0.04], rtol=1e-15)
    # BH: 0.01 * 3 = 0.03, 0.01 * 3/2 = 0.015, 0.04 -> min from the end: 0.015, 0.015, 0.04
    np.testing.assert_allclose(bh_adjust([0.01, 0.01, 0.04]), [0.015, 0.015, 0.04], rtol=1e-15)
    rng = np.random.default_rng(3)
    p = rng.choice([0.001, 0.01, 0.02, 0.2, 0.5], size=40)
    for adjust in (holm_adjust, bh_adjust):
        adj = adjust(p)
        for v in np.unique(p):
            assert np.unique(adj[p == v]).size == 1  # tied raw p -> one adjusted p
        perm = rng.permutation(p.size)
        assert np.array_equal(adjust(p[perm]), adj[perm])  # order of the input does not matter
        order = np.argsort(p)
        assert np.all(np.diff(adj[order]) >= 0)  # monotone in p
        assert np.all(adj >= p) and np.all(adj <= 1)


def test_nan_p_values_are_not_in_the_family_and_stay_nan():
    # NaN = no test (no data): m counts the 4 finite p-values, not 6
    p = [0.01, NAN, 0.04, 0.03, NAN, 0.005]
    for method, adjust in (("holm", holm_adjust), ("bh", bh_adjust)):
        adj = adjust_p_values(p, method)
        assert np.isnan(adj[[1, 4]]).all()
        np.testing.assert_array_equal(adj[[0, 2, 3, 5]], adjust([0.01, 0.04, 0.03, 0.005]))
    np.testing.assert_allclose(holm_adjust(p)[[0, 2, 3, 5]], [0.03, 0.06, 0.06, 0.02], rtol=1e-15)
    assert np.isnan(holm_adjust([NAN, NAN])).all() and np.isnan(bh_adjust([NAN])).all()
    assert holm_adjust([]).size == 0
    np.testing.assert_array_equal(adjust_p_values(p, "none"), p)


def test_integer_p_values_are_adjusted_as_floats():
    """p-values given as integers (0 and 1 are valid p-values) are read as float64: every
    method returns float64, 'none' included."""
    for method in CORRECTIONS:
        adj = adjust_p_values([0, 1], method)
        assert adj.dtype == np.float64 and adj.tolist() == [0.0, 1.0], method


def test_a_single_test_is_unchanged():
    for v in (0.0, 0.0078125, 0.3, 1.0):
        for method in ("holm", "bh", "none"):
            assert adjust_p_values([v], method).tolist() == [v]
            assert adjust_p_values([NAN, v], method)[1] == v


@pytest.mark.bad_input
def test_invalid_input():
    import re

    with pytest.raises(ValueError, match=re.escape(
            "unknown multiple-comparison correction 'bonferroni'; one of holm, bh, none")):
        adjust_p_values([0.1], "bonferroni")
    in_range = "^" + re.escape("p-values must lie in [0, 1] (NaN = no test)") + "$"
    with pytest.raises(ValueError, match=in_range):
        holm_adjust([0.1, 1.5])
    with pytest.raises(ValueError, match=in_range):
        bh_adjust([-0.1])
    with pytest.raises(ValueError, match=re.escape("p-values must be a 1-D array, got shape (1, 2)")):
        adjust_p_values([[0.1, 0.2]], "holm")


def test_config_schema_offers_exactly_the_implemented_corrections():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    schema = yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text())
    spec = schema["properties"]["statistics"]["properties"]["correction"]
    assert spec == {"enum": list(CORRECTIONS), "default": "holm"}
    assert yaml.safe_load((root / "config.yaml").read_text())["statistics"]["correction"] == "holm"


# ----------------------------------------------------------------------------- edge cases and input checks


def _rational_p_value(num_a, den_a, num_b, den_b):
    """The exact permutation p-value in rational arithmetic: all 2^n swap patterns of the exact
    float inputs, |d*| >= |d| counted without rounding (a tie in exact arithmetic is extreme)."""
    from fractions import Fraction
    from itertools import product

    na, da, nb, db = ([Fraction(float(v)) for v in arr] for arr in (num_a, den_a, num_b, den_b))

    def diff(swap):
        a_num = sum(b if s else a for a, b, s in zip(na, nb, swap))
        a_den = sum(b if s else a for a, b, s in zip(da, db, swap))
        b_num = sum(a if s else b for a, b, s in zip(na, nb, swap))
        b_den = sum(a if s else b for a, b, s in zip(da, db, swap))
        return a_num / a_den - b_num / b_den

    d = abs(diff([False] * len(na)))
    patterns = list(product([False, True], repeat=len(na)))
    return Fraction(sum(abs(diff(s)) >= d for s in patterns), len(patterns))


def test_float32_inputs_are_summed_in_float64():
    """Per-scene sums given as float32 are converted to float64 before any sum: the results equal
    those of the same values given as float64 (float32 sums of these values round differently)."""
    rng = np.random.default_rng(11)
    num32, den32 = rng.uniform(0, 50, 12).astype(np.float32), rng.uniform(1, 60, 12).astype(np.float32)
    num64, den64 = num32.astype(np.float64), den32.astype(np.float64)
    assert np.float32(num32.sum()) != num64.sum()  # float32 arithmetic would be visible
    assert bootstrap_ci(num32, den64, FAST) == bootstrap_ci(num64, den64, FAST)
    assert bootstrap_ci(num64, den32, FAST) == bootstrap_ci(num64, den64, FAST)
    shifted = num64[::-1].copy()
    single = paired_comparison(num32, den32, shifted.astype(np.float32), den32, FAST)
    double = paired_comparison(num64, den64, shifted, den64, FAST)
    assert single == double


@pytest.mark.bad_input
def test_bad_per_scene_values_are_refused_with_their_whole_message():
    import re

    finite_msg = "per-scene numerators/denominators must be finite and denominators >= 0"
    for num, den in (([1.0, NAN], [1.0, 1.0]), ([1.0, 2.0], [1.0, np.inf]), ([1.0, 2.0], [1.0, -1.0])):
        with pytest.raises(ValueError, match=f"^{re.escape(finite_msg)}$"):
            bootstrap_ci(num, den, FAST)
    with pytest.raises(ValueError, match=re.escape("numerators (3,) and denominators (2,) differ in length")):
        bootstrap_ci([1.0, 2.0, 3.0], [1.0, 1.0], FAST)
    with pytest.raises(ValueError, match="^A and B must be given on the same scenes$"):
        paired_comparison([1.0, 2.0], [1.0, 1.0], [1.0], [1.0], FAST)
    with pytest.raises(ValueError, match=re.escape("^per-query values must be finite (leave out queries without a value)$")
                       .replace("\\^", "^").replace("\\$", "$")):
        two_stage_ci([np.array([0.5, NAN])], FAST)


def test_one_scene_gives_a_point_interval_and_p_value_one():
    """One scene: every draw is that scene, so the interval is the value itself; the two swap
    patterns (none, swap) give |d*| = |d|, so the exact p-value is 2/2 = 1."""
    assert bootstrap_ci([0.3], [1.0], FAST) == (0.3, 0.3)
    res = paired_comparison([0.3], [1.0], [0.1], [1.0], FAST)
    d = 0.3 - 0.1
    assert (res["value_a"], res["value_b"], res["difference"]) == (0.3, 0.1, d)
    assert (res["ci_low"], res["ci_high"], res["p_value"]) == (d, d, 1.0)
    assert two_stage_ci([np.array([0.7])], FAST) == (0.7, 0.7)  # one value: every redraw is it


def test_a_single_resample_gives_its_own_ratio():
    """resamples = 1: the interval's two ends are that one draw's ratio (numpy's percentile of one value)."""
    p = BootstrapParams(resamples=1, level=0.95, seed=8)
    num, den = np.array([3.0, 1.0, 4.0, 1.0]), np.array([5.0, 9.0, 2.0, 6.0])
    (draw,) = scene_draws(4, p)
    value = num[draw].sum() / den[draw].sum()
    assert bootstrap_ci(num, den, p) == (value, value)


def test_draws_without_data_are_left_out_without_a_warning():
    """Scenes with denominator 0 (or fractional ones): a draw whose denominator sums to 0 is left
    out, every other draw is sum(num) / sum(den) (a direct loop over the draws), and nothing is
    divided by 0 on the way."""
    import warnings

    num, den = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5])
    p = BootstrapParams(resamples=300, level=0.9, seed=2)
    draws = scene_draws(3, p)
    direct = [num[d].sum() / den[d].sum() for d in draws if den[d].sum() > 0]
    assert len(direct) < len(draws)  # some draws are all scene 0
    assert any(den[d].sum() == 1.0 for d in draws) and any(den[d].sum() == 0.5 for d in draws)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bootstrap_ci(num, den, p) == pytest.approx(tuple(np.percentile(direct, [5, 95])), rel=1e-15)


def test_no_data_at_all_gives_nan():
    nan2 = (True, True)
    assert tuple(np.isnan(bootstrap_ci([1.0, 2.0], [0.0, 0.0], FAST))) == nan2
    assert tuple(np.isnan(two_stage_ci([np.zeros(0), np.zeros(0)], FAST))) == nan2
    assert tuple(np.isnan(two_stage_ci([], FAST))) == nan2
    # a draw exists but has no data: resamples = 1 and a draw of scene 0 only
    seed = next(s for s in range(100) if not scene_draws(2, BootstrapParams(resamples=1, seed=s)).any())
    assert tuple(np.isnan(bootstrap_ci([1.0, 2.0], [0.0, 1.0], BootstrapParams(resamples=1, seed=seed)))) == nan2


KEYS = {"n_scenes", "resamples", "level", "seed", "value_a", "value_b", "difference", "ci_low", "ci_high", "p_value"}


def test_a_comparison_without_data_on_either_side_is_all_nan():
    """No denominator on one side (either), or no scene: every value of the record is NaN; the
    record has the same keys as a computed one."""
    p = BootstrapParams(resamples=500, level=0.9, seed=4)
    ok = paired_comparison([1.0, 2.0], [1.0, 1.0], [2.0, 1.0], [1.0, 1.0], p)
    assert set(ok) == KEYS and (ok["n_scenes"], ok["resamples"], ok["level"], ok["seed"]) == (2, 500, 0.9, 4)
    cases = (([1.0, 2.0], [0.0, 0.0], [2.0, 1.0], [1.0, 1.0]), ([1.0, 2.0], [1.0, 1.0], [2.0, 1.0], [0.0, 0.0]),
             ([], [], [], []))
    for case in cases:
        res = paired_comparison(*case, p)
        assert set(res) == KEYS and res["n_scenes"] == len(case[0])
        assert all(np.isnan(res[k]) for k in KEYS - {"n_scenes", "resamples", "level", "seed"}), res


def _sampled_p_value(num_a, den_a, num_b, den_b, params):
    """The sampled permutation p-value as the module docstring defines it, pattern by pattern:
    pattern b swaps scene i where default_rng(seed + 1).random((B, n))[b, i] < 0.5, and
    p = (1 + #{|d*| >= |d|}) / (1 + B)."""
    num_a, den_a, num_b, den_b = (np.asarray(v, dtype=np.float64) for v in (num_a, den_a, num_b, den_b))
    d = abs(num_a.sum() / den_a.sum() - num_b.sum() / den_b.sum())
    extreme = 0
    for swap in np.random.default_rng(params.seed + 1).random((params.resamples, num_a.size)) < 0.5:
        a = num_b[swap].sum() + num_a[~swap].sum(), den_b[swap].sum() + den_a[~swap].sum()
        b = num_a[swap].sum() + num_b[~swap].sum(), den_a[swap].sum() + den_b[~swap].sum()
        extreme += abs(a[0] / a[1] - b[0] / b[1]) >= d * (1 - 1e-9)
    return (1 + extreme) / (1 + params.resamples)


def _paired_case(seed, n):
    rng = np.random.default_rng(seed)
    den_a, den_b = rng.integers(1, 30, n).astype(float), rng.integers(1, 30, n).astype(float)
    return den_a * rng.uniform(0.4, 0.9, n), den_a, den_b * rng.uniform(0.45, 0.95, n), den_b


def test_the_permutation_test_is_exact_up_to_2_to_the_n_resamples():
    """2^n <= resamples: the 2^n patterns enumerated, p equals the rational p exactly; one
    resample fewer: the sampled p-value."""
    n = 7
    case = _paired_case(3, n)
    exact = paired_comparison(*case, BootstrapParams(resamples=2 ** n, seed=0))["p_value"]
    assert exact == float(_rational_p_value(*case))
    fewer = BootstrapParams(resamples=2 ** n - 1, seed=0)
    assert paired_comparison(*case, fewer)["p_value"] == _sampled_p_value(*case, fewer)


def test_sampled_swap_patterns_come_from_the_documented_stream():
    """2^n > resamples: the p-value of the documented stream, counted pattern by pattern."""
    case, p = _paired_case(9, 12), BootstrapParams(resamples=700, seed=5)
    assert paired_comparison(*case, p)["p_value"] == _sampled_p_value(*case, p)


def test_ties_in_exact_arithmetic_count_as_extreme_whatever_the_rounding():
    """Scene values built so that swapping scenes 1 and 3 gives d* = d exactly (a1 - b1 = b3 - a3
    in exact arithmetic) while the float sums, whose partial sums differ, round differently, at
    |d| = 1000: the p-value equals the rational one, so the tie is counted (a tolerance relative
    to |d| absorbs the rounding of sums of that size)."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    den = np.ones(3)
    for _ in range(1000):
        a1, a3 = rng.uniform(100, 1000, 2)
        b1 = a1 - rng.uniform(0.1, 1)
        b3 = a3 + (a1 - b1)
        if Fraction(a1) - Fraction(b1) != Fraction(b3) - Fraction(a3):
            continue  # not an exact tie
        num_a, num_b = np.array([a1, 3000.0, a3]), np.array([b1, 0.0, b3])
        d = num_a.sum() / 3 - num_b.sum() / 3
        swapped = (b1 + 3000.0 + b3) / 3 - (a1 + 0.0 + a3) / 3
        if abs(swapped) < abs(d):  # rounding puts the tie just below |d|
            break
    else:
        pytest.fail("no case found")
    exact = _rational_p_value(num_a, den, num_b, den)
    assert paired_comparison(num_a, den, num_b, den, BootstrapParams(resamples=8, seed=0))["p_value"] == float(exact)
