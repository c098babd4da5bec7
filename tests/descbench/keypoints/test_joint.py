"""Joint detect-and-describe networks (descbench.keypoints.joint): kornia's DISK, ALIKED and XFeat.

Nothing is downloaded: ``weights: random`` is the kornia module built under
``torch.manual_seed(random_seed(weights_seed, net))``, and the reference in every test is the kornia
module itself, built the same way and called directly on the image tensor made here.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import kornia.feature as KF
import numpy as np
import pytest
import torch

from descbench.config import validate_config
from descbench.errors import ConfigError
from descbench.keypoints import joint as J
from descbench.keypoints.detectors import DETECTORS
from descbench.torchrt import random_seed
from tests.conftest import raises_naming

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
NETS = ("disk", "aliked", "xfeat")
# random XFeat weights put the heatmap near 1/65 everywhere: kornia's 0.05 keeps nothing
LOW = {"xfeat": {"detection_threshold": 0.0}}


def params(net: str, **given) -> dict:
    """The detector's params validated by the config schema (defaults filled), on 1 CPU thread."""
    cfg = {"keypoint_sets": {"k": {"detector": net, "params": {"weights": "random", "device": "cpu", "threads": 1, **given}}},
           "descriptors": {"d": {"family": "sift"}}}
    return validate_config(cfg, SCHEMA)["keypoint_sets"]["k"]["params"]


def write_image(tmp: Path, h: int, w: int, seed: int = 0) -> Path:
    """A smooth colour texture (noise on a coarse grid, upsampled) as PNG."""
    coarse = np.random.default_rng(seed).integers(0, 256, (h // 4, w // 4, 3)).astype(np.uint8)
    path = tmp / f"img_{h}x{w}_{seed}.png"
    cv2.imwrite(str(path), cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC))
    return path


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    return write_image(tmp_path_factory.mktemp("joint"), 96, 128)


@pytest.fixture(scope="module")
def odd_image(tmp_path_factory) -> Path:
    return write_image(tmp_path_factory.mktemp("joint_odd"), 101, 133, seed=1)


def grey(path: Path) -> np.ndarray:
    return cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)


def reference(net: str, path: Path, p: dict, seed: int = 0):
    """kornia's module called directly: (xy, scores, descriptors) as numpy."""
    torch.set_num_threads(1)
    torch.manual_seed(random_seed(seed, net))
    if net == "disk":
        m = KF.DISK(desc_dim=p["desc_dim"]).eval()
        rgb = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0
        with torch.inference_mode():
            f = m(x, n=p["max_num_keypoints"], window_size=p["nms_window_size"], score_threshold=p["detection_threshold"],
                  pad_if_not_divisible=True)[0]
        return f.keypoints.numpy(), f.detection_scores.numpy(), f.descriptors.numpy()
    if net == "aliked":
        m = KF.ALIKED(model_name=p["model_name"], max_num_keypoints=p["max_num_keypoints"],
                      detection_threshold=p["detection_threshold"], nms_radius=p["nms_radius"]).eval()
        rgb = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0
        with torch.inference_mode():
            f = m(x)[0]
        return f.keypoints.numpy(), f.keypoint_scores.numpy(), f.descriptors.numpy()
    m = KF.XFeat(top_k=p["top_k"], detection_threshold=p["detection_threshold"]).eval()
    x = torch.from_numpy(grey(path))[None, None].float() / 255.0
    with torch.inference_mode():
        f = m.detectAndCompute(x)[0]
    return f["keypoints"].numpy(), f["scores"].numpy(), f["descriptors"].numpy()


@pytest.mark.parametrize("net", NETS)
def test_keypoints_and_rows_equal_kornias_module_bit_for_bit(net, image):
    p = params(net, **LOW.get(net, {}))
    kps, rows = J.runner(net, p).detect(image, grey(image))
    xy, score, desc = reference(net, image, p)
    assert len(kps) > 20
    assert np.array_equal(kps.x, xy[:, 0]) and np.array_equal(kps.y, xy[:, 1])
    assert np.array_equal(kps.response, score)
    assert np.array_equal(rows, desc)
    assert rows.shape[1] == J.dim_of(net, p) and rows.dtype == np.float32
    assert np.array_equal(kps.source_index, np.arange(len(kps)))
    assert (kps.size == 12.0).all() and (kps.angle == -1).all() and (kps.octave == 0).all() and (kps.class_id == -1).all()


def test_an_image_without_detections_gives_empty_keypoints_and_rows(image):
    # random XFeat weights keep no heatmap value above kornia's default 0.05
    kps, rows = J.runner("xfeat", params("xfeat")).detect(image, grey(image))
    assert len(kps) == 0 and rows.shape == (0, 64) and rows.dtype == np.float32


