"""The scripts under benchmarks/ that other benchmarks and the README's figures rest on: the
HPatches stand-in writer, bench_workflow's log patterns, bench_resources' shared steps.

The scripts are not a package: each is loaded from its file, as ``python benchmarks/<name>.py``
would run it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.datasets.layout import read_homography

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- make_hpatches_standin


@pytest.mark.parametrize("scene", ["i_ajuntament", "v_abstract"])
def test_standin_scene_has_images_and_homographies(tmp_path, scene):
    """One scene in the HPatches layout; an i_ scene's homographies are the identity."""
    standin = load("make_hpatches_standin")
    name, w, h = standin.generate_scene(scene, tmp_path, seed=0)
    assert name == scene
    for k in range(1, 7):
        assert cv2.imread(str(tmp_path / scene / f"{k}.ppm")).shape == (h, w, 3)
    hs = [read_homography(tmp_path / scene / f"H_1_{k}") for k in range(2, 7)]
    assert all(np.array_equal(H, np.eye(3)) for H in hs) == scene.startswith("i_")


# ----------------------------------------------------------------------------- bench_workflow


def test_workflow_watcher_and_job_log_patterns_are_two(tmp_path):
    """``JOB_LINE`` finds Snakemake's job announcement (the 'before its first job' figure);
    ``JOB_LOG_LINE`` the last line a job writes to its log. One name for both made the first
    figure never found."""
    bw = load("bench_workflow")
    assert bw.JOB_LINE.search("Building DAG of jobs...\nrule keypoints:\n    input: x\n")
    assert bw.JOB_LINE.search("localrule all:\n")
    done = "descbench: descriptors done in 1.50 s wall, 1.20 s CPU, max RSS 210 MiB"
    assert not bw.JOB_LINE.search(done)
    log = tmp_path / "logs" / "descriptors" / "a.log"
    log.parent.mkdir(parents=True)
    log.write_text("rule descriptors:\n" + done + "\n")
    [(path, m)] = list(bw.job_lines(tmp_path / "logs"))
    assert path == log and m.groups() == ("descriptors", "1.50", "1.20", "210")


def test_count_rounds_counts_snakemakes_scheduling_rounds_of_a_run(tmp_path):
    """``--count-rounds``: a run with benchmarks/smkrounds on its PYTHONPATH writes the rounds
    file; four independent jobs on one core: a round per finished job (the first selects from
    four ready jobs), each starting a re-evaluation timer. A process without a scheduler (a job's
    interpreter importing Snakemake) writes nothing."""
    import json
    import subprocess

    bw = load("bench_workflow")
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: expand("out/{i}.txt", i=range(4))\n\n'
        'rule one:\n    output: "out/{i}.txt"\n    shell: "touch {output}"\n\n'
        # a 600 s timespan, so that no timer fires during the run; its pending timers cancelled at the end
        'onsuccess:\n    import threading\n'
        '    [t.cancel() for t in threading.enumerate() if isinstance(t, threading.Timer)]\n')
    out = tmp_path / "rounds.json"
    env = bw.rounds_env(out)
    run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(tmp_path), "-s", str(tmp_path / "Snakefile"),
                          "--max-jobs-per-timespan", "100/600s"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    counts = bw.read_rounds(out)
    # rounds with ready jobs: 4 'one' jobs one after the other, then 'all'
    assert counts["rounds"] == 5 and counts["ready_max"] == 4 and counts["ready_sum"] == 4 + 3 + 2 + 1 + 1
    assert counts["timers"] == 5 and counts["wakeups"] >= 6 and counts["selection_s"] > 0
    assert sum(m["rounds"] for m in counts["series"].values()) == 5
    out.unlink()
    subprocess.run([sys.executable, "-c", "import snakemake.scheduling.job_scheduler"], env=env, check=True, timeout=120)
    assert bw.read_rounds(out) is None


