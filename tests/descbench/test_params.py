"""One parameter truth (descbench.params): every parameter is declared once, with its default.

- every typed params dataclass has no default of its own: each field default is the schema's
  default of the config key the field is read from, and it is built from the validated config by
  one generic constructor that refuses a missing key;
- every descriptor family's ``PARAMS_SCHEMA`` fragment covers exactly the keys the family reads,
  rejects unknown keys, and is checked at config validation (the DAG build), with errors naming
  the key path, the value and the allowed values;
- the patch settings are the schema's; config validation keeps only the rules the schema cannot
  state (patches.checks.check_source, describe._check_geometry).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml

import descbench
from descbench import params as P
from descbench.config import validate_config
from descbench.descriptors import FAMILY_MODULES, _registry, check_descriptor_params, compute_descriptors, family_names
from descbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))  # my_descriptors (the python family's callable)
BASE = {"keypoint_sets": {"s": {"detector": "sift"}}, "descriptors": {"d": {"family": "sift"}}}

# Params dataclasses whose fields are not config_fields: field -> (config key, convert). None left:
# every params class is a ConfigParams (test_every_params_dataclass_default_is_the_schema_default fails on one that is not).
FOREIGN: dict = {}


def all_params_dataclasses() -> dict[str, type]:
    """Every dataclass named ``*Params`` defined in the descbench package."""
    out = {}
    for mod in pkgutil.walk_packages(descbench.__path__, "descbench."):
        if mod.name.endswith("__main__") or ".report." in mod.name or mod.name == "descbench.cli":
            continue
        m = importlib.import_module(mod.name)
        for name, obj in vars(m).items():
            if name.endswith("Params") and dataclasses.is_dataclass(obj) and obj.__module__ == m.__name__:
                out[name] = obj
    import descbench.metrics.bootstrap as bootstrap

    out["BootstrapParams"] = bootstrap.BootstrapParams
    return out


def keys_of(name: str, cls) -> dict:
    if issubclass(cls, P.ConfigParams):
        return P.config_keys(cls)
    spec = FOREIGN[name]
    if isinstance(spec, str):
        module, attr = spec.split(":")
        return getattr(importlib.import_module(module), attr)
    return spec


# ----------------------------------------------------------------------------- no second default


def test_every_params_dataclass_default_is_the_schema_default():
    classes = all_params_dataclasses()
    assert {"RetrievalParams", "BojanicParams", "MatchingParams", "PatchGenParams", "ClassifierParams"} <= set(classes)
    for name, cls in classes.items():
        assert issubclass(cls, P.ConfigParams) or name in FOREIGN, f"{name}: make its fields config_fields"
        keys = keys_of(name, cls)
        assert set(keys) == {f.name for f in dataclasses.fields(cls)}, name
        for f in dataclasses.fields(cls):
            key, convert = keys[f.name]
            want = P.schema_default(key)
            want = convert(want) if convert else want
            got = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assert got == want and type(got) is type(want), f"{name}.{f.name} = {got!r}, schema {key}: {want!r}"
            kind = P.schema_node(key).get("type")  # a typed field holds the schema's type
            if kind in ("integer", "number"):
                assert type(got) is {"integer": int, "number": float}[kind], f"{name}.{f.name}: {type(got).__name__}, schema {kind}"


def test_the_drifted_gt_default_is_the_schema_one():
    from descbench.metrics.bojanic import BojanicParams
    from descbench.metrics.retrieval import RetrievalParams

    gt = P.schema_default("scoring.gt")
    assert gt == validate_config(BASE, SCHEMA)["scoring"]["gt"] == "closest_oriented"
    assert RetrievalParams().gt == BojanicParams().gt == gt


def test_config_fields_come_only_from_config_field():
    """A field with a literal default is refused by the generic constructor's key map."""

    @dataclasses.dataclass(frozen=True)
    class Drifted(P.ConfigParams):
        tau_px: float = P.config_field("scoring.tau_px", float)
        gt: str = "closest"

    with pytest.raises(TypeError, match=r"Drifted\.gt is not a config_field"):
        P.config_keys(Drifted)


