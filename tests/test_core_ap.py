"""AP conventions (descbench.metrics.ap): exact error messages, label sets, one-item and
degenerate-range inputs, each checked against a hand-worked value or a plain loop.

Written to kill the mutants that survived a mutation-testing run (benchmarks/README.md,
"Mutation testing"). The messages are matched from their start (``^name ...``): the module
promises a ``ValueError`` *naming the offending argument*, and a name with extra characters
around it is not that name.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from descbench.metrics.ap import (
    ap_from_tie_groups,
    ap_quantized,
    ap_step,
    ap_tie_aware,
    ap_tie_aware_from_histograms,
    ap_vlfeat,
)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ap_step([[0.1]], [1]), r"^distances must be a 1-D array, got shape \(1, 1\)$"),
        (lambda: ap_step(["a"], [1]), r"^distances must be numeric, got dtype <U1$"),
        (lambda: ap_step([True, False], [1, 0]), r"^distances must be numeric, got dtype bool$"),
        (lambda: ap_step([0.1, np.nan], [1, 0]), r"^distances must be finite; found nan at index 1$"),
        (lambda: ap_step([0.1], [[1]]), r"^labels must be a 1-D array, got shape \(1, 1\)$"),
        (lambda: ap_step([0.1], ["x"]), r"^labels must be numeric, got dtype <U1$"),
        (lambda: ap_step([0.1, 0.2], [1]), r"^labels has length 1 but distances has length 2$"),
        (lambda: ap_tie_aware([0.1, 0.2], [1, 2]), r"^labels must only contain values in \{0, 1, -1\}; found 2\.0$"),
        (lambda: ap_from_tie_groups([1, -1], [0, 0], "step"), r"^n_pos must contain non-negative integer counts$"),
        (lambda: ap_from_tie_groups([1, 1], [0, 0.5], "step"), r"^n_neg must contain non-negative integer counts$"),
        (lambda: ap_from_tie_groups([[1]], [[0]], "step"), r"^n_pos must be a 1-D array"),
        (lambda: ap_from_tie_groups([1], [np.inf], "step"), r"^n_neg must be finite; found inf at index 0$"),
        (lambda: ap_tie_aware_from_histograms([1, np.nan], [0, 1]), r"^hist_pos must be finite; found nan at index 1$"),
        (lambda: ap_tie_aware_from_histograms([1, 1], [0, -1]), r"^hist_neg must contain non-negative integer counts$"),
        (lambda: ap_tie_aware_from_histograms([1, 1], ["a", "b"]), r"^hist_neg must be numeric, got dtype <U1$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_min=np.inf), r"^d_min must be finite, got inf$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_max=np.nan), r"^d_max must be finite, got nan$"),
        (lambda: ap_quantized([0.1, 0.2], [1, 0], 4, d_min=1.0, d_max=0.5), r"^d_min \(1\.0\) must be <= d_max \(0\.5\)$"),
    ],
)
def test_error_messages_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_labels_minus_one_are_negatives_for_tie_aware_and_step():
    # hand-worked: ranking 1 (pos), 2 (-1), 3 (pos): AP = (1/1 + 2/3) / 2
    d, lab = [0.1, 0.2, 0.3], [1, -1, 1]
    assert ap_tie_aware(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
    assert ap_step(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
    assert ap_tie_aware(d, [1, 0, 1]) == ap_tie_aware(d, lab)
    # vlfeat ignores the 0 label but counts -1 as a negative
    assert ap_vlfeat(d, [1, 0, 1]) == pytest.approx(1.0, abs=1e-15)
    assert ap_vlfeat(d, lab) == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)


def test_ap_quantized_one_item_and_one_positive():
    assert ap_quantized([0.5], [1], 4) == pytest.approx(1.0, abs=1e-15)
    assert ap_quantized([0.5, 0.7], [0, 1], 2) == pytest.approx(0.5, abs=1e-15)


def test_ap_quantized_without_positive_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(ap_quantized([0.3, 0.1, 0.2], [0, -1, 0], 8))
        assert math.isnan(ap_quantized([], [], 8))


def test_ap_quantized_degenerate_range_puts_items_at_d_min_in_the_first_bin():
    # d_min == d_max == 2: the item at 2 lies in the range (bin 0), the item at 3 beyond it (the
    # last bin). The positive is alone in the first bin: precision 1, AP 1 (for any n_q).
    for n_q in (2, 3, 5):
        assert ap_quantized([2.0, 3.0], [1, 0], n_q, d_min=2.0, d_max=2.0) == pytest.approx(1.0, abs=1e-15), n_q
    # the negative at d_min comes first: AP = 1/2 (the positive shares no bin with it)
    assert ap_quantized([2.0, 3.0], [0, 1], 2, d_min=2.0, d_max=2.0) == pytest.approx(0.5, abs=1e-15)
    # every distance equal and no explicit range: one bin holding everything, AP = precision = 1/3
    assert ap_quantized([1.0, 1.0, 1.0], [1, 0, 0], 3) == pytest.approx(1 / 3, abs=1e-15)


def test_ap_quantized_empty_leading_bins_contribute_nothing():
    # d_min far below every distance: the first bins stay empty (no item, precision undefined)
    # and must contribute 0, whatever memory a scratch array would hold
    n_q = 4096
    for _ in range(20):
        scratch = np.full(n_q, np.nan)  # leave NaNs in memory that a fresh array could reuse
        del scratch
        got = ap_quantized([10.0, 10.5], [1, 0], n_q, d_min=0.0, d_max=11.0)
        assert got == pytest.approx(1.0, abs=1e-12)


def test_tie_aware_from_histograms_equals_list_with_minus_one_labels():
    hist_pos, hist_neg = [1, 0, 2, 1], [2, 3, 0, 1]
    d = [g for g, (p, n) in enumerate(zip(hist_pos, hist_neg)) for _ in range(p + n)]
    lab = [lb for p, n in zip(hist_pos, hist_neg) for lb in [1] * p + [-1] * n]
    assert ap_tie_aware_from_histograms(hist_pos, hist_neg) == pytest.approx(ap_tie_aware(d, lab), abs=1e-14)
