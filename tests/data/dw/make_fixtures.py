"""Builds the files in this folder: files in the exact formats of the C++ DescriptorWorkbench
(F-Sossi/DescriptorWorkbench, commit b834e17), read by tests/interop/test_dw_interop.py.

    python tests/data/dw/make_fixtures.py --dwb /path/to/DescriptorWorkbench

needs g++, the sqlite3 shell and the workbench's checkout (its own results export script is run).
Keypoints: OpenCV SIFT on the demo scene v_coins (seed 0, tests/conftest.py's ``pristine``), per
image the 30 strongest inside a 40 px border, in that order (the workbench's detector sets);
image 5 has none (every keypoint too close to the border, say), so the workbench writes no file
for it. Metric values in the results files are made up: the formats are the point.

- ``export_csv/v_coins/<k>ppm.csv``: ``keypoint_manager export-csv <folder>``
  (``src/cli/keypoint_manager/commands/import_export.cpp``): one folder per scene, one file per
  image with keypoints, header ``x,y,size,angle,response,octave,class_id``, std::ostream's default
  float formatting (6 significant digits), ``\\n`` line ends. Written by ``dw_writer.cpp``.
- ``locked_keypoints.csv``: ``sqlite3 -header -csv experiments.db "SELECT * FROM locked_keypoints
  WHERE keypoint_set_id = 1 ORDER BY id"``: the table's own columns
  (``src/core/database/DatabaseManager.cpp``: id, keypoint_set_id, scene_name, image_name '1.ppm',
  x, y, size, angle, response, octave, class_id, valid_bounds, created_at), REAL printed by the
  shell (15 significant digits; sqlite3 3.40 ends lines with LF, other versions and platforms with
  CRLF: both are read).
- ``keypoints_scene_image.csv.gz``: the same keypoints as ``scene,image,x,y,size,angle,response,
  octave`` (``SELECT scene_name AS scene, image_name AS image, ...``), gzip-compressed.
- ``results.csv``: the workbench's ``analysis/scripts/export_experiment_metrics.py --format csv``
  (its ``DEFAULT_SUMMARY_COLUMNS``, pandas ``to_csv``), run on a database holding three results.
- ``results_table.csv``: ``sqlite3 -header -csv experiments.db "SELECT e.descriptor_type,
  e.dataset_name, r.* FROM results r JOIN experiments e ON e.id = r.experiment_id"``: every
  column of its ``results`` table (verification and retrieval included).
"""

from __future__ import annotations

import argparse
import gzip
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
SCENE = "v_coins"
EMPTY_IMAGE = 5
PER_IMAGE = 30
BORDER = 40

LOCKED_COLUMNS = ("id INTEGER PRIMARY KEY AUTOINCREMENT, keypoint_set_id INTEGER NOT NULL DEFAULT 1, scene_name TEXT NOT NULL, "
                  "image_name TEXT NOT NULL, x REAL NOT NULL, y REAL NOT NULL, size REAL NOT NULL, angle REAL NOT NULL, "
                  "response REAL NOT NULL, octave INTEGER NOT NULL, class_id INTEGER NOT NULL, valid_bounds BOOLEAN DEFAULT 1, "
                  "created_at TIMESTAMP")
EXPERIMENT_COLUMNS = ("id INTEGER PRIMARY KEY AUTOINCREMENT, descriptor_type TEXT NOT NULL, dataset_name TEXT NOT NULL, "
                      "pooling_strategy TEXT, similarity_threshold REAL, max_features INTEGER, timestamp TEXT NOT NULL, "
                      "parameters TEXT, keypoint_set_id INTEGER, keypoint_source TEXT, descriptor_dimension INTEGER DEFAULT 0, "
                      "execution_device TEXT DEFAULT 'cpu'")