def test_job_figures_put_matching_and_pipeline_scoring_in_their_own_categories(tmp_path):
    """The match and score_pipelines jobs (logs/match/, logs/pipelines/) are categories of their
    own in both scripts' job figures, not one-off jobs; pipelines_report is a one-off job."""
    bw, bl = load("bench_workflow"), load("bench_learned")
    logs = tmp_path / "logs"
    for rel, cmd in {"match/sift/sift/mnn/batch000.log": "match", "match/sift/sift/mnn/batch001.log": "match",
                     "pipelines/sift/sift/mnn/batch000.log": "score-pipelines", "pipelines_report.log": "pipelines-report",
                     "score/sift/sift/batch000.log": "score", "descriptors/sift/sift/batch000.log": "descriptors"}.items():
        (logs / rel).parent.mkdir(parents=True, exist_ok=True)
        (logs / rel).write_text(f"descbench: {cmd} done in 1.50 s wall, 2.00 s CPU, max RSS 10 MiB\n")
    jobs = bw.read_job_logs(tmp_path)
    assert {k: (g["jobs"], g["cpu_s"]) for k, g in jobs.items()} == {
        "matching": (2, 4.0), "pipeline scoring": (1, 2.0), "pipelines_report": (1, 2.0), "scoring": (1, 2.0), "descriptors": (1, 2.0)}
    cats = bl.per_category(tmp_path, bw)
    assert {k: g["jobs"] for k, g in cats.items()} == {
        "matching": 2, "pipeline scoring": 1, "once: pipelines_report": 1, "scoring": 1, "descriptors: sift": 1}


# ----------------------------------------------------------------------------- bench_resources


class FakeExperiment:
    """Records the jobs ``descriptor_and_score_rows`` runs; each measurement names its job."""

    def __init__(self):
        self.calls = []

    def counts(self, kpset, scene):
        self.calls.append(("counts", kpset, scene))
        return [10, 20, 30, 40, 50, 60]

    def descriptors(self, kpset, desc, scene):
        self.calls.append(("descriptors", kpset, desc, scene))
        return {"wall_s": f"{desc}@{scene}"}

    def distractors(self, kpset, desc):
        self.calls.append(("distractors", kpset, desc))
        return {}

    def score(self, kpset, desc, scene):
        self.calls.append(("score", kpset, desc, scene))
        return {"wall_s": f"score@{scene}"}


def test_descriptor_and_score_rows_runs_and_rows():
    br = load("bench_resources")
    exp = FakeExperiment()
    rows = br.descriptor_and_score_rows(exp, "kp", ["sift", "hardnet"], {"series": "s"})
    big, small = br.BIG, br.SMALL
    assert exp.calls == [("counts", "kp", big), ("descriptors", "kp", "sift", big), ("descriptors", "kp", "hardnet", big),
                         ("descriptors", "kp", "sift", small), ("distractors", "kp", "sift"), ("score", "kp", "sift", big)]
    kp = {"kp_max": 60, "kp_scene": 210}
    assert rows == [{"series": "s", "job": "descriptors", "what": "sift", **kp, "wall_s": f"sift@{big}"},
                    {"series": "s", "job": "descriptors", "what": "hardnet", **kp, "wall_s": f"hardnet@{big}"},
                    {"series": "s", "job": "score", "what": "sift", **kp,
                     "pairs_gkp2": round((10 * 20 + 10 * 30 + 10 * 40 + 10 * 50 + 10 * 60) / 1e6, 3), "wall_s": f"score@{big}"}]
    assert [list(r) for r in rows][0][:5] == ["series", "job", "what", "kp_max", "kp_scene"]  # the JSON's key order


def write_scene(d: Path, side: int, value: int) -> None:
    d.mkdir(parents=True)
    for k in range(1, 7):
        cv2.imwrite(str(d / f"{k}.ppm"), np.full((side, side, 3), value, np.uint8))
        if k > 1:
            (d / f"H_1_{k}").write_text("2 0 1\n0 2 3\n0 0 1\n")


