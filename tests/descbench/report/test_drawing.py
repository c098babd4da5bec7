"""What every figure shares (descbench.report.drawing): colours per descriptor, dashes per keypoint
set, the legend's words, a setting's values over the descriptors, and a task's rows."""

from __future__ import annotations

import matplotlib
import pandas as pd

from descbench.report.drawing import LINESTYLES, Run, descriptor_colours, legend, line_styles, px, setting

matplotlib.use("Agg")


def test_colour_by_descriptor_dash_by_keypoint_set():
    table = pd.DataFrame({"descriptor": ["a", "b", "a"], "keypoint_set": ["k1", "k1", "k2"]})
    st = line_styles(table)
    colours = descriptor_colours(["a", "b"])
    assert st[("a", "k1")]["color"] == st[("a", "k2")]["color"] == colours["a"] != colours["b"]
    assert (st[("a", "k1")]["linestyle"], st[("a", "k2")]["linestyle"]) == LINESTYLES[:2]
    assert st[("b", "k1")]["label"] == "b / k1"
    one_set = line_styles(table.iloc[:2])
    assert one_set[("a", "k1")]["label"] == "a"  # one keypoint set: the legend title names it


def test_legend_title_names_what_a_label_is():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    legend(ax, {("a", "k1"): {}})
    assert ax.get_legend() is None  # nothing drawn: no empty legend
    ax.plot([0, 1], [0, 1], label="a")
    legend(ax, {("a", "k1"): {}})
    assert ax.get_legend().get_title().get_text() == "descriptor (keypoint set k1)"
    legend(ax, {("a", "k1"): {}, ("a", "k2"): {}})
    assert ax.get_legend().get_title().get_text() == "descriptor / keypoint set"
    plt.close(fig)


def test_a_setting_over_the_descriptors_and_its_words():
    run = Run(None, [("k", "d1"), ("k", "d2"), ("k2", "d1")], {"matching": {"eps": 2.0}}, None, None, {},
              {"d1": {"matching": {"eps": 2.0}}, "d2": {"matching": {"eps": 3.5}}})
    assert setting(run, "matching", "eps") == [2.0, 3.5]
    assert px([2.0]) == "2 px" and px([2.0, 3.5]) == "2 or 3.5 px (per descriptor)"


def test_a_disabled_task_has_no_rows():
    class Off:
        def enabled(self, cfg):
            return False

    run = Run(None, [("k", "d")], {}, None, None, {}, {})
    assert list(run.rows(Off(), "x.parquet")) == []


def test_curve_points_keep_every_runs_extremes():
    """A curve of at most max_points points is drawn whole; a longer one at its first and last
    points and each equal run's smallest and largest y, found here by a loop over the runs."""
    import numpy as np

    from descbench.report.drawing import curve_points

    assert np.array_equal(curve_points(np.arange(7.0), max_points=7), np.arange(7))
    rng = np.random.default_rng(3)
    y = np.cumsum(rng.standard_normal(10_001))
    got = curve_points(y, max_points=100)
    k = -(-len(y) // 50)
    want = {0, len(y) - 1}
    for start in range(0, len(y), k):
        run = y[start:start + k]
        want |= {start + int(np.argmin(run)), start + int(np.argmax(run))}
    assert got.tolist() == sorted(want)
    assert len(got) <= 102 and got.dtype == np.int64
    assert y[got].min() == y.min() and y[got].max() == y.max()
