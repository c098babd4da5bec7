"""The end-of-run summary: degenerate cases are named, NaN is 'no data', never a number."""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.report.summary import run_summary


def test_summary_names_every_degenerate_case(tmp_path):
    pd.DataFrame({
        "descriptor": ["sift", "orb"], "keypoint_set": ["s", "s"], "true_map_micro": [0.81234, np.nan],
        "viewpoint_map": [0.7, np.nan], "illumination_map": [0.9, np.nan], "keypoint_verification_ap": [0.5, np.nan],
        "mma_at_3": [0.6, 0.0], "homography_accuracy_at_3": [1.0, 0.0], "empty_images": [0, 3],
        "n_distractor_scenes_min": [10, 2], "pairs_without_matches": [0, 5], "matching_pairs": [40, 40],
        "pairs_without_keypoints": [0, 7],
    }).to_csv(tmp_path / "comparison.csv", index=False)
    text = run_summary(tmp_path, distractor_scenes=10)
    assert "0.8123" in text and "n/a (no data)" in text and "nan" not in text.lower().replace("n/a", "")
    assert "orb on s: 3 image(s) had no keypoint" in text
    assert "orb on s: no data for true_map_micro, viewpoint_map, illumination_map, keypoint_verification_ap" in text
    assert "orb on s: verification used only 2 distractor scene(s)" in text
    assert "orb on s: 5 of 40 pair(s) without any mutual-nearest-neighbour match" in text
    assert "orb on s: 7 pair(s) with an image without keypoints (no data" in text
    assert "sift on s:" not in text
    assert str(tmp_path / "comparison.md") in text


def test_no_report_no_summary(tmp_path):
    assert run_summary(tmp_path) == ""
