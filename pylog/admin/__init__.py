"""``pylog cluster`` / ``topic`` / ``group``: look at and manage any Kafka-compatible cluster, the way
``rpk`` and Kafka's ``kafka-topics.sh`` / ``kafka-consumer-groups.sh`` do.

One module per command group (`cluster`, `topic`, `group`); each adds its subcommands to the parser
`pylog.cli` builds and runs them with pylog's own Kafka client (`pylog.client`, `pylog.sdk.admin`);
`common` holds what they share: the connection options, human tables or ``--format json``, and the errors
(an unreachable cluster, an unknown topic or group) turned into one plain line and exit code 1.
"""
