"""What an export must look like (`senti.core.artifacts.ExportSpec`, declared once beside export.json's schema
that records it): the one spec senti exports with."""

from __future__ import annotations

from senti.core.artifacts import ExportSpec

ERNIE_SEQUENCE_CLASSIFICATION = ExportSpec()
