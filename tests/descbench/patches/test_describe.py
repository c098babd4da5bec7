"""Patch descriptors (descbench.patches.describe): equality with the registry on single-patch
images, the centre keypoint's conventions, hpatches-benchmark CSV files, the Parquet store.

The reference for every descriptor row is the registry's own ``compute`` on that patch written to
disk as a 65 x 65 PNG with one keypoint built here from literal values (x = y = 32.5 and the
size), never through the module under test's keypoint helpers. hpatches-benchmark's own recipe
(``extract_opencv_sift.py``: ``cv2.KeyPoint()`` with pt and size set, one ``SIFT.compute`` per
patch) is rebuilt here with cv2 directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from descbench.descriptors import check_descriptor_params, compute_descriptors
from descbench.errors import ConfigError, DataError
from descbench.keypoints import ImageKeypoints
from descbench.patches import PATCH_TYPES
from descbench.patches import describe as D

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "data"))  # my_descriptors

HP_SIZE = 65 / 5.303  # hpatches-benchmark: size = 2c / 5.303 with c = 65 / 2


def texture(rng, sigma=1.5) -> np.ndarray:
    return cv2.GaussianBlur(rng.integers(0, 256, (65, 65), dtype=np.uint8), (0, 0), sigma)


@pytest.fixture(scope="module")
def patches() -> np.ndarray:
    """Three random textures, a uniform grey patch (no gradient) and a linear ramp."""
    rng = np.random.default_rng(7)
    ramp = np.tile(np.linspace(20, 230, 65).astype(np.uint8), (65, 1))
    return np.stack([texture(rng), texture(rng, 1.0), texture(rng, 3.0), np.full((65, 65), 128, np.uint8), ramp])


def one_keypoint(size: float, angle: float = 0.0) -> ImageKeypoints:
    f = lambda v: np.array([v], np.float32)  # noqa: E731
    return ImageKeypoints(f(32.5), f(32.5), f(size), f(angle), f(0.0), np.zeros(1, np.int32), np.full(1, -1, np.int32),
                          np.zeros(1, np.int32))


def registry_row(tmp_path: Path, family: str, params: dict, patch: np.ndarray, size: float, angle: float = 0.0,
                 kpset: dict | None = None) -> np.ndarray:
    """The registry on ``patch`` saved as a PNG, one keypoint at (32.5, 32.5)."""
    path = tmp_path / "one_patch.png"
    assert cv2.imwrite(str(path), patch)
    filled = check_descriptor_params(family, params, "ref.params")
    return compute_descriptors(family, filled, path, one_keypoint(size, angle), kpset or {}, "reference")[0]


def assert_rows_equal(tmp_path, family, params, patches, size, **kw):
    got = D.describe_patches(patches, family, params, **kw)
    assert got.shape[0] == len(patches)
    for i, p in enumerate(patches):
        ref = registry_row(tmp_path, family, params, p, size, kw.get("angle", 0.0))
        assert got.dtype == ref.dtype
        assert np.array_equal(got[i], ref), f"{family}: patch {i} differs from the single-patch registry reference"
    return got


# ----------------------------------------------------------------------------- equality with the registry


@pytest.mark.parametrize("family, params, size", [
    ("sift", {}, HP_SIZE),
    ("sift", {"convention": "workbench"}, HP_SIZE),
    ("rootsift", {}, HP_SIZE),
    ("orb", {}, 65.0),
    ("brisk", {}, 20.0),
    ("python", {"callable": "my_descriptors:mean_patch", "kwargs": {"radius": 5}}, HP_SIZE),
    ("python", {"callable": "my_descriptors:sign_bits", "descriptor_kind": "binary"}, HP_SIZE),
])
def test_rows_equal_single_patch_registry(tmp_path, patches, family, params, size):
    """Every row equals the registry on that patch alone (textures, uniform grey, ramp), at the
    documented default support."""
    got = assert_rows_equal(tmp_path, family, params, patches, size)
    if got.dtype == np.float32 and family != "python":
        assert not got[3].any() and got[0].any()  # no gradient -> the registry's own all-zero row


@pytest.mark.parametrize("family, params", [
    ("dspsift", {}), ("dspsift", {"convention": "workbench", "root": True}), ("dspsift", {"convention": "workbench_v1"}),
    ("orb", {"level": "keypoint_octave"}), ("surf", {}), ("surf", {"upright": True}),
    ("freak", {}), ("brief", {}), ("latch", {}), ("beblid", {}), ("teblid", {}), ("binboost", {}), ("vgg", {}),
    ("boostdesc", {}), ("daisy", {}), ("akaze", {}), ("kaze", {}), ("akaze_kaze", {}),
])
def test_every_family_equals_registry(tmp_path, patches, family, params):
    """The in-memory construction of each family mirrors its registry module (catches drift)."""
    use = patches[[0, 2]]
    filled = check_descriptor_params(family, params, "p")
    assert_rows_equal(tmp_path, family, params, use, D.default_support(family, filled))


def test_dropped_keypoint_is_rescued_like_the_registry(tmp_path, patches):
    """FREAK drops the centre keypoint above support 9 on a 65 x 65 image: the registry pads with
    BORDER_REFLECT_101 and so does describe_patches (same rows); a support no padding rescues is an
    error naming the patch and the fix, never a zero row."""
    got = assert_rows_equal(tmp_path, "freak", {}, patches[:2], 14.0, support=14.0)
    k, _ = cv2.xfeatures2d.FREAK_create().compute(patches[0], [cv2.KeyPoint(32.5, 32.5, 14.0)])
    assert len(k) == 0 and got.any()  # plain OpenCV drops it
    with pytest.raises(DataError, match=r"strip e1\.png patch 0: OpenCV dropped 1 of 1 keypoints .*lower 'support'"):
        D.describe_patches(patches[:1], "freak", {"pattern_scale": 2000.0}, where="strip e1.png")


@pytest.mark.bad_input
def test_nan_rows_are_errors(patches):
    """KAZE on a uniform patch is NaN in OpenCV (zero contrast factor): a DataError naming the patch."""
    with pytest.raises(DataError, match=r"'kaze' produced NaN/inf for 1 of 2 patches \(first: patch 1\)"):
        D.describe_patches(patches[2:4], "kaze", where="seq/ref.png")


def test_stack(tmp_path, patches):
    """Parts at their own default supports, combined as the registry's stack; with one ``support``
    for all parts it equals the registry's stack on the single-patch image."""
    params = {"parts": [{"family": "sift"}, {"family": "surf"}]}
    got = D.describe_patches(patches, "stack", params)
    s = D.describe_patches(patches, "sift").astype(np.float64)
    u = D.describe_patches(patches, "surf").astype(np.float64)
    l2 = lambda a: a / np.where(np.linalg.norm(a, axis=1, keepdims=True) > 0, np.linalg.norm(a, axis=1, keepdims=True), 1)  # noqa: E731
    np.testing.assert_allclose(got, l2(np.concatenate([l2(s), l2(u)], axis=1)), rtol=0, atol=1e-6)
    assert_rows_equal(tmp_path, "stack", params, patches[:2], 16.0, support=16.0)
    binary = {"parts": [{"family": "orb"}, {"family": "brief"}], "block_norm": "none", "final_norm": "none"}
    assert_rows_equal(tmp_path, "stack", binary, patches[:2], 40.0, support=40.0)


