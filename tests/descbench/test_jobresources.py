"""descbench.jobresources: per-job mem_mb / runtime from image headers and keypoint counts.

The expected numbers are worked by hand from the module's constants (benchmarks/README.md, "Job
memory and runtime models"): a changed constant must change these tests too.
"""

from __future__ import annotations

import struct
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pytest

from descbench import io
from descbench import jobresources as jr
from descbench.config import validate_config
from descbench.datasets.layout import write_homography

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def config(kpsets=None, descriptors=None, **top) -> dict:
    cfg = {"keypoint_sets": kpsets or {"sift": {"detector": "sift"}},
           "descriptors": descriptors or {"sift": {"family": "sift"}}, **top}
    return validate_config(cfg, SCHEMA)


def header_scene(root: Path, name: str, w: int, h: int) -> Path:
    """A scene whose 6 images are PPM headers only (no pixels): enough for a header reader, and
    proof that nothing decodes them."""
    d = root / name
    d.mkdir(parents=True)
    for k in range(1, 7):
        (d / f"{k}.ppm").write_bytes(f"P6\n{w} {h}\n255\n".encode())
    for k in range(2, 7):
        write_homography(d / f"H_1_{k}", np.eye(3))
    return d


# ----------------------------------------------------------------------------- headers


def _images(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(0)
    colour = rng.integers(0, 256, (23, 37, 3), dtype=np.uint8)
    grey = colour[..., 0].copy()
    out = []
    for name, img, params in [
        ("c.ppm", colour, []), ("g.pgm", grey, []), ("c.png", colour, []), ("g.png", grey, []),
        ("d16.png", grey.astype(np.uint16) * 257, []), ("c.jpg", colour, []),
        ("p.jpg", colour, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]), ("g.jpg", grey, []), ("c.bmp", colour, []),
        ("g.bmp", grey, []), ("c.tif", colour, []), ("g.tiff", grey, []), ("wide.png", np.zeros((3, 1001), np.uint8), []),
    ]:
        assert cv2.imwrite(str(tmp_path / name), img, params)
        out.append(tmp_path / name)
    # ASCII PPM with comments between the fields, and a PAM
    (tmp_path / "ascii.ppm").write_bytes(b"P3\n# made by hand\n 4 # width\n3\n255\n" + b"1 2 3 " * 12)
    out.append(tmp_path / "ascii.ppm")
    # a JPEG with an APP1 (EXIF-sized) segment and fill bytes before its frame header
    raw = (tmp_path / "c.jpg").read_bytes()
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 5000) + b"Exif\x00" + bytes(4995)
    (tmp_path / "exif.jpg").write_bytes(raw[:2] + app1 + b"\xff" + raw[2:])
    out.append(tmp_path / "exif.jpg")
    return out


def test_header_sizes_equal_opencv_shapes(tmp_path):
    for path in _images(tmp_path):
        img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        assert img is not None, path
        assert jr.image_size(path) == (img.shape[1], img.shape[0]), path.name


def test_header_sizes_of_hand_made_files(tmp_path):
    pam = tmp_path / "x.pam"
    pam.write_bytes(b"P7\nWIDTH 12\nHEIGHT 7\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n" + bytes(84))
    assert jr.image_size(pam) == (12, 7)
    be = tmp_path / "be.tif"  # big-endian TIFF: width SHORT, height LONG
    ifd = struct.pack(">H", 2) + struct.pack(">HHIHH", 256, 3, 1, 37, 0) + struct.pack(">HHII", 257, 4, 1, 23) + bytes(4)
    be.write_bytes(b"MM\x00*" + struct.pack(">I", 8) + ifd)
    assert jr.image_size(be) == (37, 23)
    big = tmp_path / "big.tif"  # BigTIFF, little-endian, LONG8 values
    ifd = struct.pack("<Q", 2) + struct.pack("<HHQQ", 256, 16, 1, 70000) + struct.pack("<HHQQ", 257, 16, 1, 50000) + bytes(8)
    big.write_bytes(b"II+\x00" + struct.pack("<HH", 8, 0) + struct.pack("<Q", 16) + ifd)
    assert jr.image_size(big) == (70000, 50000)
    bmp = tmp_path / "topdown.bmp"  # negative height: a top-down bitmap
    bmp.write_bytes(b"BM" + bytes(12) + struct.pack("<Iii", 40, 640, -480) + bytes(30))
    assert jr.image_size(bmp) == (640, 480)


