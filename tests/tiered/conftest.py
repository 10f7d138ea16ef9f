"""Stores the remote tier's tests run against: a local directory, and a real S3-compatible HTTP
server (moto's server mode, one per test module)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.storage.remote_store import RemoteStore, open_remote_store

from pylog.testing_s3 import S3TestServer


@pytest.fixture(scope="module")
def s3() -> Iterator[S3TestServer]:
    with S3TestServer() as server:
        yield server


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteStore:
    if request.param == "file":
        return open_remote_store(f"file://{tmp_path}/tier")
    server: S3TestServer = request.getfixturevalue("s3")
    return open_remote_store(server.uri(f"t-{uuid.uuid4().hex[:8]}"), server.options)
