"""descbench.matchers.kornia_matching: fginn and adalam return kornia 0.9's match_fginn / match_adalam
bit for bit on the CPU (called here directly on the same descriptors and LAFs), with kornia's
defaults; descbench keypoints become LAFs by the inverse of descbench's KeyNet LAF rule."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from conftest import raises_naming
from descbench.config import validate_config
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.matchers import MatchSide, check_matcher_params, get_matcher, run_matcher
from descbench.matchers import kornia_matching as KM

torch = pytest.importorskip("torch")
kornia = pytest.importorskip("kornia")

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def shipped_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "config.yaml").read_text())


def keypoints(x, y, size, angle) -> ImageKeypoints:
    n = len(x)
    f = (lambda v: np.asarray(v, np.float32))
    return ImageKeypoints(f(x), f(y), f(size), f(angle), np.ones(n, np.float32), np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


def pair(n: int = 120, inliers: int = 90, seed: int = 0, d: int = 128, undefined_angles: bool = False, noise: float = 1.0,
         twins: int = 15):
    """Image a: ``n`` keypoints; image b: ``inliers`` of them moved by a similarity (rotation 12 deg,
    scale 1.1) with noisy descriptors, ``n - inliers`` others and ``twins`` near-duplicates, shuffled."""
    rng = np.random.default_rng(seed)
    W, H = 640, 480
    xa, ya = rng.uniform(20, W - 20, n), rng.uniform(20, H - 20, n)
    sa, aa = rng.uniform(3, 30, n), rng.uniform(0, 360, n)
    if undefined_angles:
        aa = np.full(n, -1.0)
    da = rng.standard_normal((n, d)).astype(np.float32)
    t, s = np.deg2rad(12.0), 1.1
    xb = s * (np.cos(t) * (xa - W / 2) - np.sin(t) * (ya - H / 2)) + W / 2 + 7
    yb = s * (np.sin(t) * (xa - W / 2) + np.cos(t) * (ya - H / 2)) + H / 2 - 5
    sb, ab = sa * s, (aa + 12.0) % 360 if not undefined_angles else aa
    db = da + noise * rng.standard_normal((n, d)).astype(np.float32)
    out = slice(inliers, n)
    xb[out], yb[out] = rng.uniform(0, W, n - inliers), rng.uniform(0, H, n - inliers)
    db[out] = rng.standard_normal((n - inliers, d)).astype(np.float32)
    # the first `twins` inliers have a twin a few pixels away with a similar descriptor (one structure
    # detected twice: fginn's spatial test does not count it as the second neighbour, the ratio test would)
    k = twins
    xb, yb = np.r_[xb, xb[:k] + rng.uniform(2, 6, k)], np.r_[yb, yb[:k] - rng.uniform(2, 6, k)]
    sb, ab = np.r_[sb, sb[:k]], np.r_[ab, ab[:k]]
    db = np.r_[db, db[:k] + 0.3 * noise * rng.standard_normal((k, d)).astype(np.float32)]
    n_b = n + k
    xb, yb = np.clip(xb, 0, W), np.clip(yb, 0, H)  # inside the image (LightGlue refuses others)
    perm = rng.permutation(n_b)
    a = MatchSide(keypoints(xa, ya, sa, aa), da, (W, H))
    b = MatchSide(keypoints(xb[perm], yb[perm], sb[perm], ab[perm]), db[perm], (W, H))
    return a, b


def test_lafs_invert_descbench_keynet_rule():
    from descbench.keypoints.keynet import keypoints_from_lafs

    kps = keypoints([10.5, 200.25, 3.0, 50.0], [20.0, 7.75, 300.5, 60.0], [4.0, 12.5, 31.0, 6.0], [0.0, 33.5, 271.25, -1.0])
    lafs = KM.lafs_of(kps)
    assert lafs.shape == (1, 4, 2, 3) and lafs.dtype == torch.float32
    back = keypoints_from_lafs(lafs[0].numpy(), np.ones(4))
    np.testing.assert_array_equal(back.x, kps.x)
    np.testing.assert_array_equal(back.y, kps.y)
    np.testing.assert_allclose(back.size, kps.size, rtol=1e-6)
    # an undefined angle (-1) is 0; the others come back (mod 360)
    np.testing.assert_allclose(back.angle, [0.0, 33.5, 271.25, 0.0], atol=2e-4)
    # kornia's own readers: scale size / 2, orientation -angle
    np.testing.assert_allclose(kornia.feature.get_laf_scale(lafs).reshape(-1).numpy(), kps.size / 2, rtol=1e-6)
    np.testing.assert_allclose(kornia.feature.get_laf_orientation(lafs).reshape(-1).numpy(), [0.0, -33.5, 88.75, 0.0], atol=2e-4)


def kornia_lafs(side: MatchSide):
    """The LAFs built here from the definition, not by the module's code path."""
    k = side.keypoints
    n = len(k)
    xy = torch.tensor(np.stack([k.x, k.y], 1)).reshape(1, n, 2)
    ori = torch.tensor(np.where(k.angle < 0, 0, -k.angle).astype(np.float32)).reshape(1, n, 1)
    return kornia.feature.laf_from_center_scale_ori(xy, torch.tensor(k.size / 2).reshape(1, n, 1, 1), ori)


