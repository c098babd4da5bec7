"""The nearest-neighbour matchers against kornia's matching functions (the reference: kornia 0.9's
``match_mnn``/``match_nn``/``match_snn``/``match_smnn`` called directly) and against a float64
brute force, on descriptors without near-ties (kornia's float32 cdist and descbench's float64
distances then rank alike)."""

from __future__ import annotations

import numpy as np
import pytest

from descbench.keypoints import ImageKeypoints
from descbench.matchers import MatchSide, check_matcher_params, run_matcher
from descbench.metrics.nn import mutual_nearest

torch = pytest.importorskip("torch")
KF = pytest.importorskip("kornia.feature")


def side(desc: np.ndarray, size=(64, 48)) -> MatchSide:
    n = desc.shape[0]
    z = np.zeros(n, np.float32)
    kps = ImageKeypoints(z, z, z + 4, z - 1, z, np.zeros(n, np.int32), np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))
    return MatchSide(kps, desc, size)


def run(name: str, a: np.ndarray, b: np.ndarray, **params):
    p = check_matcher_params(name, params, f"matchers.{name}.params")
    return run_matcher(name, p, side(a), side(b), "test")


def kornia_pairs(fn, a, b, *args):
    dists, idx = fn(torch.from_numpy(a), torch.from_numpy(b), *args)
    idx = idx.numpy()
    order = np.argsort(idx[:, 0], kind="stable")
    return idx[order, 0], idx[order, 1], dists.numpy()[order, 0].astype(np.float64)


@pytest.fixture(params=[0, 1, 2])
def descs(request):
    rng = np.random.default_rng(request.param)
    a = rng.normal(size=(150, 32)).astype(np.float32)
    # b: noisy copies of some of a (true matches with clear nearest neighbours) plus distractors
    b = np.concatenate([a[rng.permutation(150)[:90]] + 0.3 * rng.normal(size=(90, 32)).astype(np.float32),
                        rng.normal(size=(70, 32)).astype(np.float32)])
    return a, b


@pytest.mark.parametrize("name, fn, args, params", [
    ("mnn", "match_mnn", (), {}),
    ("nn", "match_nn", (), {}),
    ("snn", "match_snn", (0.8,), {}),
    ("snn", "match_snn", (0.6,), {"ratio": 0.6}),
    ("smnn", "match_smnn", (0.95,), {}),
    ("smnn", "match_smnn", (0.7,), {"ratio": 0.7}),
])
def test_equals_kornia(descs, name, fn, args, params):
    a, b = descs
    m = run(name, a, b, **params)
    ka, kb, ks = kornia_pairs(getattr(KF, fn), a, b, *args)
    assert len(m) > 10
    np.testing.assert_array_equal(m.idx_a, ka)
    np.testing.assert_array_equal(m.idx_b, kb)
    np.testing.assert_allclose(m.score, ks, rtol=1e-5)


def test_nn_ratio_is_snn_with_distance_scores(descs):
    a, b = descs
    m = run("nn", a, b, ratio=0.8)
    ka, kb, _ = kornia_pairs(KF.match_snn, a, b, 0.8)
    np.testing.assert_array_equal(m.idx_a, ka)
    np.testing.assert_array_equal(m.idx_b, kb)
    d = np.sqrt(((a[m.idx_a].astype(np.float64) - b[m.idx_b]) ** 2).sum(1))
    np.testing.assert_allclose(m.score, d, rtol=1e-12)


def test_mnn_is_the_matching_tasks_matches(descs):
    a, b = descs
    m = run("mnn", a, b)
    ia, ib, dist = mutual_nearest(a, b)
    np.testing.assert_array_equal(m.idx_a, ia)
    np.testing.assert_array_equal(m.idx_b, ib)
    np.testing.assert_array_equal(m.score, dist)


def test_ratio_boundary_and_zero_distances():
    """Hand-worked: a ratio equal to the threshold passes (kornia's <=); d2 = 0 (two identical
    candidates at the query) fails, as kornia's 0/0 = NaN does."""
    b = np.array([[0, 0], [3, 0], [0, 5]], np.float32)
    a = np.array([[0.0, 1.5], [5.0, 0.0]], np.float32)
    # a0: d(b0) = 1.5, d(b1) = sqrt(9 + 2.25) = 3.354, d(b2) = 3.5 -> ratio 0.447
    # a1: d(b1) = 2, d(b0) = 5, d(b2) = sqrt(50) -> ratio 0.4 exactly
    m = run("snn", a, b, ratio=0.4)
    np.testing.assert_array_equal(m.idx_a, [1])
    np.testing.assert_allclose(m.score, [0.4])
    assert len(run("snn", a, b, ratio=0.39)) == 0
    twins = np.array([[1, 1], [1, 1], [9, 9]], np.float32)
    assert len(run("snn", np.array([[1, 1]], np.float32), twins, ratio=1.0)) == 0
    assert len(run("nn", np.array([[1, 1]], np.float32), twins, ratio=1.0)) == 0


def test_too_few_keypoints_give_no_matches():
    one = np.ones((1, 4), np.float32)
    many = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert len(run("snn", many, one)) == 0 and len(run("smnn", one, many)) == 0 and len(run("nn", many, one, ratio=0.9)) == 0
    assert len(run("nn", many, one)) == 5 and len(run("mnn", many, one)) == 1
    empty = np.zeros((0, 4), np.float32)
    for name in ("mnn", "nn", "snn", "smnn"):
        assert len(run(name, empty, many)) == 0 and len(run(name, many, empty)) == 0


def test_hamming_descriptors():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, size=(40, 32), dtype=np.uint8)
    b = np.concatenate([a[:25] ^ (rng.random((25, 32)) < 0.02).astype(np.uint8), rng.integers(0, 256, (15, 32), dtype=np.uint8)])
    m = run("mnn", a, b)
    bits = np.unpackbits(a, axis=1)[:, None, :] != np.unpackbits(b, axis=1)[None, :, :]
    dm = bits.sum(-1)
    ref = [(i, int(np.argmin(dm[i]))) for i in range(40) if int(np.argmin(dm[:, np.argmin(dm[i])])) == i]
    assert list(zip(m.idx_a.tolist(), m.idx_b.tolist())) == ref
    np.testing.assert_array_equal(m.score, [dm[i, j] for i, j in ref])


def test_ratio_defaults_are_kornias():
    import inspect

    from descbench.matchers.nearest import PARAMS_SCHEMA

    for name, fn in (("snn", KF.match_snn), ("smnn", KF.match_smnn)):
        assert PARAMS_SCHEMA[name]["properties"]["ratio"]["default"] == inspect.signature(fn).parameters["th"].default
