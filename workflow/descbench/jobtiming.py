"""Each keypoint, descriptor, scoring, matcher and pipelines job's own time: a small JSON file in its output directory.

Every ``keypoints``, ``descriptors``, ``score``, ``match`` and ``score-pipelines`` job, run from the
command line (:func:`descbench.cli.run`; the ``timing`` its job module declares,
:class:`descbench.jobs.common.JobCommand`), runs inside
:func:`timed`, which writes, atomically and only when the job's work has ended well, its timing
file into its own batch directory: :meth:`descbench.paths.ResultPaths.job_timing`
(``<batch directory>/job_timing.json``; a scoring job writes the same file into each of its
scoring tasks' folders; a matcher-stage job (:data:`MATCHER_STAGES`) into its
``matches/<set>/<descriptor>/<matcher>/<batch>/`` or ``pipelines/<set>/<descriptor>/<matcher>/<batch>/``
folder). It is no declared output of its
own: a directory of results made before descbench recorded times (one without the file) is
complete, and nothing reruns on upgrade; the report counts such jobs as not timed
(:mod:`descbench.report.timings`, which adds up the :data:`STAGES`; the matcher-stage jobs' files
are read by the benchmark scripts, ``benchmarks/bench_workflow.py``). From this version on, no job
directory exists without its timing file (a failed job's directory is removed by Snakemake). Wall
time is not reproducible: it is never in a Parquet file (those stay bit-identical). Every other
job (the report jobs among them: ``pipelines-report``, ``report``, ...) has the last line of its log
(``descbench/__main__.py``) as its record.

A job's file holds (:data:`FIELDS`):

- ``stage`` (:data:`STAGES` or :data:`MATCHER_STAGES`), ``keypoint_set``, ``descriptor`` (None
  for a keypoint job), ``batch``, ``scenes`` (the batch's scenes); a matcher-stage job's file also
  ``matcher`` (the matcher's name in the config);
- ``wall_ms``: ``time.perf_counter`` from the start of the job's work (its thread limits and
  imports included) to its end, in milliseconds. The last line of the job's log
  (``descbench/__main__.py``) times the whole process, also the interpreter's start and the import
  of descbench's command line (a few hundred milliseconds more);
- ``cpu_time_ms``: the CPU time the process and its children used over the same span (user +
  system, every thread: :func:`process_cpu_seconds`), in milliseconds; more than ``wall_ms`` when several
  threads worked;
- ``threads``: the threads Snakemake gave the job (its ``--threads``);
- ``device``: ``cuda`` when torch ran on a GPU in this process (a learned family or detector on
  ``device: cuda``/``auto``; :func:`descbench.torchrt.devices_used`), else ``cpu``;
  ``device_name``: that GPU's name (``torch.cuda.get_device_name``), else the CPU's model
  (:func:`descbench.torchrt.cpu_name`); ``cpu``: the CPU's model in either case.

:func:`read_timing` reads one back and fails naming the file and the fix when it is unreadable
or malformed. How the report adds them up per (descriptor, keypoint set): :mod:`descbench.report.timings`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

from descbench import io, torchrt
from descbench.errors import DataError

# The stages with a timing file (the report's column prefixes).
STAGES = ("keypoints", "descriptors", "scoring")
# The matcher stage's jobs (the ``match``, ``score_pipelines`` and ``score_pose`` rules; their folders' names): a
# timing file too, with the matcher's name; not in the report's timings table.
MATCHER_STAGES = ("matches", "pipelines", "pose")
FIELDS = ("stage", "keypoint_set", "descriptor", "batch", "scenes", "wall_ms", "cpu_time_ms", "threads", "device",
          "device_name", "cpu")
NUMBERS = ("wall_ms", "cpu_time_ms")
# How to time jobs whose folders hold no timing file (made before descbench recorded times): rerun them.
TIME_THEM = "snakemake --cores N --forcerun keypoints descriptors score"


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process (every thread: ``time.process_time``) and of its
    waited-for children (``os.times``)."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def device() -> tuple[str, str]:
    """``(device, device_name)`` of this process's work: ``("cuda", <GPU names>)`` when torch ran
    on a GPU here (names joined by ``, `` when several), else ``("cpu", <CPU model>)``."""
    gpus = sorted({name for kind, name in torchrt.devices_used() if kind == "cuda"})
    return ("cuda", ", ".join(gpus)) if gpus else ("cpu", torchrt.cpu_name())


@contextmanager
def timed(outs: Iterable[Path | str] | Callable[[], Iterable[Path | str]] | None, stage: str, keypoint_set: str,
          descriptor: str | None, batch: str, scenes: list[str], threads: int, matcher: str | None = None):
    """Time the ``with`` block and write its timing file to each path of ``outs`` (nothing when
    ``outs`` is None) when the block ends without an exception; a failed job writes none.
    ``outs`` may be a function returning the paths, called when the block has ended (a scoring
    job's folders follow from its settings, which the job itself checks first). ``matcher``: the
    matcher's name, required by (and only by) the :data:`MATCHER_STAGES`."""
    if stage not in STAGES + MATCHER_STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES + MATCHER_STAGES}")
    if (matcher is not None) != (stage in MATCHER_STAGES):
        raise ValueError(f"stage {stage!r} " + ("needs the matcher's name" if matcher is None else "has no matcher"))
    if outs is None:
        yield
        return
    wall0, cpu0 = time.perf_counter(), process_cpu_seconds()
    yield
    wall, cpu = time.perf_counter() - wall0, process_cpu_seconds() - cpu0
    kind, name = device()
    record = {"stage": stage, "keypoint_set": keypoint_set, "descriptor": descriptor, "batch": batch,
              "scenes": list(scenes), "wall_ms": 1000.0 * wall, "cpu_time_ms": 1000.0 * cpu, "threads": int(threads),
              "device": kind, "device_name": name, "cpu": torchrt.cpu_name(), **({"matcher": matcher} if matcher else {})}
    text = json.dumps(record, sort_keys=True) + "\n"
    for out in (outs() if callable(outs) else outs):
        io.write_text(Path(out), text)


