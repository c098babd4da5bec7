#!/usr/bin/env python
"""Peak memory and wall time of descbench's keypoint, descriptor, score and patch jobs against image
size and keypoint count: the measurements behind ``descbench.jobresources`` (benchmarks/README.md,
"Job memory and runtime models (bench_resources.py)").

    python benchmarks/bench_resources.py --work /tmp/rb --json /tmp/rb/resources.json   # ~15 min, 2 cores
    python benchmarks/bench_resources.py --work /tmp/rb --sizes 0.2621,1,4 --series size,count   # no 27 MP scene
    python benchmarks/bench_resources.py --from-json /tmp/rb/resources.json   # tables, fits, models vs measurements

Every measured job is the real job command, as the rules in ``workflow/rules/*.smk`` build it
(``<python> -m descbench keypoints|descriptors|distractors|score|patches describe ...`` with the
validated config's specs and sections), started as a child process: its peak resident memory is
``ru_maxrss`` of ``os.wait4`` (the largest RSS the job's process reached, kept by the kernel, not
polled), its wall time the time from start to exit. One thread per job (``--threads 1``,
``NUMBA_NUM_THREADS=1``), as the shipped config runs them; the numba kernels are compiled into
the cache first (the workflow's ``numba_warmup``).

Data (nothing is downloaded): the demo scene ``i_astronaut`` (512 x 512) upscaled with
``cv2.resize`` (bilinear) to the sizes of ``--sizes`` (megapixels, square; the homographies are
rescaled with the images), plus the demo's ``v_coins`` at its own size as a second scene (its
keypoints give the score job's distractors). One scene per batch (``scenes_per_job: 1``); the
measured jobs are those of the large scene. Series (``--series``):

* ``size``: keypoints (sift; keynet with ``weights: random`` up to ``--keynet-max-mp``),
  descriptors (sift, rootsift, hardnet ``weights: random``) and score (sift) on the upscaled
  scene. Upscaled images keep the original's keypoints (about 2,000-2,700 SIFT keypoints per
  image at every size, all at coarse octaves), hence the next two series.
* ``descsize``: 2,000 ``locked`` keypoints per image (positions uniform inside the border, sizes
  log-uniform in 2..40 px; images 2..6: image 1's positions through H plus 1 px noise, a third
  redrawn) at every size: the locked set's keypoint job, and SIFT descriptors, whose small
  keypoints reach the first (2x upsampled) octave as on a photograph, so OpenCV's ``compute``
  builds its whole pyramid.
* ``count``: ``--counts`` locked keypoints per image on the ``--count-side`` scene: descriptors
  (sift; hardnet up to ``--hardnet-max-count``) and score (sift).
* ``detector``: the other OpenCV detectors and SURF as one-image children
  (``descbench.keypoints.detectors.detect`` on the 1 and 4 MP image 1, start-up included).
* ``patches``: ``patches describe`` (sift, hardnet) of the demo scene's generated patches.
* ``density``: keypoints per megapixel inside the border of each demo photograph (image 1 of the
  8 demo scenes), per detector with its default parameters (in-process, no memory figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

BIG = "i_astronaut"  # upscaled
SMALL = "v_coins"  # native size: the distractor scene
SRC_SIDE = 512  # i_astronaut's side in the demo


# ----------------------------------------------------------------------------- running a job


def run_job(cmd: list[str], log: Path, env: dict | None = None) -> dict:
    """Run ``cmd`` as a child; its peak RSS (MB, ``os.wait4``'s ``ru_maxrss``) and wall time (s)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=full_env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"job failed (exit {proc.returncode}): {' '.join(cmd)[:300]}\n--- {log}:\n{log.read_text()[-3000:]}")
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024.0, 1), "wall_s": round(wall, 2)}


def descbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "descbench", *args]


def as_json(obj) -> str:  # the rules' as_json
    return json.dumps(obj, sort_keys=True)


