"""Which version of each Kafka API pylog's clients speak: the highest that pylog's codec, the
broker (its ApiVersions answer) and the caller's own floor and ceiling all allow.

``WANTED`` is the one table of those floors and ceilings for every API a pylog client sends.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.protocol import api
from pylog.protocol.api import ApiKey

# (lowest pylog can use, highest it asks for). Fetch 4 brings read_committed and aborted
# transactions, ListOffsets 2 the isolation level, Produce 3 RecordBatch v2; Fetch stays <= 12 and
# OffsetFetch <= 9 (later versions name topics by id).
WANTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 0),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ELECT_LEADERS: (1, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.UNREGISTER_BROKER: (0, 0),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
}


_CODEC = api.supported_versions()


def choose(api_key: int, broker: Mapping[int, tuple[int, int]],
           wanted: tuple[int, int] | None = None) -> int | None:
    """The version to send, or None when the codec, the broker and ``wanted`` (default: ``WANTED``)
    have no version in common."""
    lo, hi = wanted or WANTED.get(api_key, (0, 1 << 15))
    if api_key not in broker:
        return None
    b_lo, b_hi = broker[api_key]
    c_lo, c_hi = _CODEC.get(api_key, (0, -1))
    version = min(hi, b_hi, c_hi)
    return version if version >= max(lo, b_lo, c_lo) else None
