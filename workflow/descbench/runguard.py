"""Results that stay what they claim to be: one run at a time per results folder, and no "up to
date" for results computed with other settings.

Snakemake decides what to rerun from its records in ``<workdir>/.snakemake`` (a job reruns when
its params differ from the recorded ones). The results folder ``<results_dir>/<experiment>/`` is
not tied to one working directory: ``rm -rf .snakemake``, or a second working directory with the
same ``results_dir``, leaves results without a record, and Snakemake then calls them up to date
whatever settings they were computed with. Two runs writing the same folder at once mix their
outputs. This module provides what the workflow (workflow/rules/common.smk) uses against both:

* :func:`rules_to_rerun`: which rules a settings change concerns (the config and scenes of the
  folder's last report, or of the last run that wrote to it, against the current ones), so that
  a change without Snakemake records stops the run and names the exact ``--forcerun`` that
  recomputes it (:func:`forced`, :func:`unrecorded_changes_message`).
* a lock file ``<results>/descbench.lock`` (pid, host, working directory, command), taken when a
  run starts jobs and released when it ends (:func:`acquire`, :func:`release`); a lock whose
  process is gone (same host) is taken over with a warning. ``<results>/.descbench_runs`` names
  the last run that took it (the run's settings too); it also serialises the lock's updates
  (``fcntl.flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

LOCK_NAME = "descbench.lock"
RUNS_NAME = ".descbench_runs"

# ------------------------------------------------------------------------------ settings changes

# Settings that change no result (how the work is run): a change of these alone reruns nothing.
NOT_RESULTS = {("scoring", "threads"), ("scoring", "chunk_mb"), ("execution", "numba_cache_dir")}
# Settings that only name or place the results folder (the same folder either way).
FOLDER_KEYS = {"experiment", "results_dir"}
# Pipeline order of the rules named in messages (earliest first).
STAGES = ("keypoints", "keypoint_stats", "descriptors", "distractors", "score", "report")


def _scoring_sections() -> tuple[str, ...]:
    try:
        from descbench.paths import scoring_sections

        return tuple(scoring_sections())
    except ImportError:  # pragma: no cover - an older descbench.paths
        return ("scoring", "verification", "matching")


def _diff(old: Any, new: Any, path: tuple, out: list[tuple[tuple, str]]) -> None:
    """(key path, "a.b.c: old -> new" | "added" | "removed") for every difference."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            p = path + (k,)
            if k not in new:
                out.append((p, f"{'.'.join(map(str, p))}: removed"))
            elif k not in old:
                out.append((p, f"{'.'.join(map(str, p))}: added"))
            else:
                _diff(old[k], new[k], p, out)
    elif old != new:
        out.append((path, f"{'.'.join(map(str, path))}: {old!r} -> {new!r}"))


def _rules_of(path: tuple, verification: bool) -> set[str]:
    """The rules whose jobs must rerun after the setting at ``path`` changed (downstream rules
    follow by themselves: their inputs are then newer)."""
    score = {"score", "distractors"} if verification else {"score"}
    top = path[0]
    if top in FOLDER_KEYS or path[:2] in NOT_RESULTS:
        return set()
    if top in ("keypoint_sets", "descriptors"):
        if len(path) == 1:
            return {"keypoints"} if top == "keypoint_sets" else {"descriptors"}
        if len(path) == 2:  # a name added or removed: only the report's list of entries changes
            return {"report"}
        if top == "keypoint_sets":
            return {"keypoints"}
        return score if path[2] == "overrides" else {"descriptors"}
    if top in _scoring_sections():
        # matching.repeatability_px is also a keypoint statistic
        return score | ({"keypoint_stats"} if top == "matching" else set())
    if top in ("statistics", "sweeps"):  # sweeps: their variants are keypoint_sets / descriptors
        return {"report"}
    if top == "patches":
        return set()  # the patch benchmarks (not part of the report's config)
    # scenes, the dataset and its location, execution.scenes_per_job (moves the batch folders),
    # any setting this module does not know: everything from the keypoints on
    return {"keypoints"}


def stage_sorted(rules: Iterable[str]) -> list[str]:
    rules = set(rules)
    return [r for r in STAGES if r in rules] + sorted(rules - set(STAGES))


def normalized(state: dict) -> dict:
    """``{"config": ..., "scenes": [...], "data": ...}`` as JSON would give it back."""
    return json.loads(json.dumps(state, sort_keys=True, default=str))