# ----------------------------------------------------------------------------- data


def upscale_scene(src: Path, dst: Path, side: int) -> None:
    """``src`` scene (square images) resized to ``side`` x ``side``, homographies rescaled."""
    import cv2

    from descbench.datasets.layout import read_homography, write_homography

    if (dst / "6.ppm").exists():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for k in range(1, 7):
        img = cv2.imread(str(src / f"{k}.ppm"), cv2.IMREAD_COLOR)
        s = side / img.shape[1]
        cv2.imwrite(str(dst / f"{k}.ppm"), cv2.resize(img, (side, side), interpolation=cv2.INTER_LINEAR))
        if k > 1:
            S = np.diag([s, s, 1.0])
            write_homography(dst / f"H_1_{k}", S @ read_homography(src / f"H_1_{k}") @ np.linalg.inv(S))


def scene_data(src: Path, data: Path, side: int, distractor_scene: bool = True) -> Path:
    """``data``: the demo's ``BIG`` scene of ``src`` at ``side`` x ``side`` (upscaled; copied at its
    own side) and, with ``distractor_scene``, ``SMALL`` as it is. A scene already there is kept:
    the work folder is reused between runs."""
    if side != SRC_SIDE:
        upscale_scene(src / BIG, data / BIG, side)
    elif not (data / BIG).exists():
        shutil.copytree(src / BIG, data / BIG)
    if distractor_scene and not (data / SMALL).exists():
        shutil.copytree(src / SMALL, data / SMALL)
    return data


def locked_keypoints(path_pattern: Path, scene_dir: Path, n: int, border: int = 40, seed: int = 0) -> None:
    """Per-image CSV files of ``n`` synthetic keypoints (see the module docstring)."""
    import cv2

    from descbench.datasets.layout import read_homography

    rng = np.random.default_rng(seed)
    img = cv2.imread(str(scene_dir / "1.ppm"), cv2.IMREAD_GRAYSCALE)
    h, w = img.shape
    x1 = rng.uniform(border, w - border - 1, n)
    y1 = rng.uniform(border, h - border - 1, n)
    size = np.exp(rng.uniform(np.log(2.0), np.log(40.0), n))
    angle = rng.uniform(0, 360, n)
    for k in range(1, 7):
        if k == 1:
            x, y = x1, y1
        else:
            H = read_homography(scene_dir / f"H_1_{k}")
            p = H @ np.vstack([x1, y1, np.ones(n)])
            x, y = p[0] / p[2] + rng.normal(0, 1, n), p[1] / p[2] + rng.normal(0, 1, n)
            redraw = rng.random(n) < 1 / 3
            x[redraw] = rng.uniform(border, w - border - 1, redraw.sum())
            y[redraw] = rng.uniform(border, h - border - 1, redraw.sum())
            x, y = np.clip(x, 0, w - 1), np.clip(y, 0, h - 1)
        out = Path(str(path_pattern).format(scene=scene_dir.name, image=k))
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w") as fh:
            fh.write("x,y,size,angle,response,octave\n")
            for i in range(n):
                fh.write(f"{x[i]:.3f},{y[i]:.3f},{size[i]:.3f},{angle[i]:.2f},{1.0 / (1 + i):.6g},0\n")


# ----------------------------------------------------------------------------- one dataset's jobs


