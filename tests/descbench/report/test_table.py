"""Multiple-comparison correction of the significance table (Holm, Benjamini-Hochberg) against
hand-worked examples and scipy, and the paired bootstrap / permutation test against scipy's
``bootstrap`` / ``permutation_test`` where they compute the same quantity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from descbench.metrics.bootstrap import (
    BootstrapParams, adjust_p_values, bh_adjust, bootstrap_ci, holm_adjust, paired_comparison,
)
from descbench.report.summary import run_summary
from descbench.report.table import significance_header, significance_markdown, significance_table

NAN = np.nan


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


def test_a_single_test_is_unchanged():
    for v in (0.0, 0.0078125, 0.3, 1.0):
        for method in ("holm", "bh", "none"):
            assert adjust_p_values([v], method).tolist() == [v]
            assert adjust_p_values([NAN, v], method)[1] == v


@pytest.mark.bad_input
def test_invalid_input():
    with pytest.raises(ValueError, match="unknown multiple-comparison correction"):
        adjust_p_values([0.1], "bonferroni")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([0.1, 1.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bh_adjust([-0.1])


# ----------------------------------------------------------------------------- the significance table


def _scenes(rng, n, mean, with_macro=True, macro_nan=False):
    den = rng.integers(20, 60, n).astype(float)
    value = np.clip(rng.normal(mean, 0.03, n), 0, 1)
    out = pd.DataFrame({"scene": [f"s{i}" for i in range(n)], "sum_ap": value * den, "n_relevant_queries": den})
    if with_macro:
        out["true_map"] = np.nan if macro_nan else value
    return out


def test_significance_table_corrects_over_all_its_rows():
    """Family = every row of the table (all keypoint sets, pairs, metrics) with a p-value: p_adjusted
    equals Holm over the whole p_value column, not per metric; a NaN row is out of the family."""
    rng = np.random.default_rng(5)
    descs = [("a", "k1", 0.70), ("b", "k1", 0.71), ("c", "k1", 0.80), ("a", "k2", 0.6), ("b", "k2", 0.6)]
    table = pd.DataFrame({"descriptor": [d for d, _, _ in descs], "keypoint_set": [k for _, k, _ in descs]})
    scene_tables = [_scenes(rng, 9, m, macro_nan=(d == "b" and k == "k2")) for d, k, m in descs]
    params = BootstrapParams(resamples=300, seed=2)  # 2^9 > 300: sampled permutation test
    sig = significance_table(table, scene_tables, params)  # default: holm
    assert list(sig.columns[sig.columns.get_loc("p_value"):][:2]) == ["p_value", "p_adjusted"]
    assert len(sig) == 2 * (3 + 1)  # 2 metrics (micro, macro) x (3 pairs on k1 + 1 on k2)
    nan_row = (sig.keypoint_set == "k2") & (sig.metric == "true_map_macro_by_scene")
    assert np.isnan(sig.p_value[nan_row]).all() and np.isnan(sig.p_adjusted[nan_row]).all()
    finite = sig.p_value.notna()
    assert (sig.family_size == finite.sum()).all() and finite.sum() == 7
    assert (sig.correction == "holm").all()
    np.testing.assert_array_equal(sig.p_adjusted[finite], holm_adjust(sig.p_value[finite].to_numpy()))
    per_metric = np.concatenate([holm_adjust(g.p_value[g.p_value.notna()].to_numpy())
                                 for _, g in sig[finite].groupby("metric", sort=False)])
    assert not np.array_equal(np.sort(per_metric), np.sort(sig.p_adjusted[finite].to_numpy()))  # not per metric
    assert (sig.p_adjusted[finite] >= sig.p_value[finite]).all()
    raw = sig.p_value.copy()
    bh = significance_table(table, scene_tables, params, "bh")
    np.testing.assert_array_equal(bh.p_value, raw)  # p_value stays raw
    np.testing.assert_array_equal(bh.p_adjusted[finite], bh_adjust(raw[finite].to_numpy()))
    none = significance_table(table, scene_tables, params, "none")
    np.testing.assert_array_equal(none.p_adjusted, raw)
    md = significance_markdown(sig)
    first = md.splitlines()[0]
    assert "Holm" in first and "over 7 test(s)" in first and "all rows of this table" in first
    assert "| p_value | p_adjusted |" in md
    assert "Benjamini-Hochberg" in significance_markdown(bh).splitlines()[0]


def test_empty_significance_table():
    table = pd.DataFrame({"descriptor": ["a"], "keypoint_set": ["k"]})
    sig = significance_table(table, [_scenes(np.random.default_rng(0), 4, 0.5)], BootstrapParams(resamples=100))
    assert sig.empty and "p_adjusted" in sig.columns and "No paired tests" in significance_markdown(sig)


def test_terminal_summary_says_how_p_values_are_adjusted(tmp_path):
    pd.DataFrame({"descriptor": ["a"], "keypoint_set": ["k"], "true_map_micro": [0.5]}).to_csv(
        tmp_path / "comparison.csv", index=False)
    assert "p_adjusted" not in run_summary(tmp_path)  # no significance table: nothing claimed
    pd.DataFrame({"p_value": [0.01, 0.02], "p_adjusted": [0.02, 0.02], "correction": ["holm"] * 2,
                  "family_size": [2, 2]}).to_csv(tmp_path / "significance.csv", index=False)
    assert "p_adjusted: Holm step-down (family-wise error rate) over all 2 tests of the table" in run_summary(tmp_path)
    pd.DataFrame({"p_value": [0.01], "p_adjusted": [0.01], "correction": ["none"], "family_size": [1]}).to_csv(
        tmp_path / "significance.csv", index=False)
    assert "p-values not corrected for multiple comparisons" in run_summary(tmp_path)


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


def test_uncorrected_table_says_so():
    sig = pd.DataFrame({"p_value": [0.01], "p_adjusted": [0.01], "correction": ["none"], "family_size": [1]})
    assert "not corrected for the 1 test(s)" in significance_header(sig)


def test_config_schema_offers_exactly_the_implemented_corrections():
    from pathlib import Path

    import yaml

    from descbench.metrics.bootstrap import CORRECTIONS

    root = Path(__file__).resolve().parents[3]
    schema = yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text())
    spec = schema["properties"]["statistics"]["properties"]["correction"]
    assert spec == {"enum": list(CORRECTIONS), "default": "holm"}
    assert yaml.safe_load((root / "config.yaml").read_text())["statistics"]["correction"] == "holm"
