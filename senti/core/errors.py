"""The base of every error a user can fix. It lives in `core`, the ground floor, so that every floor above
raises the same type and the CLI prints one line for all of them."""


class SentiError(Exception):
    """A user-facing error; its message names what was wrong and where."""


class ArtifactError(SentiError):
    """A folder that is not the artifact it should be (checkpoint, export)."""


class DataError(SentiError):
    """Bad input data: the message starts with `file:line:` where a line is known."""
