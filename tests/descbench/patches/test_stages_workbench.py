"""descbench.patches.stages with patches.workbench.enabled: the workbench's patch benchmark in the
evaluation job (its row, the per-sequence and per-file details, the timing file), against
descbench.patches.workbench called directly and a brute force from the descriptors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from descbench import io
from descbench.patches import PATCH_TYPES
from descbench.patches import stages as ps
from descbench.patches import workbench as wb
from descbench.patches.describe import write_sequence_descriptors
from tests.conftest import raises_naming

SEQS = ("v_b", "i_a", "v_c")  # not sorted: the job sorts them as the workbench does


def pcfg(**workbench) -> dict:
    return {"source": "folder", "sequences": None, "hbench": {"enabled": False},
            "hpatches_benchmark": {"enabled": False},
            "workbench": {"enabled": True, "precision": "float32", "grouping": "per_sequence", **workbench}}


def sequence_descriptors(seq: str, n: int = 12, d: int = 8, dtype=np.float32) -> dict[str, np.ndarray]:
    """Noisy copies of a ref per target file, noisier from easy to tough (a few wrong matches)."""
    rng = np.random.default_rng(sum(map(ord, seq)))
    ref = rng.normal(size=(n, d))
    noise = {"r": 0.0, "e": 0.3, "h": 0.6, "t": 0.9}
    out = {t: ref + noise[t[0]] * rng.normal(size=(n, d)) for t in PATCH_TYPES}
    if dtype == np.uint8:
        return {t: rng.integers(0, 256, (n, d), dtype=np.uint8) for t in PATCH_TYPES}
    return {t: v.astype(dtype) for t, v in out.items()}


def write_descriptors(root: Path, name: str = "toy", **kw) -> list[Path]:
    files = []
    for seq in SEQS:
        f = root / name / f"{seq}.parquet"
        write_sequence_descriptors(f, sequence_descriptors(seq, **kw), {"descriptor": name, "sequence": seq})
        files.append(f)
    return files


@pytest.mark.parametrize("precision,grouping", [("float32", "per_sequence"), ("float64", "sequential")])
def test_the_job_writes_what_the_module_computes(tmp_path, precision, grouping):
    files = write_descriptors(tmp_path)
    cfg = pcfg(precision=precision, grouping=grouping)
    ps.evaluate(tmp_path / "tasks", files, "toy", cfg, tmp_path / "eval")
    table, meta = io.read_table(tmp_path / "eval" / "workbench.parquet")
    got = table.to_pandas()
    assert meta["stage"] == "patch_evaluation" and meta["params"]["descriptor"] == "toy"
    descs = {s: sequence_descriptors(s) for s in SEQS}
    rows = pd.concat([wb.score_sequence(s, descs[s], "toy", [precision]) for s in sorted(SEQS)], ignore_index=True)
    want = wb.aggregate(rows, grouping=grouping)
    assert list(got.columns[:len(wb.TABLE_COLUMNS)]) == list(wb.TABLE_COLUMNS)
    for c in wb.TABLE_COLUMNS:
        if c not in ("processing_time_ms", "metadata"):
            assert got[c].iloc[0] == want[c].iloc[0], c
    assert np.isnan(got.processing_time_ms.iloc[0])  # wall time is not in the Parquet (reproducible content)
    assert got.metadata.iloc[0] == (f"difficulty_easy=true;difficulty_hard=true;difficulty_tough=true;grouping={grouping};"
                                    f"precision={precision};source=folder;")
    assert got.precision.iloc[0] == precision and got.grouping.iloc[0] == grouping
    seq_rows = io.read_table(tmp_path / "eval" / "details" / "workbench_sequences.parquet")[0].to_pandas()
    assert list(seq_rows.sequence) == ["i_a", "v_b", "v_c"]
    pd.testing.assert_frame_equal(seq_rows, rows)  # per sequence: the rows aggregate was given
    timing = json.loads((tmp_path / "eval" / "workbench_timing.json").read_text())
    assert timing["processing_time_ms"] > 0 and len(timing["created_at"]) == 19


def test_file_details_and_a_brute_force_of_the_means(tmp_path):
    """Per file: AP = 1 / rank of the true match (float64 distances, no ties here), accuracy =
    nearest neighbour is the true match; the table's means are the means of those."""
    files = write_descriptors(tmp_path)
    ps.evaluate(tmp_path / "tasks", files, "toy", pcfg(), tmp_path / "eval")
    per_file = io.read_table(tmp_path / "eval" / "details" / "workbench_files.parquet")[0].to_pandas()
    assert len(per_file) == 3 * 15
    brute = []
    for seq in sorted(SEQS):
        descs = sequence_descriptors(seq)
        ref = descs["ref"].astype(np.float64)
        for t in PATCH_TYPES[1:]:
            tgt = descs[t].astype(np.float64)
            d = np.sqrt(((ref[:, None, :] - tgt[None, :, :]) ** 2).sum(-1))
            true = d[np.arange(len(d)), np.arange(len(d))]
            rank = (d < true[:, None]).sum(1) + 1
            brute.append({"sequence": seq, "split": {"e": "easy", "h": "hard", "t": "tough"}[t[0]], "file": t,
                          "ap": np.mean(1.0 / rank), "acc": np.mean(d.argmin(1) == np.arange(len(d)))})
    brute = pd.DataFrame(brute)
    np.testing.assert_allclose(per_file.average_precision, brute.ap, rtol=0, atol=1e-6)
    np.testing.assert_allclose(per_file.match_accuracy, brute.acc, rtol=0, atol=1e-6)
    assert (brute.acc < 1).any() and (brute.acc > 0.3).all()  # the data has errors to find
    row = io.read_table(tmp_path / "eval" / "workbench.parquet")[0].to_pandas().iloc[0]
    per_split = brute.groupby(["sequence", "split"]).mean(numeric_only=True)
    assert row.map_overall == pytest.approx(per_split.ap.mean(), abs=1e-6)
    assert row.accuracy_overall == pytest.approx(per_split.acc.mean(), abs=1e-6)
    assert row.map_tough == pytest.approx(per_split.xs("tough", level="split").ap.mean(), abs=1e-6)
    assert row.map_illumination == pytest.approx(per_split.xs("i_a").ap.mean(), abs=1e-6)
    assert row.map_viewpoint_hard == pytest.approx(per_split.loc[[("v_b", "hard"), ("v_c", "hard")]].ap.mean(), abs=1e-6)
    assert row.num_scenes == 3 and row.num_patches == 3 * 15 * 12 and row.descriptor_dimension == 8