def test_params_are_built_from_the_validated_sections():
    from descbench.tasks.matching import matching_params
    from descbench.metrics.bojanic import BojanicParams
    from descbench.metrics.classifier import ClassifierParams
    from descbench.metrics.matching import MatchingParams
    from descbench.metrics.retrieval import RetrievalParams
    from descbench.patches.generate import PatchGenParams

    cfg = validate_config(BASE, SCHEMA)
    sc, ver, mat = cfg["scoring"], cfg["verification"], cfg["matching"]
    # the default config gives the schema defaults, with the types the metrics use
    assert RetrievalParams.from_config(sc) == RetrievalParams()
    assert BojanicParams.from_config(scoring=sc, verification=ver) == BojanicParams()
    assert matching_params(sc, mat) == (MatchingParams(), ClassifierParams())
    assert PatchGenParams.from_config(cfg["patches"]["generate"]) == PatchGenParams()
    # every field is taken from its key
    cfg = validate_config({**BASE, "scoring": {"tau_px": 2, "gt": "closest", "chunk_mb": 8},
                           "verification": {"candidates": "all", "ap_convention": "tie_aware", "convention": "workbench"},
                           "matching": {"mma_thresholds": [1, 2], "ransac_seed": 4, "classifier_epsilon_px": 1}}, SCHEMA)
    sc, ver, mat = cfg["scoring"], cfg["verification"], cfg["matching"]
    b = BojanicParams.from_config(scoring=sc, verification=ver)
    assert (b.tau_px, b.gt, b.chunk_mb, b.candidates, b.ap_convention, b.convention) == (2.0, "closest", 8.0, "all", "tie_aware", "workbench")
    assert isinstance(b.tau_px, float) and isinstance(b.chunk_mb, float)
    m, c = matching_params(sc, mat)
    assert (m.tau_px, m.mma_thresholds, m.ransac_seed, m.chunk_mb, c.epsilon_px, c.chunk_mb) == (2.0, (1, 2), 4, 8.0, 1.0, 8.0)
    assert RetrievalParams.from_config(sc) == RetrievalParams(tau_px=2.0, gt="closest", chunk_mb=8.0)


@pytest.mark.bad_input
def test_generic_constructor_refuses_a_missing_key():
    from descbench.tasks.matching import matching_params
    from descbench.metrics.bojanic import BojanicParams

    cfg = validate_config(BASE, SCHEMA)
    ver = {k: v for k, v in cfg["verification"].items() if k != "convention"}
    with pytest.raises(ConfigError, match=r"BojanicParams\.convention.*'verification\.convention'"):
        BojanicParams.from_config(scoring=cfg["scoring"], verification=ver)
    with pytest.raises(ConfigError, match=r"no 'verification' section"):
        BojanicParams.from_config(scoring=cfg["scoring"])
    with pytest.raises(TypeError, match="by keyword"):
        BojanicParams.from_config(cfg["scoring"])
    mat = {k: v for k, v in cfg["matching"].items() if k != "classifier_epsilon_px"}
    with pytest.raises(ConfigError, match=r"ClassifierParams\.epsilon_px.*'matching\.classifier_epsilon_px'"):
        matching_params(cfg["scoring"], mat)


# ----------------------------------------------------------------------------- descriptor families


def test_every_family_module_declares_its_params_schema():
    reg = _registry()
    seen = set()
    for module in FAMILY_MODULES:
        m = importlib.import_module(f"descbench.descriptors.{module}")
        names = {f.name for f in m.FAMILIES}
        assert set(m.PARAMS_SCHEMA) == names, module
        for fam in m.FAMILIES:
            assert reg[fam.name].params_schema is m.PARAMS_SCHEMA[fam.name]
        seen |= names
    assert seen == set(family_names())


# required keys whose value is not a string: a schema-valid example (the family's check does the rest)
REQUIRED_EXAMPLE = {"stack": {"parts": []}, "dsp": {"base": {"family": "sift"}},
                    "composite": {"components": [{"descriptor": "d"}], "aggregation": "average"}}


