"""The one exception type for mistakes a user can fix: the CLI prints its message, not a traceback."""


class SentiError(Exception):
    """A user-facing error; its message names what was wrong and where."""


class DataError(SentiError):
    """Bad input data: the message starts with `file:line:` where a line is known."""
