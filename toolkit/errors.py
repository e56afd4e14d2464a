"""Errors a user can fix: the CLI prints their message, not a traceback."""

from serving.errors import SentiError


class DataError(SentiError):
    """Bad input data: the message starts with `file:line:` where a line is known."""


__all__ = ["DataError", "SentiError"]
