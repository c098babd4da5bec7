"""The significance table: multiple-comparison correction over all its rows, its Markdown
header and the run summary's line about it. (The corrections themselves, and the bootstrap /
permutation test against scipy, are tested with their module in
``tests/descbench/metrics/test_bootstrap.py``.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.metrics.bootstrap import BootstrapParams, bh_adjust, holm_adjust
from descbench.report.summary import run_summary
from descbench.report.table import significance_header, significance_markdown, significance_table


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


def test_uncorrected_table_says_so():
    sig = pd.DataFrame({"p_value": [0.01], "p_adjusted": [0.01], "correction": ["none"], "family_size": [1]})
    assert "not corrected for the 1 test(s)" in significance_header(sig)
