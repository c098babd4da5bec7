"""descbench.keypoints.superpoint: SuperPoint written by descbench, its two checkpoint layouts and
the published post-processing.

Nothing is downloaded: each layout's state dict is built here from its layer list (the key names
and shapes are the layout) with seeded random values. The references are independent: a
functional forward written from the layer list, brute-force NumPy NMS and a hand-written bilinear
interpolation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import raises_naming
from descbench.errors import ConfigError, DataError
from descbench.keypoints import superpoint as sp

# (name, c_in, c_out, kernel, relu) of every convolution, in order. MagicLeap's superpoint_v1.pth
# (demo_superpoint.py:SuperPointNet): plain convolutions; 2 x 2 max pools after conv1b, conv2b, conv3b.
MAGICLEAP = [("conv1a", 1, 64, 3, True), ("conv1b", 64, 64, 3, True), ("conv2a", 64, 64, 3, True),
             ("conv2b", 64, 64, 3, True), ("conv3a", 64, 128, 3, True), ("conv3b", 128, 128, 3, True),
             ("conv4a", 128, 128, 3, True), ("conv4b", 128, 128, 3, True)]
MAGICLEAP_HEADS = [("convPa", 128, 256, 3, True), ("convPb", 256, 65, 1, False),
                   ("convDa", 128, 256, 3, True), ("convDb", 256, 256, 1, False)]
POOL_AFTER = {"conv1b", "conv2b", "conv3b", "backbone.0.1", "backbone.1.1", "backbone.2.1"}
# rpautrat's superpoint_v6_from_tf.pth (superpoint_pytorch.py:SuperPoint): blocks conv -> ReLU -> BN(eps 1e-3)
RPAUTRAT = [(f"backbone.{s}.{j}", *MAGICLEAP[2 * s + j][1:]) for s in range(4) for j in range(2)]
RPAUTRAT_HEADS = [("detector.0", 128, 256, 3, True), ("detector.1", 256, 65, 1, False),
                  ("descriptor.0", 128, 256, 3, True), ("descriptor.1", 256, 256, 1, False)]
EPS = 0.001


def layout_state(layout: str, seed: int, identity_bn: bool = False) -> dict:
    """A state dict of ``layout`` with seeded random values (He-scaled weights; batch norms with
    random statistics, or the identity: mean 0, var 1 - eps, weight 1, bias 0)."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    convs = MAGICLEAP + MAGICLEAP_HEADS if layout == "magicleap" else RPAUTRAT + RPAUTRAT_HEADS
    for name, c_in, c_out, k, _ in convs:
        prefix = name if layout == "magicleap" else f"{name}.conv"
        state[f"{prefix}.weight"] = torch.randn(c_out, c_in, k, k, generator=g) * math.sqrt(2.0 / (c_in * k * k))
        state[f"{prefix}.bias"] = torch.randn(c_out, generator=g) * 0.05
        if layout == "rpautrat":
            if identity_bn:
                bn = {"weight": torch.ones(c_out), "bias": torch.zeros(c_out), "running_mean": torch.zeros(c_out),
                      "running_var": torch.full((c_out,), 1.0 - EPS)}
            else:
                bn = {"weight": torch.rand(c_out, generator=g) + 0.5, "bias": torch.randn(c_out, generator=g) * 0.1,
                      "running_mean": torch.randn(c_out, generator=g) * 0.1,
                      "running_var": torch.rand(c_out, generator=g) + 0.5}
            for key, value in bn.items():
                state[f"{name}.bn.{key}"] = value
            state[f"{name}.bn.num_batches_tracked"] = torch.tensor(0)
    return state


