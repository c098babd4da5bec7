"""descbench.cli holds argument parsing and error reporting only: every subcommand, its options
and the function it runs come from a job module (descbench.jobs)."""

from __future__ import annotations

import ast
import inspect
import os
import pkgutil
import signal
from pathlib import Path

import pytest

import descbench.jobs
from descbench import cli

CLI = Path(cli.__file__)


def _subcommands(parser) -> dict:
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_every_subcommand_runs_a_job_modules_function():
    commands = _subcommands(cli.build_parser())
    assert list(commands) == ["demo-scene", "posed-demo-scene", "posed-download", "hpatches", "resize-scene", "keypoints", "keypoint-cutoff", "keypoint-stats",
                              "export-keypoints", "descriptors", "match", "score-pipelines", "pipelines-report", "score-pose", "pose-report", "score", "distractors", "report", "plots", "database", "compare", "inspect", "patches",
                              "warmup", "check-config", "export-features", "import-features"]
    for name, parser in commands.items():
        job = parser.get_default("job")
        assert callable(job) and job.run.__module__.startswith("descbench.jobs."), name
        assert job.run.__module__ != "descbench.jobs.common", name


def test_every_job_module_adds_its_commands_and_is_on_the_command_line():
    modules = {m.name for m in pkgutil.iter_modules(descbench.jobs.__path__)} - {"common"}
    listed = {m.__name__.rsplit(".", 1)[1] for m in cli.job_modules()}
    assert listed == modules
    for m in cli.job_modules():
        assert inspect.getsourcefile(m.add_commands) == m.__file__


def test_cli_defines_no_parser_or_stage_logic():
    tree = ast.parse(CLI.read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert defined == {"Interrupted", "_raise_interrupted", "write_error_message", "_job_name", "build_parser", "job_modules",
                       "main", "_report_error", "_install_interrupt_handlers", "run", "fix_malloc_thresholds"}
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert "add_parser" not in calls  # every subcommand's parser is its job module's
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("descbench")}
    assert imported <= {"descbench", "descbench.errors", "descbench.jobs", "descbench.jobs.common"}


def test_malloc_thresholds_are_fixed_through_mallopt():
    """Both of glibc's thresholds are set (mmap -3 at 64 MiB, trim -1 at 1 GiB); a C library without
    mallopt is left alone (False), and a refusal is reported."""
    from descbench.cli import MALLOC_MMAP_THRESHOLD_BYTES, MALLOC_TRIM_THRESHOLD_BYTES, fix_malloc_thresholds

    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    assert fix_malloc_thresholds(libc=Libc()) is True
    assert calls == [(-3, MALLOC_MMAP_THRESHOLD_BYTES), (-1, MALLOC_TRIM_THRESHOLD_BYTES)]
    assert (MALLOC_MMAP_THRESHOLD_BYTES, MALLOC_TRIM_THRESHOLD_BYTES) == (64 * 2**20, 2**30)
    assert fix_malloc_thresholds(libc=object()) is False

    class Refuses:
        def mallopt(self, param, value):
            return 0

    assert fix_malloc_thresholds(libc=Refuses()) is False
    assert fix_malloc_thresholds(32 * 2**20) in (True, False)  # the real libc: glibc accepts, others have none


@pytest.mark.parametrize("restore", [True, False])
@pytest.mark.parametrize("interrupted", [True, False])
def test_a_late_signal_while_the_job_cleans_up_is_ignored(monkeypatch, restore, interrupted):
    """Ctrl-C reaches a job twice (terminal and Snakemake): a SIGINT arriving while the job
    removes its record, after the command was interrupted or after it ended, must not raise (a
    traceback after the job's one line, or a finished job reported as interrupted); afterwards the
    handlers found are back, or stay ignored for ``python -m descbench``."""
    sent = []

    def send():
        sent.append(signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    class Record:
        def unlink(self, missing_ok=False):
            send()  # the late copy, during the clean-up

    monkeypatch.setattr(cli.jobrecord, "register_job", lambda: Record())
    monkeypatch.setattr(cli, "run", lambda a: send() if interrupted else None)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["warmup", "--out", "x"], restore_signals=restore)
        assert code == (128 + signal.SIGINT if interrupted else 0)
        assert len(sent) == 1 + interrupted
        after = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        assert after == (before if restore else (signal.SIG_IGN, signal.SIG_IGN))
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
