"""What the OpenCV descriptor families (:mod:`descbench.descriptors.opencv_binary`,
:mod:`descbench.descriptors.opencv_float`) share: parameter declarations, AKAZE's and KAZE's
scale-space rules, and the one construction of a family from its *setup*.

A family's setup, ``setup(params, kps, kpset, shape, where) -> CvSetup``, builds the OpenCV
extractor for filled ``params`` and says which ``octave`` / ``class_id`` fields the keypoints get
(ORB's pyramid level, AKAZE's and KAZE's scale level) on an image of ``shape`` (H, W); ``where``
names the image in errors. :func:`cv_family` turns it into a :class:`DescriptorFamily` whose
image ``compute`` and patch ``patch_rows`` both call that setup, so an image and a patch are
described by the same construction (patches: :mod:`descbench.patches.describe`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from descbench.datasets.layout import read_image
from descbench.descriptors import DescriptorFamily, PatchJob
from descbench.descriptors.cv_compute import OPENCV_DEFAULT_SCALE, choice, compute_rows, cv_keypoints
from descbench.errors import DataError
from descbench.jobfacts import Cost, Model
from descbench.keypoints import ImageKeypoints
from descbench.keypoints.detectors import DETECTORS, cv_attr
from descbench.params import config_schema, fragment_defaults, object_fragment

# ----------------------------------------------------------------------------- shared parameters

BOOL = {"type": "boolean"}
SCALE_FACTOR = {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None}  # null: by root detector
# AKAZE / KAZE scale space (the same names and defaults as the akaze / kaze detectors)
OCTAVES = {"type": "integer", "minimum": 1, "default": 4}
DIFFUSIVITY = {"pm_g1": "KAZE_DIFF_PM_G1", "pm_g2": "KAZE_DIFF_PM_G2", "weickert": "KAZE_DIFF_WEICKERT",
               "charbonnier": "KAZE_DIFF_CHARBONNIER"}
DIFFUSIVITY_PARAM = {"enum": list(DIFFUSIVITY), "default": "pm_g2"}
# The ``akaze`` family's params (M-LDB size and channels, the scale space); the KAZE-type
# ``akaze_kaze`` is built with its M-LDB defaults (OpenCV's).
AKAZE_PARAMS = object_fragment(
    upright={**BOOL, "default": False},
    # 0: the full 486 bits; else that many bits
    descriptor_size={"type": "integer", "minimum": 0, "maximum": 486, "default": 0},
    descriptor_channels={"enum": [1, 2, 3], "default": 3},
    n_octaves=OCTAVES, n_octave_layers=OCTAVES, diffusivity=DIFFUSIVITY_PARAM)


# ----------------------------------------------------------------------------- one family from its setup


@dataclass(frozen=True)
class CvSetup:
    """An OpenCV extractor and the keypoint fields it is called with (None: the keypoints' own)."""

    extractor: object
    octave: np.ndarray | None = None
    class_id: np.ndarray | None = None
    # False: the extractor reads class_id (AKAZE, KAZE scale levels) and is called untagged
    # (descbench.descriptors.cv_compute.compute_rows)
    tag: bool = True

    def keypoints(self, kps: ImageKeypoints) -> list:
        return cv_keypoints(kps.x, kps.y, kps.size, kps.angle, kps.octave if self.octave is None else self.octave,
                            kps.class_id if self.class_id is None else self.class_id, kps.response)


Setup = Callable[[dict, ImageKeypoints, dict, tuple, Path], CvSetup]


# A family's last step on its rows (``rows, params -> rows``), after OpenCV's compute; None: none.
RowsStep = Callable[[np.ndarray, dict], np.ndarray] | None


def image_rows(family: str, setup: Setup, post: RowsStep = None) -> Callable[[Path, ImageKeypoints, dict, dict], np.ndarray]:
    """The family's ``compute``: its setup on the grey image, one row per keypoint
    (:func:`~descbench.descriptors.cv_compute.compute_rows`), then ``post``."""

    def compute(image_path: Path, kps: ImageKeypoints, params: dict, kpset: dict) -> np.ndarray:
        gray = read_image(image_path) if len(kps) else np.zeros((1, 1), np.uint8)
        s = setup(params, kps, kpset, gray.shape[:2], image_path)
        rows = compute_rows(s.extractor, gray, s.keypoints(kps), family=family, image_path=image_path, tag=s.tag)
        return rows if post is None else post(rows, params)

    return compute


def patch_rows(family: str, setup: Setup, post: RowsStep = None) -> Callable[[PatchJob, dict], np.ndarray]:
    """The family's ``patch_rows``: its setup built once for the job's keypoint on a patch, then
    one OpenCV ``compute`` per patch; a keypoint OpenCV drops goes through
    :func:`~descbench.descriptors.cv_compute.compute_rows` (reflect-padded recomputation, or
    DataError), as on an image."""

    def rows(job: PatchJob, params: dict) -> np.ndarray:
        try:
            s = setup(params, job.keypoint, job.kpset, job.shape, Path("<patch>"))
        except DataError as exc:  # check_msurf_scale: a support too small for M-SURF
            raise DataError(f"{job.where}: {exc}; on patches: raise 'support'") from exc
        ex, cv_kps = s.extractor, s.keypoints(job.keypoint)

        def row(i):
            if s.tag:
                got, desc = ex.compute(job.patches[i], cv_kps)
                if desc is not None and len(got) == 1:
                    return desc  # kept on the unpadded patch: what compute_rows' first pass returns
            try:
                return compute_rows(ex, job.patches[i], cv_kps, family=family, image_path=job.name(i), tag=s.tag)
            except DataError as exc:
                raise DataError(f"{exc}; on patches: lower 'support' (the keypoint size) or the family's pattern scale so "
                                "its pattern fits the padded patch") from exc

        out = job.per_patch(row)
        return out if post is None else post(out, params)

    return rows


# The descriptor jobs of the families whose compute builds KAZE's / AKAZE's nonlinear scale space:
# SIFT's compute model (descbench.jobfacts.OPENCV_DESCRIPTOR) with the per-pixel slopes of the KAZE /
# AKAZE detectors (descbench.keypoints.detectors; one-image children at 1 and 4 MP).
KAZE_COST = Cost(model=Model(base_mb=170, mb_per_mp=520, mb_per_kkp=1.2, base_s=2, s_per_mp=2.0, s_per_kkp=0.02))
AKAZE_COST = Cost(model=Model(base_mb=170, mb_per_mp=120, mb_per_kkp=1.2, base_s=2, s_per_mp=0.6, s_per_kkp=0.02))


def cv_family(name: str, setup: Setup, params_schema: dict, patch_support: Callable[[dict, int], float],
              binary: bool = False, cost: Cost = Cost(), post: RowsStep = None) -> DescriptorFamily:
    """An OpenCV family: images and patches both described through ``setup``, then ``post``."""
    return DescriptorFamily(name, image_rows(name, setup, post), params_schema, binary=binary,
                            patch_support=patch_support, patch_rows=patch_rows(name, setup, post), cost=cost)


def fixed_support(size: float) -> Callable[[dict, int], float]:
    """A patch support that is one keypoint size, whatever the params (measured on 65 x 65 patches)."""
    return lambda params, side: size


def window_support(params: dict, side: int) -> float:
    """Patch-resampling descriptors (BEBLID, TEBLID, BoostDesc, VGG): window = size x scale_factor
    spans the patch (``null``: OpenCV's default 6.25)."""
    sf = params.get("scale_factor")
    return side / float(OPENCV_DEFAULT_SCALE if sf is None else sf)


# ----------------------------------------------------------------------------- AKAZE / KAZE scale space

SCALE_SPACE_KEYS = ("n_octaves", "n_octave_layers", "diffusivity")


def same_scale_space(kpset: dict, params: dict, detector: str) -> bool:
    """True iff the set was detected by ``detector`` with the scale space of ``params``."""
    if kpset.get("detector") != detector:
        return False
    d = kpset.get("params") or {}
    # a key the set leaves out has the detector's default (its definition in config.schema.yaml)
    defaults = fragment_defaults(config_schema()["definitions"][DETECTORS[detector].schema_definition])
    return all(d.get(k, defaults[k]) == params[k] for k in SCALE_SPACE_KEYS)


def akaze_n_levels(shape: tuple, n_octaves: int, n_octave_layers: int) -> int:
    """Number of scale levels AKAZE builds for an image of ``shape`` (H, W): octave i > 0 exists
    while ``W >> i >= 80`` and ``H >> i >= 40``."""
    h, w = shape[:2]
    octaves = 1
    while octaves < n_octaves and (w >> octaves) >= 80 and (h >> octaves) >= 40:
        octaves += 1
    return octaves * n_octave_layers


def akaze_levels(kps: ImageKeypoints, shape: tuple, params: dict, kpset: dict, detector: str = "akaze"):
    """(class_id, octave) for AKAZE's compute: the detector's own where valid, else from the size."""
    L = int(params["n_octave_layers"])
    n = akaze_n_levels(shape, int(params["n_octaves"]), L)
    derived = np.clip(np.rint(L * np.log2(np.maximum(kps.size.astype(np.float64), 1e-6) / 4.8)), 0, n - 1).astype(np.int32)
    level = derived
    if same_scale_space(kpset, params, detector):
        own = (kps.class_id >= 0) & (kps.class_id < n) & (kps.octave == kps.class_id // L)
        level = np.where(own, kps.class_id, derived).astype(np.int32)
    return level, (level // L).astype(np.int32)


def check_msurf_scale(size: np.ndarray, octave: np.ndarray, family: str, image_path: Path) -> None:
    """M-SURF (KAZE, AKAZE's KAZE type) samples with step ``round(size / 2 / 2^octave)`` and Gaussian
    weights of sigma 2.5 x step: a step of 0 gives 0/0 = NaN rows, so such keypoints are an error."""
    step = np.rint(0.5 * size.astype(np.float64) / np.exp2(octave.astype(np.float64)))  # rint = cvRound (half to even)
    bad = np.flatnonzero(step < 1)
    if bad.size:
        raise DataError(
            f"image {image_path}: {bad.size} keypoints are too small for descriptor '{family}' (first at keypoint row "
            f"{int(bad[0])}, size {float(size[bad[0]]):.3f} px; M-SURF needs size > 2^octave px, here its sampling step "
            "would be 0 and the descriptor NaN); filter the keypoint set with min_size or use another descriptor"
        )


def make_akaze(family: str, params: dict, descriptor_type: str):
    diff = cv_attr(choice(family, params, "diffusivity", DIFFUSIVITY))
    # M-LDB's size and channels are parameters of the akaze family; a KAZE-type descriptor
    # (akaze_kaze) has neither and is built with the akaze family's defaults (OpenCV's)
    mldb = params if family == "akaze" else fragment_defaults(AKAZE_PARAMS)
    return cv_attr("AKAZE_create")(descriptor_type=cv_attr(descriptor_type),
                                    descriptor_size=int(mldb["descriptor_size"]),
                                    descriptor_channels=int(mldb["descriptor_channels"]),
                                    nOctaves=int(params["n_octaves"]), nOctaveLayers=int(params["n_octave_layers"]),
                                    diffusivity=diff)


def akaze_setup(family: str, kinds: tuple[str, str]) -> Setup:
    """The setup of an AKAZE family (``akaze``: M-LDB, ``akaze_kaze``: KAZE type); ``kinds`` =
    (OpenCV descriptor type, its upright type). Levels from :func:`akaze_levels`; AKAZE reads
    ``class_id`` (untagged)."""

    def setup(params: dict, kps: ImageKeypoints, kpset: dict, shape: tuple, where: Path) -> CvSetup:
        kind = kinds[1] if params["upright"] else kinds[0]
        akaze = make_akaze(family, params, kind)
        level, octave = akaze_levels(kps, shape, params, kpset)
        if kind.startswith("AKAZE_DESCRIPTOR_KAZE"):
            check_msurf_scale(kps.size, octave, family, where)
        return CvSetup(akaze, octave, level, tag=False)

    return setup
