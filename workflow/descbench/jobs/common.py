"""What several jobs share: reading a scene's keypoint and descriptor files, and the command-line
plumbing of every job module (JSON and ``@file`` settings, the batch and run options, the result
paths, per-job thread limits).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from descbench import io
from descbench.errors import DataError, DescbenchError
from descbench.keypoints import ImageKeypoints
from descbench.paths import ResultPaths, scene_batches


def load_keypoints(path: Path) -> tuple[dict[int, ImageKeypoints], dict]:
    """One scene's keypoint file: ``(per_image, meta)``, the keypoints of every image 1..n (an
    empty image too) and the file's provenance."""
    table, meta = io.read_table(path, io.KEYPOINTS)
    return _per_image(table, meta), meta


@dataclass
class SceneKeypoints:
    """One scene's keypoint file read once (:func:`read_keypoints`): the keypoints per image
    1..n, the provenance, and the SHA-256 of the bytes read (what descriptor files record as
    ``keypoints_sha256``)."""

    per_image: dict[int, ImageKeypoints]
    meta: dict
    sha256: str


def read_keypoints(path: Path) -> SceneKeypoints:
    """:func:`load_keypoints` with the file's digest, from one read of the file."""
    table, meta, sha = io.read_table_sha256(path, io.KEYPOINTS)
    return SceneKeypoints(_per_image(table, meta), meta, sha)


def _per_image(table, meta: dict) -> dict[int, ImageKeypoints]:
    image = io.column_array(table.column("image"))
    arrays = {f: io.column_array(table.column(f)) for f in ImageKeypoints.__dataclass_fields__}
    per_image = {}
    for k in range(1, len(meta["image_sizes"]) + 1):  # every image of the scene, an empty one too
        sel = np.flatnonzero(image == k)
        per_image[k] = ImageKeypoints(**{f: a[sel] for f, a in arrays.items()})
    return per_image


@dataclass
class SceneFeatures:
    """Keypoints and descriptors of one scene, per image 1..n, checked to belong together."""

    scene: str
    per_image: dict[int, ImageKeypoints]
    by_image: dict[int, np.ndarray]
    kmeta: dict
    dmeta: dict
    #: the descriptor file's SHA-256 (:func:`read_features` with ``with_sha256``), else None
    descriptors_sha256: str | None = None


def read_features(keypoints: Path, descriptors: Path, with_sha256: bool = False,
                  keypoints_read: SceneKeypoints | None = None) -> SceneFeatures:
    """Load one scene's keypoint and descriptor files; fail if they do not belong together (the
    descriptor file records the digest of another keypoint file). Each file is read once.
    ``with_sha256``: also the descriptor file's digest, of the bytes read (for a job that records
    it in its provenance). ``keypoints_read``: the keypoint file as the caller already read it
    (:func:`read_keypoints` of ``keypoints``), not read again."""
    kp = keypoints_read if keypoints_read is not None else read_keypoints(keypoints)
    per_image, kmeta = kp.per_image, kp.meta
    if with_sha256:
        dtable, dmeta, dsha = io.read_table_sha256(descriptors)
    else:
        (dtable, dmeta), dsha = io.read_table(descriptors), None
    if dmeta.get("keypoints_sha256") != kp.sha256:
        raise DataError(f"{descriptors} was computed from a different version of {keypoints}; rerun its descriptor job")
    desc = io.descriptors_array(dtable)
    dimage = io.column_array(dtable.column("image"))
    if desc.shape[0] != sum(len(v) for v in per_image.values()):
        raise DataError(f"{descriptors}: {desc.shape[0]} descriptors for {sum(len(v) for v in per_image.values())} keypoints "
                        f"of images 1..{len(per_image)}; rebuild it")
    by_image = {k: desc[dimage == k] for k in per_image}
    for k in per_image:
        if by_image[k].shape[0] != len(per_image[k]):
            raise DataError(f"{descriptors}: image {k} has {by_image[k].shape[0]} descriptors for {len(per_image[k])} keypoints; rebuild it")
    return SceneFeatures(kmeta.get("scene", Path(keypoints).stem), per_image, by_image, kmeta, dmeta, dsha)


# ----------------------------------------------------------------------------- command-line plumbing


def json_arg(text: str):
    """A JSON argument: the JSON itself, or ``@file``, a spec file holding it (the workflow's
    jobs get their settings as files: descbench.specfiles). A missing or malformed file is an
    error naming it."""
    if not text.startswith("@"):
        return json.loads(text)
    from descbench.specfiles import read_spec

    path = Path(text[1:])
    try:
        return read_spec(path)
    except OSError as exc:
        raise DescbenchError(f"cannot read the settings file {path} ({exc.strerror}); rerun the same snakemake command, "
                             "which writes it again") from None
    except ValueError as exc:
        raise DescbenchError(f"the settings file {path} is not valid JSON ({exc}); delete it and rerun the same "
                             "snakemake command, which writes it again") from None


