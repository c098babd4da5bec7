"""Headless Chromium for the tests of HTML pages (the inspector's): a screenshot and the DOM as the
browser built it. Skips when Chromium is absent (Debian: apt-get install -y chromium; .ci/run does)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


def render(page: Path, work: Path, size: tuple[int, int] = (1280, 2000)):
    """``(grey pixels [h, w] of a screenshot, the DOM as text)`` of the page at ``page``."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install it (Debian: apt-get install -y chromium; .ci/run does) to render "
                    "HTML pages in a browser")
    import cv2

    flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={work / 'chromium-profile'}"]
    png = work / "page.png"
    res = subprocess.run(flags + [f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", Path(page).resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert png.is_file(), res.stderr[-2000:]
    pixels = cv2.imread(str(png), cv2.IMREAD_GRAYSCALE).astype(float)
    dom = subprocess.run(flags + ["--dump-dom", Path(page).resolve().as_uri()], capture_output=True, text=True, timeout=120).stdout
    return pixels, dom