def cpu(params: dict) -> dict:
    return {**params, "device": "cpu"}


def assert_same(m, dists, idxs):
    assert len(m) > 0
    np.testing.assert_array_equal(m.idx_a, idxs[:, 0].numpy())
    np.testing.assert_array_equal(m.idx_b, idxs[:, 1].numpy())
    np.testing.assert_array_equal(m.score, dists.reshape(-1).numpy().astype(np.float64))


@pytest.mark.parametrize("params", [{}, {"spatial_th": 0.0}, {"ratio": 0.95}, {"ratio": 0.95, "mutual": True}])
def test_fginn_is_kornias(params):
    a, b = pair()
    p = cpu(check_matcher_params("fginn", params, "matchers.f.params"))
    m = run_matcher("fginn", p, a, b, "w")
    dists, idxs = kornia.feature.match_fginn(torch.tensor(a.descriptors), torch.tensor(b.descriptors), kornia_lafs(a), kornia_lafs(b),
                                             p["ratio"], p["spatial_th"], p["mutual"])
    assert_same(m, dists, idxs)


@pytest.mark.parametrize("params, undefined", [({}, False), ({"orientation_difference_threshold": None, "refit": False}, False),
                                               ({"force_seed_mnn": False, "min_inliers": 3}, False), ({}, True)])
def test_adalam_is_kornias(params, undefined):
    a, b = pair(undefined_angles=undefined)
    p = cpu(check_matcher_params("adalam", params, "matchers.a.params"))
    m = run_matcher("adalam", p, a, b, "w")
    config = {k: p[k] for k in KM.ADALAM_CONFIG}
    dists, idxs = kornia.feature.match_adalam(torch.tensor(a.descriptors), torch.tensor(b.descriptors), kornia_lafs(a), kornia_lafs(b),
                                              config, hw1=(480, 640), hw2=(480, 640))
    assert_same(m, dists, idxs)
    assert (m.score <= 1 / p["min_confidence"]).all()  # inverse confidences: the verified branch, not the ratio fallback


def test_adalam_draws_no_random_numbers():
    """kornia 0.9's AdaLAM RANSAC samples the first couples of each neighbourhood: the matches are
    the same whatever torch's global RNG holds, and on repeated runs."""
    a, b = pair(seed=3)
    p = cpu(check_matcher_params("adalam", {}, "matchers.a.params"))
    torch.manual_seed(1)
    first = run_matcher("adalam", p, a, b, "w")
    torch.manual_seed(12345)
    torch.rand(1000)
    second = run_matcher("adalam", p, a, b, "w")
    assert len(first) > 0
    for f in ("idx_a", "idx_b", "score"):
        np.testing.assert_array_equal(getattr(first, f), getattr(second, f))


