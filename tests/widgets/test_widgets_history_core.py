"""The metric history's pure core on synthetic scrapes: exposition text reduced to samples, rates
from counter deltas (resets, new topics, nodes down), percentiles from histogram buckets, lag and
partitions at risk over time, the window's bound; and an unreachable node as a sample, not an error."""

from __future__ import annotations

import socket

import pytest
from pylog.widgets.history import (
    MetricsHistory,
    NodeSample,
    Scrape,
    group_lag,
    histogram_quantile,
    latency,
    partition_health,
    reduce_scrape,
    throughput,
)


def exposition(node: int, msgs: dict[str, float], produce_buckets: dict[str, float], lag: dict[str, float],
               urp: float = 0, offline: float = 0) -> str:
    lines = [
        "# HELP pylog_node_info This node.", "# TYPE pylog_node_info gauge",
        f'pylog_node_info{{node_id="{node}",cluster_id="c"}} 1.0',
        "# HELP kafka_server_brokertopicmetrics_messagesin Records appended.",
        "# TYPE kafka_server_brokertopicmetrics_messagesin counter",
    ]
    lines += [f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{t}"}} {v}' for t, v in msgs.items()]
    lines += [f"kafka_server_brokertopicmetrics_messagesin_total {sum(msgs.values())}"]
    lines += ["# HELP kafka_network_requestmetrics_totaltimems Time.",
              "# TYPE kafka_network_requestmetrics_totaltimems histogram"]
    lines += [f'kafka_network_requestmetrics_totaltimems_bucket{{request="Produce",le="{le}"}} {v}'
              for le, v in produce_buckets.items()]
    count = produce_buckets["+Inf"]
    lines += [f'kafka_network_requestmetrics_totaltimems_count{{request="Produce"}} {count}',
              'kafka_network_requestmetrics_totaltimems_sum{request="Produce"} 1.0']
    lines += ["# HELP kafka_consumergroup_lag_sum Lag.", "# TYPE kafka_consumergroup_lag_sum gauge"]
    lines += [f'kafka_consumergroup_lag_sum{{group="{g}"}} {v}' for g, v in lag.items()]
    lines += ["# HELP kafka_server_replicamanager_underreplicatedpartitions URP.",
              "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge",
              f"kafka_server_replicamanager_underreplicatedpartitions {urp}",
              "# HELP kafka_controller_kafkacontroller_offlinepartitionscount Offline.",
              "# TYPE kafka_controller_kafkacontroller_offlinepartitionscount gauge",
              f"kafka_controller_kafkacontroller_offlinepartitionscount {offline}"]
    # a per-partition family the history never reads
    lines += ["# HELP kafka_log_log_size Bytes.", "# TYPE kafka_log_log_size gauge"]
    lines += [f'kafka_log_log_size{{topic="a",partition="{p}"}} 10.0' for p in range(50)]
    return "\n".join(lines) + "\n"


def buckets(b1: float, b10: float, inf: float) -> dict[str, float]:
    return {"1.0": b1, "10.0": b10, "+Inf": inf}


def round_at(at: float, *samples: NodeSample) -> Scrape:
    return Scrape(at, {s.url: s for s in samples})


def test_reduce_keeps_the_plotted_families_only() -> None:
    s = reduce_scrape("http://n1", 5.0, exposition(1, {"a": 10, "b": 4}, buckets(1, 2, 3), {"g": 7}, urp=2))
    assert s.up and s.node_id == "1" and s.at == 5.0
    assert s.counters == {("messages_in", "a"): 10, ("messages_in", "b"): 4, ("messages_in", ""): 14}
    assert s.buckets == {"Produce": {1.0: 1, 10.0: 2, float("inf"): 3}}
    assert s.lag == {"g": 7}
    assert s.health == {"under_replicated": 2, "offline": 0}


def test_reduce_of_garbage_is_an_error_sample() -> None:
    s = reduce_scrape("http://n1", 1.0, 'kafka_consumergroup_lag_sum{group="g" 12\n')
    assert not s.up and s.error is not None and "unreadable" in s.error


def test_rates_sum_nodes_and_survive_resets_new_topics_and_a_node_down() -> None:
    def n(url: str, at: float, msgs: dict[str, float]) -> NodeSample:
        return reduce_scrape(url, at, exposition(1, msgs, buckets(0, 0, 0), {}))

    scrapes = [
        round_at(0.0, n("n1", 0.0, {"a": 100}), n("n2", 0.0, {"a": 50})),
        round_at(2.0, n("n1", 2.0, {"a": 120}), n("n2", 2.0, {"a": 60, "b": 8})),  # b appears: from zero
        # n1 restarted, n2 down
        round_at(4.0, n("n1", 4.0, {"a": 6}), NodeSample("n2", 4.0, error="unreachable: refused")),
        round_at(6.0, n("n1", 6.0, {"a": 16}), n("n2", 6.0, {"a": 70, "b": 8})),  # n2 back: no rate this step
    ]
    series = throughput(scrapes)
    ts, a = series[("messages_in", "a")]
    assert ts == [2.0, 4.0, 6.0]
    assert a == [(20 + 10) / 2, 6 / 2, 10 / 2]
    assert series[("messages_in", "b")][1] == [8 / 2, 0.0, 0.0]
    # sum of rate * dt gives back what was appended while both nodes were seen
    assert sum(r * 2 for r in series[("messages_in", "")][1] if r is not None) == 30 + 8 + 6 + 10
    all_down = [scrapes[0], round_at(2.0, NodeSample("n1", 2.0, error="x"), NodeSample("n2", 2.0, error="x"))]
    assert throughput(all_down)[("messages_in", "a")][1] == [None]


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    b = {1.0: 50.0, 10.0: 90.0, 100.0: 100.0, float("inf"): 100.0}
    assert histogram_quantile(0.5, b) == 1.0
    assert histogram_quantile(0.7, b) == pytest.approx(1.0 + 9.0 * (70 - 50) / 40)
    assert histogram_quantile(0.99, b) == pytest.approx(10.0 + 90.0 * (99 - 90) / 10)
    assert histogram_quantile(0.25, b) == pytest.approx(0.5)
    assert histogram_quantile(0.99, {1.0: 0.0, float("inf"): 10.0}) == 1.0  # in +Inf: the last bound
    assert histogram_quantile(0.5, {1.0: 0.0, float("inf"): 0.0}) is None


def test_latency_is_over_the_interval_merged_over_nodes() -> None:
    def n(url: str, at: float, b: dict[str, float]) -> NodeSample:
        return reduce_scrape(url, at, exposition(1, {}, b, {}))

    scrapes = [
        round_at(0.0, n("n1", 0.0, buckets(1000, 1000, 1000)), n("n2", 0.0, buckets(0, 0, 0))),
        # since: n1 answered 10 in <= 1 ms, n2 10 in (1, 10] ms: the median is 1 ms, p99 near 10 ms
        round_at(1.0, n("n1", 1.0, buckets(1010, 1010, 1010)), n("n2", 1.0, buckets(0, 10, 10))),
        round_at(2.0, n("n1", 2.0, buckets(1010, 1010, 1010)), n("n2", 2.0, buckets(0, 10, 10))),  # none
    ]
    lat = latency(scrapes, requests=("Produce", "Fetch"), quantiles=(0.5, 0.99))
    assert set(lat) == {("Produce", 0.5), ("Produce", 0.99)}  # Fetch never answered: no line
    assert lat[("Produce", 0.5)][1] == [1.0, None]
    assert lat[("Produce", 0.99)][1][0] == pytest.approx(1.0 + 9.0 * (19.8 - 10) / 10)


def test_lag_and_partition_health_over_time() -> None:
    def n(url: str, at: float, lag: dict[str, float], urp: float, offline: float) -> NodeSample:
        return reduce_scrape(url, at, exposition(1, {}, buckets(0, 0, 0), lag, urp=urp, offline=offline))

    scrapes = [
        round_at(0.0, n("n1", 0.0, {"g": 5}, 0, 0), n("n2", 0.0, {"h": 1}, 0, 0)),
        round_at(1.0, n("n1", 1.0, {"g": 9}, 2, 1), n("n2", 1.0, {"h": 1}, 1, 1)),
        round_at(2.0, NodeSample("n1", 2.0, error="down"), NodeSample("n2", 2.0, error="down")),
    ]
    assert group_lag(scrapes) == {"g": ([0.0, 1.0, 2.0], [5, 9, None]), "h": ([0.0, 1.0, 2.0], [1, 1, None])}
    health = partition_health(scrapes)
    assert health["under_replicated"][1] == [0, 3, None]
    assert health["offline"][1] == [0, 1, None]  # every controller counts the same partitions: max
    assert health["under_min_isr"][1] == [0, 0, None]


def test_the_buffer_keeps_the_window() -> None:
    history = MetricsHistory("http://127.0.0.1:1", interval_s=1.0, window_s=10.0)
    try:
        for t in range(100):
            history.add(round_at(float(t), NodeSample("http://127.0.0.1:1", float(t), error="x")))
        kept = [s.at for s in history.scrapes()]
        assert kept[-1] == 99.0 and kept[0] >= 99.0 - 11.0 and len(kept) <= 12
    finally:
        history.close()
    with pytest.raises(ValueError, match="metrics_urls"):
        MetricsHistory([])
    with pytest.raises(ValueError, match="metrics_urls"):
        MetricsHistory([None, " "])  # type: ignore[list-item]  # a LocalBroker with metrics turned off
    bare = MetricsHistory("127.0.0.1:9101, https://b:9102")
    try:
        assert bare.urls == ["http://127.0.0.1:9101", "https://b:9102"]
    finally:
        bare.close()


def test_an_unreachable_node_is_a_sample_saying_so() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    history = MetricsHistory(f"http://127.0.0.1:{port}", interval_s=0.5, timeout_s=1.0)
    try:
        scrape = history.scrape()
        node = scrape.nodes[f"http://127.0.0.1:{port}"]
        assert not node.up and node.error is not None and node.error.startswith("unreachable")
        assert history.series()["nodes"] == [{"url": f"http://127.0.0.1:{port}", "node_id": None, "up": False,
                                              "error": node.error}]
    finally:
        history.close()


def test_the_charts_keep_the_busiest_topics_and_most_lagging_groups() -> None:
    from pylog.widgets.history_view import traces

    ts = [1.0, 2.0]
    series = {
        "throughput": {**{("messages_in", f"t{i}"): (ts, [float(i), None]) for i in range(15)},
                       ("messages_in", ""): (ts, [105.0, None]),
                       ("messages_in", "__consumer_offsets"): (ts, [9.0, 9.0])},
        "latency": {("Produce", 0.99): (ts, [None, 3.0])},
        "lag": {f"g{i}": (ts, [0.0, float(i)]) for i in range(12)},
        "health": {"under_replicated": (ts, [0.0, 1.0])},
    }
    lines = traces(series, max_lines=10)
    assert [n for p, n, _, _ in lines if p == "messages"] == sorted(f"t{i}" for i in range(5, 15))
    assert [n for p, n, _, _ in lines if p == "lag"] == sorted(f"g{i}" for i in range(2, 12))
    assert [n for p, n, _, _ in lines if p in ("latency", "health")] == ["Produce p99", "under-replicated"]
