"""The remote tier's object store: a few whole-object operations over ``pyarrow.fs``.

Objects are immutable and written whole, so the interface is put / get / open / list / delete and
nothing else. A local directory (``file:///path``) is the embedded default for tests and laptops;
``s3://bucket/prefix`` reaches any S3-compatible store, configured by the usual AWS names
(``AWS_ENDPOINT_URL``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``) or by explicit options of the same meaning.
"""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from .errors import StorageError

# Option names accepted by open_remote_store, with the environment variable each falls back to.
S3_OPTIONS: Mapping[str, str] = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
}
DEFAULT_REQUEST_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# attempts per request (throttling and 5xx answers are retried with backoff by the AWS SDK)
DEFAULT_MAX_ATTEMPTS = 5


class RemoteStorageError(StorageError):
    """The object store refused, timed out or could not be reached."""


class RemoteObjectNotFound(RemoteStorageError):
    """The object does not exist (deleted by retention, or never written)."""


@dataclass(frozen=True, slots=True)
class RemoteObject:
    key: str
    size: int


class RemoteStore:
    """Whole objects under one root of a ``pyarrow.fs`` filesystem; keys are '/'-separated."""

    def __init__(self, fs: pafs.FileSystem, root: str, uri: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.uri = uri
        self._local = isinstance(fs, pafs.LocalFileSystem)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if self.root else key

    def put_bytes(self, key: str, data: bytes | pa.Buffer) -> None:
        self._put(key, lambda out: out.write(data))

    def put_file(self, key: str, local_path: str | os.PathLike[str]) -> None:
        def copy(out: pa.NativeFile) -> None:
            with open(local_path, "rb") as src:
                while chunk := src.read(8 << 20):
                    out.write(chunk)
        self._put(key, copy)

    def _put(self, key: str, write: Callable[[pa.NativeFile], object]) -> None:
        target = self.path(key)
        try:
            if self._local:
                # A local put is a write to a temporary name then a rename: readers never see half.
                parent = target.rsplit("/", 1)[0]
                self.fs.create_dir(parent, recursive=True)
                tmp = f"{target}.{uuid.uuid4().hex}.tmp"
                with self.fs.open_output_stream(tmp) as out:
                    write(out)
                self.fs.move(tmp, target)
            else:
                with self.fs.open_output_stream(target) as out:
                    write(out)
        except OSError as exc:
            raise RemoteStorageError(f"cannot write {self.uri}/{key}: {exc}") from exc

    def read_bytes(self, key: str) -> bytes:
        with self.open(key) as f:
            return f.read()

    def open(self, key: str) -> pa.NativeFile:
        """A random-access file over the object (ranged GETs on S3)."""
        try:
            return self.fs.open_input_file(self.path(key))
        except FileNotFoundError as exc:
            raise RemoteObjectNotFound(f"{self.uri}/{key} does not exist") from exc
        except OSError as exc:
            if _not_found(exc):
                raise RemoteObjectNotFound(f"{self.uri}/{key} does not exist") from exc
            raise RemoteStorageError(f"cannot read {self.uri}/{key}: {exc}") from exc

    def open_stream(self, key: str, buffer_size: int = 16 << 20) -> pa.NativeFile:
        """A sequential reader over the object, fetched ``buffer_size`` bytes at a time."""
        try:
            return self.fs.open_input_stream(self.path(key), compression=None, buffer_size=buffer_size)
        except FileNotFoundError as exc:
            raise RemoteObjectNotFound(f"{self.uri}/{key} does not exist") from exc
        except OSError as exc:
            if _not_found(exc):
                raise RemoteObjectNotFound(f"{self.uri}/{key} does not exist") from exc
            raise RemoteStorageError(f"cannot read {self.uri}/{key}: {exc}") from exc

    def size(self, key: str) -> int:
        info = self._info(key)
        if info.type == pafs.FileType.NotFound:
            raise RemoteObjectNotFound(f"{self.uri}/{key} does not exist")
        return int(info.size or 0)

    def exists(self, key: str) -> bool:
        return self._info(key).type == pafs.FileType.File

    def _info(self, key: str) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(self.path(key))
        except OSError as exc:
            raise RemoteStorageError(f"cannot stat {self.uri}/{key}: {exc}") from exc

    def list(self, prefix: str) -> list[RemoteObject]:
        """Every object under the folder ``prefix`` (recursive), sorted by key."""
        base = self.path(prefix.rstrip("/"))
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=True))
        except OSError as exc:
            raise RemoteStorageError(f"cannot list {self.uri}/{prefix}: {exc}") from exc
        cut = len(self.root) + 1 if self.root else 0
        out = [RemoteObject(i.path[cut:], int(i.size or 0)) for i in infos
               if i.type == pafs.FileType.File and not i.path.endswith(".tmp")]
        return sorted(out, key=lambda o: o.key)

    def children(self, prefix: str) -> builtins.list[str]:  # the class scope's `list` is the method
        """Names directly under the folder ``prefix`` (one level, files and folders)."""
        base = self.path(prefix.rstrip("/")) if prefix else self.root
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=False))
        except OSError as exc:
            raise RemoteStorageError(f"cannot list {self.uri}/{prefix}: {exc}") from exc
        return sorted(i.base_name for i in infos if not i.base_name.endswith(".tmp"))

    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects; one already gone is not an error (deletes are retried after crashes)."""
        for key in keys:
            try:
                self.fs.delete_file(self.path(key))
            except FileNotFoundError:
                pass
            except OSError as exc:
                if _not_found(exc):
                    continue
                raise RemoteStorageError(f"cannot delete {self.uri}/{key}: {exc}") from exc

    def __repr__(self) -> str:
        return f"RemoteStore({self.uri!r})"


def _not_found(exc: OSError) -> bool:
    """pyarrow's S3 filesystem reports a missing key as a plain OSError naming it."""
    return "NoSuchKey" in str(exc) or "not found" in str(exc).lower()


