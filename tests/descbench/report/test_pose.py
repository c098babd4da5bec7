"""descbench.report.pose: the Markdown header names every estimator, its thresholds and the
libraries' versions; the Markdown columns follow the config; the cumulative figure's curves are the
fraction of pairs within each error (hand-counted), at each row's best threshold."""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.report.drawing import pyplot
from descbench.report.pose import CUMULATIVE_MAX_DEG, draw_cumulative, header, markdown_columns

CFG = {"pose": {"estimators": {"opencv": {"ransac_th": [0.5, 1.0]}, "usac_magsac": {}}, "auc_thresholds": [5, 10, 20],
                "epipolar_thresholds": [1e-4, 5e-4, 1e-3]}}


def test_the_header_says_how_the_aucs_were_measured():
    text = header(CFG, {"opencv": "5.0.0", "poselib": None})
    assert "at 5/10/20 degrees" in text and "opencv: ransac_th 0.5, 1 px (the best mean AUC reported)" in text
    assert "usac_magsac: ransac_th 0.5 px;" not in text and "usac_magsac: ransac_th 0.5 px." in text
    assert "Libraries: opencv 5.0.0." in text  # an absent library is not named
    # an installed library is named where an estimator ran on it, and only there
    assert "Libraries: opencv 5.0.0." in header(CFG, {"opencv": "5.0.0", "poselib": "2.0.5", "pycolmap": "4.2.1"})
    both = {**CFG, "pose": {**CFG["pose"], "estimators": {"pycolmap": {}, "poselib": {}}}}
    assert "Libraries: opencv 5.0.0, poselib 2.0.5, pycolmap 4.2.1." in header(both, {"opencv": "5.0.0", "poselib": "2.0.5",
                                                                                      "pycolmap": "4.2.1"})
    assert header({**CFG, "protocol": "gluefactory_megadepth1500"}, {}).startswith("Protocol gluefactory_megadepth1500. Relative")


def test_markdown_columns_follow_the_config():
    cols = ["keypoint_set", "descriptor", "matcher", "matches", "epi_prec_at_0.0001", "epi_prec_at_0.0005", "epi_prec_at_0.001",
            *(f"{e}_{c}" for e in ("opencv", "usac_magsac") for c in ("auc_at_5", "auc_at_10", "auc_at_20", "mAA", "ransac_th"))]
    table = pd.DataFrame([{c: 0 for c in cols} | {"weights": ""}])
    assert markdown_columns(table, CFG) == cols  # no weights column without a network
    table.loc[0, "weights"] = "superpoint: RANDOM(seed=0)"
    assert markdown_columns(table, CFG)[-1] == "weights"


def test_the_cumulative_curves_count_pairs_within_each_error():
    plt = pyplot()
    est = pd.DataFrame({"estimator": ["opencv"] * 6 + ["usac_magsac"] * 3, "ransac_th": [0.5] * 3 + [1.0] * 3 + [0.5] * 3,
                        "pose_error": [1.0, 4.0, np.inf, 2.0, 50.0, np.nan, 3.0, 3.0, 9.0]})
    table = pd.DataFrame([{"keypoint_set": "k", "descriptor": "d", "matcher": "m", "opencv_ransac_th": 0.5, "usac_magsac_ransac_th": 0.5}])
    fig = draw_cumulative({("k", "d", "m"): est}, table, CFG, plt)
    (line_o,), (line_u,) = fig.axes[0].get_lines(), fig.axes[1].get_lines()
    x = line_o.get_xdata()
    assert x[0] == 0 and x[-1] == CUMULATIVE_MAX_DEG
    at = (lambda line, v: float(line.get_ydata()[np.argmin(abs(x - v))]))
    assert (at(line_o, 1.0), at(line_o, 4.0), at(line_o, 30.0)) == (1 / 3, 2 / 3, 2 / 3)  # the failure never counts
    assert (at(line_u, 2.9), at(line_u, 3.0), at(line_u, 9.0)) == (0.0, 2 / 3, 1.0)
    plt.close(fig)
