"""The documentation: README.md is a landing page, the MkDocs site builds without a warning, and its
generated configuration reference lists every key of the schema.

`mkdocs build --strict` (mkdocs.yml sets `strict` and validation of every link, anchor and nav
entry to warnings) fails on a broken link, a missing anchor, a page left out of the navigation, a
docstring mkdocstrings cannot render or a failing generator (docs/_hooks/generate.py). The site is
built once per test session into a temporary folder, never into the checkout.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
README_MAX_LINES = 150

pytest.importorskip("mkdocs", reason='the docs tests need the test extra: pip install -e ".[test]"')


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # the package imported by the hooks and mkdocstrings is this checkout's workflow/, whatever is installed
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "workflow"), os.environ.get("PYTHONPATH")) if p)}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}"
    assert "WARNING" not in res.stderr, res.stderr[-6000:]
    return out


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page (tags removed, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", (site / page / "index.html").read_text()))


def schema_keys(node, out: set[str] | None = None) -> set[str]:
    """Every name under any ``properties`` mapping of a JSON schema, at any depth (definitions,
    ``oneOf`` branches, ``if``/``then`` included): the keys a config may hold."""
    out = set() if out is None else out
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "properties" and isinstance(v, dict):
                out |= set(v)
            schema_keys(v, out)
    elif isinstance(node, list):
        for v in node:
            schema_keys(v, out)
    return out


def test_readme_is_a_landing_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}: move the rest to docs/"


def test_readme_links_resolve():
    """README's relative links (rendered on the repository host, not by mkdocs) name existing files."""
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert targets
    missing = [t for t in targets if not t.startswith(("http:", "https:")) and not (ROOT / t).exists()]
    assert not missing, missing


def test_mkdocs_build_strict(site):
    for page in ("index.html", "reference/config/index.html", "reference/families/index.html",
                 "reference/columns/index.html", "changelog/index.html", "guide/metrics/retrieval/index.html"):
        assert (site / page).is_file(), page


def page_sections(site: Path, page: str) -> dict[str, str]:
    """heading text -> the visible text under it, up to the next h2/h3 heading."""
    raw = (site / page / "index.html").read_text()
    raw = raw[raw.index("<article"):]
    out = {}
    for chunk in re.split(r"<h[23][^>]*>", raw)[1:]:
        head, _, body = chunk.partition("</h")
        head = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", head)).replace("\u00b6", " ").split())
        out[head] = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return out


def mentions(text: str, key: str) -> bool:
    return re.search(rf"(^|[\s.]){re.escape(key)}(\s|$|[.\[])", text, re.M) is not None


def test_config_reference_lists_every_schema_key(site):
    """Every key of the schema appears on the generated page, in the section of its top-level key
    (or of its ``definitions`` entry), so that a section or key the generator drops fails here."""
    schema = yaml.safe_load(SCHEMA.read_text())
    sections = page_sections(site, "reference/config")
    assert len(schema_keys(schema)) > 100
    missing = []
    for key, node in schema["properties"].items():
        text = sections.get(key, sections.get("Top-level keys and sections", ""))
        missing += [f"{key}: {k}" for k in sorted({key} | schema_keys(node)) if not mentions(text, k)]
    for name, node in schema.get("definitions", {}).items():
        if isinstance(node, dict) and "properties" in node:
            text = sections.get(name, "")
            missing += [f"definitions.{name}: {k}" for k in sorted(schema_keys(node)) if not mentions(text, k)]
    assert not missing, f"the generated configuration reference lacks {missing}"


def test_families_reference_lists_every_family(site):
    sys.path.insert(0, str(ROOT / "workflow"))
    from descbench.descriptors import family_names

    text = page_text(site, "reference/families")
    names = family_names()
    assert {"sift", "rootsift", "hardnet", "dsp", "composite"} <= set(names)
    assert [n for n in names if not re.search(rf"\s{re.escape(n)}\s", text)] == []


def test_metric_pages_render_the_module_docstrings(site):
    """Each definition is written once, in its module; the page shows it."""
    import descbench.metrics.ap as ap

    text = " ".join(page_text(site, "guide/metrics/verification").split())
    first = " ".join(re.sub(r"[*`]", "", ap.__doc__.split("\n\n")[0]).split())
    assert first in text


def test_outputs_page_renders_the_timing_definitions(site):
    """Which jobs a timings row counts, and what a job's timing file holds: defined once, in their modules."""
    text = " ".join(page_text(site, "guide/outputs").split())
    assert "Which jobs a row counts" in text and "A derived set counts its own jobs only" in text  # descbench.report.timings
    assert "cpu_time_ms : the CPU time the process and its children used" in text  # descbench.jobtiming
    assert "Jobs without a timing file." in text and "nothing reruns on upgrade" in text  # results made before timings
