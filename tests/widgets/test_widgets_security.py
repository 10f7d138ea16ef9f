"""The widgets' data over a secured listener: the same numbers through SASL_SSL as through PLAINTEXT,
with the caller's credentials."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from widgets_helpers import commit, create_topic, produce

sys.path.insert(0, str(Path(__file__).parents[1] / "sdk"))
import pylog.widgets as pw
from sdk_helpers import Broker, secured_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, dict[str, str]]]:
    broker, settings = secured_broker(tmp_path_factory.mktemp("widgets-secured"))
    yield broker, settings
    broker.stop()


def test_lag_partitions_and_records_over_sasl_ssl(secured: tuple[Broker, dict[str, str]]) -> None:
    broker, settings = secured
    security = {k: v for k, v in settings.items() if k != "bootstrap"}
    create_topic(broker.bootstrap, "sec-widgets", 2)
    produce(broker.bootstrap, "sec-widgets", [5, 3])
    commit(broker.bootstrap, "sec-billing", {("sec-widgets", 0): 2, ("sec-widgets", 1): 3})
    plain = pw.lag("sec-billing", bootstrap_servers=broker.bootstrap)
    secure = pw.lag("sec-billing", bootstrap_servers=settings["bootstrap"], security=security)
    assert secure["lag"].tolist() == plain["lag"].tolist() == [3, 0]
    parts = pw.partitions("sec-widgets", bootstrap_servers=settings["bootstrap"], security=security)
    assert parts["log_end_offset"].tolist() == [5, 3]
    records = pw.latest_records("sec-widgets", 4, bootstrap_servers=settings["bootstrap"], security=security)
    assert len(records) == 4
    with pytest.raises(ConnectionError, match="refused the SASL credentials"):
        pw.lag(
            "sec-billing",
            bootstrap_servers=settings["bootstrap"],
            security={**security, "sasl.password": "x"},
        )
