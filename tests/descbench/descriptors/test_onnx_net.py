"""Descriptor family ``onnx`` (descbench.descriptors.onnx_net) with small ONNX models built here.

The models are linear functions of the patch with known weights (a Reshape that outputs the
patch itself, a full-size or 1 x 1 convolution), so every row is checked against values worked
out from the image: a linear ramp, on which the sampled patch is known exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from descbench.config import validate_config
from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.descriptors import onnx_net as O
from descbench.descriptors import patch_sampling as S
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.params import fragment_defaults
from descbench.patches.describe import describe_patches

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
OPSET = 13  # read by OpenCV 5's dnn module and by onnxruntime
N = 4  # patch side of the small models

W, H = 60, 40
YY, XX = np.mgrid[0:H, 0:W]
RAMP = (2 * XX + 3 * YY + 10).astype(np.uint8)  # bilinear sampling reproduces it exactly


def ramp(x, y):
    return 2 * np.clip(x, 0, W - 1) + 3 * np.clip(y, 0, H - 1) + 10


U, V = np.arange(N)[None, :], np.arange(N)[:, None]


# ----------------------------------------------------------------------------- models


def save_model(path: Path, nodes, inits, out_shape, n=N, input_name="patch", output_name="desc") -> Path:
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["B", 1, n, n])
    y = helper.make_tensor_value_info(output_name, TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, "test", [x], [y], [numpy_helper.from_array(a, k) for k, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def reshape_model(path: Path, shape, out_shape, n=N, pre=None) -> Path:
    """Output: the patch reshaped to ``shape`` (after the optional node ``pre``)."""
    nodes = [helper.make_node(op, [i], [o]) for op, i, o in (pre or [])]
    src = nodes[-1].output[0] if nodes else "patch"
    nodes.append(helper.make_node("Reshape", [src, "shape"], ["desc"]))
    return save_model(path, nodes, {"shape": np.array(shape, np.int64)}, out_shape, n)


def conv_model(path: Path, weight: np.ndarray, bias: np.ndarray, n=N) -> Path:
    """A convolution with ``weight`` [C, 1, k, k] and ``bias`` [C], no padding: [B, C, n-k+1, n-k+1]."""
    c, _, k, _ = weight.shape
    node = helper.make_node("Conv", ["patch", "w", "b"], ["desc"], kernel_shape=[k, k])
    return save_model(path, [node], {"w": weight.astype(np.float32), "b": bias.astype(np.float32)},
                      ["B", c, n - k + 1, n - k + 1], n)


def two_output_model(path: Path, n=N) -> Path:
    """Outputs ``a`` = 3 p and ``b`` = p + 3 (p flattened), ``scale`` = 3 an initialiser that an
    older exporter also lists as the graph's first input (not an input the patches can go to)."""
    x = helper.make_tensor_value_info("patch", TensorProto.FLOAT, ["B", 1, n, n])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])
    outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, ["B", n * n]) for k in ("a", "b")]
    nodes = [helper.make_node("Reshape", ["patch", "shape"], ["flat"]), helper.make_node("Mul", ["flat", "scale"], ["a"]),
             helper.make_node("Add", ["flat", "scale"], ["b"])]
    inits = [numpy_helper.from_array(np.array([3.0], np.float32), "scale"), numpy_helper.from_array(np.array([-1, n * n]), "shape")]
    model = helper.make_model(helper.make_graph(nodes, "two", [scale, x], outs, inits), opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    rng = np.random.default_rng(0)
    full_w = rng.normal(size=(6, 1, N, N)).astype(np.float32)
    return {
        "flat": reshape_model(d / "flat.onnx", [-1, N * N, 1, 1], ["B", N * N, 1, 1]),
        "flat2d": reshape_model(d / "flat2d.onnx", [-1, N * N], ["B", N * N]),
        "flat32": reshape_model(d / "flat32.onnx", [-1, 32 * 32], ["B", 32 * 32], n=32),
        "full": conv_model(d / "full.onnx", full_w, rng.normal(size=6)),
        "full_w": full_w,
        "pointwise": conv_model(d / "pointwise.onnx", np.array([2.0, -1.0, 0.5]).reshape(3, 1, 1, 1), np.array([0.0, 1.0, -2.0])),
        "two": two_output_model(d / "two.onnx"),
        "rank3": reshape_model(d / "rank3.onnx", [-1, N * N, 1], ["B", N * N, 1]),
        "one_row": reshape_model(d / "one_row.onnx", [1, -1], [1, "BC"]),
        # sqrt(-p): 0 on an all-zero patch, NaN wherever p > 0
        "nan": reshape_model(d / "nan.onnx", [-1, N * N], ["B", N * N], pre=[("Neg", "patch", "neg"), ("Sqrt", "neg", "root")]),
    }


def kps(*rows) -> ImageKeypoints:
    """Keypoints from (x, y, size, angle) tuples."""
    a = np.array(rows, dtype=np.float32).reshape(-1, 4)
    n = len(a)
    return ImageKeypoints(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.zeros(n, np.float32), np.zeros(n, np.int32),
                          np.full(n, -1, np.int32), np.arange(n, dtype=np.int32))


@pytest.fixture(scope="module")
def ramp_png(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("img") / "ramp.png"
    assert cv2.imwrite(str(path), RAMP)
    return path


def params(model, **kw) -> dict:
    return check_descriptor_params("onnx", {"model": str(model), "input_size": N, "l2_normalise": False, **kw},
                                   "descriptors.d.params")


def rows(image, keypoints, p) -> np.ndarray:
    return compute_descriptors("onnx", p, image, keypoints, {}, "test")


# ----------------------------------------------------------------------------- geometry through the family


def test_rows_are_the_sampled_patch(models, ramp_png):
    k = kps((20, 15, N, 0), (20.5, 15, N, -1), (20, 15, 2 * N, 0), (20, 15, N, 90), (1, 2, N, 0))
    d = rows(ramp_png, k, params(models["flat"]))
    assert d.dtype == np.float32 and d.shape == (5, N * N)
    want = [ramp(20 + U - 2, 15 + V - 2),  # position: keypoint on patch pixel (2, 2)
            ramp(20.5 + U - 2, 15 + V - 2),  # half a pixel right, angle -1: not rotated
            ramp(20 + 2 * (U - 2), 15 + 2 * (V - 2)),  # scale n / size = 0.5
            ramp(20 + (V - 2), 15 - (U - 2)),  # angle 90: patch columns run up the image
            ramp(1 + U - 2, 2 + V - 2)]  # BORDER_REPLICATE at the image corner
    for i, w in enumerate(want):
        np.testing.assert_array_equal(d[i], (np.asarray(w, np.float32) * np.float32(1 / 255)).reshape(-1), err_msg=f"keypoint {i}")


def test_colour_image_is_grey_by_cvtcolor(models, tmp_path):
    """The workbench converts a colour image with cvtColor(BGR2GRAY) (DNNPatchWrapper::extract)."""
    rng = np.random.default_rng(3)
    bgr = cv2.GaussianBlur(rng.integers(0, 256, (H, W, 3), dtype=np.uint8), (0, 0), 1.0)
    path = tmp_path / "colour.png"
    assert cv2.imwrite(str(path), bgr)
    k = kps((20, 15, N, 0), (30.3, 20.7, 3 * N, 50))
    want = S.sample_patches(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), k, S.dnn_convention(N, 1.0, True, "none"))
    assert np.array_equal(rows(path, k, params(models["flat"])), want.reshape(2, -1))


def test_support_multiplier_clamp_and_upright_switch(models, ramp_png):
    base = rows(ramp_png, kps((20, 15, 2 * N, 0)), params(models["flat"]))
    assert np.array_equal(rows(ramp_png, kps((20, 15, N, 0)), params(models["flat"], support_multiplier=2.0)), base)
    tiny = rows(ramp_png, kps((20, 15, 0.1, 0), (20, 15, 1, 0)), params(models["flat"]))
    assert np.array_equal(tiny[0], tiny[1])  # size clamped at 1 px
    turned = kps((20, 15, N, 90))
    assert np.array_equal(rows(ramp_png, turned, params(models["flat"], rotate_to_upright=False)),
                          rows(ramp_png, kps((20, 15, N, 0)), params(models["flat"])))


def test_normalisations(models, ramp_png):
    k = kps((20, 15, 2 * N, 30), (35, 20, 3 * N, 0))
    patch = S.warp_patches(RAMP, k, S.dnn_convention(N, 1.0, True, "none")).reshape(2, -1).astype(np.float64) / 255
    got = rows(ramp_png, k, params(models["flat"], normalisation="per_patch"))
    mu, sd = patch.mean(axis=1, keepdims=True), patch.std(axis=1, keepdims=True)
    np.testing.assert_allclose(got, (patch - mu) / np.maximum(sd, 1e-6), rtol=2e-6, atol=2e-6)
    got = rows(ramp_png, k, params(models["flat"], normalisation="mean_std", mean=0.25, std=0.5))
    np.testing.assert_allclose(got, (patch - 0.25) / 0.5, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rows(ramp_png, k, params(models["flat"])), patch, rtol=1e-6)


@pytest.mark.bad_input
def test_mean_and_std_go_with_mean_std_only(models):
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.std: normalisation 'mean_std' needs mean and std"):
        params(models["flat"], normalisation="mean_std", mean=0.5)
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.mean: 0\.5 is not used with normalisation 'none'"):
        params(models["flat"], mean=0.5)


# ----------------------------------------------------------------------------- outputs


def test_conv_output_and_l2(models, ramp_png):
    k = kps((20, 15, N, 0), (30, 30, 2.5 * N, 45), (45, 10, N, 0))
    patch = S.warp_patches(RAMP, k, S.dnn_convention(N, 1.0, True, "none")).astype(np.float64) / 255
    w = models["full_w"].astype(np.float64).reshape(6, -1)
    bias = onnx.numpy_helper.to_array(onnx.load(str(models["full"])).graph.initializer[1]).astype(np.float64)
    want = patch.reshape(3, -1) @ w.T + bias
    raw = rows(ramp_png, k, params(models["full"]))  # [B, 6, 1, 1]
    assert raw.shape == (3, 6)
    np.testing.assert_allclose(raw, want, rtol=1e-5, atol=1e-5)
    unit = rows(ramp_png, k, params(models["full"], l2_normalise=True))
    np.testing.assert_allclose(unit, want / np.linalg.norm(want, axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, rtol=1e-6)


def test_feature_map_is_averaged(models, ramp_png):
    k = kps((20, 15, N, 0), (33, 25, 3 * N, 10))
    patch = S.warp_patches(RAMP, k, S.dnn_convention(N, 1.0, True, "none")).astype(np.float64) / 255
    m = patch.mean(axis=(1, 2))[:, None]
    want = m * np.array([2.0, -1.0, 0.5]) + np.array([0.0, 1.0, -2.0])  # [B, 3, N, N] averaged over H, W
    np.testing.assert_allclose(rows(ramp_png, k, params(models["pointwise"])), want, rtol=1e-6, atol=1e-6)


@pytest.mark.bad_input
def test_output_rows_contract():
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    np.testing.assert_array_equal(O.output_rows(x, 2, "m.onnx"), x.reshape(2, 3, 4).mean(axis=2))
    np.testing.assert_array_equal(O.output_rows(x[:, :, :1, :1], 2, "m.onnx"), x[:, :, 0, 0])
    for bad, msg in [(x[:, :, 0], r"output shape \[2, 3, 2\] for a batch of 2"), (x[:1], r"output shape \[1, 3, 2, 2\] for a batch of 2"),
                     (np.zeros((2, 0), np.float32), r"output shape \[2, 0\]")]:
        with pytest.raises(DataError, match=rf"ONNX model m\.onnx gave {msg}"):
            O.output_rows(bad, 2, "m.onnx")
    with pytest.raises(DataError, match=r"ONNX model m\.onnx gave NaN/inf \(output shape \[2, 3, 2, 2\], first in batch row 1\)"):
        O.output_rows(np.where(np.arange(24).reshape(x.shape) == 20, np.inf, x).astype(np.float32), 2, "m.onnx")


def test_l2_rows_like_cv_normalize():
    d = np.array([[3, 4, 0], [0, 0, 0], [1e-20, 0, 0]], np.float32)
    got = O.l2_rows(d)
    for r in range(3):
        np.testing.assert_array_equal(got[r], cv2.normalize(d[r], None, 1.0, 0.0, cv2.NORM_L2).reshape(-1))
    assert np.array_equal(got[1], [0, 0, 0]) and np.array_equal(got[2], [0, 0, 0])


def test_rows_do_not_depend_on_the_batch_size(models, ramp_png):
    rng = np.random.default_rng(1)
    k = kps(*[(rng.uniform(3, 55), rng.uniform(3, 35), rng.uniform(2, 12), rng.uniform(0, 360)) for _ in range(7)])
    for m in ("full", "pointwise"):
        ref = rows(ramp_png, k, params(models[m], batch_size=512))
        for b in (1, 3):
            assert np.array_equal(rows(ramp_png, k, params(models[m], batch_size=b)), ref), (m, b)


def test_backends_agree(models, ramp_png):
    rng = np.random.default_rng(4)
    k = kps(*[(rng.uniform(3, 55), rng.uniform(3, 35), rng.uniform(2, 12), rng.uniform(0, 360)) for _ in range(9)])
    for m in ("full", "pointwise", "flat"):
        cv = rows(ramp_png, k, params(models[m], normalisation="per_patch", l2_normalise=True))
        ort = rows(ramp_png, k, params(models[m], normalisation="per_patch", l2_normalise=True, backend="onnxruntime"))
        np.testing.assert_allclose(ort, cv, rtol=1e-5, atol=1e-6, err_msg=m)


@pytest.fixture
def cv2_threads():
    """OpenCV's thread count is process-wide: put it back after a test that sets it."""
    before = cv2.getNumThreads()
    yield
    cv2.setNumThreads(before)


@pytest.mark.parametrize("threads", [1, 3])
def test_onnxruntime_session_runs_on_the_jobs_threads(models, ramp_png, monkeypatch, cv2_threads, threads):
    """A job's ``--threads`` (set through the jobs' limit_threads) becomes the session's intra-op
    threads, with one inter-op thread; the provenance records it and the rows do not change."""
    import threadpoolctl

    from descbench.jobs.common import limit_threads

    from descbench import torchrt

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda n: None)  # BLAS limits would outlive the test
    monkeypatch.setitem(torchrt._JOB_THREADS, "n", None)  # so would torch's cap
    rng = np.random.default_rng(5)
    k = kps(*[(rng.uniform(3, 55), rng.uniform(3, 35), rng.uniform(2, 12), rng.uniform(0, 360)) for _ in range(9)])
    p = params(models["full"], backend="onnxruntime")
    cv2.setNumThreads(1)
    one = rows(ramp_png, k, p)
    limit_threads(threads, ("opencv",))  # as a descriptor job does
    opts = O.load_net(p, "descriptors.d.params.model").net.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (threads, 1)
    assert O.onnx_runtime_provenance(p)["num_threads"] == threads
    assert np.array_equal(rows(ramp_png, k, p), one)


def test_no_keypoints_gives_zero_rows_of_the_models_width(models, ramp_png):
    assert rows(ramp_png, kps(), params(models["full"])).shape == (0, 6)
    assert rows(ramp_png, kps(), params(models["flat2d"])).shape == (0, N * N)


@pytest.mark.bad_input
def test_columns_differing_between_batches_is_a_data_error(models):
    class Drifting:
        path = Path("drift.onnx")
        calls = 0

        def run(self, blob):
            self.calls += 1
            return np.zeros((len(blob), 4 + self.calls), np.float32)

    p = params(models["flat"], batch_size=2)
    with pytest.raises(DataError, match=r"ONNX model drift\.onnx gave 6 columns for keypoints 2\.\.3 and 5 for the first batch"):
        O.describe_patches_u8(np.zeros((4, N, N), np.uint8), Drifting(), p, O.convention(p))


# ----------------------------------------------------------------------------- errors


@pytest.mark.bad_input
def test_missing_model_is_a_config_error_naming_the_key(tmp_path):
    missing = tmp_path / "nowhere" / "hardnet.onnx"
    with pytest.raises(ConfigError, match=rf"descriptors\.d\.params\.model: ONNX model file {missing} does not exist.*never "
                                          r"substitutes another network"):
        params(missing)
    not_onnx = tmp_path / "garbage.onnx"
    not_onnx.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 10)
    with pytest.raises(ConfigError, match=rf"descriptors\.d\.params\.model: {not_onnx} is not a readable ONNX model"):
        params(not_onnx)