@pytest.mark.bad_input
@pytest.mark.parametrize("data", [b"", b"P6\n", b"P6\n12", b"\x89PNG\r\n\x1a\n" + bytes(8), b"\xff\xd8\xff\xd9",
                                  b"\xff\xd8\xff\xe0\x00", b"GIF89a....", b"II*\x00\xff\xff\xff\x7f", b"hello world",
                                  # a scan before any frame header: what follows is not a header
                                  b"\xff\xd8\xff\xda\x00\x04\x00\x00\xff\xc0\x00\x11\x08\x00\x10\x00\x20\x03"])
def test_unreadable_headers_are_none(tmp_path, data):
    p = tmp_path / "bad.ppm"
    p.write_bytes(data)
    assert jr.image_size(p) is None
    assert jr.image_size(tmp_path / "missing.ppm") is None


def test_header_cache_follows_the_file(tmp_path):
    p = tmp_path / "a.ppm"
    p.write_bytes(b"P6\n10 20\n255\n")
    assert jr.image_size(p) == (10, 20)
    p.write_bytes(b"P6\n300 200\n255\n")  # another size (and byte count): read again
    assert jr.image_size(p) == (300, 200)


def test_nothing_is_decoded(tmp_path, pristine, monkeypatch):
    """The jobs' estimates read headers only: every decoder raises, a real demo scene still works."""
    import descbench.datasets.layout as layout

    def boom(*a, **k):
        raise AssertionError("an image was decoded")

    for mod, name in [(cv2, "imread"), (cv2, "imdecode"), (cv2, "imreadmulti"), (layout, "read_image"), (layout, "image_size")]:
        monkeypatch.setattr(mod, name, boom)
    cfg = config(results_dir=str(tmp_path / "res"))
    for job in (jr.keypoint_job(cfg, "sift", [pristine]), jr.descriptor_job(cfg, "sift", "sift", [pristine]),
                jr.score_job(cfg, "sift", "sift", [pristine]), jr.patch_job(cfg, "sift")):
        assert job["mem_mb"] >= jr.MIN_MEM_MB and job["runtime"] >= jr.MIN_RUNTIME_MIN
    assert jr.scene_image_sizes(pristine, (1, 1)) == [(384, 303)] * 6  # skimage's coins: 384 x 303


# ----------------------------------------------------------------------------- defaults


@pytest.mark.bad_input
def test_missing_images_use_the_dataset_default(tmp_path):
    absent = [tmp_path / "not_there_yet"]
    assert jr.scene_image_sizes(absent[0], (5, 7)) == [(5, 7)] * 6
    demo = config()
    assert jr.default_image_size(demo) == (640, 640)  # descbench.datasets.demo.MAX_SIDE
    hp = config(dataset="hpatches")
    assert jr.default_image_size(hp) == (2400, 1800)
    # the same estimate as a scene of headers of that size
    for cfg, (w, h) in ((demo, (640, 640)), (hp, (2400, 1800))):
        same = header_scene(tmp_path / cfg["dataset"], "s", w, h)
        assert jr.keypoint_job(cfg, "sift", absent) == jr.keypoint_job(cfg, "sift", [same])
        assert jr.score_job(cfg, "sift", "sift", absent) == jr.score_job(cfg, "sift", "sift", [same])
    # hand-worked, hpatches default: 2320 x 1720 inside the border = 3.9904 MP -> 39,904 keypoints
    # per image (density 10,000/MP), 239,424 per scene; 160 + 230 * 4.32 + 0.2 * 239.424 = 1201.5
    # MB x 1.25 = 1501.9 -> 1600 MB; 2 + 0.7 * 25.92 = 20.1 s x 2 -> 1 min -> the 5 min floor
    assert jr.keypoint_job(hp, "sift", absent) == {"mem_mb": 1600, "runtime": 5}


