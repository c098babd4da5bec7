"""The public Python API (descbench.api): the workflow's own functions, each with examples that
run, and signatures that change only with the changelog."""

from __future__ import annotations

import doctest
import inspect
import re
from pathlib import Path

import pytest

import descbench
from descbench import api

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"
PUBLIC = [n for n in api.__all__ if n != "__version__"]


def signature_line(name: str) -> str:
    obj = getattr(api, name)
    return f"{name}{inspect.signature(obj)}"


def changelog_api_block() -> list[str]:
    """The lines of the fenced block under CHANGELOG.md's '## Public API' heading."""
    text = CHANGELOG.read_text()
    m = re.search(r"^## Public API\n.*?^```text\n(.*?)^```", text, flags=re.S | re.M)
    assert m, "CHANGELOG.md has no '## Public API' section with a ```text block of signatures"
    return [line for line in m.group(1).splitlines() if line.strip()]


def test_every_public_name_is_the_workflows_own_object():
    """Re-exported, not wrapped: a number from the API is the workflow's number."""
    assert api.__version__ == descbench.__version__
    assert len(set(api.__all__)) == len(api.__all__)
    for name in PUBLIC:
        obj = getattr(api, name)
        home = inspect.getmodule(obj)
        assert home is not api and home.__name__.startswith("descbench."), name
        assert getattr(home, name) is obj, f"{name} is not the object of {home.__name__}"


@pytest.mark.parametrize("name", [n for n in PUBLIC if inspect.isfunction(getattr(api, n))])
def test_every_public_function_has_examples_that_run(name):
    obj = getattr(api, name)
    home = inspect.getmodule(obj)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, module=home, globs=dict(vars(home)))
    examples = sum(len(t.examples) for t in tests)
    assert examples >= 2, f"{name}: its docstring needs examples (>>>), found {examples}"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)"


def test_public_signatures_equal_the_changelog_list():
    """Changing a public signature (or adding / removing a name) fails here until CHANGELOG.md's
    'Public API' list says so (and the changelog entry says why: semver)."""
    current = [signature_line(n) for n in PUBLIC]
    listed = changelog_api_block()
    assert listed == current, (
        "descbench.api changed; update CHANGELOG.md '## Public API' to:\n" + "\n".join(current)
    )
