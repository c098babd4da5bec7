"""HPatches-style patches generated from any sequence dataset (HPatches layout).

The procedure follows Balntas, Lenc, Vedaldi, Mikolajczyk, "HPatches: A benchmark and
evaluation of handcrafted and learned local descriptors", CVPR 2017, Section 3 ("Images and
patches"), as documented for hpatches-release in hpatches-benchmark's ``docs/extraction.md``.
Differences from the original are marked *(differs)*.

1. **Detection** in image 1 (the reference) with OpenCV SIFT (DoG), default parameters
   (:func:`descbench.keypoints.sift.make_sift`). *(differs: HPatches pooled DoG,
   Hessian-Hessian and Harris-Laplace detections.)* As in HPatches, there is no affine
   adaptation and one orientation per detection (Lowe's dominant orientation; OpenCV's extra
   orientations are duplicates at the same place and are removed by step 3). A detection is the
   circle of radius ``sigma = size / 2`` (OpenCV's ``KeyPoint.size`` is the diameter ``2 sigma``
   of SIFT's scale ``sigma``, which is VLFeat's frame scale) with orientation ``angle``.
2. **Measurement region**: the detection scale is magnified by ``magnification`` (HPatches: 5)
   and resampled to 65x65: the patch square's inscribed circle is the circle of radius
   ``magnification * sigma``. A *frame* is ``(c, A)``: centre ``c`` (image pixels) and a 2x2
   matrix mapping normalised patch coordinates ``q`` (the inscribed circle is ``|q| = 1``) to
   the image, ``x = c + A q``; the reference frame is ``A = magnification sigma R(angle)`` with
   ``R(a) = [[cos a, -sin a], [sin a, cos a]]``, so the patch's +x axis points along the
   keypoint's orientation (OpenCV angle: degrees, image axes x right / y down). Patch pixel
   ``(u, v)`` (0..64, column/row) is ``q = ((u, v) - 32) / 32.5``: the square's outer pixel
   edges are at ``|q_x|, |q_y| = 1``.
3. **Overlap suppression**: HPatches clusters detections whose ellipse overlap exceeds 50 % and
   keeps one at random. *(differs: deterministic greedy non-maximum suppression)* Candidates
   are visited by decreasing SIFT response; one is dropped if its detection circle (radius
   ``sigma``) has intersection-over-union ``> overlap_threshold`` (default 0.5) with the circle
   of an already kept candidate.
4. **Affine jitter** (detector noise): for each patch, jitter level ``j`` in e/h/t and target
   image ``k`` an independent jitter is drawn, ``phi ~ U(-r, r)`` degrees, ``ln s_x, ln s_y ~
   U(-g, g)``, ``t_x, t_y ~ U(-d, d)`` (amplitudes ``(r, g, d)`` of the level, :class:`JitterAmplitude`),
   and applied in normalised patch coordinates: ``q -> R(phi) diag(s_x, s_y) q + t``, i.e.
   ``A' = A R(phi) diag(s_x, s_y)``, ``c' = c + A t``. The translation is thus a fraction of the
   measurement radius and the scaling is anisotropic along the patch axes.

   *Amplitudes.* The paper and hpatches-benchmark's extraction notes give no amplitudes, only
   the resulting overlap: hpatches-benchmark's ``docs/extraction.md`` states a *median ellipse
   overlap with the original patches* of ~0.85 (easy) and ~0.72 (hard); no value for tough was
   found, and ~0.60 was chosen to continue the ladder. The defaults were calibrated so that the
   median intersection-over-union between the measurement region ``|q| <= 1`` and its jittered
   image reaches these values (tests/descbench/patches/test_generate.py measures them): ``g = d`` = 0.13
   (easy, median overlap 0.85), 0.26 (hard, 0.72), 0.40 (tough, 0.60). Rotation does not change
   the overlap of a circle, so its amplitude is chosen, not calibrated: 7.5, 15 and 22.5
   degrees, i.e. about ``d`` radians, so that rotation moves a point of the region's boundary
   about as far as the translation does (a 1 : 2 : 3 ladder like the other amplitudes).
5. **Mapping into image k** (k = 2..6) through the ground-truth homography ``H = H_1_k`` by its
   local affine approximation at the jittered centre: ``c_k = H(c')``, ``A_k = J_H(c') A'`` with
   ``J_H`` from :func:`descbench.keypoints.projected.homography_jacobian`.
6. **Resampling** of every frame to 65x65 with ``cv2.warpAffine`` (``INTER_LINEAR``,
   ``BORDER_REFLECT``, ``WARP_INVERSE_MAP``). With ``antialias`` (default) a frame that
   shrinks the image by a factor ``f = sqrt|det A| / 32.5 >= 2`` (image pixels per patch pixel)
   is sampled from Gaussian pyramid level ``L = floor(log2 f)`` (``cv2.pyrDown``; level-L pixel
   ``x`` is level-0 pixel ``2^L x``) so that bilinear sampling never skips more than one pixel
   in two. *(HPatches' own resampling is not documented.)*
7. **Support check**: a patch is kept only if, for every jitter level and target image, the
   whole 65x65 support (the sample points of its four corner pixels; the frame is affine so the
   rest lies between them) lies inside the image, i.e. ``0 <= x <= W - 1``, ``0 <= y <= H - 1``:
   the reference frame in image 1, every jittered frame in image 1 (so that every target patch
   shows content that image 1 sees; a warped image's fill outside image 1 never enters a patch)
   and every mapped frame in image k (which must also lie in front of the camera). HPatches:
   "only patches for which this region is fully contained in the image are kept".
8. **Contrast**: patches whose ``ref`` has a standard deviation below ``min_std`` grey levels
   are dropped (flat regions have no meaningful descriptor).
9. **Cap**: the first ``max_patches`` survivors in decreasing response order (ties broken by
   position, scale, angle) are kept, in that order: row i of every strip is survivor i.

Strips follow the HPatches convention (:func:`descbench.patches.layout.type_source`): ``ref`` is
the un-jittered frame in image 1; ``e<k-1>``, ``h<k-1>``, ``t<k-1>`` the easy/hard/tough
jittered frame in image k. All 16 strips of a sequence have the same N.

Determinism: the jitters come from ``numpy.random.default_rng`` seeded with the first 8 bytes of
``sha256(f"descbench.patches:{seed}:{sequence}")`` (never Python's salted ``hash()``), so a
sequence's patches depend only on its own images, the parameters and the seed, not on which
other sequences are generated. Unit draws ``u ~ U(-1, 1)`` of shape ``[candidates, 3, 5, 5]``
(level, target image, parameter) are scaled by the amplitudes, so a candidate's jitter does
not depend on how many candidates follow it. Same input + seed -> byte-identical files (with
the same OpenCV build). Each sequence folder also receives ``patches.json``: the parameters,
the source files' SHA-256, software versions and, per patch, its reference frame and the
jitter drawn for every strip.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from descbench.datasets.hpatches import TARGET_IMAGES  # HPatches patches: a 6-image sequence's targets e/h/t 1..5
from descbench.datasets.layout import read_homography, read_image, scene_files
from descbench.errors import ConfigError, DataError
from descbench.keypoints.projected import homography_jacobian
from descbench.patches import JITTER_NAMES, JITTERS, PATCH_SIZE, PATCH_TYPES
from descbench.fileops import file_sha256, write_bytes_atomic
from descbench.patches.layout import source_type, strip_path, write_strip
from descbench.rng import keyed_rng
from descbench.params import ConfigParams, check_params, config_field, describe_rule, first_error, schema_default, schema_node

#: Half-width of a patch in patch pixels: normalised coordinate 1 is 32.5 pixels from the centre.
HALF_EXTENT = PATCH_SIZE / 2.0
#: Patch pixel index of the centre (0-based).
CENTRE_PIXEL = (PATCH_SIZE - 1) / 2.0
#: Normalised coordinate of the outermost sample points (pixel centres 0 and 64).
CORNER = CENTRE_PIXEL / HALF_EXTENT
#: Version tag of ``patches.json``.
PROVENANCE_FORMAT = "descbench.patches/1"
#: Names of the 5 jitter parameters, in the order they are drawn and recorded.
JITTER_FIELDS = ("rotation_deg", "scale_x", "scale_y", "shift_x", "shift_y")


# ---------------------------------------------------------------------------------------------
# parameters


@dataclass(frozen=True)
class JitterAmplitude:
    """Amplitudes of one jitter level (see the module docstring, step 4).

    ``rotation_deg``: ``phi ~ U(-rotation_deg, rotation_deg)``; ``log_scale``: ``ln s_x, ln s_y ~
    U(-log_scale, log_scale)``; ``translation``: ``t_x, t_y ~ U(-translation, translation)`` in
    units of the measurement radius.
    """

    rotation_deg: float
    log_scale: float
    translation: float


def _jitter_levels(levels: Mapping[str, Any]) -> tuple[JitterAmplitude, ...]:
    """The validated ``patches.generate.jitter`` mapping (easy/hard/tough, every amplitude given)
    as the :class:`JitterAmplitude` of each level, in :data:`~descbench.patches.JITTERS` order."""
    return tuple(JitterAmplitude(**{k: float(v) for k, v in levels[JITTER_NAMES[j]].items()}) for j in JITTERS)


#: Default amplitudes per level (easy, hard, tough): median overlaps 0.85 / 0.72 / 0.60 (the
#: schema's defaults of ``patches.generate.jitter``).
DEFAULT_JITTER: tuple[JitterAmplitude, JitterAmplitude, JitterAmplitude] = _jitter_levels(schema_default("patches.generate.jitter"))

ZERO_JITTER = (JitterAmplitude(0.0, 0.0, 0.0),) * 3

#: Where the parameters are declared (types, ranges, defaults): config.schema.yaml.
SCHEMA_KEY = "patches.generate"


@dataclass(frozen=True)
class PatchGenParams(ConfigParams):
    """Parameters of patch generation (module docstring: the step each one controls).

    Every field is the config key ``patches.generate.<field>`` (declared, with its range and
    default, in ``workflow/schemas/config.schema.yaml``); ``jitter`` holds the easy, hard and tough
    amplitudes in :data:`~descbench.patches.JITTERS` order. Built from the validated section by
    :meth:`from_config`, or from a partial mapping by :meth:`from_mapping`; a value the schema
    refuses (or a non-finite number) raises :class:`~descbench.errors.ConfigError` naming the key.
    """

    max_patches: int = config_field("patches.generate.max_patches")
    magnification: float = config_field("patches.generate.magnification")
    jitter: tuple[JitterAmplitude, JitterAmplitude, JitterAmplitude] = config_field("patches.generate.jitter", _jitter_levels)
    seed: int = config_field("patches.generate.seed")
    min_std: float = config_field("patches.generate.min_std")
    overlap_threshold: float = config_field("patches.generate.overlap_threshold")
    antialias: bool = config_field("patches.generate.antialias")

    def __post_init__(self) -> None:
        if len(self.jitter) != len(JITTERS) or not all(isinstance(a, JitterAmplitude) for a in self.jitter):
            raise ConfigError(f"patch generation parameter 'jitter' = {self.jitter!r} is invalid: it must be three "
                              "JitterAmplitude (easy, hard, tough)")
        values = self.to_dict()
        err = first_error(schema_node(SCHEMA_KEY), values)  # the schema's rules, for objects built in Python
        if err is not None:
            path, problem, node = err
            raise ConfigError(f"patch generation parameter '{'.'.join(path)}' is invalid: {problem}; "
                              f"it must be {describe_rule(node)}")
        check_finite(values, "")

    def amplitude(self, jitter: str) -> JitterAmplitude:
        """The amplitudes of level ``jitter`` (``"e"``, ``"h"`` or ``"t"``)."""
        return self.jitter[JITTERS.index(jitter)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; ``jitter`` keyed by level name (easy/hard/tough): the config section's form."""
        d = asdict(self)
        d["jitter"] = {JITTER_NAMES[j]: asdict(a) for j, a in zip(JITTERS, self.jitter)}
        return d

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "patches") -> PatchGenParams:
        """Parameters from a partial mapping (keys as the config section; missing keys take the
        schema's defaults). Unknown keys and invalid values raise :class:`ConfigError` naming
        ``<where>.<key>``."""
        return cls.from_config(check_params(schema_node(SCHEMA_KEY), values, where, "patch generation"))


