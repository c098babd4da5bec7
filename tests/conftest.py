"""Fixtures shared by the test modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from descbench.datasets.demo import generate_scene

DEMO_SCENE = "v_coins"


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo scene (HPatches layout), generated once per test session; never modify it."""
    out = tmp_path_factory.mktemp("pristine")
    generate_scene(DEMO_SCENE, out, seed=0)
    return out / DEMO_SCENE


@pytest.fixture
def scene(pristine: Path, tmp_path: Path) -> Path:
    """A fresh, valid copy of the demo scene in this test's tmp_path."""
    dst = tmp_path / "data" / DEMO_SCENE
    shutil.copytree(pristine, dst)
    return dst


def job_settings(printed: str, option: str, workdir: Path, line_has: str = "") -> list:
    """The JSON that each job printed by ``snakemake -p`` reads for ``option`` (``--sections``,
    ``--provenance``, ...): the workflow passes settings as spec files, ``--option @<file>``,
    relative to the working directory ``workdir``. Only lines containing ``line_has``."""
    import re
    import shlex

    from descbench.specfiles import read_spec

    out = []
    for line in printed.splitlines():
        if line_has not in line:
            continue
        for m in re.finditer(rf"{re.escape(option)} @(\S+)", line):
            out.append(read_spec(Path(workdir) / shlex.split(m.group(1))[0]))
    return out


def raises_naming(fn, *fragments: str, exc=None) -> str:
    """Call ``fn``; it must raise ``exc`` (default DataError) with every one of ``fragments`` in its
    message (the bad-input tests: an error names the file, the key and the fix). Returns the message."""
    from descbench.errors import DataError

    with pytest.raises(exc or DataError) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in error message: {msg}"
    return msg
