"""The bundled offline demo dataset, generated in the HPatches sequence layout.

The demo is the default dataset of the workflow: it needs no download and is small enough
that evaluating every scene takes a couple of minutes on two cores, yet it is built from
real photographs so that descriptors see realistic texture.

Where the images come from
    Every scene starts from one of the photographs bundled with scikit-image
    (:mod:`skimage.data`, available offline): ``astronaut``, ``coffee``, ``rocket``,
    ``brick``, ``chelsea``, ``camera``, ``coins`` and ``immunohistochemistry``. RGB(A)
    sources are converted to BGR (alpha dropped), grayscale sources are replicated to 3-channel
    BGR, and a source whose longer side exceeds :data:`MAX_SIDE` pixels is shrunk with
    ``cv2.INTER_AREA``. Image ``1`` of a scene is that photograph, unmodified.

How the other images are drawn
    * ``v_*`` (viewpoint) scenes: image ``k`` (k = 2..6) is image 1 warped by a random
      homography ``H_1_k`` (``cv2.warpPerspective``, bilinear, black border, same size as
      image 1), plus mild Gaussian noise (sigma = :data:`NOISE_SIGMA` grey levels). ``H_1_k``
      is a rotation (up to ``(k-1) * 2`` degrees) and isotropic scale (up to
      ``+-(k-1) * 3 %``) about the image centre, followed by an independent random shift of
      each of the four image corners by up to ``(k-1) * 4 %`` of the image width/height; the
      matrix is the ``cv2.getPerspectiveTransform`` of the original corners to the moved ones.
      Draws whose warped image covers less than :data:`MIN_COVERAGE` of the frame, whose
      corner quadrilateral is not convex, or which are ill-conditioned are rejected and
      re-drawn, so the severity grows with ``k`` but stays bounded.
    * ``i_*`` (illumination) scenes: ``H_1_k`` is the identity and image ``k`` is a
      photometric change of image 1 whose strength ``t = (k-1)/5`` grows with ``k``: a gamma
      ``exp(+-0.35 t)``, a global brightness gain ``exp(+-0.5 t)`` (darker or brighter, drawn
      per image), a per-channel colour cast ``exp(+-0.15 t)``, an offset of ``+-12 t`` grey
      levels and the same mild Gaussian noise, clipped to ``uint8``.

    Homographies follow the HPatches convention: ``p_k ~ H_1_k [x, y, 1]^T`` maps pixel
    coordinates of image 1 to image ``k``.

Determinism
    All randomness comes from ``numpy.random.default_rng`` seeded with a stable hash of
    ``(seed, scene)`` (the first 8 bytes of ``sha256(f"{seed}:{scene}")``, never Python's
    salted ``hash()``), so the same seed produces byte-identical files on every run and every
    machine running the same OpenCV build. Every file is written atomically (temporary file in
    the same folder, then ``os.replace``), so an interrupted run never leaves a half-written
    file under its final name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from descbench.datasets.hpatches import N_IMAGES
from descbench.datasets.layout import write_homography
from descbench.errors import ConfigError
from descbench.fileops import write_bytes_atomic
from descbench.rng import keyed_rng

#: Scene name -> name of the :mod:`skimage.data` photograph it is generated from.
_SOURCES: dict[str, str] = {
    "i_astronaut": "astronaut",
    "i_coffee": "coffee",
    "i_rocket": "rocket",
    "i_brick": "brick",
    "v_chelsea": "chelsea",
    "v_camera": "camera",
    "v_coins": "coins",
    "v_immuno": "immunohistochemistry",
}

#: The 8 demo scenes: 4 illumination (``i_*``) and 4 viewpoint (``v_*``) sequences.
DEMO_SCENES: tuple[str, ...] = tuple(_SOURCES)

#: Longer image side, in pixels, above which a source photograph is shrunk.
MAX_SIDE = 640
#: Standard deviation (grey levels) of the Gaussian noise added to images 2..6.
NOISE_SIGMA = 2.0
#: Minimum fraction of the frame a warped viewpoint image must cover.
MIN_COVERAGE = 0.6
#: Maximum condition number of a homography expressed in unit-square coordinates.
MAX_COND = 50.0
_MAX_DRAWS = 100


def _check_scene(scene: str) -> None:
    if scene not in _SOURCES:
        raise ConfigError(
            f"unknown demo scene {scene!r}; valid demo scenes are: {', '.join(DEMO_SCENES)} "
            "(fix the scene list in the config)"
        )


def scene_rng(scene: str, seed: int = 0) -> np.random.Generator:
    """The RNG of a scene: seeded from ``sha256(f"{seed}:{scene}")`` (stable across runs)."""
    return keyed_rng(f"{seed}:{scene}", "little")


def source_image(scene: str) -> np.ndarray:
    """Image 1 of a demo scene: its scikit-image photograph as a BGR ``uint8`` array."""
    import cv2
    import skimage.data

    _check_scene(scene)
    loader: Callable[[], np.ndarray] = getattr(skimage.data, _SOURCES[scene])
    img = np.asarray(loader())
    if img.dtype != np.uint8:
        raise ValueError(f"skimage.data.{_SOURCES[scene]} is {img.dtype}, expected uint8")
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    else:
        img = cv2.cvtColor(np.ascontiguousarray(img[..., :3]), cv2.COLOR_RGB2BGR)
    h, w = img.shape[:2]
    if max(h, w) > MAX_SIDE:
        f = MAX_SIDE / max(h, w)
        size = (max(1, round(w * f)), max(1, round(h * f)))
        img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(img)


def _add_noise(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noisy = img.astype(np.float64) + rng.normal(0.0, NOISE_SIGMA, size=img.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def _is_convex(quad: np.ndarray) -> bool:
    """True if the 4 points (in order) form a strictly convex quadrilateral."""
    crosses = []
    for i in range(4):
        a, b, c = quad[i], quad[(i + 1) % 4], quad[(i + 2) % 4]
        crosses.append((b[0] - a[0]) * (c[1] - b[1]) - (b[1] - a[1]) * (c[0] - b[0]))
    crosses = np.asarray(crosses)
    return bool(np.all(crosses > 0) or np.all(crosses < 0))


def _random_homography(w: int, h: int, k: int, rng: np.random.Generator, n_images: int = N_IMAGES) -> np.ndarray:
    """A random homography of severity growing with ``k`` up to ``n_images`` (see the module docstring)."""
    import cv2

    s = (k - 1) / (n_images - 1)  # 0.2 .. 1 for 6 images
    src = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], dtype=np.float64)
    centre = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
    size = np.array([w, h], dtype=np.float64)
    T = np.diag([1.0 / w, 1.0 / h, 1.0])  # pixel -> unit-square coordinates
    mask = np.full((h, w), 255, np.uint8)
    for _ in range(_MAX_DRAWS):
        angle = np.deg2rad(rng.uniform(-1.0, 1.0) * 10.0 * s)
        scale = 1.0 + rng.uniform(-1.0, 1.0) * 0.15 * s
        R = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        shift = rng.uniform(-1.0, 1.0, size=(4, 2)) * 0.20 * s * size
        dst = (src - centre) @ R.T + centre + shift
        if not _is_convex(dst):
            continue
        H = cv2.getPerspectiveTransform(src.astype(np.float32), dst.astype(np.float32))
        H = np.asarray(H, dtype=np.float64)
        H /= H[2, 2]
        if not np.all(np.isfinite(H)) or np.linalg.cond(T @ H @ np.linalg.inv(T)) > MAX_COND:
            continue
        # Projective depth must stay positive over the whole image (no point at infinity).
        hom = np.c_[src, np.ones(4)] @ H.T
        if np.any(hom[:, 2] <= 0):
            continue
        covered = cv2.warpPerspective(mask, H, (w, h), flags=cv2.INTER_NEAREST, borderValue=0)
        if np.count_nonzero(covered) >= MIN_COVERAGE * w * h:
            return H
    raise RuntimeError(f"could not draw an acceptable homography for image {k} in {_MAX_DRAWS} draws")


def _warp(img: np.ndarray, H: np.ndarray) -> np.ndarray:
    import cv2

    h, w = img.shape[:2]
    return cv2.warpPerspective(
        img, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0
    )


def _photometric(img: np.ndarray, k: int, rng: np.random.Generator, n_images: int = N_IMAGES) -> np.ndarray:
    """A photometric change of strength growing with ``k`` up to ``n_images`` (see the module docstring)."""
    t = (k - 1) / (n_images - 1)  # 0.2 .. 1 for 6 images
    gamma = np.exp(rng.uniform(-1.0, 1.0) * 0.35 * t)
    direction = 1.0 if rng.random() < 0.5 else -1.0
    brightness = np.exp(direction * rng.uniform(0.5, 1.0) * 0.5 * t)
    cast = np.exp(rng.uniform(-1.0, 1.0, size=3) * 0.15 * t)  # per BGR channel
    offset = rng.uniform(-1.0, 1.0) * 12.0 * t
    x = (img.astype(np.float64) / 255.0) ** gamma
    x = x * (brightness * cast) * 255.0 + offset
    return _add_noise(np.clip(x, 0.0, 255.0), rng)


def _write_image(path: Path, img: np.ndarray) -> None:
    import cv2

    ok, buf = cv2.imencode(".ppm", img)
    if not ok:
        raise RuntimeError(f"OpenCV could not encode {path} as PPM")
    write_bytes_atomic(path, buf.tobytes())


def generate_scene(scene: str, out_dir: Path, seed: int = 0, n_images: int = N_IMAGES) -> None:
    """Write demo scene ``scene`` to ``out_dir/<scene>/`` (``1.ppm..6.ppm``, ``H_1_2..H_1_6``).

    ``n_images``: the scene's length (the demo dataset's scenes have HPatches' 6; a longer scene
    is what tests of folder datasets with other lengths build; severity still grows to the last).

    Image 1 is the scikit-image photograph; images 2..6 are random homographic warps
    (``v_*``) or photometric changes (``i_*``, identity homographies) of growing severity,
    drawn from an RNG seeded by ``sha256(f"{seed}:{scene}")``: the same ``seed`` always
    gives byte-identical files. Each file is written atomically. Raises
    :class:`~descbench.errors.ConfigError` for a scene name not in :data:`DEMO_SCENES`.
    """
    _check_scene(scene)
    rng = scene_rng(scene, seed)
    img1 = source_image(scene)
    h, w = img1.shape[:2]
    scene_dir = Path(out_dir) / scene
    scene_dir.mkdir(parents=True, exist_ok=True)
    _write_image(scene_dir / "1.ppm", img1)
    if n_images < 2:
        raise ConfigError(f"a demo scene needs at least 2 images, not {n_images}")
    for k in range(2, n_images + 1):
        if scene.startswith("v_"):
            H = _random_homography(w, h, k, rng, n_images)
            img = _add_noise(_warp(img1, H), rng)
        else:
            H = np.eye(3)
            img = _photometric(img1, k, rng, n_images)
        _write_image(scene_dir / f"{k}.ppm", img)
        write_homography(scene_dir / f"H_1_{k}", H)


def generate_demo(out_dir: Path, scenes: Sequence[str] = DEMO_SCENES, seed: int = 0) -> None:
    """Generate every scene of ``scenes`` (default: all :data:`DEMO_SCENES`) under ``out_dir``.

    All names are validated first, so an unknown name raises
    :class:`~descbench.errors.ConfigError` before anything is written.
    """
    if isinstance(scenes, str):
        scenes = [scenes]
    for scene in scenes:
        _check_scene(scene)
    for scene in scenes:
        generate_scene(scene, out_dir, seed=seed)
