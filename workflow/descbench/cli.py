"""Command line used by the Snakemake rules: ``python -m descbench <stage> ...``.

Argument parsing and error reporting only: each subcommand and the function it runs come from
its job module (:mod:`descbench.jobs`). Errors on bad input exit with status 1 and a one-line
message naming the file or key and the fix; so do outputs that cannot be written (permission
denied, read-only filesystem, disk full). SIGINT (Ctrl-C) and SIGTERM end a command at once with one line and exit
status 130 / 143 (128 + the signal), no traceback; outputs are written atomically (descbench.io),
so no partial file is left under an output's name.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from pathlib import Path

from descbench import jobrecord
from descbench.errors import DescbenchError


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived. A BaseException, so that no ``except Exception`` of a stage
    catches it: it unwinds the stage (whose ``finally`` clauses remove temporary files)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, frame) -> None:
    # One message per job: Ctrl-C reaches a job twice (from the terminal and passed on by
    # Snakemake); later signals are ignored while the stage unwinds (SIGKILL still ends it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signum)


# Writing an output failed for a reason the user fixes outside descbench: the fix per errno
# ({folder}: the folder concerned, the nearest existing one of the file's).
_ELSEWHERE = "or set results_dir (or data_dir) in config.yaml to a folder you can write"
WRITE_ERRORS = {
    errno.EACCES: f"give your user write permission on it (ls -ld {{folder}}; chmod u+w {{folder}}) {_ELSEWHERE}",
    errno.EPERM: f"give your user write permission on it (ls -ld {{folder}}; chmod u+w {{folder}}) {_ELSEWHERE}",
    errno.EROFS: f"its filesystem is mounted read-only: {_ELSEWHERE[3:]}",
    errno.ENOSPC: "free space on its disk (df -h {folder}) or point results_dir at a disk with room",
    errno.EDQUOT: "your disk quota there is used up: free space (quota -s) or point results_dir at another disk",
}


def write_error_message(exc: OSError, what: str) -> str:
    """The one-line message of an OSError in ``WRITE_ERRORS``: the path, the OS error, the fix."""
    path = exc.filename2 if exc.filename2 is not None else exc.filename  # os.replace: the final name
    if path is None:
        where, folder = f"an output of {what}", "."
    else:
        where = os.fsdecode(path)
        folder = next((p for p in Path(where).parents if p.is_dir()), Path("."))
        if exc.errno in (errno.EACCES, errno.EPERM) and os.path.isfile(where) and not os.access(where, os.R_OK):
            return (f"descbench: error: cannot read {where}: {os.strerror(exc.errno)} ({errno.errorcode[exc.errno]}); "
                    f"give your user read permission on it (ls -l {where}; chmod u+r {where}), then rerun the same command")
    return (f"descbench: error: cannot write {where}: {os.strerror(exc.errno)} ({errno.errorcode[exc.errno]}) "
            f"in the folder {folder}; {WRITE_ERRORS[exc.errno].format(folder=folder)}; then rerun the same command "
            "(finished jobs are kept)")


def _job_name(argv: list[str] | None, a: argparse.Namespace | None) -> str:
    """What a command was doing, for the interrupt message: `score` of batch000 (sift, rootsift)."""
    if a is None:
        return f"`{(argv or sys.argv[1:] or ['descbench'])[0]}`"
    cmd = a.cmd + (f" {a.step}" if getattr(a, "step", None) else "")
    parts = [str(getattr(a, k)) for k in ("keypoint_set", "descriptor", "name", "scene") if getattr(a, k, None)]
    batch = f" of {a.batch}" if getattr(a, "batch", None) else ""
    return f"`{cmd}`{batch}" + (f" ({', '.join(parts)})" if parts else "")


# glibc's malloc serves blocks above its mmap threshold with mmap and returns them at free; the
# threshold then rises by itself, but by how much depends on what the process allocated before
# (its imports). OpenCV's SIFT allocates and frees its pyramid's buffers, tens of MB, for every
# image: served by mmap, each image's buffers are page-faulted in again (the demo's SIFT keypoint
# job spent 1.2 of its 2.6 s in the kernel). A fixed mmap threshold of 64 MiB keeps them on the
# heap; a trim threshold of 1 GiB keeps the heap's freed top for the next image instead of giving
# it back and faulting it in again (at HPatches sizes, trimming at 64 MiB cost a batch of 8 scenes'
# SIFT keypoint job 3.4 s of system time out of 8.2 s). Neither raises a job's peak memory, which
# is what it touched at once (docs/guide/performance.md).
MALLOC_MMAP_THRESHOLD_BYTES = 64 * 1024 * 1024
MALLOC_TRIM_THRESHOLD_BYTES = 1024 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def fix_malloc_thresholds(mmap_bytes: int = MALLOC_MMAP_THRESHOLD_BYTES, trim_bytes: int = MALLOC_TRIM_THRESHOLD_BYTES,
                          libc=None) -> bool:
    """Fix glibc malloc's mmap threshold at ``mmap_bytes`` and its trim threshold at
    ``trim_bytes`` for this process (``mallopt``); True when both took. Elsewhere than glibc
    (macOS, musl) nothing is changed and False is returned: the setting only moves time, never a
    result."""
    import ctypes
    import ctypes.util

    try:
        libc = libc if libc is not None else ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_bytes))) and bool(mallopt(_M_TRIM_THRESHOLD, int(trim_bytes)))


def build_parser() -> argparse.ArgumentParser:
    """The command line: the global options, then each job module's subcommands in
    :func:`job_modules` order; each subcommand's :class:`descbench.jobs.common.JobCommand` (its
    function and what its process needs) is its namespace's ``job``."""
    from descbench.jobs.common import JobCommand

    ap = argparse.ArgumentParser(prog="descbench")
    ap.add_argument("--error-fd", type=int, default=None,
                    help="also write a failure's one-line message to this file descriptor (the workflow's jobs: "
                         "the terminal, while their output goes to the job's log)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for module in job_modules():
        for cmd, job in module.add_commands(sub).items():
            sub.choices[cmd].set_defaults(job=JobCommand.of(job))
    return ap


def job_modules() -> tuple:
    """The modules whose subcommands make up the command line, in the order ``--help`` lists them.
    Imported when the command line is built (inside :func:`main`'s interrupt handling), not when
    this module is."""
    from descbench.jobs import (checkconfig, datasets, descriptors, distractors, featurefiles, inspect, keypoints, matches,
                                patches, pose, report, score, warmup)

    return (datasets, keypoints, descriptors, matches, pose, score, distractors, report, inspect, patches, warmup, checkconfig,
            featurefiles)


def main(argv: list[str] | None = None, *, restore_signals: bool = True, job_process: bool = False) -> int:
    """Run one command; returns its exit status. Once the command has ended, SIGINT and SIGTERM are
    ignored while the job cleans up (a late one, e.g. Ctrl-C's second copy, must not print a
    traceback after the job's one line); ``restore_signals`` then puts back the handlers it found
    (in-process callers), else they stay ignored until the process exits (``python -m descbench``).
    ``job_process``: the process ends with this command (``python -m descbench``), so a command
    declared ``pandas=False`` (:class:`descbench.jobs.common.JobCommand`) runs without pandas
    (:func:`descbench.jobs.common.without_pandas`); in-process callers keep their imports as they are."""
    a = None
    record = None
    handlers = _install_interrupt_handlers()
    try:
        a = build_parser().parse_args(argv)
        record = jobrecord.register_job()  # a job of a workflow run: a later run can stop it if this run is killed
        if job_process:
            from descbench.jobs.common import without_pandas

            without_pandas(a.cmd, a.job)
        run(a)
    except Interrupted as exc:
        print(f"descbench: interrupted ({exc}) while running {_job_name(argv, a)}; partial outputs removed", file=sys.stderr)
        return 128 + exc.signum
    except DescbenchError as exc:
        _report_error(f"descbench: error: {exc}", a)
        return 1
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        _report_error(write_error_message(exc, _job_name(argv, a)), a)
        return 1
    finally:
        for signum in handlers:
            signal.signal(signum, signal.SIG_IGN)
        if record is not None:
            record.unlink(missing_ok=True)
        if restore_signals:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    return 0


def _report_error(message: str, a: argparse.Namespace | None) -> None:
    """The one-line error: into the job's log (stderr) and, with ``--error-fd``, on the terminal,
    where it then stands right above Snakemake's error block for the job."""
    print(message, file=sys.stderr)
    fd = getattr(a, "error_fd", None)
    if fd is not None:
        try:
            os.write(fd, (message + "\n").encode("utf-8", "replace"))
        except OSError:
            pass  # not open (run by hand): the log has the message


def _install_interrupt_handlers() -> dict:
    """SIGINT / SIGTERM raise :class:`Interrupted` (main thread only); returns the handlers they replace."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, _raise_interrupted)
    return previous


def run(a: argparse.Namespace) -> None:
    """Run a parsed command: its job's thread limits (``--threads``, on the pools its command
    declares), then its job module's function, both timed into its timing file when its command
    declares one (:class:`descbench.jobs.common.JobCommand`, descbench.jobs.common.job_timing,
    descbench.jobtiming)."""
    from descbench.jobs.common import job_timing, limit_threads

    with job_timing(a):
        if getattr(a, "threads", None):
            limit_threads(a.threads, a.job.pools)
        a.job(a)


if __name__ == "__main__":
    sys.exit(main())