def rules_to_rerun(old: dict, new: dict, verification: bool) -> dict[str, list[str]]:
    """Rule -> the changed settings that concern its jobs, for two states ``{"config": the
    report's config, "scenes": [...], "data": the absolute scene folder (optional)}``. Empty when
    nothing that a result depends on changed."""
    old, new = normalized(old), normalized(new)
    changes: list[tuple[tuple, str]] = []
    _diff(old.get("config") or {}, new.get("config") or {}, (), changes)
    if old.get("scenes") is not None and old.get("scenes") != new.get("scenes"):
        changes.append((("scenes",), f"scenes: {old.get('scenes')} -> {new.get('scenes')}"))
    if old.get("data") and new.get("data") and old["data"] != new["data"]:
        changes.append((("data",), f"scene folder: {old['data']} -> {new['data']}"))
    out: dict[str, list[str]] = {}
    for path, text in changes:
        for rule in _rules_of(path, verification):
            out.setdefault(rule, []).append(text)
    return {r: out[r] for r in stage_sorted(out)}


def _ancestors(rule: str, verification: bool) -> set[str]:
    """Rules whose forced rerun also reruns every job of ``rule`` (itself included)."""
    keypoints = {"keypoints", "demo_scene", "hpatches_download"}
    descriptors = {"descriptors"} | keypoints
    table = {
        "keypoints": keypoints,
        "keypoint_stats": {"keypoint_stats"} | keypoints,
        "descriptors": descriptors,
        "distractors": {"distractors"} | descriptors,
        "score": {"score", "numba_warmup"} | descriptors | ({"distractors"} if verification else set()),
    }
    table["report"] = {"report"} | table["score"] | ({"distractors"} if verification else set())
    return table.get(rule, {rule})


def forced(rules: Iterable[str], forcerun: Iterable[str], forceall: bool, verification: bool) -> bool:
    """Whether ``--forcerun <forcerun>`` (or ``--forceall``) reruns every job of ``rules``."""
    if forceall:
        return True
    forcerun = set(forcerun)
    return all(_ancestors(r, verification) & forcerun for r in rules)


def command_with_forcerun(argv: list[str], rules: Iterable[str], already: Iterable[str] = ()) -> str:
    """The user's Snakemake command with ``--forcerun <rules>`` added (after their own options:
    the last --forcerun wins, so it repeats theirs)."""
    args = list(argv[1:])
    want = list(dict.fromkeys([*already, *stage_sorted(rules)]))
    return " ".join(["snakemake", *map(shlex.quote, args), "--forcerun", *want])


def unrecorded_changes_message(res: Path | str, required: dict[str, list[str]], why: list[str],
                               argv: list[str], already_forced: Iterable[str] = (), workdir: str | None = None,
                               last_workdir: str | None = None) -> str:
    """The error of a run whose settings differ from those of the results in ``res`` (``required``:
    rules_to_rerun) while Snakemake has no record of them (``why``: unrecorded_outputs): the
    changes, why Snakemake would keep the old results, and the commands that work."""
    lines = [f"descbench: the results in {res} were computed with other settings than this run's:"]
    shown = list(dict.fromkeys(c for cs in required.values() for c in cs))
    lines += [f"  {c}" for c in shown[:20]] + ([f"  ... and {len(shown) - 20} more"] if len(shown) > 20 else [])
    here = f" ({workdir})" if workdir else ""
    lines.append(f"and Snakemake in this working directory{here} has no record that would make it recompute them, "
                 "so it would call the old results up to date:")
    if last_workdir and workdir and last_workdir != workdir:
        lines.append(f"  the last run that wrote to {res} ran in another working directory: {last_workdir}")
    lines += [f"  {w}" for w in why[:4]] + ([f"  ... and {len(why) - 4} more"] if len(why) > 4 else [])
    lines.append("Run one of:")
    lines.append(f"  {command_with_forcerun(argv, required, already_forced)}")
    lines.append(f"      recomputes what these settings change ({', '.join(required)} and what depends on it), "
                 "replacing the old results")
    lines.append("  the same command with another experiment name (`experiment: <name>` in the config, or "
                 "experiment=<name> among the --config values)")
    lines.append("      keeps the old results and computes the new ones in <results_dir>/<name>/")
    return "\n".join(lines)


def output_mtime(path: Path) -> float | None:
    """The modification time Snakemake records as a finished output's ``endtime`` (a directory
    output: its ``.snakemake_timestamp``); None for a missing file."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            return os.stat(Path(path) / ".snakemake_timestamp").st_mtime
    return st.st_mtime


def unrecorded_outputs(paths: Iterable[str], record: Callable[[str], Any]) -> list[str]:
    """Of the existing ``paths``, those whose current version this working directory's Snakemake
    did not record (``record(path)``: its metadata record or None): no record, a record without
    params (format < 6), or a record whose end time is not the file's modification time (another
    working directory rewrote it since)."""
    out = []
    for p in paths:
        mtime = output_mtime(Path(p))
        if mtime is None:
            continue
        rec = record(p)
        if rec is None or (rec.get("record_format_version") or 0) < 6:
            out.append(f"{p}: no record in .snakemake (deleted, or written from another working directory)")
        elif rec.get("endtime") is None or abs(rec.get("endtime") - mtime) > 1e-3:
            out.append(f"{p}: rewritten since Snakemake here recorded it (by a run in another working directory?)")
    return out


# ------------------------------------------------------------------------------------- the lock


class ResultsLocked(Exception):
    """Another live run holds the results folder's lock."""


