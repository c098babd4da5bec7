"""Running the repository's workflow the way a user does, for the end-to-end tests:
``python -m snakemake -s <repo>/Snakefile --directory <workdir> ARGS`` in a child process, its
output returned for the assertions (stdout, then stderr, as one string) and, on an unexpected
exit status, its last 4,000 characters in the failure message.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snakemake_cmd(workdir: Path, *args: str) -> list[str]:
    """The command line: this interpreter's Snakemake on the repository's Snakefile in ``workdir``."""
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]


def snakemake_rc(workdir: Path, *args: str, env: dict | None = None, timeout: float = 900) -> tuple[int, str]:
    """``(exit status, output)`` of one run, whatever its status; ``env`` is added to this process's."""
    res = subprocess.run(snakemake_cmd(workdir, *args), capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **(env or {})})
    return res.returncode, res.stdout + res.stderr


def snakemake(workdir: Path, *args: str, ok: bool = True, env: dict | None = None, timeout: float = 900) -> str:
    """The output of one run that must succeed (``ok``) or fail (``ok=False``)."""
    code, out = snakemake_rc(workdir, *args, env=env, timeout=timeout)
    assert (code == 0) == ok, out[-4000:]
    return out


def snakemake_until_exit(workdir: Path, *args: str, timeout: float = 900) -> tuple[str, float]:
    """A run that must succeed, read line by line as it is printed (stdout and stderr together):
    its output and the seconds from its last line ("Elapsed time", or the workflow's end-of-run
    summary after it) to the process's exit. Killed after ``timeout`` seconds."""
    lines, last = [], time.monotonic()
    with subprocess.Popen(snakemake_cmd(workdir, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                lines.append(line)
                last = time.monotonic()
            code = proc.wait()
        finally:
            watchdog.cancel()
    out = "".join(lines)
    assert code == 0, out[-4000:]
    return out, time.monotonic() - last


def job_counts(output: str) -> dict[str, int]:
    """Rule -> job count from the last 'Job stats' table in a run's (or dry run's) output."""
    block = output.split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.M)
            if m.group(1) != "total"}


def write_config(workdir: Path, cfg: dict) -> None:
    """``cfg`` as ``workdir/config.yaml`` (the folder made if needed), keys in their order."""
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