def test_incomplete_scene_uses_the_default(tmp_path):
    d = header_scene(tmp_path, "s", 100, 100)
    assert jr.scene_image_sizes(d, (640, 640)) == [(100, 100)] * 6
    (d / "H_1_6").unlink()  # a download in progress (the folder's listing is read again)
    assert jr.scene_image_sizes(d, (640, 640)) == [(640, 640)] * 6


@pytest.mark.bad_input
def test_unreadable_header_counts_its_bytes(tmp_path):
    d = header_scene(tmp_path, "s", 100, 100)
    (d / "3.ppm").write_bytes(b"P6 this is not a header" + bytes(2_000_000))
    sizes = jr.scene_image_sizes(d, (640, 640))
    assert sizes[1] == (100, 100) and sizes[3] == (100, 100)
    w, h = sizes[2]  # 2,000,023 bytes x 10 pixels per byte, as a square
    assert w == h == int(np.sqrt(20_000_230))
    tiny = header_scene(tmp_path, "t", 100, 100)
    (tiny / "1.ppm").write_bytes(b"junk")
    assert jr.scene_image_sizes(tiny, (640, 640))[0] == (640, 640)  # never below the default


# ----------------------------------------------------------------------------- keypoint counts


def test_modelled_keypoints_caps_and_derived_sets():
    kps = config({
        "sift": {"detector": "sift"},
        "capped": {"detector": "sift", "max_keypoints": 500},
        "nf": {"detector": "sift", "params": {"n_features": 300}},
        "orb": {"detector": "orb"},
        "gftt": {"detector": "gftt", "params": {"max_corners": 0}},
        "top": {"source": "sift", "filters": [{"min_size": 4}, {"per_image_top_n_by_size": 700}]},
        "glob": {"source": "capped", "filters": [{"global_top_n_by_size": 10}]},
        "both": {"intersection": {"sources": ["top", "nf"], "tol_px": 2.0}},
    })["keypoint_sets"]
    size = (1080, 1080)  # 1000 x 1000 inside the 40 px border: 1 MP
    n = {k: jr.modelled_keypoints(kps, k, size) for k in kps}
    assert n == {"sift": 10000, "capped": 500, "nf": 300, "orb": 500, "gftt": 8000, "top": 700, "glob": 500, "both": 300}
    assert jr.modelled_keypoints(kps, "sift", (80, 500)) == 0  # nothing inside the border


def _keypoint_file(path: Path, counts: list[int], params: dict) -> None:
    image = np.repeat(np.arange(1, 7, dtype=np.int8), counts)
    n = len(image)
    cols = {"image": image, **{c: np.zeros(n, np.float32) for c in ("x", "y", "size", "angle", "response")},
            **{c: np.zeros(n, np.int32) for c in ("octave", "class_id", "source_index")}}
    table = pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in io.KEYPOINTS}, schema=io.KEYPOINTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    io.write_table(table, path, io.provenance("keypoints", params))


