"""A node's metrics and health over HTTP (``pylog.metrics.listeners``).

The data path only counts, in plain ints kept by the objects that do the work
(`counters.RequestStats` in each listener, `counters.TopicStats` in the replica
manager); `collector.BrokerCollector` turns those counters and the node's state into
Prometheus families when a scraper asks, on the HTTP server's own threads
(`http.MetricsServer`), so a slow or broken scraper never holds up the event loop.
Family names are those Kafka's JMX exporter rules produce (``kafka_server_...``),
pylog's own carry ``pylog_``.
"""
