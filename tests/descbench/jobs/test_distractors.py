"""descbench.jobs.distractors: the ``distractors`` command (the bank every scoring job reads) gives
each scene the draw that the single-scene path draws from the other scenes' files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from descbench.jobs.distractors import distractors_from_files, read_distractor_bank
from jobcli import SCENES, features


def test_the_bank_holds_each_scenes_draw(tmp_path):
    run = features(tmp_path)
    run.distractors()
    ver = run.cfg["verification"]
    bank = read_distractor_bank(Path(run.paths.distractor_bank("kp", "desc")), SCENES, ver, "desc")
    files = {s: (Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "desc", s))) for s in SCENES}
    for s in SCENES:
        direct = distractors_from_files(s, SCENES, ver, {o: f for o, f in files.items() if o != s}, "desc")
        assert bank[s] and len(bank[s]) == len(direct)
        for a, b in zip(bank[s], direct):
            assert (a.scene, a.image) == (b.scene, b.image) and a.scene != s
            assert np.array_equal(a.rows, b.rows) and np.array_equal(a.desc, b.desc)
