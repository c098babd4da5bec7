"""The offline posed demo: scenes of textured planes rendered exactly from known cameras, written in
glue-factory's ``posed_images`` layout (:mod:`descbench.datasets.posed`), so that every
relative-pose metric can be computed and tested without a download.

A scene is a textured room (a back wall and two side walls) and :data:`N_PLANES` textured
rectangles in front of the back wall at different depths and slants (world units are metres). Each is a planar texture, so its image in
a pinhole camera is the texture warped by one homography (``K [R | t]`` applied to the plane's
parametrisation, :func:`plane_homography`); a pixel's depth on a plane follows in closed form from
the plane's equation in the camera frame (``z = d / (n . K^-1 [x, y, 1])``,
:func:`plane_depth`). The views are rendered by warping every plane
(``cv2.warpPerspective``, bilinear) and keeping, per pixel, the plane nearest the camera (a
z-buffer): the images, the poses and the per-pixel depth are consistent by construction (the
tests reproject pixels through the depth into the other view).

The cameras look at the scene's centre from points on an arc around it, with a small roll, at
distances of 4 to 7 m; a scene's pairs (:func:`scene_pairs`) are every pair of its views, whose
rotations spread from a few to about 60 degrees, so that pose AUCs at 5 / 10 / 20 degrees are
not trivially 1. Pixel coordinates follow descbench's convention in memory (centre of the
top-left pixel at (0, 0)) and COLMAP's in ``views.txt`` (the principal point written + 0.5).
Everything is drawn from a ``numpy`` generator seeded by ``(seed, scene index)``: the same seed
writes the same files (tested byte for byte).

Each view's depth map is written as ``depths/<stem>.png`` in glue-factory's PNG convention
(:func:`descbench.datasets.posed.depth_png`): 16-bit, value = ``round(depth * 256)``, 0 where no
surface is seen, read back by
:func:`descbench.datasets.posed.read_depth` as value / 256. The written depth is therefore quantised
to 1/256 m (within 1/512 m of :func:`render`'s exact depth) and limited to below 256 m (65536 / 256;
the demo's walls are at most about 20 m away). glue-factory's other format, HDF5, would keep the
exact values but needs the optional ``h5py``; the PNG needs nothing beyond OpenCV.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

#: Scenes, views per scene, image size (width, height) and focal length (px) of the demo.
N_SCENES, N_VIEWS, IMAGE_SIZE, FOCAL_PX = 4, 5, (640, 480), 520.0
#: Textured rectangles in front of the backdrop.
N_PLANES = 3
#: Texture resolution (px per metre of plane), about the images' own at the planes' distances from
#: the cameras: the rectangles (4-9 m away) and the walls (8-16 m).
TEXTURE_PX_PER_M, BACKDROP_PX_PER_M = 120, 60


@dataclass(frozen=True)
class Plane:
    """A textured rectangle: ``origin`` [3] (world, metres), in-plane unit axes ``u``, ``v`` [3],
    its size ``(width_m, height_m)`` and its texture (uint8 [th, tw, 3], ``px_per_m`` texture
    pixels per metre) spanning it."""

    origin: np.ndarray
    u: np.ndarray
    v: np.ndarray
    size_m: tuple[float, float]
    texture: np.ndarray
    px_per_m: float

    @property
    def normal(self) -> np.ndarray:
        return np.cross(self.u, self.v)


@dataclass(frozen=True)
class Camera:
    """A view: world-to-camera ``R`` [3, 3] and ``t`` [3], and its intrinsics ``K`` [3, 3] in
    descbench's pixel convention."""

    R: np.ndarray
    t: np.ndarray
    K: np.ndarray


def texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A colour texture with structure at several scales (blurred noise, discs, bars) for detectors
    and descriptors to find."""
    img = np.zeros((height, width, 3), np.float32)
    for sigma, weight in ((12.0, 0.5), (4.0, 0.3), (1.2, 0.2)):
        noise = rng.normal(0.0, 1.0, (height, width, 3)).astype(np.float32)
        blurred = cv2.GaussianBlur(noise, (0, 0), sigma)
        img += weight * blurred / (blurred.std() + 1e-6)
    img = (img - img.min()) / (np.ptp(img) + 1e-6) * 200 + 20
    out = img.astype(np.uint8)
    for _ in range(width * height // 2500):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        if rng.random() < 0.5:
            cv2.circle(out, centre, int(rng.integers(3, 18)), colour, -1, cv2.LINE_AA)
        else:
            end = (centre[0] + int(rng.integers(-30, 30)), centre[1] + int(rng.integers(-30, 30)))
            cv2.line(out, centre, end, colour, int(rng.integers(2, 6)), cv2.LINE_AA)
    return out


def _plane(rng, origin, u, v, size_m, px_per_m: float = TEXTURE_PX_PER_M) -> Plane:
    tw, th = int(size_m[0] * px_per_m), int(size_m[1] * px_per_m)
    return Plane(np.asarray(origin, float), np.asarray(u, float), np.asarray(v, float), size_m, texture(rng, tw, th), px_per_m)


def _rotation(axis_angle) -> np.ndarray:
    return cv2.Rodrigues(np.asarray(axis_angle, dtype=np.float64))[0]


def scene_planes(rng: np.random.Generator) -> list[Plane]:
    """A room open towards the cameras (a back wall 25 x 30 m, 4 m behind the centre, and two side
    walls 12 m to its sides, 14.5 m deep: every camera ray meets a wall) and :data:`N_PLANES`
    rectangles between it and the cameras, each turned about a random axis by about 20 degrees."""
    # the walls overlap by half a metre at the corners: no gap between them
    planes = [_plane(rng, [-12.5, -15.0, 4.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], (25.0, 30.0), BACKDROP_PX_PER_M),
              _plane(rng, [-12.0, -15.0, -10.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], (14.5, 30.0), BACKDROP_PX_PER_M),
              _plane(rng, [12.0, -15.0, 4.5], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0], (14.5, 30.0), BACKDROP_PX_PER_M)]
    for _ in range(N_PLANES):
        R = _rotation(rng.normal(size=3) * np.deg2rad(20.0))
        size = (float(rng.uniform(1.5, 3.0)), float(rng.uniform(1.2, 2.5)))
        centre = np.array([rng.uniform(-2.0, 2.0), rng.uniform(-1.5, 1.5), rng.uniform(-1.5, 2.0)])
        u, v = R[:, 0], R[:, 1]
        planes.append(_plane(rng, centre - u * size[0] / 2 - v * size[1] / 2, u, v, size))
    return planes


def look_at(eye: np.ndarray, target: np.ndarray, roll: float) -> tuple[np.ndarray, np.ndarray]:
    """World-to-camera ``(R, t)`` of a camera at ``eye`` whose optical axis (+z) points at
    ``target``, image y down, turned by ``roll`` radians about its axis."""
    z = target - eye
    z = z / np.linalg.norm(z)
    x = np.cross([0.0, 1.0, 0.0], z)
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    R = _rotation([0.0, 0.0, roll]) @ np.stack([x, y, z])
    return R, -R @ eye


def scene_cameras(rng: np.random.Generator) -> list[Camera]:
    """:data:`N_VIEWS` cameras on an arc of up to 90 degrees around the scene's centre, 4-7 m
    away, up to 1 m above or below it, rolled by up to 8 degrees."""
    w, h = IMAGE_SIZE
    K = np.array([[FOCAL_PX, 0.0, (w - 1) / 2], [0.0, FOCAL_PX, (h - 1) / 2], [0.0, 0.0, 1.0]])
    angles = np.sort(rng.uniform(-45.0, 45.0, N_VIEWS))
    cams = []
    for a in np.deg2rad(angles):
        dist = rng.uniform(4.0, 7.0)
        eye = np.array([dist * np.sin(a), rng.uniform(-1.0, 1.0), -dist * np.cos(a)])
        R, t = look_at(eye, np.array([0.0, 0.0, 0.5]) + rng.normal(scale=0.3, size=3), rng.normal(scale=np.deg2rad(4.0)))
        cams.append(Camera(R, t, K))
    return cams


def plane_homography(plane: Plane, cam: Camera) -> np.ndarray:
    """The homography [3, 3] from the plane's texture pixels (``(i, j)`` at the plane point
    ``origin + u (i + 0.5) / s + v (j + 0.5) / s``, ``s`` = the plane's ``px_per_m``) to the
    camera's pixels."""
    s = plane.px_per_m
    o = plane.origin + (plane.u + plane.v) * (0.5 / s)
    return cam.K @ np.column_stack([cam.R @ plane.u / s, cam.R @ plane.v / s, cam.R @ o + cam.t])