def test_configured_sequences_keep_their_order_and_are_named_in_the_metadata(tmp_path):
    files = write_descriptors(tmp_path)
    cfg = {**pcfg(), "sequences": list(SEQS)}
    ps.evaluate(tmp_path / "tasks", files, "toy", cfg, tmp_path / "eval")
    seq_rows = io.read_table(tmp_path / "eval" / "details" / "workbench_sequences.parquet")[0].to_pandas()
    assert list(seq_rows.sequence) == list(SEQS)
    assert "scenes=v_b,i_a,v_c;" in io.read_table(tmp_path / "eval" / "workbench.parquet")[0].to_pandas().metadata[0]


def test_disabled_writes_nothing_of_it(tmp_path):
    files = write_descriptors(tmp_path)
    ps.evaluate(tmp_path / "tasks", files, "toy", pcfg(enabled=False), tmp_path / "eval")
    assert not (tmp_path / "eval" / "workbench.parquet").exists()
    assert not (tmp_path / "eval" / "workbench_timing.json").exists()


@pytest.mark.bad_input
def test_packed_bits_are_refused_naming_the_descriptor_and_the_fix(tmp_path):
    files = write_descriptors(tmp_path, "orbish", dtype=np.uint8)
    raises_naming(lambda: ps.evaluate(tmp_path / "tasks", files, "orbish", pcfg(), tmp_path / "eval"),
                  "'orbish'", "uint8", "float32", "remove 'orbish' from patches.descriptors",
                  "patches.workbench.enabled: false")


# ----------------------------------------------------------------------------- composite on patches


@pytest.mark.parametrize("arithmetic", ["workbench", "descbench"])
def test_a_composite_patch_descriptor_fuses_its_components_patch_rows(tmp_path, arithmetic):
    """family composite on patches: each component described at the centre keypoint as its own
    descriptor would be, then fused; arithmetic: workbench is the workbench's PatchFusionExtractor
    (descbench.patches.workbench.fuse, weights as given), bit for bit."""
    from descbench.descriptors import check_descriptor_params
    from descbench.descriptors.composite import aggregate
    from descbench.patches.checks import CENTRE_KEYPOINTS
    from descbench.patches.describe import describe_patches
    from descbench.patches.layout import read_strip
    from tests.descbench.patches.test_stages import write_sequence

    seq = tmp_path / "v_test"
    write_sequence(seq, 3)
    params = check_descriptor_params("composite", {
        "aggregation": "weighted_avg", "arithmetic": arithmetic,
        "components": [{"descriptor": "sift_raw", "weight": 0.3}, {"descriptor": "rootsift", "weight": 0.9}]}, "descriptors.f.params")
    comps = {"sift_raw": {"family": "sift", "params": {"convention": "opencv"}}, "rootsift": {"family": "rootsift", "params": {}}}
    spec = {"family": "composite", "params": params, "components": comps}
    ps.describe(seq, tmp_path / "f" / "v_test.parquet", "f", spec, "hpatches_benchmark")
    got = ps.load_descriptors([tmp_path / "f" / "v_test.parquet"])["v_test"]
    for t in ("ref", "t5"):
        rows = [describe_patches(read_strip(seq / f"{t}.png"), c["family"], c["params"], **CENTRE_KEYPOINTS["hpatches_benchmark"])
                for c in comps.values()]
        if arithmetic == "workbench":
            want = wb.fuse(rows, "weighted_avg", [0.3, 0.9])  # not renormalised, as PatchFusionExtractor
        else:
            want = aggregate(rows, params, ["a", "b"], "x")
        assert got[t].dtype == np.float32
        np.testing.assert_array_equal(got[t].view(np.uint32), want.view(np.uint32))
    assert np.abs(np.linalg.norm(got["ref"], axis=1) - 1).max() < 1e-6


@pytest.mark.bad_input
def test_a_composite_spec_without_its_components_is_named(tmp_path):
    from descbench.descriptors import check_descriptor_params
    from descbench.errors import ConfigError
    from tests.descbench.patches.test_stages import write_sequence

    seq = tmp_path / "v_test"
    write_sequence(seq, 2)
    params = check_descriptor_params("composite", {"aggregation": "average", "components": [{"descriptor": "a"}]}, "d.params")
    raises_naming(lambda: ps.describe(seq, tmp_path / "o.parquet", "f", {"family": "composite", "params": params},
                                      "upright"), "composite 'f'", "['a']", "components", exc=ConfigError)
