"""Detector registry: one entry per detector name of ``keypoint_sets.<set>.detector``.

Each detector turns a grayscale uint8 image and its ``params`` (schema names, defaults filled by
:func:`descbench.config.validate_config` from ``workflow/schemas/config.schema.yaml``, the one
place where each parameter and its default is defined) into the raw keypoints, in the detector's
own output order. The border rule and the response cap are applied afterwards by
:func:`descbench.keypoints.filter_keypoints`, the same for every detector.

OpenCV 5 moved BRISK, AKAZE and KAZE to ``cv2.xfeatures2d`` (opencv-contrib); they are looked up
there first, then in ``cv2``. SURF is non-free in every OpenCV wheel; ``precomputed`` keypoints
come from files (:mod:`descbench.precomputed`) and are handled by the keypoint stage itself.
``keynet`` is kornia's KeyNet (:mod:`descbench.keypoints.keynet`, torch): not an OpenCV
Feature2D, but an object with the same ``detect(gray, mask) -> list[cv2.KeyPoint]``. ``disk``,
``aliked``, ``xfeat`` and ``superpoint`` are joint detect-and-describe networks (:mod:`descbench.keypoints.joint`,
``Detector.network``): their keypoint job runs them on the image file (RGB for DISK and ALIKED)
and keeps their descriptors of the kept keypoints in a side file; ``create`` gives their runner.

The ``octave`` field keeps the detector's own meaning (SIFT: packed octave/layer; ORB, BRISK,
AKAZE, KAZE: pyramid level; GFTT, FAST, KeyNet: 0). Descriptors that need SIFT's packed octave
recompute it from the size when the keypoints are not SIFT's
(:func:`descbench.keypoints.sift.sift_octave_from_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from descbench.jobfacts import DEFAULT_DENSITY, OPENCV_DETECTOR, Model, RuntimeFacts, named_files, weights_label
from descbench.keypoints import ImageKeypoints


def cv_attr(name: str):
    """An OpenCV name from ``cv2.xfeatures2d`` (opencv-contrib; where OpenCV 5 moved BRISK, AKAZE,
    KAZE and their constants) or else ``cv2``."""
    import cv2

    for mod in (getattr(cv2, "xfeatures2d", None), cv2):
        if mod is not None and hasattr(mod, name):
            return getattr(mod, name)
    raise RuntimeError(f"the installed OpenCV ({cv2.__version__}) has no {name}; install opencv-contrib-python-headless")


def _orb(p: dict):
    import cv2

    score = {"harris": cv2.ORB_HARRIS_SCORE, "fast": cv2.ORB_FAST_SCORE}[p["score_type"]]
    return cv2.ORB_create(nfeatures=p["n_features"], scaleFactor=p["scale_factor"], nlevels=p["n_levels"],
                          edgeThreshold=p["edge_threshold"], firstLevel=0, WTA_K=2, scoreType=score,
                          patchSize=p["patch_size"], fastThreshold=p["fast_threshold"])


def _brisk(p: dict):
    return cv_attr("BRISK_create")(thresh=p["threshold"], octaves=p["octaves"], patternScale=p["pattern_scale"])


def _diffusivity(name: str) -> int:
    return cv_attr({"pm_g1": "KAZE_DIFF_PM_G1", "pm_g2": "KAZE_DIFF_PM_G2", "weickert": "KAZE_DIFF_WEICKERT",
                     "charbonnier": "KAZE_DIFF_CHARBONNIER"}[name])


def _akaze(p: dict):
    return cv_attr("AKAZE_create")(threshold=p["threshold"], nOctaves=p["n_octaves"],
                                      nOctaveLayers=p["n_octave_layers"], diffusivity=_diffusivity(p["diffusivity"]))


def _kaze(p: dict):
    # KAZE's detect gives no orientation (angle 0) whatever `upright`: that is a descriptor option
    return cv_attr("KAZE_create")(threshold=p["threshold"], nOctaves=p["n_octaves"],
                                     nOctaveLayers=p["n_octave_layers"], diffusivity=_diffusivity(p["diffusivity"]))


def _gftt(p: dict):
    import cv2

    return cv2.GFTTDetector_create(maxCorners=p["max_corners"], qualityLevel=p["quality_level"], minDistance=p["min_distance"],
                                   blockSize=p["block_size"], useHarrisDetector=p["use_harris"], k=p["harris_k"])


def _fast(p: dict):
    import cv2

    kind = {"9_16": cv2.FAST_FEATURE_DETECTOR_TYPE_9_16, "7_12": cv2.FAST_FEATURE_DETECTOR_TYPE_7_12,
            "5_8": cv2.FAST_FEATURE_DETECTOR_TYPE_5_8}[p["type"]]
    return cv2.FastFeatureDetector_create(threshold=p["threshold"], nonmaxSuppression=p["nonmax_suppression"], type=kind)


def _sift(p: dict):
    from descbench.keypoints.sift import make_sift

    return make_sift(p)


def _surf(p: dict):
    # OpenCV's SURF when the OpenCV build has the non-free module, else descbench's numba SURF
    from descbench.keypoints.surf import make_surf_detector

    return make_surf_detector(p)


def _keynet(p: dict):
    # kornia's KeyNet (torch, the learned extra), wrapped with an OpenCV-style detect()
    from descbench.keypoints.keynet import cached_detector

    return cached_detector(p)


@dataclass(frozen=True)
class Detector(RuntimeFacts):
    """A detector: ``create(params)`` returns an OpenCV Feature2D (or an object with its
    ``detect(gray, mask)``, e.g. KeyNet's) whose ``detect`` is used; and what the workflow reads
    about its keypoint jobs (descbench.jobfacts)."""

    name: str
    create: Callable[[dict], object]
    schema_definition: str  # its params' definition in config.schema.yaml
    # its keypoint job's fitted memory/runtime model (descbench.jobresources)
    model: Model = OPENCV_DETECTOR
    # keypoints per megapixel (inside the border) assumed before detection: about twice the median
    # over the 8 demo photographs (their image 1, default parameters; README's table gives
    # min / median / max); used only until the set's keypoint file exists
    density: float = DEFAULT_DENSITY
    # ``cap(params)``: the most keypoints per image its params let it return (None: no limit)
    cap: Callable[[dict], int | None] | None = None
    # where it runs, files, weights labels, torch params: as a descriptor family's (RuntimeFacts)
    runtime: str | Callable[[dict], str] = "numpy"
    files: Callable[[dict], list[str]] | None = None
    weights_labels: Callable[[dict], list[str]] | None = None
    torch_params: Callable[[dict], list[dict]] | None = None
    # ``check(params, where)``: config-time check of its filled params against the world (files it
    # names exist), raising ConfigError naming ``where.<key>``
    check: Callable[[dict, str], None] | None = None
    # a joint detect-and-describe network (descbench.keypoints.joint.NETS): its keypoint job calls
    # ``create(params).detect(image_path, gray)`` -> (keypoints, rows) and writes the side file
    network: str | None = None

    def cap_of(self, params: dict) -> int | None:
        return self.cap(params) if self.cap else None


def _positive(key: str) -> Callable[[dict], int | None]:
    """A cap read from ``key`` of the params, where 0 (or left out) means no limit."""
    return lambda p: int(p[key]) if (p.get(key) or 0) > 0 else None


def _keynet_cap(p: dict) -> int | None:
    return int(p["num_features"]) if p.get("num_features") else None


def _keynet_files(p: dict) -> list[str]:
    return named_files(p, ("weights", "orinet_weights", "affnet_weights"))


def _keynet_labels(p: dict) -> list[str]:
    return [weights_label(p)] if isinstance(p.get("weights"), str) else []


def _keynet_check(p: dict, where: str) -> None:
    from descbench.keypoints.keynet import check_weight_files

    check_weight_files(p, where)


def _joint(net: str, cap_key: str | None = None) -> dict:
    """The Detector fields of joint network ``net`` (descbench.keypoints.joint)."""

    def create(p: dict):
        from descbench.keypoints.joint import runner

        return runner(net, p)

    def check(p: dict, where: str) -> None:
        from descbench.keypoints.joint import check_params

        check_params(net, p, where)

    # the param that caps its keypoints (DISK: null, ALIKED and SuperPoint: -1 = no budget; DeDoDe: n;
    # KeyNetAffNetHardNet: num_features)
    cap = _positive(cap_key or {"xfeat": "top_k", "keynet_affnet_hardnet": "num_features", "dedode": "n"}.get(net, "max_num_keypoints"))
    from descbench.keypoints.joint import NETS

    return dict(name=net, create=create, schema_definition=f"{net}_detector_params", network=net, cap=cap,
                model=NETS[net].model, runtime="torch",
                files=lambda p: named_files(p, NETS[net].weight_keys), weights_labels=lambda p: [weights_label(p)], check=check)


# Keypoint job models: the keypoint term is descbench.jobfacts.OPENCV_DETECTOR's. sift (that model)
# and keynet: fitted to whole jobs (sift 0.26-27 MP: 194-6,189 MB; keynet 0.26-1 MP); the others:
# one-image children at 1 and 4 MP (kaze 559 -> 2,073 MB; akaze, surf, orb, brisk, gftt, fast below
# or near the 250 MB their child's imports take), slopes rounded up.
_SMALL = Model(base_mb=160, mb_per_mp=40, mb_per_kkp=0.2, base_s=2, s_per_mp=0.2)

DETECTORS: dict[str, Detector] = {
    d.name: d
    for d in (
        Detector("sift", _sift, "sift_detector_params", density=10000, cap=_positive("n_features")),
        Detector("orb", _orb, "orb_detector_params", model=_SMALL, density=6000, cap=_positive("n_features")),
        Detector("brisk", _brisk, "brisk_detector_params", model=_SMALL, density=16000),
        Detector("akaze", _akaze, "akaze_detector_params", density=8000,
                 model=Model(base_mb=160, mb_per_mp=120, mb_per_kkp=0.2, base_s=2, s_per_mp=0.6)),
        Detector("kaze", _kaze, "kaze_detector_params", density=9000,
                 model=Model(base_mb=160, mb_per_mp=520, mb_per_kkp=0.2, base_s=2, s_per_mp=2.0)),
        Detector("gftt", _gftt, "gftt_detector_params", model=_SMALL, density=8000, cap=_positive("max_corners")),
        Detector("fast", _fast, "fast_detector_params", model=_SMALL, density=50000),
        Detector("surf", _surf, "surf_detector_params", density=3000,
                 model=Model(base_mb=250, mb_per_mp=130, mb_per_kkp=0.2, base_s=5, s_per_mp=1.5)),
        # kornia's KeyNet (torch; its params carry descbench.torchrt's device and threads)
        Detector("keynet", _keynet, "keynet_detector_params", density=10000, cap=_keynet_cap,
                 model=Model(base_mb=460, mb_per_mp=580, mb_per_kkp=0.2, base_s=5, s_per_mp=20),
                 runtime="torch", files=_keynet_files, weights_labels=_keynet_labels, check=_keynet_check),
        # joint detect-and-describe networks (descbench.keypoints.joint; its NETS hold their job
        # models: one full-image forward per image); densities are rough: DISK's threshold-0
        # maxima are dense, ALIKED's and XFeat's a few thousand per image
        Detector(**_joint("disk"), density=40000),
        Detector(**_joint("aliked"), density=8000),
        Detector(**_joint("xfeat"), density=5000),
        # descbench's own SuperPoint (descbench.keypoints.superpoint): random weights keep about one
        # pixel per NMS window (9 x 9: 12k per MP), published ones a few thousand
        Detector(**_joint("superpoint", cap_key="max_keypoints"), density=10000),
        Detector(**_joint("dedode"), density=10000),
        Detector(**_joint("keynet_affnet_hardnet"), density=8000),
    )
}


@dataclass(frozen=True)
class FileSource:
    """A keypoint set's ``detector`` that reads keypoints from files instead of detecting them (the
    keypoint stage reads them): its params' definition in config.schema.yaml, and a check of the set
    against the config, ``check_set(name, spec)``, raising ConfigError naming ``keypoint_sets.<name>``."""

    name: str
    schema_definition: str
    check_set: Callable[[str, dict], None] | None = None


def _precomputed_set(name: str, spec: dict) -> None:
    if spec.get("mode") == "projected":
        from descbench.errors import ConfigError

        raise ConfigError(
            f"keypoint_sets.{name}.mode: 'projected' would move image 1's precomputed keypoints away from "
            "the rows their descriptors describe in images 2..6; use mode: independent, or export the set and "
            "import it with detector: locked (whose descriptors are computed by descbench)"
        )


FILE_SOURCES: dict[str, FileSource] = {
    s.name: s
    for s in (
        FileSource("precomputed", "precomputed_params", _precomputed_set),  # descbench.precomputed
        FileSource("locked", "locked_params"),  # descbench.keypoints.locked
    )
}


def keypoints_from_cv(kps) -> ImageKeypoints:
    """OpenCV KeyPoints -> :class:`ImageKeypoints` (all fields; ``source_index`` = output order)."""
    n = len(kps)
    return ImageKeypoints(
        x=np.array([k.pt[0] for k in kps], dtype=np.float32).reshape(n),
        y=np.array([k.pt[1] for k in kps], dtype=np.float32).reshape(n),
        size=np.array([k.size for k in kps], dtype=np.float32).reshape(n),
        angle=np.array([k.angle for k in kps], dtype=np.float32).reshape(n),
        response=np.array([k.response for k in kps], dtype=np.float32).reshape(n),
        octave=np.array([k.octave for k in kps], dtype=np.int32).reshape(n),
        class_id=np.array([k.class_id for k in kps], dtype=np.int32).reshape(n),
        source_index=np.arange(n, dtype=np.int32),
    )


def detect(name: str, gray: np.ndarray, params: dict) -> ImageKeypoints:
    """Raw keypoints of detector ``name`` on a grayscale uint8 image, in its output order."""
    if name not in DETECTORS:
        raise KeyError(f"unknown detector '{name}'; known: {', '.join(sorted(DETECTORS))}, precomputed")
    if DETECTORS[name].network:
        raise ValueError(f"detector '{name}' is a joint network that reads the image file: "
                         f"DETECTORS['{name}'].create(params).detect(image_path, gray)")
    return keypoints_from_cv(DETECTORS[name].create(params).detect(gray, None))