@pytest.mark.parametrize("distractor_scene", [True, False])
def test_scene_data_upscales_or_copies_and_keeps_what_is_there(tmp_path, distractor_scene):
    br = load("bench_resources")
    src = tmp_path / "src"
    write_scene(src / br.BIG, br.SRC_SIDE, 7)
    write_scene(src / br.SMALL, 8, 9)
    own = br.scene_data(src, tmp_path / "own", br.SRC_SIDE, distractor_scene)
    assert (own / br.BIG / "H_1_2").read_bytes() == (src / br.BIG / "H_1_2").read_bytes()  # copied at its own side
    assert (own / br.SMALL).exists() == distractor_scene
    (own / br.BIG / "1.ppm").write_bytes(b"kept")
    br.scene_data(src, tmp_path / "own", br.SRC_SIDE, distractor_scene)  # a rerun in the same work folder
    assert (own / br.BIG / "1.ppm").read_bytes() == b"kept"
    up = br.scene_data(src, tmp_path / "up", 2 * br.SRC_SIDE, distractor_scene)
    assert cv2.imread(str(up / br.BIG / "6.ppm")).shape == (2 * br.SRC_SIDE, 2 * br.SRC_SIDE, 3)
    # the homography in the upscaled pixels: S H S^-1 with S = diag(2, 2, 1)
    np.testing.assert_allclose(read_homography(up / br.BIG / "H_1_2"), [[2, 0, 2], [0, 2, 6], [0, 0, 1]])
    assert (up / br.SMALL).exists() == distractor_scene
    if distractor_scene:
        assert cv2.imread(str(up / br.SMALL / "1.ppm")).shape == (8, 8, 3)  # as it is
    (up / br.BIG / "1.ppm").write_bytes(b"kept")
    br.scene_data(src, tmp_path / "up", 2 * br.SRC_SIDE, distractor_scene)
    assert (up / br.BIG / "1.ppm").read_bytes() == b"kept"


# ----------------------------------------------------------------------------- bench_pipelines


def test_bench_pipelines_measures_a_network_and_a_matcher(tmp_path):
    """One tiny run through descbench's own paths: a joint network's images/s and keypoints, a
    matcher's pairs/s on that network's features, every line also in the JSON file."""
    import json

    bp = load("bench_pipelines")
    out = tmp_path / "b.json"
    assert bp.main(["--nets", "xfeat", "--matchers", "mnn", "--size", "128x96", "--repeats", "1", "--json", str(out)]) == 0
    res = json.loads(out.read_text())["results"]
    net = next(r for r in res if r.get("net") == "xfeat")
    mnn = next(r for r in res if r.get("matcher") == "mnn")
    assert net["images_per_s"] > 0 and net["keypoints"] > 0 and net["dim"] == 64
    assert mnn["pairs_per_s"] > 0 and 0 < mnn["matches"] <= min(mnn["keypoints"])


# ----------------------------------------------------------------------------- compare_tables


def test_compare_tables_reports_the_largest_difference_and_missing_tables(tmp_path, capsys):
    """Equal infinities (failed estimates) and NaN on both sides are equal; a finite difference is
    reported per column; a NaN on one side only is infinitely far; a missing table fails the run."""
    import pandas as pd

    ct = load("compare_tables")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pd.DataFrame({"x": [1.0, np.inf, np.nan], "y": [0.5, 0.25, 0.0], "d": ["cpu"] * 3}).to_parquet(a / "t.parquet")
    pd.DataFrame({"x": [1.0, np.inf, np.nan], "y": [0.5, 0.25 + 3e-4, 0.0], "d": ["cuda"] * 3}).to_parquet(b / "t.parquet")
    assert ct.compare(a, b) == 0
    out = capsys.readouterr().out
    assert "largest differences: y 0.0003" in out and "text differs: d (3 cells)" in out and "x " not in out.split("differences:")[1].split(";")[0]
    pd.DataFrame({"x": [1.0, 2.0, np.nan]}).to_parquet(a / "u.parquet")
    pd.DataFrame({"x": [1.0, 2.0, 3.0]}).to_parquet(b / "u.parquet")
    pd.DataFrame({"x": [1.0]}).to_parquet(a / "only_a.parquet")
    assert ct.compare(a, b) == 1
    out = capsys.readouterr().out
    assert "u.parquet: 3 rows; largest differences: x inf" in out and "only_a.parquet: only in A" in out
    assert "3 tables; largest numeric difference inf; 1 missing" in out
