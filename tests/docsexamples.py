"""The code examples of the documentation, for the tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def docs_example(page: str, heading: str) -> str:
    """The first ```python block after the line ``heading`` in ``docs/<page>``."""
    text = (DOCS / page).read_text()
    m = re.search(rf"^{re.escape(heading)}\n.*?^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert m, f"docs/{page} has no python block under {heading!r}"
    return m.group(1)
