"""descbench.jobs.descriptors: the ``descriptors`` command on a tiny run, settings given as a spec
file (``--spec @file``, as the workflow's jobs get them)."""

from __future__ import annotations

import json
from pathlib import Path

from descbench.jobs.common import read_features
from descbench.jobs.descriptors import describe_scene
from jobcli import SCENES, features, ok


def test_the_command_writes_what_describe_scene_writes(tmp_path):
    run = features(tmp_path)
    spec = tmp_path / "desc.json"
    spec.write_text(json.dumps({"family": "rootsift", "params": {}}))
    ok("descriptors", *run.batch_args(), "--keypoint-set", "kp", "--name", "root", "--spec", f"@{spec}",
       "--keypoint-set-spec", run.spec("keypoint_sets", "kp"))
    for s in SCENES:
        kp, got = Path(run.paths.keypoints("kp", s)), Path(run.paths.descriptors("kp", "root", s))
        describe_scene(run.scene_root / s, kp, "root", {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"],
                       tmp_path / "direct.parquet")
        assert got.read_bytes() == (tmp_path / "direct.parquet").read_bytes()
        f = read_features(kp, got)
        assert f.dmeta["descriptor"] == "root" and all(f.by_image[k].shape == (len(f.per_image[k]), 128) for k in f.per_image)


def test_a_derived_family_reads_its_base_rows_and_equals_computing_them(tmp_path):
    """rootsift with ``shared_base``: the sift descriptor's files rooted, bit for bit the rows it
    computes itself, the base file's sha256 recorded; a base file of other keypoints is refused."""
    import numpy as np
    import pytest

    from descbench.errors import DataError
    from descbench.fileops import file_sha256

    run = features(tmp_path)  # descriptor 'desc' = sift at its defaults on 'kp'
    spec = tmp_path / "root.json"
    spec.write_text(json.dumps({"family": "rootsift", "params": {}, "shared_base": "desc"}))
    ok("descriptors", *run.batch_args(), "--keypoint-set", "kp", "--name", "root", "--spec", f"@{spec}",
       "--keypoint-set-spec", run.spec("keypoint_sets", "kp"))
    for s in SCENES:
        kp = Path(run.paths.keypoints("kp", s))
        shared = read_features(kp, Path(run.paths.descriptors("kp", "root", s)))
        describe_scene(run.scene_root / s, kp, "root", {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"],
                       tmp_path / f"{s}.computed.parquet")
        computed = read_features(kp, tmp_path / f"{s}.computed.parquet")
        assert all(np.array_equal(shared.by_image[k], computed.by_image[k]) for k in computed.per_image)
        assert shared.dmeta["base_file_sha256"] == file_sha256(run.paths.descriptors("kp", "desc", s))
        assert "base_file_sha256" not in computed.dmeta
        sift = read_features(kp, Path(run.paths.descriptors("kp", "desc", s)))
        assert not np.array_equal(shared.by_image[1], sift.by_image[1])  # rooted, not copied
    with pytest.raises(DataError, match="different version"):
        describe_scene(run.scene_root / "i_rocket", Path(run.paths.keypoints("kp", "i_rocket")), "root",
                       {"family": "rootsift", "params": {}}, run.cfg["keypoint_sets"]["kp"], tmp_path / "x.parquet",
                       base_file=Path(run.paths.descriptors("kp", "desc", "v_coins")))


def shared_and_computed(run, tmp_path: Path, name: str, spec: dict, shared_parts: list):
    """The ``descriptors`` command for ``name`` with ``shared_parts`` (as the workflow's job runs
    it), and describe_scene without them; per scene ``(scene, shared, computed)`` features."""
    spec_file = tmp_path / f"{name}.json"
    spec_file.write_text(json.dumps({**spec, "shared_parts": shared_parts}))
    ok("descriptors", *run.batch_args(), "--keypoint-set", "kp", "--name", name, "--spec", f"@{spec_file}",
       "--keypoint-set-spec", run.spec("keypoint_sets", "kp"))
    for s in SCENES:
        kp = Path(run.paths.keypoints("kp", s))
        computed = tmp_path / f"{s}.computed.parquet"
        describe_scene(run.scene_root / s, kp, name, spec, run.cfg["keypoint_sets"]["kp"], computed)
        yield s, read_features(kp, Path(run.paths.descriptors("kp", name, s))), read_features(kp, computed)


def test_a_stack_reads_the_parts_another_descriptor_gives_and_equals_computing_them(tmp_path):
    """A stack with ``shared_parts``: part 0 (sift at its defaults) read from descriptor 'desc''s
    files, part 1 (rootsift) computed; bit for bit the rows of computing both, each read file's
    sha256 recorded in its part's place; a part file of other keypoints is refused."""
    import numpy as np
    import pytest

    from descbench.config import validate_config
    from descbench.errors import DataError
    from descbench.fileops import file_sha256
    from jobcli import SCHEMA

    run = features(tmp_path)  # descriptor 'desc' = sift at its defaults on 'kp'
    raw = {"keypoint_sets": {"kp": {"detector": "sift"}}, "descriptors": {"stack": {"family": "stack", "params": {
        "parts": [{"family": "sift"}, {"family": "rootsift"}], "weights": [2.0, 1.0]}}}}
    stack = validate_config(raw, SCHEMA)["descriptors"]["stack"]
    for s, shared, computed in shared_and_computed(run, tmp_path, "stack", stack, ["desc", None]):
        assert all(np.array_equal(shared.by_image[k], computed.by_image[k]) for k in computed.per_image)
        assert shared.by_image[1].shape[1] == 256
        assert shared.dmeta["part_files_sha256"] == [file_sha256(run.paths.descriptors("kp", "desc", s)), None]
        assert "part_files_sha256" not in computed.dmeta
    # the rows are read, not computed again: a part file holding other rows gives a stack of those
    from descbench import io

    kp = Path(run.paths.keypoints("kp", "i_rocket"))
    table, meta = io.read_table(run.paths.descriptors("kp", "desc", "i_rocket"))
    altered = io.descriptors_array(table)[::-1].copy()  # the same rows, other keypoints' ones
    io.write_table(io.descriptors_table(io.column_array(table.column("image")), altered), tmp_path / "altered.parquet", meta)
    describe_scene(run.scene_root / "i_rocket", kp, "stack", stack, run.cfg["keypoint_sets"]["kp"], tmp_path / "x.parquet",
                   part_files=[tmp_path / "altered.parquet", None])
    got, computed = read_features(kp, tmp_path / "x.parquet"), read_features(kp, tmp_path / "i_rocket.computed.parquet")
    sift_part = got.by_image[1][:, :128] / 2.0  # weight 2, block and final L2 normalisation
    part = read_features(kp, tmp_path / "altered.parquet").by_image[1]
    expect = part / np.linalg.norm(part, axis=1, keepdims=True) / np.sqrt(5.0)
    assert np.allclose(sift_part, expect, atol=1e-6) and not np.array_equal(got.by_image[1], computed.by_image[1])
    with pytest.raises(DataError, match="different version"):
        describe_scene(run.scene_root / "i_rocket", kp, "stack", stack, run.cfg["keypoint_sets"]["kp"], tmp_path / "x.parquet",
                       part_files=[Path(run.paths.descriptors("kp", "desc", "v_coins")), None])


def test_a_dsp_reads_its_bases_rows_at_scale_1_and_equals_computing_them(tmp_path):
    """A dsp over sift with ``shared_parts``: its rows at scale 1 read from descriptor 'desc''s files
    (sift at its defaults), the other scales computed; bit for bit the rows of computing every
    scale, the file's sha256 recorded."""
    import numpy as np

    from descbench.config import validate_config
    from descbench.fileops import file_sha256
    from jobcli import SCHEMA

    run = features(tmp_path)  # descriptor 'desc' = sift at its defaults on 'kp'
    raw = {"keypoint_sets": {"kp": {"detector": "sift"}},
           "descriptors": {"dsp": {"family": "dsp", "params": {"base": {"family": "sift"}}}}}
    dsp = validate_config(raw, SCHEMA)["descriptors"]["dsp"]
    for s, shared, computed in shared_and_computed(run, tmp_path, "dsp", dsp, ["desc"]):
        assert all(np.array_equal(shared.by_image[k], computed.by_image[k]) for k in computed.per_image)
        assert shared.dmeta["part_files_sha256"] == [file_sha256(run.paths.descriptors("kp", "desc", s))]


def test_given_part_rows_are_what_the_stack_combines(tmp_path):
    """compute_descriptors with ``given`` rows: the stack combines them in that part's place and
    computes the others; a family that combines no parts refuses them."""
    import numpy as np
    import pytest

    from descbench.config import validate_config
    from descbench.descriptors import compute_descriptors
    from descbench.descriptors.stack import combine_blocks
    from descbench.jobs.common import load_keypoints
    from jobcli import SCHEMA

    run = features(tmp_path)
    raw = {"keypoint_sets": {"kp": {"detector": "sift"}}, "descriptors": {"stack": {"family": "stack", "params": {
        "parts": [{"family": "sift"}, {"family": "rootsift"}]}}}}
    params = validate_config(raw, SCHEMA)["descriptors"]["stack"]["params"]
    per_image, _ = load_keypoints(Path(run.paths.keypoints("kp", "i_rocket")))
    image = sorted((run.scene_root / "i_rocket").glob("1.*"))[0]
    kpset = run.cfg["keypoint_sets"]["kp"]
    kps = per_image[1]
    other = np.ones((len(kps), 128), np.float32)
    got = compute_descriptors("stack", params, image, kps, kpset, "here", given=[other, None])
    root = compute_descriptors("rootsift", params["parts"][1]["params"], image, kps, kpset, "here")
    assert np.array_equal(got, combine_blocks([other, root], params))
    assert not np.array_equal(got, compute_descriptors("stack", params, image, kps, kpset, "here"))
    with pytest.raises(ValueError, match="combines no parts"):
        compute_descriptors("sift", params["parts"][0]["params"], image, kps, kpset, "here", given=[None])


def test_a_shared_file_is_read_once_for_its_rows_and_its_digest(tmp_path, monkeypatch):
    """describe_scene reads a base or part file, and the keypoint file, once: the digests it
    records and checks are of the bytes it read (io.read_table_sha256), not of a second read."""
    from collections import Counter

    from descbench import fileops, io
    from descbench.fileops import file_sha256
    from descbench.jobs import common as jobs_common
    from descbench.jobs import descriptors as jobs_descriptors

    run = features(tmp_path)  # descriptor 'desc' = sift at its defaults on 'kp'
    kp = Path(run.paths.keypoints("kp", "i_rocket"))
    base = Path(run.paths.descriptors("kp", "desc", "i_rocket"))
    reads = Counter()

    def spy(f):
        return lambda path, *a, **k: reads.update([Path(path)]) or f(path, *a, **k)

    for module in (io, fileops, jobs_common, jobs_descriptors):
        for name in ("read_table", "read_table_sha256", "file_sha256"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, spy(getattr(module, name)))
    describe_scene(run.scene_root / "i_rocket", kp, "root", {"family": "rootsift", "params": {}},
                   run.cfg["keypoint_sets"]["kp"], tmp_path / "root.parquet", base_file=base)
    assert reads[base] == 1 and reads[kp] == 1
    reads.clear()
    stack = {"family": "stack", "params": {"parts": [{"family": "sift", "params": {}}], "block_norm": "l2",
                                           "final_norm": "l2", "weights": [1.0]}}
    describe_scene(run.scene_root / "i_rocket", kp, "stack", stack, run.cfg["keypoint_sets"]["kp"], tmp_path / "stack.parquet",
                   part_files=[base])
    assert reads[base] == 1 and reads[kp] == 1
    reads.clear()
    jobs_common.read_features(kp, base)  # what every scoring job reads
    assert reads[base] == 1 and reads[kp] == 1
    monkeypatch.undo()
    assert io.read_meta(tmp_path / "root.parquet")["base_file_sha256"] == file_sha256(base)
    assert io.read_meta(tmp_path / "stack.parquet")["part_files_sha256"] == [file_sha256(base)]
    for out in ("root", "stack"):
        assert io.read_meta(tmp_path / f"{out}.parquet")["keypoints_sha256"] == file_sha256(kp)
