"""Image pairs and their ground-truth geometry: what every scoring task evaluates.

A scene holds images ``1..n``; a dataset lists, per scene, the pairs ``(a, b)`` to evaluate, each
with the geometry that relates image ``a`` (the query side: its keypoints are the queries) to
image ``b`` (the target side). Two kinds of geometry are modelled:

- :class:`Homography`: ``p_b ~ H [x_a, y_a, 1]^T`` in pixels (a planar scene or a pure rotation:
  HPatches, Oxford, the demo, folder datasets). Every metric implemented today reads this one.
- :class:`RelativePose`: a calibrated relative pose (intrinsics of both images, rotation and
  translation from camera a to camera b), for posed image pairs of non-planar scenes
  (:mod:`descbench.datasets.posed`; read by the pose task, :mod:`descbench.tasks.pose`). A task
  that needs a homography refuses it by name.

Pure: no file is read here (:mod:`descbench.datasets.layout` reads the files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

import numpy as np

from descbench.errors import DataError


@dataclass(frozen=True, eq=False)
class Homography:
    """Image a -> image b in pixels: ``p_b ~ H [x_a, y_a, 1]^T``, float64 with ``H[2, 2] == 1``."""

    H: np.ndarray
    kind: ClassVar[str] = "homography"


@dataclass(frozen=True, eq=False)
class RelativePose:
    """A calibrated relative pose: a 3-D point ``X_a`` in camera a's frame is ``R X_a + t`` in camera
    b's frame; pixels are ``K_a X_a`` and ``K_b (R X_a + t)`` up to scale, in the pixel convention
    whose top-left pixel centre is ``(pixel_offset, pixel_offset)``: 0.5 for COLMAP's cameras
    (posed datasets), 0 for descbench's keypoints, which are shifted by ``pixel_offset`` before
    ``K`` applies (:func:`descbench.metrics.pose.normalized_points`)."""

    K_a: np.ndarray
    K_b: np.ndarray
    R: np.ndarray
    t: np.ndarray
    pixel_offset: float = 0.0
    kind: ClassVar[str] = "relative_pose"


Geometry = Union[Homography, RelativePose]


@dataclass(frozen=True, eq=False)
class Pair:
    """One evaluated pair of a scene: query image ``a``, target image ``b`` (1-based, ``a != b``)
    and the geometry from a to b."""

    a: int
    b: int
    geometry: Geometry

    def homography(self, what: str = "this task") -> np.ndarray:
        """The pair's homography matrix; DataError naming ``what`` for any other geometry."""
        if not isinstance(self.geometry, Homography):
            raise DataError(f"pair ({self.a}, {self.b}) has a {self.geometry.kind} geometry, but {what} needs a "
                            "homography; evaluate this dataset with the tasks that read its geometry")
        return self.geometry.H

    def relative_pose(self, what: str = "this task") -> RelativePose:
        """The pair's calibrated relative pose; DataError naming ``what`` for any other geometry."""
        if not isinstance(self.geometry, RelativePose):
            raise DataError(f"pair ({self.a}, {self.b}) has a {self.geometry.kind} geometry, but {what} needs a "
                            "calibrated relative pose (a posed dataset)")
        return self.geometry


def compose_homography(H_1a: np.ndarray, H_1b: np.ndarray, where: str = "") -> np.ndarray:
    """``H_ab = H_1b H_1a^-1`` (image a -> image 1 -> image b), normalised to ``H[2, 2] == 1``.

    Both inputs map image 1 to image a / b (``p_k ~ H_1k p_1``), so a pixel of image a goes back to
    image 1 through ``H_1a^-1`` and on to image b through ``H_1b``. ``where`` names the source
    files in the error raised when the product sends pixel (0, 0) to infinity (``H[2, 2] == 0``)."""
    H = np.asarray(H_1b, np.float64) @ np.linalg.inv(np.asarray(H_1a, np.float64))
    if not np.all(np.isfinite(H)) or H[2, 2] == 0.0:
        raise DataError(f"the homography composed from {where or 'H_1_a and H_1_b'} maps pixel (0, 0) to infinity "
                        "(H[2,2] == 0 after composing); give the pair its own homography file in pairs.txt")
    return H / H[2, 2]
