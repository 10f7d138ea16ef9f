"""One module per Kafka API; importing this package registers them all."""

from pylog.broker.handlers import (  # noqa: F401
    api_versions,
    configs,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