def functional_heads(layout: str, state: dict, image: torch.Tensor):
    """The raw heads (logits, descriptors) computed from the layer list with torch.nn.functional calls."""
    def conv(x, name, k, relu):
        prefix = name if layout == "magicleap" else f"{name}.conv"
        x = F.conv2d(x, state[f"{prefix}.weight"], state[f"{prefix}.bias"], stride=1, padding=(k - 1) // 2)
        if relu:
            x = F.relu(x)
        if layout == "rpautrat":
            x = F.batch_norm(x, state[f"{name}.bn.running_mean"], state[f"{name}.bn.running_var"],
                             state[f"{name}.bn.weight"], state[f"{name}.bn.bias"], training=False, eps=EPS)
        return x

    x = image
    for name, _, _, k, relu in (MAGICLEAP if layout == "magicleap" else RPAUTRAT):
        x = conv(x, name, k, relu)
        if name in POOL_AFTER:
            x = F.max_pool2d(x, kernel_size=2, stride=2)
    (pa, _, _, ka, ra), (pb, _, _, kb, rb), (da, _, _, kda, rda), (db, _, _, kdb, rdb) = (
        MAGICLEAP_HEADS if layout == "magicleap" else RPAUTRAT_HEADS)
    logits = conv(conv(x, pa, ka, ra), pb, kb, rb)
    desc = conv(conv(x, da, kda, rda), db, kdb, rdb)
    return logits, desc


@pytest.fixture(scope="module")
def gray() -> np.ndarray:
    """61 x 83 float32 grey texture in [0, 1] (neither side a multiple of 8)."""
    rng = np.random.default_rng(0)
    coarse = rng.random((9, 12))
    y, x = np.mgrid[0:61, 0:83]
    return np.clip(0.5 + 0.5 * np.sin(x / 5.0 + coarse[y // 7, x // 7] * 3) * np.cos(y / 4.0), 0, 1).astype(np.float32)


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------ (i) forward == functional re-implementation

@pytest.mark.parametrize("layout", sp.LAYOUTS)
def test_forward_equals_functional_layers(layout, gray):
    state = layout_state(layout, seed=1)
    model, found = sp.load_superpoint(state)
    assert found == layout
    image = torch.from_numpy(gray)[None, None]
    with torch.inference_mode():
        logits, desc = model(image)
        ref_logits, ref_desc = functional_heads(layout, state, image)
    assert logits.shape == (1, 65, 7, 10) and desc.shape == (1, 256, 7, 10)  # floor(61 / 8), floor(83 / 8)
    assert torch.equal(logits, ref_logits)
    assert torch.equal(desc, ref_desc)


@pytest.mark.parametrize("layout", sp.LAYOUTS)
def test_the_layouts_key_names_and_shapes(layout):
    """The module's state dict is the layout's: same keys in the same order and shapes."""
    model = sp.superpoint_net(layout)
    expected = layout_state(layout, seed=0)
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == [(k, tuple(v.shape)) for k, v in expected.items()]
    assert len(expected) == (24 if layout == "magicleap" else 84)


def test_score_map_places_channel_8r_plus_c_at_pixel_8i_plus_r_8j_plus_c():
    logits = torch.randn(1, 65, 2, 3, generator=torch.Generator().manual_seed(0))
    prob = torch.softmax(logits, dim=1)
    scores = sp.score_map(logits)[0]
    for i, j, r, c in [(0, 0, 0, 0), (1, 2, 7, 7), (0, 1, 3, 5), (1, 0, 6, 1)]:
        assert scores[8 * i + r, 8 * j + c] == prob[0, 8 * r + c, i, j]


# ------------------------------------------------------------ (ii) layouts agree under identity batch norms

def magicleap_twin(state_b: dict) -> dict:
    """The layout-a dict holding layout-b's convolutions (batch norms dropped)."""
    names = [n for n, *_ in MAGICLEAP + MAGICLEAP_HEADS]
    blocks = [n for n, *_ in RPAUTRAT + RPAUTRAT_HEADS]
    return {f"{a}.{p}": state_b[f"{b}.conv.{p}"] for a, b in zip(names, blocks) for p in ("weight", "bias")}


def test_identity_batch_norms_give_the_magicleap_outputs(gray):
    """rpautrat layout with identity batch norms (mean 0, var 1 - eps, weight 1, bias 0) equals the
    MagicLeap layout with the same convolutions. Exactly: float32(1 - 0.001) + float32(0.001) is 1.0,
    so each batch norm multiplies by 1 and adds 0 (a float tolerance of 0)."""
    assert np.float32(1 - EPS) + np.float32(EPS) == np.float32(1.0)
    state_b = layout_state("rpautrat", seed=2, identity_bn=True)
    model_b, lay_b = sp.load_superpoint(state_b)
    model_a, lay_a = sp.load_superpoint(magicleap_twin(state_b))
    assert (lay_a, lay_b) == ("magicleap", "rpautrat")
    image = torch.from_numpy(gray)[None, None]
    with torch.inference_mode():
        (la, da), (lb, db) = model_a(image), model_b(image)
    assert torch.equal(la, lb) and torch.equal(da, db)
    for sampling in sp.SAMPLINGS:
        params = {"sampling": sampling, "detection_threshold": 0.0}
        out_a = sp.detect_and_describe(gray, model_a, params)
        out_b = sp.detect_and_describe(gray, model_b, params)
        assert len(out_a[0]) > 20
        for a, b in zip(out_a, out_b):
            np.testing.assert_array_equal(a, b)


def test_a_batch_norm_that_is_not_the_identity_is_applied(gray):
    """A non-identity batch norm changes the rpautrat outputs (the test above cannot miss it)."""
    state_b = layout_state("rpautrat", seed=2, identity_bn=True)
    state_b["backbone.0.0.bn.bias"] = torch.full((64,), -0.5)
    model_b, _ = sp.load_superpoint(state_b)
    model_a, _ = sp.load_superpoint(magicleap_twin(state_b))
    image = torch.from_numpy(gray)[None, None]
    with torch.inference_mode():
        assert not torch.equal(model_a(image)[0], model_b(image)[0])
        assert torch.equal(model_b(image)[0], functional_heads("rpautrat", state_b, image)[0])


# ------------------------------------------------------------ (iii) NMS, borders, max_keypoints

def window_max(a: np.ndarray, r: int) -> np.ndarray:
    """Brute force: the maximum of each pixel's (2 r + 1)^2 window, clipped at the map's edges."""
    h, w = a.shape
    out = np.empty_like(a)
    for y in range(h):
        for x in range(w):
            out[y, x] = a[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1].max()
    return out


def brute_maxpool_nms(s: np.ndarray, r: int) -> np.ndarray:
    """LightGlue/rpautrat's max-pool NMS, from its definition (module docstring)."""
    keep = s == window_max(s, r)
    for _ in range(2):
        suppressed = window_max(keep.astype(np.float32), r) > 0
        rest = np.where(suppressed, 0, s).astype(s.dtype)
        keep |= (rest == window_max(rest, r)) & ~suppressed
    return np.where(keep, s, 0)


def brute_greedy_nms(s: np.ndarray, r: int, t: float) -> list:
    """MagicLeap's greedy NMS, brute force: candidates >= t by (-score, row-major index); kept unless a
    kept pixel is within Chebyshev distance r."""
    h, w = s.shape
    cands = sorted(((-float(s[y, x]), y * w + x) for y in range(h) for x in range(w) if s[y, x] >= t))
    kept = []
    for _, idx in cands:
        y, x = divmod(idx, w)
        if all(max(abs(y - ky), abs(x - kx)) > r for ky, kx in (divmod(k, w) for k in kept)):
            kept.append(idx)
    return kept


def score_maps():
    rng = np.random.default_rng(7)
    yield rng.random((17, 23)).astype(np.float32)
    yield (rng.integers(0, 4, (17, 23)) / 4).astype(np.float32)  # many ties, plateaus of equal maxima
    yield np.full((9, 11), 0.25, dtype=np.float32)  # one plateau


@pytest.mark.parametrize("r", [0, 1, 2, 4])
def test_maxpool_nms_equals_brute_force(r):
    for s in score_maps():
        got = sp.maxpool_nms(torch.from_numpy(s), r).numpy()
        np.testing.assert_array_equal(got, brute_maxpool_nms(s, r) if r else s)


@pytest.mark.parametrize("r", [0, 1, 3])
def test_greedy_nms_equals_brute_force(r):
    for s in score_maps():
        for t in (0.0, 0.3):
            assert sp.greedy_nms(s, r, t).tolist() == brute_greedy_nms(s, r, t)


def brute_select(s: np.ndarray, p: dict):
    """Keypoints of a score map by the module docstring's rules, brute force."""
    h, w = s.shape
    r, b, t, k = p["nms_radius"], p["remove_borders"], p["detection_threshold"], p["max_keypoints"]
    if p["nms"] == "maxpool":
        kept = brute_maxpool_nms(s, r) if r else s
        idx = [y * w + x for y in range(h) for x in range(w) if kept[y, x] > t]
    else:
        idx = brute_greedy_nms(s, r, t)
    rows = [(-float(s.flat[i]), i) for i in idx
            if b <= i % w < w - b and b <= i // w < h - b]
    rows.sort()
    if k > 0:
        rows = rows[:k]
    xy = np.array([[i % w, i // w] for _, i in rows], dtype=np.float32).reshape(-1, 2)
    return xy, np.array([-v for v, _ in rows], dtype=np.float32)


@pytest.mark.parametrize("nms", sp.NMS_MODES)
@pytest.mark.parametrize("b,k", [(0, -1), (3, -1), (2, 5), (0, 1)])
def test_select_keypoints_border_threshold_and_top_k(nms, b, k):
    for s in score_maps():
        p = sp.filled_params({"nms": nms, "nms_radius": 1, "remove_borders": b, "max_keypoints": k,
                              "detection_threshold": 0.3})
        xy, score = sp.select_keypoints(s, p)
        ref_xy, ref_s = brute_select(s, p)
        np.testing.assert_array_equal(xy, ref_xy)
        np.testing.assert_array_equal(score, ref_s)


def test_threshold_is_strict_for_maxpool_and_inclusive_for_greedy():
    s = np.zeros((20, 20), dtype=np.float32)
    s[10, 10] = 0.5
    strict = sp.filled_params({"detection_threshold": 0.5, "remove_borders": 0})
    assert len(sp.select_keypoints(s, strict)[0]) == 0
    assert sp.select_keypoints(s, {**strict, "nms": "greedy"})[0].tolist() == [[10.0, 10.0]]


# ------------------------------------------------------------ (iv) descriptor sampling

def cell_coordinate(x: float, sampling: str, n: int, nc: int) -> float:
    """Where pixel x (size n, nc cells) falls in the 1/8 map's index space, per the module docstring."""
    if sampling == "magicleap":
        return x * (nc - 1) / n
    if sampling == "superglue":
        return (x - 3.5) * (nc - 1) / (8 * nc - 4.5)
    return (x + 0.5) / 8 - 0.5


def bilinear(dense: np.ndarray, u: float, v: float) -> np.ndarray:
    """Hand-written bilinear interpolation of ``dense`` [C, Hc, Wc] at (u, v), zero outside."""
    c, hc, wc = dense.shape
    u0, v0 = math.floor(u), math.floor(v)
    out = np.zeros(c)
    for yy, wy in ((v0, v0 + 1 - v), (v0 + 1, v - v0)):
        for xx, wx in ((u0, u0 + 1 - u), (u0 + 1, u - u0)):
            if 0 <= yy < hc and 0 <= xx < wc:
                out += wy * wx * dense[:, yy, xx]
    return out / np.linalg.norm(out)


@pytest.mark.parametrize("sampling", sp.SAMPLINGS)
def test_sampling_equals_hand_written_bilinear(sampling):
    dense = torch.randn(16, 5, 7, generator=torch.Generator().manual_seed(3))
    h, w = 43, 60  # image; map 5 x 7 cells
    xy = np.array([[0, 0], [3.5, 3.5], [17.25, 9.0], [55, 38], [59, 42], [30.6, 21.4], [-0.5, 42.5]], dtype=np.float32)
    got = sp.sample_descriptors(dense, xy, sampling, (h, w))
    d = dense.numpy().astype(np.float64)
    for row, (x, y) in zip(got, xy):
        ref = bilinear(d, cell_coordinate(float(x), sampling, w, 7), cell_coordinate(float(y), sampling, h, 5))
        np.testing.assert_allclose(row, ref, rtol=0, atol=2e-6)


def test_rpautrat_sampling_hits_cell_centres_exactly():
    dense = F.normalize(torch.randn(8, 3, 4, generator=torch.Generator().manual_seed(4)), dim=0)
    got = sp.sample_descriptors(dense, np.array([[8 * 2 + 3.5, 8 * 1 + 3.5]], np.float32), "rpautrat", (24, 32))
    np.testing.assert_allclose(got[0], dense[:, 1, 2].numpy(), rtol=0, atol=2e-7)  # re-normalisation rounding


@pytest.mark.parametrize("layout", sp.LAYOUTS)
@pytest.mark.parametrize("sampling", ["auto", *sp.SAMPLINGS])
def test_describe_on_own_keypoints_gives_the_same_rows(layout, sampling, gray):
    model, _ = sp.load_superpoint(layout_state(layout, seed=5))
    params = {"sampling": sampling, "detection_threshold": 0.0, "max_keypoints": 40}
    xy, scores, rows = sp.detect_and_describe(gray, model, params)
    assert rows.dtype == np.float32 and rows.shape == (len(xy), 256) and len(xy) == 40
    assert np.all(np.diff(scores) <= 0)
    np.testing.assert_array_equal(sp.describe(gray, model, xy, params), rows)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("layout", sp.LAYOUTS)
def test_end_to_end_against_the_functional_heads(layout, gray):
    """Scores are the softmax of the functional logits at (8 i + r, 8 j + c); rows are the hand-written
    bilinear interpolation of the functional descriptor map, L2-normalised per cell, then per row."""
    state = layout_state(layout, seed=9)
    model, _ = sp.load_superpoint(state)
    with torch.inference_mode():
        logits, desc = functional_heads(layout, state, torch.from_numpy(gray)[None, None])
    prob = torch.softmax(logits, dim=1)[0].numpy()
    dense = desc[0].numpy().astype(np.float64)
    dense /= np.linalg.norm(dense, axis=0)
    xy, scores, rows = sp.detect_and_describe(gray, model, {"detection_threshold": 0.0, "max_keypoints": 30})
    h, w = gray.shape
    for (x, y), s, row in zip(xy.astype(int), scores, rows):
        assert 4 <= x < 80 - 4 and 4 <= y < 56 - 4  # remove_borders 4 on the 56 x 80 score map
        assert s == prob[8 * (y % 8) + x % 8, y // 8, x // 8]
        ref = bilinear(dense, cell_coordinate(x, layout, w, 10), cell_coordinate(y, layout, h, 7))
        np.testing.assert_allclose(row, ref, rtol=0, atol=2e-6)
    edges = np.array([[-0.5, -0.5], [w - 0.5, h - 0.5]], dtype=np.float32)  # the image's outer edges are inside
    assert np.isfinite(sp.describe(gray, model, edges)).all()


def test_auto_sampling_is_the_layouts_own(gray):
    for layout in sp.LAYOUTS:
        model, _ = sp.load_superpoint(layout_state(layout, seed=6))
        xy = np.array([[10.0, 12.0], [40.25, 30.5]], dtype=np.float32)
        np.testing.assert_array_equal(sp.describe(gray, model, xy), sp.describe(gray, model, xy, {"sampling": layout}))
    assert sp.resolved_sampling("auto", "rpautrat") == "rpautrat" and sp.resolved_sampling("superglue", "rpautrat") == "superglue"


# ------------------------------------------------------------ loading

def test_loads_files_and_wrapped_checkpoints(tmp_path, gray):
    state = layout_state("rpautrat", seed=8)
    plain, wrapped = tmp_path / "v6.pth", tmp_path / "ckpt.pth"
    torch.save(state, plain)
    torch.save({"state_dict": state}, wrapped)
    no_counters = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    outs = []
    for source in (plain, str(wrapped), no_counters):
        model, layout = sp.load_superpoint(source, layout="rpautrat")
        assert layout == "rpautrat" and not model.training
        outs.append(sp.detect_and_describe(gray, model))
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------ (v) bad input

@pytest.mark.bad_input
def test_another_models_weights_name_the_file_and_both_layouts(tmp_path):
    path = tmp_path / "keynet.pth"
    torch.save(torch.nn.Conv2d(1, 8, 3).state_dict(), path)
    raises_naming(lambda: sp.load_superpoint(path), str(path), "conv1a.weight", "backbone.0.0.conv.weight",
                  "'weight', 'bias'", "superpoint_v1.pth", "superpoint_v6_from_tf.pth", "fix")


@pytest.mark.bad_input
def test_a_layout_that_does_not_fit_names_the_file_and_the_key(tmp_path):
    state = layout_state("magicleap", seed=0)
    path = tmp_path / "sp.pth"
    torch.save(state, path)
    raises_naming(lambda: sp.load_superpoint(path, layout="rpautrat"), str(path), "layout magicleap",
                  "backbone.0.0.conv.weight", "fix")
    del state["convDb.bias"]
    raises_naming(lambda: sp.load_superpoint(state), "state dict given", "convDb.bias", "fix")
    state = layout_state("rpautrat", seed=0)
    state["detector.1.conv.weight"] = torch.zeros(64, 256, 1, 1)
    raises_naming(lambda: sp.load_superpoint(state), "detector.1.conv.weight", "(64, 256, 1, 1)", "(65, 256, 1, 1)")
    state = {**layout_state("rpautrat", seed=0), "conv1a.weight": torch.zeros(64, 1, 3, 3)}
    raises_naming(lambda: sp.load_superpoint(state), "both", "conv1a.weight", "backbone.0.0.conv.weight")


@pytest.mark.bad_input
def test_unknown_layout_missing_or_unreadable_file(tmp_path):
    raises_naming(lambda: sp.load_superpoint({}, layout="superglue"), "'superglue'", "auto", exc=ConfigError)
    raises_naming(lambda: sp.load_superpoint(tmp_path / "nope.pth"), "nope.pth", "does not exist", "superpoint_v1.pth")
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a torch file")
    raises_naming(lambda: sp.load_superpoint(junk), str(junk), "not a torch file", "fix")
    tensor = tmp_path / "tensor.pth"
    torch.save(torch.zeros(3), tensor)
    raises_naming(lambda: sp.load_superpoint(tensor), str(tensor), "Tensor", "not a state dict")


@pytest.mark.bad_input
def test_bad_params_images_and_keypoints_are_named(gray):
    for params, fragment in [({"nms_radius": -1}, "nms_radius"), ({"max_keypoints": 0}, "max_keypoints"),
                             ({"sampling": "bicubic"}, "sampling"), ({"nms": "soft"}, "nms"),
                             ({"detection_threshold": 1.5}, "detection_threshold"), ({"radius": 4}, "radius"),
                             ({"remove_borders": 2.0}, "remove_borders")]:
        raises_naming(lambda: sp.filled_params(params), "superpoint params", fragment, exc=ConfigError)
    model, _ = sp.load_superpoint(layout_state("magicleap", seed=0))
    raises_naming(lambda: sp.detect_and_describe((gray * 255).astype(np.uint8), model), "uint8", "255")
    raises_naming(lambda: sp.detect_and_describe(gray * 255, model), "[0, 1]", "255")
    raises_naming(lambda: sp.detect_and_describe(gray[:7], model), "7 x 83")
    raises_naming(lambda: sp.describe(gray, model, [[5.0, 5.0], [83.0, 3.0]]), "keypoint 1", "(83.0, 3.0)", "61 x 83")
    raises_naming(lambda: sp.describe(gray, model, [[np.nan, 5.0]]), "keypoint 0")
    raises_naming(lambda: sp.detect_and_describe(gray, torch.nn.Conv2d(1, 1, 1)), "not a SuperPointNet", exc=ConfigError)