class Experiment:
    """A folder dataset of two scenes and the validated config of its sets and descriptors."""

    def __init__(self, work: Path, label: str, data: Path, kpsets: dict, descriptors: dict):
        import yaml

        from descbench.config import validate_config
        from descbench.paths import ResultPaths, scene_batches

        cfg = yaml.safe_load((REPO / "config.yaml").read_text())
        cfg.update(dataset="folder", folder={"path": str(data), "name": label}, data_dir=str(work / "datadir"),
                   results_dir=str(work / "results"), experiment=label, scenes=None,
                   keypoint_sets=kpsets, descriptors=descriptors)
        cfg["execution"] = {**cfg["execution"], "scenes_per_job": 1}
        self.cfg = validate_config(cfg, REPO / "workflow" / "schemas" / "config.schema.yaml")
        self.data = data
        self.res = work / "results" / label
        self.scenes = sorted(p.name for p in data.iterdir() if p.is_dir())
        self.batches = scene_batches(self.scenes, 1)
        self.paths = ResultPaths(self.res, self.batches)
        self.batch_of = {s: b for b, ss in self.batches.items() for s in ss}
        self.logs = work / "logs" / label

    def keypoints(self, kpset: str, scene: str) -> dict:
        b = self.batch_of[scene]
        out = Path(self.paths.keypoints_dir(kpset, b))
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        spec = self.cfg["keypoint_sets"][kpset]
        cmd = descbench("keypoints", "--results-root", str(self.res), "--scene-root", str(self.data),
                        "--batches", as_json({b: self.batches[b]}), "--batch", b, "--name", kpset,
                        "--spec", as_json(spec), "--threads", "1")
        return run_job(cmd, self.logs / f"keypoints-{kpset}-{scene}.log")

    def descriptors(self, kpset: str, desc: str, scene: str) -> dict:
        from descbench.keypoints.sets import root_detector_spec

        b = self.batch_of[scene]
        out = Path(self.paths.descriptors_dir(kpset, desc, b))
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = descbench("descriptors", "--results-root", str(self.res), "--scene-root", str(self.data),
                        "--batches", as_json({b: self.batches[b]}), "--batch", b, "--keypoint-set", kpset,
                        "--name", desc, "--spec", as_json(self.cfg["descriptors"][desc]),
                        "--keypoint-set-spec", as_json(root_detector_spec(self.cfg["keypoint_sets"], kpset)),
                        "--threads", "1")
        return run_job(cmd, self.logs / f"descriptors-{kpset}-{desc}-{scene}.log")

    def distractors(self, kpset: str, desc: str) -> dict:
        from descbench.config import effective_config

        out = Path(self.paths.distractor_bank(kpset, desc))
        out.parent.mkdir(parents=True, exist_ok=True)
        draw = {k: effective_config(self.cfg, desc)["verification"][k]
                for k in ("seed", "distractor_scenes", "distractors_per_scene")}
        cmd = descbench("distractors", "--results-root", str(self.res), "--batches", as_json(self.batches),
                        "--keypoint-set", kpset, "--descriptor", desc, "--verification", as_json(draw), "--out", str(out))
        return run_job(cmd, self.logs / f"distractors-{kpset}-{desc}.log")

    def score(self, kpset: str, desc: str, scene: str) -> dict:
        from descbench.config import score_job_sections
        from descbench.tasks import score_tasks_on

        b = self.batch_of[scene]
        for t in score_tasks_on(self.cfg):
            d = Path(self.paths.task_dir(t, kpset, desc, b))
            if d.exists():
                shutil.rmtree(d)
            d.parent.mkdir(parents=True, exist_ok=True)
        cmd = descbench("score", "--results-root", str(self.res), "--scene-root", str(self.data),
                        "--batches", as_json(self.batches), "--batch", b, "--keypoint-set", kpset,
                        "--descriptor", desc, "--sections", as_json(score_job_sections(self.cfg, desc)),
                        "--threads", "1")
        return run_job(cmd, self.logs / f"score-{kpset}-{desc}-{scene}.log")

    def counts(self, kpset: str, scene: str) -> list[int]:
        """Keypoints per image of a scene's keypoint file."""
        import pyarrow.parquet as pq

        from descbench.paths import scene_file

        t = pq.read_table(scene_file(self.paths.keypoints_dir(kpset, self.batch_of[scene]), scene, "parquet"), columns=["image"])
        img = t.column("image").to_numpy()
        return [int((img == k).sum()) for k in range(1, 7)]


