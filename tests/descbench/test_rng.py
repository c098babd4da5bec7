"""descbench.rng: the one RNG-policy module (a generator per key, seeded by the key's sha256)."""

from __future__ import annotations

import hashlib

import numpy as np

from descbench.rng import key_seed, keyed_rng


def test_keyed_rng_is_default_rng_of_the_keys_digest():
    key = "descbench-distractors:0:v_coins"
    digest = hashlib.sha256(key.encode()).digest()
    assert key_seed(key, "big") == int.from_bytes(digest[:8], "big")
    assert key_seed(key) == int.from_bytes(digest[:8], "little")
    np.testing.assert_array_equal(keyed_rng(key, "big").random(5), np.random.default_rng(int.from_bytes(digest[:8], "big")).random(5))
    assert not np.array_equal(keyed_rng(key, "big").random(5), keyed_rng(key, "little").random(5))
    assert not np.array_equal(keyed_rng(key).random(5), keyed_rng(key + "x").random(5))


def test_the_streams_keep_their_published_definitions():
    """The distractor (big endian) and demo / patch (little endian) streams are the ones their
    module docstrings define: changing a key or byte order would move every demo number."""
    from descbench.datasets.demo import scene_rng as demo_rng
    from descbench.metrics.distractors import scene_rng as distractor_rng
    from descbench.patches.generate import sequence_rng

    def ref(key, order):
        return np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], order)).random(4)

    np.testing.assert_array_equal(distractor_rng(3, "v_a").random(4), ref("descbench-distractors:3:v_a", "big"))
    np.testing.assert_array_equal(demo_rng("v_a", 3).random(4), ref("3:v_a", "little"))
    np.testing.assert_array_equal(sequence_rng("v_a", 3).random(4), ref("descbench.patches:3:v_a", "little"))
