"""Family facts live in the family (descbench.jobfacts): a descriptor family or a detector declares
its runtime, the cost inputs of its jobs' memory/runtime model, its output width, the specs and
descriptors it runs, and the weight/model files its params name; descbench.jobresources and
descbench.config read them through the registries and name no family.

A toy learned family defined here, registered for one test through the family tuple only, gets the
learned env, its threads and GPU, a memory/runtime model from its declared cost, its weights file as
a rule input and its weights label. The real families' facts are checked against the tables that
jobresources and config held before the facts moved (bf7dc2c), so that moving them changed nothing.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

import descbench.descriptors as descriptors
from descbench import jobresources as jr
from descbench.config import job_resources, learned_weights, model_files, needs_learned_extra, validate_config
from descbench.descriptors import DescriptorFamily, family_names, get_family
from descbench.jobfacts import (NETWORK_PATCHES, OPENCV_PATCHES, OPENCV_DESCRIPTOR, OPENCV_DETECTOR, Cost, Model, conventional_files,
                                conventional_runtime, conventional_torch_params, conventional_weights_labels)
from descbench.keypoints.detectors import DETECTORS
from descbench.params import object_fragment

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
PKG = Path(__file__).resolve().parents[2] / "workflow" / "descbench"
MISSING = [Path("/nonexistent/scene_a")]  # not there yet: the demo's default image size

# ----------------------------------------------------------------------------- a toy learned family

# Deliberately unlike the shipped learned families' params (no `weights`, `device`, `threads`): only
# its declared facts can tell that it runs torch on a GPU with 3 threads and loads a checkpoint.
TOY_SCHEMA = object_fragment(
    ("checkpoint",),
    checkpoint={"type": "string", "minLength": 1},
    accelerator={"enum": ["cpu", "cuda"], "default": "cuda"},
    workers={"type": "integer", "minimum": 1, "default": 3},
    batch_mem_mb={"type": "number", "default": 700},
)
TOY_MODEL = Model(base_mb=4000, base_s=600)  # 4000 MB, 600 s whatever the scene
TOY_PATCH_MODEL = Model(base_mb=3000, base_s=300)


def _toy_compute(image_path, kps, params, kpset):
    raise AssertionError("the toy family is never run, only sized")


TOY = DescriptorFamily(
    "toynet", _toy_compute, TOY_SCHEMA, binary=False, not_on_patches=None,
    runtime="torch",
    torch_params=lambda p: [{"device": p["accelerator"], "threads": p["workers"]}],
    files=lambda p: [p["checkpoint"]],
    weights_labels=lambda p: [Path(p["checkpoint"]).name],
    cost=lambda p: Cost(model=TOY_MODEL, patch_model=TOY_PATCH_MODEL, extra_mb=float(p["batch_mem_mb"])),
    width=512,
)


@pytest.fixture
def toy_family(monkeypatch):
    """The toy family registered as a family module is: a module with FAMILIES, named in the family
    tuple (nothing else is touched); the registry is rebuilt before and after."""
    module = types.ModuleType("descbench.descriptors.toy_family")
    module.FAMILIES = (TOY,)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(descriptors, "FAMILY_MODULES", (*descriptors.FAMILY_MODULES, "toy_family"))
    descriptors._registry.cache_clear()
    yield TOY
    descriptors._registry.cache_clear()


@pytest.fixture
def toy_config(toy_family, tmp_path):
    ckpt = tmp_path / "toy_ckpt.pth"
    ckpt.write_bytes(b"weights")
    cfg = {"keypoint_sets": {"sift": {"detector": "sift"}},
           "descriptors": {"sift": {"family": "sift"},
                           "toy": {"family": "toynet", "params": {"checkpoint": str(ckpt)}},
                           "stacked": {"family": "stack", "params": {"parts": [
                               {"family": "sift"}, {"family": "toynet", "params": {"checkpoint": str(ckpt), "workers": 5}}]}},
                           "pooled": {"family": "dsp", "params": {"base": {"family": "toynet", "params": {"checkpoint": str(ckpt)}},
                                                                   "scales": [1.0, 2.0]}}},
           "patches": {"generate": {"max_patches": 100}}}
    return validate_config(cfg, SCHEMA), str(ckpt)


def test_the_toy_family_is_registered_through_the_tuple_alone(toy_family):
    assert "toynet" in family_names() and get_family("toynet") is toy_family


def test_the_toy_family_runs_in_the_learned_env_with_its_threads_and_gpu(toy_config):
    cfg, _ = toy_config
    params = cfg["descriptors"]["toy"]["params"]
    assert needs_learned_extra(params, family="toynet")
    assert job_resources(params, family="toynet") == {"threads": 3, "gpu": 1}
    # nested in a stack or a pooled family: the container's job runs it
    stacked, pooled = cfg["descriptors"]["stacked"]["params"], cfg["descriptors"]["pooled"]["params"]
    assert needs_learned_extra(stacked, family="stack") and needs_learned_extra(pooled, family="dsp")
    assert job_resources(stacked, family="stack") == {"threads": 5, "gpu": 1}
    # SIFT itself stays in the base env
    assert not needs_learned_extra(cfg["descriptors"]["sift"]["params"], family="sift")


def test_the_toy_familys_checkpoint_is_a_rule_input_and_its_weights_label(toy_config):
    cfg, ckpt = toy_config
    for name, family in (("toy", "toynet"), ("stacked", "stack"), ("pooled", "dsp")):
        assert model_files(cfg["descriptors"][name]["params"], family=family) == [ckpt]
        assert learned_weights(cfg, "sift", name) == f"{name}: toy_ckpt.pth"
    assert learned_weights(cfg, None, "toy") == "toy: toy_ckpt.pth"


def test_the_toy_family_is_sized_by_its_declared_cost(toy_config):
    cfg, _ = toy_config
    # memory 4000 + its batch 700 = 4700 MB x 1.25 = 5875 -> 5900; 600 s x 2 = 20 min
    assert jr.descriptor_job(cfg, "sift", "toy", MISSING) == {"mem_mb": 5900, "runtime": 20}
    # a pooled family runs it at each of its 2 scales: the time terms twice (600 s is its base, once)
    assert jr.descriptor_job(cfg, "sift", "pooled", MISSING) == {"mem_mb": 5900, "runtime": 20}
    # patches: 3000 + 16 strips x 100 patches x 10 kB = 16 MB + 700 = 3716 x 1.25 -> 4700; 300 s -> 10 min
    assert jr.patch_job(cfg, "toy") == {"mem_mb": 4700, "runtime": 10}
    # SIFT on the same scenes asks for the minimum
    assert jr.descriptor_job(cfg, "sift", "sift", MISSING) == {"mem_mb": jr.MIN_MEM_MB, "runtime": jr.MIN_RUNTIME_MIN}


def test_the_toy_familys_width_scales_the_score_job(toy_config):
    cfg, _ = toy_config
    assert jr.descriptor_width(cfg, "toy") == 512
    assert jr.descriptor_width(cfg, "stacked") == 128 + 512
    assert jr.descriptor_width(cfg, "pooled") == 512  # aggregation average: one base row


@pytest.mark.bad_input
def test_a_family_declaring_an_unknown_runtime_is_named(toy_family):
    import dataclasses

    bad = dataclasses.replace(toy_family, runtime="jax")
    with pytest.raises(ValueError, match=r"'toynet' declares runtime 'jax'; a runtime is one of numpy, torch, onnxruntime"):
        bad.runtime_of({})


@pytest.mark.bad_input
def test_naming_both_a_family_and_a_detector_is_refused():
    with pytest.raises(ValueError, match="not several"):
        model_files({}, family="sift", detector="sift")
    with pytest.raises(ValueError, match="not several"):
        model_files({}, family="sift", matcher="mnn")


# ----------------------------------------------------------------------------- the real families' facts
# The tables jobresources.py held at bf7dc2c (LEARNED_FAMILIES, COLOUR_FAMILIES, KAZE_FAMILIES,
# FILE_FAMILIES, KEYPOINT_DENSITY, DETECTOR_MODELS, _detector_cap, _width_of), as expected values.

OLD_LEARNED = {"hardnet": 1.0, "hardnet8": 1.35, "sosnet": 1.5, "hynet": 2.0, "tfeat": 1.0, "onnx": 2.0}
OLD_FILES = {"precomputed", "composite"}
OLD_COLOUR = {"rgbsift", "dsprgbsift"}
# families added since: (per_keypoint, per_pixel) of their Cost (one histogram per keypoint on a 3-channel pyramid)
NEW_COLOUR = {"honc": (1.0, 3.0), "howh": (1.0, 3.0)}
NEW_LEARNED = {"l2net": 1.0}  # per_keypoint relative to HardNet's (measured 0.8 x its time, left at 1)
# joint detect-and-describe networks (descbench.keypoints.joint): a full-image forward per image
NEW_JOINT = {"disk": 128, "aliked": 128, "xfeat": 64, "superpoint": 256, "dedode": 256,
             "keynet_affnet_hardnet": 128}  # their default widths
OLD_KAZE = {"kaze": (520, 2.0), "akaze_kaze": (520, 2.0), "akaze": (120, 0.6)}  # (mb_per_mp, s_per_mp)
OLD_DENSITY = {"sift": 10000, "surf": 3000, "orb": 6000, "brisk": 16000, "akaze": 8000, "kaze": 9000,
               "gftt": 8000, "fast": 50000, "keynet": 10000, "disk": 40000, "aliked": 8000, "xfeat": 5000,
               "superpoint": 10000, "dedode": 10000, "keynet_affnet_hardnet": 8000}
OLD_DETECTOR_MODELS = {
    "sift": (160, 230, 0.2, 2, 0.7), "keynet": (460, 580, 0.2, 5, 20), "kaze": (160, 520, 0.2, 2, 2.0),
    "akaze": (160, 120, 0.2, 2, 0.6), "surf": (250, 130, 0.2, 5, 1.5), "orb": (160, 40, 0.2, 2, 0.2),
    "brisk": (160, 40, 0.2, 2, 0.2), "gftt": (160, 40, 0.2, 2, 0.2), "fast": (160, 40, 0.2, 2, 0.2),
    "disk": (600, 2500, 4.0, 5, 15), "aliked": (600, 1800, 4.0, 5, 8), "xfeat": (600, 300, 4.0, 5, 1),
    "superpoint": (600, 800, 4.0, 5, 3.5), "dedode": (900, 3000, 4.0, 5, 40), "keynet_affnet_hardnet": (600, 600, 4.0, 5, 20)}
LEAF_FAMILIES = sorted(set(family_names()) - {"stack", "dsp"})


def default_params(family: str) -> dict:
    """A family's filled defaults, with the required keys a shipped config gives."""
    required = {"weights": "random", "model": "m.onnx", "callable": "x:y", "parts": [], "base": None,
                "components": [{"descriptor": "a"}], "aggregation": "concatenate"}
    fam = get_family(family)
    return {**fam.defaults, **{k: v for k, v in required.items() if k in fam.params_schema["properties"]}}


