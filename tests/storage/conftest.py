"""Fixtures of the storage tests."""

from __future__ import annotations

import pytest
from storage_helpers import FORMATS


@pytest.fixture(params=FORMATS, ids=[f"format{f}" for f in FORMATS])
def fmt(request: pytest.FixtureRequest) -> int:
    """The segment format (`pylog.segment.format`) a test's log writes."""
    return int(request.param)