def batch_args(p: argparse.ArgumentParser) -> None:
    """Which scene batch a job works on (descbench.paths.scene_batches of the scene list)."""
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<dataset tag>")
    p.add_argument("--scene-root", type=Path, required=True, help="the folder holding the scene folders")
    p.add_argument("--batches", required=True,
                   help="JSON {batch: [scenes]}: this job's batch, plus (score) every other batch, whose scenes give distractors")
    p.add_argument("--batch", required=True, help="this job's batch, e.g. batch000")
    p.add_argument("--threads", type=int, default=1)


#: The thread pools besides BLAS and torch that a job's ``--threads`` can size (:func:`limit_threads`).
POOLS = ("opencv", "numba")


def check_pools(pools: tuple[str, ...], who: str) -> tuple[str, ...]:
    """``pools`` if each is one of :data:`POOLS`; a ValueError naming ``who`` otherwise (a job
    module's declaration or a caller's argument: a programming error)."""
    unknown = set(pools) - set(POOLS)
    if unknown:
        raise ValueError(f"{who}: unknown thread pools {sorted(unknown)}; a pool is one of {', '.join(POOLS)}")
    return pools


@dataclass(frozen=True)
class JobCommand:
    """One subcommand of a job module, declared once by that module (its ``add_commands`` returns
    ``{command: JobCommand}``; a bare function is a command with the defaults), with what a
    process running it needs:

    * ``run``: the function running a parsed command;
    * ``pools``: the thread pools of :data:`POOLS` that its ``--threads`` sizes
      (:func:`limit_threads`; BLAS and torch always are): ``opencv`` where it detects, describes or
      resizes with OpenCV, ``numba`` where it runs the scoring kernels;
    * ``pandas``: False where its job processes run as if pandas were not installed
      (:func:`without_pandas`), i.e. nothing it runs imports pandas;
    * ``timing``: ``(stage, its keypoint set's argument, its descriptor's argument or None)`` where
      it writes a timing file into its output folder (:func:`job_timing`; stages
      :data:`descbench.jobtiming.STAGES` and :data:`descbench.jobtiming.MATCHER_STAGES`, whose
      commands also name their matcher, ``--matcher``).

    Calling it runs ``run``.
    """

    run: Callable[[argparse.Namespace], None]
    pools: tuple[str, ...] = ()
    pandas: bool = True
    timing: tuple[str, str, str | None] | None = None

    def __post_init__(self):  # found when the command line is built
        check_pools(self.pools, f"{self.run.__module__}.{self.run.__name__}")

    def __call__(self, a: argparse.Namespace) -> None:
        self.run(a)

    @classmethod
    def of(cls, job) -> JobCommand:
        """``job`` as a JobCommand: itself, or a bare function with the defaults."""
        return job if isinstance(job, cls) else cls(job)


def job_timing(a: argparse.Namespace):
    """The :func:`descbench.jobtiming.timed` block of a parsed command ``a``: for a command
    declaring its ``timing`` (:class:`JobCommand`), its timing file in its batch directory
    (:meth:`descbench.paths.ResultPaths.job_timing`; a scoring job's in every task folder it
    fills, a matcher-stage job's in its matcher's folder); nothing to write for any other command
    (a report job's record is its log's last line, ``descbench/__main__.py``)."""
    from contextlib import nullcontext

    timing = a.job.timing
    if timing is None:
        return nullcontext()
    from descbench import jobtiming

    stage, kpset_arg, desc_arg = timing
    kpset, descriptor = getattr(a, kpset_arg), getattr(a, desc_arg) if desc_arg else None
    matcher = a.matcher if stage in jobtiming.MATCHER_STAGES else None
    batches = json_arg(a.batches)
    scenes = batches.get(a.batch, []) if isinstance(batches, dict) else []  # a bad --batches: the job's own error

    def outs() -> list[str]:  # called once the job has ended well (its arguments checked by then)
        paths = result_paths(a)
        if stage != "scoring":
            return [paths.job_timing(stage, kpset, descriptor, a.batch, matcher=matcher)]
        from descbench.tasks import score_job_tasks

        return [paths.job_timing(stage, kpset, descriptor, a.batch, t.name) for t in score_job_tasks(json_arg(a.sections))]

    return jobtiming.timed(outs, stage, kpset, descriptor, a.batch, scenes, a.threads, matcher)


def result_paths(a: argparse.Namespace) -> ResultPaths:
    """The result files of a command given ``--results-root`` and ``--batches`` (and ``--batch``,
    which must be one of them)."""
    batches = json_arg(a.batches)
    if getattr(a, "batch", None) is not None and a.batch not in batches:
        raise DescbenchError(f"--batch {a.batch!r} is not among --batches ({', '.join(batches)})")
    return ResultPaths(a.results_root, batches)