# ----------------------------------------------------------------------------- the centre keypoint


def test_hpatches_benchmark_sift_reproduced(patches):
    """``**HPATCHES_BENCHMARK`` is extract_opencv_sift.py: cv2.KeyPoint() (angle -1, octave 0) with
    pt (32.5, 32.5) and size 65/5.303, one SIFT.compute per patch. The default (upright, octave
    from size) is a different descriptor."""
    kp = cv2.KeyPoint()
    kp.pt = (32.5, 32.5)
    kp.size = 2 * 32.5 / 5.303
    sift = cv2.SIFT_create()
    ref = np.stack([sift.compute(p, [kp])[1][0] for p in patches])
    got = D.describe_patches(patches, "sift", {}, **D.HPATCHES_BENCHMARK)
    assert np.array_equal(got, ref)
    assert not np.array_equal(D.describe_patches(patches, "sift"), ref)


def test_angle_minus_one_is_359_degrees_for_sift(patches):
    """OpenCV's SIFT does not treat angle -1 as upright: it uses 360 - (-1) = 361 = 1 degree."""
    a = {x: D.describe_patches(patches[:3], "sift", angle=x) for x in (-1.0, 0.0, 359.0)}
    assert np.array_equal(a[-1.0], a[359.0])
    assert not np.array_equal(a[-1.0], a[0.0])


