"""Distractor sampling for keypoint verification and keypoint retrieval (protocols section 4).

For a scene s, the distractors are keypoints of *other* scenes:

1. ``rng = numpy.random.default_rng(seed_s)`` with ``seed_s`` the first 8 bytes (big endian) of
   ``SHA-256("descbench-distractors:<seed>:<s>")``: the same on every platform, run and Python.
2. ``scenes = rng.choice(others, size=min(distractor_scenes, len(others)), replace=False)`` where
   ``others`` is the sorted list of the evaluated scenes without s. With fewer other scenes than
   ``distractor_scenes`` (e.g. the 8-scene demo), all of them are used; the number actually used is
   recorded next to every result (``n_distractor_scenes``).
3. for each chosen scene, in that order: ``image = rng.integers(1, n_images + 1)`` (one of its images; 6 in HPatches), then
   ``rows = sorted(rng.choice(n, size=min(per_scene, n), replace=False))`` among that image's n
   keypoints (``per_scene = "all"``: every keypoint, no draw).

Step 2 needs only the scene list, so the workflow knows each scoring job's distractor scenes when
it builds the DAG (:func:`distractor_scenes`); step 3 needs the keypoint counts and runs in the job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from descbench.rng import keyed_rng


def scene_rng(seed: int, scene: str) -> np.random.Generator:
    """Step 1's stream (:func:`descbench.rng.keyed_rng`, big endian by definition)."""
    return keyed_rng(f"descbench-distractors:{int(seed)}:{scene}", "big")


def _choose_scenes(rng: np.random.Generator, scene: str, all_scenes: list[str], n_scenes: int) -> list[str]:
    others = sorted(s for s in set(all_scenes) if s != scene)
    n = min(int(n_scenes), len(others))
    if n == 0:
        return []
    return [others[i] for i in rng.choice(len(others), size=n, replace=False)]


def distractor_scenes(scene: str, all_scenes: list[str], n_scenes: int, seed: int) -> list[str]:
    """The other scenes that provide ``scene``'s distractors (step 2 of the module docstring)."""
    return _choose_scenes(scene_rng(seed, scene), scene, all_scenes, n_scenes)


@dataclass(frozen=True)
class DistractorDraw:
    scene: str  # the other scene
    image: int  # its image (1..n of that scene)
    rows: np.ndarray  # int64 indices among that image's keypoints, ascending


def draw_distractors(scene: str, all_scenes: list[str], n_scenes: int, per_scene: int | str,
                     seed: int, n_keypoints: dict[str, dict[int, int]]) -> list[DistractorDraw]:
    """Steps 2 and 3: which image and keypoint rows of each distractor scene are used.

    ``n_keypoints[other_scene][image]`` is the number of keypoints of that image.
    """
    rng = scene_rng(seed, scene)
    out = []
    for other in _choose_scenes(rng, scene, all_scenes, n_scenes):
        image = int(rng.integers(1, len(n_keypoints[other]) + 1))  # any image of the other scene
        n = int(n_keypoints[other][image])
        if per_scene == "all":
            rows = np.arange(n, dtype=np.int64)
        else:
            m = min(int(per_scene), n)
            rows = np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64) if m else np.zeros(0, np.int64)
        out.append(DistractorDraw(other, image, rows))
    return out
