"""Python-family callables that misbehave, for tests/descbench/test_config_bad_input.py."""

import numpy as np


def raises(image, keypoints):
    raise ValueError("model weights not loaded")


def fixed(image, keypoints, scale=1.0):
    """A float descriptor: the grey value at each keypoint and its position, times ``scale``."""
    h, w = image.shape[:2]
    x = np.clip(np.rint(keypoints.x).astype(int), 0, w - 1)
    y = np.clip(np.rint(keypoints.y).astype(int), 0, h - 1)
    return scale * np.stack([image[y, x].astype(np.float32), keypoints.x, keypoints.y], axis=1)


def needs_model(image, keypoints, model):
    return fixed(image, keypoints)


def any_kwargs(image, keypoints, **kwargs):
    return fixed(image, keypoints)


def zero_dim(image, keypoints):
    return np.zeros((len(keypoints), 0), np.float32)


def raw_uint8(image, keypoints):
    """The 3 x 3 grey values around each keypoint as uint8: 8-bit values, not packed bits."""
    h, w = image.shape[:2]
    offs = np.arange(-1, 2)
    xs = np.clip(np.rint(keypoints.x).astype(int)[:, None] + offs, 0, w - 1)
    ys = np.clip(np.rint(keypoints.y).astype(int)[:, None] + offs, 0, h - 1)
    return image[ys[:, :, None], xs[:, None, :]].reshape(len(keypoints), -1)
