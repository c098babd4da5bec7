"""Plots: the ROC averaging by hand; every figure written (PNG + SVG) by the workflow."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from descbench.report.plots import mean_roc


def test_mean_roc_is_the_vertical_average_of_step_curves():
    roc = pd.DataFrame({
        "scene": ["a"] * 3 + ["b"] * 3, "pair": [2] * 6, "point": [0, 1, 2] * 2,
        "fpr": [0.0, 0.5, 1.0, 0.0, 0.2, 1.0], "tpr": [0.0, 0.8, 1.0, 0.4, 0.6, 1.0],
    })
    got = mean_roc(roc, np.array([0.0, 0.1, 0.2, 0.5, 0.9, 1.0]))
    # a: 0, 0, 0, .8, .8, 1   b: .4, .4, .6, .6, .6, 1
    np.testing.assert_allclose(got, [0.2, 0.2, 0.3, 0.7, 0.7, 1.0])
    assert mean_roc(roc.iloc[:0], np.array([0.5])) is None


def test_descriptor_colours_stay_distinct_up_to_20():
    from descbench.report.plots import descriptor_colours

    ten = descriptor_colours([f"d{i}" for i in range(10)])
    assert len(set(ten.values())) == 10 and ten["d0"] == matplotlib.colormaps["tab10"](0)  # the demo's colours
    twenty = descriptor_colours([f"d{i}" for i in range(20)])
    assert len(set(twenty.values())) == 20
