"""Published posed test sets, downloaded once: MegaDepth-1500 and ScanNet-1500 as cvg/glue-factory
ships them (``gluefactory/eval/megadepth1500.py`` and ``scannet1500.py`` at commit ``2d17e3b``, which
download the same archives).

``descbench posed-download <name> --data-dir data`` fetches the archive ``data/<name>.zip``
(resumable, checked against ``--sha256`` when given; an archive already placed there is used as is,
without network), extracts it safely (:func:`descbench.datasets.download.extract_archive`) into
``data/<name>/`` (its scene folder, ``data/<name>/<name>/``, glue-factory's layout) and validates every scene folder it holds
(:func:`descbench.datasets.layout.posed_scene_parts`: files, views, pairs, images). Then
``dataset: posed`` with ``posed.path: data/<name>`` evaluates it. Run it on a machine with internet
access (a cluster's submit host); the tests never download anything.

- ``megadepth1500``: one scene folder in glue-factory's ``posed_images`` layout (``views.txt``,
  ``pairs.txt``, ``images/``, ``depths/`` as HDF5, which need the ``interop`` extra): 1,500 pairs,
  evaluated in parts of at most 127 views.
- ``scannet1500``: one scene folder holding ``pairs_calibrated.txt`` (image paths relative to it,
  ``K0``, ``K1``, ``T_0to1``) and the images; no depth maps.

The archives' sha256 are not recorded here (this machine has no network to measure them): the
command prints the downloaded archive's, and writes it into the validation flag with the layout's
counts, so that a run's provenance can cite it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from descbench.errors import ConfigError, DataError

#: name -> the archive's URL(s) (glue-factory's) and what it holds.
PUBLISHED: dict[str, dict] = {
    "megadepth1500": {"urls": ("https://cvg-data.inf.ethz.ch/megadepth/megadepth1500.zip",),
                      "layout": "views.txt, pairs.txt, images/, depths/ (HDF5)"},
    "scannet1500": {"urls": ("https://cvg-data.inf.ethz.ch/scannet/scannet1500.zip",),
                    "layout": "pairs_calibrated.txt and the images it names"},
}
#: The flag written once a downloaded set is validated (in ``<data_dir>/<name>/``).
FLAG = "validated.json"


def dataset_dir(name: str, data_dir: Path | str) -> Path:
    """``<data_dir>/<name>``: the folder ``posed.path`` points at (it holds the set's scene folder)."""
    check_name(name)
    return Path(data_dir) / name


def check_name(name: str) -> str:
    if name not in PUBLISHED:
        raise ConfigError(f"{name!r} is not a published posed set descbench downloads; use one of {', '.join(PUBLISHED)}")
    return name


def validate(root: Path) -> dict:
    """Every scene folder under ``root`` read and checked (:func:`descbench.datasets.layout.posed_scene_parts`,
    then :func:`~descbench.datasets.layout.scene_files` of each part); ``{scene folder: {parts, pairs,
    images}}``. DataError naming the file otherwise, or when ``root`` holds no posed scene folder."""
    from descbench.datasets.layout import is_posed_folder, posed_scene_parts, scene_files

    found = {}
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not is_posed_folder(folder):
            raise DataError(f"{folder} is not a posed scene folder (no views.txt or pairs_calibrated.txt); a posed set's "
                            f"folder {root} holds only scene folders")
        parts = posed_scene_parts(folder)
        files = [scene_files(folder.parent / part) for part in parts]
        found[folder.name] = {"parts": len(parts), "pairs": sum(len(f.listed) for f in files),
                              "images": len({p for f in files for p in f.images})}
    if not found:
        raise DataError(f"{root} holds no posed scene folder")
    return found


def obtain(name: str, data_dir: Path | str, sha256: str | None = None, urls: list[str] | None = None) -> Path:
    """The validated ``<data_dir>/<name>`` of published set ``name`` (:data:`PUBLISHED`): the
    archive ``<data_dir>/<name>.zip`` found there or downloaded (resumable, checked against
    ``sha256`` when given), extracted into ``<data_dir>/<name>/`` (the archive's scene folder at its
    top level or one folder below), every scene checked (:func:`validate`), then :data:`FLAG`
    written with the archive's sha256 and the counts. An existing extraction is validated again,
    not re-extracted."""
    from descbench.datasets.download import extract_archive, fetch_archive, find_local_archive
    from descbench.datasets.layout import is_posed_folder
    from descbench.fileops import file_sha256, write_text_atomic

    base = dataset_dir(name, data_dir)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    archive = find_local_archive(data_dir, (f"{name}.zip", f"{name}.tar.gz"))
    if not base.is_dir():
        if archive is None:
            archive = fetch_archive(urls or list(PUBLISHED[name]["urls"]), data_dir, sha256=sha256, progress=True)
        print(f"extracting {archive}", file=sys.stderr)
        extract_archive(archive, data_dir, expected_root=name,
                        scene_parent=lambda folder: any(is_posed_folder(c) for c in folder.iterdir() if c.is_dir()),
                        what=f"posed scene folder ({PUBLISHED[name]['layout']}) at its top level or one folder below; "
                             f"it is not the {name} archive")
    found = validate(base)
    record = {"name": name, "archive": archive.name if archive else None,
              "archive_sha256": file_sha256(archive) if archive else None, "scenes": found}
    write_text_atomic(base / FLAG, json.dumps(record, indent=1, sort_keys=True) + "\n")
    counts = ", ".join(f"{k}: {v['pairs']} pairs, {v['images']} images" for k, v in found.items())
    print(f"{name}: validated {base} ({counts}); "
          f"archive sha256 {record['archive_sha256']}. Evaluate it with dataset: posed, posed.path: {base}", file=sys.stderr)
    return base