def check_finite(values: Mapping[str, Any], where: str) -> None:
    """Every number of the (nested) ``patches.generate`` mapping is finite: the one rule on these
    keys that JSON schema cannot state (config validation calls it, :mod:`descbench.patches.stages`)."""
    for key, v in values.items():
        at = f"{where}.{key}" if where else key
        if isinstance(v, Mapping):
            check_finite(v, at)
        elif isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"patch generation parameter '{at}' = {v!r} is invalid: it must be a finite number")


def sequence_rng(sequence: str, seed: int = 0) -> np.random.Generator:
    """The RNG of one sequence: seeded by the first 8 bytes (little endian) of
    ``sha256(f"descbench.patches:{seed}:{sequence}")`` (stable across runs and machines)."""
    return keyed_rng(f"descbench.patches:{seed}:{sequence}", "little")


# ---------------------------------------------------------------------------------------------
# frames


def rotation(angle_rad: np.ndarray) -> np.ndarray:
    """``R(a) = [[cos a, -sin a], [sin a, cos a]]`` for each angle: ``[..., 2, 2]``."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def reference_frames(sigma: np.ndarray, angle_deg: np.ndarray, magnification: float) -> np.ndarray:
    """``A = magnification * sigma * R(angle)`` per detection: ``[N, 2, 2]`` (module docstring, step 2)."""
    sigma = np.asarray(sigma, dtype=np.float64)
    return (magnification * sigma)[:, None, None] * rotation(np.deg2rad(np.asarray(angle_deg, dtype=np.float64)))


def frame_scale_angle(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, angle)`` of frames ``A [..., 2, 2]``: ``scale = sqrt|det A|`` (radius of the
    measurement region in pixels, geometric mean for an anisotropic frame) and ``angle`` =
    direction of the patch's +x axis, ``atan2(A[1,0], A[0,0])`` in degrees, in [0, 360)."""
    A = np.asarray(A, dtype=np.float64)
    scale = np.sqrt(np.abs(A[..., 0, 0] * A[..., 1, 1] - A[..., 0, 1] * A[..., 1, 0]))
    angle = np.rad2deg(np.arctan2(A[..., 1, 0], A[..., 0, 0])) % 360.0
    return scale, angle