def scene_megapixels(scene_dir: Path) -> list[float]:
    import cv2

    return [cv2.imread(str(scene_dir / f"{k}.ppm"), cv2.IMREAD_GRAYSCALE).size / 1e6 for k in range(1, 7)]


# ----------------------------------------------------------------------------- the series


KEYNET = {"detector": "keynet", "border_px": 40, "max_keypoints": None,
          "params": {"weights": "random", "weights_seed": 1, "device": "cpu", "threads": 1}}
HARDNET = {"family": "hardnet", "params": {"weights": "random", "device": "cpu", "threads": 1}}
OTHER_DETECTORS = ("orb", "brisk", "akaze", "kaze", "gftt", "fast", "surf")


def size_series(work: Path, src: Path, sizes_mp: list[float], keynet_max_mp: float, rootsift_max_mp: float) -> list[dict]:
    rows = []
    for mp in sizes_mp:
        side = int(round(math.sqrt(mp * 1e6)))
        label = f"size{side}"
        data = scene_data(src, work / "data" / label, side)
        kpsets = {"sift": {"detector": "sift"}}
        if mp <= keynet_max_mp:
            kpsets["keynet"] = KEYNET
        exp = Experiment(work, label, data, kpsets, {"sift": {"family": "sift"}, "rootsift": {"family": "rootsift"},
                                                     "hardnet": HARDNET})
        mps = scene_megapixels(data / BIG)
        base = {"series": "size", "side": side, "megapixels": round(max(mps), 3), "megapixels_scene": round(sum(mps), 3)}
        for kpset in kpsets:
            r = exp.keypoints(kpset, BIG)
            n = exp.counts(kpset, BIG)
            rows.append({**base, "job": "keypoints", "what": kpset, "kp_max": max(n), "kp_scene": sum(n), **r})
            print(rows[-1], flush=True)
        exp.keypoints("sift", SMALL)
        descs = ["sift", "hardnet"] if mp > rootsift_max_mp else ["sift", "rootsift", "hardnet"]
        rows += descriptor_and_score_rows(exp, "sift", descs, base)
    return rows


def pair_products(n: list[int]) -> float:
    """sum_k N_1 * N_k over the scene's 5 pairs, in units of 1e6 (the score job's work)."""
    return round(sum(n[0] * nk for nk in n[1:]) / 1e6, 3)


def descriptor_and_score_rows(exp: Experiment, kpset: str, descs: list[str], base: dict) -> list[dict]:
    """Measured on ``BIG`` with keypoint set ``kpset`` (its keypoint jobs already run): the
    descriptor job of each of ``descs``, in that order, then sift's score job, one row each
    (``base`` plus the job, its keypoint counts and the measurement), printed as it is measured.
    The score job needs ``SMALL``'s sift descriptors and the distractor bank: run first, not
    measured."""
    n = exp.counts(kpset, BIG)
    kp = {"kp_max": max(n), "kp_scene": sum(n)}
    rows = []
    for desc in descs:
        r = exp.descriptors(kpset, desc, BIG)
        rows.append({**base, "job": "descriptors", "what": desc, **kp, **r})
        print(rows[-1], flush=True)
    exp.descriptors(kpset, "sift", SMALL)
    exp.distractors(kpset, "sift")
    r = exp.score(kpset, "sift", BIG)
    rows.append({**base, "job": "score", "what": "sift", **kp, "pairs_gkp2": pair_products(n), **r})
    print(rows[-1], flush=True)
    return rows


