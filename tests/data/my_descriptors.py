"""Example user descriptors for tests and README (kept importable by tests via sys.path)."""

import numpy as np


def mean_patch(image, keypoints, radius=4):
    """Float descriptor: the (2r+1)^2 grey values around each keypoint (clamped at the border), zero-mean."""
    h, w = image.shape[:2]
    offs = np.arange(-radius, radius + 1)
    xs = np.clip(np.rint(keypoints.x).astype(int)[:, None] + offs[None, :], 0, w - 1)
    ys = np.clip(np.rint(keypoints.y).astype(int)[:, None] + offs[None, :], 0, h - 1)
    patch = image[ys[:, :, None], xs[:, None, :]].reshape(len(keypoints), -1).astype(np.float32)
    return patch - patch.mean(axis=1, keepdims=True)


def sign_bits(image, keypoints, radius=4):
    """Binary descriptor: packed bits of (pixel > patch mean)."""
    d = mean_patch(image, keypoints, radius)
    return np.packbits(d > 0, axis=1)


def drops_one(image, keypoints):
    return np.zeros((max(len(keypoints) - 1, 0), 8), np.float32)


def flat(image, keypoints):
    return np.zeros(len(keypoints), np.float32)


def not_an_array(image, keypoints):
    return [[0.0]] * len(keypoints)


def waits_for_file(image, keypoints, hold=""):
    """mean_patch, but first waits while the file ``hold`` exists (to kill a run mid-job in tests)."""
    import os
    import time

    while hold and os.path.exists(hold):
        time.sleep(0.1)
    return mean_patch(image, keypoints)