def draw_unit_jitter(rng: np.random.Generator, n: int) -> np.ndarray:
    """``u ~ U(-1, 1)`` of shape ``[n, 3, 5, 5]``: (candidate, level e/h/t, target image 2..6,
    parameter in :data:`JITTER_FIELDS` order). Row i does not depend on ``n``."""
    return rng.uniform(-1.0, 1.0, size=(n, len(JITTERS), len(TARGET_IMAGES), len(JITTER_FIELDS)))


def scale_jitter(unit: np.ndarray, amp: JitterAmplitude) -> np.ndarray:
    """Jitter parameters ``[..., 5]`` (:data:`JITTER_FIELDS`) from unit draws ``[..., 5]``:
    ``phi = r u0`` (degrees), ``s_x = exp(g u1)``, ``s_y = exp(g u2)``, ``t = d (u3, u4)``."""
    out = np.empty(unit.shape, dtype=np.float64)
    out[..., 0] = amp.rotation_deg * unit[..., 0]
    out[..., 1] = np.exp(amp.log_scale * unit[..., 1])
    out[..., 2] = np.exp(amp.log_scale * unit[..., 2])
    out[..., 3] = amp.translation * unit[..., 3]
    out[..., 4] = amp.translation * unit[..., 4]
    return out


def jitter_affine(jitter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(L, t)`` of jitter parameters ``[..., 5]``: ``L = R(phi) diag(s_x, s_y)`` ``[..., 2, 2]``
    and ``t = (t_x, t_y)`` ``[..., 2]``."""
    jitter = np.asarray(jitter, dtype=np.float64)
    L = rotation(np.deg2rad(jitter[..., 0])) * jitter[..., None, 1:3]  # scales the columns
    return L, jitter[..., 3:5]


def apply_jitter(c: np.ndarray, A: np.ndarray, jitter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Jittered frames: ``A' = A L``, ``c' = c + A t`` (``(L, t)`` from :func:`jitter_affine`);
    ``c [..., 2]``, ``A [..., 2, 2]``, ``jitter [..., 5]`` broadcast together."""
    L, t = jitter_affine(jitter)
    return c + np.einsum("...ij,...j->...i", A, t), A @ L


def map_frames_through_homography(H: np.ndarray, c: np.ndarray,
                                  A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames of image 1 mapped into image k by ``H = H_1_k``'s local affine approximation.

    ``c_k = H(c)``, ``A_k = J_H(c) A`` (``J_H`` the Jacobian at ``c``,
    :func:`descbench.keypoints.projected.homography_jacobian`); returns ``(c_k [N, 2],
    A_k [N, 2, 2], front [N])``, ``front`` false where ``c`` maps behind the camera.
    """
    c = np.asarray(c, dtype=np.float64).reshape(-1, 2)
    p, J, front = homography_jacobian(H, c)
    return p, J @ np.asarray(A, dtype=np.float64).reshape(-1, 2, 2), front


def frames_inside(c: np.ndarray, A: np.ndarray, width: int, height: int) -> np.ndarray:
    """Whether each frame's whole 65x65 support lies in a ``width`` x ``height`` image.

    The sample points of the four corner pixels, ``c + A (+-CORNER, +-CORNER)``, must satisfy
    ``0 <= x <= width - 1`` and ``0 <= y <= height - 1`` (bilinear interpolation then never
    reads outside the image); ``c [..., 2]``, ``A [..., 2, 2]`` -> ``bool [...]``.
    """
    corners = CORNER * np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64)
    pts = c[..., None, :] + np.einsum("...ij,kj->...ki", A, corners)
    with np.errstate(invalid="ignore"):
        ok = (pts[..., 0] >= 0) & (pts[..., 0] <= width - 1) & (pts[..., 1] >= 0) & (pts[..., 1] <= height - 1)
    return ok.all(axis=-1)


# ---------------------------------------------------------------------------------------------
# detection and suppression


@dataclass(frozen=True)
class Detections:
    """Detections of image 1 in priority order: ``xy [N, 2]``, ``sigma``, ``angle`` (degrees), ``response``."""

    xy: np.ndarray
    sigma: np.ndarray
    angle: np.ndarray
    response: np.ndarray

    def __len__(self) -> int:
        return len(self.sigma)

    def take(self, idx: np.ndarray) -> Detections:
        return Detections(self.xy[idx], self.sigma[idx], self.angle[idx], self.response[idx])


def detect(image: np.ndarray) -> Detections:
    """OpenCV SIFT (default parameters) on a grayscale image, sorted by decreasing response.

    Ties are broken by ``y``, ``x``, ``sigma`` and ``angle`` (ascending) so that the order does
    not depend on the detector's internal (threaded) order. ``sigma = KeyPoint.size / 2``.
    """
    from descbench.keypoints.sift import make_sift

    kps = make_sift({}).detect(image, None)
    xy = np.array([k.pt for k in kps], dtype=np.float64).reshape(-1, 2)
    sigma = np.array([k.size for k in kps], dtype=np.float64) / 2.0
    angle = np.array([k.angle for k in kps], dtype=np.float64) % 360.0
    response = np.array([k.response for k in kps], dtype=np.float64)
    order = np.lexsort((angle, sigma, xy[:, 0], xy[:, 1], -response))
    return Detections(xy, sigma, angle, response).take(order)


def circle_iou(c1: np.ndarray, r1: np.ndarray, c2: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Intersection over union of circles (centres ``[..., 2]``, radii), broadcast.

    With centre distance ``d``: 0 if ``d >= r1 + r2``; ``pi min(r)^2`` intersection if one
    contains the other (``d <= |r1 - r2|``); otherwise the lens area
    ``r1^2 acos((d^2 + r1^2 - r2^2) / (2 d r1)) + r2^2 acos((d^2 + r2^2 - r1^2) / (2 d r2))
    - sqrt((-d + r1 + r2)(d + r1 - r2)(d - r1 + r2)(d + r1 + r2)) / 2``.
    """
    d = np.linalg.norm(np.asarray(c1, dtype=np.float64) - np.asarray(c2, dtype=np.float64), axis=-1)
    r1, r2 = np.broadcast_arrays(np.asarray(r1, dtype=np.float64), np.asarray(r2, dtype=np.float64))
    r1, r2, d = np.broadcast_arrays(r1, r2, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        a1 = np.clip((d**2 + r1**2 - r2**2) / (2 * d * r1), -1.0, 1.0)
        a2 = np.clip((d**2 + r2**2 - r1**2) / (2 * d * r2), -1.0, 1.0)
        k = (-d + r1 + r2) * (d + r1 - r2) * (d - r1 + r2) * (d + r1 + r2)
        lens = r1**2 * np.arccos(a1) + r2**2 * np.arccos(a2) - 0.5 * np.sqrt(np.maximum(k, 0.0))
    inter = np.where(d >= r1 + r2, 0.0, np.where(d <= np.abs(r1 - r2), np.pi * np.minimum(r1, r2) ** 2, lens))
    return inter / (np.pi * r1**2 + np.pi * r2**2 - inter)


def suppress_overlapping(xy: np.ndarray, radius: np.ndarray, threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression of circles given in priority order; indices kept (ascending).

    Circle i is kept unless some kept circle j < i has ``circle_iou > threshold``. Only circles
    whose centres are closer than ``r_i + max(r)`` can overlap: they are found in an x-sorted
    sweep, so the work is about N x (neighbours), not N^2.
    """
    n = len(radius)
    order = np.argsort(xy[:, 0], kind="stable")
    xs = xy[order, 0]
    r_max = float(radius.max()) if n else 0.0
    kept = np.zeros(n, dtype=bool)
    for i in range(n):
        lo, hi = np.searchsorted(xs, [xy[i, 0] - radius[i] - r_max, xy[i, 0] + radius[i] + r_max], side="left")
        nb = order[lo:hi]
        nb = nb[kept[nb]]
        if nb.size == 0 or not np.any(circle_iou(xy[i], radius[i], xy[nb], radius[nb]) > threshold):
            kept[i] = True
    return np.flatnonzero(kept)


# ---------------------------------------------------------------------------------------------
# resampling


class Pyramid:
    """Gaussian pyramid of a grayscale image (``cv2.pyrDown``), levels built on demand."""

    def __init__(self, image: np.ndarray):
        self.levels = [np.ascontiguousarray(image)]

    def level(self, L: int) -> np.ndarray:
        import cv2

        while len(self.levels) <= L:
            self.levels.append(cv2.pyrDown(self.levels[-1]))
        return self.levels[L]

    def max_level(self) -> int:
        """Deepest level whose both sides are still >= 65 pixels (deeper levels are never used)."""
        h, w = self.levels[0].shape[:2]
        return max(0, int(math.floor(math.log2(max(1, min(h, w)) / PATCH_SIZE))))


def patch_warp_matrix(c: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The 2x3 map from patch pixel ``(u, v)`` to image pixel: ``x = c + A ((u, v) - 32) / 32.5``."""
    lin = np.asarray(A, dtype=np.float64) / HALF_EXTENT
    return np.column_stack([lin, np.asarray(c, dtype=np.float64) - lin @ np.array([CENTRE_PIXEL, CENTRE_PIXEL])])


def pyramid_level(A: np.ndarray, antialias: bool, max_level: int) -> int:
    """``floor(log2 f)`` clipped to ``[0, max_level]``, ``f = sqrt|det A| / 32.5`` (0 without antialias)."""
    if not antialias:
        return 0
    f = math.sqrt(abs(float(np.linalg.det(A)))) / HALF_EXTENT
    return int(min(max_level, max(0, math.floor(math.log2(f))))) if f >= 2.0 else 0


def extract_patches(pyr: Pyramid, c: np.ndarray, A: np.ndarray, antialias: bool = True) -> np.ndarray:
    """Resample frames ``(c [N, 2], A [N, 2, 2])`` of an image to ``uint8 [N, 65, 65]``.

    ``cv2.warpAffine`` of pyramid level ``L`` (:func:`pyramid_level`) with the matrix of
    :func:`patch_warp_matrix` divided by ``2^L``, ``INTER_LINEAR | WARP_INVERSE_MAP``,
    ``BORDER_REFLECT``.
    """
    import cv2

    out = np.empty((len(c), PATCH_SIZE, PATCH_SIZE), dtype=np.uint8)
    max_level = pyr.max_level()
    for i in range(len(c)):
        L = pyramid_level(A[i], antialias, max_level)
        M = patch_warp_matrix(c[i], A[i]) / (2.0**L)
        out[i] = cv2.warpAffine(pyr.level(L), M, (PATCH_SIZE, PATCH_SIZE),
                                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REFLECT)
    return out


# ---------------------------------------------------------------------------------------------
# one sequence


@dataclass
class SequencePatches:
    """The result of :func:`sequence_patches` (nothing written yet).

    ``strips[type]``: ``uint8 [N, 65, 65]``; ``detections``: the N kept reference detections;
    ``jitter [N, 3, 5, 5]``: the parameters (:data:`JITTER_FIELDS`) drawn per (patch, level,
    target image); ``counts``: how many candidates survived each step (for messages).
    """

    sequence: str
    strips: dict[str, np.ndarray]
    detections: Detections
    jitter: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)


def sequence_patches(scene_dir: Path | str, params: PatchGenParams = PatchGenParams()) -> SequencePatches:
    """Compute the 16 strips of one scene folder (HPatches or Oxford sequence layout).

    Steps 1-9 of the module docstring. :class:`DataError` if the scene is incomplete or
    unreadable (:func:`descbench.datasets.layout.scene_files`, ``read_image``,
    ``read_homography``) or if no patch survives (the message gives the count after each step
    and the fix).
    """
    files = scene_files(scene_dir)
    if files.n_images != len(TARGET_IMAGES) + 1 or files.pairs_file is not None:
        raise DataError(f"scene folder {scene_dir} holds {files.n_images} images"
                        + (f" and a {files.pairs_file.name}" if files.pairs_file is not None else "")
                        + f"; HPatches patches are cut from a sequence of exactly {len(TARGET_IMAGES) + 1} images with "
                        f"H_1_2..H_1_{len(TARGET_IMAGES) + 1} (their e/h/t strips 1..5 are images 2..6): evaluate the "
                        "scene with keypoints instead, or give the patch benchmark 6-image sequences")
    images = [read_image(p) for p in files.images]
    homs = {k: read_homography(files.homographies[k]) for k in TARGET_IMAGES}
    h1, w1 = images[0].shape[:2]

    det = detect(images[0])
    counts = {"detected": len(det)}
    A_ref = reference_frames(det.sigma, det.angle, params.magnification)
    inside = frames_inside(det.xy, A_ref, w1, h1)
    det, A_ref = det.take(inside), A_ref[inside]
    counts["reference inside image 1"] = len(det)

    unit = draw_unit_jitter(sequence_rng(files.scene, params.seed), len(det))
    jitter = np.stack([scale_jitter(unit[:, li], params.amplitude(j)) for li, j in enumerate(JITTERS)], axis=1)
    ok = np.ones(len(det), dtype=bool)
    targets: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    for li, j in enumerate(JITTERS):
        for ki, k in enumerate(TARGET_IMAGES):
            c1, A1 = apply_jitter(det.xy, A_ref, jitter[:, li, ki])
            ck, Ak, front = map_frames_through_homography(homs[k], c1, A1)
            hk, wk = images[k - 1].shape[:2]
            ok &= frames_inside(c1, A1, w1, h1) & front & frames_inside(ck, Ak, wk, hk)
            targets[j, k] = ck, Ak
    counts["all jittered frames inside all images"] = int(ok.sum())

    cand = np.flatnonzero(ok)
    cand = cand[suppress_overlapping(det.xy[cand], det.sigma[cand], params.overlap_threshold)]
    counts["after overlap suppression"] = len(cand)

    pyramids = [Pyramid(img) for img in images]
    ref = extract_patches(pyramids[0], det.xy[cand], A_ref[cand], params.antialias)
    contrast = ref.reshape(len(ref), PATCH_SIZE * PATCH_SIZE).std(axis=1) >= params.min_std
    cand, ref = cand[contrast][: params.max_patches], ref[contrast][: params.max_patches]
    counts["with std >= min_std"] = int(contrast.sum())
    if len(cand) == 0:
        steps = ", ".join(f"{k}: {v}" for k, v in counts.items())
        raise DataError(
            f"no patch survives in scene {files.scene} ({Path(scene_dir)}): {steps}. Fix: lower "
            f"'magnification' (now {params.magnification}) or the jitter amplitudes so that the patch support "
            f"fits the images, lower 'min_std' (now {params.min_std}), or remove the scene from the scene list"
        )

    strips = {"ref": ref}
    for j in JITTERS:
        for k in TARGET_IMAGES:
            ck, Ak = targets[j, k]
            strips[source_type(k, j)] = extract_patches(pyramids[k - 1], ck[cand], Ak[cand], params.antialias)
    strips = {t: strips[t] for t in PATCH_TYPES}
    return SequencePatches(files.scene, strips, det.take(cand), jitter[cand], counts)


def provenance(result: SequencePatches, scene_dir: Path | str, params: PatchGenParams) -> dict[str, Any]:
    """The content of ``patches.json`` (see the module docstring); no absolute paths, so equal
    inputs give equal files wherever they live."""
    from descbench.io import versions

    files = scene_files(scene_dir)
    sources = {p.name: file_sha256(p) for p in files.all_paths()}
    d = result.detections
    patches = []
    for i in range(len(d)):
        patches.append({
            "index": i,
            "x": float(d.xy[i, 0]), "y": float(d.xy[i, 1]),
            "sigma": float(d.sigma[i]), "angle": float(d.angle[i]), "response": float(d.response[i]),
            "jitter": {
                source_type(k, j): [float(v) for v in result.jitter[i, li, ki]]
                for li, j in enumerate(JITTERS) for ki, k in enumerate(TARGET_IMAGES)
            },
        })
    return {
        "format": PROVENANCE_FORMAT,
        "sequence": result.sequence,
        "n_patches": len(d),
        "params": params.to_dict(),
        "detector": "opencv-sift (default parameters), sigma = size / 2",
        "frame": "x = c + A q, A = magnification * sigma * R(angle), q = ((u, v) - 32) / 32.5; "
                 "jitter q -> R(rotation_deg) diag(scale_x, scale_y) q + (shift_x, shift_y)",
        "jitter_fields": list(JITTER_FIELDS),
        "counts": result.counts,
        "sources": sources,
        "versions": versions(),
        "patches": patches,
    }


def generate_sequence_patches(scene_dir: Path | str, out_dir: Path | str,
                              params: PatchGenParams = PatchGenParams()) -> int:
    """Write the 16 strips ``<out_dir>/<type>.png`` and ``<out_dir>/patches.json`` of one scene; N.

    ``out_dir`` is the *sequence's* output folder (e.g. ``<patch root>/<scene>``). Every file is
    written atomically; ``patches.json`` last, so its presence marks a complete sequence.
    """
    out_dir = Path(out_dir)
    result = sequence_patches(scene_dir, params)
    out_dir.mkdir(parents=True, exist_ok=True)
    for ptype, patches in result.strips.items():
        write_strip(strip_path(out_dir, ptype), patches)
    # Compact separators: the C encoder (indent= falls back to the slow pure-Python one).
    text = json.dumps(provenance(result, scene_dir, params), sort_keys=True, separators=(",", ":")) + "\n"
    write_bytes_atomic(out_dir / "patches.json", text.encode())
    return len(result.detections)


def generate_patch_dataset(seq_root: Path | str, out_root: Path | str, scenes: Sequence[str],
                           params: PatchGenParams = PatchGenParams()) -> dict[str, int]:
    """Generate ``<out_root>/<scene>/`` for every scene of ``seq_root``; ``{scene: N}``.

    All scene folders are checked first (names only), so a missing or incomplete scene raises
    :class:`DataError` before anything is written. Each sequence depends only on its own folder
    (the RNG is seeded per sequence), so generating a subset gives the same files.
    """
    if isinstance(scenes, str):
        scenes = [scenes]
    seq_root, out_root = Path(seq_root), Path(out_root)
    for scene in scenes:
        scene_files(seq_root / scene)
    return {scene: generate_sequence_patches(seq_root / scene, out_root / scene, params) for scene in scenes}
