"""Error types. Every error names the offending file or config key and the fix."""


class DescbenchError(Exception):
    """Base class for all errors raised on bad input or bad configuration."""


class ConfigError(DescbenchError):
    """The configuration is invalid (unknown key, wrong type, inconsistent options)."""


class DataError(DescbenchError):
    """An input file is missing, unreadable, truncated or malformed."""


class DownloadError(DescbenchError):
    """A dataset archive could not be downloaded or verified."""
