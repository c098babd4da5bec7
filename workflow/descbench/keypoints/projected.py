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


def project_keypoints(kps: ImageKeypoints, H: np.ndarray, width: int, height: int, border_px: float,
                      sift_octave: bool = False) -> ImageKeypoints:
    """Image 1's keypoints ``kps`` as seen in image k (``H = H_1_k``, image k of ``width`` x ``height``)."""
    p, J, front = homography_jacobian(H, kps.xy)
    scale = np.sqrt(np.abs(np.linalg.det(J))) if len(kps) else np.zeros(0)
    a = np.deg2rad(kps.angle.astype(np.float64))
    d = np.einsum("nij,nj->ni", J, np.stack([np.cos(a), np.sin(a)], axis=1)) if len(kps) else np.zeros((0, 2))
    angle = np.mod(np.rad2deg(np.arctan2(d[:, 1], d[:, 0])), 360.0)
    angle = np.where(angle >= np.float32(360.0), 0.0, angle)  # 359.99999... rounds to 360 in float32
    angle = np.where(kps.angle < 0, -1.0, angle)
    size = (kps.size * scale).astype(np.float32)
    x, y = p[:, 0].astype(np.float32), p[:, 1].astype(np.float32)
    if sift_octave:
        from descbench.keypoints.sift import sift_octave_from_size

        octave = sift_octave_from_size(size, (height, width)).astype(np.int32)
    else:
        octave = kps.octave
    out = ImageKeypoints(x=x, y=y, size=size, angle=angle.astype(np.float32), response=kps.response,
                         octave=octave, class_id=kps.class_id, source_index=np.arange(len(kps), dtype=np.int32))
    keep = front & np.isfinite(x) & np.isfinite(y) & (size > 0) & border_mask(x, y, width, height, border_px)
    return out.take(np.flatnonzero(keep))
