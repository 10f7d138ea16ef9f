"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Describe is answered by any broker from its metadata image (DESCRIBE on the cluster): per user,
the mechanisms and iteration counts, never the keys. Alter runs on the controller (ALTER on the
cluster) and records salted credentials in the metadata log; brokers forward it.
"""

from __future__ import annotations

from collections import Counter

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.acl_control import ScramDeletion, ScramUpsertion
from pylog.cluster.quorum import MetadataQuorum
from pylog.security.acl_operations import AclOperation

describe_error = top_level_error(DescribeUserScramCredentialsResponse)


@serves(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0), error_response=describe_error)
def describe_user_scram_credentials(
    ctx: RequestContext,
    req: DescribeUserScramCredentialsRequest,
    *,
    metadata: MetadataView,
    authz: Authorization,
) -> DescribeUserScramCredentialsResponse:
    R = DescribeUserScramCredentialsResponse
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
    by_user: dict[str, list[DescribeUserScramCredentialsResponse.CredentialInfo]] = {}
    for (name, mechanism), cred in sorted(metadata.image.scram_credentials.items()):
        by_user.setdefault(name, []).append(R.CredentialInfo(mechanism=mechanism, iterations=cred.iterations))
    wanted = [u.name for u in req.users] if req.users else sorted(by_user)
    counts = Counter(wanted)
    results = []
    for name in dict.fromkeys(wanted):
        entry = R.DescribeUserScramCredentialsResult(
            user=name, error_code=0, error_message=None, credential_infos=[]
        )
        if counts[name] > 1:
            entry.error_code = ErrorCode.DUPLICATE_RESOURCE
            entry.error_message = (
                "Cannot describe SCRAM credentials for the same user twice in a single request"
            )
        elif name not in by_user:
            entry.error_code = ErrorCode.RESOURCE_NOT_FOUND
            entry.error_message = "Attempt to describe a user credential that does not exist"
        else:
            entry.credential_infos = by_user[name]
        results.append(entry)
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def alter_error(req: AlterUserScramCredentialsRequest, code: int) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([*(d.name for d in req.deletions), *(u.name for u in req.upsertions)])
    return AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                user=u, error_code=code, error_message=None
            )
            for u in users
        ]
    )


@serves(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0), error_response=alter_error)
async def alter_user_scram_credentials(
    ctx: RequestContext,
    req: AlterUserScramCredentialsRequest,
    *,
    quorum: MetadataQuorum,
    authz: Authorization,
) -> AlterUserScramCredentialsResponse:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    if not authz.cluster(ctx, AclOperation.ALTER):
        users = dict.fromkeys([*(d.name for d in deletions), *(u.name for u in upsertions)])
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                    user=u, error_code=code, error_message=None
                )
                for u in users
            ],
        )
    results = await quorum.execute(lambda c: c.alter_user_scram_credentials(deletions, upsertions))
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                user=r.user, error_code=r.error_code, error_message=r.error_message
            )
            for r in results
        ],
    )
