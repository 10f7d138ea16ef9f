"""Client metrics (KIP-714): the subscriptions clients are matched against (``subscriptions``),
the broker's record of every client instance and the rules of GetTelemetrySubscriptions and
PushTelemetry (``manager``), and the decoding of what clients push, OpenTelemetry MetricsData, into
rows (``otlp``). The first two are sans-IO: time and new ids are passed in."""