@pytest.mark.parametrize("family", family_names())
def test_family_fragment_is_closed_valid_and_its_defaults_pass(family):
    frag = _registry()[family].params_schema
    jsonschema.Draft202012Validator.check_schema(frag)
    assert frag["type"] == "object" and frag["additionalProperties"] is False
    for key, node in frag["properties"].items():
        assert "default" in node or key in frag.get("required", []), f"{family}.{key}: no default and not required"
    defaults = P.fragment_defaults(frag)
    jsonschema.Draft202012Validator(frag).validate({**defaults, **{k: "x" for k in frag.get("required", [])}}
                                                    if family not in REQUIRED_EXAMPLE else {**defaults, **REQUIRED_EXAMPLE[family]})
    with pytest.raises(ConfigError, match=rf"unknown config key 'descriptors\.d\.params\.no_such_key'.*'{family}' takes"):
        check_descriptor_params(family, {"no_such_key": 1}, "descriptors.d.params")


def test_family_scale_space_defaults_are_the_detectors():
    """akaze / kaze (and akaze_kaze) name their scale space as the akaze / kaze detectors do, with
    the same defaults (a keypoint set with the same scale space keeps the detector's levels)."""
    schema = P.config_schema()
    for family, detector in (("akaze", "akaze"), ("akaze_kaze", "akaze"), ("kaze", "kaze")):
        fam = P.fragment_defaults(_registry()[family].params_schema)
        det = P.fragment_defaults(schema["definitions"][f"{detector}_detector_params"])
        for key in ("n_octaves", "n_octave_layers", "diffusivity"):
            assert fam[key] == det[key], (family, key)
            assert (_registry()[family].params_schema["properties"][key]["enum" if key == "diffusivity" else "type"]
                    == schema["definitions"][f"{detector}_detector_params"]["properties"][key]["enum" if key == "diffusivity" else "type"])


class Reads(dict):
    """A params dict that records every key a family asks for."""

    def __init__(self, *args, log: set):
        super().__init__(*args)
        self.log = log

    def __getitem__(self, key):
        self.log.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.log.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.log.add(key)
        return super().__contains__(key)


EXAMPLE = {"python": {"callable": "my_descriptors:mean_patch"}, "stack": {"parts": [{"family": "sift"}, {"family": "rootsift"}]},
           "dsp": {"base": {"family": "sift"}},
           **{f: {"weights": "random"} for f in ("hardnet", "hardnet8", "sosnet", "hynet", "tfeat", "l2net", "disk", "aliked", "xfeat",
                                                     "superpoint", "dedode", "keynet_affnet_hardnet")}}
# precomputed reads only its keypoint set's params (the precomputed detector's definition), never its
# own; composite is computed by its job from its components' files (tests/descbench/descriptors/test_composite.py reads
# every one of its keys through descbench.descriptors.composite.aggregate)
NOT_COMPUTED = {"precomputed", "composite"}