@pytest.mark.parametrize("family", ["sift", "orb"])
def test_rotation_by_90_degrees(family):
    """Upright (angle 0) descriptors are rotation-variant: rot90 of the patch changes them a lot;
    rotating the keypoint with the patch (OpenCV angles run clockwise on screen, so the
    counter-clockwise np.rot90 is angle 270) brings them close again."""
    rng = np.random.default_rng(11)
    p = np.stack([texture(rng, 2.0) for _ in range(4)])
    r = np.ascontiguousarray(np.rot90(p, axes=(1, 2)))
    d0 = D.describe_patches(p, family)

    def dist(a, b):
        if a.dtype == np.uint8:
            return np.unpackbits(a ^ b, axis=1).sum(axis=1).astype(float)
        return np.linalg.norm(a.astype(float) - b.astype(float), axis=1)

    upright = dist(d0, D.describe_patches(r, family))
    turned = dist(d0, D.describe_patches(r, family, angle=270.0))
    assert (upright > 0).all()
    assert (turned < 0.6 * upright).all(), (upright, turned)


@pytest.mark.bad_input
def test_support_and_config_errors(patches):
    small = D.describe_patches(patches[:2], "sift", support=8.0)
    assert not np.array_equal(small, D.describe_patches(patches[:2], "sift"))
    for bad in (0.0, -3.0, float("nan"), "12"):
        with pytest.raises(ConfigError, match=r"'pd\.support'"):
            D.describe_patches(patches[:1], "sift", support=bad, config_key="pd.params")
    with pytest.raises(ConfigError, match=r"'pd\.sift_octave'"):
        D.describe_patches(patches[:1], "sift", sift_octave="one", config_key="pd.params")
    with pytest.raises(ConfigError, match=r"unknown config key 'pd\.params\.octaves'"):
        D.describe_patches(patches[:1], "sift", {"octaves": 3}, config_key="pd.params")
    with pytest.raises(ConfigError, match=r"'pd\.family'.*'rgbsift'.*greyscale.*'sift'"):
        D.describe_patches(patches[:1], "rgbsift", config_key="pd.params")
    with pytest.raises(ConfigError, match=r"'precomputed'.*read_hpatches_csv"):
        D.describe_patches(patches[:1], "precomputed")


@pytest.mark.bad_input
@pytest.mark.parametrize("bad", [np.zeros((2, 64, 65), np.uint8), np.zeros((2, 65, 65), np.float32),
                                 np.zeros((0, 65, 65), np.uint8), np.zeros((65, 65), np.uint8)])
def test_bad_patch_arrays(bad):
    with pytest.raises(DataError, match=r"seq/ref\.png: expected patches as a uint8 array \[N, 65, 65\]"):
        D.describe_patches(bad, "sift", where="seq/ref.png")


@pytest.mark.bad_input
@pytest.mark.parametrize("fn, msg", [("drops_one", r"returned shape \(0, 8\) for the 1 keypoint of s patch 0"),
                                     ("not_an_array", r"returned list for s patch 0")])
def test_python_callable_errors(patches, fn, msg):
    with pytest.raises(DataError, match=msg):
        D.describe_patches(patches[:2], "python", {"callable": f"my_descriptors:{fn}"}, where="s")


def test_image_patch_rows_equals_in_memory(patches):
    """``image_patch_rows`` (a family's own compute on each patch written to a temporary PGM, the
    ready hook for a family without an in-memory one) equals sift's in-memory hook."""
    from descbench.descriptors import PatchJob, image_patch_rows

    params = check_descriptor_params("sift", {}, "p")
    job = PatchJob(patches, D.centre_keypoint(HP_SIZE), {}, "w", "p", lambda row: D._per_patch(len(patches), row))
    assert np.array_equal(image_patch_rows("sift")(job, params), D.describe_patches(patches, "sift"))


# ----------------------------------------------------------------------------- a family added the documented way


@pytest.fixture
def register_family(monkeypatch):
    """Register descriptor families the documented way: a module ``descbench.descriptors.<name>``
    whose ``FAMILIES`` holds them, and its name in ``FAMILY_MODULES``."""
    import types

    import descbench.descriptors as registry

    def register(module: str, *families):
        mod = types.ModuleType(f"descbench.descriptors.{module}")
        mod.FAMILIES = families
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
        monkeypatch.setattr(registry, "FAMILY_MODULES", registry.FAMILY_MODULES + (module,))
        registry._registry.cache_clear()

    yield register
    registry._registry.cache_clear()  # the next lookup rebuilds it from the restored FAMILY_MODULES


