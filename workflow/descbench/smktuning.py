"""How the workflow meets Snakemake: interrupts, the end of a run, the jobs' interpreter and config
merging.

Nothing of Snakemake is patched: a Snakemake upgrade is a version bump. What the
workflow does on its own, with public interfaces only:

* **Fewer scheduling rounds, no wait at the end.** Snakemake re-evaluates its queue one
  ``--max-jobs-per-timespan`` timespan after each scheduling round while jobs wait for cores
  (a ``threading.Timer``), and each finished job starts another such chain, which lives until no
  job is ready: on a long run with many ready jobs the rounds grow with the square of its length.
  The workflow profile (``profiles/default/config.yaml``) sets ``60000/600s``: Snakemake's average
  rate, so that these chains fire rarely. The interpreter would then wait up to 600 s after the
  run for the last timers, so the workflow's ``onsuccess`` / ``onerror`` cancel them
  (:func:`cancel_pending_timers`) and so does the interpreter's exit
  (:func:`cancel_timers_at_exit`, for a run that ends another way); the standard ``threading``
  module only.

* **Ctrl-C and SIGTERM stop the run's jobs** (:func:`stop_jobs_on_sigint`, installed when
  ``workflow/rules/common.smk`` is read, and :func:`stop_jobs_on_sigterm`, installed by the
  workflow's ``onstart``, which Snakemake runs after its scheduler has set its own SIGTERM handler).
  Snakemake 9's local executor, on SIGINT, stops scheduling and then waits for its running jobs,
  which may take minutes, and on SIGTERM does the same on purpose. The workflow's handler (the
  standard ``signal`` module) passes the signal on to the processes under each job's shell (the
  children of this process, found with psutil): ``python -m descbench`` exits at once with one
  line, removing its partial files, and the shell exits with its status. It then raises
  ``KeyboardInterrupt``, exactly as Python's default handler does, so Snakemake ends the run as it
  does on Ctrl-C (remote executors cancel their jobs then). A second signal kills the jobs (SIGKILL). :func:`interrupted` tells the
  end-of-run message (``onerror``) that the run was interrupted, not failed. A SIGINT that the
  shell ignores (a background ``&`` job) stays ignored.

No private method of Snakemake's scheduler is replaced: with ``60000/600s`` a run has about one
scheduling round per finished job (642 and 737 rounds on a 642-job sweep, counted), which keeping
a single re-evaluation timer pending could not lower. The former opt-in switch
``DESCBENCH_SMK_TUNING`` is not read; :func:`configure` says so in one line when it is set.

What was applied goes into the report's provenance (``report/provenance.json``, ``params.snakemake``).

Also here, both pure functions: :func:`job_command`, how every rule starts ``python -m descbench``
(the interpreter that runs Snakemake, or a conda env's ``python``), and :func:`merged_entries` /
:func:`merge_message`, the start-of-run line about Snakemake merging ``config.yaml`` into a
``--configfile``; and :func:`until_stuck` / :func:`until_message`, which read (never change) the
job graph Snakemake built for the run to stop an ``--until`` run it cannot finish.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

# The former opt-in switch, not read (the module's docstring); configure() names it when it is set.
RETIRED_ENV = "DESCBENCH_SMK_TUNING"


_INTERRUPT: dict[str, str | None] = {"signal": None}


def interrupted() -> str | None:
    """The name of the signal (SIGINT, SIGTERM) that interrupted this Snakemake run, or None."""
    return _INTERRUPT["signal"]


def stop_local_jobs(signum: int) -> int:
    """Send ``signum`` to the processes of every job this Snakemake process runs locally; return
    how many jobs were signalled.

    A local job is a child of this process, ``bash -c '...; python -m descbench ...'``: its
    descendants get the signal, not the shell itself, which a SIGTERM would end at once (the job
    would look finished to Snakemake while descbench is still removing its partial files); the
    shell then exits with descbench's status. A shell without a child yet gets the signal.
    """
    import psutil

    n = 0
    try:
        shells = psutil.Process(os.getpid()).children()
    except psutil.Error:
        return 0
    for shell in shells:
        try:
            targets = shell.children(recursive=True) or [shell]
        except psutil.Error:
            continue
        for p in targets:
            try:
                p.send_signal(signum)
            except psutil.Error:
                pass
        n += 1
    return n


def _on_interrupt(signum, frame=None) -> None:
    """SIGINT (or, opt-in, SIGTERM) in Snakemake's main process: stop the local jobs, end the run like Ctrl-C."""
    if _INTERRUPT["signal"] is not None:  # a second signal: the jobs did not stop, kill them
        stop_local_jobs(signal.SIGKILL)
        return
    _INTERRUPT["signal"] = signal.Signals(signum).name
    stop_local_jobs(signum)
    raise KeyboardInterrupt