RESULT_NAMES = ("true_map_macro", "true_map_micro", "true_map_macro_with_zeros", "true_map_micro_with_zeros",
                "image_retrieval_map", "viewpoint_map", "illumination_map", "viewpoint_map_with_zeros",
                "illumination_map_with_zeros", "keypoint_verification_ap", "verification_viewpoint_ap",
                "verification_illumination_ap", "keypoint_retrieval_ap", "retrieval_viewpoint_ap", "retrieval_illumination_ap",
                "retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors",
                "mean_average_precision", "legacy_mean_precision", "precision_at_1", "precision_at_5", "recall_at_1",
                "recall_at_5", "total_matches", "total_keypoints", "processing_time_ms", "timestamp", "descriptor_time_cpu_ms",
                "descriptor_time_gpu_ms", "match_time_cpu_ms", "match_time_gpu_ms", "total_pipeline_cpu_ms",
                "total_pipeline_gpu_ms", "metadata")
INT_RESULTS = {"retrieval_num_true_positives", "retrieval_num_hard_negatives", "retrieval_num_distractors", "total_matches",
               "total_keypoints"}


def sift_keypoints(scene_dir: Path) -> list[tuple]:
    rows = []
    for k in range(1, 7):
        if k == EMPTY_IMAGE:
            continue
        img = cv2.imread(str(scene_dir / f"{k}.ppm"), cv2.IMREAD_COLOR)
        h, w = img.shape[:2]
        kps = [p for p in cv2.SIFT_create().detect(img, None)
               if BORDER <= p.pt[0] < w - BORDER and BORDER <= p.pt[1] < h - BORDER]
        kps.sort(key=lambda p: -p.response)
        rows += [(SCENE, k, p.pt[0], p.pt[1], p.size, p.angle, p.response, p.octave, p.class_id) for p in kps[:PER_IMAGE]]
    return rows


def write_export_csv(rows: list[tuple], tmp: Path) -> None:
    exe = tmp / "dw_writer"
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(HERE / "dw_writer.cpp")], check=True)
    listing = tmp / "kp.txt"
    f32 = lambda v: float(np.float32(v)).hex()  # noqa: E731
    listing.write_text("".join(f"{s} {k} {f32(x)} {f32(y)} {f32(sz)} {f32(a)} {f32(r)} {o} {c}\n"
                               for s, k, x, y, sz, a, r, o, c in rows))
    out = HERE / "export_csv"
    (out / SCENE).mkdir(parents=True, exist_ok=True)
    for f in (out / SCENE).glob("*.csv"):
        f.unlink()
    subprocess.run([str(exe), str(listing), str(out)], check=True)


def shell_csv(db: Path, sql: str) -> bytes:
    return subprocess.run(["sqlite3", "-header", "-csv", str(db), sql], check=True, capture_output=True).stdout


def write_locked_dump(rows: list[tuple], tmp: Path) -> None:
    db = tmp / "experiments.db"
    with sqlite3.connect(db) as con:
        con.execute(f"CREATE TABLE locked_keypoints ({LOCKED_COLUMNS})")
        con.executemany(
            "INSERT INTO locked_keypoints (keypoint_set_id, scene_name, image_name, x, y, size, angle, response, octave, class_id, "
            "created_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, '2025-10-06 14:03:11')",
            [(s, f"{k}.ppm", *(float(np.float32(v)) for v in (x, y, sz, a, r)), o, c) for s, k, x, y, sz, a, r, o, c in rows])
    (HERE / "locked_keypoints.csv").write_bytes(shell_csv(db, "SELECT * FROM locked_keypoints WHERE keypoint_set_id = 1 ORDER BY id"))
    text = shell_csv(db, "SELECT scene_name AS scene, image_name AS image, x, y, size, angle, response, octave "
                         "FROM locked_keypoints WHERE keypoint_set_id = 1 ORDER BY id")
    (HERE / "keypoints_scene_image.csv.gz").write_bytes(gzip.compress(text, mtime=0))


