"""Errors as Confluent's REST API reports them: an HTTP status and an ``error_code`` number.

Clients (confluent-kafka's ``SchemaRegistryClient`` among them) branch on ``error_code``, so the
numbers are Confluent's own.
"""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARDING_ERROR = 50003


class RegistryError(Exception):
    """A request the registry refuses; ``status`` is the HTTP status, ``error_code`` Confluent's."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def not_found(code: int, message: str) -> RegistryError:
    return RegistryError(404, code, message)


def unprocessable(code: int, message: str) -> RegistryError:
    return RegistryError(422, code, message)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, message)


class SchemaParseError(ValueError):
    """A schema text that its format's parser refuses."""
