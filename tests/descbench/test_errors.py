"""descbench.errors: one base class for every error on bad input or configuration."""

from __future__ import annotations

import pytest

from descbench.errors import ConfigError, DataError, DescbenchError, DownloadError


@pytest.mark.bad_input
@pytest.mark.parametrize("cls", [ConfigError, DataError, DownloadError])
def test_every_error_is_a_descbench_error_and_keeps_its_message(cls):
    assert issubclass(cls, DescbenchError) and issubclass(DescbenchError, Exception)
    with pytest.raises(DescbenchError, match=r"^x\.yaml: bad$"):
        raise cls("x.yaml: bad")


def test_the_kinds_are_distinct():
    kinds = [ConfigError, DataError, DownloadError]
    for a in kinds:
        for b in kinds:
            assert issubclass(a, b) is (a is b)