@pytest.mark.parametrize("family", LEAF_FAMILIES)
def test_each_familys_cost_is_the_table_jobresources_held(family):
    params = {**default_params(family), "batch_mem_mb": 256}
    cost = get_family(family).cost_of(params)
    if family in OLD_LEARNED or family in NEW_LEARNED:
        assert (cost.model, cost.patch_model) == (jr_network(), NETWORK_PATCHES)
        assert (cost.per_keypoint, cost.per_pixel, cost.extra_mb) == ({**OLD_LEARNED, **NEW_LEARNED}[family], 1.0, 256.0)
        return
    assert cost.extra_mb == 0.0
    if family in NEW_JOINT:  # the network's forward on each image: the model of its keypoint job
        assert (cost.model, cost.patch_model, cost.per_keypoint, cost.per_pixel) == (DETECTORS[family].model, OPENCV_PATCHES, 1.0, 1.0)
        return
    if family in NEW_COLOUR:
        assert cost.model == OPENCV_DESCRIPTOR and (cost.per_keypoint, cost.per_pixel) == NEW_COLOUR[family]
        return
    if family in OLD_FILES:
        assert (cost.model.base_mb, cost.model.mb_per_kkp, cost.model.s_per_kkp) == (200, 2.0, 0.05)
        return
    if family in OLD_KAZE:
        assert (cost.model.mb_per_mp, cost.model.s_per_mp) == OLD_KAZE[family]
        assert (cost.model.base_mb, cost.model.mb_per_kkp, cost.model.s_per_kkp) == (170, 1.2, 0.02)
    else:
        assert cost.model == OPENCV_DESCRIPTOR
    kf = pf = 3.0 if family in OLD_COLOUR else 1.0
    if family in ("dspsift", "dsprgbsift"):
        kf *= 10  # dong_soatto's default scales
    if family == "python":
        kf = pf = 2.0
    assert (cost.per_keypoint, cost.per_pixel) == (kf, pf)


