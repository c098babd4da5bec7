"""HPatches sequences: obtain (local archive or resumable download), extract, validate."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from descbench.datasets import HPATCHES_ROOT, hpatches_scenes
from descbench.datasets.download import extract_archive, fetch_archive, find_local_archive
from descbench.datasets.layout import TARGET_IMAGES, read_homography, scene_files
from descbench.errors import DataError
from descbench.fileops import write_text_atomic


def validate_layout(root: Path, scenes: list[str]) -> None:
    """Every scene folder has its 6 images and 5 valid homographies (images are read later)."""
    problems = []
    for s in scenes:
        try:
            files = scene_files(root / s)
            for k in TARGET_IMAGES:
                read_homography(files.homographies[k])
        except DataError as exc:
            problems.append(str(exc))
    if problems:
        raise DataError(f"{len(problems)} of {len(scenes)} HPatches scenes under {root} are invalid:\n" + "\n".join(problems[:10]))


def _holds_no_file(root: Path) -> bool:
    return root.is_dir() and not any(p.is_file() for p in root.rglob("*"))


def obtain(urls: list[str], sha256: str | None, data_dir: Path, flag: Path | None = None) -> Path:
    """Return the validated ``<data_dir>/hpatches/hpatches-sequences-release`` (all 116 scenes).

    An archive already placed in ``<data_dir>/hpatches/`` is used as is; otherwise the URLs are
    tried in order (resuming a partial download). After validation, ``flag`` is written.
    """
    base = Path(data_dir) / "hpatches"
    root = base / HPATCHES_ROOT
    if _holds_no_file(root):  # empty folders left by an earlier failed attempt
        shutil.rmtree(root)
    if not root.is_dir():
        archive = find_local_archive(base) or fetch_archive(urls, base, sha256=sha256, progress=True)
        print(f"extracting {archive}", file=sys.stderr)
        extract_archive(archive, base, expected_root=HPATCHES_ROOT)
    validate_layout(root, hpatches_scenes("full"))
    if flag is not None:
        write_text_atomic(flag, f"validated {len(hpatches_scenes('full'))} scenes under {root}\n")
    return root