def window_stats(image_path, kps, params, kpset):
    """A toy descriptor: mean and standard deviation of the (2r+1)^2 window at each keypoint."""
    from descbench.datasets.layout import read_image

    img = read_image(image_path).astype(np.float64)
    r = params["radius"]
    rows = []
    for x, y in zip(np.rint(kps.x).astype(int), np.rint(kps.y).astype(int)):
        w = img[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1]
        rows.append([w.mean(), w.std()])
    return np.array(rows, dtype=np.float32).reshape(len(kps), 2)


def toy(name, **hooks):
    from descbench.descriptors import DescriptorFamily
    from descbench.params import object_fragment

    return DescriptorFamily(name, window_stats, object_fragment(radius={"type": "integer", "minimum": 0, "default": 3}), **hooks)


def test_new_family_with_patch_hooks_works_on_patches(tmp_path, patches, register_family):
    """A family registered the documented way with its two patch hooks describes patches through
    them: its own support (not SIFT's), rows equal to its compute on each single-patch image."""
    from descbench.descriptors import image_patch_rows

    register_family("toy_stats", toy("toy_stats", patch_support=lambda params, side: side / 4.0,
                                     patch_rows=image_patch_rows("toy_stats")))
    assert D.default_support("toy_stats", {"radius": 3}) == 65 / 4.0
    assert D.patch_settings("toy_stats", {"radius": 5})["support"] == 65 / 4.0
    got = assert_rows_equal(tmp_path, "toy_stats", {"radius": 5}, patches, 65 / 4.0)
    assert got.shape == (len(patches), 2) and got.dtype == np.float32
    assert D.patch_problem("toy_stats") is None


@pytest.mark.bad_input
@pytest.mark.parametrize("hooks, missing", [
    ({}, "declares no patch_support and no patch_rows hook"),
    ({"patch_support": lambda params, side: 10.0}, "declares no patch_rows hook"),
])
def test_new_family_without_patch_hooks_is_refused_on_patches(tmp_path, patches, register_family, hooks, missing):
    """Without the hooks a new family still works on images, but on patches it is a ConfigError
    naming the family and the hooks to add, never a silent fallback with SIFT's support."""
    register_family("toy_plain", toy("toy_plain", **hooks))
    assert registry_row(tmp_path, "toy_plain", {}, patches[0], 12.0).shape == (2,)  # images: fine
    msg = rf"'pd\.family': descriptor family 'toy_plain' cannot describe patches: it {missing}; add them .*image_patch_rows\('toy_plain'\)"
    with pytest.raises(ConfigError, match=msg):
        D.describe_patches(patches[:1], "toy_plain", config_key="pd.params")
    with pytest.raises(ConfigError, match=msg):
        D.patch_settings("toy_plain", config_key="pd.params")
    with pytest.raises(ConfigError, match=rf"'toy_plain' cannot describe patches: it {missing}"):
        D.default_support("toy_plain", {"radius": 3})
    with pytest.raises(ConfigError, match=rf"stack part 1: descriptor family 'toy_plain' cannot describe patches: it {missing}"):
        D.describe_patches(patches[:1], "stack", {"parts": [{"family": "sift"}, {"family": "toy_plain"}]})