@pytest.mark.bad_input
def test_missing_model_at_run_time_is_a_config_error(models, ramp_png, tmp_path):
    p = {**params(models["flat"]), "model": str(tmp_path / "gone.onnx")}
    with pytest.raises(ConfigError, match=r"params\.model: ONNX model file .*gone\.onnx does not exist"):
        rows(ramp_png, kps((20, 15, N, 0)), p)


@pytest.mark.bad_input
def test_input_and_output_names(models, ramp_png):
    ok = params(models["flat"], input_name="patch", output_name="desc")
    assert rows(ramp_png, kps((20, 15, N, 0)), ok).shape == (1, N * N)
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.input_name: 'image' is not a graph input of .*flat\.onnx; "
                                          r"its inputs: patch"):
        params(models["flat"], input_name="image")
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.output_name: 'features' is not a graph output .*outputs: desc"):
        params(models["flat"], output_name="features")


@pytest.mark.parametrize("backend", ["opencv", "onnxruntime"])
def test_output_name_picks_the_output(models, ramp_png, backend):
    k = kps((20, 15, N, 0), (30, 22, 2 * N, 20))
    patch = rows(ramp_png, k, params(models["flat2d"])).astype(np.float64)
    first = rows(ramp_png, k, params(models["two"], backend=backend))
    np.testing.assert_allclose(first, 3 * patch, rtol=1e-6)
    np.testing.assert_allclose(rows(ramp_png, k, params(models["two"], backend=backend, output_name="a")), first, rtol=0)
    np.testing.assert_allclose(rows(ramp_png, k, params(models["two"], backend=backend, input_name="patch", output_name="b")),
                               patch + 3, rtol=1e-6)
    with pytest.raises(ConfigError, match=r"input_name: 'scale' is not a graph input of .*two\.onnx; its inputs: patch"):
        params(models["two"], backend=backend, input_name="scale")


