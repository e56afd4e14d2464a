"""Errors a user can fix: the CLI prints their message, not a traceback."""

from senti.serving.errors import DataError, SentiError


__all__ = ["DataError", "SentiError"]