def plane_depth(plane: Plane, cam: Camera, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The depth (camera z, metres) of the plane's (infinite) surface at pixels ``(xs, ys)``; inf
    where the ray runs parallel to it or meets it behind the camera."""
    n = cam.R @ plane.normal
    d = float(n @ (cam.R @ plane.origin + cam.t))  # the plane: n . X = d in the camera frame
    Kinv = np.linalg.inv(cam.K)
    rays = Kinv[0, 0] * xs + Kinv[0, 2], Kinv[1, 1] * ys + Kinv[1, 2]
    denom = n[0] * rays[0] + n[1] * rays[1] + n[2]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = d / denom
    return np.where(np.isfinite(z) & (z > 0), z, np.inf)


def render(planes: list[Plane], cam: Camera) -> tuple[np.ndarray, np.ndarray]:
    """``(image uint8 [h, w, 3] BGR, depth float64 [h, w])``: every plane warped into the view, the
    nearest one kept per pixel (module docstring); depth inf where no plane is seen."""
    w, h = IMAGE_SIZE
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    image = np.zeros((h, w, 3), np.uint8)
    depth = np.full((h, w), np.inf)
    for plane in planes:
        H = plane_homography(plane, cam)
        th, tw = plane.texture.shape[:2]
        warped = cv2.warpPerspective(plane.texture, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        # inside the rectangle: the pixel's texture coordinates (inverse homography) within it
        q = np.linalg.inv(H) @ np.stack([xs.ravel(), ys.ravel(), np.ones(w * h)])
        with np.errstate(divide="ignore", invalid="ignore"):
            ti, tj = (q[0] / q[2]).reshape(h, w), (q[1] / q[2]).reshape(h, w)
        z = plane_depth(plane, cam, xs, ys)
        inside = (ti >= 0) & (ti <= tw - 1) & (tj >= 0) & (tj <= th - 1) & np.isfinite(z)
        nearer = inside & (z < depth)
        image[nearer] = warped[nearer]
        depth[nearer] = z[nearer]
    return image, depth


def scene_pairs(n_views: int = N_VIEWS) -> list[tuple[int, int]]:
    """Every pair (i, j), i < j, of a scene's views."""
    return [(i, j) for i in range(n_views) for j in range(i + 1, n_views)]


def view_name(k: int) -> str:
    return f"{k}.png"


def views_line(name: str, cam: Camera) -> str:
    """``views.txt``'s line of a view: the pose, a PINHOLE camera in COLMAP's convention
    (principal point + 0.5), full float precision (``repr``)."""
    w, h = IMAGE_SIZE
    K = cam.K
    params = (K[0, 0], K[1, 1], K[0, 2] + 0.5, K[1, 2] + 0.5)
    return " ".join([name, *(repr(float(x)) for x in cam.R.ravel()), *(repr(float(x)) for x in cam.t), "PINHOLE",
                     str(w), str(h), *(repr(float(p)) for p in params)])


def scene_name(index: int) -> str:
    return f"posed_{index:02d}"


def make_scene(index: int, seed: int = 0) -> tuple[list[Plane], list[Camera]]:
    """The planes and cameras of demo scene ``index`` (seeded by ``(seed, index)``)."""
    rng = np.random.default_rng([seed, index])
    return scene_planes(rng), scene_cameras(rng)


def write_scene(root: Path, index: int, seed: int = 0) -> Path:
    """Render demo scene ``index`` and write it to ``root/<scene name>`` in the posed layout
    (images as PNG, depth maps as 16-bit PNG (:func:`descbench.datasets.posed.depth_png`),
    ``views.txt``, ``pairs.txt``; ``pairs.txt`` last, so a scene folder with it is complete). Returns the scene folder."""
    from descbench.datasets.posed import DEPTH_DIR, IMAGE_DIR, PAIRS_FILE, VIEWS_FILE, depth_png
    from descbench.fileops import write_text_atomic

    planes, cams = make_scene(index, seed)
    folder = Path(root) / scene_name(index)
    (folder / IMAGE_DIR).mkdir(parents=True, exist_ok=True)
    (folder / DEPTH_DIR).mkdir(parents=True, exist_ok=True)
    lines = []
    for k, cam in enumerate(cams):
        image, depth = render(planes, cam)
        # glue-factory's get_depth_path: the name's part before its first dot
        depth_file = folder / DEPTH_DIR / f"{view_name(k).split('.')[0]}.png"
        for path, pixels in ((folder / IMAGE_DIR / view_name(k), image), (depth_file, depth_png(depth))):
            if not cv2.imwrite(str(path), pixels):
                raise OSError(f"could not write {path}")
        lines.append(views_line(view_name(k), cam))
    write_text_atomic(folder / VIEWS_FILE, "\n".join(lines) + "\n")
    write_text_atomic(folder / PAIRS_FILE, "".join(f"{view_name(i)} {view_name(j)}\n" for i, j in scene_pairs(len(cams))))
    return folder


def scene_paths(folder: Path) -> list[Path]:
    """The files :func:`write_scene` writes into a scene ``folder`` (the workflow rule's outputs):
    the images, their depth maps, ``views.txt`` and ``pairs.txt``."""
    from descbench.datasets.posed import DEPTH_DIR, IMAGE_DIR, PAIRS_FILE, VIEWS_FILE

    folder = Path(folder)
    return [*(folder / IMAGE_DIR / view_name(k) for k in range(N_VIEWS)),
            *(folder / DEPTH_DIR / f"{view_name(k).split('.')[0]}.png" for k in range(N_VIEWS)), folder / VIEWS_FILE,
            folder / PAIRS_FILE]
