"""descbench.jobs.warmup: the ``warmup`` command runs the kernel warm-up into its ``--out`` file."""

from __future__ import annotations

import descbench.jobs.warmup as warmup
from descbench import cli


def test_the_command_writes_its_flag_through_warmup(tmp_path, monkeypatch):
    seen = []
    real = warmup.warmup
    # the kernels are compiled by the workflow's numba_warmup job and the e2e tests; here, only
    # that the command reaches the function with its file (the stand-in writes it as warmup does)
    monkeypatch.setattr(warmup, "warmup", lambda out: seen.append(out) or out.write_text("numba kernels compiled\n"))
    assert cli.main(["warmup", "--out", str(tmp_path / "flag")]) == 0
    assert seen == [tmp_path / "flag"] and (tmp_path / "flag").read_text() == "numba kernels compiled\n"
    assert real.__module__ == "descbench.jobs.warmup"
