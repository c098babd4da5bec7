"""descbench.columns: parameter-dependent column names."""

from __future__ import annotations

import pytest

from descbench.columns import threshold_key


@pytest.mark.parametrize("t, key", [(1, "1"), (1.0, "1"), (1.5, "1.5"), (10, "10"), (0.25, "0.25"), ("3", "3"), (2.50, "2.5")])
def test_threshold_key_is_the_shortest_float_text(t, key):
    assert threshold_key(t) == key


def test_equal_thresholds_give_one_key_and_different_ones_different_keys():
    assert threshold_key(3) == threshold_key(3.0) == threshold_key("3.0")
    keys = [threshold_key(t) for t in (0.5, 1, 1.5, 2, 5, 10)]
    assert len(set(keys)) == len(keys)
