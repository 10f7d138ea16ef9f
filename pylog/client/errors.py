"""What a Kafka client call can fail with: the transport's errors (no answer) and Kafka's error
codes (an answer that says no)."""

from __future__ import annotations

from pylog.protocol.errors import ErrorCode


class TransportError(ConnectionError):
    """A request got no answer: no connection, a broken one, or a timeout. Whether to retry
    is the caller's choice (the request may or may not have reached the broker)."""


class ConnectFailed(TransportError):
    """The connection could not be opened (refused, unreachable, TLS or SASL refused)."""


class ConnectionBroken(TransportError):
    """The connection closed or its byte stream broke while requests were in flight."""


class RequestTimedOut(TransportError, TimeoutError):
    """No answer within the request timeout; the connection is dropped, since every response
    after the missing one would be late too."""


class KafkaError(Exception):
    """A Kafka error code answered by a broker, with where it happened."""

    def __init__(self, code: int, where: str, message: str | None = None) -> None:
        self.code = ErrorCode.of(code)
        detail = f": {message}" if message else ""
        super().__init__(f"{where}: {self.code.name} ({int(code)}){detail}")


class UnknownTopicError(LookupError):
    """The topic does not exist (in the data directory or on the cluster)."""