def open_remote_store(uri: str, options: Mapping[str, str] | None = None) -> RemoteStore:
    """Open ``file:///dir`` or ``s3://bucket/prefix``; a bad URI is a ValueError with a plain message.

    S3 options (each falls back to its AWS environment variable): endpoint_url, region,
    access_key_id, secret_access_key, session_token; request_timeout_s, connect_timeout_s, max_attempts.
    """
    options = dict(options or {})
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"remote storage URI {uri!r}: a file URI has no host (file:///path)")
        root = Path(parts.path if parts.scheme else uri)
        if not root.is_absolute():
            raise ValueError(f"remote storage URI {uri!r}: the directory must be an absolute path")
        root.mkdir(parents=True, exist_ok=True)
        return RemoteStore(pafs.LocalFileSystem(), str(root), uri)
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"remote storage URI {uri!r}: no bucket (s3://bucket/prefix)")
        return RemoteStore(_s3(options), f"{parts.netloc}{parts.path}".rstrip("/"), uri.rstrip("/"))
    raise ValueError(f"remote storage URI {uri!r}: the scheme must be file:// or s3://")


def _s3(options: Mapping[str, str]) -> pafs.S3FileSystem:
    unknown = set(options) - set(S3_OPTIONS) - {"request_timeout_s", "connect_timeout_s", "max_attempts"}
    if unknown:
        raise ValueError(f"unknown S3 option(s) {sorted(unknown)}; known: {sorted(S3_OPTIONS)}")

    def opt(name: str) -> str | None:
        value = options.get(name) or os.environ.get(S3_OPTIONS[name])
        if name == "region" and not value:
            value = os.environ.get("AWS_DEFAULT_REGION")
        return value or None

    kwargs: dict[str, object] = {
        "request_timeout": float(options.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)),
        "connect_timeout": float(options.get("connect_timeout_s", DEFAULT_CONNECT_TIMEOUT_S)),
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(
            max_attempts=int(options.get("max_attempts", DEFAULT_MAX_ATTEMPTS))),
    }
    endpoint = opt("endpoint_url")
    if endpoint:
        ep = urlsplit(endpoint)
        if ep.scheme not in ("http", "https") or not ep.netloc:
            raise ValueError(f"S3 endpoint {endpoint!r}: expected http(s)://host[:port]")
        kwargs["endpoint_override"] = ep.netloc
        kwargs["scheme"] = ep.scheme
        kwargs["force_virtual_addressing"] = False
    if region := opt("region"):
        kwargs["region"] = region
    key, secret = opt("access_key_id"), opt("secret_access_key")
    if key and secret:
        kwargs["access_key"] = key
        kwargs["secret_key"] = secret
        if token := opt("session_token"):
            kwargs["session_token"] = token
    return pafs.S3FileSystem(**kwargs)
