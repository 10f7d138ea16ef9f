"""The BROKER_LOGGER config resource (Kafka's RuntimeLoggerManager): read and change the log levels
of this running node's Python loggers under log4j's level names.

Python's levels map to log4j's: CRITICAL is FATAL, WARNING is WARN, and TRACE is level 5 (below
DEBUG). A logger is described with its effective level (its own, else its nearest ancestor's, as
Kafka resolves it). A change applies to this node only, at once, and is not written to the
metadata log (a restart forgets it), as in Kafka. Every operation of a resource is validated
before any is applied.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pylog.protocol.errors import ErrorCode

ROOT_LOGGER = "root"
TRACE = 5
_LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
           "DEBUG": logging.DEBUG, "TRACE": TRACE}  # fmt: skip
VALID_LEVELS = ", ".join(sorted(_LEVELS))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class LoggerConfigError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def level_name(level: int) -> str:
    """The log4j name of a Python level (a level between two names takes the more verbose one)."""
    for name, value in sorted(_LEVELS.items(), key=lambda kv: -kv[1]):
        if level >= value:
            return name
    return "TRACE"


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    existing = logging.Logger.manager.loggerDict.get(name)
    return existing if isinstance(existing, logging.Logger) else None


def describe() -> dict[str, str]:
    """Every existing logger and its effective level, the root logger first."""
    out = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.Logger.manager.loggerDict):
        lg = _logger(name)
        if lg is not None:
            out[name] = level_name(lg.getEffectiveLevel())
    return out


def check_node(resource_name: str, node_id: int) -> None:
    if not resource_name:
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(resource_name)
    except ValueError:
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}"
        ) from None
    if requested != node_id:
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id}, but received {resource_name}",
        )


def alter(resource_name: str, ops: Sequence[Any], node_id: int, *, validate_only: bool) -> None:
    """IncrementalAlterConfigs on this node's BROKER_LOGGER resource (``ops``: name,
    config_operation, value); raises LoggerConfigError with Kafka's code and message."""
    check_node(resource_name, node_id)
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [op.name for op in ops if op.config_operation != DELETE and op.value is None]
    if nulls:
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )
    for op in ops:
        _validate(op)
    if validate_only:
        return
    log = logging.getLogger(__name__)
    for op in ops:
        lg = _logger(op.name)
        assert lg is not None
        if op.config_operation == SET:
            lg.setLevel(_LEVELS[op.value])
            log.warning("Updated the log level of %s to %s", op.name, op.value)
        else:
            lg.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", op.name)


def _validate(op: Any) -> None:
    kind = op.config_operation
    if kind in (APPEND, SUBTRACT):
        what = "APPEND" if kind == APPEND else "SUBTRACT"
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST, f"{what} operation is not allowed for the BROKER_LOGGER resource"
        )
    if kind not in (SET, DELETE):
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Unknown operation type {kind} is not allowed for the BROKER_LOGGER resource",
        )
    if _logger(op.name) is None:
        raise LoggerConfigError(ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!")
    if kind == SET and op.value not in _LEVELS:
        raise LoggerConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Cannot set the log level of {op.name} to {op.value} as it is not a supported log level. "
            f"Valid log levels are {VALID_LEVELS}",
        )
    if kind == DELETE and op.name == ROOT_LOGGER:
        raise LoggerConfigError(
            ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT_LOGGER} logger is not allowed"
        )