@pytest.mark.bad_input
@pytest.mark.parametrize("model, msg", [
    ("rank3", r"gave output shape \[2, 16, 1\] for a batch of 2 patches"),
    ("one_row", r"gave output shape \[1, 32\] for a batch of 2 patches"),
])
def test_bad_output_shape(models, ramp_png, model, msg):
    with pytest.raises(ConfigError, match=rf"descriptors\.d\.params\.model: a batch of two all-zero 4 x 4 patches .*{msg}"):
        params(models[model])
    unchecked = {**fragment_defaults(O.PARAMS_SCHEMA["onnx"]), "model": str(models[model]), "input_size": N}
    with pytest.raises(DataError, match=rf"test: ONNX model .*{model}\.onnx gave output shape \[\d+, \d+(, 1)?\] for a batch of 3"):
        rows(ramp_png, kps((20, 15, N, 0), (21, 15, N, 0), (22, 15, N, 0)), unchecked)


@pytest.mark.bad_input
def test_wrong_input_size_is_caught_at_config_time(models):
    with pytest.raises(ConfigError, match=r"^descriptors\.d\.params\.input_size: 8, but the graph's input 'patch' of "
                                          r".*flat2d\.onnx declares 4 x 4 patches \(\[\?, 1, 4, 4\]\); fix: set input_size: 4$"):
        params(models["flat2d"], input_size=8)