@pytest.fixture(scope="module", autouse=True)
def onnx_example(tmp_path_factory):
    """A tiny ONNX model for the onnx family's example params (its ``model`` is required)."""
    import onnx
    from onnx import TensorProto, helper

    path = tmp_path_factory.mktemp("onnx") / "flat.onnx"
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 32 * 32])
    graph = helper.make_graph([helper.make_node("Reshape", ["patch", "shape"], ["desc"])], "flat",
                              [helper.make_tensor_value_info("patch", TensorProto.FLOAT, ["B", 1, 32, 32])],
                              [helper.make_tensor_value_info("desc", TensorProto.FLOAT, ["B", 32 * 32])], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    EXAMPLE["onnx"] = {"model": str(path)}
    yield
    EXAMPLE.pop("onnx")


@pytest.fixture(scope="module")
def image_kps(pristine):
    from descbench.datasets.layout import read_image
    from descbench.keypoints.detectors import detect

    img = pristine / "1.ppm"
    kps = detect("sift", read_image(img), P.fragment_defaults(P.config_schema()["definitions"]["sift_detector_params"]))
    big = np.flatnonzero((kps.size >= 8) & (kps.size <= 30))
    return img, kps.take(big[:: max(1, len(big) // 6)][:6])


@pytest.mark.parametrize("family", sorted(set(family_names()) - NOT_COMPUTED))
def test_family_reads_exactly_the_keys_its_fragment_declares(family, image_kps):
    img, kps = image_kps
    frag = _registry()[family].params_schema
    filled = check_descriptor_params(family, EXAMPLE.get(family, {}), "descriptors.d.params")
    read: set = set()
    kpset = {"detector": "sift", "params": P.fragment_defaults(P.config_schema()["definitions"]["sift_detector_params"])}
    desc = compute_descriptors(family, Reads(filled, log=read), img, kps, kpset, "t")
    assert desc.shape[0] == len(kps)
    assert read <= set(frag["properties"]), f"{family} reads undeclared params {sorted(read - set(frag['properties']))}"
    assert read == set(frag["properties"]), f"{family} declares params it never reads: {sorted(set(frag['properties']) - read)}"


def test_precomputed_family_has_no_params():
    assert _registry()["precomputed"].params_schema["properties"] == {}


@pytest.mark.bad_input
@pytest.mark.parametrize("family, params, message", [
    ("brief", {"bytes": 17}, r"descriptors\.x\.params\.bytes: 17 is not one of 16, 32, 64; .*default 32"),
    ("orb", {"n_levels": "eight"}, r"descriptors\.x\.params\.n_levels: 'eight' is not of type integer; fix: use an integer >= 1"),
    ("orb", {"scale_factor": 1.0}, r"descriptors\.x\.params\.scale_factor: 1\.0 must be greater than 1"),
    ("latch", {"bytes": 3}, r"descriptors\.x\.params\.bytes: 3 is not one of 1, 2, 4, 8, 16, 32, 64"),
    ("akaze", {"descriptor_channels": 4}, r"descriptors\.x\.params\.descriptor_channels: 4 is not one of 1, 2, 3"),
    ("akaze", {"descriptor_size": 500}, r"descriptors\.x\.params\.descriptor_size: 500 is more than the maximum 486"),
    ("daisy", {"q_hist": 0}, r"descriptors\.x\.params\.q_hist: 0 is less than the minimum 1"),
    ("vgg", {"desc": 100}, r"descriptors\.x\.params\.desc: 100 is not one of 120, 80, 64, 48"),
    ("beblid", {"scale_factor": 0}, r"descriptors\.x\.params\.scale_factor: 0 must be greater than 0; fix: use a number or null"),
    ("surf", {"upright": "yes"}, r"descriptors\.x\.params\.upright: 'yes' is not of type boolean"),
    ("dspsift", {"scales": [1, -2]}, r"descriptors\.x\.params\.scales\.1: -2 must be greater than 0"),
    ("python", {}, r"descriptors\.x\.params\.callable: missing"),
    ("sift", {"convention": "vl"}, r"descriptors\.x\.params\.convention: 'vl' is not one of 'opencv', 'workbench'"),
])
def test_descriptor_params_are_validated_when_the_dag_is_built(family, params, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({**BASE, "descriptors": {"x": {"family": family, "params": params}}}, SCHEMA)


@pytest.mark.bad_input
def test_stack_parts_are_validated_by_their_family():
    parts = [{"family": "sift"}, {"family": "brief", "params": {"bytes": 17}}]
    with pytest.raises(ConfigError, match=r"descriptors\.x\.params\.parts\.1\.params\.bytes: 17 is not one of 16, 32, 64"):
        validate_config({**BASE, "descriptors": {"x": {"family": "stack", "params": {"parts": parts}}}}, SCHEMA)


def test_rootsift_is_sift_at_the_sift_familys_defaults():
    from descbench.descriptors import rootsift

    assert rootsift.SIFT_PARAMS == check_descriptor_params("sift", {}, "d")


# ----------------------------------------------------------------------------- patches


PATCHES = {"enabled": True, "descriptors": ["d"]}


@pytest.mark.bad_input
@pytest.mark.parametrize("generate, message", [
    ({"max_patches": 0}, r"'patches\.generate\.max_patches': 0 is less than the minimum of 1"),
    ({"overlap_threshold": 1.5}, r"'patches\.generate\.overlap_threshold'"),
    ({"jitter": {"hard": {"translation": -0.1}}}, r"'patches\.generate\.jitter\.hard\.translation'"),
    ({"jitter": {"extreme": {}}}, r"unknown config key 'patches\.generate\.jitter\.extreme'"),
    ({"magnificaton": 4}, r"unknown config key 'patches\.generate\.magnificaton' \(did you mean 'patches\.generate\.magnification'\?\)"),
    ({"magnification": float("inf")}, r"'patches\.generate\.magnification': inf is not a finite number"),
])
def test_patch_generation_keys_are_the_schemas(generate, message):
    with pytest.raises(ConfigError, match=message):
        validate_config({**BASE, "descriptors": {"d": {"family": "sift"}}, "patches": {**PATCHES, "generate": generate}}, SCHEMA)


def test_check_source_does_not_reparse_the_generation_section(monkeypatch):
    """Config validation checks patches.generate with the schema; it does not build PatchGenParams."""
    from descbench.patches import generate

    def refuse(self):
        raise AssertionError("PatchGenParams built at config validation")

    monkeypatch.setattr(generate.PatchGenParams, "__post_init__", refuse)
    cfg = validate_config({**BASE, "patches": {**PATCHES, "generate": {"max_patches": 7}}}, SCHEMA)
    assert cfg["patches"]["generate"]["max_patches"] == 7 and cfg["patches"]["generate"]["jitter"]["easy"]["rotation_deg"] == 7.5


@pytest.mark.bad_input
def test_patch_geometry_across_keys_is_checked_at_validation():
    """The support a family's params give (65 / scale_factor) must be finite: a rule across the
    descriptor's params and the patch description that only validation can check."""
    bad = {"x": {"family": "vgg", "params": {"scale_factor": 1e-310}}}
    with pytest.raises(ConfigError, match=r"'descriptors\.x\.params\.scale_factor': it gives the patches' centre keypoint a size of inf"):
        validate_config({**BASE, "descriptors": bad, "patches": {"enabled": True, "descriptors": ["x"]}}, SCHEMA)
    stack = {"x": {"family": "stack", "params": {"parts": [{"family": "sift"}, {"family": "vgg", "params": {"scale_factor": 1e-310}}]}}}
    with pytest.raises(ConfigError, match=r"'descriptors\.x\.params\.parts\.1\.params\.scale_factor'"):
        validate_config({**BASE, "descriptors": stack, "patches": {"enabled": True, "descriptors": ["x"]}}, SCHEMA)
    validate_config({**BASE, "descriptors": bad}, SCHEMA)  # without patches the vgg descriptor is fine


def test_centre_keypoint_names_are_the_schemas():
    from descbench.patches.describe import SIFT_OCTAVES
    from descbench.patches.checks import CENTRE_KEYPOINTS

    assert list(CENTRE_KEYPOINTS) == P.schema_node("patches.centre_keypoint")["enum"]
    assert all(g["sift_octave"] in SIFT_OCTAVES for g in CENTRE_KEYPOINTS.values())


def test_patch_gen_params_from_a_partial_mapping_take_the_schema_defaults():
    from descbench.patches.generate import DEFAULT_JITTER, PatchGenParams

    p = PatchGenParams.from_mapping({"seed": 3})
    assert p == PatchGenParams(seed=3) and p.jitter == DEFAULT_JITTER
    assert P.fill_defaults(P.schema_node("patches.generate"), {"seed": 3}) == p.to_dict()
    with pytest.raises(ConfigError, match=r"unknown config key 'g\.jitter\.hard\.translaton' \(did you mean 'translation'\?\); allowed keys under 'g\.jitter\.hard'"):
        PatchGenParams.from_mapping({"jitter": {"hard": {"translaton": 0.1}}}, "g")
    with pytest.raises(ConfigError, match=r"patch generation parameter 'jitter\.tough\.rotation_deg' is invalid: 200\.0 is more than"):
        PatchGenParams(jitter=(*DEFAULT_JITTER[:2], dataclasses.replace(DEFAULT_JITTER[2], rotation_deg=200.0)))


def test_params_module_reads_the_workflows_schema():
    assert P.SCHEMA_PATH == SCHEMA
    assert P.config_schema() == yaml.safe_load(SCHEMA.read_text())


def test_sift_detector_defaults_are_the_schemas_and_opencvs():
    """make_sift fills left-out keys from the schema (no literal of its own); the schema's
    sift_detector_params defaults are OpenCV's own SIFT defaults."""
    import cv2

    from descbench.keypoints.sift import make_sift

    ours, cv = make_sift({}), cv2.SIFT_create()
    get = ("getNFeatures", "getNOctaveLayers", "getContrastThreshold", "getEdgeThreshold", "getSigma")
    assert [getattr(ours, g)() for g in get] == [getattr(cv, g)() for g in get]
    assert make_sift({"n_octave_layers": 5}).getNOctaveLayers() == 5
