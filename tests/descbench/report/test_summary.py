"""The end-of-run summary: degenerate cases are named, NaN is 'no data', never a number."""

from __future__ import annotations

import numpy as np
import pandas as pd

from descbench.report.summary import run_summary, untimed_rows_note


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
    assert "pipelines" not in text  # no matcher stage, no pipelines table
    (tmp_path / "pipelines.md").write_text("| x |\n")
    assert f"pipelines          {tmp_path / 'pipelines.md'}" in run_summary(tmp_path, distractor_scenes=10)


def test_no_report_no_summary(tmp_path):
    assert run_summary(tmp_path) == ""


# ----------------------------------------------------------------------------- sweep settings, the workbench's numbers


def _table(**extra):
    t = pd.DataFrame({
        "descriptor": ["sift", "sift", "sift"], "keypoint_set": ["sift", "sift-grid-0", "sift-grid-1"],
        "true_map_micro": [0.5, 0.6, 0.7], "viewpoint_map": [0.5, 0.6, 0.7], "illumination_map": [0.5, 0.6, 0.7],
        "keypoint_verification_ap": [0.4, 0.4, 0.4],
    })
    for k, v in extra.items():
        t[k] = v
    return t


SWEEP = {"sweep": [np.nan, "grid", "grid"], "sweep:border_px": [np.nan, 20, 60],
         "sweep:params.contrast_threshold": [np.nan, 0.03, 0.06]}
WORKBENCH = {"workbench_verification_map": [0.12345, 0.2, 0.3], "workbench_retrieval_map": [0.5, 0.6, 0.7]}


def _lines(text, start):
    return [ln.split() for ln in text.splitlines() if ln.strip().startswith(start)]


def test_summary_shows_each_variants_sweep_settings(tmp_path):
    _table(**SWEEP).to_csv(tmp_path / "comparison.csv", index=False)
    text = run_summary(tmp_path)
    header = _lines(text, "descriptor")[0]
    assert header[:5] == ["descriptor", "keypoint_set", "sweep", "sweep:border_px", "sweep:params.contrast_threshold"]
    rows = {r[1]: r[2:5] for r in _lines(text, "sift")}
    assert rows == {"sift": ["-", "-", "-"], "sift-grid-0": ["grid", "20", "0.03"], "sift-grid-1": ["grid", "60", "0.06"]}
    assert "sweep, sweep:<path>: the sweep (config `sweeps:`)" in text


def test_summary_shows_the_workbench_numbers_labelled(tmp_path):
    _table(**WORKBENCH).to_csv(tmp_path / "comparison.csv", index=False)
    text = run_summary(tmp_path)
    header = _lines(text, "descriptor")[0]
    assert header[-2:] == ["workbench_verification_map", "workbench_retrieval_map"]
    assert _lines(text, "sift")[0][-2:] == ["0.1235", "0.5000"]
    assert "workbench_*: the C++ DescriptorWorkbench's own keypoint verification / retrieval numbers" in text
    # without them (verification.convention: descbench) neither the columns nor the legend
    _table().to_csv(tmp_path / "comparison.csv", index=False)
    plain = run_summary(tmp_path)
    assert "workbench" not in plain and "sweep" not in plain


def test_comparison_markdown_shows_sweep_settings_and_the_workbench_numbers():
    from descbench.report.table import to_markdown

    t = _table(**SWEEP, **WORKBENCH, keypoint_retrieval_ap=[0.3, 0.3, 0.3], empty_images=[0, 0, 0])
    t["sweep:params.scales"] = [np.nan, [1, 2], "a|b"]  # a list value; a pipe cannot break the table
    md = to_markdown(t)
    lines = md.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:6] == ["descriptor", "keypoint_set", "sweep", "sweep:border_px", "sweep:params.contrast_threshold",
                          "sweep:params.scales"]
    # the workbench's numbers after the task headlines, before the counts
    assert header[-3:] == ["workbench_verification_map", "workbench_retrieval_map", "empty_images"]
    assert lines[2].startswith("| sift | sift | - | - | - | - |")
    assert lines[3].startswith("| sift | sift-grid-0 | grid | 20 | 0.03 | [1, 2] |")
    assert lines[4].startswith("| sift | sift-grid-1 | grid | 60 | 0.06 | a\\|b |") and "| 0.3000 | 0.7000 | 0 |" in lines[4]
    assert "\nsweep, sweep:<path>: " in md and "\nworkbench_*: the C++ DescriptorWorkbench's" in md
    # a table without either has no legend (the default demo's comparison.md is unchanged)
    assert to_markdown(_table()).count("\n") == 2 + 3


def test_summary_says_which_rows_hold_jobs_without_a_timing_file(tmp_path):
    # results made before descbench recorded times: their jobs are counted, not timed (descbench.report.timings)
    pd.DataFrame({"descriptor": ["sift", "orb"], "keypoint_set": ["s", "s"], "true_map_micro": [0.8, 0.7]}).to_csv(
        tmp_path / "comparison.csv", index=False)
    assert "timing file" not in run_summary(tmp_path)  # no timings.csv: nothing to say
    t = pd.DataFrame({"descriptor": ["sift", "orb"], "keypoint_set": ["s", "s"], "n_jobs": [6, 6], "n_jobs_timed": [6, 4]})
    t.to_csv(tmp_path / "timings.csv", index=False)
    text = run_summary(tmp_path)
    assert ("1 of 2 rows hold jobs without a timing file (results made before descbench recorded times): their times are "
            "NaN in timings.csv; to time them: snakemake --cores N --forcerun keypoints descriptors score") in text
    assert untimed_rows_note(t.assign(n_jobs_timed=6)) is None
    assert str(tmp_path / "timings.md") in text


def test_summary_gives_the_inspector_command_for_the_first_rows(tmp_path):
    """With the matching task on, the end of a run says how to open the per-pair inspector for its
    first descriptor against the next one on the same keypoint set; without it, no such line."""
    import shlex
    import sys

    import pandas as pd

    from descbench.report.summary import run_summary

    rep = tmp_path / "results" / "demo" / "report"
    rep.mkdir(parents=True)
    pd.DataFrame({"descriptor": ["sift", "orb", "rootsift"], "keypoint_set": ["sift", "orb", "sift"],
                  "true_map_micro": [0.8, 0.5, 0.9], "mma_at_3": [0.9, 0.6, 0.92]}).to_csv(rep / "comparison.csv", index=False)
    text = run_summary(rep)
    line = [x for x in text.splitlines() if x.strip().startswith("inspector")]
    assert line == [f"  inspector          {shlex.quote(sys.executable)} -m descbench inspect --results {tmp_path / 'results' / 'demo'} "
                    "--keypoint-set sift --descriptor sift --vs rootsift --out inspect.html (per-pair matches, where it fails)"]
    assert "inspector page" not in text
    (rep / "inspector.html").write_text("<html></html>")  # the report's page, when the workflow wrote one
    assert f"  inspector page     {rep / 'inspector.html'} (per-pair matches" in run_summary(rep)
    pd.DataFrame({"descriptor": ["sift"], "keypoint_set": ["sift"], "true_map_micro": [0.8]}).to_csv(rep / "comparison.csv", index=False)
    (rep / "inspector.html").unlink()
    assert "inspector" not in run_summary(rep)
