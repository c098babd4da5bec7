"""The C++ DescriptorWorkbench's experiments and descriptor types in descbench (docs/reference/workbench.md):
every config under config/workbench/ (one per workbench experiment file) and
config/workbench_descriptors.yaml is a valid descbench config, as its header's command runs it; every
DescriptorType of the workbench has exactly one row in the docs page's first table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from snakemake.utils import update_config

from descbench.config import validate_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
COMMIT = "b834e17"
# F-Sossi/DescriptorWorkbench at b834e17: src/include/thesis_project/types.hpp, enum DescriptorType
DESCRIPTOR_TYPES = ("SIFT", "HoNC", "RGBSIFT", "RGBSIFT_CHANNEL_AVG", "vSIFT", "DSPSIFT", "DSPSIFT_V2", "DSPRGBSIFT_V2",
                    "DSPHOWH_V2", "DSPHONC_V2", "VGG", "DNN_PATCH", "LIBTORCH_HARDNET", "LIBTORCH_SOSNET", "LIBTORCH_L2NET",
                    "ORB", "SURF", "COMPOSITE")
# its config/experiments/*.yaml at b834e17 (not _archive/)
EXPERIMENTS = (
    "dsprgbsift_intersection", "fusion_dspsift_hardnet_keynet_scale6px", "fusion_dspsift_rgbsift_keynet_scale6px",
    "fusion_dspsift_surf_ext_intersections", "fusion_dspsift_surf_intersections",
    "fusion_hardnet_sosnet_keynet_intersections", "fusion_rootsift_hardnet_keynet_scale6px",
    "fusion_sift_hardnet_keynet_scale6px", "fusion_sift_rgbsift_keynet_scale6px", "fusion_sift_surf_ext_intersections",
    "fusion_sift_surf_intersections", "fusion_surf_ext_rgbsift_intersections", "honc_evaluation",
    "keynet_surf_intersection_test", "keypoint_surf_scale_matched_intersection", "nn_ratio_study",
    "scale_vs_intersection_study", "thesis_tolerance_study", "thesis_verification_retrieval")
CONFIGS = sorted((ROOT / "config" / "workbench").glob("*.yaml")) + [ROOT / "config" / "workbench_descriptors.yaml"]


def random_weights(node):
    """Weight files (models/...) are downloads; `random` stands in so that validation does not need them."""
    if isinstance(node, dict):
        return {k: "random" if k == "weights" and isinstance(v, str) and v.startswith("models/") else random_weights(v)
                for k, v in node.items()}
    return [random_weights(v) for v in node] if isinstance(node, list) else node


def as_run(path: Path, own: dict) -> dict:
    """The config the header's command runs: the file alone with --replace-workflow-config, else the file
    merged into config.yaml as Snakemake merges --configfile files."""
    command = next(line for line in path.read_text().splitlines() if "snakemake --cores" in line)
    assert path.relative_to(ROOT).as_posix() in command, command
    if "--replace-workflow-config" in command:
        return own
    merged = yaml.safe_load((ROOT / "config.yaml").read_text())
    update_config(merged, own)
    return merged


def test_one_config_per_workbench_experiment():
    assert sorted(p.stem for p in (ROOT / "config" / "workbench").glob("*.yaml")) == sorted(EXPERIMENTS)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_is_valid_as_its_command_runs_it(path):
    text = path.read_text()
    if path.parent.name == "workbench":
        first = text.splitlines()[0]
        assert first.startswith("#") and f"config/experiments/{path.name}" in first and COMMIT in first, first
        assert "# Could not be mapped, and why:" in text
    assert "branch honc" not in text and "needs-honc" not in text  # merged: no commented-out blocks left
    own = random_weights(yaml.safe_load(text))
    cfg = validate_config(as_run(path, own), SCHEMA)
    assert cfg["descriptors"]
    # and merged into config.yaml (what --configfile without --replace-workflow-config would run)
    merged = yaml.safe_load((ROOT / "config.yaml").read_text())
    update_config(merged, own)
    validate_config(merged, SCHEMA)


def descriptor_type_rows() -> list[str]:
    """The first cells of the docs page's "Descriptor types" table."""
    text = (ROOT / "docs" / "reference" / "workbench.md").read_text()
    section = text.split("## Descriptor types", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # header and |---|
    return [re.fullmatch(r"`([^`]+)`", row.split("|")[1].strip()).group(1) for row in rows]


def test_every_descriptor_type_has_exactly_one_row():
    rows = descriptor_type_rows()
    assert sorted(rows) == sorted(DESCRIPTOR_TYPES), (set(rows) ^ set(DESCRIPTOR_TYPES))
    assert len(rows) == len(set(rows)), [r for r in rows if rows.count(r) > 1]


def test_the_one_command_config_runs_every_descriptor_type():
    """config/workbench_descriptors.yaml: one descriptor named after each DescriptorType, DNN_PATCH on the
    committed random ONNX model (a file that exists, relative to the repository root where the command runs)."""
    descs = yaml.safe_load((ROOT / "config" / "workbench_descriptors.yaml").read_text())["descriptors"]
    assert sorted(n for n in descs) == sorted(DESCRIPTOR_TYPES), set(descs) ^ set(DESCRIPTOR_TYPES)
    assert (ROOT / descs["DNN_PATCH"]["params"]["model"]).is_file()


def test_every_experiment_has_a_row():
    text = (ROOT / "docs" / "reference" / "workbench.md").read_text()
    for stem in EXPERIMENTS:
        assert text.count(f"| `{stem}.yaml` | `config/workbench/{stem}.yaml` |") == 1, stem


def test_the_sift_hardnet_fusion_carries_both_variants_labelled():
    """fusion_sift_hardnet_keynet_scale6px: every fusion row has its reproduction next to it,
    named <name>__workbench_arithmetic: the same aggregation, sets and weights, arithmetic: workbench,
    and the SIFT component's own rows (sift_raw: OpenCV's, convention opencv) as the workbench's
    composite fuses them; the descbench variant keeps the unit rows (sift, convention workbench)."""
    path = ROOT / "config" / "workbench" / "fusion_sift_hardnet_keynet_scale6px.yaml"
    descs = yaml.safe_load(path.read_text())["descriptors"]
    assert descs["sift"]["params"]["convention"] == "workbench" and descs["sift_raw"]["params"]["convention"] == "opencv"
    ours = {n: d for n, d in descs.items() if d["family"] == "composite" and not n.endswith("__workbench_arithmetic")}
    assert len(ours) == 4
    for name, d in ours.items():
        twin = descs[f"{name}__workbench_arithmetic"]
        assert twin["params"]["arithmetic"] == "workbench" and d["params"].get("arithmetic", "descbench") == "descbench"
        assert twin["keypoint_sets"] == d["keypoint_sets"] and twin["params"]["aggregation"] == d["params"]["aggregation"]
        swap = [{**c, "descriptor": "sift_raw" if c["descriptor"] == "sift" else c["descriptor"]} for c in d["params"]["components"]]
        assert twin["params"]["components"] == swap, name
        assert f"{name}{{,__workbench_arithmetic}}" in path.read_text()  # the header's row mapping names both


# DescriptorParams' VGG defaults (src/include/thesis_project/types.hpp:378-383 at b834e17), which its
# VGGWrapper passes to cv::xfeatures2d::VGG::create (VGGWrapper.cpp:24-31): vgg_desc_type 100 (VGG_120),
# vgg_isigma 1.4f, vgg_img_normalize true, vgg_use_scale_orientation true, vgg_scale_factor 6.25f,
# vgg_dsc_normalize false
WORKBENCH_VGG = {"dims": 120, "isigma": 1.4, "img_normalize": True, "use_scale_orientation": True, "scale_factor": 6.25,
                 "dsc_normalize": False}


def test_the_vgg_row_builds_opencvs_vgg_with_the_workbenchs_defaults():
    from descbench.descriptors import check_descriptor_params
    from descbench.descriptors.opencv_float import vgg_setup
    from descbench.keypoints import ImageKeypoints

    spec = yaml.safe_load((ROOT / "config" / "workbench_descriptors.yaml").read_text())["descriptors"]["VGG"]
    params = check_descriptor_params(spec["family"], spec.get("params"), "VGG")
    empty = ImageKeypoints(*([np.zeros(0, np.float32)] * 5 + [np.zeros(0, np.int32)] * 3))
    vgg = vgg_setup(params, empty, {"detector": "sift"}, (10, 10), Path("i")).extractor
    got = {"dims": vgg.descriptorSize(), "isigma": vgg.getSigma(), "img_normalize": vgg.getUseNormalizeImage(),
           "use_scale_orientation": vgg.getUseScaleOrientation(), "scale_factor": vgg.getScaleFactor(),
           "dsc_normalize": vgg.getUseNormalizeDescriptor()}
    want = {k: np.float32(v) if isinstance(v, float) else v for k, v in WORKBENCH_VGG.items()}  # float arguments
    assert {k: np.float32(v) if isinstance(v, float) else v for k, v in got.items()} == want
    assert params["rows"] == "workbench"  # its runner's L2 step on every row (normalize_after_pooling)
