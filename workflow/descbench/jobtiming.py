"""Each keypoint, descriptor and scoring job's own time: a small JSON file beside its output.

The ``keypoints``, ``descriptors`` and ``score`` rules give their job ``--timing <file>``
(:meth:`descbench.paths.ResultPaths.job_timing`: ``timings/<stage>/<kpset>[/<descriptor>]/<batch>.json``,
a declared output of the rule, so the report depends on it and Snakemake removes it with the
job's other outputs when the job fails). The command line (:func:`descbench.cli.run`) runs the job
inside :func:`timed`, which writes the file, atomically, only when the job has finished. Wall time
is not reproducible: it is never in a Parquet file (those stay bit-identical).

A job's file holds (:data:`FIELDS`):

- ``stage`` (:data:`STAGES`), ``keypoint_set``, ``descriptor`` (None for a keypoint job),
  ``batch``, ``scenes`` (the batch's scenes);
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

:func:`read_timing` reads one back and fails naming the file and the fix when it is missing or
malformed. How the report adds them up per (descriptor, keypoint set): :mod:`descbench.report.timings`.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from descbench import io, torchrt
from descbench.errors import DataError

# The stages with a timing file: the job's command and the folder under timings/.
STAGES = ("keypoints", "descriptors", "scoring")
FIELDS = ("stage", "keypoint_set", "descriptor", "batch", "scenes", "wall_ms", "cpu_time_ms", "threads", "device",
          "device_name", "cpu")
NUMBERS = ("wall_ms", "cpu_time_ms")


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
def timed(out: Path | str | None, stage: str, keypoint_set: str, descriptor: str | None, batch: str,
          scenes: list[str], threads: int):
    """Time the ``with`` block and write its timing file ``out`` (nothing when ``out`` is None)
    when the block ends without an exception; a failed job leaves no timing file."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    if out is None:
        yield
        return
    wall0, cpu0 = time.perf_counter(), process_cpu_seconds()
    yield
    wall, cpu = time.perf_counter() - wall0, process_cpu_seconds() - cpu0
    kind, name = device()
    record = {"stage": stage, "keypoint_set": keypoint_set, "descriptor": descriptor, "batch": batch,
              "scenes": list(scenes), "wall_ms": 1000.0 * wall, "cpu_time_ms": 1000.0 * cpu, "threads": int(threads),
              "device": kind, "device_name": name, "cpu": torchrt.cpu_name()}
    io.write_text(Path(out), json.dumps(record, sort_keys=True) + "\n")


def read_timing(path: Path | str, rule: str | None = None) -> dict:
    """One job's timing file, checked: every field of :data:`FIELDS`, ``wall_ms`` and
    ``cpu_time_ms`` finite numbers >= 0, ``device`` ``cpu`` or ``cuda``. A missing or malformed
    file is a :class:`DataError` naming it and the fix (rerun the job that writes it: ``rule``)."""
    path = Path(path)
    fix = (f"rerun the job that writes it: snakemake --cores N reruns a job whose output is missing, "
           f"--forcerun {rule or '<its rule>'} every job of its rule")
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"the timing file {path} is missing (written by an older descbench, or deleted); {fix}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"the timing file {path} is not readable JSON ({exc}); {fix}") from None
    if not isinstance(record, dict) or set(FIELDS) - set(record):
        missing = sorted(set(FIELDS) - set(record)) if isinstance(record, dict) else list(FIELDS)
        raise DataError(f"the timing file {path} lacks {', '.join(missing)}; {fix}")
    for k in NUMBERS:
        v = record[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
            raise DataError(f"the timing file {path}: {k} is {v!r}, not a finite number >= 0; {fix}")
    if record["device"] not in ("cpu", "cuda"):
        raise DataError(f"the timing file {path}: device is {record['device']!r}, not 'cpu' or 'cuda'; {fix}")
    return record
