"""One scored run shared by the task modules' tests (tests/jobcli.py: two demo scenes, SIFT)."""

from __future__ import annotations

import pytest

from jobcli import scored


@pytest.fixture(scope="package")
def run(tmp_path_factory):
    return scored(tmp_path_factory.mktemp("tasks"))