@pytest.mark.bad_input
def test_families_that_cannot_describe_patches_are_refused_at_validation(register_family):
    """patches.descriptors naming a family (or a stack part) that cannot describe patches fails at
    config validation with the family's reason, before any job runs."""
    from descbench.config import validate_config

    schema = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
    register_family("toy_plain", toy("toy_plain"))

    def validate(spec):
        return validate_config({"keypoint_sets": {"s": {"detector": "sift"}}, "descriptors": {"x": spec},
                                "patches": {"enabled": True, "descriptors": ["x"]}}, schema)

    with pytest.raises(ConfigError, match=r"patches\.descriptors: 'x' \(family rgbsift\) cannot describe patches: it needs colour"):
        validate({"family": "rgbsift"})
    with pytest.raises(ConfigError, match=r"'x' \(family stack, part 1: family toy_plain\) cannot describe patches: it declares no "
                                          r"patch_support and no patch_rows hook"):
        validate({"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "toy_plain"}]}})
    with pytest.raises(ConfigError, match=r"'x' \(family toy_plain\) cannot describe patches: it declares no patch_support"):
        validate({"family": "toy_plain"})
    validate({"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "surf"}]}})


def test_every_registered_family_declares_its_patch_behaviour():
    """Each family of the registry either has both patch hooks or says why it cannot describe
    patches (rgbsift, dsprgbsift, howh, precomputed, the joint networks): none is left to a default."""
    from descbench.descriptors import family_names, get_family

    refused = {n for n in family_names() if get_family(n).patch_problem()}
    assert refused == {"rgbsift", "dsprgbsift", "howh", "precomputed", "composite", "disk", "aliked", "xfeat", "superpoint",
                       "dedode", "keynet_affnet_hardnet"}
    for n in refused:
        assert get_family(n).not_on_patches


# ----------------------------------------------------------------------------- CSV


def strips(rng, n=7, d=5, binary=False) -> dict[str, np.ndarray]:
    if binary:
        return {t: rng.integers(0, 256, (n, d), dtype=np.uint8) for t in PATCH_TYPES}
    out = {t: rng.normal(0, 10, (n, d)).astype(np.float32) for t in PATCH_TYPES}
    special = [-0.0, 1.4e-45, 3.4028235e38, -1.1754944e-38, 0.1]  # signed zero, subnormal, extremes
    out["ref"][0, :min(d, 5)] = special[:d]
    return out


def test_csv_round_trip_exact(tmp_path):
    rng = np.random.default_rng(3)
    for binary in (False, True):
        descs = strips(rng, binary=binary)
        root = tmp_path / ("bin" if binary else "float")
        paths = D.write_hpatches_csv(root, "v_seq", descs)
        assert [p.name for p in paths] == [f"{t}.csv" for t in PATCH_TYPES]
        back = D.read_hpatches_csv(root, "v_seq", 7, binary_packed=binary)
        for t in PATCH_TYPES:
            assert back[t].dtype == descs[t].dtype
            assert np.array_equal(back[t].view(np.uint8), descs[t].view(np.uint8))  # bit for bit (also -0.0)
        before = {p: p.read_bytes() for p in paths}
        D.write_hpatches_csv(root, "v_seq", descs)
        assert all(p.read_bytes() == b for p, b in before.items())


def test_csv_hpatches_benchmark_format(tmp_path):
    """extract_opencv_sift.py writes np.savetxt(fmt='%10.5f', delimiter=','): padded fixed point."""
    rng = np.random.default_rng(4)
    vals = rng.uniform(0, 200, (3, 128))
    for t in PATCH_TYPES:
        (tmp_path / "i_x").mkdir(exist_ok=True)
        np.savetxt(tmp_path / "i_x" / f"{t}.csv", vals, delimiter=",", fmt="%10.5f")
    got = D.read_hpatches_csv(tmp_path, "i_x", 3)
    assert got["t5"].dtype == np.float32
    assert np.array_equal(got["t5"], np.round(vals, 5).astype(np.float32))


def write_good(root: Path, n=4, d=3):
    for t in PATCH_TYPES:
        (root / "s").mkdir(parents=True, exist_ok=True)
        (root / "s" / f"{t}.csv").write_text("".join(",".join(str(i + j) for j in range(d)) + "\n" for i in range(n)))


@pytest.mark.bad_input
@pytest.mark.parametrize("ptype, text, binary, msg", [
    ("e2", None, False, r"does not exist"),
    ("h1", "1,2,3\n4,5,6\n7,8,9\n", False, r"has 3 rows, the patch strip has 4 patches"),
    ("h1", "1,2,3\n4,5,6\n7,8,9\n1,2,3\n5,6,7\n", False, r"has 5 rows, the patch strip has 4 patches"),
    ("t3", "1,2,3\n4,5\n7,8,9\n1,2,3\n", False, r"ragged rows \(a row with 2 values, the first row has 3\)"),
    ("ref", "1;2;3\n4;5;6\n7;8;9\n1;2;3\n", False, r"single column: wrong delimiter"),
    ("e5", "1,2,3\n4,x,6\n7,8,9\n1,2,3\n", False, r"row 2, column 2 is 'x', not a number"),
    ("e5", "1,2,3\n4,5,6\n7,8,9\n1,2,\n", False, r"row 4, column 3 is empty"),
    ("h4", "1,2,3\n4,nan,6\n7,8,9\n1,2,3\n", False, r"row 2, column 2 is nan; descriptors must be finite"),
    ("h4", "1,2,3\n4,5,6\n7,8,-inf\n1,2,3\n", False, r"row 3, column 3 is -inf"),
    ("t1", "1,2,3,4\n4,5,6,4\n7,8,9,4\n1,2,3,4\n", False, r"has 4 values per row, .*ref\.csv has 3"),
    ("e1", "", False, r"is empty \(0 rows\)"),
    ("e1", "1,2,3\n4,5,256\n7,8,9\n1,2,3\n", True, r"row 2, column 3 is 256\.0, not a byte 0\.\.255"),
    ("e1", "1,2,3\n4,5,6\n7,8.5,9\n1,2,3\n", True, r"row 3, column 2 is 8\.5, not a byte"),
])
def test_bad_csv_names_the_file(tmp_path, ptype, text, binary, msg):
    write_good(tmp_path)
    path = tmp_path / "s" / f"{ptype}.csv"
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    with pytest.raises(DataError, match=msg) as err:
        D.read_hpatches_csv(tmp_path, "s", 4, binary_packed=binary)
    assert str(path) in str(err.value)


def test_good_csv_reads(tmp_path):
    write_good(tmp_path)
    got = D.read_hpatches_csv(tmp_path, "s", 4)
    assert got["ref"].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
    assert D.read_hpatches_csv(tmp_path, "s", 4, binary_packed=True)["ref"].dtype == np.uint8


# ----------------------------------------------------------------------------- Parquet


def test_parquet_round_trip_and_byte_identical(tmp_path, patches):
    rng = np.random.default_rng(5)
    for name, descs in (("float", strips(rng, n=9, d=6)), ("bits", strips(rng, n=9, d=4, binary=True))):
        meta = {**D.patch_settings("sift", {}), "sequence": "v_x"}
        a, b = tmp_path / f"{name}_a.parquet", tmp_path / f"{name}_b.parquet"
        D.write_sequence_descriptors(a, descs, meta)
        D.write_sequence_descriptors(b, {t: descs[t].copy() for t in reversed(PATCH_TYPES)}, meta)
        assert a.read_bytes() == b.read_bytes()
        back, prov = D.read_sequence_descriptors(a)
        assert list(back) == list(PATCH_TYPES)
        for t in PATCH_TYPES:
            assert back[t].dtype == descs[t].dtype and np.array_equal(back[t].view(np.uint8), descs[t].view(np.uint8))
        assert prov["stage"] == "patch_descriptors" and prov["n_patches"] == 9 and prov["binary"] == (name == "bits")
        assert prov["params"]["family"] == "sift" and prov["params"]["support"] == pytest.approx(HP_SIZE)
        assert prov["params"]["sequence"] == "v_x" and "opencv" in prov["versions"]


@pytest.mark.bad_input
def test_parquet_checks(tmp_path):
    rng = np.random.default_rng(6)
    good = strips(rng, n=3, d=2 + 3)
    cases = [
        ({k: v for k, v in good.items() if k != "h3"}, r"missing: h3"),
        ({**good, "e2": good["e2"][:2]}, r"strip 'e2' has 2 descriptor rows, strip 'ref' has 3"),
        ({**good, "t1": good["t1"].astype(np.float64)}, r"strip 't1': descriptors must be a 2-D float32 or uint8"),
        ({**good, "t2": good["t2"][:, :4]}, r"strip 't2' has float32 descriptors of dimension 4"),
        ({**good, "e4": np.where(good["e4"] > 0, np.nan, good["e4"]).astype(np.float32)}, r"strip 'e4' row 0 holds NaN"),
    ]
    for descs, msg in cases:
        with pytest.raises(DataError, match=msg):
            D.write_sequence_descriptors(tmp_path / "x.parquet", descs, {})
    assert not (tmp_path / "x.parquet").exists()
    from descbench.io import KEYPOINTS, write_table
    import pyarrow as pa

    write_table(pa.table({f.name: pa.array([], type=f.type) for f in KEYPOINTS}), tmp_path / "k.parquet", {"stage": "keypoints"})
    with pytest.raises(DataError, match=r"k\.parquet: column 'type' missing"):
        D.read_sequence_descriptors(tmp_path / "k.parquet")


def test_describe_then_store(tmp_path, patches):
    """The pipeline: describe every strip, write Parquet and CSV, read both back identically."""
    descs = {t: D.describe_patches(np.roll(patches, k, axis=0), "rootsift") for k, t in enumerate(PATCH_TYPES)}
    D.write_sequence_descriptors(tmp_path / "r.parquet", descs, D.patch_settings("rootsift"))
    D.write_hpatches_csv(tmp_path / "csv", "seq", descs)
    back, _ = D.read_sequence_descriptors(tmp_path / "r.parquet")
    csv = D.read_hpatches_csv(tmp_path / "csv", "seq", len(patches))
    assert all(np.array_equal(back[t], descs[t]) and np.array_equal(csv[t], descs[t]) for t in PATCH_TYPES)
