"""Derived keypoint sets: config rules, the stage on hand-built files, and the DAG through a chain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from descbench import io
from descbench.config import root_detector_spec, validate_config
from descbench.errors import ConfigError
from descbench.keypoints import ImageKeypoints
from descbench.keypoints import sets as KS
from descbench.paths import ResultPaths, scene_batches
from descbench.jobs.common import load_keypoints
from descbench.jobs.keypoints import _write_keypoints, derive_scene, keypoint_cutoff

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def cfg_with(sets: dict, descriptors=None) -> dict:
    return {"keypoint_sets": sets, "descriptors": descriptors or {"d": {"family": "sift"}}}


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "sets, message",
    [
        ({"a": {"source": "nope"}}, r"keypoint_sets\.a reads unknown keypoint set 'nope'"),
        ({"s": {"detector": "sift"}, "a": {"source": "b"}, "b": {"source": "a"}}, r"cycle: (a -> b -> a|b -> a -> b)"),
        ({"s": {"detector": "sift"}, "x": {"intersection": {"sources": ["s", "s"]}}}, r"intersection\.sources: 's' intersected with itself"),
        ({"s": {"detector": "sift"}, "a": {"source": "s", "border_px": 10}}, r"keypoint_sets\.a\.border_px: a set defined by 'source'"),
        ({"s": {"detector": "sift", "source": "s"}}, r"exactly one of 'detector'"),
        ({"s": {"border_px": 3}}, r"exactly one of 'detector'"),
        ({"s": {"detector": "sift", "filters": [{"global_top_n_by_size": 5}]}}, r"define a set with source: s"),
        ({"s": {"detector": "sift"}, "a": {"source": "s", "filters": [{"global_top_n_by_size": 5}, {"min_size": 2}]}}, r"must be the last filter"),
        ({"s": {"detector": "sift"}, "o": {"detector": "orb"}, "x": {"intersection": {"sources": ["s", "o"]}, "filters": [{"min_size": 2}]}},
         r"keypoint_sets\.x\.filters: an intersection set"),
        ({"s": {"detector": "sift"}, "o": {"detector": "orb"}, "x": {"intersection": {"sources": ["s", "o"], "keep": "z"}}}, r"keep: 'z' is not one of"),
        ({"s": {"detector": "sift"}, "a": {"source": "s", "filters": [{"min_size": 2, "per_image_top_n_by_size": 3}]}}, r"keypoint_sets\.a\.filters\.0"),
        ({"s": {"detector": "sift"}, "a": {"source": "s", "filters": [{"top_n": 3}]}}, r"unknown config key 'keypoint_sets\.a\.filters\.0\.top_n'.*allowed keys.*per_image_top_n_by_size"),
    ],
)
def test_bad_keypoint_sets_name_the_key(sets, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg_with(sets), SCHEMA)


def test_derived_sets_get_no_detection_keys_and_resolve_their_root_detector():
    cfg = validate_config(cfg_with({
        "s": {"detector": "sift", "params": {"sigma": 2.0}}, "o": {"detector": "orb"},
        "big": {"source": "s", "filters": [{"per_image_top_n_by_size": 10}]},
        "x": {"intersection": {"sources": ["big", "o"], "keep": "o"}}, "y": {"intersection": {"sources": ["big", "o"]}},
    }), SCHEMA)
    sets = cfg["keypoint_sets"]
    assert "border_px" not in sets["big"] and "params" not in sets["x"] and sets["x"]["intersection"]["tol_px"] == 2.0
    assert root_detector_spec(sets, "big")["params"]["sigma"] == 2.0
    assert root_detector_spec(sets, "x")["detector"] == "orb"
    assert root_detector_spec(sets, "y")["detector"] == "sift"


# ------------------------------------------------------------------ the stage on hand-built files

SCENES = ["s_b", "s_a", "s_c"]


def _kps(xy, size):
    n = len(size)
    return ImageKeypoints(np.asarray(xy, np.float32)[:, 0], np.asarray(xy, np.float32)[:, 1], np.asarray(size, np.float32),
                          np.zeros(n, np.float32), np.arange(n, dtype=np.float32), np.zeros(n, np.int32), np.full(n, -1, np.int32),
                          np.arange(n, dtype=np.int32))


def _write_set(paths: ResultPaths, name: str, per_scene: dict):
    for scene, per_image in per_scene.items():
        out = Path(paths.keypoints(name, scene))
        out.parent.mkdir(parents=True, exist_ok=True)
        meta = io.provenance("keypoints", {"keypoint_set": name, "detector": "sift"}, scene=scene,
                             image_sizes={str(k): [200, 200] for k in range(1, 7)},
                             raw_counts={str(k): len(v) for k, v in per_image.items()}, empty_images=[])
        _write_keypoints(per_image, out, meta)


@pytest.fixture
def world(tmp_path):
    rng = np.random.default_rng(5)
    paths = ResultPaths(tmp_path, scene_batches(SCENES, 2))
    a, b = {}, {}
    for scene in SCENES:
        a[scene], b[scene] = {}, {}
        for k in range(1, 7):
            n = int(rng.integers(0, 25)) if k != 3 else 0  # image 3: empty everywhere
            xy = rng.integers(0, 40, (n, 2)).astype(float)
            a[scene][k] = _kps(xy, rng.integers(1, 5, n))  # heavy size ties
            m = int(rng.integers(0, 25))
            b[scene][k] = _kps(np.concatenate([xy[: m // 2] + rng.normal(0, 1, (min(m // 2, n), 2)), rng.integers(0, 40, (m - min(m // 2, n), 2))]),
                               rng.integers(1, 5, m))
    _write_set(paths, "A", a)
    _write_set(paths, "B", b)
    return paths, a, b


def test_global_filter_through_the_stage_equals_a_brute_force_over_the_dataset(world, tmp_path):
    paths, a, _ = world
    spec = {"source": "A", "filters": [{"min_size": 2}, {"global_top_n_by_size": 40}]}
    cut = tmp_path / "cut.json"
    keypoint_cutoff(paths, "G", spec, cut)
    got = {}
    for scene in SCENES:
        out = Path(paths.keypoints("G", scene))
        out.parent.mkdir(parents=True, exist_ok=True)
        derive_scene(paths, scene, "G", spec, out, cut)
        per_image, meta = load_keypoints(out)
        assert meta["empty_images"] == [k for k in range(1, 7) if len(per_image[k]) == 0]
        assert meta["sources"]["A"]["keypoint_set"] == "A"
        got[scene] = {k: per_image[k].source_index.tolist() for k in per_image}
    # brute force: min_size 2 per image, then the 40 largest of the dataset by (-size, scene, image, row)
    items = []
    for scene in SCENES:
        for k in range(1, 7):
            kps = a[scene][k]
            rows = [i for i in range(len(kps)) if kps.size[i] >= 2]
            items += [(-float(kps.size[i]), scene, k, r, int(kps.source_index[i])) for r, i in enumerate(rows)]
    kept = sorted(items)[:40]
    ref = {scene: {k: sorted(s for _, sc, kk, _, s in kept if sc == scene and kk == k) for k in range(1, 7)} for scene in SCENES}
    assert got == ref
    assert json.loads(cut.read_text())["n"] == 40


def test_intersection_sets_are_row_aligned_and_chain_through_a_filtered_set(world):
    paths, a, b = world
    filt = {"source": "A", "filters": [{"per_image_top_n_by_size": 10}]}
    for scene in SCENES:
        out = Path(paths.keypoints("Abig", scene))
        out.parent.mkdir(parents=True, exist_ok=True)
        derive_scene(paths, scene, "Abig", filt, out, None)
    for keep, name in (("Abig", "XA"), ("B", "XB")):
        spec = {"intersection": {"sources": ["Abig", "B"], "tol_px": 1.5, "keep": keep}}
        for scene in SCENES:
            out = Path(paths.keypoints(name, scene))
            out.parent.mkdir(parents=True, exist_ok=True)
            derive_scene(paths, scene, name, spec, out, None)
    for scene in SCENES:
        xa, _ = load_keypoints(Path(paths.keypoints("XA", scene)))
        xb, _ = load_keypoints(Path(paths.keypoints("XB", scene)))
        abig, _ = load_keypoints(Path(paths.keypoints("Abig", scene)))
        for k in range(1, 7):
            # row i of XA <-> row i of XB, within tol, each with its own set's attributes
            assert len(xa[k]) == len(xb[k])
            assert (np.hypot(*(xa[k].xy - xb[k].xy).T) <= 1.5).all()
            np.testing.assert_array_equal(xb[k].size, b[scene][k].size[xb[k].source_index])
            assert set(xa[k].source_index) <= set(abig[k].source_index)


# ------------------------------------------------------------------ the DAG follows the chain

@pytest.mark.e2e
def test_editing_one_set_reruns_only_what_depends_on_it(tmp_path):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["scenes"] = ["i_rocket", "v_coins"]
    cfg["execution"]["scenes_per_job"] = 1
    cfg["matching"]["enabled"] = False
    cfg["keypoint_sets"] = {
        "sift": {"detector": "sift"}, "orb": {"detector": "orb"},
        "big": {"source": "sift", "filters": [{"per_image_top_n_by_size": 200}]},
        "scale": {"source": "sift", "filters": [{"global_top_n_by_size": 300}]},
        "x": {"intersection": {"sources": ["big", "orb"], "tol_px": 3.0}},
    }
    cfg["descriptors"] = {"sift": {"family": "sift"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    def smk(*args):
        res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), *args],
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
        return res.stdout + res.stderr

    smk("--cores", "2")
    table = (tmp_path / "results" / "demo" / "report" / "comparison.csv").read_text()
    for name in ("sift", "orb", "big", "scale", "x"):
        assert f",{name}," in table or f"{name}," in table
    cut = json.loads((tmp_path / "results" / "demo" / "keypoint_cutoffs" / "scale.json").read_text())
    assert cut["n"] == 300 and cut["candidates"] > 300
    assert "Nothing to be done" in smk("-n")
    cfg["keypoint_sets"]["big"]["filters"] = [{"per_image_top_n_by_size": 150}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = smk("-n")
    from smkrun import job_counts

    counts = job_counts(out)
    # big and x (2 batches each), their descriptors and scores; nothing of sift, orb or scale
    assert counts["keypoints"] == 4 and counts["descriptors"] == 4 and counts["score"] == 4, counts
    assert "keypoint_cutoff" not in counts and "demo_scene" not in counts


def test_set_references_one_rule_each():
    """descbench.keypoints.sets directly: sources, the global cap, the kept side, the root detector."""
    kpsets = {"d": {"detector": "sift"}, "e": {"detector": "orb"},
              "f": {"source": "d", "filters": [{"min_size": 2}, {"global_top_n_by_size": 500}]},
              "i": {"intersection": {"sources": ["f", "e"], "keep": "e"}}, "j": {"intersection": {"sources": ["f", "e"]}}}
    assert [KS.set_sources(kpsets[n]) for n in "defij"] == [[], [], ["d"], ["f", "e"], ["f", "e"]]
    assert KS.global_top_n(kpsets["f"]) == 500 and KS.global_top_n(kpsets["d"]) is None
    assert KS.intersection_keep(kpsets["i"]) == "e" and KS.intersection_keep(kpsets["j"]) == "f"
    assert KS.root_detector_spec(kpsets, "i") is kpsets["e"] and KS.root_detector_spec(kpsets, "j") is kpsets["d"]
    with pytest.raises(ConfigError, match="keypoint sets form a cycle: a -> b -> a"):
        KS.root_detector_spec({"a": {"source": "b"}, "b": {"source": "a"}}, "a")