def jr_network():
    from descbench.jobfacts import NETWORK_DESCRIPTOR

    assert (NETWORK_DESCRIPTOR.base_mb, NETWORK_DESCRIPTOR.mb_per_kkp, NETWORK_DESCRIPTOR.s_per_kkp) == (600, 4.0, 2.5)
    return NETWORK_DESCRIPTOR


def test_dspsift_counts_the_scales_of_its_convention():
    assert get_family("dspsift").cost_of({"convention": "workbench"}).per_keypoint == 3.0
    assert get_family("dspsift").cost_of({"scales": [1, 2, 3, 4]}).per_keypoint == 4.0
    assert get_family("dsprgbsift").cost_of({}).per_keypoint == 30.0


@pytest.mark.parametrize("family", LEAF_FAMILIES)
def test_each_familys_width_is_the_one_jobresources_assumed(family):
    params = default_params(family)
    want = 384 if family in OLD_COLOUR else 64 if family == "surf" else NEW_JOINT.get(family, 128)
    assert get_family(family).width_of(params, []) == want
    if family == "surf":
        assert get_family(family).width_of({**params, "extended": True}, []) == 128


@pytest.mark.parametrize("family", LEAF_FAMILIES)
def test_each_familys_runtime_files_and_labels_are_what_config_read_from_its_params(family, tmp_path):
    """config.py read a family's runtime and files from the keys of its params (a mapping with device
    and threads: torch; backend onnxruntime; model / weights / *_weights: files): the declared facts
    agree on every family's defaults, with file weights and a GPU."""
    fam = get_family(family)
    variants = [default_params(family)]
    if "weights" in fam.params_schema["properties"]:
        variants.append({**variants[0], "weights": str(tmp_path / "w.pth"), "device": "cuda", "threads": 4})
    if "backend" in fam.params_schema["properties"]:
        variants.append({**variants[0], "backend": "onnxruntime"})
    if family == "python":
        variants.append({**variants[0], "kwargs": {"device": "cuda", "threads": 2, "weights": "w.pth", "sub": {"model": "m"}}})
    for params in variants:
        assert fam.runtime_of(params) == conventional_runtime(params), params
        assert fam.torch_params_of(params) == conventional_torch_params(params), params
        assert sorted(fam.files_of(params)) == sorted(conventional_files(params)), params
        assert fam.weights_labels_of(params) == conventional_weights_labels(params), params
        for fn in (needs_learned_extra, job_resources, model_files):
            assert fn(params, family=family) == fn(params), (fn.__name__, params)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_each_detectors_facts_are_the_tables_jobresources_and_config_held(name, tmp_path):
    det = DETECTORS[name]
    assert det.density == OLD_DENSITY[name]
    m = det.model
    assert (m.base_mb, m.mb_per_mp, m.mb_per_kkp, m.base_s, m.s_per_mp) == OLD_DETECTOR_MODELS[name]
    key = {"sift": "n_features", "orb": "n_features", "gftt": "max_corners", "keynet": "num_features",
           "disk": "max_num_keypoints", "aliked": "max_num_keypoints", "xfeat": "top_k",
           "superpoint": "max_keypoints", "dedode": "n", "keynet_affnet_hardnet": "num_features"}.get(name)
    assert det.cap_of({}) is None
    if key:
        assert det.cap_of({key: 300}) == 300
        assert det.cap_of({key: 0}) is None
    else:
        assert det.cap_of({"n_features": 300, "max_corners": 300, "num_features": 300}) is None
    params = {}
    if name == "keynet":
        params = {"weights": str(tmp_path / "k.pth"), "orinet_weights": "o.pth", "affnet_weights": None,
                  "device": "cuda", "threads": 2}
    if name in NEW_JOINT:
        params = {"weights": str(tmp_path / "k.pth"), "device": "cuda", "threads": 2}
    assert det.runtime_of(params) == ("torch" if name == "keynet" or name in NEW_JOINT else "numpy")
    for fn in (needs_learned_extra, job_resources, model_files):
        assert fn(params, detector=name) == fn(params), (fn.__name__, name)
    assert det.weights_labels_of(params) == conventional_weights_labels(params)


