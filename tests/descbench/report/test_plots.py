"""Plots: the colours, and the words on every figure (the ROC averaging by hand:
tests/descbench/tasks/test_matching.py)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd


def test_descriptor_colours_stay_distinct_up_to_20():
    from descbench.report.drawing import descriptor_colours

    ten = descriptor_colours([f"d{i}" for i in range(10)])
    assert len(set(ten.values())) == 10 and ten["d0"] == matplotlib.colormaps["tab10"](0)  # the demo's colours
    twenty = descriptor_colours([f"d{i}" for i in range(20)])
    assert len(set(twenty.values())) == 20


# ------------------------------------------------------------------ the words on the figures
# Every figure is drawn from small synthetic result rows and read back from matplotlib's objects
# (titles, axis labels, legend, notes), not from pixels.

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from descbench.report.figures import CAPTIONS, FIGURES  # noqa: E402
from descbench.config import effective_config  # noqa: E402
from descbench.report.drawing import line_styles  # noqa: E402
from descbench.report.plots import DRAW  # noqa: E402

MMA_T = [1, 2, 3]
# internal symbols that a reader of a figure cannot decode without the code or the captions
JARGON = ("R = 1", "MMA", "mAP", "TPR", "FPR", "seeds", "002", "true_map", "gt:")


def base_cfg(**over) -> dict:
    cfg = {
        "matching": {"enabled": True, "mma_thresholds": MMA_T, "classifier_epsilon_px": 2.0, "repeatability_px": 3.0},
        "verification": {"enabled": True, "candidates": "nearest"},
        "scoring": {"tau_px": 3.0},
        "descriptors": {"d1": {}, "d2": {}},
    }
    for key, value in over.items():
        section, _, name = key.partition("__")
        if name:
            cfg[section] = {**cfg[section], name: value}
        else:
            cfg[section] = value
    return cfg


class FakeRun:
    """What the figures read (plots.Run's attributes and rows()), from synthetic rows."""

    def __init__(self, tmp_path, cfg, combos=(("k1", "d1"), ("k1", "d2")), scenes=("i_a", "v_b")):
        self.cfg, self.combos, self.report_dir = cfg, list(combos), tmp_path
        rows = []
        for ks, d in self.combos:
            r = {"descriptor": d, "keypoint_set": ks}
            for prefix in ("mma_at_", "mma_i_at_", "mma_v_at_"):
                r.update({f"{prefix}{t}": 0.2 * t for t in MMA_T})
            rows.append(r)
        self.table = pd.DataFrame(rows)
        self.styles = line_styles(self.table)
        self.effective = {d: effective_config(cfg, d) for _, d in self.combos}
        pd.DataFrame([{"scene": s, "descriptor": d, "keypoint_set": ks, "true_map": 0.5}
                      for ks, d in self.combos for s in scenes]).to_csv(tmp_path / "per_scene.csv", index=False)
        sets = list(dict.fromkeys(ks for ks, _ in self.combos))
        pd.DataFrame({"keypoint_set": sets, "keypoints_per_image_mean": [100.0] * len(sets),
                      "repeatability": [0.5] * len(sets)}).to_csv(tmp_path / "keypoint_stats.csv", index=False)

    def rows(self, task, kind, columns=None, where=None):
        # what Run.rows does with columns / where (load_rows): a figure that reads a column it did
        # not ask for fails here as it would on real files
        if task.section is not None and not self.cfg[task.section]["enabled"]:
            return
        for ks, d in self.combos:
            df = self.data(task.name, kind, d)
            if where is not None:
                df = df[df[where[0]] == where[1]]
            if columns is not None:
                df = df[[c for c in columns if c in df.columns]]
            yield ks, d, df

    def data(self, task, kind, d):
        if kind == "pairs.parquet":
            return pd.DataFrame({"n_keypoints_1": [5, 5], "n_keypoints_2": [5, 5], "corner_error": [1.0, np.inf]})
        if kind == "roc.parquet":
            return pd.DataFrame({"scene": ["a"] * 3, "pair": [2] * 3, "point": [0, 1, 2], "fpr": [0.0, 0.3, 1.0],
                                 "tpr": [0.0, 0.7, 1.0], "matcher": ["threshold"] * 3})
        if kind == "list.parquet":
            if self.cfg["verification"]["candidates"] == "all":  # no list is stored
                return pd.DataFrame({"distance": np.zeros(0), "label": np.zeros(0, np.int8)})
            return pd.DataFrame({"distance": [0.1, 0.2, 0.3, 0.4], "label": [1, -1, 1, -1]})
        if kind == "queries.parquet":
            return pd.DataFrame({"rank": [1.0, 1.5, 2.0, 7.0, np.nan]})
        raise AssertionError(kind)


def words(fig) -> dict:
    """Every piece of text of a figure, by role."""
    out = {"suptitle": fig._suptitle.get_text() if fig._suptitle else "", "titles": [], "xlabels": [], "ylabels": [],
           "legend_titles": [], "legend": [], "notes": []}
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out["titles"].append(ax.get_title())
        out["xlabels"].append(ax.get_xlabel())
        out["ylabels"].append(ax.get_ylabel())
        leg = ax.get_legend()
        if leg is not None:
            out["legend_titles"].append(leg.get_title().get_text())
            out["legend"] += [t.get_text() for t in leg.get_texts()]
        out["notes"] += [t.get_text() for t in ax.texts]
    return out


def draw(name, run):
    import matplotlib

    matplotlib.use("Agg")
    fig = DRAW[name](run, plt)
    try:
        return words(fig)
    finally:
        plt.close(fig)


def flat(w: dict) -> str:
    return " | ".join([w["suptitle"], *(s for v in w.values() if isinstance(v, list) for s in v)])


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_has_a_title_plain_axis_labels_and_no_jargon(tmp_path, name):
    w = draw(name, FakeRun(tmp_path, base_cfg()))
    text = flat(w)
    assert w["suptitle"] or all(w["titles"]), (name, w)  # each figure (or each panel) says what it shows
    assert all(w["xlabels"]) and any(w["ylabels"]), (name, w)
    for word in JARGON:
        assert word not in text, (name, word, text)
    assert "R = 1" not in CAPTIONS[name]


def test_roc_and_pr_titles_name_their_matcher_and_list(tmp_path):
    roc = draw("roc", FakeRun(tmp_path, base_cfg()))
    assert roc["titles"] == ["ROC of the threshold matcher over all keypoint pairs\n"
                             "(a pair is correct when image 1's keypoint projects within 2 px of image k's)"]
    assert roc["xlabels"] == ["false positive rate (fraction of wrong pairs accepted)"]
    assert roc["ylabels"] == ["true positive rate (fraction of correct pairs accepted)"]
    assert "chance" in roc["legend"] and not roc["notes"]
    pr = draw("verification_pr", FakeRun(tmp_path, base_cfg()))
    assert pr["titles"] == ["Precision-recall of keypoint verification, one list of all scenes:\n"
                            "each query's nearest keypoint in images 2-6 and in the distractor images"]
    assert pr["xlabels"] == ["recall (fraction of the correct keypoints accepted)"]
    assert pr["ylabels"] == ["precision (fraction of the accepted\nkeypoints that are correct)"]
    assert not pr["notes"]


def test_roc_title_gives_each_descriptors_own_epsilon(tmp_path):
    cfg = base_cfg(descriptors={"d1": {}, "d2": {"overrides": {"matching": {"classifier_epsilon_px": 3.5}}}})
    roc = draw("roc", FakeRun(tmp_path, cfg))
    assert "within 2 or 3.5 px (per descriptor) of image k's" in roc["titles"][0]
    one = draw("roc", FakeRun(tmp_path, cfg, combos=(("k1", "d2"),)))
    assert "within 3.5 px of image k's" in one["titles"][0]


def test_figures_without_data_say_why(tmp_path):
    off = FakeRun(tmp_path, base_cfg(matching__enabled=False, verification__enabled=False))
    for name in ("mma", "homography_accuracy", "roc"):
        assert draw(name, off)["notes"] == ["nothing to show:\nmatching is disabled (matching.enabled: false)"], name
    assert draw("verification_pr", off)["notes"] == [
        "nothing to show:\nkeypoint verification is disabled (verification.enabled: false)"]
    no_threshold = FakeRun(tmp_path, base_cfg())
    no_threshold.data = lambda task, kind, d: pd.DataFrame(
        {"scene": ["a"], "pair": [2], "point": [0], "fpr": [0.0], "tpr": [0.0], "matcher": ["nn"]})
    assert draw("roc", no_threshold)["notes"] == ["nothing to show:\nmatching.classifier_matchers leaves out\nthe threshold matcher"]
    everything = FakeRun(tmp_path, base_cfg(verification__candidates="all"))
    assert draw("verification_pr", everything)["notes"] == [
        "nothing to show:\nverification.candidates: all keeps no list\n(its AP is computed from counts; see the tables)"]


def test_legend_title_says_what_a_label_names(tmp_path):
    one_set = draw("homography_accuracy", FakeRun(tmp_path, base_cfg()))
    assert one_set["legend_titles"] == ["descriptor (keypoint set k1)"] and one_set["legend"] == ["d1", "d2"]
    two_sets = draw("homography_accuracy", FakeRun(tmp_path, base_cfg(), combos=(("k1", "d1"), ("k2", "d1"))))
    assert two_sets["legend_titles"] == ["descriptor / keypoint set"] and two_sets["legend"] == ["d1 / k1", "d1 / k2"]


def test_rank_histogram_and_per_scene_words(tmp_path):
    rank = draw("rank_histogram", FakeRun(tmp_path, base_cfg()))
    assert rank["ylabels"] == ["fraction of the queries that have\na correct keypoint in image k"]
    assert rank["xlabels"] == ["rank of the correct keypoint among image k's keypoints\n(1 = the nearest descriptor)"]
    scenes = draw("per_scene_map", FakeRun(tmp_path, base_cfg()))
    assert scenes["titles"] == ["illumination scenes (i_)", "viewpoint scenes (v_)"]
    assert scenes["xlabels"] == ["mean average precision"] * 2
    # a folder dataset's scenes (named neither i_ nor v_) get a panel of their own instead of vanishing
    folder = draw("per_scene_map", FakeRun(tmp_path, base_cfg(), scenes=("i_a", "garden")))
    assert folder["titles"] == ["illumination scenes (i_)", "viewpoint scenes (v_)", "other scenes"]


def test_mma_and_keypoint_stats_words(tmp_path):
    mma = draw("mma", FakeRun(tmp_path, base_cfg()))
    assert mma["suptitle"] == "Matching accuracy: mutual nearest-neighbour matches of image 1 in images 2-6"
    assert mma["titles"] == ["all scenes", "illumination scenes (i_)", "viewpoint scenes (v_)"]
    assert mma["xlabels"] == ["reprojection error threshold (px)"] * 3
    assert mma["ylabels"][0] == "fraction of matches within the threshold\n(mean over image pairs)"
    stats = draw("keypoint_stats", FakeRun(tmp_path, base_cfg(matching__repeatability_px=2.5)))
    assert stats["titles"] == ["Keypoints per image", "Repeatability within 2.5 px"]
    assert stats["ylabels"][1] == "fraction of keypoints found again\nwithin 2.5 px in the other image"