def count_series(work: Path, src: Path, counts: list[int], side: int, hardnet_max: int) -> list[dict]:
    rows = []
    label = f"count{side}"
    data = scene_data(src, work / "data" / label, side)
    mps = scene_megapixels(data / BIG)
    for n in counts:
        pattern = work / "locked" / f"n{n}" / "{scene}_{image}.csv"
        locked_keypoints(pattern, data / BIG, n)
        locked_keypoints(pattern, data / SMALL, min(n, 2000), seed=1)
        kpset = f"locked{n}"
        exp = Experiment(work, f"{label}-n{n}", data,
                         {kpset: {"detector": "locked", "params": {"path": str(pattern)}}},
                         {"sift": {"family": "sift"}, "hardnet": HARDNET})
        base = {"series": "count", "side": side, "megapixels": round(max(mps), 3), "megapixels_scene": round(sum(mps), 3)}
        exp.keypoints(kpset, BIG)
        exp.keypoints(kpset, SMALL)
        rows += descriptor_and_score_rows(exp, kpset, ["sift"] if n > hardnet_max else ["sift", "hardnet"], base)
    return rows


def descsize_series(work: Path, src: Path, sides: list[int], n: int) -> list[dict]:
    """SIFT descriptors against image size on ``n`` locked keypoints per image of sizes 2..40 px:
    unlike the upscaled scene's own SIFT keypoints (found at coarse octaves only), the small ones
    sit in the first, 2x upsampled octave, so OpenCV's ``compute`` builds the whole pyramid, as on
    a real photograph. Also the locked set's keypoint job (files read, image read for its size)."""
    rows = []
    for side in sides:
        label = f"size{side}"
        data = scene_data(src, work / "data" / label, side)
        pattern = work / "locked" / f"{label}-n{n}" / "{scene}_{image}.csv"
        locked_keypoints(pattern, data / BIG, n)
        kpset = f"locked{n}"
        exp = Experiment(work, f"{label}-locked{n}", data, {kpset: {"detector": "locked", "params": {"path": str(pattern)}}},
                         {"sift": {"family": "sift"}})
        mps = scene_megapixels(data / BIG)
        base = {"series": "descsize", "side": side, "megapixels": round(max(mps), 3), "megapixels_scene": round(sum(mps), 3)}
        r = exp.keypoints(kpset, BIG)
        nk = exp.counts(kpset, BIG)
        kp = {"kp_max": max(nk), "kp_scene": sum(nk)}
        rows.append({**base, "job": "keypoints", "what": "locked", **kp, **r})
        print(rows[-1], flush=True)
        r = exp.descriptors(kpset, "sift", BIG)
        rows.append({**base, "job": "descriptors", "what": "sift", **kp, **r})
        print(rows[-1], flush=True)
    return rows


def density_series(src_root: Path) -> list[dict]:
    """Keypoints per megapixel inside the 40 px border of each demo photograph (image 1 of the 8
    demo scenes, their own sizes), per detector with its default parameters: the densities the
    model assumes before detection."""
    import yaml

    from descbench.config import validate_config
    from descbench.datasets.demo import DEMO_SCENES, generate_scene
    from descbench.datasets.layout import read_image
    from descbench.keypoints import filter_keypoints
    from descbench.keypoints.detectors import detect

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["keypoint_sets"] = {d: {"detector": d} for d in OTHER_DETECTORS + ("sift",)}
    cfg = validate_config(cfg, REPO / "workflow" / "schemas" / "config.schema.yaml")
    rows = []
    for scene in DEMO_SCENES:
        if not (src_root / scene / "1.ppm").exists():
            generate_scene(scene, src_root)
        g = read_image(src_root / scene / "1.ppm")
        h, w = g.shape
        area = (w - 80) * (h - 80) / 1e6
        for det in OTHER_DETECTORS + ("sift",):
            kept = filter_keypoints(detect(det, g, cfg["keypoint_sets"][det]["params"]), w, h, 40, None)
            rows.append({"series": "density", "job": "density", "what": det, "scene": scene, "side": f"{w}x{h}",
                         "kp_max": len(kept), "per_mp": round(len(kept) / area)})
    return rows