def declared_model(path: Path, dims, extra_input=False) -> Path:
    """Input ``patch`` declared with ``dims`` (str: symbolic), output the patch flattened per item
    (plus a second graph input ``bias`` added to it when ``extra_input``)."""
    x = helper.make_tensor_value_info("patch", TensorProto.FLOAT, dims)
    ins = [x]
    nodes = [helper.make_node("Reshape", ["patch", "shape"], ["desc" if not extra_input else "flat"])]
    if extra_input:
        ins.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1]))
        nodes.append(helper.make_node("Add", ["flat", "bias"], ["desc"]))
    c = dims[1] if isinstance(dims[1], int) else 1
    y = helper.make_tensor_value_info("desc", TensorProto.FLOAT, ["B", c * N * N])
    graph = helper.make_graph(nodes, "declared", ins, [y], [numpy_helper.from_array(np.array([-1, c * N * N]), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.mark.bad_input
def test_a_side_the_graph_leaves_open_is_tried_by_a_forward_pass(tmp_path):
    m = declared_model(tmp_path / "open.onnx", ["B", 1, "H", "W"])
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.model: a batch of two all-zero 8 x 8 patches .*open\.onnx"):
        params(m, input_size=8)
    assert params(m)["input_size"] == N


@pytest.mark.bad_input
@pytest.mark.parametrize("dims, extra, says", [
    (["B", 3, N, N], False, r"model: the graph's input 'patch' of .*m\.onnx takes 3-channel patches \(\[\?, 3, 4, 4\]\); "
                            r"descriptor family 'onnx' feeds grey patches"),
    (["B", 1, N, N], True, r"model: the graph of .*m\.onnx has 2 inputs \(patch, bias\)"),
    (["B", N * N], False, r"model: the graph's input 'patch' of .*m\.onnx has rank 2 \(\[\?, 16\]\)"),
    ([4, 1, N, N], False, r"model: the graph's input 'patch' of .*m\.onnx has a fixed batch of 4 .*dynamic batch axis"),
    ([1, 1, N, N], False, r"batch_size: 512, but the graph's input 'patch' of .*m\.onnx has a fixed batch of 1 "
                          r"\(\[1, 1, 4, 4\]\); fix: set batch_size: 1"),
])
def test_what_the_graph_declares_is_checked_before_it_runs(tmp_path, dims, extra, says):
    """A 3-channel network ran on OpenCV's backend with two channels of zeros; a fixed batch of 1
    was told to set batch_size: 1, which failed the same way (the check ran a batch of 2)."""
    m = declared_model(tmp_path / "m.onnx", dims, extra_input=extra)
    with pytest.raises(ConfigError, match=rf"^descriptors\.d\.params\.{says}"):
        params(m)


def test_a_fixed_batch_of_one_runs_with_batch_size_1(tmp_path, ramp_png):
    m = declared_model(tmp_path / "one.onnx", [1, 1, N, N])
    p = params(m, batch_size=1)
    k = kps((20, 20, 4, -1), (30, 15, 6, -1), (40, 25, 5, -1))
    assert np.array_equal(rows(ramp_png, k, p), rows(ramp_png, k, params(declared_model(tmp_path / "dyn.onnx", ["B", 1, N, N]))))


@pytest.mark.bad_input
def test_nan_output_is_a_data_error(models, ramp_png):
    p = params(models["nan"])  # all-zero patches pass the config check
    with pytest.raises(DataError, match=r"test: ONNX model .*nan\.onnx gave NaN/inf \(output shape \[1, 16\]"):
        rows(ramp_png, kps((20, 15, N, 0)), p)


@pytest.mark.bad_input
def test_onnxruntime_missing_names_the_pip_command(models, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    O._cached_net.cache_clear()
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.backend: backend 'onnxruntime' needs the onnxruntime "
                                          r"package: pip install onnxruntime"):
        params(models["flat"], backend="onnxruntime")


@pytest.mark.bad_input
def test_onnx_package_missing_names_the_extra(models, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.model: descriptor family 'onnx' needs the onnx package to "
                                          r"check the model: pip install -e '\.\[learned\]'"):
        params(models["flat"])


# ----------------------------------------------------------------------------- config


def test_defaults_are_the_workbenchs():
    """types.hpp's DNN patch settings (patch_sampling.DNN), DNNPatchWrapper's batch of 512 and L2 rows."""
    d = fragment_defaults(O.PARAMS_SCHEMA["onnx"])
    assert d == {"input_size": 32, "support_multiplier": 1.0, "rotate_to_upright": True, "normalisation": "none", "mean": None,
                 "std": None, "input_name": None, "output_name": None, "batch_size": 512, "l2_normalise": True,
                 "backend": "opencv", "warp": "opencv_fixed_point"}
    assert O.convention({**d, "model": "m.onnx"}) == S.DNN
    assert O.convention({**d, "model": "m.onnx", "warp": "opencv"}).warp == "opencv"


def test_selectable_from_config(models):
    base = {"keypoint_sets": {"s": {"detector": "sift"}}}
    cfg = validate_config({**base, "descriptors": {"d": {"family": "onnx", "params": {"model": str(models["flat32"])}}}}, SCHEMA)
    assert cfg["descriptors"]["d"]["params"]["model"] == str(models["flat32"])
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.batchsize"):
        validate_config({**base, "descriptors": {"d": {"family": "onnx", "params": {"model": str(models["flat32"]),
                                                                                     "batchsize": 4}}}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"descriptors\.d\.params\.model: missing"):
        validate_config({**base, "descriptors": {"d": {"family": "onnx"}}}, SCHEMA)


# ----------------------------------------------------------------------------- HPatches patches


def test_hpatches_patches_are_resized_then_normalised(models):
    rng = np.random.default_rng(9)
    patches = cv2.GaussianBlur(rng.integers(0, 256, (3 * 65, 65), dtype=np.uint8), (0, 0), 2).reshape(3, 65, 65)
    for norm in ("none", "per_patch"):
        p = {"model": str(models["flat32"]), "normalisation": norm, "l2_normalise": False}
        got = describe_patches(patches, "onnx", p)
        small = np.stack([cv2.resize(q, (32, 32), interpolation=cv2.INTER_LINEAR) for q in patches]).astype(np.float64) / 255
        if norm == "per_patch":
            mu, sd = small.mean(axis=(1, 2), keepdims=True), small.std(axis=(1, 2), keepdims=True)
            small = (small - mu) / np.maximum(sd, 1e-6)
        np.testing.assert_allclose(got, small.reshape(3, -1), rtol=2e-6, atol=2e-6, err_msg=norm)
    # hpatches-benchmark's centre keypoint (angle -1) is the same resize
    assert np.array_equal(describe_patches(patches, "onnx", p, angle=-1.0), got)


@pytest.mark.bad_input
def test_hpatches_patches_refuse_what_a_resize_cannot_do(models):
    patches = np.zeros((2, 65, 65), np.uint8)
    p = {"model": str(models["flat32"])}
    with pytest.raises(ConfigError, match=r"'descriptor\.support': 20\.0; descriptor family 'onnx' describes an HPatches patch by "
                                          r"resizing the whole 65 x 65 patch"):
        describe_patches(patches, "onnx", p, support=20.0)
    with pytest.raises(ConfigError, match=r"'descriptor\.angle': 30\.0; .*cannot rotate it"):
        describe_patches(patches, "onnx", p, angle=30.0)
    assert describe_patches(patches, "onnx", {**p, "rotate_to_upright": False}, angle=30.0).shape == (2, 32 * 32)


@pytest.mark.parametrize("threads", [1, 3])
def test_patch_describe_jobs_limit_opencvs_pool(tmp_path, monkeypatch, cv2_threads, threads):
    """`descbench patches describe --threads N` (rule patch_descriptors) sets OpenCV's pool, which
    the onnx family's sessions and OpenCV's own descriptors follow, as a sequence job's does."""
    import threadpoolctl

    from descbench import cli

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda n: None)  # BLAS limits would outlive the test
    cv2.setNumThreads(7)
    # the thread limits come first; the missing patch folder then stops the command with a clear error
    assert cli.main(["patches", "describe", "--patch-dir", str(tmp_path / "none"), "--out", str(tmp_path / "o.parquet"),
                     "--name", "x", "--spec", '{"family": "sift"}', "--threads", str(threads)]) == 1
    assert cv2.getNumThreads() == threads and O.job_threads() == threads