def test_observed_counts_replace_the_model_when_current(tmp_path):
    cfg = config({"sift": {"detector": "sift", "max_keypoints": 2000}}, results_dir=str(tmp_path / "res"),
                 dataset="hpatches")
    scene = header_scene(tmp_path / "data", "i_x", 2080, 1580)  # 2000 x 1500 inside the border
    kfile = tmp_path / "res" / "hpatches" / "keypoints" / "sift" / "batch003" / "i_x.parquet"
    # model: 2000 per image; 250 + 2 * 64 + 45 * 2 = 468 MB x 1.25 = 585 -> 600 MB
    assert jr.score_job(cfg, "sift", "sift", [scene])["mem_mb"] == 600
    counts = [30000, 100, 100, 100, 100, 40000]
    _keypoint_file(kfile, counts, {"keypoint_set": "sift", **cfg["keypoint_sets"]["sift"]})
    assert jr.observed_keypoints(cfg, "sift", "i_x") == counts
    # 250 + 128 + 45 * 40 = 2178 MB x 1.25 = 2722.5 -> 2800 MB; 3 + 0.03 * (30000 * 40400 / 1e6) s =
    # 39.36 s x 2 -> 2 min -> 5
    assert jr.score_job(cfg, "sift", "sift", [scene]) == {"mem_mb": 2800, "runtime": 5}
    # a file written for other settings (the run is about to replace it) is not used
    other = config({"sift": {"detector": "sift", "max_keypoints": 3000}}, results_dir=str(tmp_path / "res"),
                   dataset="hpatches")
    assert jr.observed_keypoints(other, "sift", "i_x") is None
    kfile.write_bytes(b"not parquet")
    assert jr.observed_keypoints(cfg, "sift", "i_x") is None


# ----------------------------------------------------------------------------- the models, by hand


def test_keypoint_job_by_hand(tmp_path):
    s3 = header_scene(tmp_path, "s3", 2000, 1500)
    cfg = config({"sift": {"detector": "sift"}, "cap": {"detector": "sift", "max_keypoints": 2000},
                  "kaze": {"detector": "kaze"}, "locked": {"detector": "locked", "params": {"path": "kp.csv"}},
                  "top": {"source": "cap", "filters": [{"per_image_top_n_by_size": 100}]}})
    # 1920 x 1420 inside the border = 2.7264 MP -> 27,264 per image, 163,584 per scene:
    # 160 + 230 * 3 + 0.2 * 163.584 = 882.7 MB x 1.25 = 1103.4 -> 1200 MB; 2 + 0.7 * 18 = 14.6 s -> 5 min
    assert jr.keypoint_job(cfg, "sift", [s3]) == {"mem_mb": 1200, "runtime": 5}
    # capped at 2000: 160 + 690 + 0.2 * 12 = 852.4 x 1.25 = 1065.5 -> 1100 MB
    assert jr.keypoint_job(cfg, "cap", [s3]) == {"mem_mb": 1100, "runtime": 5}
    # files / derived sets: 160 + 7 * 3 + 2.0 * 163.584 = 508.2 x 1.25 = 635.2 -> 700; top: 0.6 kkp: 182.2 -> 500 floor
    assert jr.keypoint_job(cfg, "locked", [s3]) == {"mem_mb": 700, "runtime": 5}
    assert jr.keypoint_job(cfg, "top", [s3]) == {"mem_mb": 500, "runtime": 5}
    # a batch: the largest scene's memory, the sum of the times. kaze, 3 MP + 27 MP (6000 x 4500):
    # 27 MP scene: 5920 x 4420 = 26.1664 MP inside -> 235,498 per image (9,000/MP), 1,412,986 per scene;
    # 160 + 520 * 27 + 0.2 * 1412.986 = 14482.6 x 1.25 = 18103.2 -> 18200 MB;
    # 2 + 2.0 * (18 + 162) = 362 s x 2 = 724 s -> 13 min
    s27 = header_scene(tmp_path, "s27", 6000, 4500)
    assert jr.keypoint_job(cfg, "kaze", [s3, s27]) == {"mem_mb": 18200, "runtime": 13}


def test_27_megapixel_keypoint_job_gets_the_measured_memory(tmp_path):
    """The issue: SIFT on 27 MP images peaked at 6.2 GB (bench_resources.py: 6,189 MB) while the rule
    asked for 1,500 MB."""
    s27 = header_scene(tmp_path, "s27", 6000, 4500)
    cfg = config()
    job = jr.keypoint_job(cfg, "sift", [s27])
    # 160 + 230 * 27 + 0.2 * (6 * 261,664 / 1000) = 6684.0 x 1.25 = 8355.0 -> 8400 MB
    assert job == {"mem_mb": 8400, "runtime": 5}
    assert job["mem_mb"] >= 6189 * 1.25
    # SIFT descriptors there (measured 3,436 MB): 170 + 125 * 27 + 1.2 * 1569.984 = 5428.98 x 1.25 -> 6800
    assert jr.descriptor_job(cfg, "sift", "sift", [s27])["mem_mb"] == 6800