def read_timing(path: Path | str, rule: str | None = None) -> dict:
    """One job's timing file, checked: every field of :data:`FIELDS` (and ``matcher`` for a
    matcher-stage job's), ``wall_ms`` and ``cpu_time_ms`` finite numbers >= 0, ``device`` ``cpu``
    or ``cuda``. A missing or malformed
    file is a :class:`DataError` naming it and the fix (rerun the job that writes it: ``rule``).
    (The report asks first whether a job has a file at all: :mod:`descbench.report.timings`.)"""
    path = Path(path)
    fix = (f"rerun the job that writes it: snakemake --cores N reruns a job whose output is missing, "
           f"--forcerun {rule or '<its rule>'} every job of its rule (and what depends on it)")
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"the timing file {path} is missing; {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"the timing file {path} is not readable JSON ({exc}); {fix}") from None
    if not isinstance(record, dict) or set(FIELDS) - set(record):
        missing = sorted(set(FIELDS) - set(record)) if isinstance(record, dict) else list(FIELDS)
        raise DataError(f"the timing file {path} lacks {', '.join(missing)}; {fix}")
    if record["stage"] in MATCHER_STAGES and not record.get("matcher"):
        raise DataError(f"the timing file {path} of a {record['stage']!r} job lacks matcher; {fix}")
    for k in NUMBERS:
        v = record[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
            raise DataError(f"the timing file {path}: {k} is {v!r}, not a finite number >= 0; {fix}")
    if record["device"] not in ("cpu", "cuda"):
        raise DataError(f"the timing file {path}: device is {record['device']!r}, not 'cpu' or 'cuda'; {fix}")
    return record
