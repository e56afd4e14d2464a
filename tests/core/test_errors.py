"""senti.core.errors: every error a user can fix is a SentiError, which the CLI prints as one line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from senti.core.errors import ArtifactError, DataError, SentiError


def test_the_kinds_of_user_error_are_senti_errors():
    assert issubclass(ArtifactError, SentiError) and issubclass(DataError, SentiError)
    with pytest.raises(SentiError, match="x.tsv:3: bad row"):
        raise DataError("x.tsv:3: bad row")


def test_the_cli_prints_a_senti_error_as_one_line_without_a_traceback(tmp_path):
    from senti.cli import app

    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path)])  # not a checkpoint nor an export
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output