def test_descriptor_job_by_hand(tmp_path):
    s3 = header_scene(tmp_path, "s3", 2000, 1500)
    kpsets = {"cap": {"detector": "sift", "max_keypoints": 2000, "border_px": 40}}
    # built by hand (no validation: the learned families need the optional extra)
    cfg = {"dataset": "folder", "experiment": "x", "results_dir": str(tmp_path / "res"), "keypoint_sets": kpsets, "descriptors": {
        "sift": {"family": "sift", "params": {}},
        "hardnet": {"family": "hardnet", "params": {"batch_mem_mb": 256}},
        "hynet": {"family": "hynet", "params": {"batch_mem_mb": 256}},
        "stack": {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "hardnet", "params": {"batch_mem_mb": 100}}]}},
        "dsp": {"family": "dsp", "params": {"base": {"family": "sift"}, "scales": [1, 2, 3, 4]}},
        "rgb": {"family": "rgbsift", "params": {}},
        "comp": {"family": "composite", "params": {"aggregation": "concatenate", "components": []}},
    }}
    # 12,000 keypoints per scene. sift: 170 + 125 * 3 + 1.2 * 12 = 559.4 x 1.25 = 699.25 -> 700 MB;
    # 2 + 0.25 * 18 + 0.02 * 12 = 6.74 s -> 5 min
    assert jr.descriptor_job(cfg, "cap", "sift", [s3]) == {"mem_mb": 700, "runtime": 5}
    # hardnet: 600 + 6 * 3 + 4 * 12 + 256 = 922 x 1.25 = 1152.5 -> 1200 MB; 15 + 0.1 * 18 + 2.5 * 12 = 46.8 s -> 5
    assert jr.descriptor_job(cfg, "cap", "hardnet", [s3]) == {"mem_mb": 1200, "runtime": 5}
    # 20 such scenes: 15 + 20 * (1.8 + 30) = 651 s x 2 = 1302 s -> 22 min; hynet (2x per keypoint):
    # 15 + 20 * (1.8 + 60) = 1251 s x 2 -> 42 min
    many = [header_scene(tmp_path / "many", f"s{i}", 2000, 1500) for i in range(20)]
    assert jr.descriptor_job(cfg, "cap", "hardnet", many) == {"mem_mb": 1200, "runtime": 22}
    assert jr.descriptor_job(cfg, "cap", "hynet", many)["runtime"] == 42
    # stack: max of its parts' memory (sift 559.4, hardnet 600 + 18 + 48 + 100 = 766 -> 957.5 -> 1000),
    # sum of their times (6.74 + 46.8 = 53.54 s over 20 scenes: 2 + 20 * 4.74 + 15 + 20 * 31.8 = 747.8 s -> 25 min)
    assert jr.descriptor_job(cfg, "cap", "stack", [s3])["mem_mb"] == 1000
    assert jr.descriptor_job(cfg, "cap", "stack", many)["runtime"] == 25
    # dsp over sift at 4 scales: 4 x the time (2 + 20 * 4 * 4.74 = 381.2 s x 2 -> 13 min), sift's memory
    assert jr.descriptor_job(cfg, "cap", "dsp", many) == {"mem_mb": 700, "runtime": 13}
    # rgbsift: 3 channels, 3 x the time: 2 + 20 * 3 * 4.74 = 286.4 s x 2 -> 10 min
    assert jr.descriptor_job(cfg, "cap", "rgb", many)["runtime"] == 10
    # composite reads descriptor files: 200 + 2 * 12 = 224 -> 500 floor
    assert jr.descriptor_job(cfg, "cap", "comp", [s3])["mem_mb"] == 500


