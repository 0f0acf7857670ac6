"""The one error type the entry point turns into exit code 78 (standard library only)."""


class ConfigError(Exception):
    """A problem that no retry can fix: bad flag, unknown model/column, no token,
    a chat template this trainer cannot mask, a missing optional kernel package."""