def write_results(dwb: Path, tmp: Path) -> None:
    db = tmp / "results.db"
    rng = np.random.default_rng(18)
    runs = [("sift", "none", "sift_baseline"), ("rgbsift", "none", "rgbsift_baseline"),
            ("dspsift_v2", "domain_size_pooling", "dsp_sweep")]
    with sqlite3.connect(db) as con:
        con.execute(f"CREATE TABLE experiments ({EXPERIMENT_COLUMNS})")
        cols = ", ".join(f"{n} {'INTEGER' if n in INT_RESULTS else 'TEXT' if n in ('timestamp', 'metadata') else 'REAL'}"
                         for n in RESULT_NAMES)
        con.execute(f"CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, experiment_id INTEGER, {cols})")
        for i, (desc, pooling, name) in enumerate(runs, start=1):
            params = (f"descriptor_type={desc.split('_')[0]};execution_device=cpu;experiment_name={name};norm_type=4;"
                      f"pooling_strategy={pooling};")
            con.execute("INSERT INTO experiments (descriptor_type, dataset_name, pooling_strategy, similarity_threshold, "
                        "max_features, timestamp, parameters, keypoint_set_id, keypoint_source, descriptor_dimension, "
                        "execution_device) VALUES (?, '../data/', ?, 0.7, 2000, '2025-10-06 14:10:00', ?, 3, "
                        "'independent_detection', 128, 'cpu')", (desc, pooling, params))
            micro, macro = 0.45 + rng.uniform(0, 0.2), 0.45 + rng.uniform(0, 0.2)
            v = {"true_map_macro": macro, "true_map_micro": micro, "true_map_macro_with_zeros": macro * 0.71,
                 "true_map_micro_with_zeros": micro * 0.69, "image_retrieval_map": -1.0,
                 "viewpoint_map": macro - 0.05, "illumination_map": macro + 0.05,
                 "viewpoint_map_with_zeros": (macro - 0.05) * 0.7, "illumination_map_with_zeros": (macro + 0.05) * 0.72,
                 # the third run had verification/retrieval disabled: the workbench's -1 and 0 defaults
                 "keypoint_verification_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "verification_viewpoint_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "verification_illumination_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "keypoint_retrieval_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "retrieval_viewpoint_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "retrieval_illumination_ap": rng.uniform(0.2, 0.4) if i < 3 else -1.0,
                 "retrieval_num_true_positives": 58328 + i if i < 3 else 0,
                 "retrieval_num_hard_negatives": 1_167_000_000 + i if i < 3 else 0,
                 "retrieval_num_distractors": 29_000_000 + i if i < 3 else 0,
                 "mean_average_precision": macro, "legacy_mean_precision": rng.uniform(0.3, 0.5),
                 "precision_at_1": micro - 0.1, "precision_at_5": micro + 0.1, "recall_at_1": micro - 0.1,
                 "recall_at_5": micro + 0.1, "total_matches": 150000 + i, "total_keypoints": 230000 + i,
                 "processing_time_ms": 61234.0 + i, "timestamp": "2025-10-06 14:12:00",
                 "descriptor_time_cpu_ms": 12000.5 + i, "descriptor_time_gpu_ms": 0.0, "match_time_cpu_ms": 40000.25 + i,
                 "match_time_gpu_ms": 0.0, "total_pipeline_cpu_ms": 61234.0 + i, "total_pipeline_gpu_ms": 0.0,
                 "metadata": f"compute_time_ms=12000;experiment_name={name};success=true;total_images=696;"}
            con.execute(f"INSERT INTO results (experiment_id, {', '.join(RESULT_NAMES)}) "
                        f"VALUES ({i}, {', '.join('?' for _ in RESULT_NAMES)})", [v[n] for n in RESULT_NAMES])
    subprocess.run([sys.executable, str(dwb / "analysis" / "scripts" / "export_experiment_metrics.py"), "--db", str(db),
                    "--format", "csv", "--output", str(HERE / "results.csv")], check=True)
    (HERE / "results_table.csv").write_bytes(shell_csv(
        db, "SELECT e.descriptor_type, e.dataset_name, r.* FROM results AS r JOIN experiments AS e ON e.id = r.experiment_id "
            "ORDER BY r.id"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dwb", type=Path, required=True, help="a checkout of F-Sossi/DescriptorWorkbench")
    a = ap.parse_args()
    from descbench.datasets.demo import generate_scene

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        generate_scene(SCENE, tmp, seed=0)
        rows = sift_keypoints(tmp / SCENE)
        write_export_csv(rows, tmp)
        write_locked_dump(rows, tmp)
        write_results(a.dwb, tmp)


if __name__ == "__main__":
    main()
