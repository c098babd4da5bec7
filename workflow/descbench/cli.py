"""Command line used by the Snakemake rules: ``python -m descbench <stage> ...``.

Each subcommand is a thin wrapper around one function of :mod:`descbench.stages` (or the
dataset modules). Errors on bad input exit with status 1 and a one-line message naming the file
or key and the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from descbench.errors import DescbenchError


def limit_threads(n: int) -> None:
    """Keep each job within its Snakemake ``threads``: numba, BLAS and OpenCV pools."""
    import cv2
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    threadpool_limits(n)
    cv2.setNumThreads(n)


def warmup(out: Path) -> None:
    """Compile (and cache on disk) every numba kernel once, before parallel jobs use them."""
    import numpy as np

    from descbench.metrics.bojanic import BojanicParams, Distractors, Target, score_scene_tasks
    from descbench.metrics.classifier import classify_pair
    from descbench.metrics.matching import match_pair
    from descbench.metrics.retrieval import RetrievalParams, score_pair

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (20, 2))
    for desc in (rng.standard_normal((20, 8)).astype(np.float32), rng.integers(0, 255, (20, 4), dtype=np.uint8)):
        for gt in ("closest", "all_within_tau"):
            score_pair(xy, desc, xy, desc, np.eye(3), (60, 60), RetrievalParams(gt=gt))
        t = Target(xy, desc, np.eye(3), (60, 60))
        score_scene_tasks(xy, desc, [t, t], [Distractors("x", 1, np.arange(5), desc[:5])], BojanicParams())
        match_pair(xy, desc, xy, desc, np.eye(3), (60, 60), (60, 60))
        classify_pair(xy, desc, xy, desc, np.eye(3))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("numba kernels compiled\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="descbench")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("demo-scene", help="generate one scene of the offline demo dataset")
    p.add_argument("--scene", required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("hpatches", help="download (resumable), extract and validate HPatches sequences")
    p.add_argument("--urls", nargs="+", required=True)
    p.add_argument("--sha256", default=None)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--flag", type=Path, required=True, help="written once the layout is validated")

    p = sub.add_parser("keypoints", help="detect and filter the keypoints of one scene")
    p.add_argument("--scene-dir", type=Path, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("descriptors", help="compute one descriptor on one scene")
    p.add_argument("--scene-dir", type=Path, required=True)
    p.add_argument("--keypoints", type=Path, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--spec", required=True, help="descriptor spec (JSON)")
    p.add_argument("--keypoint-set-spec", required=True, help="keypoint set spec (JSON)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("score", help="keypoint retrieval scores of one scene")
    p.add_argument("--scene-dir", type=Path, required=True)
    p.add_argument("--keypoints", type=Path, required=True)
    p.add_argument("--descriptors", type=Path, required=True)
    p.add_argument("--scoring", required=True, help="scoring config (JSON)")
    p.add_argument("--out-queries", type=Path, required=True)
    p.add_argument("--out-pairs", type=Path, required=True)
    p.add_argument("--out-timing", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("verification", help="keypoint verification and keypoint retrieval of one scene")
    p.add_argument("--scene-dir", type=Path, required=True)
    p.add_argument("--keypoints", type=Path, required=True)
    p.add_argument("--descriptors", type=Path, required=True)
    p.add_argument("--distractors", required=True, help="JSON {scene: [keypoints, descriptors]}")
    p.add_argument("--scenes", required=True, help="JSON list of every evaluated scene")
    p.add_argument("--scoring", required=True)
    p.add_argument("--verification", required=True)
    p.add_argument("--out-list", type=Path, required=True)
    p.add_argument("--out-queries", type=Path, required=True)
    p.add_argument("--out-scene", type=Path, required=True)
    p.add_argument("--out-timing", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("matching", help="matching metrics and matching as a binary classifier of one scene")
    p.add_argument("--scene-dir", type=Path, required=True)
    p.add_argument("--keypoints", type=Path, required=True)
    p.add_argument("--descriptors", type=Path, required=True)
    p.add_argument("--scoring", required=True)
    p.add_argument("--matching", required=True)
    p.add_argument("--out-pairs", type=Path, required=True)
    p.add_argument("--out-classifier", type=Path, required=True)
    p.add_argument("--out-roc", type=Path, required=True)
    p.add_argument("--out-timing", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)

    p = sub.add_parser("report", help="comparison table across descriptors and keypoint sets")
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--combos", required=True, help="JSON list of [keypoint_set, descriptor]")
    p.add_argument("--scenes", required=True, help="JSON list of scenes")
    p.add_argument("--config", required=True, help="the validated config (JSON)")
    p.add_argument("--provenance", required=True)
    p.add_argument("--out-dir", type=Path, required=True)

    p = sub.add_parser("warmup", help="compile the numba kernels into the on-disk cache")
    p.add_argument("--out", type=Path, required=True)

    a = ap.parse_args(argv)
    try:
        run(a)
    except DescbenchError as exc:
        print(f"descbench: error: {exc}", file=sys.stderr)
        return 1
    return 0


def run(a: argparse.Namespace) -> None:
    from descbench import stages

    if getattr(a, "threads", None):
        limit_threads(a.threads)
    if a.cmd == "demo-scene":
        from descbench.datasets.demo import generate_scene

        generate_scene(a.scene, a.out_dir, a.seed)
    elif a.cmd == "hpatches":
        from descbench.datasets.hpatches import obtain

        obtain(a.urls, a.sha256, a.data_dir, a.flag)
    elif a.cmd == "keypoints":
        stages.detect_scene(a.scene_dir, a.name, json.loads(a.spec), a.out)
    elif a.cmd == "descriptors":
        stages.describe_scene(a.scene_dir, a.keypoints, a.name, json.loads(a.spec), json.loads(a.keypoint_set_spec), a.out)
    elif a.cmd == "score":
        stages.score_scene(a.scene_dir, a.keypoints, a.descriptors, json.loads(a.scoring), a.out_queries, a.out_pairs, a.out_timing)
    elif a.cmd == "verification":
        stages.score_verification_scene(
            a.scene_dir, a.keypoints, a.descriptors, json.loads(a.distractors), json.loads(a.scenes),
            json.loads(a.scoring), json.loads(a.verification), a.out_list, a.out_queries, a.out_scene, a.out_timing,
        )
    elif a.cmd == "matching":
        stages.score_matching_scene(
            a.scene_dir, a.keypoints, a.descriptors, json.loads(a.scoring), json.loads(a.matching),
            a.out_pairs, a.out_classifier, a.out_roc, a.out_timing,
        )
    elif a.cmd == "report":
        from descbench.paths import ResultPaths
        from descbench.report.table import entry_files, write

        cfg, scenes = json.loads(a.config), json.loads(a.scenes)
        entries = [entry_files(ResultPaths(a.results_root), ks, d, scenes, cfg) for ks, d in json.loads(a.combos)]
        table = write(entries, cfg, a.out_dir, json.loads(a.provenance))
        print(table.drop(columns=["metadata"]).to_string(index=False))
    elif a.cmd == "warmup":
        warmup(a.out)


if __name__ == "__main__":
    sys.exit(main())
