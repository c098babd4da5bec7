"""Keypoint sets: detection per image, the border rule and the response cap.

A scene's keypoints are one table (see :mod:`descbench.io`, schema ``keypoints``) with one row
per keypoint, ordered by (image, detector order); ``source_index`` is the keypoint's index in
the detector's raw output, so descriptors read from files (precomputed) stay row-aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ImageKeypoints:
    """Keypoints of one image (OpenCV conventions: x right, y down, pixel centres at integers)."""

    x: np.ndarray  # float32 [N]
    y: np.ndarray  # float32 [N]
    size: np.ndarray  # float32 [N], diameter in pixels (OpenCV KeyPoint.size)
    angle: np.ndarray  # float32 [N], degrees, -1 if not defined
    response: np.ndarray  # float32 [N]
    octave: np.ndarray  # int32 [N], OpenCV's packed octave/layer field
    class_id: np.ndarray  # int32 [N], OpenCV KeyPoint.class_id (-1 unless a tool set it)
    source_index: np.ndarray  # int32 [N], index in the detector's raw output

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def take(self, idx: np.ndarray) -> "ImageKeypoints":
        return ImageKeypoints(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    @property
    def xy(self) -> np.ndarray:
        """float64 [N, 2] positions, the precision all geometry is done in."""
        return np.stack([self.x, self.y], axis=1).astype(np.float64)


BORDER_UPPER = ("exclusive", "inclusive")


def border_upper_inclusive(spec: dict) -> bool:
    """A keypoint set's ``border_upper`` (absent: ``exclusive``, the protocol's rule;
    ``inclusive``: the C++ DescriptorWorkbench's KeyNet script, ``b <= x <= W - b``)."""
    return spec.get("border_upper", "exclusive") == "inclusive"


def border_mask(x: np.ndarray, y: np.ndarray, width: int, height: int, border_px: float,
                upper_inclusive: bool = False) -> np.ndarray:
    """The border rule (protocols section 2), the only one used anywhere.

    keep iff ``b <= x < W - b`` and ``b <= y < H - b`` with ``b = border_px`` and W, H the size of
    the image the keypoint lives in. ``upper_inclusive`` (a set's ``border_upper: inclusive``):
    ``b <= x <= W - b`` and ``b <= y <= H - b``, as the workbench's KeyNet script keeps them (its
    sets then hold the 0-5 keypoints per image that lie exactly on ``W - b`` or ``H - b``). The
    protocol's rule stays the default.
    """
    # Compared in float64: float32 coordinates against a Python-float border would otherwise be
    # compared in float32 (NumPy 2's scalar rules), keeping x = float32(0.7) < 0.7 for b = 0.7.
    b = float(border_px)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if upper_inclusive:
        return (x >= b) & (x <= width - b) & (y >= b) & (y <= height - b)
    return (x >= b) & (x < width - b) & (y >= b) & (y < height - b)


def top_by_response(response: np.ndarray, max_keypoints: int | None) -> np.ndarray:
    """Indices of the ``max_keypoints`` highest responses, returned in ascending index order.

    Ties in response keep the lower index (stable sort), so the cap is deterministic.
    """
    n = response.shape[0]
    if max_keypoints is None or n <= max_keypoints:
        return np.arange(n)
    order = np.argsort(-response.astype(np.float64), kind="stable")[:max_keypoints]
    return np.sort(order)


def filter_keypoints(kps: ImageKeypoints, width: int, height: int, border_px: float, max_keypoints: int | None,
                     upper_inclusive: bool = False) -> ImageKeypoints:
    """Border filter first (:func:`border_mask`), then the response cap (protocols section 2, 'Caps')."""
    kept = kps.take(np.flatnonzero(border_mask(kps.x, kps.y, width, height, border_px, upper_inclusive)))
    return kept.take(top_by_response(kept.response, max_keypoints))
