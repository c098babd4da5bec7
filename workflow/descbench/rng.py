"""The random-number policy, in one place.

descbench never uses global NumPy state, Python's salted ``hash()`` or the clock for anything that
reaches a result. Every random stream is one of:

* :func:`keyed_rng` — ``numpy.random.default_rng(seed)`` (PCG64) with ``seed`` the first 8 bytes
  of ``SHA-256(key)``, ``key`` a string naming the purpose, the configured seed and the item
  (``"descbench-distractors:<seed>:<scene>"``). The same key gives the same stream on every
  platform, run and Python version, and independent items get independent streams, so a job's
  draws do not depend on which other jobs exist or in what order they run.
* the legacy ``numpy.random.RandomState(seed)`` (MT19937) where a peer's protocol is defined by
  its call sequence (hpatches-benchmark's task generators, :mod:`descbench.patches.hpbench`).
* numba's own MT19937 seeded inside a kernel (``np.random.seed(seed)`` under ``@njit`` seeds only
  numba's per-thread generator, never NumPy's), for draws made inside jitted loops
  (:func:`descbench.metrics.kernels.two_stage_sums`).

The byte order of the 8-byte seed is part of each stream's definition: the distractor streams
were defined big endian, the demo and patch-generation streams little endian. Changing either
would change every published demo number, so both are kept and named.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import numpy as np


def key_seed(key: str, byteorder: Literal["little", "big"] = "little") -> int:
    """The 64-bit seed of ``key``: ``int.from_bytes(SHA-256(key.encode())[:8], byteorder)``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], byteorder)


def keyed_rng(key: str, byteorder: Literal["little", "big"] = "little") -> np.random.Generator:
    """``numpy.random.default_rng(key_seed(key, byteorder))``: the stream of one named purpose."""
    return np.random.default_rng(key_seed(key, byteorder))