def test_score_job_by_hand(tmp_path):
    cfg = config({"sift": {"detector": "sift"}}, {"sift": {"family": "sift"}, "rgb": {"family": "rgbsift"}})
    scenes = [header_scene(tmp_path, f"s{i}", 2000, 1500) for i in range(8)]
    # 27,264 keypoints per image: 250 + 2 * 64 + 45 * 27.264 = 1604.9 MB x 1.25 = 2006.1 -> 2100 MB;
    # per scene 0.03 * 5 * 27264^2 / 1e6 = 111.50 s; 3 + 8 * 111.50 = 895.0 s x 2 = 1790 s -> 30 min
    assert jr.score_job(cfg, "sift", "sift", scenes) == {"mem_mb": 2100, "runtime": 30}
    # rgbsift's 384 dimensions: 3 x the keypoint memory and the time: 250 + 128 + 3 * 1226.88 = 4058.6
    # x 1.25 = 5073.3 -> 5100 MB; 3 + 3 * 892.0 = 2679.0 s x 2 -> 90 min
    assert jr.score_job(cfg, "sift", "rgb", scenes) == {"mem_mb": 5100, "runtime": 90}
    # chunk_mb counts twice
    big_chunks = config({"sift": {"detector": "sift"}}, scoring={"chunk_mb": 1000})
    assert jr.score_job(big_chunks, "sift", "sift", scenes[:1])["mem_mb"] == 4400  # (250 + 2000 + 1226.88) * 1.25 = 4346.1
    # every distractor: + N1 x 10 scenes x N per scene (0.03 * 27264 * 10 * 27264 / 1e6 = 223.0 s)
    alld = config({"sift": {"detector": "sift"}}, verification={"distractors_per_scene": "all"})
    assert jr.score_job(alld, "sift", "sift", scenes[:1])["runtime"] == 12  # (3 + 111.5 + 223.0) * 2 = 675 s


def test_dsp_width_is_the_bases_times_the_scales_when_concatenated(tmp_path):
    """A dsp row is the base's width, len(scales) times that with aggregation concatenate (the
    validated config: default scales filled); the score job scales with it."""
    dsp = lambda base, **kw: {"family": "dsp", "params": {"base": base, **kw}}  # noqa: E731
    cfg = config(descriptors={"sift": {"family": "sift"}, "avg": dsp({"family": "sift"}),
                              "max": dsp({"family": "sift"}, aggregation="max", scales=[1, 2, 3, 4]),
                              "cat": dsp({"family": "sift"}, aggregation="concatenate", scales=[1, 2, 3, 4]),
                              "cat3": dsp({"family": "rgbsift"}, aggregation="concatenate"),
                              "catsurf": dsp({"family": "surf"}, aggregation="concatenate", scales=[1, 2])})
    widths = {d: jr.descriptor_width(cfg, d) for d in cfg["descriptors"]}
    assert widths == {"sift": 128, "avg": 128, "max": 128, "cat": 512, "cat3": 3 * 384, "catsurf": 2 * 64}
    scenes = [header_scene(tmp_path, "s0", 2000, 1500)]
    # 4 x sift's time and keypoint memory (test_score_job_by_hand: 111.50 s, 45 * 27.264 MB per 128 columns):
    # (250 + 128 + 4 * 1226.88) * 1.25 = 6606.9 -> 6700 MB; (3 + 4 * 111.50) * 2 = 898 s -> 15 min
    assert jr.score_job(cfg, "sift", "cat", scenes) == {"mem_mb": 6700, "runtime": 15}
    assert jr.score_job(cfg, "sift", "max", scenes) == jr.score_job(cfg, "sift", "sift", scenes)