@pytest.mark.parametrize("net", NETS)
def test_describing_its_own_keypoints_gives_its_own_rows(net, image, odd_image):
    p = params(net, **LOW.get(net, {}))
    r = J.runner(net, p)
    for path in (image, odd_image):
        kps, rows = r.detect(path, grey(path))
        again = r.describe(path, grey(path), kps)
        if net == "xfeat" and path == odd_image:
            # 101 x 133 is resized to 96 x 128: the ratio's round trip moves positions by float32 rounding
            assert np.abs(again - rows).max() < 1e-6
        else:
            assert np.array_equal(again, rows), path.name


def test_disk_on_other_keypoints_reads_its_dense_map_bilinearly(image):
    p = params("disk")
    torch.manual_seed(random_seed(0, "disk"))
    m = KF.DISK().eval()
    rgb = cv2.cvtColor(cv2.imread(str(image), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    with torch.inference_mode():
        _, dense = m.heatmap_and_dense_descriptors(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0)
    d = dense[0].numpy().astype(np.float64)
    pts = np.array([[10.25, 20.5], [50.0, 30.75], [127.0, 95.0], [0.0, 0.0], [127.5, 95.5]], dtype=np.float32)
    kps = J.ImageKeypoints(pts[:, 0], pts[:, 1], *(np.zeros(5, np.float32),) * 3, np.zeros(5, np.int32),
                           np.zeros(5, np.int32), np.arange(5, dtype=np.int32))
    got = J.runner("disk", p).describe(image, None, kps)
    for (x, y), row in zip(pts.astype(np.float64), got):
        x0, y0 = int(np.floor(x)), int(np.floor(y))
        fx, fy = x - x0, y - y0
        at = lambda yy, xx: d[:, min(yy, 95), min(xx, 127)]  # neighbours clamped to the image
        v = ((1 - fx) * (1 - fy) * at(y0, x0) + fx * (1 - fy) * at(y0, x0 + 1) + (1 - fx) * fy * at(y0 + 1, x0)
             + fx * fy * at(y0 + 1, x0 + 1))
        assert np.abs(row - v / np.linalg.norm(v)).max() < 1e-6


def test_aliked_on_other_keypoints_is_its_sddh_head(image):
    p = params("aliked")
    torch.manual_seed(random_seed(0, "aliked"))
    m = KF.ALIKED().eval()
    rgb = cv2.cvtColor(cv2.imread(str(image), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    pts = np.array([[10.25, 20.5], [50.0, 30.75], [100.5, 60.0]], dtype=np.float32)
    with torch.inference_mode():
        fmap, _ = m.extract_dense_map(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0)
        ref = m.desc_head(fmap, [torch.from_numpy(pts) / torch.tensor([127.0, 95.0]) * 2 - 1])[0][0].numpy()
    kps = J.ImageKeypoints(pts[:, 0], pts[:, 1], *(np.zeros(3, np.float32),) * 3, np.zeros(3, np.int32),
                           np.zeros(3, np.int32), np.arange(3, dtype=np.int32))
    assert np.array_equal(J.runner("aliked", p).describe(image, None, kps), ref)


def test_xfeat_on_other_keypoints_is_its_bicubic_interpolator(odd_image):
    p = params("xfeat")
    torch.manual_seed(random_seed(0, "xfeat"))
    m = KF.XFeat().eval()
    g = grey(odd_image)
    pts = np.array([[10.25, 20.5], [50.0, 30.75], [100.5, 60.0]], dtype=np.float32)
    with torch.inference_mode():
        x, rh, rw = m._preprocess_tensor(torch.from_numpy(g)[None, None].float() / 255.0)
        dense = torch.nn.functional.normalize(m.net(x)[0], dim=1)
        pos = torch.from_numpy(pts) / torch.tensor([rw, rh], dtype=torch.float32)
        ref = torch.nn.functional.normalize(m.interpolator(dense, pos[None], H=96, W=128), dim=-1)[0].numpy()
    kps = J.ImageKeypoints(pts[:, 0], pts[:, 1], *(np.zeros(3, np.float32),) * 3, np.zeros(3, np.int32),
                           np.zeros(3, np.int32), np.arange(3, dtype=np.int32))
    assert np.array_equal(J.runner("xfeat", p).describe(odd_image, g, kps), ref)


def test_defaults_are_glue_factorys_and_kornias():
    d, a, x = params("disk"), params("aliked"), params("xfeat")
    # gluefactory/models/extractors/disk_kornia.py default_conf
    assert (d["max_num_keypoints"], d["nms_window_size"], d["detection_threshold"], d["pad_if_not_divisible"], d["desc_dim"]) == \
        (None, 5, 0.0, True, 128)
    # gluefactory/models/extractors/aliked.py default_conf
    assert (a["model_name"], a["max_num_keypoints"], a["detection_threshold"], a["nms_radius"]) == ("aliked-n16", -1, 0.2, 2)
    # kornia.feature.XFeat's constructor
    assert (x["top_k"], x["detection_threshold"]) == (4096, 0.05)
    assert all(q["resize"] is None and q["device"] == "cpu" and q["weights_seed"] == 0 for q in (d, a, x))
    for net in NETS:
        assert DETECTORS[net].network == net and DETECTORS[net].runtime == "torch"


def test_resize_is_glue_factorys_long_side_and_maps_keypoints_back_by_its_transform(odd_image):
    from kornia.geometry.transform import resize

    p = params("disk", resize=64)
    kps, rows = J.runner("disk", p).detect(odd_image, None)
    # gluefactory/utils/image.py get_new_image_size, side long: (int(64 / (133 / 101)), 64); portrait: (64, int(64 * aspect))
    assert J.resized_shape(101, 133, 64) == (48, 64) and J.resized_shape(133, 101, 64) == (64, 48)
    # the network's keypoints are integer pixels of the 48 x 64 image, mapped back by T^-1 = diag(133 / 64, 101 / 48)
    torch.manual_seed(random_seed(0, "disk"))
    m = KF.DISK().eval()
    rgb = cv2.cvtColor(cv2.imread(str(odd_image), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    x = resize(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0, (48, 64), interpolation="bilinear",
               antialias=True, align_corners=None)
    with torch.inference_mode():
        f = m(x, pad_if_not_divisible=True)[0]
    xy = f.keypoints.numpy().astype(np.float64) / np.array([64 / 133, 48 / 101])
    assert np.array_equal(kps.x, xy[:, 0].astype(np.float32)) and np.array_equal(kps.y, xy[:, 1].astype(np.float32))
    assert np.array_equal(rows, f.descriptors.numpy()) and len(kps) > 5
    assert np.array_equal(J.runner("disk", p).describe(odd_image, None, kps).shape, rows.shape)
    assert np.abs(J.runner("disk", p).describe(odd_image, None, kps) - rows).max() < 1e-5


# ----------------------------------------------------------------------------- weights files


def published_layout(net: str, tmp_path: Path, seed: int = 3) -> Path:
    """A kornia module's weights saved in the published checkpoint's layout."""
    torch.manual_seed(seed)
    path = tmp_path / f"{net}.pth"
    if net == "disk":
        torch.save({"extractor": KF.DISK().state_dict(), "epoch": 1}, path)  # cvlab-epfl/disk's save
    elif net == "aliked":
        torch.save({k: v for k, v in KF.ALIKED().state_dict().items() if k != "dkd.hw_grid"}, path)
    else:
        torch.save(KF.XFeat().net.state_dict(), path)  # verlab's xfeat.pt: XFeatModel's state dict
    return path


@pytest.mark.parametrize("net", NETS)
def test_a_weights_file_in_the_published_layout_loads_into_the_network(net, image, tmp_path):
    path = published_layout(net, tmp_path)
    p = params(net, weights=str(path), **LOW.get(net, {}))
    kps, rows = J.runner(net, p).detect(image, grey(image))
    torch.manual_seed(3)
    m = {"disk": KF.DISK, "aliked": KF.ALIKED, "xfeat": KF.XFeat}[net]().eval()
    module, label = J.load_module(net, p, "w")
    assert label.startswith("sha256:")
    for (k, v), (k2, v2) in zip(module.state_dict().items(), m.state_dict().items()):
        assert k == k2 and torch.equal(v, v2), k
    assert len(kps) > 0 and rows.shape[0] == len(kps)


def test_kornias_own_xfeat_state_dict_loads_too(tmp_path):
    torch.manual_seed(3)
    ref = KF.XFeat()
    torch.save(ref.state_dict(), tmp_path / "kornia_xfeat.pth")  # keys under 'net.'
    module, _ = J.load_module("xfeat", params("xfeat", weights=str(tmp_path / "kornia_xfeat.pth")), "w")
    assert all(torch.equal(a, b) for a, b in zip(module.state_dict().values(), ref.state_dict().values()))


@pytest.mark.bad_input
@pytest.mark.parametrize("net, other", [("disk", "xfeat"), ("aliked", "disk"), ("xfeat", "aliked")])
def test_another_networks_weights_file_is_a_config_error_naming_key_file_and_fix(net, other, tmp_path):
    path = published_layout(other, tmp_path)
    raises_naming(lambda: params(net, weights=str(path)), "keypoint_sets.k.params.weights", str(path), "fix: give",
                  J.NETS[net].published.split(":")[0], exc=ConfigError)


@pytest.mark.bad_input
def test_aliked_weights_of_another_model_name_say_which_model_name_fits(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "aliked-t16.pth"
    torch.save(KF.ALIKED(model_name="aliked-t16").state_dict(), path)
    raises_naming(lambda: params("aliked", weights=str(path)), "keypoint_sets.k.params.weights", str(path),
                  "it fits model_name 'aliked-t16': set model_name to it", exc=ConfigError)
    assert params("aliked", weights=str(path), model_name="aliked-t16")["model_name"] == "aliked-t16"


@pytest.mark.bad_input
def test_unreadable_or_missing_weights_are_config_errors(tmp_path):
    bad = tmp_path / "bad.pth"
    bad.write_text("not torch")
    raises_naming(lambda: params("disk", weights=str(bad)), "keypoint_sets.k.params.weights", "bad.pth",
                  "is not a torch file", "fix:", exc=ConfigError)
    raises_naming(lambda: params("disk", weights=str(tmp_path / "nowhere.pth")), "keypoint_sets.k.params.weights",
                  "nowhere.pth does not exist", "depth-save.pth", exc=ConfigError)
    torch.save([1, 2], tmp_path / "list.pth")
    raises_naming(lambda: params("xfeat", weights=str(tmp_path / "list.pth")), "keypoint_sets.k.params.weights",
                  "holds a list, not a state dict", "xfeat.pt", exc=ConfigError)


@pytest.mark.bad_input
@pytest.mark.parametrize("net, given, key", [
    ("disk", {"nms_window_size": 0}, "nms_window_size"), ("aliked", {"model_name": "aliked-n64"}, "model_name"),
    ("xfeat", {"top_k": 0}, "top_k"), ("disk", {"resize": 8}, "resize"), ("xfeat", {"max_num_keypoints": 5}, "max_num_keypoints"),
    ("aliked", {"device": "gpu"}, "device")])
def test_param_checks_name_the_key(net, given, key):
    raises_naming(lambda: params(net, **given), f"keypoint_sets.k.params", key, exc=ConfigError)


@pytest.mark.bad_input
def test_disk_without_padding_on_a_size_not_a_multiple_of_16_names_the_key_and_fix(odd_image):
    p = params("disk", pad_if_not_divisible=False)
    raises_naming(lambda: J.runner("disk", p).detect(odd_image, None), "'disk' params.pad_if_not_divisible",
                  "101 x 133", "fix: pad_if_not_divisible: true")


# ----------------------------------------------------------------------------- side files


def test_side_rows_are_found_by_source_index_and_checked(tmp_path, image):
    p = params("disk")
    kps, rows = J.runner("disk", p).detect(image, None)
    kept = kps.take(np.arange(0, len(kps), 3))
    kp_file = tmp_path / "s.parquet"
    J.write_side_file(J.side_path(kp_file), {1: (kept, rows[kept.source_index])}, {"identity": J.identity("disk", p)})
    assert J.side_path(kp_file).name == "s.joint.npz"
    sub = kept.take(np.array([4, 1, 2]))
    meta, rows_of = J.side_rows(kp_file, "disk", p)
    assert meta["identity"] == J.identity("disk", p)
    assert np.array_equal(rows_of(1, sub), rows[sub.source_index])
    moved = J.ImageKeypoints(sub.x + 1, *(getattr(sub, f) for f in ("y", "size", "angle", "response", "octave",
                                                                       "class_id", "source_index")))
    raises_naming(lambda: rows_of(1, moved), "s.joint.npz", "do not match", "--forcerun keypoints")
    raises_naming(lambda: J.side_rows(kp_file, "disk", {**p, "weights_seed": 1}), "s.joint.npz",
                  "written by network", "--forcerun keypoints")
    raises_naming(lambda: rows_of(2, sub), "no rows for image 2")
    raises_naming(lambda: J.side_rows(tmp_path / "t.parquet", "disk", p), "t.joint.npz", "missing or unreadable")


def test_reads_own_rows_only_on_the_same_networks_keypoints():
    p = params("disk")
    spec = {"detector": "disk", "params": params("disk", max_num_keypoints=50, detection_threshold=0.1)}
    assert J.reads_own_rows("disk", p, spec)  # detection params choose keypoints, not rows
    assert not J.reads_own_rows("disk", {**p, "weights_seed": 2}, spec)
    assert not J.reads_own_rows("disk", {**p, "resize": 64}, spec)
    assert not J.reads_own_rows("disk", p, {**spec, "mode": "projected"})
    assert not J.reads_own_rows("aliked", params("aliked"), spec)
    assert not J.reads_own_rows("disk", p, {"detector": "sift", "params": {}})


@pytest.mark.bad_input
def test_joint_detectors_refuse_the_grey_only_detect_call(image):
    from descbench.keypoints.detectors import detect

    with pytest.raises(ValueError, match="reads the image file"):
        detect("disk", grey(image), params("disk"))