def _host() -> str:
    return socket.gethostname()


def _pid_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # no psutil, no such process, no permission
        return None


def holder_info(workdir: Path | str, argv: list[str], state: dict | None = None) -> dict:
    """What the lock file and the runs file say about this run."""
    pid = os.getpid()
    return {"run_id": uuid.uuid4().hex, "pid": pid, "pid_started": _pid_started(pid), "host": _host(),
            "workdir": str(Path(workdir).resolve()), "command": " ".join(map(shlex.quote, ["snakemake", *argv[1:]])),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "state": normalized(state) if state is not None else None}


def alive(info: dict) -> bool | None:
    """Whether the lock's run is still going: True, False (its process is gone), or None (it
    ran on another host: unknown)."""
    if info.get("host") != _host():
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    started = info.get("pid_started")
    now = _pid_started(pid)
    if started is not None and now is not None and abs(now - started) > 1.0:
        return False  # the pid was reused by another process
    return True


def describe(info: dict) -> str:
    return (f"pid {info.get('pid')} on {info.get('host')}, working directory {info.get('workdir')}, started "
            f"{info.get('started')}: {info.get('command')}")


@contextlib.contextmanager
def _guarded(res: Path, exclusive: bool):
    """The runs file, opened and flock-ed: every update of the lock happens under it."""
    res.mkdir(parents=True, exist_ok=True)
    with open(res / RUNS_NAME, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_lock(res: Path | str) -> dict | None:
    """The lock file's content (None: no lock, or an unreadable one)."""
    path = Path(res) / LOCK_NAME
    if not path.exists():
        return None
    return _read_json(path) or {"pid": None, "host": "?", "workdir": "?", "started": "?",
                                "command": f"(unreadable lock file {path})"}


def last_run(res: Path | str) -> dict | None:
    """The last run that took the folder's lock (``holder_info``), or None."""
    res = Path(res)
    if not (res / RUNS_NAME).exists():
        return None
    with _guarded(res, exclusive=False) as fh:
        fh.seek(0)
        try:
            value = json.loads(fh.read() or "null")
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def locked_message(res: Path | str, other: dict) -> str:
    lock = Path(res) / LOCK_NAME
    where = ("that process is still running" if alive(other) else
             f"it ran on another host ({other.get('host')}); whether it still runs cannot be checked from here")
    return (f"descbench: another run is writing to {res}: {describe(other)}; {where}. Two runs writing one "
            f"results folder mix their outputs. Wait for it to finish, or give this run another experiment name "
            f"(`experiment: <name>` in the config, or experiment=<name> among the --config values). If that run is "
            f"gone, delete {lock}.")


def acquire(res: Path | str, me: dict, last_run_id: str | None) -> str | None:
    """Take the folder's lock for ``me`` (``holder_info``). ``last_run_id``: the run id of
    ``last_run`` when this run read the folder's state (at its start); a different one now means
    another run wrote to the folder in between, and raises ResultsLocked (rerun to see its
    results). Returns a warning when a dead run's lock was taken over."""
    res = Path(res)
    with _guarded(res, exclusive=True) as fh:
        warning = None
        other = read_lock(res)
        if other is not None and not (other.get("pid") == me["pid"] and other.get("host") == me["host"]):
            if alive(other) is not False:
                raise ResultsLocked(locked_message(res, other))
            warning = (f"descbench: took over the lock of a run that ended without releasing it ({describe(other)}); "
                       "this run goes on")
        fh.seek(0)
        try:
            previous = json.loads(fh.read() or "null")
        except ValueError:
            previous = None
        now_id = previous.get("run_id") if isinstance(previous, dict) else None
        if now_id != last_run_id:
            raise ResultsLocked(
                f"descbench: another run wrote to {res} while this one was starting"
                + (f" ({describe(previous)})" if isinstance(previous, dict) else "")
                + "; what this run decided to (not) recompute is out of date. Run the same command again.")
        _write_json(res / LOCK_NAME, me)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(me, indent=1, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
        return warning


def release(res: Path | str, me: dict) -> bool:
    """Remove the lock if ``me`` holds it; True if it did."""
    res = Path(res)
    if not (res / LOCK_NAME).exists():
        return False
    with _guarded(res, exclusive=True):
        other = read_lock(res)
        if other is None or other.get("run_id") != me["run_id"]:
            return False
        (res / LOCK_NAME).unlink(missing_ok=True)
        return True