def stop_jobs_on_sigint() -> bool:
    """Install the SIGINT handler that stops the run's local jobs (main thread only, unless SIGINT
    is ignored or already handled by someone else); returns whether it is installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _on_interrupt):
        signal.signal(signal.SIGINT, _on_interrupt)
        return True
    return False


def stop_jobs_on_sigterm() -> bool:
    """Install the same handler for SIGTERM (main thread only; call it once Snakemake's scheduler
    has installed its own, from the workflow's ``onstart``); returns whether it is installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _on_interrupt)
    return True


def configure(version: str | None = None, environ: Mapping[str, str] | None = None) -> dict:
    """Install the SIGINT handler (:func:`stop_jobs_on_sigint`; the workflow's onstart adds the
    SIGTERM one) and return the record for the provenance: ``{"version": this Snakemake's
    (default: the imported one), "applied": {"stop_jobs_on_interrupt": bool}, "note": the one
    line to print, or None}``. The note is said when :data:`RETIRED_ENV` is set: the variable no
    longer does anything."""
    if version is None:
        from snakemake import __version__ as version
    raw = (os.environ if environ is None else environ).get(RETIRED_ENV)
    note = None
    if raw is not None:
        note = (f"descbench: {RETIRED_ENV}={raw!r} is no longer read: the opt-in scheduler adjustment it switched on "
                "was removed (the workflow profile's max-jobs-per-timespan 60000/600s does what it did); unset it")
    return {"version": version, "applied": {"stop_jobs_on_interrupt": stop_jobs_on_sigint()}, "note": note}


def cancel_pending_timers() -> int:
    """Cancel the ``threading.Timer`` threads still pending in this process; return how many.

    Called by the workflow's ``onsuccess`` and ``onerror``, after Snakemake's scheduler has
    returned. Snakemake re-evaluates its queue one ``--max-jobs-per-timespan`` timespan after each
    scheduling round (a ``threading.Timer``, not a daemon thread), so the interpreter would wait up
    to one timespan after the end of the run for timers that can only wake a scheduler that is no
    longer listening. The workflow profile sets a 600 s timespan (fewer rounds while jobs wait for
    cores); this keeps the end of a run from waiting for it. Only the standard ``threading``
    module is used: a Snakemake that no longer uses timers leaves nothing to cancel.
    """
    n = 0
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer) and thread is not threading.current_thread():
            thread.cancel()
            n += 1
    return n