def run_args(p: argparse.ArgumentParser) -> None:
    """The whole run a report-stage command reads: every combination on every scene."""
    p.add_argument("--results-root", type=Path, required=True, help="<results_dir>/<experiment>")
    p.add_argument("--combos", required=True, help="JSON list of [keypoint_set, descriptor]")
    p.add_argument("--scenes", required=True, help="JSON list of scenes")
    p.add_argument("--config", required=True, help="the validated config (JSON)")


def run_paths(a: argparse.Namespace) -> tuple[ResultPaths, dict, list[str]]:
    """``(ResultPaths, config, scenes)`` of a report-stage command (:func:`run_args`): the run's
    scenes in the batches its jobs wrote them in."""
    cfg, scenes = json_arg(a.config), json_arg(a.scenes)
    return ResultPaths(a.results_root, scene_batches(scenes, cfg["execution"]["scenes_per_job"])), cfg, scenes


_SCIPY_BLAS = "scipy.linalg.cython_blas"


def import_numba_without_blas_probe():
    """Import numba so that its numpy support does not import SciPy's linear algebra.

    When ``numba.np.arraymath`` is first imported (at a process's first numba dispatch), numba
    imports ``scipy.linalg.cython_blas`` to see whether jitted code may call BLAS (``np.dot``,
    ``np.linalg``). With SciPy installed that import is ~0.2 s of every scoring job's CPU. descbench's
    kernels never call BLAS inside numba (every product is a numpy ``@`` on a bounded row block,
    outside the kernels), so the probe is answered "no BLAS": a kernel that did call it would fail
    to compile with numba's "scipy 0.16+ is required for linear algebra", loudly, in the
    ``numba_warmup`` job. Only that one import is blocked, only while numba's module loads;
    ``import scipy.linalg`` works as usual afterwards. If numpy support is already loaded, nothing
    changes.
    """
    import numba

    if "numba.np.arraymath" not in sys.modules and _SCIPY_BLAS not in sys.modules:
        sys.modules[_SCIPY_BLAS] = None  # makes `import scipy.linalg.cython_blas` raise ImportError
        try:
            import numba.np.arraymath  # noqa: F401
        finally:
            del sys.modules[_SCIPY_BLAS]
    return numba


class _PandasRefused:
    """Import hook: ``import pandas`` raises ModuleNotFoundError in this process, as if pandas were
    not installed. A probe with ``importlib.util.find_spec("pandas")`` gets a spec without a file
    (torch's dynamo probes third-party packages so, and expects a spec or None, not an exception);
    only loading it fails."""

    def __init__(self, cmd: str):
        self.cmd = cmd

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self) if name == "pandas" else None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"descbench {self.cmd} jobs run without pandas (their job module declares "
                                  f"JobCommand(pandas=False)); a {self.cmd} job that needs it must declare pandas=True",
                                  name="pandas")

    def exec_module(self, module):  # the loader protocol's other half; create_module has refused before
        raise AssertionError("unreachable")


def without_pandas(cmd: str, job) -> bool:
    """Run a job of command ``cmd`` as if pandas were not installed, when its job module declares
    so (``job``, a :class:`JobCommand` with ``pandas=False``); returns whether it does.

    pyarrow imports pandas, when it is installed, at its first conversion of numpy arrays or
    Python objects into Arrow arrays (to recognise pandas objects and pandas' missing-value
    markers, which descbench never writes): ~0.17 s of every job that writes a table, for a module
    these jobs never call. pyarrow supports running without pandas, with the same conversions of
    numpy arrays and Python values; an ``import pandas`` in such a job fails with a message that
    names the declaration, so a job that starts needing pandas fails loudly in the tests, not
    slowly. Nothing changes when pandas is already imported.
    """
    if job.pandas or "pandas" in sys.modules:
        return False
    sys.meta_path.insert(0, _PandasRefused(cmd))
    return True


def limit_threads(n: int, pools: tuple[str, ...] = ()) -> None:
    """Keep each job within its Snakemake ``threads``: BLAS, torch's threads and the ``pools`` of
    :data:`POOLS` its command declares (:class:`JobCommand`).

    Only the libraries the command uses are imported (an import costs a job 0.05-0.15 s):
    OpenCV for detection/description, numba for scoring. ``NUMBA_NUM_THREADS`` (set by the
    rules to the job's threads) already sizes numba's pool; this also covers direct calls.
    """
    check_pools(pools, "limit_threads")
    import numpy  # noqa: F401  (BLAS must be loaded for threadpoolctl to find it)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)
    from descbench import torchrt  # no torch import: a learned family's torch threads stay within n

    torchrt.set_job_threads(n)
    if "opencv" in pools:
        import cv2

        cv2.setNumThreads(n)
    if "numba" in pools:
        numba = import_numba_without_blas_probe()
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
