"""Client quotas, as Kafka enforces them: the entities and keys quotas are set on (``entity``), the
windowed rate a quota is measured with (``rate``) and the resolution of which quota applies to a
connection's user and client id (``client``). All sans-IO: time is passed in."""
