"""Detection mode ``projected`` (protocols section 2): keypoints of image 1 mapped into image k.

For a keypoint at ``q = (x, y)`` with size ``s`` and angle ``a`` and the homography ``H = H_1_k``:

- position ``p = (h1 / h3, h2 / h3)`` with ``h = H [x, y, 1]^T`` (a point with ``h3 <= 0`` maps
  behind the camera and is dropped);
- the local Jacobian of the map at q, ``J = (1 / h3) [[H11 - u H31, H12 - u H32],
  [H21 - v H31, H22 - v H32]]`` with ``(u, v) = p``;
- size ``s' = s sqrt|det J|`` (the local area scale's square root);
- angle: OpenCV's angle is the direction ``d = (cos a, sin a)`` in image coordinates (x right,
  y down, degrees); ``a' = atan2((J d)_y, (J d)_x)`` in [0, 360). An undefined angle (-1, e.g.
  FAST/GFTT) stays -1.

Then image k's keypoints are border-filtered in image k's own size (the one border rule,
:func:`descbench.keypoints.border_mask`). ``response`` and ``class_id`` are copied;
``source_index`` is the keypoint's row in image 1's (filtered) set, so every projected keypoint
names its origin. ``octave`` keeps image 1's value except for SIFT, whose packed octave must
describe the new size: it is derived from it (:func:`descbench.keypoints.sift.sift_octave_from_size`).
"""

from __future__ import annotations

import numpy as np

from descbench.keypoints import ImageKeypoints, border_mask


def homography_jacobian(H: np.ndarray, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, J, front)``: mapped points [N, 2], the map's Jacobians [N, 2, 2] at ``xy`` and whether
    the point lies in front of the camera (``h3 > 0``); all float64."""
    H = np.asarray(H, dtype=np.float64)
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    h = np.column_stack([xy, np.ones(len(xy))]) @ H.T
    w = h[:, 2]
    front = w > 0
    w_safe = np.where(front, w, 1.0)
    p = h[:, :2] / w_safe[:, None]
    J = np.empty((len(xy), 2, 2))
    for r in range(2):
        J[:, r, 0] = (H[r, 0] - p[:, r] * H[2, 0]) / w_safe
        J[:, r, 1] = (H[r, 1] - p[:, r] * H[2, 1]) / w_safe
    return p, J, front


def map_frames(H: np.ndarray, xy: np.ndarray, angle: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keypoint frames mapped through H: (angle in degrees [0, 360), size), float64, per point.

    With ``(a, b, w) = H [x, y, 1]`` and ``(u, v) = (a/w, b/w)``, the Jacobian is
    ``J = [[h00 - u h20, h01 - u h21], [h10 - v h20, h11 - v h21]] / w``; the angle (OpenCV
    convention: degrees, image coordinates, direction ``(cos, sin)``) maps to the direction of
    ``J (cos, sin)`` and the size to ``size * sqrt|det J|``. An undefined angle (< 0, e.g. GFTT,
    FAST) stays -1. The one definition: the projected detection mode and the ``closest_oriented``
    ground truth (:mod:`descbench.metrics.retrieval`) both use it.
    """
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    H = np.asarray(H, dtype=np.float64)
    x, y = xy[:, 0], xy[:, 1]
    a = H[0, 0] * x + H[0, 1] * y + H[0, 2]
    b = H[1, 0] * x + H[1, 1] * y + H[1, 2]
    w = H[2, 0] * x + H[2, 1] * y + H[2, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = a / w, b / w
        j00, j01 = (H[0, 0] - u * H[2, 0]) / w, (H[0, 1] - u * H[2, 1]) / w
        j10, j11 = (H[1, 0] - v * H[2, 0]) / w, (H[1, 1] - v * H[2, 1]) / w
        th = np.deg2rad(np.asarray(angle, dtype=np.float64))
        c, s = np.cos(th), np.sin(th)
        ang = np.rad2deg(np.arctan2(j10 * c + j11 * s, j00 * c + j01 * s)) % 360.0
        out_size = np.asarray(size, dtype=np.float64) * np.sqrt(np.abs(j00 * j11 - j01 * j10))
    ang = np.where(np.asarray(angle) < 0, -1.0, ang)
    return ang, out_size


def project_keypoints(kps: ImageKeypoints, H: np.ndarray, width: int, height: int, border_px: float,
                      sift_octave: bool = False, upper_inclusive: bool = False) -> ImageKeypoints:
    """Image 1's keypoints ``kps`` as seen in image k (``H = H_1_k``, image k of ``width`` x ``height``)."""
    p, _, front = homography_jacobian(H, kps.xy)
    angle, size = map_frames(H, kps.xy, kps.angle, kps.size)
    angle = np.where(angle >= np.float32(360.0), 0.0, angle)  # 359.99999... rounds to 360 in float32
    size = np.where(front, size, 0.0).astype(np.float32)  # behind the camera: dropped below
    x, y = p[:, 0].astype(np.float32), p[:, 1].astype(np.float32)
    if sift_octave:
        from descbench.keypoints.sift import sift_octave_from_size

        octave = sift_octave_from_size(size, (height, width)).astype(np.int32)
    else:
        octave = kps.octave
    out = ImageKeypoints(x=x, y=y, size=size, angle=angle.astype(np.float32), response=kps.response,
                         octave=octave, class_id=kps.class_id, source_index=np.arange(len(kps), dtype=np.int32))
    keep = front & np.isfinite(x) & np.isfinite(y) & (size > 0) & border_mask(x, y, width, height, border_px, upper_inclusive)
    return out.take(np.flatnonzero(keep))
