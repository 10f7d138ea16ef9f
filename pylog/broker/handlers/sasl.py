"""SaslHandshake (17) and SaslAuthenticate (36) outside an authentication.

On a SASL listener the connection's authenticator answers both while a client authenticates or
re-authenticates (``pylog.security.sasl_server``). They reach these handlers only when no
exchange is expected: on a listener without SASL, or a SaslAuthenticate after authentication
completed; Kafka answers ILLEGAL_SASL_STATE then.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error


@serves(ApiKey.SASL_HANDSHAKE, versions=(1, 1))  # v0 (raw tokens) is gone from Kafka 4 (KIP-896)
def sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


sasl_authenticate_error = top_level_error(SaslAuthenticateResponse)


@serves(ApiKey.SASL_AUTHENTICATE, versions=(0, 2), error_response=sasl_authenticate_error)
def sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