def cancel_timers_at_exit() -> bool:
    """Have the interpreter cancel the pending ``threading.Timer`` threads when it exits, before
    it waits for its threads; return whether that is arranged.

    :func:`cancel_pending_timers` runs in ``onsuccess`` / ``onerror``; a run that ends another way
    (``--no-hooks``, an exception in Snakemake's scheduler) would otherwise wait up to one
    ``--max-jobs-per-timespan`` timespan at exit for timers that can only wake a scheduler that
    has stopped. ``threading._register_atexit`` (CPython's, used by ``concurrent.futures`` for
    the same purpose; the functions it registers run before the non-daemon threads are joined) is
    the standard library's, not Snakemake's; an interpreter without it returns False.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - CPython has had it since 3.9
        return False
    try:
        register(cancel_pending_timers)
    except RuntimeError:  # already shutting down
        return False
    return True


# ----------------------------------------------------------------------------- the jobs' interpreter


def job_command(deployment_methods: Iterable, executable: str, workflow_dir: Path | str, in_container: bool = False) -> str:
    """How every rule starts descbench (``{DESCBENCH} <command> ...`` in workflow/rules/*.smk).

    Locally and on a cluster's nodes: the interpreter that runs Snakemake (``sys.executable``),
    quoted, so that ``venv/bin/snakemake`` works without activating the venv (a bare ``python``
    would be whatever ``python`` is first on PATH). A cluster job runs ``<sys.executable> -m
    snakemake`` on the node (the executor plugins do, on a shared filesystem), so the same absolute
    path is used there.

    Under ``--software-deployment-method conda`` (``deployment_methods`` holds CONDA; or
    APPTAINER where the rules run in a container, ``in_container``), a job runs in its env, whose ``python`` has
    the dependencies but not descbench: the package is reached by ``workflow_dir`` (the checkout's
    ``workflow/``, absolute) on PYTHONPATH, a path that does not depend on where Snakemake copies
    the env file. A PYTHONPATH the job has is kept after it (Snakemake clears an inherited one in
    conda jobs unless ``--conda-not-block-search-path-envvars``).
    """
    names = {getattr(m, "name", str(m)).upper() for m in deployment_methods}
    if "CONDA" in names or ("APPTAINER" in names and in_container):
        path = shlex.quote(str(Path(workflow_dir).resolve()))
        return f"PYTHONPATH={path}${{PYTHONPATH:+:$PYTHONPATH}} python -m descbench"
    return f"{shlex.quote(executable)} -m descbench"


# ----------------------------------------------------------------------------- config merging

# Sections whose entries are names (a set, a descriptor, a sweep): Snakemake merges mappings key by
# key, so config.yaml's entries join those of a --configfile, unlike a list, which is replaced.
NAMED_SECTIONS = ("keypoint_sets", "descriptors", "sweeps")


def merged_entries(workflow_config: Mapping, command_line_config: Mapping) -> dict[str, list[str]]:
    """The entries of ``workflow_config`` (config.yaml) that Snakemake's merge adds to a named
    section that ``command_line_config`` (the --configfile files and --config, merged) defines too:
    ``{section: [names]}``; sections the command line leaves out are config.yaml's as intended."""
    out = {}
    for section in NAMED_SECTIONS:
        base, mine = workflow_config.get(section), command_line_config.get(section)
        if isinstance(base, Mapping) and isinstance(mine, Mapping):
            extra = [name for name in base if name not in mine]
            if extra:
                out[section] = extra
    return out


def merge_message(merged: Mapping[str, list[str]], configfiles: Iterable) -> str | None:
    """The one start-of-run line about ``merged`` (:func:`merged_entries`), or None."""
    configfiles = list(configfiles)
    if not merged or not configfiles:
        return None  # --config alone: merging into config.yaml is what it is for
    what = "; ".join(f"{section} {', '.join(names)}" for section, names in merged.items())
    files = " ".join(f"--configfile {f}" for f in configfiles)
    return (f"descbench: Snakemake merges {files} into config.yaml, so this run also has config.yaml's {what}; "
            "to run the file's entries alone add --replace-workflow-config")


# What comes after each stage: the rules that --omit-from names instead of --until (until_message).
UNTIL_OMIT = {"keypoints": "descriptors keypoint_stats", "descriptors": "distractors score keypoint_stats match"}


def until_stuck(dag) -> list[tuple]:
    """The jobs of this run that Snakemake's ``--until`` never starts: ``(job, the --until job it needs)``.

    Snakemake marks a job ready once every dependency it runs has finished, but a finished
    ``--until`` job does not count (its ``DAG.finish`` skips the dependents of a job for which
    ``DAG.in_until`` holds), so a job needing one never starts and the run ends with Snakemake's
    "BUG: Out of jobs ready to be started". In this workflow: a derived keypoint set under
    ``--until keypoints`` (it reads its sources' folders), a descriptor reading another
    descriptor's files under ``--until descriptors`` (a derived family, shared stack or dsp rows, a
    composite's components). A dependency that is complete already (not run) blocks nothing.

    ``dag`` is the job graph Snakemake built for the run (``workflow.dag`` from ``onstart`` on),
    read through its methods ``needrun_jobs``, ``job_dependencies``, ``needrun`` and ``in_until``;
    nothing is changed. The pairs come sorted by the jobs' first outputs."""
    stuck = [(job, dep) for job in dag.needrun_jobs() for dep in dag.job_dependencies(job)
             if dag.needrun(dep) and dag.in_until(dep)]
    return sorted(stuck, key=lambda pair: (_job_label(pair[0]), _job_label(pair[1])))


def _job_label(job) -> str:
    """A job as the user sees it: its first output, else its rule's name."""
    return str(job.output[0]) if job.output else job.rule.name


def until_message(stuck: list[tuple], shown: int = 3) -> str | None:
    """The one-line error for :func:`until_stuck`'s pairs (None when there are none): the
    ``--until`` rules, the first ``shown`` jobs and what each needs, and the fix, ``--omit-from``
    the stages after it (:data:`UNTIL_OMIT`), under which such jobs run."""
    if not stuck:
        return None
    rules = sorted({dep.rule.name for _, dep in stuck})
    pairs = [f"{_job_label(job)} needs {_job_label(dep)}" for job, dep in stuck]
    more = f" and {len(pairs) - shown} more" if len(pairs) > shown else ""
    # the stages after every --until rule; with several, not one of those rules themselves
    omit = " ".join(r for r in dict.fromkeys(" ".join(UNTIL_OMIT.get(r, "") for r in rules).split()) if r not in rules)
    fix = (f"stop after that stage with --omit-from {omit} instead" if all(r in UNTIL_OMIT for r in rules)
           else "stop with --omit-from the rules after it instead, or build what those jobs need first")
    return (f"--until: Snakemake never starts a job that needs a job the --until stops at (here {' and '.join(rules)} "
            f"jobs), and this run has {'; '.join(pairs[:shown])}{more}; fix: {fix}")
