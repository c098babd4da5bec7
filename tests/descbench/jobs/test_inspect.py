"""descbench.jobs.inspect: the inspect command's bad input, on a hand-built run folder (the page
itself and the command on a real run: tests/descbench/report/test_inspect.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import raises_naming
from descbench.config import validate_config
from descbench.errors import DescbenchError
from descbench.jobs.inspect import inspect_run

ROOT = Path(__file__).resolve().parents[3]


def _fake_run(root: Path) -> Path:
    """A results folder with only the report specs of a run (sift on sift, 2 scenes)."""
    cfg = validate_config(yaml.safe_load((ROOT / "config.yaml").read_text()), ROOT / "workflow" / "schemas" / "config.schema.yaml")
    res = root / "results" / "demo"
    (res / "specs" / "report").mkdir(parents=True)
    for name, value in {"config": cfg, "scenes": ["i_a", "v_b"], "combos": [["sift", "sift"]]}.items():
        (res / "specs" / "report" / f"{name}.json").write_text(json.dumps({"value": value, "written": "x"}))
    return res


@pytest.mark.bad_input
def test_bad_input_names_the_path_and_the_fix(tmp_path, pristine):
    res = _fake_run(tmp_path)

    def run(results=res, kpset="sift", descriptors=("sift",), scenes=None):
        return lambda: inspect_run(results, kpset, list(descriptors), scenes, None, "mma_at_3")

    raises_naming(run(results=tmp_path / "nope"), str(tmp_path / "nope"), "does not exist", "--results", exc=DescbenchError)
    raises_naming(run(kpset="orb"), "'orb'", "use one of sift", exc=DescbenchError)
    raises_naming(run(descriptors=("sift", "hardnet")), "'hardnet'", "use one of sift", exc=DescbenchError)
    raises_naming(run(scenes=["v_zz"]), "'v_zz'", "i_a, v_b", exc=DescbenchError)
    raises_naming(run(), str(tmp_path / "data" / "demo" / "seed0" / "i_a"), "--data-dir", exc=DescbenchError)
    shutil.copytree(pristine, tmp_path / "data" / "demo" / "seed0" / "i_a")  # the scene's images are there, its results not
    raises_naming(run(), str(res / "keypoints" / "sift" / "batch000" / "i_a.parquet"), "rerun the workflow", exc=DescbenchError)
    (res / "specs" / "report" / "combos.json").unlink()
    raises_naming(run(), str(res / "specs" / "report" / "combos.json"), "finished run", exc=DescbenchError)