def test_patch_job_by_hand():
    cfg = config(descriptors={"sift": {"family": "sift"}})
    # generated, max_patches 500: 16 x 500 = 8000 patches: 200 + 8000 * 10 kB = 280 MB -> 500 floor
    assert jr.patch_job(cfg, "sift") == {"mem_mb": 500, "runtime": 5}
    rel = config(descriptors={"sift": {"family": "sift"}}, patches={"source": "hpatches_release"})
    # 16 x 5000 = 80,000 patches: 200 + 800 = 1000 MB x 1.25 -> 1300; 2 + 0.5 * 80 = 42 s -> 5 min
    assert jr.patch_job(rel, "sift") == {"mem_mb": 1300, "runtime": 5}
    rel["descriptors"]["hy"] = {"family": "hynet", "params": {"batch_mem_mb": 256}}
    # 600 + 800 + 256 = 1656 x 1.25 = 2070 -> 2100 MB; 15 + 2 * 1.5 * 80 = 255 s x 2 = 510 s -> 9 min
    assert jr.patch_job(rel, "hy") == {"mem_mb": 2100, "runtime": 9}
    assert jr.patch_job(rel, "csv_only") == jr.patch_job(rel, "sift")  # patches.csv descriptors: sift's model


def test_measured_jobs_fit_under_their_estimates():
    """Every measurement of benchmarks/README.md's tables (the largest of each kind) stays under the
    model's memory and time."""
    measured = [  # (job, what, side, kp_max, kp_scene, peak_rss_mb, wall_s)
        ("keypoints", "sift", 5196, 2695, 12383, 6189.0, 112.48),
        ("keypoints", "keynet", 1000, 1887, 11306, 1033.5, 112.33),
        ("descriptors", "sift", 5196, 2000, 11998, 3435.5, 35.37),
        ("descriptors", "hardnet", 512, 1001, 5170, 851.9, 28.55),
        ("descriptors", "hardnet", 1000, 4000, 23983, 858.8, 70.16),
        ("score", "sift", 1000, 16000, 95946, 970.6, 33.15),
        ("score", "sift", 1000, 4000, 23983, 541.3, 3.22),
    ]
    for job, what, side, kp_max, kp_scene, mem, wall in measured:
        row = {"job": job, "what": what, "side": side, "kp_max": kp_max, "kp_scene": kp_scene,
               "pairs_gkp2": 5 * kp_max * kp_max / 1e6}
        est = jr.estimate_for_measurement(row)
        assert est["mem_mb"] >= 1.25 * mem, (job, what, side, est)
        assert est["runtime"] * 60 >= 2 * wall, (job, what, side, est)


def test_score_job_time_follows_the_scene_pairs(tmp_path):
    """The comparisons are N_a x N_b per pair (a, b) of the scene: its pairs.txt, else the config's
    ``pairs`` (all: 15 pairs of 6 images instead of reference's 5)."""
    scenes = [header_scene(tmp_path, f"s{i}", 2000, 1500) for i in range(3)]
    # per pair 0.03 * 27264^2 / 1e6 = 22.30 s (test_score_job_by_hand); (3 + 3 * 5 * 22.30) * 2 = 675 s -> 12 min
    assert jr.score_job(config(), "sift", "sift", scenes)["runtime"] == 12
    # 15 pairs each: (3 + 3 * 15 * 22.30) * 2 = 2013 s -> 34 min
    assert jr.score_job(config(pairs="all"), "sift", "sift", scenes)["runtime"] == 34
    for s in scenes:
        (s / "pairs.txt").write_text("2 3\n")  # one pair each: (3 + 3 * 22.30) * 2 = 139.8 s -> 3 min, floor 5
    assert jr.score_job(config(pairs="all"), "sift", "sift", scenes)["runtime"] == 5
    (scenes[0] / "pairs.txt").write_text("2 3\n3 4\n4 5\n5 6\n6 2\n1 2\n1 3\n")  # 7 + 1 + 1 pairs: 2 * (3 + 9 * 22.30) = 407 s -> 7
    assert jr.score_job(config(), "sift", "sift", scenes)["runtime"] == 7