def test_defaults_are_kornias():
    sig = inspect.signature(kornia.feature.match_fginn).parameters
    assert get_matcher("fginn").defaults == {"ratio": sig["th"].default, "spatial_th": sig["spatial_th"].default,
                                             "mutual": sig["mutual"].default, "device": "auto", "threads": 1}
    from kornia.feature.adalam import get_adalam_default_config

    ref = {k: v for k, v in get_adalam_default_config().items() if k != "device"}
    assert {k: v for k, v in get_matcher("adalam").defaults.items() if k in KM.ADALAM_CONFIG} == ref
    assert list(KM.ADALAM_CONFIG) == list(ref)


def test_few_keypoints_no_matches():
    a, b = pair(n=20, inliers=15, twins=0)
    one = MatchSide(a.keypoints.take(np.arange(1)), a.descriptors[:1], a.image_size)
    for name in ("fginn", "adalam"):
        p = cpu(check_matcher_params(name, {}, "m"))
        assert len(run_matcher(name, p, a, one, "w")) == 0
    assert len(run_matcher("adalam", cpu(check_matcher_params("adalam", {}, "m")), one, b, "w")) == 0


def test_torch_runtime_facts_pick_env_threads_and_gpu():
    from descbench.config import job_resources, model_files, needs_learned_extra

    p = check_matcher_params("fginn", {"threads": 3, "device": "cuda"}, "m")
    assert job_resources(p, matcher="fginn") == {"threads": 3, "gpu": 1}
    assert needs_learned_extra(p, matcher="adalam") and not needs_learned_extra({"chunk_mb": 64}, matcher="mnn")
    assert job_resources({"chunk_mb": 64}, matcher="mnn") == {"threads": 1, "gpu": 0}
    assert model_files(p, matcher="fginn") == []


def test_runtime_recorded():
    rec = get_matcher("fginn").provenance(cpu(get_matcher("fginn").defaults))
    assert rec["device"] == "cpu" and rec["kornia"] == kornia.__version__ and rec["deterministic_algorithms"]


@pytest.mark.bad_input
@pytest.mark.parametrize("name", ["fginn", "adalam"])
def test_packed_binary_descriptors_refused(name):
    a, b = pair(n=10, inliers=5, twins=0)
    bits = MatchSide(a.keypoints, np.zeros((10, 32), np.uint8), a.image_size)
    raises_naming(lambda: run_matcher(name, cpu(get_matcher(name).defaults), bits, b, "w"), f"matcher '{name}'",
                  "packed binary", "fix:", "mnn")


@pytest.mark.bad_input
def test_config_refuses_a_binary_descriptor():
    cfg = shipped_config()
    cfg["descriptors"]["orb"] = {"family": "orb"}
    cfg["matchers"] = {"fg": {"matcher": "fginn"}}
    raises_naming(lambda: validate_config(cfg, SCHEMA), "matchers.fg.descriptors", "'orb'", "packed binary", "fix:", exc=ConfigError)
    cfg["matchers"] = {"fg": {"matcher": "adalam", "descriptors": ["sift", "rootsift"]}}
    assert validate_config(cfg, SCHEMA)["matchers"]["fg"]["params"]["refit"] is True


@pytest.mark.bad_input
def test_bad_params_name_the_key():
    raises_naming(lambda: check_matcher_params("adalam", {"ransac_iter": 10}, "matchers.a.params"), "matchers.a.params.ransac_iter",
                  exc=ConfigError)
    raises_naming(lambda: check_matcher_params("fginn", {"device": "gpu"}, "matchers.f.params"), "matchers.f.params.device", exc=ConfigError)

