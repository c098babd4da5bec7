"""Robust model estimators (layer 1): pure computations on matched points, no file I/O.

:mod:`descbench.estimators.homography`: glue-factory's homography estimators (a score-weighted
DLT, OpenCV's RANSAC family and PoseLib) behind one function and one registry of names.
:mod:`descbench.estimators.relative_pose`: glue-factory's relative pose estimators (OpenCV's
essential matrix with RANSAC or MAGSAC++, PoseLib, pycolmap).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from descbench.errors import ConfigError

#: The cvg/glue-factory commit whose source descbench's glue-factory protocols follow (estimators,
#: metrics, feature files); every "glue-factory's ..." in the docs means this version.
GLUEFACTORY_COMMIT = "2d17e3b3bd7d30f0c828d4c4d3eac4ecefbf283d"

#: The optional estimation libraries (descbench's ``estimators`` extra): module -> (its name, what
#: to install).
OPTIONAL_LIBRARIES = {"poselib": ("PoseLib", "pip install poselib"), "pycolmap": ("pycolmap", "pip install pycolmap")}


def import_library(name: str, where: str, what: str, alternatives: Sequence[str]):
    """The optional library ``name`` (:data:`OPTIONAL_LIBRARIES`), imported when an estimator
    needs it; ConfigError naming ``where`` and ``what`` (the estimator's kind), the install
    command and the ``alternatives`` (estimators that need nothing more) otherwise."""
    try:
        __import__(name)  # (the builtin: what a test's import hook sees)
        return sys.modules[name]
    except ImportError:
        package, install = OPTIONAL_LIBRARIES[name]
        raise ConfigError(f"{where}: {what} {name!r} needs the {package} package, which is not installed; fix: "
                          f"{install} (descbench's `estimators` extra: pip install -e "
                          f"'.[estimators]'), or choose an OpenCV estimator: {', '.join(alternatives)}") from None


def library_versions(libraries: Sequence[str] = ("opencv", "poselib")) -> dict:
    """The estimation libraries' versions, for a job's provenance: ``{"opencv": cv2.__version__,
    <optional library>: its version, or None when it is not installed}`` for each of
    ``libraries``."""
    import cv2

    out = {}
    for name in libraries:
        if name == "opencv":
            out[name] = cv2.__version__
            continue
        try:
            __import__(name)
        except ImportError:
            out[name] = None
            continue
        module = sys.modules[name]
        out[name] = str(getattr(module, "__version__", None) or "unknown")
    return out