DETECT_ONE = """
import sys, json
from descbench.datasets.layout import read_image
from descbench.keypoints.detectors import detect
g = read_image(sys.argv[1])
kp = detect(sys.argv[2], g, json.loads(sys.argv[3]))
print(len(kp))
"""


def detector_series(work: Path, src: Path, sides: list[int]) -> list[dict]:
    """Image 1 only, one child per (detector, size): start-up + read + detect."""
    from descbench.config import validate_config
    import yaml

    rows = []
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["keypoint_sets"] = {d: {"detector": d} for d in OTHER_DETECTORS + ("sift",)}
    cfg = validate_config(cfg, REPO / "workflow" / "schemas" / "config.schema.yaml")
    for side in sides:
        data = scene_data(src, work / "data" / f"size{side}", side, distractor_scene=False)
        image = data / BIG / "1.ppm"
        for det in OTHER_DETECTORS + ("sift",):
            if det == "surf":  # compile the numba kernels into the cache first (a job loads them)
                run_job([sys.executable, "-c", DETECT_ONE, str(image), det, as_json(cfg["keypoint_sets"][det]["params"])],
                        work / "logs" / "detect-warmup.log")
            log = work / "logs" / f"detect-{det}-{side}.log"
            r = run_job([sys.executable, "-c", DETECT_ONE, str(image), det, as_json(cfg["keypoint_sets"][det]["params"])], log)
            n = int(log.read_text().split()[-1])
            rows.append({"series": "detector", "job": "detect_one_image", "what": det, "side": side,
                         "megapixels": round(side * side / 1e6, 3), "kp_max": n, **r})
            print(rows[-1], flush=True)
    return rows


