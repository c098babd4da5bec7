"""Robust model estimators (layer 1): pure computations on matched points, no file I/O.

:mod:`descbench.estimators.homography`: glue-factory's homography estimators (a score-weighted
DLT, OpenCV's RANSAC family and PoseLib) behind one function and one registry of names.
:mod:`descbench.estimators.relative_pose`: glue-factory's relative pose estimators (OpenCV's
essential matrix with RANSAC or MAGSAC++, PoseLib).
"""

from __future__ import annotations

from collections.abc import Sequence

from descbench.errors import ConfigError


def import_poselib(where: str, what: str, opencv_alternatives: Sequence[str]):
    """The ``poselib`` module (descbench's optional ``estimators`` extra), imported when an
    estimator needs it; ConfigError naming ``where`` and ``what`` (the estimator) and the fix
    otherwise."""
    try:
        import poselib
    except ImportError:
        raise ConfigError(f"{where}: {what} 'poselib' needs the PoseLib package, which is not "
                          "installed; fix: pip install poselib (descbench's `estimators` extra: pip install -e "
                          "'.[estimators]'), or choose an OpenCV estimator: "
                          f"{', '.join(opencv_alternatives)}") from None
    return poselib
