"""format("pylog") with Spark's Kafka security options (the ``kafka.`` prefix): a batch read and a
write over SASL_SSL with SCRAM, and a clear error for a setting that cannot work."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sdk_helpers import Broker, create_topic, secured_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, dict[str, str]]]:
    broker, settings = secured_broker(tmp_path_factory.mktemp("spark-secured"))
    yield broker, settings
    broker.stop()


def test_read_and_write_over_sasl_ssl(spark, secured: tuple[Broker, dict[str, str]]) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaProducer

    broker, settings = secured
    create_topic(broker.bootstrap, "sec-spark-in", 2)
    create_topic(broker.bootstrap, "sec-spark-out", 1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(100):
        p.send("sec-spark-in", key=f"k{i}".encode(), value=f"v{i}".encode())
    p.flush()
    p.close()
    options = {
        "kafka.bootstrap.servers": settings["bootstrap"],
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": settings["ssl.ca.location"],
    }
    df = spark.read.format("pylog").options(**options).option("subscribe", "sec-spark-in").load()
    assert df.count() == 100
    (
        df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .write.format("pylog")
        .options(**options)
        .option("topic", "sec-spark-out")
        .mode("append")
        .save()
    )
    out = spark.read.format("pylog").options(**options).option("subscribe", "sec-spark-out").load()
    assert sorted(r.value for r in out.collect()) == sorted(f"V{i}".encode() for i in range(100))
    with pytest.raises(Exception, match=r"security\.protocol must be one of"):
        (
            spark.read.format("pylog")
            .options(**{**options, "kafka.security.protocol": "TLS"})
            .option("subscribe", "sec-spark-in")
            .load()
            .count()
        )