def patch_series(work: Path, src: Path) -> list[dict]:
    """``patches describe`` of one generated sequence (demo i_astronaut), sift and hardnet."""
    from descbench.config import validate_config
    import yaml

    rows = []
    pdir = work / "patches" / BIG
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["descriptors"] = {"sift": {"family": "sift"}, "hardnet": HARDNET}
    cfg = validate_config(cfg, REPO / "workflow" / "schemas" / "config.schema.yaml")
    if not (pdir / "patches.json").exists():
        run_job(descbench("patches", "generate", "--scene-dir", str(src / BIG), "--out-dir", str(pdir),
                          "--params", as_json(cfg["patches"]["generate"])), work / "logs" / "patch-generate.log")
    import cv2

    n = cv2.imread(str(pdir / "ref.png"), cv2.IMREAD_GRAYSCALE).shape[0] // 65
    for desc in ("sift", "hardnet"):
        spec = {k: v for k, v in cfg["descriptors"][desc].items() if k in ("family", "params")}
        out = work / "patches" / "out" / f"{desc}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        r = run_job(descbench("patches", "describe", "--patch-dir", str(pdir), "--out", str(out), "--name", desc,
                              "--spec", as_json(spec), "--centre-keypoint", cfg["patches"]["centre_keypoint"]),
                    work / "logs" / f"patch-describe-{desc}.log")
        rows.append({"series": "patches", "job": "patch_descriptors", "what": desc, "patches_per_strip": n, **r})
        print(rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------- fit and tables


def fit(rows: list[dict], job: str, what: str, xs: tuple[str, ...], y: str) -> tuple[np.ndarray, float]:
    """Least-squares ``y = c0 + sum c_i x_i`` over the rows of (job, what); coefficients and the
    largest relative residual."""
    sel = [r for r in rows if r["job"] == job and r["what"] == what]
    if len(sel) < len(xs) + 1:
        return np.full(len(xs) + 1, np.nan), float("nan")
    A = np.array([[1.0, *(r[x] for x in xs)] for r in sel])
    b = np.array([r[y] for r in sel])
    c, *_ = np.linalg.lstsq(A, b, rcond=None)
    return c, float(np.max(np.abs(A @ c - b) / b))


def check_models(rows: list[dict]) -> list[dict]:
    """Every measured job against descbench.jobresources' estimate for it (headroom = estimate / measured)."""
    from descbench import jobresources as jr

    out = []
    for r in rows:
        est = jr.estimate_for_measurement(r)
        if est is None:
            continue
        out.append({**r, "model_mem_mb": est["mem_mb"], "model_runtime_min": est["runtime"],
                    "mem_headroom": round(est["mem_mb"] / r["peak_rss_mb"], 2),
                    "time_headroom": round(est["runtime"] * 60 / r["wall_s"], 1)})
    return out


def markdown(rows: list[dict], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def report(rows: list[dict]) -> None:
    cols = ["job", "what", "side", "megapixels", "kp_max", "kp_scene", "peak_rss_mb", "wall_s"]
    for series in ("size", "descsize", "count", "detector", "patches"):
        sel = [r for r in rows if r["series"] == series]
        if sel:
            print(f"\n### {series}\n")
            print(markdown(sel, cols + (["pairs_gkp2"] if series in ("size", "count") else [])
                           + (["patches_per_strip"] if series == "patches" else [])))
    dens = [r for r in rows if r["series"] == "density"]
    if dens:
        print("\n### density (keypoints per MP inside the border, demo image 1 of 8 scenes)\n")
        table = []
        for det in sorted({r["what"] for r in dens}):
            v = sorted(r["per_mp"] for r in dens if r["what"] == det)
            table.append({"detector": det, "min": v[0], "median": v[len(v) // 2], "max": v[-1]})
        print(markdown(table, ["detector", "min", "median", "max"]))
    print("\n### fits (least squares; mem in MB, time in s)\n")
    size = [r for r in rows if r["series"] == "size"]
    descsize = [r for r in rows if r["series"] == "descsize"]
    for job, what in (("keypoints", "locked"), ("descriptors", "sift")):
        c, e = fit(descsize, job, what, ("megapixels",), "peak_rss_mb")
        ct, et = fit(descsize, job, what, ("megapixels_scene",), "wall_s")
        print(f"{job} {what} (2000 locked keypoints per image): mem = {c[0]:.0f} + {c[1]:.1f} * MP (max rel. residual {e:.2f}); "
              f"time = {ct[0]:.1f} + {ct[1]:.2f} * scene MP s (max rel. residual {et:.2f})")
    count = [r for r in rows if r["series"] == "count"]
    for job, what in (("keypoints", "sift"), ("keypoints", "keynet"), ("descriptors", "sift"), ("descriptors", "rootsift"),
                      ("descriptors", "hardnet")):
        c, e = fit(size, job, what, ("megapixels",), "peak_rss_mb")
        ct, et = fit(size, job, what, ("megapixels_scene",), "wall_s")
        print(f"{job} {what}: mem = {c[0]:.0f} + {c[1]:.1f} * MP (max rel. residual {e:.2f}); "
              f"time = {ct[0]:.1f} + {ct[1]:.2f} * scene MP s (max rel. residual {et:.2f})")
    for desc in ("sift", "hardnet"):
        c, e = fit(count, "descriptors", desc, ("kp_scene",), "peak_rss_mb")
        ct, et = fit(count, "descriptors", desc, ("kp_scene",), "wall_s")
        print(f"descriptors {desc} at {count[0]['megapixels'] if count else '?'} MP: mem = {c[0]:.0f} + {c[1] * 1000:.2f} "
              f"* scene kp/1000 (max rel. residual {e:.2f}); time = {ct[0]:.1f} + {ct[1] * 1000:.3f} * scene kp/1000 s")
    c, e = fit(count, "score", "sift", ("kp_max",), "peak_rss_mb")
    ct, et = fit(count, "score", "sift", ("pairs_gkp2",), "wall_s")
    print(f"score sift: mem = {c[0]:.0f} + {c[1] * 1000:.2f} * max kp per image/1000 (max rel. residual {e:.2f}); "
          f"time = {ct[0]:.1f} + {ct[1]:.4f} * sum_k N1*Nk/1e6 s (max rel. residual {et:.2f})")
    try:
        checked = check_models(rows)
    except (ImportError, AttributeError):
        return
    print("\n### the models of descbench.jobresources against every measurement\n")
    print(markdown(checked, ["series", "job", "what", "megapixels", "kp_scene", "peak_rss_mb", "model_mem_mb",
                             "mem_headroom", "wall_s", "model_runtime_min", "time_headroom"]))
    worst = min(checked, key=lambda r: r["mem_headroom"])
    print(f"\nsmallest memory headroom: {worst['mem_headroom']} ({worst['job']} {worst['what']} at {worst.get('megapixels')} MP)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_resources"), help="data, results and logs (reused)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("--from-json", type=Path, default=None, help="only print the tables and fits of a previous run")
    ap.add_argument("--sizes", default="0.2621,1,4,27", help="megapixels of the upscaled scene (square)")
    ap.add_argument("--keynet-max-mp", type=float, default=1.5, help="keynet keypoints only up to this size "
                    "(about 10 s per megapixel and image on one loaded core)")
    ap.add_argument("--rootsift-max-mp", type=float, default=4.5, help="rootsift descriptors only up to this size "
                    "(its job is sift's plus an O(N) rooting)")
    ap.add_argument("--counts", default="1000,4000,16000", help="keypoints per image of the locked series")
    ap.add_argument("--hardnet-max-count", type=int, default=4000, help="hardnet in the locked series only up to this "
                    "many keypoints per image (about 200 patches/s on one loaded core)")
    ap.add_argument("--count-side", type=int, default=1000, help="image side of the locked series")
    ap.add_argument("--detector-sides", default="1000,2000", help="image sides of the detector series")
    ap.add_argument("--descsize-count", type=int, default=2000, help="locked keypoints per image of the descsize series")
    ap.add_argument("--series", default="size,count,detector,patches,descsize,density")
    ap.add_argument("--merge", type=Path, default=None, help="add the rows of this earlier --json file (other series)")
    args = ap.parse_args(argv)
    if args.from_json:
        report(json.loads(args.from_json.read_text())["rows"])
        return 0
    from descbench.datasets.demo import generate_scene

    src = args.work / "demo"
    for s in (BIG, SMALL):
        if not (src / s / "H_1_6").exists():
            generate_scene(s, src)
    warm = args.work / "numba_warmup.flag"
    if not warm.exists():  # the workflow's numba_warmup: kernels compiled into the cache before scoring
        run_job(descbench("warmup", "--out", str(warm)), args.work / "logs" / "warmup.log")
    series = args.series.split(",")
    rows: list[dict] = []
    t0 = time.perf_counter()
    if "size" in series:
        rows += size_series(args.work, src, [float(s) for s in args.sizes.split(",")], args.keynet_max_mp, args.rootsift_max_mp)
    if "count" in series:
        rows += count_series(args.work, src, [int(n) for n in args.counts.split(",")], args.count_side,
                             args.hardnet_max_count)
    if "detector" in series:
        rows += detector_series(args.work, src, [int(x) for x in args.detector_sides.split(",")])
    if "patches" in series:
        rows += patch_series(args.work, src)
    if "descsize" in series:
        rows += descsize_series(args.work, src, [int(round(math.sqrt(float(mp) * 1e6))) for mp in args.sizes.split(",")],
                                args.descsize_count)
    if "density" in series:
        rows += density_series(src)
    if args.merge:
        rows = [r for r in json.loads(args.merge.read_text())["rows"] if r["series"] not in series] + rows
    meta = {"python": sys.version.split()[0], "nproc": os.cpu_count(), "loadavg_end": os.getloadavg(),
            "total_s": round(time.perf_counter() - t0, 1)}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    report(rows)
    print(f"\n{meta}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