@pytest.mark.parametrize("source", ["locked", "precomputed"])
def test_a_set_read_from_files_runs_nothing_of_its_own(source):
    """Whatever its params hold (here keys the learned families' conventions would read as a torch
    network and a weights file), a set read from files runs no network and names no file."""
    params = {"device": "cuda", "threads": 2, "weights": "w.pth"}
    for fn, want in ((needs_learned_extra, False), (job_resources, {"threads": 1, "gpu": 0}), (model_files, [])):
        assert fn(params, detector=source) == want


def test_a_detector_without_a_model_of_its_own_has_opencv_sifts():
    assert DETECTORS["sift"].model == OPENCV_DETECTOR


# ----------------------------------------------------------------------------- no family named outside the family


@pytest.mark.parametrize("module", ["jobresources.py", "config.py"])
def test_jobresources_and_config_name_no_family_or_detector(module):
    names = set(family_names()) | set(DETECTORS)
    source = (PKG / module).read_text()
    found = sorted({n for n in names if re.search(rf"""["']{re.escape(n)}["']""", source)})
    assert not found, f"{module} names {', '.join(found)}: declare the fact on the family (descbench.jobfacts)"


def test_a_familys_opaque_params_are_left_to_its_user_code(monkeypatch):
    """The python family declares its kwargs opaque (the callable's own values): a NaN there is
    passed on, a NaN in a checked key is refused naming the key."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "data"))
    cfg = {"keypoint_sets": {"sift": {"detector": "sift"}},
           "descriptors": {"mine": {"family": "python", "params": {"callable": "my_descriptors:mean_patch",
                                                                    "kwargs": {"radius": float("nan")}}}}}
    out = validate_config(cfg, SCHEMA)
    assert out["descriptors"]["mine"]["params"]["kwargs"]["radius"] != out["descriptors"]["mine"]["params"]["kwargs"]["radius"]
    from descbench.errors import ConfigError

    cfg["scoring"] = {"tau_px": float("nan")}
    with pytest.raises(ConfigError, match=r"'scoring\.tau_px': nan is not a finite number"):
        validate_config(cfg, SCHEMA)
